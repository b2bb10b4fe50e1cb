"""GRU cell plugin (Cho et al. 2014), ``reset_after`` variant by default as cuDNN.

State layout: ``h [B, H]``. Uses :class:`seqkit.layers.fused_gru.FusedGRU`
(``keras.layers.GRU`` with a fused CPU kernel for ``reset_after``), so a GPU
takes the cuDNN kernel and a CPU seqkit's; with ``reset_after`` parameters
``3 * (H * (D + H) + 2 * H)``.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from seqkit.cells.base import KerasCellPlugin, cudnn_reasons, low_product
from seqkit.registry import register_cell

Activation = Literal["tanh", "relu", "sigmoid", "linear", "hard_sigmoid", "softsign"]

class GRUOptions(BaseModel):
    """Recipe keys of the ``gru`` cell (under ``model``)."""

    model_config = ConfigDict(extra="forbid")
    activation: Activation = "tanh"
    recurrent_activation: Activation = "sigmoid"
    use_bias: bool = True
    reset_after: bool = True


@register_cell("gru")
class GRUPlugin(KerasCellPlugin):
    """Gated recurrent unit; state ``(h,)``."""

    Options = GRUOptions
    state_names = ("h",)
    supports_weight_drop = True  # FusedGRU's weight_drop
    cell_name, layer_name = "GRUCell", "GRU"

    def layer_kwargs(self):
        o = self.options
        return dict(units=self.spec.units, activation=o.activation,
                    recurrent_activation=o.recurrent_activation, use_bias=o.use_bias,
                    reset_after=o.reset_after, dropout=self.spec.dropout,
                    recurrent_dropout=self.spec.recurrent_dropout)

    def parameter_count(self, input_dim):
        """``3 (H (D + H) + 2H)`` with ``reset_after`` (two bias vectors), else ``3 (H (D + H) + H)``."""
        h, o = self.spec.units, self.options
        bias = (2 * h if o.reset_after else h) if o.use_bias else 0
        return 3 * (h * (input_dim + h) + bias)

    def product_step(self, cell, x_t, states, dtype):
        """A Keras ``GRUCell`` step (``reset_after``, Keras's default) with ``x W`` and ``h U`` in
        ``dtype`` (float32 accumulation, each product rounded once and widened), the rest
        float32::

            x W + b_x = [x_z | x_r | x_h];  h_{t-1} U + b_h = [u_z | u_r | u_h]
            z = sigma(x_z + u_z);  r = sigma(x_r + u_r);  n = tanh(x_h + r * u_h)
            h_t = z * h_{t-1} + (1 - z) * n

        (Cho et al. 2014, eq. 5-8, with the reset gate applied after the product as cuDNN and
        Keras do). None (the float32 cell) with ``reset_after: false``. Shapes and dtypes:
        :meth:`seqkit.cells.base.CellPlugin.product_step`."""
        if not cell.reset_after:
            return None
        from keras import ops

        h_prev = states[0]
        mx, mh = low_product(x_t, cell.kernel, dtype), low_product(h_prev, cell.recurrent_kernel, dtype)
        if cell.use_bias:
            mx, mh = mx + cell.bias[0], mh + cell.bias[1]
        x_z, x_r, x_h = ops.split(mx, 3, axis=-1)
        u_z, u_r, u_h = ops.split(mh, 3, axis=-1)
        rec = cell.recurrent_activation
        z, r = rec(x_z + u_z), rec(x_r + u_r)
        h = z * h_prev + (1.0 - z) * cell.activation(x_h + r * u_h)
        return h, [h]

    def layer_class(self):
        """:class:`seqkit.layers.fused_gru.FusedGRU`: ``keras.layers.GRU`` with a fused CPU kernel."""
        from seqkit.layers.fused_gru import FusedGRU

        return FusedGRU

    def fast_path_issues(self):
        o = self.options
        return cudnn_reasons(activation=o.activation, recurrent_activation=o.recurrent_activation,
                             recurrent_dropout=self.spec.recurrent_dropout, use_bias=o.use_bias,
                             reset_after=o.reset_after)

    def gates(self, cell, x_t, states):
        """``update`` (z) and ``reset`` (r) gates ``[B, H]`` of a Keras ``GRUCell``.

        Kernel columns in Keras's order ``[z | r | h]``; ``z = sigma(x W_z + b_z +
        h_{t-1} U_z (+ b'_z))``, likewise ``r`` (Cho et al. 2014, eq. 5-6); with
        ``reset_after`` the bias is ``[2, 3H]`` (input and recurrent rows). Keras
        mixes ``h_t = z * h_{t-1} + (1 - z) * h~``: ``update`` near 1 keeps the old state.
        """
        from keras import ops

        h = cell.units
        z = ops.matmul(x_t, cell.kernel[:, :2 * h]) + ops.matmul(states[0], cell.recurrent_kernel[:, :2 * h])
        if cell.use_bias:
            b = cell.bias
            z = z + (b[0, :2 * h] + b[1, :2 * h] if len(b.shape) == 2 else b[:2 * h])
        act = cell.recurrent_activation
        return {"update": act(z[:, :h]), "reset": act(z[:, h:2 * h])}
