"""Acceptor head: read a whole sequence, answer once.

``tokens [B, T] int32`` or ``frames [B, T, D] float32`` (``model.char_embedding``:
``tokens [B, T, 1 + W]``, each word's id and characters, :mod:`seqkit.heads.sequence.inputs`)
-> encoder ``[B, T, H]``
-> one vector per sequence (:class:`~seqkit.layers.pooling.SequencePooling`:
the final valid state -- forward final + backward final when bidirectional --
or a masked mean/max) -> ``logits [B, C]``. Cross-entropy with hard targets
``[B]`` (fed as ``class + 1``; see :mod:`seqkit.training.losses`).

Figures: accuracy and macro-F1 (plus a confusion matrix with
``head.confusion_matrix: true``); baseline: the majority class of training.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import collections
import os
from typing import Literal

import numpy as np

from seqkit.data.records import Record
from seqkit.data.vocab import tokenize
from seqkit.errors import DataError, RunDirError
from seqkit.heads.sequence.head import SequenceHead
from seqkit.heads.sequence.inputs import SequenceHeadOptions
from seqkit.layers.stack import apply_stack, make_plugin
from seqkit.metrics import classification as M
from seqkit.registry import register_head
from seqkit.runs.rundir import atomic_write_json, read_json
from seqkit.training.class_weights import CLASS_WEIGHTS, resolve_class_weights


class AcceptorOptions(SequenceHeadOptions):
    """Recipe keys of the ``acceptor`` head (under ``head``).

    pooling: ``final`` (last valid state), ``mean`` or ``max`` (masked).
    confusion_matrix: also report the confusion matrix.
    too_long: ``refuse`` or ``truncate`` (an acceptor answers once: no ``split``).
    """

    too_long: Literal["refuse", "truncate"] = "refuse"
    pooling: Literal["final", "mean", "max"] = "final"
    confusion_matrix: bool = False


@register_head("acceptor")
class AcceptorHead(SequenceHead):
    """One class per sequence: logits ``[B, C]`` from the final valid state or a masked pooling."""

    Options = AcceptorOptions
    target_name = "label"
    class_weights = True
    text_role = "classify"
    starter_task = "classify"
    diagnostics = "per_sequence"
    table_columns = {"text_column": ("text", 0), "label_column": ("label", 1)}

    @classmethod
    def starter(cls, paths, rel):
        """``seqkit init --task classify`` (:func:`seqkit.heads.sequence.starter.classify_starter`)."""
        from seqkit.heads.sequence.starter import classify_starter

        return classify_starter(paths, rel)

    @classmethod
    def table_record(cls, row, data, options):
        """A row's text (split by ``data.tokenizer``) and label."""
        toks = tokenize(row.text("text_column"), data.tokenizer)
        if not toks:
            raise DataError(f"{row.where}: the text has no tokens; remove the row.")
        return Record(tokens=toks, label=row.label("label_column"), where=row.where)

    def record_classes(self, record):
        return [record.label]

    def check_targets(self, records, split):
        for r in records:
            if r.label is None or r.label == "":
                self._no_target(r, split)

    # ---------------------------------------------------------------- class weights
    def fit(self, train):
        super().fit(train)
        self.class_weights = resolve_class_weights(self.recipe.training.class_weight, self.labels.names,
                                                   [r.label for r in train])

    def save_assets(self, run_dir):
        super().save_assets(run_dir)
        if getattr(self, "class_weights", None) is not None:
            atomic_write_json(os.path.join(run_dir, CLASS_WEIGHTS),
                              dict(zip(self.labels.names, self.class_weights)))

    def load_assets(self, run_dir):
        super().load_assets(run_dir)
        self.class_weights = None
        if self.recipe.training.class_weight is not None:
            path = os.path.join(run_dir, CLASS_WEIGHTS)
            if not os.path.isfile(path):
                raise RunDirError(f"{path}: missing; the run's recipe sets training.class_weight and "
                                  f"training wrote the resolved weights there. Copy the file back.")
            saved = read_json(path)
            self.class_weights = [float(saved[k]) for k in self.labels.names]

    def loss(self):
        """Cross-entropy (``training.label_smoothing``), each example weighted by its class's
        weight (``training.class_weight``, :mod:`seqkit.training.class_weights`)."""
        from seqkit.training.losses import MaskedSparseCrossEntropy

        return MaskedSparseCrossEntropy(offset=1, label_smoothing=self.recipe.training.label_smoothing,
                                        class_weights=getattr(self, "class_weights", None))

    def encode_target(self, record):
        return self.labels.id(record.label) + 1  # 0 (unseen in training): no loss

    def build_model(self):
        import keras

        from seqkit.layers.pooling import SequencePooling

        cfg = self.recipe.model
        inp, x = self.inputs.input_layer(cfg)
        x = apply_stack(x, make_plugin(cfg, self.recipe.cell_options), cfg, causal=False)
        x = SequencePooling(self.options.pooling, cfg.bidirectional, name="pooling")(x)
        if self.options.output_dropout > 0:
            x = keras.layers.Dropout(self.options.output_dropout, name="output_dropout")(x)
        logits = keras.layers.Dense(len(self.labels), name="logits")(x)
        return keras.Model(inp, logits, name="acceptor")

    def export_metadata(self, stepper, full_sequence):
        """The sequence heads' metadata, and ``pooling``."""
        return {**super().export_metadata(stepper, full_sequence), "pooling": self.options.pooling}

    def output_meaning(self, step):
        return ("logits [B, C]: running class scores (the answer if the sequence ended at this "
                "step)" if step else "logits [B, C]")

    def parity_targets(self, records, T):
        """Class ids + 1, ``[N]`` (0: a class unseen in training, not scored)."""
        try:
            return np.asarray([self.encode_target(r) for r in records], np.int32)
        except (AttributeError, TypeError, KeyError, ValueError):  # unlabelled records
            return None

    def scores(self, true: list, pred: list) -> dict:
        """Accuracy, macro-F1 and per-class figures of label lists."""
        out = {"accuracy": M.accuracy(true, pred), "macro_f1": M.macro_f1(true, pred, self.labels.names),
               "examples": len(true)}
        unseen = sum(1 for t in true if t not in self.labels)
        if unseen:
            out["unseen_label_examples"] = unseen
        out["per_class"] = M.per_class(true, pred, self.labels.names)
        if self.options.confusion_matrix:
            out["confusion_matrix"] = M.confusion_matrix(true, pred, self.labels.names)
        return out

    def evaluate(self, model, records):
        probs = self.predict_proba(model, records)
        pred = [self.labels.names[int(np.argmax(p))] for p in probs]
        return self.scores([r.label for r in records], pred)

    def baselines(self, prep):
        """The majority class of the training split, scored on valid and test."""
        major = collections.Counter(r.label for r in prep.splits["train"]).most_common(1)[0][0]
        out = {}
        for s in ("valid", "test"):
            recs = prep.splits.get(s) or []
            if recs:
                true = [r.label for r in recs]
                f = self.scores(true, [major] * len(true))
                out[s] = {"accuracy": round(f["accuracy"], 6), "macro_f1": round(f["macro_f1"], 6)}
        return {"majority-class": out}

    def format_metrics(self, figures):
        line = f"accuracy {figures['accuracy']:.4f}, macro-F1 {figures['macro_f1']:.4f} ({figures['examples']} examples"
        if figures.get("unseen_label_examples"):
            line += f", {figures['unseen_label_examples']} with labels unseen in training"
        lines = [line + ")"]
        cm = figures.get("confusion_matrix")
        if cm:
            lines.append("confusion matrix (rows true, columns predicted): " + " ".join(cm["columns"]))
            lines += [f"  {r:>8} " + " ".join(f"{v:>4}" for v in row) for r, row in zip(cm["rows"], cm["matrix"])]
        return lines
