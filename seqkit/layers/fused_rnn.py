"""What seqkit's fused CPU recurrent layers share: when the fast path applies, the input
projection of all steps in one matmul, and Keras's outputs at padded steps.

Used by :class:`seqkit.layers.fused_lstm.FusedLSTM` and
:class:`seqkit.layers.fused_gru.FusedGRU`; each adds its own recurrence and BPTT.
"""

from __future__ import annotations

import contextlib
import os
import threading

import keras

#: ``SEQKIT_RNN_XLA``: ``auto`` (default), ``1`` or ``0``; see :func:`use_xla`.
XLA_ENV = "SEQKIT_RNN_XLA"
_COMPILED: dict = {}
_FORCED = threading.local()


@contextlib.contextmanager
def compiled_loops():
    """Within the block, :func:`use_xla` answers yes under ``auto`` whatever the shapes and the
    training flag: for callers that trace a step over chunks of a few fixed shapes (the stream
    LM's scoring, dynamic evaluation and its gradient statistics). Enter it inside the traced
    function (it is read when the layer is traced)."""
    depth = getattr(_FORCED, "depth", 0)
    _FORCED.depth = depth + 1
    try:
        yield
    finally:
        _FORCED.depth = depth


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


def use_xla(zx, training) -> bool:
    """Whether the fused recurrence runs its forward and BPTT loops compiled by XLA.

    ``SEQKIT_RNN_XLA=auto`` (the default): in training when the batch and time sizes of
    ``zx [T, B, G]`` are known when the step is traced (stream chunks, fixed-length batches), so
    XLA compiles once per traced shape, and inside :func:`compiled_loops`; inference, export and
    variable-length batches keep the graph loops (XLA would compile once per new length).
    ``1``: always (a new shape compiles anew); ``0``: never.

    Why: the loop's per-step work is a small ``[B, H] @ [H, G]`` product and a few element-wise
    gates. In a ``tf.while_loop`` each is one TensorFlow op (oneDNN's small-matrix path on x86),
    with the executor's overhead per op and step; compiled, the body becomes one fused function.
    Measured in ``bench/``: the LSTM recurrence of the train suite's shape (forward + BPTT) took
    26 ms a call compiled against 28 (oneDNN, AVX-512) to 45 ms (oneDNN capped to AVX2).
    """
    mode = os.environ.get(XLA_ENV, "auto").strip().lower()
    if mode in ("0", "false", "off", "no"):
        return False
    if mode in ("1", "true", "on", "yes"):
        return True
    if getattr(_FORCED, "depth", 0):
        return True
    return bool(training is True) and zx.shape[0] is not None and zx.shape[1] is not None


def loops(name: str, forward, backward, xla: bool):
    """``(forward, backward)`` as given, or each wrapped once per process in its own
    ``tf.function(jit_compile=True)`` (looked up by ``name``)."""
    if not xla:
        return forward, backward
    if name not in _COMPILED:
        import tensorflow as tf

        _COMPILED[name] = (tf.function(forward, jit_compile=True, reduce_retracing=True),
                           tf.function(backward, jit_compile=True, reduce_retracing=True))
    return _COMPILED[name]
