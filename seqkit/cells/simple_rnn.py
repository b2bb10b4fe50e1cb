"""Elman RNN cell plugin: ``h_t = act(W x_t + U h_{t-1} + b)`` (Elman 1990).

State layout: ``h [B, H]``. Parameters ``H * (D + H) + H``. Keras has no fused
kernel for it, so there is no fast path to leave.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from seqkit.cells.base import CellPlugin
from seqkit.registry import register_cell


class SimpleRNNOptions(BaseModel):
    """Recipe keys of the ``simple_rnn`` cell (under ``model``)."""

    model_config = ConfigDict(extra="forbid")
    activation: Literal["tanh", "relu", "sigmoid", "linear"] = "tanh"
    use_bias: bool = True


@register_cell("simple_rnn")
class SimpleRNNPlugin(CellPlugin):
    """Elman recurrence; state ``(h,)``."""

    Options = SimpleRNNOptions
    state_names = ("h",)

    def _kwargs(self):
        o = self.options
        return dict(units=self.spec.units, activation=o.activation, use_bias=o.use_bias,
                    dropout=self.spec.dropout, recurrent_dropout=self.spec.recurrent_dropout)

    def make_cell(self, name=None):
        import keras

        return keras.layers.SimpleRNNCell(name=name, **self._kwargs())

    def make_layer(self, *, return_sequences=True, return_state=False, go_backwards=False, name=None):
        import keras

        return keras.layers.SimpleRNN(return_sequences=return_sequences, return_state=return_state,
                                      go_backwards=go_backwards, name=name, **self._kwargs())
