"""Epoch-seeded batch plans: which examples go into which batch, pass by pass.

Each pass (epoch) is planned whole in numpy -- a seeded order, then batches
of similar length -- and the plan reaches ``tf.data`` as one element per pass,
so the pipeline does per-batch work only (no per-example Python or per-example
``tf.data`` element).

Order. ``tf.data``'s ``shuffle(reshuffle_each_iteration=True)`` draws a new
order on every new iterator, and Keras opens an extra iterator (one batch, for
a symbolic build) when a model is compiled under a ``tf.distribute`` strategy;
the same recipe would then see different data on one device and on several.
Here pass ``k`` always uses the permutation ``default_rng([seed, k])``, and
the pass counter advances only once the dataset's consumer has read a whole
pass (however far ahead the pipeline itself reads).

Batches. With length boundaries, a plan is exactly what
``Dataset.bucket_by_sequence_length`` (``group_by_window``) yields from the same
order: an example joins the open batch of its length bucket, a batch is
emitted when it fills, and the partial batches left at the end of the pass
follow in ascending bucket order.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import numpy as np


def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """Pass ``epoch``'s order of ``n`` examples: ``int64 [n]``, ``default_rng([seed, epoch]).permutation(n)``."""
    return np.random.default_rng([seed, epoch]).permutation(n)


def batch_plan(order, lengths, batch_size: int, bounds=None) -> tuple[np.ndarray, np.ndarray]:
    """Split ``order`` into batches, bucketing by length as ``bucket_by_sequence_length`` does.

    Args:
        order: example indices in reading order, int ``[n]``.
        lengths: every example's bucketing length, int ``[N]`` (indexed by ``order``).
        batch_size: examples per batch (the last batch of a bucket may be smaller).
        bounds: increasing bucket boundaries; bucket ``i`` holds lengths
            ``bounds[i-1] <= L < bounds[i]``. ``None``: consecutive batches, no bucketing.

    Returns:
        ``(flat int64 [n], splits int64 [nb + 1])``: batch ``j`` is
        ``flat[splits[j]:splits[j + 1]]``.
    """
    order = np.asarray(order, np.int64)
    n = len(order)
    if bounds is None:
        return order, np.append(np.arange(0, n, batch_size), n).astype(np.int64)
    keys = np.searchsorted(np.asarray(bounds), np.asarray(lengths)[order], side="right")
    batches = []  # (position in the pass at which the batch is emitted, members)
    for k in np.unique(keys):
        at = np.flatnonzero(keys == k)
        members = order[at]
        for j in range(0, len(at), batch_size):
            full = j + batch_size <= len(at)
            batches.append((at[j + batch_size - 1] if full else n + k, members[j:j + batch_size]))
    batches.sort(key=lambda b: b[0])
    sizes = [len(m) for _, m in batches]
    flat = np.concatenate([m for _, m in batches]) if batches else np.zeros(0, np.int64)
    return flat, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def epoch_batches(lengths, batch_size: int, *, bounds=None, shuffle: bool = False, seed: int = 0,
                  first_epoch: int = 0, batches=None, steps_per_epoch: int | None = None):
    """A ``tf.data.Dataset`` of batches of example indices, one pass per iterator (or endless).

    Args:
        lengths: each example's bucketing length, int ``[N]``.
        batch_size: examples per batch.
        bounds: bucket boundaries (see :func:`batch_plan`); ``None`` keeps the
            order in consecutive batches.
        shuffle: read pass ``k`` in :func:`epoch_permutation` order (``k``
            counts whole passes from ``first_epoch``); otherwise ``0..N-1``.
        seed: the recipe seed.
        first_epoch: the pass the first iterator reads (a resumed run passes its
            next epoch, so it sees the order an uninterrupted run would).
        batches: ``dataset of index vectors -> dataset``, the per-batch work (e.g.
            gather, pad, prefetch); it may read ahead as far as it likes: the pass
            counter advances only when the consumer of the returned dataset asks past
            its last element. Default: the index vectors themselves.
        steps_per_epoch: an epoch of this many batches, not one pass (Keras then keeps one
            iterator across epochs): the dataset is endless, passes ``k = 0, 1, ...`` back to
            back, and starts ``first_epoch * steps_per_epoch`` batches into that stream (a
            resumed run reads on where an uninterrupted one would). No pass counter.

    Returns:
        A dataset of ``batches``' elements (default ``int64 [b]`` index vectors, ``b <= batch_size``).
    """
    import tensorflow as tf

    lengths = np.asarray(lengths, np.int64)
    n = len(lengths)
    if steps_per_epoch:
        return _endless(lengths, batch_size, bounds, shuffle, seed, first_epoch * steps_per_epoch, batches)
    state = {"epoch": first_epoch}

    def plan(_):  # one Python call per pass (a generator dataset cost ~20 ms to start)
        order = epoch_permutation(n, seed, state["epoch"]) if shuffle else np.arange(n)
        return batch_plan(order, lengths, batch_size, bounds)

    def passed():
        if shuffle:
            state["epoch"] += 1
        return np.False_

    ds = _planned(tf.data.Dataset.range(1), plan, stateful=True)
    ds = batches(ds) if batches is not None else ds
    spec = ds.element_spec

    @tf.autograph.experimental.do_not_convert
    def end_of_pass(_):
        return tf.ensure_shape(tf.numpy_function(passed, [], tf.bool, stateful=True), [])

    @tf.autograph.experimental.do_not_convert
    def never(_):  # filtered out above: only gives the marker the batches' structure
        return tf.nest.map_structure(lambda s: tf.zeros([d or 0 for d in s.shape], s.dtype), spec)

    # The counter must not move when only part of a pass is read (Keras reads one batch to build a
    # model under a strategy), yet ``batches`` runs ahead of its consumer (a parallel map starts up
    # to one call per core at once): a pass of fewer batches than that was counted as read. So the
    # counter moves in an empty dataset concatenated after ``batches``, whose iterator is made
    # only once the consumer has drained the pass, and no prefetch may be injected after it.
    ds = ds.concatenate(tf.data.Dataset.range(1).filter(end_of_pass).map(never))
    opts = tf.data.Options()
    opts.experimental_optimization.inject_prefetch = False
    return ds.with_options(opts)


def _planned(passes, plan, stateful: bool):
    """``passes`` (int64 pass numbers) -> the batches of each pass, ``plan(k) -> (flat, splits)``
    (:func:`batch_plan`) called once per pass, as ``int64 [b]`` index vectors."""
    import tensorflow as tf

    @tf.autograph.experimental.do_not_convert
    def planned(k):
        flat, splits = tf.numpy_function(plan, [k], (tf.int64, tf.int64), stateful=stateful)
        return tf.RaggedTensor.from_row_splits(tf.ensure_shape(flat, [None]), tf.ensure_shape(splits, [None]),
                                               validate=False)

    @tf.autograph.experimental.do_not_convert
    def rows(rt):  # slices of a ragged tensor have ragged specs: make them plain tensors
        return tf.data.Dataset.from_tensor_slices(rt).map(tf.identity)

    return passes.map(planned).flat_map(rows)


def _endless(lengths, batch_size, bounds, shuffle, seed, start, batches):
    """Passes ``0, 1, ...`` back to back from batch ``start`` of that stream (see :func:`epoch_batches`)."""
    import tensorflow as tf

    n = len(lengths)
    per_pass = len(batch_plan(np.arange(n), lengths, batch_size, bounds)[1]) - 1  # same for every order
    if per_pass == 0:
        raise ValueError("no examples to make batches of")
    first_pass, skip = divmod(start, per_pass)

    def plan(k):
        order = epoch_permutation(n, seed, int(k)) if shuffle else np.arange(n)
        return batch_plan(order, lengths, batch_size, bounds)

    ds = _planned(tf.data.Dataset.range(first_pass, 2 ** 62), plan, stateful=False).skip(skip)
    return batches(ds) if batches is not None else ds
