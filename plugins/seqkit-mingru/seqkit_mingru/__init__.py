"""seqkit cell plugin ``mingru``: the minimal GRU of Feng et al. (2024).

Feng, Tung, Ahmed, Bengio & Hajimirsadeghi, "Were RNNs All We Needed?",
arXiv:2410.01201, section 3.1 and appendix (log-space version). For input
``x_t [B, D]`` and state ``h_{t-1} [B, H]`` (float32)::

    z_t  = sigma(W_z x_t + b_z)                     update gate: input only
    h~_t = g(W_h x_t + b_h)                         candidate: input only
    h_t  = (1 - z_t) * h_{t-1} + z_t * h~_t

with ``g(v) = v + 1/2`` for ``v >= 0`` and ``sigma(v)`` for ``v < 0`` (the
paper's log-space version, which keeps ``h~_t > 0``). Neither gate reads
``h_{t-1}``, so ``h_t = a_t * h_{t-1} + b_t`` with ``a_t = 1 - z_t`` and
``b_t = z_t * h~_t`` known for every ``t`` at once, and the whole sequence is
one scan (Heinsen 2023, "Efficient parallelization of a ubiquitous sequential
computation", arXiv:2311.06281)::

    A_t     = sum_{s<=t} log a_s
    log h_t = A_t + logcumsumexp_{s<=t}(log b_s - A_s)          (h_0 = 0)

Two paths, same numbers (tested to 1e-5):

- :class:`MinGRU`, the full-sequence layer used in training, runs the scan
  (cumulative sum and cumulative log-sum-exp over time, no step loop). The
  scan is done in float64: ``A_t`` grows like ``-t`` and ``A_t + (...)``
  cancels, which in float32 costs about ``|A_t|`` ulps of ``h_t``.
- :class:`MinGRUCell`, its ``.cell`` (same weights), runs the plain
  recurrence one step at a time: generation, streaming, TFLite export.

Padding: at a masked step ``a_t = 1`` and ``b_t = 0`` (``log b_t`` a
finite -1e30, so no ``-inf - -inf`` reaches the gradient), which keeps the
state, exactly as ``keras.layers.RNN`` does. Parameters: ``2 * (D * H + H)``.

Importing this module registers the cell (``seqkit.register_cell``) and both
Keras classes (``keras.saving.register_keras_serializable``, package
``seqkit_mingru``), which is what a saved model needs to reload.
"""

from __future__ import annotations

import keras
from keras import ops

import seqkit
from seqkit.cells.base import CellPlugin
from seqkit.errors import RecipeError

__all__ = ["MinGRU", "MinGRUCell", "MinGRUPlugin", "g", "log_g", "parallel_scan_log"]
__version__ = "0.1.0"

_NEG = -1e30  # log of "zero" at padded steps: finite, so gradients stay finite


def g(v):
    """``g(v) = v + 0.5`` (v >= 0), ``sigmoid(v)`` (v < 0): positive, continuous (Feng et al., eq. 14)."""
    return ops.where(v >= 0, v + 0.5, ops.sigmoid(v))


def log_g(v):
    """``log g(v)``: ``log(relu(v) + 0.5)`` (v >= 0), ``-softplus(-v)`` (v < 0); finite everywhere."""
    return ops.where(v >= 0, ops.log(ops.relu(v) + 0.5), -ops.softplus(-v))


def parallel_scan_log(log_a, log_b, h0=None):
    """All ``h_t = a_t h_{t-1} + b_t`` at once, from logs (Heinsen 2023).

    Args:
        log_a: ``[B, T, H]`` ``log a_t`` (<= 0), any float dtype.
        log_b: ``[B, T, H]`` ``log b_t``.
        h0: optional ``[B, H]`` initial state (any sign: it enters linearly,
            ``h_t += exp(A_t) * h0``); zeros when None.

    Returns:
        ``[B, T, H]`` ``h_1..h_T`` in the dtype of ``log_a``.
    """
    import tensorflow as tf

    a_star = tf.math.cumsum(log_a, axis=1)
    h = tf.exp(a_star + tf.math.cumulative_logsumexp(log_b - a_star, axis=1))
    if h0 is not None:
        h = h + tf.exp(a_star) * tf.cast(h0, h.dtype)[:, None, :]
    return h


@keras.saving.register_keras_serializable(package="seqkit_mingru")
class MinGRUCell(keras.layers.Layer):
    """One minGRU step, the plain recurrence (equations in the module docstring).

    Args:
        units: ``H``, a positive int.
        kernel_initializer: Keras initializer of ``[W_z | W_h]`` ``[D, 2H]``
            (Glorot uniform; biases start at 0). The paper uses PyTorch's
            ``nn.Linear`` default, uniform in ``+-1/sqrt(D)``; Glorot is the
            Keras default and what the built-in cells use.

    Call: ``(x_t [B, D] float32, [h [B, H]]) -> (h_t, [h_t])``.
    """

    def __init__(self, units: int, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.units = int(units)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.state_size = [self.units]
        self.output_size = self.units

    def build(self, input_shape):
        d, h = int(input_shape[-1]), self.units
        self.kernel = self.add_weight(shape=(d, 2 * h), name="kernel", initializer=self.kernel_initializer)
        self.bias = self.add_weight(shape=(2 * h,), name="bias", initializer="zeros")

    def gates(self, x):
        """``x [..., D]`` -> ``(k_z, k_h)``, each ``[..., H]``: the pre-activations."""
        k = ops.matmul(x, self.kernel) + self.bias
        return k[..., : self.units], k[..., self.units:]

    def call(self, inputs, states, training=False):
        h_prev = states[0] if isinstance(states, (list, tuple)) else states
        kz, kh = self.gates(inputs)
        z = ops.sigmoid(kz)
        h = (1.0 - z) * h_prev + z * g(kh)
        return h, [h]

    def get_initial_state(self, batch_size=None):
        return [ops.zeros((batch_size, self.units), dtype=self.compute_dtype)]

    def get_config(self):
        return {**super().get_config(), "units": self.units,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer)}


@keras.saving.register_keras_serializable(package="seqkit_mingru")
class MinGRU(keras.layers.Layer):
    """minGRU over a whole sequence with the parallel log-space scan.

    Args:
        units: ``H``.
        return_sequences: return ``[B, T, H]`` (else the last state ``[B, H]``).
        return_state: also return the last state ``[B, H]``.
        go_backwards: read the sequence from the end (outputs in reading
            order, as ``keras.layers.RNN``), so ``keras.layers.Bidirectional``
            works.
        zero_output_for_mask: zeros (not the carried state) at masked steps
            (``Bidirectional`` sets it, as for Keras's RNN layers).

    Call: ``(x [B, T, D] float32, mask [B, T] bool | None, initial_state
    [h0 [B, H]] | None)``. Equal, to 1e-5, to ``keras.layers.RNN(self.cell)``
    with the same arguments; :attr:`cell` holds the weights.
    """

    def __init__(self, units: int, return_sequences: bool = True, return_state: bool = False,
                 go_backwards: bool = False, zero_output_for_mask: bool = False, stateful: bool = False,
                 kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if stateful:
            raise ValueError("MinGRU does not support stateful=True.")
        self.units = int(units)
        self.return_sequences = bool(return_sequences)
        self.return_state = bool(return_state)
        self.go_backwards = bool(go_backwards)
        self.zero_output_for_mask = bool(zero_output_for_mask)
        self.stateful = False
        self.cell = MinGRUCell(self.units, kernel_initializer=kernel_initializer, name="cell")
        self.supports_masking = True

    def build(self, sequences_shape, initial_state_shape=None):
        self.cell.build(sequences_shape)

    def call(self, sequences, initial_state=None, mask=None, training=False):
        import tensorflow as tf

        x = sequences
        if self.go_backwards:
            x = ops.flip(x, axis=1)
            mask = None if mask is None else ops.flip(mask, axis=1)
        kz, kh = self.cell.gates(x)
        kz, kh = ops.cast(kz, "float64"), ops.cast(kh, "float64")
        log_a = -ops.softplus(kz)                   # log(1 - sigma(k_z))
        log_b = -ops.softplus(-kz) + log_g(kh)      # log sigma(k_z) + log g(k_h)
        if mask is not None:
            m = ops.cast(mask, "bool")[..., None]
            log_a = ops.where(m, log_a, 0.0)        # a = 1 at padded steps ...
            log_b = ops.where(m, log_b, _NEG)       # ... and b = 0: the state is kept
        h0 = None
        if initial_state is not None:
            h0 = initial_state[0] if isinstance(initial_state, (list, tuple)) else initial_state
        h = ops.cast(parallel_scan_log(log_a, log_b, h0), self.compute_dtype)
        last = h[:, -1]
        out = h
        if mask is not None and self.zero_output_for_mask:
            out = tf.where(ops.cast(mask, "bool")[..., None], h, tf.zeros_like(h))
        out = out if self.return_sequences else last
        return [out, last] if self.return_state else out

    def compute_output_shape(self, sequences_shape, initial_state_shape=None):
        b, t = sequences_shape[0], sequences_shape[1]
        out = (b, t, self.units) if self.return_sequences else (b, self.units)
        return [out, (b, self.units)] if self.return_state else out

    def compute_mask(self, inputs, mask=None):
        m = mask if self.return_sequences else None
        return [m, None] if self.return_state else m

    def get_config(self):
        return {**super().get_config(), "units": self.units, "return_sequences": self.return_sequences,
                "return_state": self.return_state, "go_backwards": self.go_backwards,
                "zero_output_for_mask": self.zero_output_for_mask,
                "kernel_initializer": keras.initializers.serialize(self.cell.kernel_initializer)}


@seqkit.register_cell("mingru")
class MinGRUPlugin(CellPlugin):
    """minGRU (Feng et al. 2024): parallel log-space scan in training; state ``(h,)``."""

    state_names = ("h",)

    def __init__(self, spec):
        super().__init__(spec)
        if spec.recurrent_dropout or spec.dropout:
            raise RecipeError(
                "model.recurrent_dropout: the mingru cell has no recurrent weights to drop; set "
                "model.recurrent_dropout: 0 (model.dropout, between layers, works).")

    def make_cell(self, name=None):
        return MinGRUCell(self.spec.units, name=name)

    def make_layer(self, *, return_sequences=True, return_state=False, go_backwards=False, name=None):
        return MinGRU(self.spec.units, return_sequences=return_sequences, return_state=return_state,
                      go_backwards=go_backwards, name=name)
