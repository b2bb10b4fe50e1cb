"""Unrolled recurrent layers for pinned-length exports that are quantized to full integer.

A recurrent layer over a whole sequence traces to a ``While`` loop (TFLite
``WHILE``). TensorFlow 2.21's full-integer quantizer (``--quantize int8 | int16x8``)
crashes the process (segmentation fault) while calibrating such a loop, so a
pinned-length model -- a ``--full-sequence`` ``predict``, a seq2seq ``encode`` --
is traced with every ``keras.layers.RNN`` unrolled instead (``unroll=True``: ``T``
copies of the cell, the padding mask applied at each step as in the loop; possible
because ``T`` is pinned). The model then has no ``WHILE`` and its quantized ops are
the step model's. :func:`while_ops` finds a loop that remains (a layer that is not a
``keras.layers.RNN``, or an in-graph Viterbi's ``tf.scan``) so the export can refuse it
before the quantizer runs.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import contextlib


def arithmetic_unroll(layer, sequences, initial_state, mask, training=False):
    """``keras.layers.RNN.inner_loop`` unrolled over the static time axis with the padding mask
    applied by arithmetic instead of ``where``: at each step (in processing order, reversed for
    ``go_backwards``) ``out = m * out_new + (1 - m) * out_prev`` and likewise for every state,
    ``m [B, 1]`` the step's mask as float. For a 0/1 mask and finite values this is exactly what
    Keras's unrolled loop computes with ``where(m, new, prev)`` (``1 * a + 0 * b = a``); it is
    used where TF 2.21's int16x8 quantizer has no kernel for ``SELECT_V2`` nor for a ``CAST``
    of the bool mask, so the mask arrives as float (a float table lookup,
    :mod:`seqkit.export.id_lookups`).

    Returns:
        ``(last_output [B, H], outputs [B, T, H], states)`` as ``inner_loop`` does.
    """
    import keras
    import tensorflow as tf

    kw = {"training": training} if getattr(layer.cell, "_call_has_training_arg", False) else {}
    m = tf.cast(mask, sequences.dtype)  # a float mask: no op
    if len(m.shape) == 3:
        m = m[..., 0]
    T = sequences.shape[1]
    order = range(T - 1, -1, -1) if layer.go_backwards else range(T)
    states = initial_state
    outputs, prev = [], None
    for t in order:
        out, new = layer.cell(sequences[:, t], states, **kw)
        if not keras.tree.is_nested(new):
            new = [new]
        mt = m[:, t:t + 1]
        keep = 1.0 - mt
        prev = tf.zeros_like(out) if prev is None else prev
        out = mt * out + keep * prev
        flat = [mt * n + keep * o for n, o in zip(keras.tree.flatten(new), keras.tree.flatten(states))]
        states = keras.tree.pack_sequence_as(states, flat)
        outputs.append(out)
        prev = out
    last, seq = outputs[-1], tf.stack(outputs, axis=1)
    if layer.zero_output_for_mask:
        ms = tf.stack([m[:, t] for t in order], axis=1)[..., None]
        last, seq = last * ms[:, -1], seq * ms
    return last, seq, states


@contextlib.contextmanager
def unrolled(model, arithmetic_masks: bool = False):
    """For the block, every ``keras.layers.RNN`` inside ``model`` (``Bidirectional`` halves
    included) runs Keras's generic loop with ``unroll=True`` whenever the time axis of its
    input is static (a pinned export); with a dynamic one (the SavedModel's default
    signature, traced when it is written) it runs as before. Restored afterwards.

    The fused CPU layers (:class:`seqkit.layers.fused_lstm.FusedLSTM`, ``FusedGRU``) have the
    same weights as ``keras.layers.LSTM`` / ``GRU``, so the generic loop computes the same
    function. With ``arithmetic_masks`` (int16x8) a masked layer runs :func:`arithmetic_unroll`.
    """
    import keras

    layers = [lay for lay in model._flatten_layers(include_self=True, recursive=True)
              if isinstance(lay, keras.layers.RNN)]

    def patch(layer):
        original = layer.inner_loop

        def inner_loop(sequences, initial_state, mask, training=False):
            if sequences.shape[1] is None:
                return original(sequences, initial_state, mask, training=training)
            if arithmetic_masks and mask is not None:
                return arithmetic_unroll(layer, sequences, initial_state, mask, training=training)
            before = layer.unroll
            object.__setattr__(layer, "unroll", True)
            try:
                return keras.layers.RNN.inner_loop(layer, sequences, initial_state, mask, training=training)
            finally:
                object.__setattr__(layer, "unroll", before)
        object.__setattr__(layer, "inner_loop", inner_loop)

    for lay in layers:
        patch(lay)
    try:
        yield model
    finally:
        for lay in layers:
            object.__delattr__(lay, "inner_loop")


def while_ops(saved_model_dir: str, signatures: list[str]) -> list[str]:
    """Names of the signatures of a SavedModel whose graphs hold a ``While`` loop."""
    import tensorflow as tf

    loaded = tf.saved_model.load(saved_model_dir)
    found = []
    for key in signatures:
        gd = loaded.signatures[key].graph.as_graph_def()
        ops = {n.op for n in gd.node} | {n.op for f in gd.library.function for n in f.node_def}
        if ops & {"While", "StatelessWhile"}:
            found.append(key)
    return found
