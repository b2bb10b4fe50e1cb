"""tf.data pipelines: strings -> token ids (StringLookup) -> bucketed, padded batches."""

from __future__ import annotations

import numpy as np

from seqkit.data.vocab import Vocabulary


def bucket_boundaries(max_length: int, n: int = 8) -> list[int]:
    """Geometric length boundaries up to ``max_length`` (a bounded set of batch shapes)."""
    b = np.unique(np.geomspace(8, max(9, max_length), num=n).astype(int))
    return [int(x) for x in b if 1 < x < max_length] + [max_length + 1]


def make_dataset(examples: list[str], vocab: Vocabulary, to_pair, *, tokenizer: str,
                 lowercase: bool, batch_size: int, max_length: int, shuffle: bool, seed: int,
                 bucket: bool = True, first_epoch: int = 0):
    """Build a ``tf.data.Dataset`` of padded ``(inputs [B, T], targets [B, T])`` int32 batches.

    Args:
        examples: raw strings.
        vocab: maps tokens to ids via ``keras.layers.StringLookup``.
        to_pair: ``ids [T] int32 -> (inputs [T'], targets [T'])``, the head's
            training view (e.g. teacher forcing for a language model).
        tokenizer: ``"char"`` or ``"whitespace"``.
        batch_size: examples per batch.
        max_length: longest ``T'``; longer pairs are cut to it.
        shuffle: shuffle examples each epoch (seeded) — for training.
        bucket: batch examples of similar length together (less padding).
        first_epoch: with ``shuffle``, the epoch of the first pass (see
            :func:`seqkit.data.shuffle.epoch_order`).

    Returns:
        A dataset; padding id is 0 in inputs and targets.
    """
    import tensorflow as tf

    from seqkit.data.shuffle import epoch_order

    lookup = vocab.string_lookup()
    # tokenize and look every example up once, vectorized (string ops line by line were the
    # slowest stage); each epoch then only gathers rows in its order
    lines = tf.constant(list(examples), dtype=tf.string)
    if lowercase:
        lines = tf.strings.lower(lines, encoding="utf-8")
    toks = tf.strings.unicode_split(lines, "UTF-8") if tokenizer == "char" else tf.strings.split(lines)
    ids = tf.cast(lookup(toks), tf.int32)  # ragged [N, None]
    if shuffle:
        ds = epoch_order(len(examples), seed, first_epoch)
    else:
        ds = tf.data.Dataset.range(len(examples))

    def encode(i):
        x, y = to_pair(ids[i])
        return x[:max_length], y[:max_length]

    ds = ds.map(encode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if bucket:
        bounds = bucket_boundaries(max_length)
        ds = ds.bucket_by_sequence_length(
            element_length_func=lambda x, y: tf.shape(x)[0],
            bucket_boundaries=bounds,
            bucket_batch_sizes=[batch_size] * (len(bounds) + 1),
            padded_shapes=([None], [None]), padding_values=(0, 0), drop_remainder=False)
    else:
        ds = ds.padded_batch(batch_size, padded_shapes=([None], [None]), padding_values=(0, 0))
    return ds.prefetch(tf.data.AUTOTUNE)


def make_array_dataset(inputs: list, targets: list, *, batch_size: int, shuffle: bool, seed: int,
                       bucket: bool, max_length: int, first_epoch: int = 0):
    """A ``tf.data.Dataset`` of padded batches from already-encoded examples.

    Args:
        inputs: per example either token ids ``[T] int32`` (padded with 0) or
            frames ``[T, D] float32`` (padded with NaN, see :mod:`seqkit.layers.frame_mask`).
        targets: per example a class target ``int`` (shape ``[]``) or a tag target
            ``[T] int32``; padded with 0 ("no target").
        batch_size: examples per batch.
        shuffle: shuffle each epoch (seeded), for training.
        bucket: batch examples of similar length (training); without it batches
            keep the given order (evaluation, prediction).
        max_length: the longest ``T`` (sets the bucket boundaries).
        first_epoch: with ``shuffle``, the epoch of the first pass (see
            :func:`seqkit.data.shuffle.epoch_order`).

    Returns:
        Batches ``(inputs [B, T] int32 | [B, T, D] float32, targets [B] | [B, T] int32)``.
    """
    import tensorflow as tf

    frames = inputs[0].ndim == 2
    lengths = np.array([len(x) for x in inputs], "int64")
    starts = tf.constant(np.concatenate([[0], np.cumsum(lengths)]), tf.int64)
    flat_x = np.concatenate(inputs, axis=0).astype("float32" if frames else "int32")
    per_step = np.ndim(targets[0]) == 1
    tx = tf.constant(flat_x)
    ty = tf.constant(np.concatenate(targets, axis=0).astype("int32") if per_step
                     else np.asarray(targets, "int32"))

    def take(i):  # example i: a slice of the flat arrays (no Python per element)
        a, b = starts[i], starts[i + 1]
        return tx[a:b], (ty[a:b] if per_step else ty[i])

    from seqkit.data.shuffle import epoch_order

    ds = epoch_order(len(inputs), seed, first_epoch) if shuffle else tf.data.Dataset.range(len(inputs))
    ds = ds.map(take, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    x_shape = [None, flat_x.shape[1]] if frames else [None]
    shapes = (x_shape, [None] if per_step else [])
    pads = (tf.constant(np.nan if frames else 0, tf.float32 if frames else tf.int32), tf.constant(0, tf.int32))
    if bucket:
        bounds = bucket_boundaries(max_length)
        ds = ds.bucket_by_sequence_length(
            element_length_func=lambda x, y: tf.shape(x)[0], bucket_boundaries=bounds,
            bucket_batch_sizes=[batch_size] * (len(bounds) + 1), padded_shapes=shapes,
            padding_values=pads, drop_remainder=False)
    else:
        ds = ds.padded_batch(batch_size, padded_shapes=shapes, padding_values=pads)
    return ds.prefetch(tf.data.AUTOTUNE)


def make_pair_dataset(sources: list, targets: list, *, batch_size: int, shuffle: bool, seed: int,
                      bucket: bool, max_length: int, first_epoch: int = 0):
    """Teacher-forced encoder-decoder batches from already-encoded ``(source, target)`` pairs.

    Args:
        sources: per example the source ids ``[S] int32`` (no padding inside; may be empty).
        targets: per example the target ids ``[U] int32`` without markers.
        batch_size, shuffle, seed, bucket, max_length, first_epoch: as
            :func:`make_array_dataset` (buckets follow the source length).

    Returns:
        Batches ``((source [B, S], decoder_inputs [B, U+1]), targets [B, U+1])``, all int32,
        padded with 0; ``decoder_inputs = [<s>] + target``, ``targets = target + [</s>]``
        (:func:`seqkit.heads.seq2seq.seq2seq_pair`).
    """
    import tensorflow as tf

    from seqkit.data.shuffle import epoch_order
    from seqkit.heads.seq2seq import seq2seq_pair

    def flat(seqs):
        lengths = np.array([len(x) for x in seqs], "int64")
        starts = tf.constant(np.concatenate([[0], np.cumsum(lengths)]), tf.int64)
        values = np.concatenate([np.asarray(x, "int32").reshape(-1) for x in seqs] + [np.zeros(0, "int32")])
        return starts, tf.constant(values, tf.int32)

    (s_at, s_val), (t_at, t_val) = flat(sources), flat(targets)

    def take(i):
        return seq2seq_pair(s_val[s_at[i]:s_at[i + 1]], t_val[t_at[i]:t_at[i + 1]])

    ds = epoch_order(len(sources), seed, first_epoch) if shuffle else tf.data.Dataset.range(len(sources))
    ds = ds.map(take, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    shapes = (([None], [None]), [None])
    zero = tf.constant(0, tf.int32)
    pads = ((zero, zero), zero)
    if bucket:
        bounds = bucket_boundaries(max_length)
        ds = ds.bucket_by_sequence_length(
            element_length_func=lambda x, y: tf.shape(x[0])[0], bucket_boundaries=bounds,
            bucket_batch_sizes=[batch_size] * (len(bounds) + 1), padded_shapes=shapes,
            padding_values=pads, drop_remainder=False)
    else:
        ds = ds.padded_batch(batch_size, padded_shapes=shapes, padding_values=pads)
    return ds.prefetch(tf.data.AUTOTUNE)
