"""Tagger head: an aligned transducer, one tag per input step.

``tokens [B, T] int32`` or ``frames [B, T, D] float32`` (``model.char_embedding``:
``tokens [B, T, 1 + W]``, each word's id and characters, :mod:`seqkit.heads.sequence.inputs`)
-> encoder ``[B, T, H]``
(stacked and/or bidirectional allowed) -> ``logits [B, T, C]``; targets
``[B, T]`` fed as ``tag + 1`` with ``0`` at padding, so padding positions reach
neither the loss nor the metrics (:mod:`seqkit.training.losses`).

Figures: token accuracy, per-tag precision/recall/F1, macro-F1, entity-level
F1 (``seqeval``) when the tags follow BIO/BIOES, a confusion matrix on request.
Baseline: the most frequent tag of each word in training (unknown words: the
most frequent tag overall).

``head.crf: true`` puts a linear-chain CRF (:mod:`seqkit.layers.crf`) on the
logits, which become the CRF's emissions: the model still outputs ``[B, T, C]``
emissions (so step exports stream them), training minimises the CRF negative
log-likelihood per token, and evaluation / ``seqkit predict`` decode the best
whole path with Viterbi (per-tag probabilities are the CRF marginals).

TensorFlow, Keras and the seqkit modules that import them and NumPy are imported inside the
functions that use them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import collections
from typing import Literal

import numpy as np

from seqkit import log
from seqkit.data.pipeline import make_array_dataset
from seqkit.data.records import Record
from seqkit.errors import DataError
from seqkit.heads.sequence.head import SequenceHead
from seqkit.heads.sequence.inputs import SequenceHeadOptions, apply_too_long
from seqkit.layers.stack import apply_stack, make_plugin
from seqkit.metrics import classification as M
from seqkit.progress import progress
from seqkit.registry import register_head


class TaggerOptions(SequenceHeadOptions):
    """Recipe keys of the ``tagger`` head (under ``head``); ``too_long`` defaults to ``split``.

    crf: a linear-chain CRF output (transition scores between tags; Viterbi decoding)
    instead of independent per-step softmaxes.
    """

    too_long: Literal["refuse", "truncate", "split"] = "split"
    confusion_matrix: bool = False
    crf: bool = False


class MostFrequentTag:
    """Baseline tagger: each word's most frequent training tag; unknown words get the
    most frequent tag overall (ties: the tag seen first)."""

    def __init__(self, records: list, lowercase: bool = False):
        self.lower = lowercase
        per_word = collections.defaultdict(collections.Counter)
        overall = collections.Counter()
        for r in records:
            for w, t in zip(r.tokens, r.tags):
                per_word[self._w(w)][t] += 1
                overall[t] += 1
        self.table = {w: c.most_common(1)[0][0] for w, c in per_word.items()}
        self.default = overall.most_common(1)[0][0]

    def _w(self, w):
        return w.lower() if self.lower else w

    def __call__(self, tokens: list) -> list:
        return [self.table.get(self._w(w), self.default) for w in tokens]


@register_head("tagger")
class TaggerHead(SequenceHead):
    """One tag per step: logits ``[B, T, C]``; padding excluded from loss and metrics."""

    Options = TaggerOptions
    subword_inputs = False
    text_role = "tag"
    starter_task = "tag"
    diagnostics = "per_step"
    table_columns = {"tokens_column": ("tokens", 0), "tags_column": ("tags", 1)}
    #: tables hold pre-split tokens (white space), whatever ``data.tokenizer`` says
    table_tokenizer = "whitespace"

    @classmethod
    def starter(cls, paths, rel):
        """``seqkit init --task tag`` (:func:`seqkit.heads.sequence.starter.tag_starter`)."""
        from seqkit.heads.sequence.starter import tag_starter

        return tag_starter(paths, rel)

    @classmethod
    def table_record(cls, row, data, options):
        """A row's tokens and tags (list cells), one tag per token."""
        toks, tags = row.tokens("tokens_column"), row.tokens("tags_column")
        if len(toks) != len(tags):
            raise DataError(f"{row.where}: {len(toks)} tokens but {len(tags)} tags; a tagger needs one "
                            f"tag per token.")
        return Record(tokens=toks, tags=tags, where=row.where)
    allow_split = True
    target_name = "tag"

    def record_classes(self, record):
        return list(record.tags)

    def check_targets(self, records, split):
        for r in records:
            if r.tags is None:
                self._no_target(r, split)
            if len(r.tags) != len(r):
                raise DataError(f"{r.where}: {len(r)} input steps but {len(r.tags)} tags; a tagger "
                                f"needs exactly one tag per token/frame.")

    def encode_target(self, record):
        return np.asarray([self.labels.id(t) + 1 for t in record.tags], "int32")  # 0: no loss

    def build_model(self):
        import keras

        cfg = self.recipe.model
        inp, x = self.inputs.input_layer(cfg)
        x = apply_stack(x, make_plugin(cfg, self.recipe.cell_options), cfg, causal=False)
        if self.options.output_dropout > 0:
            x = keras.layers.Dropout(self.options.output_dropout, name="output_dropout")(x)
        logits = keras.layers.Dense(len(self.labels), name="logits")(x)
        if self.crf:
            from seqkit.layers.crf import CRF, CRFTaggerModel

            return CRFTaggerModel(inp, CRF(len(self.labels), name="crf")(logits), name="tagger")
        return keras.Model(inp, logits, name="tagger")

    @property
    def crf(self) -> bool:
        return bool(getattr(self.options, "crf", False))

    def loss(self):
        """Softmax tagger: masked token cross-entropy. CRF: None (the model's own
        ``compute_loss``, :class:`seqkit.layers.crf.CRFTaggerModel`)."""
        return None if self.crf else super().loss()

    def metrics(self):
        """CRF: the Viterbi token accuracy only (per-step cross-entropy of the emissions
        means nothing there; checkpoints and early stopping watch the loss)."""
        if not self.crf:
            return super().metrics()
        from seqkit.training.losses import MaskedAccuracy

        return [MaskedAccuracy(offset=1)]

    def decode(self, model, records: list, batch_size: int | None = None) -> list:
        """``(tag ids [T] int, probabilities [T, C])`` per record, in input order.

        Softmax tagger: arg-max of the per-step softmax. CRF: the Viterbi path of the
        whole record and the CRF marginals ``p(y_t = j | x)``.
        """
        if not self.crf:
            return [(np.argmax(p, axis=-1), p) for p in self.predict_proba(model, records, batch_size)]
        import tensorflow as tf

        crf = model.get_layer("crf")
        xs = [self.inputs.encode(x) for x in records]
        ds = make_array_dataset(xs, [0] * len(xs), batch_size=batch_size or self.recipe.training.batch_size,
                                shuffle=False, seed=0, bucket=False, max_length=self.recipe.data.max_length)

        @tf.function(reduce_retracing=True)
        def run(x):
            from seqkit.layers.crf import _input_mask

            z = model(x, training=False)
            mask = _input_mask(x)
            return crf.decode(z, mask), crf.marginals(z, mask)

        out = []
        with progress(len(xs), "tagging", "sequences") as bar:
            for x, _ in ds:
                tags, probs = run(x)
                out.extend(zip(tags.numpy(), probs.numpy()))
                bar.update(len(tags))
        return [(t[:len(r)], p[:len(r)]) for (t, p), r in zip(out, records)]

    def trim(self, probs, length):
        return probs[:length]

    def predict_tags(self, model, records: list) -> list:
        """``[T, C]`` tag probabilities per record (CRF: marginals); see :meth:`predict_paths`."""
        return [p for _, p in self.predict_paths(model, records)]

    def predict_paths(self, model, records: list) -> list:
        """``(tag ids [T], probabilities [T, C])`` per record (see :meth:`decode`); a record
        longer than the run's ``data.max_length`` follows ``head.too_long`` (``split``:
        tagged in pieces that are re-joined -- a CRF decodes each piece on its own;
        ``truncate``: only its first steps are tagged)."""
        pieces, owner = apply_too_long(records, self.recipe.data.max_length, self.options.too_long,
                                       what="the run's data.max_length", allow_split=True,
                                       with_owner=True)
        joined = [[] for _ in records]
        for i, p in zip(owner, self.decode(model, pieces)):
            joined[i].append(p)
        return [(np.concatenate([t for t, _ in ps]), np.concatenate([p for _, p in ps], axis=0))
                for ps in joined]

    @classmethod
    def stream_note(cls, metadata):
        if metadata.get("crf"):
            log.info("note: CRF tagger -- tags are the best path of each whole line (Viterbi); a step's "
                     "tag can change until its sequence ends, so each line prints when it ends.")  # -q hides it

    @classmethod
    def stream_answer(cls, ans, seq, last):
        """``word/TAG`` as each tag comes, a line per sequence."""
        word = seq.tokens[ans.t] if seq.tokens is not None else str(ans.t)
        return f"{word}/{ans.name}" + ("\n" if last else " ")

    def output_meaning(self, step):
        return "logits [B, C]: this step's tag scores" if step else "logits [B, T, C]"

    def parity_targets(self, records, T):
        """Tag ids + 1, ``[N, T]`` (0: padding or a tag unseen in training, not scored)."""
        import numpy as np

        try:
            y = np.zeros((len(records), T), np.int32)
            for i, r in enumerate(records):
                t = self.encode_target(r)[:T]
                y[i, : len(t)] = t
            return y
        except (AttributeError, TypeError, KeyError, ValueError):  # unlabelled records
            return None

    def scores(self, true_seqs: list, pred_seqs: list) -> dict:
        """Token accuracy, macro-F1, per-tag figures and (BIO/BIOES) entity F1 of tag sequences."""
        true = [t for s in true_seqs for t in s]
        pred = [t for s in pred_seqs for t in s]
        out = {"accuracy": M.accuracy(true, pred), "macro_f1": M.macro_f1(true, pred, self.labels.names),
               "tokens": len(true), "sequences": len(true_seqs)}
        unseen = sum(1 for t in true if t not in self.labels)
        if unseen:
            out["unseen_tag_tokens"] = unseen
        scheme = M.tag_scheme(self.labels.names)
        if scheme:
            ent = M.entity_scores(true_seqs, pred_seqs, scheme)
            out.update({"entity_scheme": scheme, "entity_precision": ent["precision"],
                        "entity_recall": ent["recall"], "entity_f1": ent["f1"]})
        out["per_tag"] = M.per_class(true, pred, self.labels.names)
        if self.options.confusion_matrix:
            out["confusion_matrix"] = M.confusion_matrix(true, pred, self.labels.names)
        return out

    def evaluate(self, model, records):
        """:meth:`scores` of the decoded paths; token inputs add ``oov_tokens`` and ``oov_accuracy``:
        the tokens the word vocabulary reads as ``[UNK]`` and the accuracy on them (none: no
        ``oov_accuracy``) -- where character-aware inputs (``model.char_embedding``) help."""
        pred = [[self.labels.names[i] for i in ids] for ids, _ in self.decode(model, records)]
        out = self.scores([list(r.tags) for r in records], pred)
        if self.inputs.kind == "tokens" and self.inputs.subword is None:
            index = self.inputs.vocab.index
            hits = [t == p for r, ps in zip(records, pred)
                    for w, t, p in zip(self.inputs._toks(r.tokens), r.tags, ps) if w not in index]
            out["oov_tokens"] = len(hits)
            if hits:
                out["oov_accuracy"] = float(np.mean(hits))
        return out

    def baselines(self, prep):
        """Most-frequent-tag-per-word, trained on the train split, scored on valid and test."""
        if self.inputs.kind != "tokens":
            return {}
        base = MostFrequentTag(prep.splits["train"], self.recipe.data.lowercase)
        out = {}
        for s in ("valid", "test"):
            recs = prep.splits.get(s) or []
            if recs:
                f = self.scores([list(r.tags) for r in recs], [base(r.tokens) for r in recs])
                out[s] = {k: round(f[k], 6) for k in ("accuracy", "macro_f1", "entity_f1") if k in f}
        return {"most-frequent-tag-per-word": out}

    def format_metrics(self, figures):
        line = (f"token accuracy {figures['accuracy']:.4f}, macro-F1 {figures['macro_f1']:.4f}"
                + (f", entity F1 ({figures['entity_scheme']}) {figures['entity_f1']:.4f}"
                   if "entity_f1" in figures else "")
                + f" ({figures['tokens']} tokens, {figures['sequences']} sequences"
                + (f", {figures['unseen_tag_tokens']} with tags unseen in training"
                   if figures.get("unseen_tag_tokens") else "") + ")")
        if figures.get("oov_tokens"):
            line += (f"; on the {figures['oov_tokens']} tokens read as [UNK]: accuracy "
                     f"{figures['oov_accuracy']:.4f}")
        lines = [line, f"  {'tag':<8} {'P':>6} {'R':>6} {'F1':>6} {'support':>8}"]
        for tag, v in figures.get("per_tag", {}).items():
            lines.append(f"  {tag:<8} {v['precision']:6.3f} {v['recall']:6.3f} {v['f1']:6.3f} {v['support']:8d}")
        cm = figures.get("confusion_matrix")
        if cm:
            lines.append("confusion matrix (rows true, columns predicted): " + " ".join(cm["columns"]))
            lines += [f"  {r:>8} " + " ".join(f"{v:>5}" for v in row) for r, row in zip(cm["rows"], cm["matrix"])]
        return lines
