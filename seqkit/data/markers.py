"""Start/end markers around token ids, for one sequence ``[T]`` or a ragged batch ``[N, (T)]``.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations


def add_markers(ids, *, start: int | None = None, end: int | None = None):
    """``ids`` with ``start`` put before and ``end`` after every sequence (``None``: none).

    Args:
        ids: one sequence ``[T]`` (tensor or array) or a batch ``tf.RaggedTensor [N, (T)]``; int.

    Returns:
        int32 ``[T + k]`` or ``tf.RaggedTensor [N, (T + k)]`` with ``k`` the markers added.
    """
    import tensorflow as tf

    ragged = isinstance(ids, tf.RaggedTensor)
    ids = tf.cast(ids, tf.int32)
    if ragged:
        def column(v):
            return tf.fill(tf.stack([ids.nrows(out_type=tf.int32), 1]), v)
        axis = 1
    else:
        def column(v):
            return tf.constant([v], tf.int32)
        axis = 0
    parts = ([column(start)] if start is not None else []) + [ids] + ([column(end)] if end is not None else [])
    return tf.concat(parts, axis=axis) if len(parts) > 1 else ids


def drop_last(ids):
    """Every sequence without its last step: ``[T] -> [T - 1]`` or ``[N, (T)] -> [N, (T - 1)]``."""
    import tensorflow as tf

    return ids[:, :-1] if isinstance(ids, tf.RaggedTensor) else ids[:-1]
