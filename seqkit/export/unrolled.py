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
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def unrolled(model):
    """For the block, every ``keras.layers.RNN`` inside ``model`` (``Bidirectional`` halves
    included) runs Keras's generic loop with ``unroll=True`` whenever the time axis of its
    input is static (a pinned export); with a dynamic one (the SavedModel's default
    signature, traced when it is written) it runs as before. Restored afterwards.

    The fused CPU layers (:class:`seqkit.layers.fused_lstm.FusedLSTM`, ``FusedGRU``) have the
    same weights as ``keras.layers.LSTM`` / ``GRU``, so the generic loop computes the same
    function.
    """
    import keras

    layers = [lay for lay in model._flatten_layers(include_self=True, recursive=True)
              if isinstance(lay, keras.layers.RNN)]

    def patch(layer):
        original = layer.inner_loop

        def inner_loop(sequences, initial_state, mask, training=False):
            if sequences.shape[1] is None:
                return original(sequences, initial_state, mask, training=training)
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
