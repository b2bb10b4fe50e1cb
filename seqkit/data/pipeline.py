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
            :func:`seqkit.data.shuffle.epoch_shuffled`).

    Returns:
        A dataset; padding id is 0 in inputs and targets.
    """
    import tensorflow as tf

    from seqkit.data.shuffle import epoch_shuffled

    lookup = vocab.string_lookup()
    if shuffle:
        ds = epoch_shuffled(examples, seed, first_epoch)
    else:
        ds = tf.data.Dataset.from_tensor_slices(tf.constant(examples, dtype=tf.string))

    def encode(line):
        if lowercase:
            line = tf.strings.lower(line, encoding="utf-8")
        toks = tf.strings.unicode_split(line, "UTF-8") if tokenizer == "char" else tf.strings.split(line)
        ids = tf.cast(lookup(toks), tf.int32)
        x, y = to_pair(ids)
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
