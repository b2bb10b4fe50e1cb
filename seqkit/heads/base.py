"""The task-head contract.

A head turns the encoder into a trainable ``keras.Model`` and says how raw
examples become ``(inputs, targets)``, which loss and metrics apply (padding
excluded) and, for heads that can stream or generate, how to take one step.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from seqkit.cells.base import NoOptions


class Head:
    """Base class for task heads; subclass and decorate with ``@register_head``.

    Args:
        recipe: the validated :class:`seqkit.recipe.Recipe`.
        vocab: the input :class:`seqkit.data.vocab.Vocabulary`.

    Class attributes:
        Options: pydantic model of the head's own recipe keys (under ``head``).
        causal: True when the head must not see the future (refuses bidirectional).
    """

    Options: ClassVar[type[BaseModel]] = NoOptions
    causal: ClassVar[bool] = False

    def __init__(self, recipe, vocab):
        self.recipe = recipe
        self.vocab = vocab
        self.options = recipe.head_options

    def to_pair(self, ids):
        """``ids [T] int32`` -> ``(inputs [T'], targets [T'])`` tensors for training."""
        raise NotImplementedError

    def build_model(self):
        """Return the training ``keras.Model``."""
        raise NotImplementedError

    def loss(self):
        """The training loss (padding positions excluded)."""
        from seqkit.losses import MaskedSparseCrossEntropy

        return MaskedSparseCrossEntropy()

    def metrics(self) -> list:
        """Metrics reported each epoch (padding positions excluded); the first
        ``cross_entropy`` one is what checkpoints and early stopping watch."""
        from seqkit.losses import MaskedAccuracy, MaskedCrossEntropy

        return [MaskedCrossEntropy(), MaskedAccuracy()]

    def summarize(self, results: dict) -> dict:
        """Turn ``model.evaluate`` results into the metrics reported for this head."""
        return {k: float(v) for k, v in results.items()}

    def baselines(self, prep) -> dict:
        """Figures of trivial models on the same splits, for comparison (may be empty)."""
        return {}
