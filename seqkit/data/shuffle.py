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


def epoch_shuffled(examples: list, seed: int, first_epoch: int = 0):
    """A ``tf.data.Dataset`` of ``examples`` (strings), in a seeded new order each full pass.

    Args:
        examples: the examples (str).
        seed: the recipe seed.
        first_epoch: the epoch the first pass belongs to (a resumed run passes
            its next epoch, so it sees the order an uninterrupted run would).

    Returns:
        A dataset of scalar ``tf.string`` elements.
    """
    import tensorflow as tf

    items = np.asarray(examples, dtype=object)
    state = {"epoch": first_epoch}

    def gen():
        order = np.random.default_rng([seed, state["epoch"]]).permutation(len(items))
        for i in order:
            yield items[i]
        state["epoch"] += 1  # only a completed pass counts as an epoch

    return tf.data.Dataset.from_generator(gen, output_signature=tf.TensorSpec([], tf.string))
