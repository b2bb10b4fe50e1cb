"""A CPU-fast LSTM layer: the input projection for all steps in one matmul, a hand-written BPTT.

``keras.layers.LSTM`` takes a fused kernel only on cuDNN; on the CPU it runs
``LSTMCell`` inside a generic ``tf.while_loop`` whose automatic gradient
multiplies ``[B, D] x [D, 4H]`` and accumulates the weight gradients step by
step. :class:`FusedLSTM` keeps the same weights and the same maths (Keras gate
order ``i, f, g, o``; Hochreiter & Schmidhuber 1997 with the forget gate of
Gers et al. 2000) and restructures the work as cuDNN and oneDNN do:

* forward: ``Z_x = X W + b`` for all ``T`` steps in one ``[B*T, D] x [D, 4H]``
  matmul; the loop only adds ``h_{t-1} U`` and applies the gates;
* backward (:func:`lstm_scan`'s custom gradient): the loop only carries
  ``dh, dc`` and writes ``dz_t``; ``dU = H_prev^T dZ`` and ``dW = X^T dZ`` are
  one large matmul each after the loop (BPTT, Werbos 1990).

Masking is Keras's (``keras.src.backend.tensorflow.rnn``): a padded step keeps
``h`` and ``c``; its output repeats the previous output (zeros before the first
valid step), or is zero with ``zero_output_for_mask`` (which ``Bidirectional`` sets). The layer falls back to ``keras.layers.LSTM`` whenever the fast
path does not apply: a GPU (cuDNN is faster), recurrent dropout, activations
other than ``tanh``/``sigmoid``, no bias, ``unroll``, or a non-float32 dtype.
A saved model names this class; its weights are ``keras.layers.LSTM``'s, so
``layer.cell`` steps exactly as before (streaming, export).

Keras is imported at the top (this module defines Keras classes); TensorFlow only in the functions
that call it.
"""

from __future__ import annotations

import keras

from seqkit.layers import fused_rnn  # the module, not its names: see seqkit/_keras_hook.py
from seqkit.layers import weight_drop as weight_drop_module


def _forward(zx, mask, h0, c0, u):
    """The recurrence: ``(h_seq, c_seq [T, B, H], acts [T, B, 4H] (i, f, g, o), c_last [B, H])``."""
    import tensorflow as tf

    steps = tf.shape(zx)[0]
    h_ta = tf.TensorArray(tf.float32, size=steps, element_shape=h0.shape)
    c_ta = tf.TensorArray(tf.float32, size=steps, element_shape=c0.shape)
    a_ta = tf.TensorArray(tf.float32, size=steps, element_shape=zx.shape[1:])

    def body(t, h, c, h_ta, c_ta, a_ta):
        z = zx[t] + tf.matmul(h, u)
        zi, zf, zg, zo = tf.split(z, 4, axis=-1)
        i, f, o, g = tf.sigmoid(zi), tf.sigmoid(zf), tf.sigmoid(zo), tf.tanh(zg)
        c_new = f * c + i * g
        h_new = o * tf.tanh(c_new)
        m = mask[t] > 0
        c_new = tf.where(m, c_new, c)
        h_new = tf.where(m, h_new, h)
        return (t + 1, h_new, c_new, h_ta.write(t, h_new), c_ta.write(t, c_new),
                a_ta.write(t, tf.concat([i, f, g, o], axis=-1)))

    _, _, c_last, h_ta, c_ta, a_ta = tf.while_loop(
        lambda t, *_: t < steps, body, (tf.constant(0), h0, c0, h_ta, c_ta, a_ta),
        maximum_iterations=steps)
    return h_ta.stack(), c_ta.stack(), a_ta.stack(), c_last


def _backward(dh_seq, dc_last, mask, h_seq, c_seq, acts, h0, c0, u):
    """BPTT through :func:`_forward`: ``(dzx [T, B, 4H], dh0, dc0 [B, H])`` (``dU`` is one product
    after it: :func:`seqkit.layers.fused_rnn.recurrent_weight_gradient`)."""
    import tensorflow as tf

    steps = tf.shape(dh_seq)[0]
    c_prev = tf.concat([c0[None], c_seq[:-1]], axis=0)
    ut = tf.transpose(u)
    dz_ta = tf.TensorArray(tf.float32, size=steps, element_shape=acts.shape[1:])

    def back(t, dh, dc, dz_ta):
        dh = dh + dh_seq[t]
        m = mask[t]
        i, f, g, o = tf.split(acts[t], 4, axis=-1)
        tc = tf.tanh(c_seq[t])  # c~ where m = 1; where m = 0 every dz below is 0
        dh_new, dc_new = m * dh, m * dc
        dc_tilde = dc_new + dh_new * o * (1.0 - tc * tc)
        dz = tf.concat([dc_tilde * g * i * (1.0 - i),
                        dc_tilde * c_prev[t] * f * (1.0 - f),
                        dc_tilde * i * (1.0 - g * g),
                        dh_new * tc * o * (1.0 - o)], axis=-1)
        dh_prev = dh - dh_new + tf.matmul(dz, ut)
        dc_prev = dc - dc_new + dc_tilde * f
        return t - 1, dh_prev, dc_prev, dz_ta.write(t, dz)

    _, dh0, dc0, dz_ta = tf.while_loop(
        lambda t, *_: t >= 0, back, (steps - 1, tf.zeros_like(h0), dc_last, dz_ta),
        maximum_iterations=steps)
    return dz_ta.stack(), dh0, dc0


def lstm_scan(zx, mask, h0, c0, recurrent_kernel, xla: bool = False, product_dtype: str | None = None):
    """Run the LSTM recurrence over precomputed input projections, with a fused BPTT gradient.

    Args:
        zx: ``[T, B, 4H]`` float32, time-major ``x_t W + b`` (gates ``i, f, g, o``).
        mask: ``[T, B, 1]`` float32, 1 at valid steps and 0 at padded ones.
        h0, c0: ``[B, H]`` float32 initial hidden and cell state.
        recurrent_kernel: ``[H, 4H]`` float32 ``U``.
        xla: run the forward and BPTT loops compiled by XLA (:func:`seqkit.layers.fused_rnn.use_xla`).
        product_dtype: None (float32) or ``"bfloat16"`` / ``"float16"``: the dtype of the
            recurrent kernel's gradient product ``dU = H_prev^T dZ`` (float32 accumulation;
            :func:`seqkit.layers.fused_rnn.recurrent_weight_gradient`). The recurrence, its
            per-step products and the BPTT loop stay float32.

    Returns:
        ``(h_seq [T, B, H], c_last [B, H])``: the hidden state after every step
        (a padded step repeats the previous one) and the final cell state. The
        gradient with respect to every argument except ``mask`` is exact.

    Equations (per step, ``m`` the mask)::

        z = zx_t + h_{t-1} U;  i, f, o = sigmoid(z_i, z_f, z_o);  g = tanh(z_g)
        c~ = f c_{t-1} + i g;  h~ = o tanh(c~)
        c_t = m c~ + (1 - m) c_{t-1};  h_t = m h~ + (1 - m) h_{t-1}
    """
    import tensorflow as tf

    forward, backward = fused_rnn.loops("lstm", _forward, _backward, xla)

    @tf.custom_gradient
    def scan(zx, h0, c0, u):
        # stop_gradient: the custom gradient is the only one; no tape records the loops themselves
        h_seq, c_seq, acts, c_last = forward(*map(tf.stop_gradient, (zx, mask, h0, c0, u)))

        def grad(dh_seq, dc_last):
            dz, dh0, dc0 = backward(*map(tf.stop_gradient, (dh_seq, dc_last, mask, h_seq, c_seq, acts, h0, c0, u)))
            return dz, dh0, dc0, fused_rnn.recurrent_weight_gradient(h0, h_seq, dz, product_dtype)

        return (h_seq, c_last), grad

    return scan(zx, h0, c0, recurrent_kernel)


@keras.saving.register_keras_serializable(package="seqkit")
class FusedLSTM(fused_rnn.ProductDtype, weight_drop_module.WeightDropConfig, keras.layers.LSTM):
    """``keras.layers.LSTM`` with a faster CPU kernel (see the module docstring).

    Same arguments, weights, masking and outputs as ``keras.layers.LSTM``:
    ``[B, T, D] -> [B, T, H]`` (``return_sequences``) or ``[B, H]``, plus
    ``h, c [B, H]`` with ``return_state``. Results equal Keras's to float32
    rounding (the sums are grouped differently).

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

        if not fused_rnn.fast_path_ok(self):
            return super().inner_loop(sequences, initial_state, mask, training=training)
        zx, m = fused_rnn.project_inputs(self, sequences, mask, self.cell.bias, training)  # [T, B, 4H]
        h0, c0 = (tf.convert_to_tensor(s, tf.float32) for s in initial_state)
        xla = fused_rnn.use_xla(zx, training, self.units)
        zk, mk, (h0, c0), trim = fused_rnn.xla_lengths(zx, m, [h0, c0]) if xla else (zx, m, [h0, c0], None)
        h_seq, c_last = lstm_scan(zk, mk[:, :, None], h0, c0, tf.convert_to_tensor(self.cell.recurrent_kernel),
                                  xla=xla, product_dtype=self.product_dtype)
        if trim is not None:
            h_seq, (c_last,) = trim(h_seq, [c_last])
        last_output, outputs = fused_rnn.keras_outputs(self, h_seq, m)
        return last_output, outputs, [h_seq[-1], c_last]
