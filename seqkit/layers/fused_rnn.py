"""What seqkit's fused CPU recurrent layers share: when the fast path applies, the input
projection of all steps in one matmul, and Keras's outputs at padded steps.

Used by :class:`seqkit.layers.fused_lstm.FusedLSTM` and
:class:`seqkit.layers.fused_gru.FusedGRU`; each adds its own recurrence and BPTT.
"""

from __future__ import annotations

import keras


def fast_path_ok(layer) -> bool:
    """Whether a fused layer can run its CPU kernel for ``layer``'s configuration: TensorFlow
    on a CPU (a GPU takes cuDNN), no recurrent dropout, biases, ``tanh`` / ``sigmoid``, not
    unrolled or stateful, float32."""
    import tensorflow as tf

    cell = layer.cell
    return (keras.backend.backend() == "tensorflow" and not tf.config.list_logical_devices("GPU")
            and not cell.recurrent_dropout and cell.use_bias and not layer.unroll
            and not layer.stateful and cell.activation is keras.activations.tanh
            and cell.recurrent_activation is keras.activations.sigmoid
            and layer.compute_dtype == "float32")


def project_inputs(layer, sequences, mask, input_bias, training):
    """Every step's input projection, time-major, and the mask.

    Args:
        layer: the recurrent layer (its ``cell.kernel`` ``[D, G]``, dropout, ``go_backwards``).
        sequences: ``[B, T, D]`` float32.
        mask: ``[B, T]`` bool, a list holding it, or None.
        input_bias: ``[G]`` added to every projection.
        training: apply the cell's input dropout, one mask per sequence (as Keras's cuDNN path).

    Returns:
        ``(zx [T, B, G], m [T, B])`` float32, both reversed in time with ``go_backwards``.
    """
    import tensorflow as tf

    if isinstance(mask, (list, tuple)):
        mask = mask[0]
    cell, x = layer.cell, sequences
    if training and cell.dropout:
        x = x * tf.expand_dims(cell.get_dropout_mask(sequences[:, 0, :]), 1)
    zx = tf.transpose(tf.tensordot(x, cell.kernel, axes=[[2], [0]]) + input_bias, [1, 0, 2])
    if mask is None:
        m = tf.ones(tf.shape(zx)[:2], tf.float32)
    else:
        m = tf.transpose(tf.cast(mask, tf.float32), [1, 0])
    if layer.go_backwards:
        zx, m = tf.reverse(zx, [0]), tf.reverse(m, [0])
    return zx, m


def keras_outputs(layer, h_seq, m):
    """``(last_output [B, H], outputs [B, T, H])`` as Keras's RNN gives them from the hidden
    states ``h_seq [T, B, H]`` (a padded step repeats the previous one) and ``m [T, B]``.

    Keras's output at a padded step repeats the previous output, which is zero before the
    first valid step even when ``h0`` is not; with ``zero_output_for_mask`` (which
    ``Bidirectional`` sets) it is zero.
    """
    import tensorflow as tf

    seen = m if layer.zero_output_for_mask else tf.cast(tf.cumsum(m, axis=0) > 0, tf.float32)
    seen = seen[:, :, None]
    return h_seq[-1] * seen[-1], tf.transpose(h_seq * seen, [1, 0, 2])
