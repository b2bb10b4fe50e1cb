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
are never negative in seqkit), ``gather(keep, ids)`` with ``keep = [0, 1, ..., 1]`` (``[V]``)
for the padding mask, and ``gather(prefix, lengths)`` with ``prefix[n, t] = t < n``
(``[T + 1, T]``) for the length mask. The full-integer exports take the masks as float32 1 / 0
and apply them by arithmetic (:func:`seqkit.export.unrolled.arithmetic_unroll`,
:func:`shifted_softmax`): int16x8 has no ``SELECT_V2`` / ``CAST`` kernel, and int8 lost its
accuracy in ``SELECT_V2`` (the POS tagger 0.946 -> 0.993 arg-max agreement, the G2P model
0.32 -> 0.98). For every valid id / length the masks and lookups are the same values as
before (bit for bit, float32), so only the graph changes; an id ``>= V`` or a length ``> T``
is an error of the caller, as it was.

TensorFlow, Keras and the seqkit modules that import them and NumPy are imported inside the
functions that use them, so importing this module does not load TensorFlow.
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

    every = list(model._flatten_layers(include_self=True, recursive=True))
    layers = [lay for lay in every if isinstance(lay, keras.layers.Embedding)]
    # a functional model records a mask_zero Embedding's mask as its own ``NotEqual(ids, 0)``
    # node, which the next layer reads as ``mask``: those nodes are redirected too
    masks = []
    for net in every:
        ops_ = getattr(net, "operations", None) or []
        vocab = {}
        for op in ops_:
            if isinstance(op, keras.layers.Embedding) and op.mask_zero and op._inbound_nodes:
                for node in op._inbound_nodes:
                    vocab[id(node.arguments.keras_tensors[0])] = op.input_dim
        for op in ops_:
            if type(op).__name__ == "NotEqual" and len(op._inbound_nodes) == 1:
                src = op._inbound_nodes[0].arguments.keras_tensors
                if src and id(src[0]) in vocab:
                    masks.append((op, vocab[id(src[0])]))

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

    def patch_mask(op, vocab_size):
        object.__setattr__(op, "call", lambda x1, x2: id_mask(x1, vocab_size, mask_dtype))

    # layers with packed ids of their own (seqkit.layers.char_word_embedding) give their lookup form
    packed = [lay for lay in every if hasattr(lay, "lookup_call") and hasattr(lay, "lookup_mask")]

    # ... and the functional model records such a layer's mask as ``GetItem(packed, [..., 0])``
    # then ``NotEqual(., 0)``: the slice passes the packed ids through, the comparison looks up
    packed_masks = []
    for net in every:
        ops_ = getattr(net, "operations", None) or []
        owner = {}
        for op in ops_:
            if op in packed:
                for node in op._inbound_nodes:
                    owner[id(node.arguments.keras_tensors[0])] = op
        sliced = {}
        for op in ops_:
            if type(op).__name__ == "GetItem" and len(op._inbound_nodes) == 1:
                node = op._inbound_nodes[0]
                src = node.arguments.keras_tensors
                if src and id(src[0]) in owner and len(node.outputs) == 1:
                    sliced[id(node.outputs[0])] = (op, owner[id(src[0])])
        readers = {}
        for op in ops_:
            for node in op._inbound_nodes:
                for t in node.arguments.keras_tensors:
                    readers.setdefault(id(t), []).append(op)
        for key, (getitem, lay) in sliced.items():
            if all(type(r).__name__ == "NotEqual" and len(r._inbound_nodes) == 1 for r in readers.get(key, [])):
                packed_masks.append((getitem, readers.get(key, []), lay))

    def patch_packed(layer):
        object.__setattr__(layer, "call", lambda inputs, *a, **k: layer.lookup_call(inputs, mask_dtype))
        object.__setattr__(layer, "compute_mask", lambda inputs, mask=None: layer.lookup_mask(inputs, mask_dtype))

    patched_ops = []
    for getitem, nes, lay in packed_masks:
        object.__setattr__(getitem, "call", lambda x, *a, **k: x)
        patched_ops.append(getitem)
        for ne in nes:
            object.__setattr__(ne, "call", lambda x1, x2, _lay=lay: _lay.lookup_mask(x1, mask_dtype))
            patched_ops.append(ne)

    for lay in layers:
        patch(lay)
    for op, v in masks:
        patch_mask(op, v)
    for lay in packed:
        patch_packed(lay)
    try:
        yield model
    finally:
        for lay in layers + packed:
            object.__delattr__(lay, "call")
            object.__delattr__(lay, "compute_mask")
        for op in patched_ops:
            object.__delattr__(op, "call")
        for op, _ in masks:
            object.__delattr__(op, "call")


#: how far below the row's smallest score a padding position's score is put by
#: :func:`shifted_softmax`: its weight is at most ``exp(-MARGIN) = 2e-9`` of a valid one's
MARGIN = 20.0


def shifted_softmax(scores, mask):
    """Masked softmax without ``where`` or division, for int16x8 attention.

    ``softmax(m * e + (1 - m) * (min(e) - MARGIN))`` over each row: valid positions keep their
    score, padding gets the row's smallest score less :data:`MARGIN` (a value inside the
    scores' own range, unlike ``-inf``, so one int16 scale still resolves the real scores), and
    the builtin ``SOFTMAX`` kernel normalises. Against
    :func:`seqkit.layers.attention.masked_softmax` each padding weight is at most
    ``exp(-MARGIN) ~ 2e-9`` instead of exactly 0 (far below an int16 step, 3e-5); a row with no
    valid position is refused upstream (seq2seq exports skip empty sources).

    Args:
        scores: ``[B, S]`` float32 scores ``e``.
        mask: ``[B, S]`` float32 1 / 0 (or bool).

    Returns:
        ``[B, S]`` float32 weights; each row sums to 1.
    """
    import tensorflow as tf

    scores = tf.cast(scores, tf.float32)
    m = tf.cast(mask, tf.float32)
    low = tf.reduce_min(scores, axis=-1, keepdims=True) - MARGIN
    return tf.nn.softmax(m * scores + (1.0 - m) * low, axis=-1)


@contextlib.contextmanager
def shifted_attention():
    """For the block, :mod:`seqkit.layers.attention` weighs with :func:`shifted_softmax`
    (int16x8 has no ``SELECT_V2`` / ``DIV`` kernel for its masked softmax); restored afterwards."""
    from seqkit.layers import attention

    original = attention.masked_softmax
    attention.masked_softmax = shifted_softmax
    try:
        yield
    finally:
        attention.masked_softmax = original
