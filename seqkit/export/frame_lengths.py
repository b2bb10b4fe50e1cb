"""A ``lengths`` input for full-integer full-sequence frame exports, in place of NaN padding.

A frame model marks padding with NaN frames (:class:`~seqkit.layers.frame_mask.FrameMask`).
A full-integer model (``--quantize int8 | int16x8``) quantizes its float input before any
op reads it, and no int8 / int16 value is NaN: the mask test (``x != x``) is then never true,
every padding frame is read as data, and the bidirectional encoder's backward pass starts
on it (the JapaneseVowels acceptor fell to 0.58 agreement). The int16x8 kernels also lack the
test's ops (``NOT_EQUAL``, ``REDUCE_ANY``, ``LOGICAL_NOT`` on float data).

So the ``--full-sequence`` ``predict`` of a full-integer frame export takes
``frames [B, T, D] float32`` (padding: any finite value; the runtime writes 0) **and**
``lengths [B] int32`` (valid frames per row, right padding); the mask is
``range(T) < lengths`` (traced as a table lookup, :func:`seqkit.export.id_lookups.length_mask`,
so int16x8 converts), passed layer by layer to the recurrent stack and the pooling as the
NaN mask is in the float model (:func:`masked_call`). ``metadata.json``'s
``full_sequence.lengths`` names the input; :class:`seqkit.runtime.full_sequence.FullSequenceModel`
feeds it. Float exports keep NaN padding.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

from seqkit.errors import SeqkitError
from seqkit.export.id_lookups import length_mask

LENGTHS = "lengths"


def chain_layers(model) -> list:
    """The layers of ``model`` after its input, in order, when each reads the one before it
    (the acceptor / tagger models: input, ``FrameMask``, recurrent stack, pooling, dense).

    Raises:
        SeqkitError: the model is not such a chain (the mask could not be passed by hand).
    """
    import keras

    layers = model.layers[1:]
    for prev, layer in zip(model.layers, layers):
        nodes = getattr(layer, "_inbound_nodes", [])
        srcs = [t._keras_history.operation for t in nodes[0].arguments.keras_tensors] if len(nodes) == 1 else []
        # besides its input a layer may read the mask, which Keras ops (not layers) computed
        if not srcs or srcs[0] is not prev or any(isinstance(o, keras.layers.Layer) for o in srcs[1:]):
            raise SeqkitError(f"full-integer frame export: layer '{layer.name}' does not read the "
                              f"layer before it ('{prev.name}') alone, so the padding mask cannot "
                              f"be passed through the model by hand; export the step model, or use "
                              f"--quantize dynamic-range.")
    return layers


def masked_call(model, x, mask):
    """``model`` applied to ``x`` layer by layer with ``mask`` ([B, T] bool) as the frames' mask:
    the ``FrameMask`` layer is skipped (its NaN test is in the functional graph itself, so it
    cannot be switched off inside ``model(x)``) and each later layer gets the mask its
    predecessor computes, as in ``model(x)`` with NaN padding."""
    from seqkit.layers.frame_mask import FrameMask

    for layer in chain_layers(model):
        if isinstance(layer, FrameMask):
            continue
        y = layer(x, mask=mask, training=False) if mask is not None else layer(x, training=False)
        mask = layer.compute_mask(x, mask) if getattr(layer, "supports_masking", False) else None
        x = y
    return x


def lengths_predict_fn(prep, model, length: int, mask_dtype="bool"):
    """``predict(frames [B, T, D], lengths [B] int32) -> {"logits"}`` (see the module docstring)."""
    import tensorflow as tf

    inputs = prep.head.inputs
    mean = tf.constant(inputs.normalizer.mean, tf.float32)
    std = tf.constant(inputs.normalizer.std, tf.float32)
    chain_layers(model)  # refuse early

    def predict(frames, lengths):
        mask = length_mask(lengths, length, mask_dtype)  # range(T) < lengths, read by a GATHER alone
        return {"logits": masked_call(model, (frames - mean) / std, mask)}
    return predict


def lengths_spec(batch: int):
    import tensorflow as tf

    return tf.TensorSpec([batch], tf.int32, name=LENGTHS)
