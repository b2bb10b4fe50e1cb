"""Epoch-seeded shuffling that does not depend on how often a dataset is iterated.

``tf.data``'s ``shuffle(reshuffle_each_iteration=True)`` draws a new order on
every new iterator, and Keras opens an extra iterator (one batch, for a
symbolic build) when a model is compiled under a ``tf.distribute`` strategy.
The same recipe would then see different data on one device and on several.
Here epoch ``e`` always uses the permutation ``default_rng([seed, e])``, and
the epoch counter advances only when a full pass has been read.
"""

from __future__ import annotations

import numpy as np


def epoch_order(n: int, seed: int, first_epoch: int = 0):
    """A ``tf.data.Dataset`` of the indices ``0..n-1`` (int64), in a seeded new order each full pass.

    Args:
        n: number of examples.
        seed: the recipe seed.
        first_epoch: the epoch the first pass belongs to (a resumed run passes
            its next epoch, so it sees the order an uninterrupted run would).

    Returns:
        A dataset of scalar ``tf.int64`` indices; pass ``k`` (from ``first_epoch``)
        is ``numpy.random.default_rng([seed, k]).permutation(n)``.
    """
    return _permutations(n, seed, first_epoch).unbatch()


def _permutations(n: int, seed: int, first_epoch: int):
    """A dataset whose element ``k`` is pass ``k``'s whole permutation (``[n]`` int64)."""
    import tensorflow as tf

    state = {"epoch": first_epoch}

    def gen():
        # one whole permutation per pass: a Python generator yielding index by index cost
        # ~0.4 ms an example and was the slowest stage of the input pipeline
        yield np.random.default_rng([seed, state["epoch"]]).permutation(n)
        state["epoch"] += 1  # reached only once the pass's last element has been taken

    return tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([n], tf.int64))


def epoch_shuffled(examples: list, seed: int, first_epoch: int = 0):
    """``examples`` (strings) in the order of :func:`epoch_order`: a dataset of scalar ``tf.string``."""
    import tensorflow as tf

    table = tf.constant(list(examples), dtype=tf.string)
    # per index, not per whole permutation: tf.data may run a map ahead of its consumer, and a
    # map over permutations would pull the next pass (and advance the epoch) on a partial read
    return epoch_order(len(examples), seed, first_epoch).map(lambda i: tf.gather(table, i))
