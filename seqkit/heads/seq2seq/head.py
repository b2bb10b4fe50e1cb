"""Encoder-decoder head (Sutskever et al. 2014; with attention, Bahdanau et al. 2014 / Luong et al. 2015).

Model: ``(source [B, S] int32, decoder_inputs [B, T] int32) -> logits [B, T, V_target]``.

* Encoder: source embedding (``mask_zero``) and the recipe's cell stack
  (``model.cell``, ``model.layers``, ``model.bidirectional``), built by
  :func:`seqkit.layers.stack.apply_stack`; its outputs are the attention memory.
* Bridge: the decoder starts from the encoder's final states. When the
  encoder and decoder have the same cell, width and layer count and the
  encoder is unidirectional, the states pass unchanged; otherwise each
  decoder state (every layer; LSTM both ``h`` and ``c``) is
  ``tanh(W [encoder layer j's final states] + b)`` (Bahdanau et al. 2014,
  appendix A.2.2, ``s_0 = tanh(W_s h_1)``), with ``j`` the encoder layer at the
  same depth from the top (decoder layers beyond the encoder's depth use its
  top layer).
* Decoder: :class:`seqkit.layers.decoder.Seq2SeqDecoder` (attention ``none |
  bahdanau | luong | luong_dot``, context fed to the decoder input).
* Training: teacher forcing, ``decoder_inputs = [<s>] + target``,
  ``targets = target + [</s>]``, padding 0 excluded from the loss.

Data: records with raw ``text`` (the source, split by ``data.tokenizer``) and a
``target`` symbol list (e.g. :mod:`seqkit.data.cmudict`). :meth:`Seq2SeqHead.fit`
builds a source vocabulary and a separate target vocabulary from the training
split (``vocab.json`` and ``target_vocab.json`` in the run directory).

Figures (:meth:`Seq2SeqHead.evaluate`): teacher-forced ``cross_entropy`` and
``accuracy`` per target symbol, plus word and symbol (phoneme) error rates of
beam-search outputs (``decoding.beam_width``, ``decoding.length_penalty``),
a word counting as right when it equals any of its references
(:func:`seqkit.metrics.edit_distance.g2p_error_rates`); with ``head.text_metrics: true`` also
corpus BLEU and chrF of the outputs (:mod:`seqkit.metrics.text`). Baseline
(:meth:`Seq2SeqHead.baselines`): for aligned data (one target symbol per source symbol in every
training pair, e.g. :mod:`seqkit.data.pinyin`) each source symbol's most frequent target symbol
in training, scored the same way; none for unaligned data such as G2P. With that baseline,
:meth:`Seq2SeqHead.evaluate` also gives ``vs_baseline``, McNemar's exact test of the model against
it on the same sources (:mod:`seqkit.metrics.significance`).

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow; ``read_sources`` comes from two modules
(:mod:`~seqkit.heads.seq2seq.runtime`, :mod:`~seqkit.heads.seq2seq.transduce`), so each function
imports its own.
"""

from __future__ import annotations

import os
from typing import ClassVar, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from seqkit import log
from seqkit.data.markers import add_markers
from seqkit.data.parallel import pair_record
from seqkit.data.subword import TARGET_SUBWORD_MODEL, TextTokenizer
from seqkit.data.vocab import END_ID, START_ID, UNK_ID, Vocabulary
from seqkit.errors import DataError, RecipeError, SeqkitError
from seqkit.heads.base import Head
from seqkit.heads.seq2seq.alignment import alignment
from seqkit.heads.seq2seq.decoding import (Seq2SeqStepper, bridge, make_pair_dataset,  # noqa: F401
                                           seq2seq_pair, transduce)
from seqkit.heads.seq2seq.distill import DistillOptions
from seqkit.heads.seq2seq.export import export_seq2seq
from seqkit.heads.seq2seq.runtime import Seq2SeqModel, read_sources
from seqkit.heads.seq2seq.serving import Seq2SeqTextFunctions
from seqkit.layers.stack import apply_stack, make_plugin
from seqkit.metrics.baselines import MostFrequentTargetPerSymbol
from seqkit.metrics.edit_distance import g2p_error_rates
from seqkit.metrics.significance import mcnemar
from seqkit.metrics.text import bleu_chrf
from seqkit.progress import keras_evaluate
from seqkit.registry import CELLS, register_head
from seqkit.runs.rundir import VOCAB


class Seq2SeqOptions(BaseModel):
    """Recipe keys of the ``seq2seq`` head (under ``head``); decoder defaults follow ``model``."""

    model_config = ConfigDict(extra="forbid")
    attention: Literal["none", "bahdanau", "luong", "luong_dot"] = "bahdanau"
    attention_units: Optional[int] = Field(None, gt=0)
    decoder_cell: Optional[str] = None
    decoder_units: Optional[int] = Field(None, gt=0)
    decoder_layers: Optional[int] = Field(None, gt=0)
    target_embedding_dim: Optional[int] = Field(None, gt=0)
    #: dropout on the decoder's non-recurrent connections in training (Seq2SeqDecoder's ``dropout``)
    decoder_dropout: float = Field(0.0, ge=0.0, lt=1.0)
    #: sources decoded together by beam search in evaluation and predict
    decode_batch_size: int = Field(256, gt=0)
    #: also report corpus BLEU and chrF of the outputs (target symbols joined by spaces; sacrebleu)
    text_metrics: bool = False
    #: train on the beam outputs of these runs, decoded together, instead of the references
    #: (sequence-level knowledge distillation, Kim & Rush 2016); valid and test keep theirs
    distill: Optional[DistillOptions] = None
    #: option keys naming run directories, made absolute from the current directory when the
    #: recipe is read (as ``--run-dir`` and the default ``runs/NAME`` are)
    run_keys: ClassVar[tuple] = ("distill.runs",)

TARGET_VOCAB = "target_vocab.json"
#: name of the per-symbol lookup baseline in ``metrics.json`` (:meth:`Seq2SeqHead.baselines`)
LOOKUP_BASELINE = "most-frequent-target-per-source-symbol"


def references(records: list) -> dict:
    """``{source text: [target symbol lists]}`` in first-appearance order: a source's records
    are its alternative references (e.g. CMUdict's ``word(2)``)."""
    refs: dict = {}
    for r in records:
        refs.setdefault(r.text, []).append(list(r.target))
    return refs


@register_head("seq2seq")
class Seq2SeqHead(Head):
    """Encoder-decoder over separate source and target vocabularies.

    Args:
        recipe: the validated recipe (``model`` = encoder, ``head`` = :class:`Seq2SeqOptions`).
        vocab: source :class:`~seqkit.data.vocab.Vocabulary` (may be ``None`` when
            :meth:`build_model` is given the sizes).
        target_vocab: target vocabulary (likewise).
    """

    Options = Seq2SeqOptions
    answers = "transduce"
    logits_index = "target_vocab"
    text_role = "transduce"
    starter_task = "seq2seq"
    starter_files = 2  # two aligned files, or one table
    title = "encoder-decoder (seq2seq)"
    diagnostics = "encoder_decoder"
    table_columns = {"source_column": ("source", 0), "target_column": ("target", 1)}
    selection_metrics = {"wer": "word error rate of the recipe's decoding (beam or greedy)",
                         "per": "symbol (phoneme) error rate of the same outputs"}
    evaluation_decodes = True
    #: source keys the table reads for this head besides its columns
    table_keys = ("target_tokenizer", "target_lowercase", "too_long")

    @classmethod
    def starter(cls, paths, rel):
        """``seqkit init --task seq2seq`` (:func:`seqkit.heads.seq2seq.starter.seq2seq_starter`)."""
        from seqkit.heads.seq2seq.starter import seq2seq_starter

        return seq2seq_starter(paths, rel)

    @classmethod
    def table_record(cls, row, data, options):
        """A row's (source, target) pair (:func:`seqkit.data.parallel.pair_record`)."""
        return pair_record(row.text("source_column"), row.text("target_column"), row.where, data=data,
                           target_tokenizer=options.target_tokenizer,
                           target_lowercase=options.target_lowercase, too_long=options.too_long)

    def __init__(self, recipe, vocab=None, target_vocab=None):
        super().__init__(recipe, vocab)
        self.target_vocab = target_vocab
        self.target_tokenizer = None  # a TextTokenizer when the target side is sentencepiece
        self._distilled = None  # head.distill's training records of a new run, for save_assets
        self.lookup = None  # the lookup baseline of aligned training pairs (check_splits)
        self._lookup_train = None  # the training split it was fitted on (baselines reuses it)

    def to_pair(self, source_ids, target_ids):
        return seq2seq_pair(source_ids, target_ids)

    # ---------------------------------------------------------------- records
    def source_tokens(self, text: str) -> list:
        """A source string split as in training (``data.tokenizer``, ``data.lowercase``)."""
        return self.tokenizer.split(text)

    @property
    def target_mode(self) -> str | None:
        """How the source split target strings: its ``data.target_tokenizer`` (default
        ``data.tokenizer``) when it has that key, else ``None`` (symbol lists, e.g. cmudict)."""
        o = self.recipe.data_options
        if "target_tokenizer" not in type(o).model_fields:
            return None
        return o.target_tokenizer or self.recipe.data.tokenizer

    @property
    def target_subword(self) -> bool:
        """True when target strings are sentencepiece pieces (``target_subword.model``)."""
        return self.target_mode == "sentencepiece"

    def target_symbols(self, record) -> list:
        """A record's target as target-vocabulary symbols: its list, or with a sentencepiece
        target the pieces of its text (the source handed characters over, see
        :mod:`seqkit.data.subword`)."""
        return self.target_tokenizer.split("".join(record.target)) if self.target_subword else list(record.target)

    def target_text(self, symbols: list) -> str:
        """Output symbols as text: decoded pieces (sentencepiece target), concatenated
        characters (char target) or symbols joined by spaces."""
        if self.target_subword:
            return self.target_tokenizer.join(symbols)
        return ("" if self.target_mode == "char" else " ").join(symbols)

    def _source_length(self, text: str) -> int:
        d = self.recipe.data
        if d.tokenizer == "sentencepiece" and "_tokenizer" not in self.__dict__:
            return len(text)  # before the model is trained: characters, an upper bound of pieces
        return len(self.source_tokens(text))

    def check_records(self, records, split):
        """Every record needs ``text`` and a non-empty ``target``; pairs whose source is longer
        than ``data.max_length`` or whose target (plus the end marker) is are left out
        (counted warning).

        Raises:
            DataError: a record without text or target (naming where it came from).
        """
        d = self.recipe.data
        for r in records:
            if r.text is None or not r.target:
                raise DataError(f"{r.where or split}: the seq2seq head needs a source text and a "
                                f"non-empty target sequence for every example; the source "
                                f"'{d.source}' gave {'no text' if r.text is None else 'no target'}. "
                                f"Use a source of (source, target) pairs such as parallel_text, table (source and target "
                                f"columns) or cmudict.")
        keep = [r for r in records if self._source_length(r.text) <= d.max_length
                and len(r.target) + 1 <= d.max_length]
        if len(keep) < len(records):
            log.warn(f"{split}: {len(records) - len(keep)} of {len(records)} pairs have a source or "
                     f"target longer than data.max_length = {d.max_length} and were left out; raise "
                     f"data.max_length to keep them.")
        return keep

    # ---------------------------------------------------------------- assets
    def derive_training(self, splits: dict, run_dir: str | None) -> list:
        """The training records to use: the split's own, or with ``head.distill`` one record per
        source whose target is the teachers' output (:mod:`seqkit.heads.seq2seq.distill`),
        decoded now for a new run (kept for :meth:`save_assets`) or read from ``run_dir``.

        Raises:
            SeqkitError: as :func:`~seqkit.heads.seq2seq.distill.decode_teachers`; a sentencepiece
                target side. RunDirError: as :func:`~seqkit.heads.seq2seq.distill.read_targets`.
        """
        from seqkit.heads.seq2seq import distill

        opts, train = self.options.distill, splits.get("train") or []
        if opts is None or not train:
            return train
        if self.target_subword:
            raise SeqkitError("head.distill: a sentencepiece target side is not supported; distil a "
                              "run whose targets are symbols (data.target_tokenizer other than "
                              "sentencepiece), or remove head.distill.")
        if run_dir is not None:
            # prepare loaded the run's assets first: its target vocabulary bounds the file's symbols
            targets = distill.read_targets(run_dir, train, set(self.target_vocab.tokens))
            return distill.first_per_source(train, targets)
        width = opts.beam_width or self.recipe.decoding.beam_width
        self._distilled = distill.first_per_source(train, distill.decode_teachers(opts, splits, width))
        return self._distilled

    def fit(self, train):
        """Source and target vocabularies of the training split; a sentencepiece side trains its
        model on that side's training text (each side its own model)."""
        d = self.recipe.data
        self.fit_tokenizer(r.text for r in train)
        if d.tokenizer == "sentencepiece":
            self.vocab = self.tokenizer.vocabulary()
        else:
            self.vocab = Vocabulary.build((self.source_tokens(r.text) for r in train),
                                          min_count=d.min_count, max_size=d.max_vocab)
        if self.target_subword:
            self.target_tokenizer = TextTokenizer.fit("sentencepiece", False, ("".join(r.target) for r in train),
                                                      d.subword, key="data.subword (target side)")
            self.target_vocab = self.target_tokenizer.vocabulary()
        else:
            self.target_vocab = Vocabulary.build(r.target for r in train)

    def save_assets(self, run_dir):
        if self._distilled is not None:
            from seqkit.heads.seq2seq.distill import write_targets

            write_targets(run_dir, self._distilled)
        self.vocab.save(os.path.join(run_dir, VOCAB))
        self.target_vocab.save(os.path.join(run_dir, TARGET_VOCAB))
        self.save_tokenizer(run_dir)
        if self.target_subword:
            self.target_tokenizer.save(run_dir, TARGET_SUBWORD_MODEL)

    def load_assets(self, run_dir):
        self.vocab = Vocabulary.load(os.path.join(run_dir, VOCAB))
        self.target_vocab = Vocabulary.load(os.path.join(run_dir, TARGET_VOCAB))
        self.load_tokenizer(run_dir)
        if self.target_subword:
            self.target_tokenizer = TextTokenizer.load(run_dir, "sentencepiece", False, TARGET_SUBWORD_MODEL,
                                                       vocab=self.target_vocab.tokens)

    def describe_assets(self):
        sp = lambda tok: f" ({tok.describe()})" if tok is not None and tok.mode == "sentencepiece" else ""  # noqa: E731
        return (f"source vocabulary {len(self.vocab)}{sp(self.tokenizer)}, target vocabulary "
                f"{len(self.target_vocab)}{sp(self.target_tokenizer if self.target_subword else None)}")

    def vocabularies(self) -> list[list[str]]:
        return [list(self.vocab.tokens), list(self.target_vocab.tokens)]

    def encode_sources(self, texts: list) -> tuple[list, int, int]:
        """Source ids per text: ``(ids lists, unknown symbols, all symbols)``."""
        ids = [self.vocab.encode(self.source_tokens(t)) for t in texts]
        return ids, sum(i == UNK_ID for x in ids for i in x), sum(len(x) for x in ids)

    def dataset(self, records, *, training, first_epoch=0):
        """Teacher-forced batches ``((source, decoder_inputs), targets)`` (see
        :func:`seqkit.heads.seq2seq.decoding.make_pair_dataset`)."""
        r = self.recipe
        src, _, _ = self.encode_sources([x.text for x in records])
        tgt = [self.target_vocab.encode(self.target_symbols(x)) for x in records]
        return make_pair_dataset(src, tgt, batch_size=r.training.batch_size, shuffle=training,
                                 seed=r.seed, bucket=training and r.data.bucket,
                                 max_length=r.data.max_length, first_epoch=first_epoch,
                                 steps_per_epoch=r.training.steps_per_epoch if training else None)

    # ---------------------------------------------------------------- figures
    def decode_texts(self, model, texts: list, *, beam_width: int | None = None, n_best: int = 1,
                     length_penalty: float | None = None) -> list:
        """Beam-search outputs for source strings (``model``: one model, or a list decoded
        together as an ensemble, :func:`~seqkit.heads.seq2seq.decoding.transduce`).

        Returns:
            Per text, ``n_best`` ``(target symbols, score)`` pairs, best first (score:
            ``log P / lp``, see :func:`seqkit.inference.decoding.beam_search`).
        """
        dec = self.recipe.decoding
        ids, _, _ = self.encode_sources(texts)
        out = transduce(model, ids, beam_width=dec.beam_width if beam_width is None else beam_width,
                        n_best=n_best,
                        length_penalty=dec.length_penalty if length_penalty is None else length_penalty,
                        max_length=min(dec.max_length, self.recipe.data.max_length),
                        batch_size=self.options.decode_batch_size)
        names = self.target_vocab.tokens
        return [[([names[i] for i in toks], score) for toks, score in hyps] for hyps in out]

    def evaluate(self, model, records):
        """Teacher-forced ``cross_entropy``/``accuracy`` per target symbol, and ``wer``/``per``
        of the best beam hypothesis per distinct source (references: all its targets)."""
        res = keras_evaluate(model, self.dataset(records, training=False), "scoring (teacher forced)")
        out = {k: float(v) for k, v in res.items() if k != "loss"}
        out.update(self._output_figures(model, records))
        return out

    def evaluate_ensemble(self, models, records):
        """The figures of several runs decoded together: one beam over their mean
        log-probabilities (:mod:`seqkit.heads.seq2seq.ensemble`), scored like :meth:`evaluate`'s
        outputs.

        Args:
            models: ``M >= 2`` training models with this run's vocabularies.
            records: the split's records.

        Returns:
            ``{"wer", "per", "words", "phonemes", "beam_width", "members": M, ...}`` (no
            teacher-forced figures: an ensemble has no single training model to score).
        """
        return {**self._output_figures(list(models), records), "members": len(models)}

    def selection_figures(self, model, records):
        """``{"wer", "per"}`` of ``model``'s outputs for ``records`` (the recipe's decoding, as
        :meth:`evaluate` scores them; a mixed-precision training model decodes in its own
        precision): what ``training.monitor: val_wer`` keeps the best epoch by."""
        refs, hyps = self._decoded(model, records)
        figs = g2p_error_rates(list(refs.values()), hyps)
        return {"wer": float(figs["wer"]), "per": float(figs["per"])}

    def _decoded(self, model, records) -> tuple[dict, list]:
        """``(refs, hyps)``: :func:`references` of ``records`` and the best output for each of its
        sources, in its order (subword outputs as characters, as the references are held)."""
        refs = references(records)
        hyps = [h[0][0] for h in self.decode_texts(model, list(refs))]
        if self.target_subword:
            hyps = [list(self.target_text(h)) for h in hyps]
        return refs, hyps

    def _output_figures(self, model, records) -> dict:
        refs, hyps = self._decoded(model, records)
        _, unk, total = self.encode_sources(list(refs))
        out = {**self.output_scores(refs, hyps), "beam_width": self.recipe.decoding.beam_width,
               "unknown_source_symbols": unk, "source_symbols": total}
        if self.lookup is not None:
            out["vs_baseline"] = self.paired_test(refs, hyps)
        return out

    def paired_test(self, refs: dict, hyps: list) -> dict:
        """McNemar's exact test of the model against the lookup baseline on the same sources
        (:func:`seqkit.metrics.significance.mcnemar`): a source counts as right when its output
        equals one of its references.

        Returns:
            ``{"baseline": name, "model_only": b, "baseline_only": c, "p_value": p}`` -- ``b``
            sources the model gets right and the baseline wrong, ``c`` the reverse.
        """
        words = list(refs)
        model_ok = [list(h) in refs[w] for w, h in zip(words, hyps)]
        base_ok = [self.lookup(self.source_tokens(w)) in refs[w] for w in words]
        t = mcnemar(model_ok, base_ok)
        return {"baseline": LOOKUP_BASELINE, "model_only": t["first_only"],
                "baseline_only": t["second_only"], "p_value": t["p_value"]}

    def output_scores(self, refs: dict, hyps: list) -> dict:
        """Figures of output sequences: ``wer``/``per`` (:func:`seqkit.metrics.edit_distance.g2p_error_rates`)
        and, with ``head.text_metrics``, ``bleu``/``chrf`` (:func:`seqkit.metrics.text.bleu_chrf`).

        Args:
            refs: ``{source text: [reference symbol lists]}`` (:func:`references`).
            hyps: one hypothesis symbol list per key of ``refs``, in its order.
        """
        words = list(refs)
        out = g2p_error_rates([refs[w] for w in words], hyps)
        if self.options.text_metrics:
            join = "".join if self.target_subword else " ".join
            out.update(bleu_chrf([[join(r) for r in refs[w]] for w in words], [join(h) for h in hyps]))
        return out

    def baselines(self, prep):
        """For aligned data -- every training pair has one target symbol per source symbol, as
        Chinese characters and their pinyin syllables -- the most frequent target symbol of each
        source symbol in training (:class:`seqkit.metrics.baselines.MostFrequentTargetPerSymbol`), scored
        on valid and test like the model (``wer``, ``per``; ``bleu``, ``chrf`` with
        ``head.text_metrics``). Unaligned data (G2P): none."""
        train = prep.splits["train"]
        base = self.lookup if train is self._lookup_train else self.fit_lookup(train)  # fitted once
        if base is None:
            return {}
        out = {}
        for s in ("valid", "test"):
            recs = prep.splits.get(s) or []
            if recs:
                refs = references(recs)
                f = self.output_scores(refs, [base(self.source_tokens(w)) for w in refs])
                out[s] = {k: round(f[k], 6) for k in ("wer", "per", "bleu", "chrf") if k in f}
        return {LOOKUP_BASELINE: out}

    def fit_lookup(self, train: list):
        """The lookup baseline of aligned training pairs
        (:class:`seqkit.metrics.baselines.MostFrequentTargetPerSymbol`), or ``None`` when the
        split is empty or some pair is not one target symbol per source symbol."""
        pairs = [(self.source_tokens(r.text), list(r.target)) for r in train]
        if not pairs or any(len(s) != len(t) for s, t in pairs):
            return None
        return MostFrequentTargetPerSymbol(pairs)

    def check_splits(self, splits: dict) -> None:
        """Fit the lookup baseline on the training split (aligned data only), so that
        :meth:`evaluate` reports the model's paired test against it (``vs_baseline``)."""
        self._lookup_train = splits.get("train")
        self.lookup = self.fit_lookup(self._lookup_train or [])

    def format_metrics(self, figures):
        unk = figures.get("unknown_source_symbols")
        return [f"WER {100 * figures['wer']:.2f}%, PER {100 * figures['per']:.2f}% "
                f"(beam {figures['beam_width']}, {figures['words']} words, {figures['phonemes']} "
                f"reference symbols{f', {unk} unknown source symbols' if unk else ''})"
                + (f"; cross-entropy {figures['cross_entropy']:.4f}, symbol accuracy {figures['accuracy']:.4f}"
                   if "cross_entropy" in figures else f"; {figures.get('members')} runs decoded together")
                + (f"; BLEU {figures['bleu']:.2f}, chrF {figures['chrf']:.2f}" if "bleu" in figures else "")
                ] + self.format_paired(figures.get("vs_baseline"))

    @staticmethod
    def format_paired(t) -> list[str]:
        """The console line of :meth:`paired_test`'s figures (none without them)."""
        if not isinstance(t, dict) or "p_value" not in t:
            return []
        return [f"paired with baseline {t.get('baseline')}: only the model right on {t['model_only']} "
                f"words, only the baseline on {t['baseline_only']}; exact McNemar p = {t['p_value']:.3g}"]

    def loss(self):
        from seqkit.training.losses import MaskedSparseCrossEntropy

        return MaskedSparseCrossEntropy(label_smoothing=self.recipe.training.label_smoothing)

    def decoder_config(self) -> dict:
        """The decoder's cell, width and depth (head keys, else the encoder's)."""
        m, o = self.recipe.model, self.options
        same_cell = o.decoder_cell in (None, m.cell)
        return dict(cell=o.decoder_cell or m.cell, units=o.decoder_units or m.units,
                    layers=o.decoder_layers or m.layers,
                    cell_options=self.recipe.cell_options.model_dump() if same_cell else {})

    def build_model(self, source_vocab_size: int | None = None, target_vocab_size: int | None = None):
        """Build the training model.

        Args:
            source_vocab_size / target_vocab_size: vocabulary sizes (default: the
                sizes of the vocabularies given to the head).

        Returns:
            ``keras.Model`` named ``seq2seq`` with inputs ``source [B, S]`` and
            ``decoder_inputs [B, T]`` (int32, 0 = padding) and output logits
            ``[B, T, V_target]``; its sub-model ``encoder`` maps a source to
            ``[memory [B, S, Hm], *decoder start states [B, H]]``.

        Raises:
            RecipeError: no vocabulary size, or a Luong ``dot`` score with an
                encoder output width different from the decoder width.
        """
        import keras
        from keras import ops

        from seqkit.layers.decoder import Seq2SeqDecoder

        vs = source_vocab_size or (len(self.vocab) if self.vocab is not None else None)
        vt = target_vocab_size or (len(self.target_vocab) if self.target_vocab is not None else None)
        if not vs or not vt:
            raise RecipeError("seq2seq head: source and target vocabulary sizes are needed "
                              "(build_model(source_vocab_size, target_vocab_size)).")
        m, o = self.recipe.model, self.options
        dec = self.decoder_config()
        enc_width = m.units * (2 if m.bidirectional else 1)
        if o.attention == "luong_dot" and enc_width != dec["units"]:
            raise RecipeError(
                f"head.attention: luong_dot needs the encoder output width ({enc_width}"
                f"{', bidirectional' if m.bidirectional else ''}) to equal head.decoder_units "
                f"({dec['units']}); set head.decoder_units: {enc_width} or use attention: luong.")
        plugin = make_plugin(m, self.recipe.cell_options)
        source = keras.Input(shape=(None,), dtype="int32", name="source")
        x = keras.layers.Embedding(vs, m.embedding_dim, mask_zero=True, name="source_embedding")(source)
        memory, enc_states = apply_stack(x, plugin, m, causal=False, name="encoder_rnn", return_state=True)
        dec_names = CELLS.get(dec["cell"]).state_names
        start = bridge(enc_states, enc_names=plugin.state_names, enc_units=m.units,
                       bidirectional=m.bidirectional, dec_names=dec_names, dec_units=dec["units"],
                       dec_layers=dec["layers"])
        encoder = keras.Model(source, [memory, *start], name="encoder")

        src = keras.Input(shape=(None,), dtype="int32", name="source")
        dec_in = keras.Input(shape=(None,), dtype="int32", name="decoder_inputs")
        enc_out = encoder(src)
        decoder = Seq2SeqDecoder(vt, o.target_embedding_dim or m.embedding_dim, dec["cell"],
                                 dec["units"], dec["layers"], attention=o.attention,
                                 attention_units=o.attention_units, cell_options=dec["cell_options"],
                                 dropout=o.decoder_dropout, name="decoder")
        logits = decoder(dec_in, enc_out[0], ops.not_equal(src, 0), list(enc_out[1:]))
        return keras.Model([src, dec_in], logits, name="seq2seq")

    @classmethod
    def stream_export(cls, export, metadata, request):
        """Encode each input line, decode it symbol by symbol (beam search, or ``greedy``) with the
        exported ``encode`` / ``decode_step`` models (:class:`seqkit.runtime.Seq2SeqModel`), and
        yield one line of output symbols per input line.

        Raises:
            SeqkitError: a ``prompt``; ``greedy`` with ``beam_width``; a source too long.
        """
        if request.prompt:
            raise SeqkitError("--prompt is for language-model exports; give a seq2seq export its "
                              "sources with --input FILE (one per line) or on stdin.")
        if request.greedy and request.beam_width is not None:
            raise SeqkitError("--greedy and --beam-width exclude each other (--beam-width 1 with "
                              "length penalty 0 is greedy).")
        rt = Seq2SeqModel(export)
        name, text = request.read()
        for _, ids in read_sources(text, name, rt):
            out = (rt.greedy(ids, request.max_length) if request.greedy
                   else rt.beam_search(ids, beam_width=request.beam_width,
                                       max_length=request.max_length)[0][0])
            yield rt.text(out) + "\n"

    def transduce_texts(self, prep, model, text, name, *, beam_width, n_best, length_penalty,
                        input_format="auto"):
        """Beam-search each source of ``text``, a line each or a table's source column
        (:func:`seqkit.heads.seq2seq.transduce.read_sources`, :func:`~seqkit.heads.seq2seq.transduce.predict_pairs`)."""
        from seqkit.heads.seq2seq.transduce import predict_pairs, read_sources

        return predict_pairs(prep, model, read_sources(text, name, self, input_format), beam_width=beam_width,
                             n_best=n_best, length_penalty=length_penalty)

    def attention(self, prep, model, text, name, *, beam_width):
        """``(source [S], target [T], weights [T, S])`` of the first source of ``text``
        (:func:`seqkit.heads.seq2seq.alignment.alignment`)."""
        from seqkit.heads.seq2seq.transduce import read_sources

        [(_, src)] = read_sources(text, name, self)[:1]
        return alignment(prep, model, src, beam_width=beam_width)

    def text_functions(self, prep, model, *, max_length=None):
        """``predict_text`` (beam search) and ``generate_text`` (greedy)
        (:class:`seqkit.heads.seq2seq.serving.Seq2SeqTextFunctions`).

        Raises:
            SeqkitError: the run cannot take text (:meth:`text_unsupported`).
        """
        why = self.text_unsupported()
        if why is not None:
            raise SeqkitError(f"this run cannot serve text: {why}.")
        return Seq2SeqTextFunctions(prep, model, role="transduce", max_length=max_length)

    def export(self, prep, model, out, options, calibration):
        """An encoder (full sequence, pinned ``[1, length]``) + ``decode_step`` export
        (:func:`seqkit.heads.seq2seq.export.export_seq2seq`).

        Raises:
            SeqkitError: ``batch`` other than 1, ``full_sequence``, ``int16_cell``; as
                ``export_seq2seq``.
        """
        if options.batch != 1:
            raise SeqkitError(f"--batch {options.batch}: a seq2seq export pins its encoder to one source "
                              f"per call ([1, --length]); drop --batch. Beam search still steps "
                              f"its K beams together (decode_step takes any number of rows).")
        if options.int16_cell:
            raise SeqkitError("--int16-cell quantizes a single LSTM step model; a seq2seq export "
                              "(encode + decode_step) has no such option. Export with --quantize "
                              "int8 alone, or int16x8.")
        o = options
        return export_seq2seq(prep, model, out, fmt=o.fmt, quantize=o.quantize, tolerance=o.tolerance,
                              min_agreement=o.min_agreement, parity_examples=o.parity_examples,
                              length=o.length, io_type=o.io_type, calibration=calibration)

    def stepper(self, model) -> "Seq2SeqStepper":
        """The encoder pass plus one-step decoder of ``model``, for :mod:`seqkit.inference.decoding`."""
        return Seq2SeqStepper(model)
