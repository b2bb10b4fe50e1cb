"""The task-head contract.

A head owns everything between records and a trained model:

* :meth:`Head.check_records` validates (and may cut or chunk) the records a
  data source gave, with counted warnings or a :class:`DataError`;
* :meth:`Head.fit` builds the head's *assets* from the training split only --
  input vocabulary, label/tag vocabulary, frame normaliser -- and
  :meth:`Head.save_assets` / :meth:`Head.load_assets` keep them in the run
  directory, so evaluation and prediction encode exactly as training did;
* :meth:`Head.dataset` turns records into a batched ``tf.data.Dataset`` of
  ``(inputs, targets)``;
* :meth:`Head.build_model`, :meth:`Head.loss`, :meth:`Head.metrics` make the
  trainable ``keras.Model`` (padding excluded from loss and metrics);
* :meth:`Head.evaluate` and :meth:`Head.baselines` give the figures in
  ``metrics.json``.
"""

from __future__ import annotations

import abc
from typing import ClassVar

from pydantic import BaseModel

from seqkit.cells.base import NoOptions


class Head(abc.ABC):
    """Base class for task heads; subclass and decorate with ``@register_head``.

    Args:
        recipe: the validated :class:`seqkit.recipe.Recipe`.
        vocab: the input :class:`seqkit.data.vocab.Vocabulary`, when already
            known (otherwise :meth:`fit` or :meth:`load_assets` provides it).

    Class attributes:
        Options: pydantic model of the head's own recipe keys (under ``head``).
        causal: True when the head must not see the future (refuses bidirectional).
    """

    Options: ClassVar[type[BaseModel]] = NoOptions
    causal: ClassVar[bool] = False

    def __init__(self, recipe, vocab=None):
        self.recipe = recipe
        self.vocab = vocab
        self.options = recipe.head_options

    # ---------------------------------------------------------------- data
    def check_records(self, records: list, split: str) -> list:
        """Validate the records of one loaded list (``split`` is ``all``, ``train``, ...).

        Returns the records to use (possibly cut or chunked, with a counted warning).

        Raises:
            seqkit.errors.DataError: records this head cannot use.
        """
        return records

    @abc.abstractmethod
    def fit(self, train: list) -> None:
        """Build the head's assets (vocabularies, normaliser) from the training records."""

    @abc.abstractmethod
    def save_assets(self, run_dir: str) -> None:
        """Write the assets made by :meth:`fit` into ``run_dir`` (atomic writes)."""

    @abc.abstractmethod
    def load_assets(self, run_dir: str) -> None:
        """Read the assets written by :meth:`save_assets`.

        Raises:
            seqkit.errors.RunDirError: a file is missing or malformed.
        """

    def describe_assets(self) -> str:
        """One line for logs, e.g. ``"vocabulary 120, 9 labels"``."""
        return f"vocabulary {len(self.vocab)}" if self.vocab is not None else ""

    # ---------------------------------------------------------------- text
    @property
    def tokenizer(self):
        """The input side's :class:`~seqkit.data.subword.TextTokenizer` (``data.tokenizer``,
        ``data.lowercase``): the one :meth:`fit_tokenizer` trained or :meth:`load_tokenizer`
        read; ``char`` and ``whitespace`` need neither.

        Raises:
            seqkit.errors.SeqkitError: ``sentencepiece`` before the model was trained or loaded.
        """
        tok = self.__dict__.get("_tokenizer")
        if tok is None:
            from seqkit.data.subword import TextTokenizer
            from seqkit.errors import SeqkitError

            d = self.recipe.data
            if d.tokenizer == "sentencepiece":
                raise SeqkitError("data.tokenizer sentencepiece: the model is trained by fit() on "
                                  "the training split or read by load_assets() from a run directory.")
            tok = TextTokenizer(d.tokenizer, d.lowercase)
        return tok

    @tokenizer.setter
    def tokenizer(self, value):
        self.__dict__["_tokenizer"] = value

    def fit_tokenizer(self, texts) -> None:
        """Train the input tokenizer on the training split's ``texts`` (sentencepiece only)."""
        from seqkit.data.subword import TextTokenizer

        d = self.recipe.data
        self.tokenizer = TextTokenizer.fit(d.tokenizer, d.lowercase, texts, d.subword)

    def save_tokenizer(self, run_dir: str) -> None:
        """Write the input tokenizer's model (``subword.model``) into ``run_dir``, if it has one."""
        if self.recipe.data.tokenizer == "sentencepiece":
            self.tokenizer.save(run_dir)

    def load_tokenizer(self, run_dir: str) -> None:
        """Read the input tokenizer a run directory saved (:meth:`save_tokenizer`).

        Raises:
            seqkit.errors.RunDirError: ``sentencepiece`` and no readable ``subword.model``.
        """
        from seqkit.data.subword import TextTokenizer

        d = self.recipe.data
        self.tokenizer = TextTokenizer.load(run_dir, d.tokenizer, d.lowercase)

    @abc.abstractmethod
    def dataset(self, records: list, *, training: bool, first_epoch: int = 0):
        """A batched ``tf.data.Dataset`` of ``(inputs, targets)``; when ``training``, shuffled
        per epoch with :func:`seqkit.data.shuffle.epoch_batches` starting at ``first_epoch``
        (with ``training.steps_per_epoch``, an endless stream of passes that starts
        ``first_epoch * steps_per_epoch`` batches in)."""

    # ---------------------------------------------------------------- model
    @abc.abstractmethod
    def build_model(self):
        """Return the training ``keras.Model``."""

    def loss(self):
        """The training loss (padding positions excluded)."""
        from seqkit.training.losses import MaskedSparseCrossEntropy

        return MaskedSparseCrossEntropy(label_smoothing=self.recipe.training.label_smoothing)

    def metrics(self) -> list:
        """Metrics reported each epoch (padding positions excluded); the first
        ``cross_entropy`` one is what checkpoints and early stopping watch."""
        from seqkit.training.losses import MaskedAccuracy, MaskedCrossEntropy

        return [MaskedCrossEntropy(), MaskedAccuracy()]

    # ---------------------------------------------------------------- figures
    def summarize(self, results: dict) -> dict:
        """Turn ``model.evaluate`` results into the metrics reported for this head."""
        return {k: float(v) for k, v in results.items()}

    def evaluate(self, model, records: list) -> dict:
        """Exact metrics of ``model`` on ``records`` (default: ``model.evaluate`` + :meth:`summarize`)."""
        from seqkit.progress import keras_evaluate

        return self.summarize(keras_evaluate(model, self.dataset(records, training=False)))

    def baselines(self, prep) -> dict:
        """Figures of trivial models on the same splits, for comparison (may be empty)."""
        return {}

    def format_metrics(self, figures: dict) -> list[str]:
        """Console lines for one split's figures (default: ``name value`` pairs)."""
        return [", ".join(f"{k} {v:.4f}" for k, v in figures.items() if isinstance(v, (int, float)))]
