"""Cell plugins: SimpleRNN, LSTM and GRU built in; more through the cell registry."""

from seqkit.cells.base import CellPlugin, CellSpec

__all__ = ["CellPlugin", "CellSpec"]
