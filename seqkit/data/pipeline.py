"""tf.data pipelines: examples -> bucketed, padded batches, with per-batch work only.

Every example is encoded once (tokenized, looked up, made into its training
pair) into ragged columns. Each pass is then planned in numpy
(:func:`seqkit.data.shuffle.epoch_batches`) and a batch is one gather of its
rows plus one pad (``RaggedTensor.to_tensor``): no per-example ``tf.data``
element, which was the pipeline's cost (a text LM read ~0.7 M tokens/s that way,
a hand-written ``TextVectorization`` pipeline ~4.7 M).

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import itertools

import numpy as np

from seqkit.data.shuffle import epoch_batches
from seqkit.data.vocab import Vocabulary


#: What Python's ``str.split()`` splits on besides ASCII whitespace (``tf.strings.split`` splits on
#: ASCII whitespace only), as an RE2 class: the vocabulary and every Python-side reader
#: (:func:`seqkit.data.vocab.tokenize`) use ``str.split()``.
UNICODE_SPACE = (r"[\x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}"
                 r"\x{205f}\x{3000}]")


def bucket_boundaries(max_length: int, n: int = 8) -> list[int]:
    """Geometric length boundaries up to ``max_length`` (a bounded set of batch shapes)."""
    b = np.unique(np.geomspace(8, max(9, max_length), num=n).astype(int))
    return [int(x) for x in b if 1 < x < max_length] + [max_length + 1]


def ragged_column(values, splits):
    """A constant ``tf.RaggedTensor`` ``[N, (T), ...]`` from ``values [total, ...]`` and ``splits int64 [N + 1]``."""
    import tensorflow as tf

    return tf.RaggedTensor.from_row_splits(tf.constant(values), tf.constant(splits, tf.int64), validate=False)


def flat_column(seqs: list, dtype: str):
    """Per-example sequences (``[T]`` lists/arrays or ``[T, D]`` arrays) -> ragged column
    ``[N, (T), ...]`` of ``dtype``."""
    lengths = np.fromiter(map(len, seqs), np.int64, count=len(seqs))
    if seqs and np.ndim(seqs[0]) == 2:
        values = np.concatenate([np.asarray(x, dtype) for x in seqs], axis=0)
    else:  # token ids: one pass over all of them, no per-example array
        values = np.fromiter(itertools.chain.from_iterable(seqs), dtype, count=int(lengths.sum()))
    return ragged_column(values, np.concatenate([[0], np.cumsum(lengths)]))


def padded_batches(columns, pads, lengths, *, batch_size: int, shuffle: bool, seed: int, bucket: bool,
                   max_length: int, first_epoch: int = 0, pack=None, steps_per_epoch: int | None = None):
    """Padded batches of rows of ``columns``, planned per pass by :func:`seqkit.data.shuffle.epoch_batches`.

    Args:
        columns: ``tf.RaggedTensor [N, (T), ...]`` (padded to the batch's longest
            row with its entry of ``pads``) or dense tensors ``[N, ...]`` (gathered).
        pads: one padding value per column (ignored for dense columns).
        lengths: bucketing length of each example, int ``[N]``.
        batch_size, shuffle, seed, first_epoch, steps_per_epoch: see
            :func:`~seqkit.data.shuffle.epoch_batches`.
        bucket: bucket by length with :func:`bucket_boundaries` of ``max_length``.
        pack: ``list of batch tensors -> dataset element`` (default: a tuple).

    Returns:
        A prefetched ``tf.data.Dataset`` of ``pack([column batch, ...])``.
    """
    import tensorflow as tf

    bounds = bucket_boundaries(max_length) if bucket else None
    pack = pack or tuple

    def take(idx):
        out = []
        for col, pad in zip(columns, pads):
            rows = tf.gather(col, idx)
            out.append(rows.to_tensor(default_value=tf.cast(pad, rows.dtype))
                       if isinstance(rows, tf.RaggedTensor) else rows)
        return pack(out)

    return epoch_batches(lengths, batch_size, bounds=bounds, shuffle=shuffle, seed=seed, first_epoch=first_epoch,
                         steps_per_epoch=steps_per_epoch,
                         batches=lambda plan: plan.map(take, num_parallel_calls=tf.data.AUTOTUNE,
                                                       deterministic=True).prefetch(tf.data.AUTOTUNE))


def make_dataset(examples: list[str], vocab: Vocabulary, to_pairs, *, tokenizer: str,
                 lowercase: bool, batch_size: int, max_length: int, shuffle: bool, seed: int,
                 bucket: bool = True, first_epoch: int = 0, steps_per_epoch: int | None = None,
                 split=None):
    """Build a ``tf.data.Dataset`` of padded ``(inputs [B, T], targets [B, T])`` int32 batches.

    Args:
        examples: raw strings (at least one).
        vocab: maps tokens to ids via ``keras.layers.StringLookup``.
        to_pairs: ``ids tf.RaggedTensor [N, (T)] int32 -> (inputs [N, (T')], targets
            [N, (T')])`` ragged, the head's training view of every example (e.g.
            teacher forcing for a language model, :meth:`LanguageModelHead.to_pairs
            <seqkit.heads.language_model.LanguageModelHead.to_pairs>`); called once.
        tokenizer: ``"char"`` or ``"whitespace"`` (split in TensorFlow), or any mode with
            ``split``.
        batch_size: examples per batch.
        max_length: longest ``T'``; longer pairs are cut to it.
        shuffle: shuffle examples each epoch (seeded) — for training.
        bucket: batch examples of similar length together (less padding).
        first_epoch: with ``shuffle``, the epoch of the first pass (see
            :func:`seqkit.data.shuffle.epoch_batches`).
        steps_per_epoch: epochs of this many batches over an endless stream of passes
            (``training.steps_per_epoch``; see :func:`seqkit.data.shuffle.epoch_batches`).
        split: ``str -> list[str]`` token splitter run in Python per example (e.g. a
            sentencepiece :meth:`~seqkit.data.subword.TextTokenizer.split`, lowercasing
            included); ``None``: ``tokenizer`` in TensorFlow.

    Returns:
        A dataset; padding id is 0 in inputs and targets.
    """
    import tensorflow as tf

    if split is not None:  # ids from Python, one ragged column
        seqs = [vocab.encode(split(x)) for x in examples]
        ids = flat_column(seqs, "int32")
    else:
        ids = None
    lookup = vocab.string_lookup() if ids is None else None
    # tokenize and look every example up once, vectorized (string ops line by line were the
    # slowest stage)
    if ids is None:
        lines = tf.constant(list(examples), dtype=tf.string)
        if lowercase:
            lines = tf.strings.lower(lines, encoding="utf-8")
        if tokenizer == "char":
            toks = tf.strings.unicode_split(lines, "UTF-8")
        else:  # as str.split(): a no-break space or an ideographic space separates words too
            toks = tf.strings.split(tf.strings.regex_replace(lines, UNICODE_SPACE, " "))
        ids = tf.cast(lookup(toks), tf.int32)  # ragged [N, None]

    x, y = (tf.cast(t, tf.int32)[:, :max_length] for t in to_pairs(ids))
    return padded_batches([x, y], [0, 0], x.row_lengths().numpy(), batch_size=batch_size,
                          shuffle=shuffle, seed=seed, bucket=bucket, max_length=max_length,
                          first_epoch=first_epoch, steps_per_epoch=steps_per_epoch)


def make_array_dataset(inputs: list, targets: list, *, batch_size: int, shuffle: bool, seed: int,
                       bucket: bool, max_length: int, first_epoch: int = 0, steps_per_epoch: int | None = None):
    """A ``tf.data.Dataset`` of padded batches from already-encoded examples.

    Args:
        inputs: per example either token ids ``[T] int32`` (padded with 0), packed word and
            character ids ``[T, 1 + W] int32`` (padded with 0, :mod:`seqkit.data.word_chars`) or
            frames ``[T, D] float32`` (padded with NaN, see :mod:`seqkit.layers.frame_mask`).
        targets: per example a class target ``int`` (shape ``[]``) or a tag target
            ``[T] int32``; padded with 0 ("no target"). Real-valued targets (a float, or ``[T]``
            floats: e.g. a regression head's) stay float32.
        batch_size: examples per batch.
        shuffle: shuffle each epoch (seeded), for training.
        bucket: batch examples of similar length (training); without it batches
            keep the given order (evaluation, prediction).
        max_length: the longest ``T`` (sets the bucket boundaries).
        first_epoch: with ``shuffle``, the epoch of the first pass (see
            :func:`seqkit.data.shuffle.epoch_batches`).
        steps_per_epoch: as :func:`make_dataset`.

    Returns:
        Batches ``(inputs [B, T] int32 | [B, T, 1 + W] int32 | [B, T, D] float32, targets [B] | [B, T]
        int32, or float32 for real-valued targets)``.
    """
    import tensorflow as tf

    frames = np.ndim(inputs[0]) == 2 and np.asarray(inputs[0]).dtype.kind == "f"
    x = flat_column(inputs, "float32" if frames else "int32")
    per_step = np.ndim(targets[0]) == 1
    ty = "float32" if np.asarray(targets[0]).dtype.kind == "f" else "int32"
    y = flat_column(targets, ty) if per_step else tf.constant(np.asarray(targets, ty))
    return padded_batches([x, y], [np.nan if frames else 0, 0], [len(v) for v in inputs],
                          batch_size=batch_size, shuffle=shuffle, seed=seed, bucket=bucket,
                          max_length=max_length, first_epoch=first_epoch, steps_per_epoch=steps_per_epoch)
