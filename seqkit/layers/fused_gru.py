"""A CPU-fast GRU layer: the input projection for all steps in one matmul, a hand-written BPTT.

Like :mod:`seqkit.layers.fused_lstm`, for ``keras.layers.GRU`` with
``reset_after=True`` (Keras's default and cuDNN's variant; Cho et al. 2014 with
the reset gate applied after the recurrent matmul). Keras gate order ``z, r, h``;
the bias is ``[2, 3H]``: input bias (row 0) and recurrent bias (row 1).

* forward: ``Z_x = X W + b_in`` for all ``T`` steps in one matmul; the loop
  adds ``h_{t-1} U + b_rec`` and applies the gates;
* backward (:func:`gru_scan`'s custom gradient): the loop carries only ``dh``
  and writes the pre-activation gradients; ``dU = H_prev^T dR`` and
  ``dW = X^T dZ_x`` are one large matmul each after the loop (BPTT).

Masking and fallbacks as :class:`~seqkit.layers.fused_lstm.FusedLSTM`
(:func:`seqkit.layers.fused_rnn.fast_path_ok`), plus ``reset_after=False`` falls
back to Keras.

Keras is imported at the top (this module defines Keras classes); TensorFlow only in the functions
that call it.
"""

from __future__ import annotations

import keras

from seqkit.layers import fused_rnn  # the module, not its names: see seqkit/_keras_hook.py
from seqkit.layers import weight_drop as weight_drop_module


def _forward(zx, mask, h0, u, b):
    """The recurrence: ``(h_seq [T, B, H], acts [T, B, 4H] (z, r, n, a_h))``."""
    import tensorflow as tf

    steps = tf.shape(zx)[0]
    h_ta = tf.TensorArray(tf.float32, size=steps, element_shape=h0.shape)
    a_ta = tf.TensorArray(tf.float32, size=steps)

    def body(t, h, h_ta, a_ta):
        az, ar, ah = tf.split(tf.matmul(h, u) + b, 3, axis=-1)
        xz, xr, xh = tf.split(zx[t], 3, axis=-1)
        z, r = tf.sigmoid(xz + az), tf.sigmoid(xr + ar)
        n = tf.tanh(xh + r * ah)
        h_new = tf.where(mask[t] > 0, z * h + (1.0 - z) * n, h)
        return t + 1, h_new, h_ta.write(t, h_new), a_ta.write(t, tf.concat([z, r, n, ah], axis=-1))

    _, _, h_ta, a_ta = tf.while_loop(lambda t, *_: t < steps, body, (tf.constant(0), h0, h_ta, a_ta),
                                     maximum_iterations=steps)
    return h_ta.stack(), a_ta.stack()


def _backward(dh_seq, mask, h_seq, acts, h0, u):
    """BPTT through :func:`_forward`: ``(dzx [T, B, 3H], dh0 [B, H], da [T, B, 3H])``, ``da`` the
    gradient of the recurrent pre-activations ``h_{t-1} U + b_rec`` (``dU`` and ``db_rec`` are
    taken from it after the loop)."""
    import tensorflow as tf

    steps = tf.shape(dh_seq)[0]
    h_prev = tf.concat([h0[None], h_seq[:-1]], axis=0)
    ut = tf.transpose(u)
    dx_ta = tf.TensorArray(tf.float32, size=steps)
    da_ta = tf.TensorArray(tf.float32, size=steps)

    def back(t, dh, dx_ta, da_ta):
        dh = dh + dh_seq[t]
        z, r, n, ah = tf.split(acts[t], 4, axis=-1)
        dh_new = mask[t] * dh  # zero at a padded step: every gradient below is zero
        dz = dh_new * (h_prev[t] - n) * z * (1.0 - z)
        dn = dh_new * (1.0 - z) * (1.0 - n * n)
        dr = dn * ah * r * (1.0 - r)
        da = tf.concat([dz, dr, dn * r], axis=-1)
        dh_prev = dh - dh_new + dh_new * z + tf.matmul(da, ut)
        return t - 1, dh_prev, dx_ta.write(t, tf.concat([dz, dr, dn], axis=-1)), da_ta.write(t, da)

    _, dh0, dx_ta, da_ta = tf.while_loop(lambda t, *_: t >= 0, back,
                                          (steps - 1, tf.zeros_like(h0), dx_ta, da_ta),
                                          maximum_iterations=steps)
    return dx_ta.stack(), dh0, da_ta.stack()


def gru_scan(zx, mask, h0, recurrent_kernel, recurrent_bias, xla: bool = False,
             product_dtype: str | None = None):
    """Run the GRU recurrence over precomputed input projections, with a fused BPTT gradient.

    Args:
        zx: ``[T, B, 3H]`` float32, time-major ``x_t W + b_in`` (gates ``z, r, h``).
        mask: ``[T, B, 1]`` float32, 1 at valid steps and 0 at padded ones.
        h0: ``[B, H]`` float32 initial hidden state.
        recurrent_kernel: ``[H, 3H]`` float32 ``U``.
        recurrent_bias: ``[3H]`` float32 ``b_rec``.
        xla: run the forward and BPTT loops compiled by XLA (:func:`seqkit.layers.fused_rnn.use_xla`).
        product_dtype: None (float32) or ``"bfloat16"`` / ``"float16"``: the dtype of the
            recurrent kernel's gradient product ``dU = H_prev^T dA`` (float32 accumulation;
            :func:`seqkit.layers.fused_rnn.recurrent_weight_gradient`). The recurrence, its
            per-step products and the BPTT loop stay float32.

    Returns:
        ``h_seq [T, B, H]``: the hidden state after every step (a padded step
        repeats the previous one). The gradient with respect to every argument
        except ``mask`` is exact.

    Equations (per step, ``m`` the mask; Keras ``GRUCell`` with ``reset_after``)::

        a = h_{t-1} U + b_rec;  z = sigmoid(zx_z + a_z);  r = sigmoid(zx_r + a_r)
        n = tanh(zx_h + r * a_h);  h~ = z h_{t-1} + (1 - z) n
        h_t = m h~ + (1 - m) h_{t-1}
    """
    import tensorflow as tf

    forward, backward = fused_rnn.loops("gru", _forward, _backward, xla)

    @tf.custom_gradient
    def scan(zx, h0, u, b):
        # stop_gradient: the custom gradient is the only one; no tape records the loops themselves
        h_seq, acts = forward(*map(tf.stop_gradient, (zx, mask, h0, u, b)))

        def grad(dh_seq):
            dx, dh0, da = backward(*map(tf.stop_gradient, (dh_seq, mask, h_seq, acts, h0, u)))
            du = fused_rnn.recurrent_weight_gradient(h0, h_seq, da, product_dtype)
            return dx, dh0, du, tf.reduce_sum(da, axis=[0, 1])

        return h_seq, grad

    return scan(zx, h0, recurrent_kernel, recurrent_bias)


@keras.saving.register_keras_serializable(package="seqkit")
class FusedGRU(fused_rnn.ProductDtype, weight_drop_module.WeightDropConfig, keras.layers.GRU):
    """``keras.layers.GRU`` with a faster CPU kernel (see the module docstring).

    Same arguments, weights, masking and outputs as ``keras.layers.GRU``:
    ``[B, T, D] -> [B, T, H]`` (``return_sequences``) or ``[B, H]``, plus
    ``h [B, H]`` with ``return_state``. Results equal Keras's to float32
    rounding.

    ``weight_drop`` (default 0): DropConnect on the recurrent kernel ``U`` in training, one
    mask per call (:mod:`seqkit.layers.weight_drop`; AWD-LSTM, Merity et al. 2018).

    ``product_dtype`` (default None = float32): ``"bfloat16"`` or ``"float16"`` runs the input
    projection and the recurrent kernel's gradient product in that dtype, the recurrence and the
    state in float32
    (:class:`seqkit.layers.fused_rnn.ProductDtype`; a layer made under a Keras mixed policy takes
    it from the policy).
    """

    def inner_loop(self, sequences, initial_state, mask, training=False):
        with weight_drop_module.dropped_recurrent_kernel(self, training):
            return self._inner_loop(sequences, initial_state, mask, training)

    def _inner_loop(self, sequences, initial_state, mask, training):
        import tensorflow as tf

        if not (fused_rnn.fast_path_ok(self) and self.cell.reset_after):
            return super().inner_loop(sequences, initial_state, mask, training=training)
        bias = tf.convert_to_tensor(self.cell.bias)  # [2, 3H]: input and recurrent bias
        zx, m = fused_rnn.project_inputs(self, sequences, mask, bias[0], training)  # [T, B, 3H]
        h0 = initial_state[0] if isinstance(initial_state, (list, tuple)) else initial_state
        xla = fused_rnn.use_xla(zx, training, self.units)
        h0 = tf.convert_to_tensor(h0, tf.float32)
        zk, mk, (h0,), trim = fused_rnn.xla_lengths(zx, m, [h0]) if xla else (zx, m, [h0], None)
        h_seq = gru_scan(zk, mk[:, :, None], h0, tf.convert_to_tensor(self.cell.recurrent_kernel), bias[1], xla=xla,
                         product_dtype=self.product_dtype)
        if trim is not None:
            h_seq, _ = trim(h_seq)
        last_output, outputs = fused_rnn.keras_outputs(self, h_seq, m)
        return last_output, outputs, [h_seq[-1]]
