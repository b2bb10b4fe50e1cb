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

and everything after training, so every command works for a head from a plugin
(the machinery around a head names none; ``docs/heads.md`` is the full contract):

* :attr:`Head.answers` names the command that answers raw input (``predict``,
  ``generate`` or ``transduce``); :meth:`Head.read_inputs`, :meth:`Head.predict`
  and :meth:`Head.format_prediction` are ``seqkit predict`` / ``Run.predict``;
* :meth:`Head.stepper` (a one-step view, for step exports and streaming),
  :meth:`Head.export` (default: :func:`seqkit.export.writer.write_step_export`),
  :meth:`Head.export_metadata`, :meth:`Head.parity_inputs`,
  :meth:`Head.parity_targets` and :meth:`Head.task_metric` are ``seqkit export``;
* :meth:`Head.text_functions` gives the text-in/text-out serving signatures;
* :meth:`Head.stream_export` is what ``seqkit stream`` runs on a lone exported ``.tflite``
  whose metadata names the head;
* :attr:`Head.diagnostics` says which of ``seqkit diagnose``'s readings apply;
* :meth:`Head.read_frame` / :meth:`Head.results_frame` let ``Run.predict`` take and give a
  ``pandas.DataFrame``; :meth:`Head.draw_prediction` is ``seqkit predict --plot``;
  :attr:`Head.run_figures` / :meth:`Head.draw_run_figure` add pictures to ``seqkit plot``
  (:meth:`Head.offers` says whether a head has such an optional hook);
* :attr:`Head.table_columns` / :meth:`Head.table_record` let the ``table`` source
  feed the head, and :meth:`Head.check_recipe` refuses recipe keys the head cannot
  apply.

TensorFlow, Keras and the seqkit modules that import them and NumPy are imported inside the
functions that use them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import abc
from typing import ClassVar, Iterator

from pydantic import BaseModel

from seqkit.cells.base import NoOptions
from seqkit.data.lines import split_lines
from seqkit.data.records import Record
from seqkit.data.subword import TextTokenizer
from seqkit.errors import DataError, SeqkitError
from seqkit.export.writer import write_step_export
from seqkit.inference.serving import TextFunctions, text_reason
from seqkit.progress import keras_evaluate
from seqkit.registry import HEADS
from seqkit.runs.rundir import json_line


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
    #: the command that answers raw input: ``"predict"`` (labels, tags, values: :meth:`predict`),
    #: ``"generate"`` (continues a prompt) or ``"transduce"`` (one output sequence per source);
    #: None: the head answers no raw input.
    answers: ClassVar[str | None] = None
    #: the text signatures it serves (:data:`seqkit.inference.serving.ROLES`): ``"classify"``,
    #: ``"tag"``, ``"generate"``, ``"transduce"``; None: none (or override :meth:`text_functions`)
    text_role: ClassVar[str | None] = None
    #: which metadata list an export's logits columns index (``"vocab"``, ``"labels"``,
    #: ``"target_vocab"``), checked against the model when a ``.tflite`` is read; None: none
    logits_index: ClassVar[str | None] = None
    #: how messages name the head's runs (default: its registered name)
    title: ClassVar[str | None] = None
    #: ``data.layout: stream`` (one token stream read with truncated BPTT) applies.
    stream_layout: ClassVar[bool] = False
    #: ``training.class_weight`` applies (one class per example).
    class_weights: ClassVar[bool] = False
    #: :attr:`Record.label <seqkit.data.records.Record.label>` names a class (a split that lacks one
    #: of train's classes is warned of); False for a head whose ``label`` holds a number (regression).
    label_classes: ClassVar[bool] = True
    #: ``model.char_embedding`` (character-aware word inputs) applies.
    word_inputs: ClassVar[bool] = False
    #: ``data.tokenizer: sentencepiece`` applies (the head reads raw text it may cut into pieces).
    subword_inputs: ClassVar[bool] = True
    #: ``seqkit export --state internal`` (the state kept inside the TFLite step model) applies.
    internal_state: ClassVar[bool] = False
    #: ``seqkit export --full-sequence`` (a pinned ``[B, T]`` whole-sequence TFLite model) applies.
    full_sequence_export: ClassVar[bool] = False
    #: the ``seqkit init --task`` word whose starter recipe this head writes (:meth:`starter`).
    starter_task: ClassVar[str | None] = None
    #: how many ``--data`` paths ``seqkit init --task`` takes for this head.
    starter_files: ClassVar[int] = 1
    #: ``seqkit diagnose`` readings: ``"per_step"`` (a cross-entropy target at each step, ids as
    #: :attr:`diagnostic_offset` says), ``"per_sequence"`` (one class per sequence, read from the
    #: ``pooling`` layer), ``"encoder_decoder"`` (gradient flow only), or None (refused, named).
    diagnostics: ClassVar[str | None] = None
    #: how :attr:`diagnostics` reads the dataset's targets: class = target - offset (<0: none).
    diagnostic_offset: ClassVar[int] = 1
    #: validation figures the head computes by decoding at each epoch's end, for
    #: ``training.monitor: val_<name>`` (errors: lower is better), ``{name: one-line meaning}``;
    #: empty: the head offers none (see :meth:`selection_figures`)
    selection_metrics: ClassVar[dict[str, str]] = {}
    #: the head's :meth:`evaluate` decodes outputs with the recipe's ``decoding`` section (beam
    #: width, length penalty...), so ``seqkit evaluate --set decoding.KEY=VALUE`` changes its figures
    evaluation_decodes: ClassVar[bool] = False
    #: the table columns the head reads: ``{recipe key: (header name, column number)}``; None:
    #: the ``table`` source cannot feed it.
    table_columns: ClassVar[dict | None] = None

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

    def derive_training(self, splits: dict, run_dir: str | None) -> list:
        """The records to train on, derived from the splits before :meth:`fit` (e.g. targets
        decoded by other runs: the seq2seq head's ``head.distill``).

        Args:
            splits: ``{"train", "valid", "test"}`` record lists, as read and split.
            run_dir: ``None`` for a new run (called before :meth:`fit`); a resumed or evaluated
                run's directory, from which the head reads back what its :meth:`save_assets` kept
                (called after :meth:`load_assets`).

        Returns:
            The training records (default: ``splits["train"]`` as given).

        Raises:
            seqkit.errors.SeqkitError: the records cannot be derived (the head names why);
            seqkit.errors.RunDirError: what the run kept is missing or invalid.
        """
        return splits["train"]

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

    def vocabularies(self) -> list[list[str]]:
        """The token lists whose ids the model reads or writes, for ``--ensemble``: runs whose
        distributions are averaged must agree on all of them, token by token. This default gives
        the input vocabulary only; a head that averages runs and writes other ids (a target
        vocabulary, labels) adds those lists."""
        return [list(self.vocab.tokens)] if self.vocab is not None else []

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
        d = self.recipe.data
        vocab = getattr(self, "vocab", None)  # read first by the heads that have one: checked against it
        self.tokenizer = TextTokenizer.load(run_dir, d.tokenizer, d.lowercase,
                                            vocab=vocab.tokens if vocab is not None else None)

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
        return self.summarize(keras_evaluate(model, self.dataset(records, training=False)))

    def selection_figures(self, model, records: list) -> dict:
        """The :attr:`selection_metrics` of ``model`` on ``records`` (the validation split), called
        at the end of every training epoch when ``training.monitor`` names one of them.

        Args:
            model: the training model, as it stands after the epoch.
            records: the validation split's records.

        Returns:
            ``{name: value}`` for every name of :attr:`selection_metrics`: floats, lower is better.

        Raises:
            SeqkitError: this default, for a head that lists :attr:`selection_metrics` without
                computing them (a head's error; the recipe check refuses a monitor of a head
                that lists none).
        """
        raise SeqkitError(f"head '{self.recipe.head.type}' lists selection metrics "
                          f"({', '.join(self.selection_metrics) or 'none'}) but does not compute them: "
                          f"its class must implement selection_figures(model, records).")

    def baselines(self, prep) -> dict:
        """Figures of trivial models on the same splits, for comparison (may be empty):
        ``{baseline name: {split: figures}}``, ``split`` one of ``valid`` / ``test`` (/ ``train``),
        ``figures`` a number or ``{figure name: number}`` (checked by :func:`seqkit.heads.contract.checked_baselines`)."""
        return {}

    def format_metrics(self, figures: dict) -> list[str]:
        """Console lines for one split's figures (default: ``name value`` pairs; counts as integers)."""
        return [", ".join(f"{k} {v}" if isinstance(v, int) and not isinstance(v, bool) else f"{k} {v:.4f}"
                          for k, v in figures.items() if isinstance(v, (int, float)))]

    # ---------------------------------------------------------------- recipe
    @classmethod
    def check_recipe(cls, config, options) -> list:
        """Recipe keys this head cannot apply, as ``[((section, key), message)]`` (default: the
        generic rules read from the class attributes above; override to add the head's own).

        Args:
            config: the validated core recipe (``seqkit.recipe.RecipeModel``).
            options: the head's validated :attr:`Options`.
        """
        def those(attr, sep=" or "):
            names = [n for n in HEADS.names() if getattr(HEADS.get(n), attr, False)]
            return sep.join(names) or "no registered head"

        out, head, t = [], config.head.type, config.training
        if config.data.layout == "stream" and not cls.stream_layout:
            out.append((("data", "layout"), f"'stream' (one token stream read with truncated BPTT) is "
                                            f"for head.type {those('stream_layout')}; a {head} reads one "
                                            f"example at a time. Remove data.layout or set it to 'line'."))
        if t.class_weight is not None and not cls.class_weights:
            out.append((("training", "class_weight"), f"class weights apply to head.type "
                                                      f"{those('class_weights')} (one label per "
                                                      f"sequence); this recipe's head is {head}. Remove "
                                                      f"training.class_weight."))
        if t.monitor is not None and (not t.monitor.startswith("val_")
                                      or t.monitor[len("val_"):] not in cls.selection_metrics):
            offered = ", ".join(f"val_{k} ({v})" for k, v in cls.selection_metrics.items())
            out.append((("training", "monitor"), f"{t.monitor!r} is not a figure the {head} head "
                                                 f"computes at each epoch's end; "
                                                 + (f"it offers {offered}. " if offered else "it offers none. ")
                                                 + "Remove training.monitor to keep the best epoch by "
                                                   "the validation cross-entropy."))
        if config.model.char_embedding is not None and not cls.word_inputs:
            out.append((("model", "char_embedding"), f"character-aware word inputs are for the "
                                                     f"{those('word_inputs', ' and ')} heads (word "
                                                     f"inputs); this "
                                                     f"recipe's head is {head}. Remove "
                                                     f"model.char_embedding."))
        return out

    # ---------------------------------------------------------------- tables
    @classmethod
    def table_record(cls, row, data, options):
        """One record from one table row (the ``table`` source; see :attr:`table_columns`).

        Args:
            row: a :class:`seqkit.data.table.TableRow`: ``row.text(key)`` the cell of the column
                the recipe key names, as a string; ``row.tokens(key)`` a list cell (JSON list or
                white-space separated); ``row.where`` ``file:line``.
            data: the recipe's ``data`` section; options: the source's options.

        Returns:
            A :class:`seqkit.data.records.Record`.

        Raises:
            seqkit.errors.DataError: a bad row (naming ``row.where``).
        """
        raise DataError(f"{row.where}: the head '{cls.__name__}' reads no tables.")

    # ---------------------------------------------------------------- answers
    def read_inputs(self, text: str, name: str, input_format: str = "auto") -> list:
        """Parse raw prediction input (``seqkit predict --input``, ``Run.predict``) into records
        without targets.

        Args:
            text: the whole input; name: how messages name it (a file name or ``<stdin>``);
            input_format: ``auto``, ``text``, ``conll``, ``ts`` or ``table`` (``auto``: the head's
                own choice).

        Returns:
            ``list[Record]`` (default: one record per non-empty line, tokens split as in training;
            for a head with ``table_columns``, a table input -- ``table``, or ``auto`` and a name
            ending ``.csv``, ``.tsv``, ``.tab``, ``.jsonl`` or ``.ndjson`` -- read by its input
            column, :func:`seqkit.data.table.input_rows`).

        Raises:
            seqkit.errors.SeqkitError: malformed input, or an input format the head cannot read.
        """
        from seqkit.data.table import input_rows, is_table_input

        split = self.tokenizer.split
        if self.table_columns and is_table_input(name, input_format):  # the training table's input column
            key, rows = input_rows(text, name, self.recipe.data_options, self.table_columns)
            cells = [(row.text(key), row.where) for row in rows]
            records = [Record(tokens=split(cell), text=cell, where=where) for cell, where in cells]
        elif input_format not in ("auto", "text"):
            raise SeqkitError(f"{name}: --input-format {input_format}: this run's head reads text, one "
                              f"sequence per line (--input-format text)"
                              + (", or a table (--input-format table)" if self.table_columns else "") + ".")
        else:
            records = [Record(tokens=split(line), text=line, where=f"{name}:{n}")
                       for n, line in enumerate(split_lines(text), start=1) if line.strip()]
        if not records:
            raise SeqkitError(f"{name}: no input sequences (empty input).")
        return records

    def predict(self, model, records: list) -> list:
        """Answer every record (what ``seqkit predict --format jsonl`` prints, one dict a line).

        Returns:
            One JSON-able dict per record, in input order, holding at least ``"where"``.

        Raises:
            seqkit.errors.SeqkitError: the head answers no raw input (the default).
        """
        raise SeqkitError(f"head '{self.recipe.head.type}' does not answer raw input with `predict`"
                          + (f"; use `seqkit {self.answers}`." if self.answers else "."))

    def format_prediction(self, result: dict, fmt: str = "text", probabilities: bool = False) -> str:
        """One output line for one :meth:`predict` result: ``fmt`` ``"jsonl"`` (the dict as one JSON
        line, without probabilities unless asked) or ``"text"`` (default: the values of the keys
        other than ``where`` and the probabilities, tab-separated)."""
        hidden = ("probability", "probabilities")
        if fmt == "jsonl":
            return json_line({k: v for k, v in result.items() if probabilities or k not in hidden})
        vals = [v for k, v in result.items() if k != "where" and (probabilities or k not in hidden)]
        return "\t".join(" ".join(map(str, v)) if isinstance(v, list) else str(v) for v in vals)

    # ---------------------------------------------------------------- tables and pictures
    def read_frame(self, frame, name: str = "<DataFrame>") -> list:
        """Prediction input given as a ``pandas.DataFrame`` (``Run.predict(frame)``), read into
        records without targets, as :meth:`read_inputs` reads a file of the same table.

        Args:
            frame: a ``pandas.DataFrame`` with the columns of the training data; name: how
                messages name it (rows as ``NAME:N``, ``N`` the row's position, ``frame.iloc[N]``).

        Returns:
            ``list[Record]``, as :meth:`read_inputs`.

        Raises:
            seqkit.errors.SeqkitError: the head reads no DataFrame (the default), or a malformed one.
        """
        raise SeqkitError(f"{name}: head '{self.recipe.head.type}' reads no DataFrame; give its "
                          f"input as a string (one sequence per line) or a list of strings.")

    def results_frame(self, results: list):
        """:meth:`predict`'s results as a ``pandas.DataFrame`` (what ``Run.predict(frame)``
        returns), holding the same numbers.

        Raises:
            seqkit.errors.SeqkitError: the head gives no DataFrame (the default).
        """
        raise SeqkitError(f"head '{self.recipe.head.type}' gives no DataFrame of its predictions.")

    def draw_prediction(self, results: list, records: list, path: str, outputs) -> None:
        """Draw :meth:`predict`'s ``results`` for ``records`` (the input :meth:`read_inputs` or
        :meth:`read_frame` read) into the PNG ``path`` (``seqkit predict --plot``,
        ``Run.predict(plot=)``).

        Args:
            results: :meth:`predict`'s dicts; records: the records answered, in the same order;
            path: the PNG; outputs: its :class:`seqkit.outputs.FileOutputs`, checked before the
                prediction: write with ``outputs.write({path: writer})`` (staged, then renamed;
                mark the PNG with :func:`seqkit.outputs.png_metadata`).

        Raises:
            seqkit.errors.SeqkitError: the head draws no prediction plot (the default), or
                matplotlib is missing.
        """
        raise SeqkitError(f"head '{self.recipe.head.type}' draws no prediction plot; drop --plot "
                          f"(the predictions are printed as they are).")

    #: names of the pictures ``seqkit plot`` / ``Run.plot`` draw for a run of this head beside its
    #: training curves (:meth:`draw_run_figure`), e.g. ``("backtest",)``; empty: none.
    run_figures: ClassVar[tuple[str, ...]] = ()

    def draw_run_figure(self, name: str, prep, model, path: str, outputs) -> None:
        """Draw the run's picture ``name`` (one of :attr:`run_figures`) into the PNG ``path`` and
        the numbers drawn into the JSON beside it (:func:`seqkit.diagnostics.plots.json_path`).

        Args:
            name: the picture; prep: the loaded run's :class:`seqkit.training.train.Prepared`,
                its splits read; model: its best ``keras.Model``; path: the PNG; outputs: the
                :class:`seqkit.outputs.FileOutputs` of the PNG and its JSON, checked before any
                picture was drawn (write both with ``outputs.write``).

        Raises:
            seqkit.errors.SeqkitError: an unknown name (the default: the head draws none), an
                empty split, matplotlib missing.
        """
        raise SeqkitError(f"head '{self.recipe.head.type}' draws no picture '{name}'.")

    @classmethod
    def offers(cls, hook: str) -> bool:
        """Whether the head overrides the optional hook ``hook`` (e.g. ``"draw_prediction"``,
        ``"read_frame"``), so callers can refuse before a run loads."""
        return getattr(cls, hook) is not getattr(Head, hook)

    # ---------------------------------------------------------------- export
    def stepper(self, model):
        """The one-step view of ``model`` that step exports and streaming run: an object with
        ``input_spec()`` (``tf.TensorSpec`` of one step's input, ``[B]`` or ``[B, D]``),
        ``state_names()`` / ``state_sizes()`` (one ``[B, size]`` float32 tensor each),
        ``initial_state(batch_size) -> list`` and ``step(x_t, states) -> (logits [B, C], states)``.

        Raises:
            seqkit.errors.SeqkitError: the head has no step model (the default), e.g. a
                bidirectional encoder.
        """
        raise SeqkitError(f"head '{self.recipe.head.type}' has no step model to export; export it as "
                          f"a full-sequence model (--full-sequence) instead.")

    @classmethod
    def has_stepper(cls) -> bool:
        """Whether the head offers a step model (it overrides :meth:`stepper`)."""
        return cls.stepper is not Head.stepper

    @classmethod
    def starter(cls, paths: list[str], rel) -> dict:
        """The sections of a starter recipe for the user's files (``seqkit init --task
        STARTER_TASK``; :func:`seqkit.starter.starter_recipe` adds the name, seed and defaults).

        Args:
            paths: the ``--data`` paths (existing files or folders; at most :attr:`starter_files`).
            rel: ``rel(path) -> str``, a path relative to the recipe's folder (write data paths so).

        Returns:
            ``{"data": {...}, "head": {...}}`` and, where they differ from the defaults,
            ``"model"`` / ``"training"`` keys (e.g. ``{"model": {"bidirectional": True}}``; a
            ``None`` drops a default key the head has no use for, e.g. ``embedding_dim``);
            optionally ``"notes"``: lines for the recipe file's header comment.

        Raises:
            seqkit.starter.InitError: data this head cannot read (the file named, what was found).
        """
        from seqkit.starter import InitError

        raise InitError(f"head '{cls.__name__}' declares starter_task {cls.starter_task!r} but no "
                        f"starter(); write the recipe by hand (docs: 'Your own data').")

    def export(self, prep, model, out: str, options, calibration: list | None) -> dict:
        """Write the export of a loaded run into the staged directory ``out``; return the parity
        report. Default: :func:`seqkit.export.writer.write_step_export` (a step model, or a
        full-sequence one, checked by :class:`seqkit.export.parity.ParityCase`).

        Args:
            prep, model: the loaded run; out: the (staged) export directory to fill;
            options: :class:`seqkit.export.options.ExportOptions`; calibration: the records a
            full-integer export calibrates on (None otherwise).

        Raises:
            seqkit.errors.SeqkitError: an option the head cannot honour, a conversion failure, or
                a parity failure (nothing is written then).
        """
        return write_step_export(prep, model, out, options, calibration)

    def export_metadata(self, stepper, full_sequence: bool) -> dict:
        """The head's own entries of an export's metadata (labels, output meaning, ...), merged
        into the generic ones (:func:`seqkit.export.writer.metadata_for`). Default: none."""
        return {}

    def parity_inputs(self, records: list, length: int | None = None):
        """``(x, lengths [N] int)``: held-out records as the export's raw inputs ``x``
        (``[N, T]`` int32 ids, 0 padding; or ``[N, T, D]`` float32 frames, NaN padding), ``T``
        pinned to ``length`` when given. Default: the training inputs of :meth:`dataset`."""
        import numpy as np

        xs = [np.asarray(x) for x, _ in self.dataset(records, training=False).unbatch()]
        x = np.zeros((len(xs), length or max(len(v) for v in xs), *xs[0].shape[1:]), xs[0].dtype)
        lengths = []
        for i, v in enumerate(xs):
            v = v[:x.shape[1]]
            x[i, :len(v)] = v
            valid = (v != 0) if v.dtype.kind in "iu" else ~np.isnan(v).reshape(len(v), -1).any(-1)
            lengths.append(int(valid.reshape(len(v), -1).any(-1).sum()))
        return x, np.asarray(lengths)

    def keras_inputs(self, x):
        """The export's raw inputs ``x`` as the Keras model reads them (default: as they are)."""
        return x

    def parity_targets(self, records: list, T: int):
        """Gold targets aligned with :meth:`parity_inputs` for :meth:`task_metric` (``[N, T]`` or
        ``[N]``), or None (the default: the parity report then has no task figure)."""
        return None

    def export_gate(self, task: dict | None, quantize: str) -> str | None:
        """Why an export whose held-out task figure is ``task`` (``{"metric", "keras", "export",
        "scored"}`` from :meth:`task_metric`, or None) must not be written at ``quantize``, or None
        to write it. Default: None (the arg-max agreement gate, ``--min-agreement``, decides)."""
        return None

    def task_metric(self, logits, targets, valid) -> dict:
        """The task's own figure of exported ``logits`` against :meth:`parity_targets`
        (``{"<metric>": float, "scored": int}``). Default: arg-max accuracy, targets = class + 1."""
        import numpy as np

        keep = valid & (targets > 0)
        z, y = logits[keep], targets[keep]
        return {"accuracy": float(np.mean(z.argmax(-1) + 1 == y)) if len(y) else float("nan"),
                "scored": int(len(y))}

    # ---------------------------------------------------------------- serving
    def text_unsupported(self) -> str | None:
        """Why the run cannot take raw strings in the graph (a sentence), or None when it can
        (default: a head without :attr:`text_role` cannot; one with it, unless its inputs are no
        vocabulary tokens, :func:`seqkit.inference.serving.text_reason`)."""
        if self.text_role is None:
            return f"its head '{self.recipe.head.type}' has no text signatures"

        return text_reason(self)

    def text_functions(self, prep, model, *, max_length: int | None = None):
        """The text-in/text-out signatures (see :mod:`seqkit.inference.serving`): an object with
        ``signatures`` ``{name: fn(text [B] tf.string) -> dict}`` (the first is the default) and
        ``tables`` (lookup tables a SavedModel must track). Default:
        :class:`seqkit.inference.serving.TextFunctions` of :attr:`text_role`.

        Raises:
            seqkit.errors.SeqkitError: the head has no text signatures (:meth:`text_unsupported`).
        """
        why = self.text_unsupported()
        if why is not None:
            raise SeqkitError(f"this run cannot serve text: {why}.")
        return TextFunctions(prep, model, role=self.text_role, max_length=max_length)

    # ---------------------------------------------------------------- streaming an export
    @classmethod
    def stream_export(cls, export: str, metadata: dict, request) -> "Iterator[str]":
        """Run an exported ``.tflite`` of this head on ``request`` and yield the output lines
        (what ``seqkit stream`` prints; :func:`seqkit.api.stream`).

        Args:
            export: the export directory or the ``.tflite`` file; metadata: its validated
                metadata (``metadata["head"]`` names this head).
            request: :class:`seqkit.runtime.request.StreamRequest` (prompt, input text, decoding).

        Raises:
            seqkit.errors.SeqkitError: the head has no runtime (the default), or a bad request.
        """
        raise SeqkitError(f"{export}: head '{metadata.get('head')}' has no streaming runtime.")

