"""Elman RNN cell plugin: ``h_t = act(W x_t + U h_{t-1} + b)`` (Elman 1990).

State layout: ``h [B, H]``. Parameters ``H * (D + H) + H``. Keras has no fused
kernel for it, so there is no fast path to leave.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from seqkit.cells.base import KerasCellPlugin
from seqkit.registry import register_cell

class SimpleRNNOptions(BaseModel):
    """Recipe keys of the ``simple_rnn`` cell (under ``model``)."""

    model_config = ConfigDict(extra="forbid")
    activation: Literal["tanh", "relu", "sigmoid", "linear"] = "tanh"
    use_bias: bool = True


@register_cell("simple_rnn")
class SimpleRNNPlugin(KerasCellPlugin):
    """Elman recurrence; state ``(h,)``."""

    Options = SimpleRNNOptions
    state_names = ("h",)
    cell_name, layer_name = "SimpleRNNCell", "SimpleRNN"

    def layer_kwargs(self):
        o = self.options
        return dict(units=self.spec.units, activation=o.activation, use_bias=o.use_bias,
                    dropout=self.spec.dropout, recurrent_dropout=self.spec.recurrent_dropout)

    def parameter_count(self, input_dim):
        """``H (D + H) + H``."""
        h = self.spec.units
        return h * (input_dim + h) + (h if self.options.use_bias else 0)
