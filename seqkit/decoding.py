"""Autoregressive decoding: greedy and sampling (temperature, top-k), in-graph and batched.

All procedures take a *step function*
``step_fn(token [B] int32, states: list of [B, H]) -> (logits [B, V], new_states)``
and run inside ``tf.while_loop``, so they can be traced into a SavedModel.
"""

from __future__ import annotations

from seqkit.data.vocab import END_ID, PAD_ID


def filter_logits(logits, temperature: float = 1.0, top_k: int = 0):
    """Scale logits by ``1 / temperature`` and keep only the ``top_k`` largest (0 = all).

    Args:
        logits: ``[B, V]`` float32.
        temperature: > 0; below 1 sharpens, above 1 flattens the distribution.
        top_k: keep the k best tokens per row (ties at the k-th value are kept).

    Returns:
        ``[B, V]`` float32 logits, ``-inf`` where filtered out.
    """
    import tensorflow as tf

    logits = tf.cast(logits, tf.float32) / tf.cast(temperature, tf.float32)
    if top_k and top_k > 0:
        k = tf.minimum(tf.cast(top_k, tf.int32), tf.shape(logits)[-1])
        kth = tf.math.top_k(logits, k=k).values[:, -1:]
        logits = tf.where(logits < kth, tf.cast(-float("inf"), logits.dtype), logits)
    return logits


def decode(step_fn, states, prompt, *, max_length: int, greedy: bool, temperature: float = 1.0,
           top_k: int = 0, stop_id: int = END_ID, seed: int = 0):
    """Continue ``prompt`` token by token until ``stop_id`` or ``max_length`` new tokens.

    Args:
        step_fn: see the module docstring.
        states: initial recurrent states, list of ``[B, H]`` float32.
        prompt: ``[B, P]`` int32, ``P >= 1``, all rows the same length (the
            first id is normally the start marker); its last token is the
            first input of generation.
        max_length: most new tokens per row.
        greedy: arg-max at each step; otherwise sample from
            ``softmax(filter_logits(logits, temperature, top_k))``.
        stop_id: a row is finished once it emits this id; later positions are
            ``PAD_ID`` (0).
        seed: sampling seed (``tf.random.stateless_categorical``): equal seeds,
            equal samples.

    Returns:
        ``(tokens [B, L] int32, lengths [B] int32)``, ``L <= max_length``;
        ``lengths`` counts tokens before the stop token (the stop token itself
        is kept in ``tokens``).
    """
    import tensorflow as tf

    prompt = tf.convert_to_tensor(prompt, tf.int32)
    states = [tf.convert_to_tensor(s) for s in states]
    batch = tf.shape(prompt)[0]

    # Prefill: read all prompt tokens but the last.
    def pre_body(i, *st):
        _, new = step_fn(prompt[:, i], list(st))
        return (i + 1, *[tf.ensure_shape(n, s.shape) for n, s in zip(new, st)])

    p_len = tf.shape(prompt)[1]
    out = tf.while_loop(lambda i, *st: i < p_len - 1, pre_body, (tf.constant(0), *states))
    states = list(out[1:])
    last = prompt[:, -1]

    ta = tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=tf.TensorShape([None]))
    finished = tf.zeros([batch], tf.bool)
    lengths = tf.zeros([batch], tf.int32)
    seed_t = tf.cast(seed, tf.int32)

    def body(t, last, finished, lengths, ta, *st):
        logits, new = step_fn(last, list(st))
        if greedy:
            nxt = tf.argmax(logits, axis=-1, output_type=tf.int32)
        else:
            filtered = filter_logits(logits, temperature, top_k)
            nxt = tf.random.stateless_categorical(filtered, 1, seed=tf.stack([seed_t, t]),
                                                  dtype=tf.int32)[:, 0]
        nxt = tf.ensure_shape(tf.where(finished, tf.zeros_like(nxt) + PAD_ID, nxt), last.shape)
        new = [tf.ensure_shape(n, s.shape) for n, s in zip(new, st)]
        lengths = lengths + tf.cast(tf.logical_and(~finished, nxt != stop_id), tf.int32)
        finished = tf.logical_or(finished, nxt == stop_id)
        return (t + 1, nxt, finished, lengths, ta.write(t, nxt), *new)

    def cond(t, last, finished, lengths, ta, *st):
        return tf.logical_and(t < max_length, tf.logical_not(tf.reduce_all(finished)))

    res = tf.while_loop(cond, body, (tf.constant(0), last, finished, lengths, ta, *states))
    tokens = tf.transpose(res[4].stack())  # [B, L]
    return tokens, res[3]
