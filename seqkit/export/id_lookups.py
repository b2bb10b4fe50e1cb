"""Integer inputs read by lookups alone, for full-integer pinned exports (``--quantize int8 | int16x8``).

TF 2.21's int16x8 quantizer (``EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8``)
asks a calibrated range for every int32 tensor that feeds an op other than a lookup, but its
calibration records ranges of float tensors only, so such a model is refused ("Empty min/max
for tensor ..."). The int32 ops of a pinned export were:

- a padding mask ``tokens != 0`` (an ``Embedding(mask_zero=True)``'s ``compute_mask``, a seq2seq
  source mask);
- Keras's ``ops.take`` inside ``Embedding.call``, which fixes negative ids
  (``where(ids < 0, ids + V, ids)``) before its ``GATHER``: a seq2seq ``decode_step``'s token;
- ``range(T) < lengths`` of a full-integer frame model (:mod:`seqkit.export.frame_lengths`).

Each is rewritten as a ``GATHER`` from a constant table indexed by the int32 tensor, the one
op the quantizer reads integer ids with: ``gather(embeddings, ids)`` for the embedding (ids
are never negative in seqkit), ``gather(keep, ids)`` with ``keep = [False, True, ..., True]``
(``[V]`` bool) for the padding mask, and ``gather(prefix, lengths)`` with ``prefix[n, t] = t <
n`` (``[T + 1, T]`` bool) for the length mask. For every valid id / length the results are the
same values as before (bit for bit, float32), so only the graph changes; an id ``>= V`` or a
length ``> T`` is an error of the caller, as it was.
"""

from __future__ import annotations

import contextlib


def id_mask(ids, vocab_size: int, dtype="bool"):
    """``ids != 0`` as ``gather(keep, ids)``: ``ids [...] int32`` -> ``[...]`` ``dtype`` (bool, or
    float32 1 / 0), ``keep [V]`` with ``keep[0] = False`` (padding) and True elsewhere."""
    import numpy as np
    import tensorflow as tf

    keep = np.ones(int(vocab_size), dtype)
    keep[0] = 0
    return tf.gather(tf.constant(keep), ids)


def length_mask(lengths, length: int, dtype="bool"):
    """``range(T)[None, :] < lengths[:, None]`` as ``gather(prefix, lengths)``: ``lengths [B]
    int32`` (0..T) -> ``[B, T]`` ``dtype`` (bool, or float32 1 / 0), ``prefix [T + 1, T]`` with
    ``prefix[n, t] = t < n``."""
    import numpy as np
    import tensorflow as tf

    T = int(length)
    prefix = (np.arange(T)[None, :] < np.arange(T + 1)[:, None]).astype(dtype)
    return tf.gather(tf.constant(prefix), lengths)


@contextlib.contextmanager
def gathered_ids(model, mask_dtype="bool"):
    """For the block, every ``keras.layers.Embedding`` inside ``model`` looks its ids up with a
    plain ``gather(embeddings, ids)`` and, with ``mask_zero``, computes its mask with
    :func:`id_mask` (float32 1 / 0 masks with ``mask_dtype="float32"``, for
    :func:`seqkit.export.unrolled.arithmetic_unroll`); restored afterwards. Used while tracing the pinned graphs of a
    full-integer export (see the module docstring)."""
    import keras
    import tensorflow as tf

    layers = [lay for lay in model._flatten_layers(include_self=True, recursive=True)
              if isinstance(lay, keras.layers.Embedding)]

    def patch(layer):
        def call(inputs, *args, **kwargs):
            ids = tf.cast(inputs, tf.int32) if inputs.dtype not in (tf.int32, tf.int64) else inputs
            return tf.cast(tf.gather(layer.embeddings, ids), layer.compute_dtype)

        def compute_mask(inputs, mask=None):
            if not layer.mask_zero:
                return None
            return id_mask(inputs, layer.input_dim, mask_dtype)
        object.__setattr__(layer, "call", call)
        object.__setattr__(layer, "compute_mask", compute_mask)

    for lay in layers:
        patch(lay)
    try:
        yield model
    finally:
        for lay in layers:
            object.__delattr__(lay, "call")
            object.__delattr__(lay, "compute_mask")
