"""seqkit cell plugin ``peephole_lstm``: LSTM with peephole connections.

Gers, Schraudolph & Schmidhuber (2002), "Learning precise timing with LSTM
recurrent networks", JMLR 3:115-143, section 2 (with the forget gate of Gers,
Schmidhuber & Cummins 2000). For input ``x_t [B, D]`` and state
``(h_{t-1}, c_{t-1})``, each ``[B, H]`` float32::

    i_t = sigma(W_i x_t + U_i h_{t-1} + p_i * c_{t-1} + b_i)     input gate sees c_{t-1}
    f_t = sigma(W_f x_t + U_f h_{t-1} + p_f * c_{t-1} + b_f)     forget gate sees c_{t-1}
    c_t = f_t * c_{t-1} + i_t * tanh(W_c x_t + U_c h_{t-1} + b_c)
    o_t = sigma(W_o x_t + U_o h_{t-1} + p_o * c_t + b_o)         output gate sees c_t
    h_t = o_t * tanh(c_t)

``*`` is the element-wise product: each peephole ``p_i, p_f, p_o`` is a
diagonal weight (a vector of ``H``), as in the paper. seqkit's state layout
is ``(h, c)``, the same as its built-in ``lstm``, so generation, streaming and
TFLite export treat both alike. Parameters: ``4 * (H * (D + H) + H) + 3 * H``.

Importing this module registers the cell (``seqkit.register_cell``) and the
Keras class (``keras.saving.register_keras_serializable``, package
``seqkit_peephole``), which is what a saved model needs to reload.
"""

from __future__ import annotations

import keras
from keras import ops
from pydantic import BaseModel, ConfigDict, Field

import seqkit
from seqkit.cells.base import CellPlugin
from seqkit.errors import RecipeError

__all__ = ["PeepholeLSTMCell", "PeepholeLSTMPlugin", "PeepholeOptions"]
__version__ = "0.1.0"


@keras.saving.register_keras_serializable(package="seqkit_peephole")
class PeepholeLSTMCell(keras.layers.Layer):
    """One step of the peephole LSTM (equations in the module docstring).

    Args:
        units: ``H``, a positive int.
        unit_forget_bias: start the forget-gate bias at 1 (Jozefowicz et al.
            2015), as Keras's LSTM does; otherwise 0.
        peephole_init_range: peephole weights start uniform in
            ``[-r, r]``; the paper starts every weight in ``[-0.1, 0.1]``.
        kernel_initializer, recurrent_initializer: Keras initializers for
            ``W`` ``[D, 4H]`` and ``U`` ``[H, 4H]`` (gate order i, f, c, o, as
            ``keras.layers.LSTMCell``).

    Call: ``(x_t [B, D] float32, [h [B, H], c [B, H]]) -> (h_t, [h_t, c_t])``.

    Initialisation (differs from the paper, on purpose): ``W`` Glorot
    uniform, ``U`` orthogonal, biases 0 with the forget bias at 1 -- the
    Keras LSTM defaults, so a comparison with the built-in ``lstm`` differs
    by the peepholes only. The paper's negative input/output-gate biases
    were for its timing tasks with one cell per block.
    """

    def __init__(self, units: int, unit_forget_bias: bool = True, peephole_init_range: float = 0.1,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", **kwargs):
        super().__init__(**kwargs)
        self.units = int(units)
        self.unit_forget_bias = bool(unit_forget_bias)
        self.peephole_init_range = float(peephole_init_range)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.state_size = [self.units, self.units]
        self.output_size = self.units

    def build(self, input_shape):
        d, h = int(input_shape[-1]), self.units
        self.kernel = self.add_weight(shape=(d, 4 * h), name="kernel", initializer=self.kernel_initializer)
        self.recurrent_kernel = self.add_weight(shape=(h, 4 * h), name="recurrent_kernel",
                                                initializer=self.recurrent_initializer)
        r = self.peephole_init_range
        self.peephole = self.add_weight(shape=(3, h), name="peephole",  # rows p_i, p_f, p_o
                                        initializer=keras.initializers.RandomUniform(-r, r))
        if self.unit_forget_bias:
            def bias_init(shape, dtype=None):
                return ops.concatenate([ops.zeros((h,)), ops.ones((h,)), ops.zeros((2 * h,))])
        else:
            bias_init = "zeros"
        self.bias = self.add_weight(shape=(4 * h,), name="bias", initializer=bias_init)

    def call(self, inputs, states, training=False):
        h_prev, c_prev = states[0], states[1]
        z = ops.matmul(inputs, self.kernel) + ops.matmul(h_prev, self.recurrent_kernel) + self.bias
        zi, zf, zc, zo = ops.split(z, 4, axis=-1)
        i = ops.sigmoid(zi + self.peephole[0] * c_prev)
        f = ops.sigmoid(zf + self.peephole[1] * c_prev)
        c = f * c_prev + i * ops.tanh(zc)
        o = ops.sigmoid(zo + self.peephole[2] * c)
        h = o * ops.tanh(c)
        return h, [h, c]

    def get_initial_state(self, batch_size=None):
        return [ops.zeros((batch_size, self.units), dtype=self.compute_dtype) for _ in range(2)]

    def get_config(self):
        return {**super().get_config(), "units": self.units, "unit_forget_bias": self.unit_forget_bias,
                "peephole_init_range": self.peephole_init_range,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer)}


class PeepholeOptions(BaseModel):
    """Recipe keys of the ``peephole_lstm`` cell (under ``model``)."""

    model_config = ConfigDict(extra="forbid")
    unit_forget_bias: bool = True
    peephole_init_range: float = Field(0.1, ge=0)


@seqkit.register_cell("peephole_lstm")
class PeepholeLSTMPlugin(CellPlugin):
    """LSTM with peephole connections (Gers et al. 2002); states ``(h, c)``."""

    Options = PeepholeOptions
    state_names = ("h", "c")

    def __init__(self, spec):
        super().__init__(spec)
        if spec.recurrent_dropout or spec.dropout:
            raise RecipeError(
                "model.recurrent_dropout: the peephole_lstm cell has no recurrent dropout; set "
                "model.recurrent_dropout: 0 (model.dropout, between layers, works).")

    def make_cell(self, name=None):
        o = self.options
        return PeepholeLSTMCell(self.spec.units, unit_forget_bias=o.unit_forget_bias,
                                peephole_init_range=o.peephole_init_range, name=name)

    def fast_path_issues(self):
        return []  # no fused kernel exists for it; keras.layers.RNN runs the step loop
