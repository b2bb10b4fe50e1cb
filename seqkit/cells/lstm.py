"""LSTM cell plugin (Hochreiter & Schmidhuber 1997; forget gate of Gers et al. 2000).

State layout: ``h [B, H]``, ``c [B, H]``. Uses
:class:`seqkit.layers.fused_lstm.FusedLSTM` (``keras.layers.LSTM`` with a fused
CPU kernel: the input projection in one matmul and a hand-written BPTT), so a
GPU takes the cuDNN kernel and a CPU seqkit's; parameters ``4 * (H * (D + H) + H)`` (one bias vector
per gate).

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from seqkit.cells.base import KerasCellPlugin, cudnn_reasons, low_product
from seqkit.registry import register_cell

Activation = Literal["tanh", "relu", "sigmoid", "linear", "hard_sigmoid", "softsign"]

class LSTMOptions(BaseModel):
    """Recipe keys of the ``lstm`` cell (under ``model``)."""

    model_config = ConfigDict(extra="forbid")
    activation: Activation = "tanh"
    recurrent_activation: Activation = "sigmoid"
    use_bias: bool = True
    unit_forget_bias: bool = True


@register_cell("lstm")
class LSTMPlugin(KerasCellPlugin):
    """Long short-term memory; states ``(h, c)``."""

    Options = LSTMOptions
    state_names = ("h", "c")
    supports_weight_drop = True  # FusedLSTM's weight_drop
    cell_name, layer_name = "LSTMCell", "LSTM"

    def layer_kwargs(self):
        o = self.options
        return dict(units=self.spec.units, activation=o.activation,
                    recurrent_activation=o.recurrent_activation, use_bias=o.use_bias,
                    unit_forget_bias=o.unit_forget_bias, dropout=self.spec.dropout,
                    recurrent_dropout=self.spec.recurrent_dropout)

    def parameter_count(self, input_dim):
        """``4 (H (D + H) + H)``: four gates, each with input, recurrent and bias weights."""
        h = self.spec.units
        return 4 * (h * (input_dim + h) + (h if self.options.use_bias else 0))

    def layer_class(self):
        """:class:`seqkit.layers.fused_lstm.FusedLSTM`: ``keras.layers.LSTM`` with a fused CPU kernel."""
        from seqkit.layers.fused_lstm import FusedLSTM

        return FusedLSTM

    def fast_path_issues(self):
        o = self.options
        return cudnn_reasons(activation=o.activation, recurrent_activation=o.recurrent_activation,
                             recurrent_dropout=self.spec.recurrent_dropout, use_bias=o.use_bias)

    def product_step(self, cell, x_t, states, dtype):
        """A Keras ``LSTMCell`` step with ``x W`` and ``h U`` in ``dtype`` (float32 accumulation,
        each product rounded once to ``dtype`` and widened) and everything else float32::

            z = x W + h_{t-1} U + b;  i, f, o = sigma(z_i, z_f, z_o);  g = tanh(z_c)
            c_t = f * c_{t-1} + i * g;  h_t = o * tanh(c_t)

        (Gers, Schmidhuber & Cummins 2000, eq. 2-4; the kernel's columns in Keras's order
        ``[i | f | c | o]``; ``sigma``, ``tanh`` the cell's recurrent activation and activation).
        Shapes and dtypes: :meth:`seqkit.cells.base.CellPlugin.product_step`. Dropout inside the
        cell does not apply (the decoder calls its cells with ``training=False``)."""
        from keras import ops

        h_prev, c_prev = states[0], states[1]
        z = low_product(x_t, cell.kernel, dtype) + low_product(h_prev, cell.recurrent_kernel, dtype)
        if cell.use_bias:
            z = z + cell.bias
        z_i, z_f, z_c, z_o = ops.split(z, 4, axis=1)
        act, rec = cell.activation, cell.recurrent_activation
        c = rec(z_f) * c_prev + rec(z_i) * act(z_c)
        h = rec(z_o) * act(c)
        return h, [h, c]

    def gates(self, cell, x_t, states):
        """``input``, ``forget``, ``output`` gates ``[B, H]`` of a Keras ``LSTMCell``.

        ``z = x W + h_{t-1} U + b`` with the kernel's columns in Keras's order
        ``[i | f | c | o]``; ``i, f, o = recurrent_activation(z_i, z_f, z_o)``
        (Gers, Schmidhuber & Cummins 2000, eq. 2-4; Keras ``LSTMCell.call``).
        """
        from keras import ops

        h = cell.units
        z = ops.matmul(x_t, cell.kernel) + ops.matmul(states[0], cell.recurrent_kernel)
        if cell.use_bias:
            z = z + cell.bias
        act = cell.recurrent_activation
        return {"input": act(z[:, :h]), "forget": act(z[:, h:2 * h]), "output": act(z[:, 3 * h:])}
