"""What the acceptor and tagger heads share: inputs, a class vocabulary, batching,
prediction in input order, and the counting of classes unseen in training.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow."""

from __future__ import annotations

import abc
import os
import types

import numpy as np

from seqkit import log
from seqkit.data.base import text_tokenizer
from seqkit.data.labels import LabelVocabulary
from seqkit.data.pipeline import make_array_dataset
from seqkit.data.subword import TextTokenizer
from seqkit.errors import DataError, SeqkitError
from seqkit.export.parity import sequence_inputs
from seqkit.heads.base import Head
from seqkit.heads.sequence.inputs import SequenceInputs, apply_too_long
from seqkit.heads.sequence.predict import format_result, predict, read_records
from seqkit.heads.sequence.stepper import SequenceStepper
from seqkit.heads.sequence.stream import full_sequence_answers, read_stream_input, stream_answers
from seqkit.progress import progress
from seqkit.registry import CELLS
from seqkit.runs.rundir import LABELS
from seqkit.runtime.full_sequence import FullSequenceModel
from seqkit.runtime.streaming import StreamingModel


class SequenceHead(Head):
    """Base of heads that read token ids or frames and predict classes.

    Subclasses define ``target_name`` (``"label"``/``"tag"``), :meth:`record_classes`
    (the class names a record holds), :meth:`encode_target` and :meth:`build_model`.
    """

    allow_split = False
    target_name = "label"
    answers = "predict"
    logits_index = "labels"
    word_inputs = True
    internal_state = True
    full_sequence_export = True

    def __init__(self, recipe, vocab=None):
        super().__init__(recipe, None)
        self.inputs = SequenceInputs(recipe.data, recipe.model.char_embedding)
        self.labels: LabelVocabulary | None = None
        self.unseen: dict = {}

    @property
    def vocab(self):
        return self.inputs.vocab if hasattr(self, "inputs") else None

    @vocab.setter
    def vocab(self, value):  # the base class assigns None; the vocabulary lives in self.inputs
        if value is not None:
            raise TypeError("the vocabulary of a sequence head comes from its inputs")

    @property
    def tokenizer(self):
        """The input :class:`~seqkit.data.subword.TextTokenizer`: the sentencepiece one of the
        inputs (``data.tokenizer: sentencepiece``), else the source's split of raw text."""
        if self.inputs.subword is not None:
            return self.inputs.subword
        if self.recipe.data.tokenizer == "sentencepiece":
            return Head.tokenizer.fget(self)  # raises: not trained or loaded yet

        return TextTokenizer(text_tokenizer(self.recipe), self.recipe.data.lowercase)

    # ---------------------------------------------------------------- records
    @abc.abstractmethod
    def record_classes(self, record) -> list:
        """The class names a record carries (its label, or its tags)."""

    @abc.abstractmethod
    def check_targets(self, records: list, split: str) -> None:
        """Raise :class:`seqkit.errors.DataError` for records whose targets this head cannot use."""

    def check_records(self, records, split):
        SequenceInputs.check_kind(records, self.recipe.data.source)
        self.check_targets(records, split)
        return apply_too_long(records, self.recipe.data.max_length, self.options.too_long,
                              what="data.max_length", allow_split=self.allow_split)

    def check_splits(self, splits: dict) -> None:
        """Refuse held-out frames of another width than training's (before any training: found
        only at the final evaluation, they left a trained run unfinished); count held-out classes
        never seen in training (scored as errors; warning).

        Raises:
            DataError: a valid or test record with another number of channels, naming it.
        """
        if self.inputs.kind == "frames":
            for split in ("valid", "test"):
                bad = next((r for r in splits.get(split) or [] if r.frames is not None
                            and r.frames.shape[1] != self.inputs.width), None)
                if bad is not None:
                    raise DataError(f"{bad.where}: {bad.frames.shape[1]} channels in the {split} split, but "
                                    f"the training data has {self.inputs.width}; every split needs the "
                                    f"same channels. Check data.{split}_path.")
        for split in ("valid", "test"):
            names = [c for r in splits.get(split, []) for c in self.record_classes(r)]
            bad = [c for c in names if c not in self.labels]
            self.unseen[split] = len(bad)
            if bad:
                kinds = sorted(set(bad))
                log.warn(f"{split}: {len(bad)} {self.target_name}(s) of {len(names)} are of classes "
                         f"never seen in training ({', '.join(kinds[:5])}{', ...' if len(kinds) > 5 else ''}); "
                         f"they are left out of the loss and counted as errors in the metrics.")

    # ---------------------------------------------------------------- assets
    def fit(self, train):
        self.inputs.fit(train)
        self.labels = LabelVocabulary.build(c for r in train for c in self.record_classes(r))
        if len(self.labels) == 1:  # every answer is that class: accuracy 1.0 teaches nothing
            log.warn(f"data: every {self.target_name} of the training split is {self.labels.names[0]!r}; "
                     f"with one class the model learns nothing (its accuracy is 1 by construction). "
                     f"Check the {self.target_name} column, or add examples of the other classes.")

    def save_assets(self, run_dir):
        self.inputs.save(run_dir)
        self.labels.save(os.path.join(run_dir, LABELS))

    def load_assets(self, run_dir):
        self.inputs.load(run_dir)
        self.labels = LabelVocabulary.load(os.path.join(run_dir, LABELS))

    def describe_assets(self):
        return f"{self.inputs.describe()}; {len(self.labels)} {self.target_name}s"

    # ---------------------------------------------------------------- batches
    @abc.abstractmethod
    def encode_target(self, record):
        ...

    def dataset(self, records, *, training, first_epoch=0):
        r = self.recipe
        xs = [self.inputs.encode(x) for x in records]
        ys = [self.encode_target(x) for x in records]
        return make_array_dataset(xs, ys, batch_size=r.training.batch_size, shuffle=training,
                                  seed=r.seed, bucket=training and r.data.bucket,
                                  max_length=r.data.max_length, first_epoch=first_epoch,
                                  steps_per_epoch=r.training.steps_per_epoch if training else None)

    def predict_proba(self, model, records: list, batch_size: int | None = None) -> list:
        """Class probabilities per record, in input order: ``[C]`` (acceptor) or ``[T, C]`` (tagger).

        Records need no targets. Batches keep the input order (no bucketing).
        """
        import tensorflow as tf

        xs = [self.inputs.encode(x) for x in records]
        ds = make_array_dataset(xs, [0] * len(xs), batch_size=batch_size or self.recipe.training.batch_size,
                                shuffle=False, seed=0, bucket=False, max_length=self.recipe.data.max_length)

        out = []
        with progress(len(xs), "predicting", "sequences") as bar:
            for x, _ in ds:
                p = tf.nn.softmax(model(x, training=False), axis=-1).numpy()
                out.extend(p)
                bar.update(len(p))
        return [self.trim(p, len(r)) for p, r in zip(out, records)]

    def trim(self, probs, length: int):
        return probs

    def stepper(self, model):
        """The one-input-at-a-time view of ``model`` used by export and streaming
        (:class:`~seqkit.heads.sequence.stepper.SequenceStepper`).

        Raises:
            SeqkitError: a bidirectional encoder (offers full-sequence export instead).
        """
        return SequenceStepper(model, CELLS.get(self.recipe.model.cell).state_names,
                               kind=self.inputs.kind, normalizer=self.inputs.normalizer,
                               pooling=getattr(self.options, "pooling", None),
                               bidirectional=self.recipe.model.bidirectional)

    # ---------------------------------------------------------------- export
    def export_metadata(self, stepper, full_sequence):
        """``labels`` (class id = position), ``token_mode`` (how raw text is split), the character
        vocabulary (``model.char_embedding``), the frame ``normalizer`` (applied inside the model),
        and ``output`` (:meth:`output_meaning`)."""
        meta = {"labels": list(self.labels.names), "token_mode": text_tokenizer(self.recipe)}
        if self.inputs.chars is not None:  # model.char_embedding (seqkit.data.word_chars)
            meta["char_vocab"] = list(self.inputs.chars.vocab.tokens)
            meta["max_chars"] = self.inputs.chars.max_chars
            meta["char_input"] = ("each step is [word id, then the ids in char_vocab of the word's "
                                  "first max_chars characters as written (not lower-cased), 1 for an "
                                  "unknown character, 0 padding]: int32 [1 + max_chars]")
        if self.inputs.kind == "frames":
            meta["normalizer"] = {"mean": self.inputs.normalizer.mean.tolist(),
                                  "std": self.inputs.normalizer.std.tolist(),
                                  "applied": "inside the model: feed raw frames"}
        meta["output"] = self.output_meaning(stepper is not None)
        return meta

    def output_meaning(self, step: bool) -> str:
        """What an export's ``logits`` mean (metadata ``output``) for a step or whole-sequence model."""
        return "logits [B, C]: this step's scores" if step else "logits [B, T, C]"

    def parity_inputs(self, records, length=None):
        """Records as the export's raw inputs (:func:`seqkit.export.parity.sequence_inputs`)."""
        return sequence_inputs(types.SimpleNamespace(head=self), records, length)

    def keras_inputs(self, x):
        """Raw export inputs as the Keras model reads them: frames normalised (NaN stays NaN)."""
        return self.inputs.normalizer(x) if x.dtype.kind == "f" else x

    # ---------------------------------------------------------------- streaming an export
    @classmethod
    def stream_export(cls, export, metadata, request):
        """Stream each input sequence through the exported step model
        (:func:`seqkit.heads.sequence.stream.stream_answers`; a full-sequence export answers each
        whole sequence) and yield :meth:`stream_answer` of each answer.

        Raises:
            SeqkitError: a ``prompt`` or ``beam_width``; malformed input.
        """
        if request.beam_width is not None:
            raise SeqkitError("--beam-width is for encoder-decoder exports; this export streams one "
                              "step model.")
        if request.prompt:
            raise SeqkitError(f"--prompt is for language-model exports; this {metadata.get('head')} "
                              f"export reads its sequences from --input FILE or stdin.")
        if metadata.get("artefact") == "full_sequence":  # bidirectional: whole sequences at once
            rt, answers = FullSequenceModel(export), full_sequence_answers
        else:
            rt, answers = StreamingModel(export), stream_answers
        name, text = request.read()
        inputs = read_stream_input(text, name, rt.metadata, export)
        cls.stream_note(rt.metadata)
        for ans in answers(rt, inputs):
            seq = inputs[ans.index]
            yield cls.stream_answer(ans, seq, ans.t == len(seq.steps) - 1)

    @classmethod
    def stream_note(cls, metadata) -> None:
        """Log what a reader of the stream should know first (default: nothing)."""

    @classmethod
    def stream_answer(cls, ans, seq, last: bool) -> str:
        """The text printed for one streamed answer (default: ``where<TAB>step t<TAB>label<TAB>p``,
        a line each, ``final`` on the last)."""
        return (f"{seq.where}\tstep {ans.t + 1}\t{ans.name}\t{ans.probability:.4f}"
                + ("\tfinal" if last else "") + "\n")

    # ---------------------------------------------------------------- answers
    def read_inputs(self, text, name, input_format="auto"):
        """Prediction input as records (:func:`seqkit.heads.sequence.predict.read_records`: text lines,
        CoNLL, or ``.ts`` frames)."""
        return read_records(text, name, input_format, types.SimpleNamespace(head=self, recipe=self.recipe))

    def predict(self, model, records):
        """Labels or tags with their probabilities (:func:`seqkit.heads.sequence.predict.predict`)."""
        return predict(types.SimpleNamespace(head=self, recipe=self.recipe), model, records)

    def format_prediction(self, result, fmt="text", probabilities=False):
        """``label`` / ``word/TAG ...`` lines (:func:`seqkit.heads.sequence.predict.format_result`)."""
        return format_result(result, fmt, probabilities)

    def loss(self):
        from seqkit.training.losses import MaskedSparseCrossEntropy

        return MaskedSparseCrossEntropy(offset=1, label_smoothing=self.recipe.training.label_smoothing)

    def metrics(self):
        from seqkit.training.losses import MaskedAccuracy, MaskedCrossEntropy

        return [MaskedCrossEntropy(offset=1), MaskedAccuracy(offset=1)]

    def class_names(self, probs) -> list:
        """Arg-max class names of ``[..., C]`` probabilities."""
        return [self.labels.names[i] for i in np.atleast_1d(np.argmax(probs, axis=-1))]

    def check_predict_length(self, records: list) -> list:
        """Apply ``head.too_long`` against the run's ``data.max_length`` (predict input)."""
        return apply_too_long(records, self.recipe.data.max_length, self.options.too_long,
                              what="the run's data.max_length", allow_split=self.allow_split)

    def _no_target(self, record, split):
        raise DataError(f"{record.where}: no {self.target_name}; the {self.recipe.head.type} head "
                        f"needs one for every training and evaluation example.")
