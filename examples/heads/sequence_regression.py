"""A task head seqkit does not ship, written only against the head contract (docs/heads.md):
per-sequence regression. It reads a table of ``text`` and a number (``label_column``), encodes the
text with seqkit's sequence inputs, and answers one real value per sequence from the final state:
``tokens [B, T] int32 -> value [B, 1] float32`` (the output layer is named ``logits``, so the step
view and the export find it). Loss: mean squared error of the standardised target; figure: mean
absolute error (MAE, the target's units) beside the training-mean baseline.

Use it with ``--plugin examples/heads/sequence_regression.py`` (or copy it into a package that
registers it under the ``seqkit.heads`` entry-point group) and ``head: {type: sequence_regression}``.
``tests/test_plugin_head.py`` trains it, evaluates, predicts, exports (float32 and int8), streams
the lone ``.tflite`` and compares the streamed values with ``predict``'s.
"""

from __future__ import annotations

import json
import os

import numpy as np

from seqkit.errors import DataError, RunDirError
from seqkit.heads.base import Head
from seqkit.registry import register_head

TARGET = "regression_target.json"


@register_head("sequence_regression")
class SequenceRegression(Head):
    answers = "predict"  # `seqkit predict` / Run.predict answer raw input with predict() below
    table_columns = {"text_column": ("text", 0), "label_column": ("label", 1)}  # the `table` source
    label_classes = False  # Record.label holds a number, not a class

    def __init__(self, recipe, vocab=None):
        from seqkit.heads.sequence.inputs import SequenceInputs

        super().__init__(recipe, None)
        self.inputs = SequenceInputs(recipe.data)
        self.mean, self.std = 0.0, 1.0

    vocab = property(lambda self: self.inputs.vocab if hasattr(self, "inputs") else None,
                     lambda self, v: None)

    @classmethod
    def table_record(cls, row, data, options):
        from seqkit.data.records import Record

        return Record(tokens=row.text("text_column").split(), label=row.text("label_column"),
                      where=row.where)

    # ---- data
    def check_records(self, records, split):
        for r in records:
            try:
                r.value = float(r.label)
            except (TypeError, ValueError):
                r.value = None
            if r.value is None or not np.isfinite(r.value):
                raise DataError(f"{r.where}: {r.label!r} is not a finite number; every target needs one.")
        return records

    def fit(self, train):
        self.inputs.fit(train)
        y = np.asarray([r.value for r in train])
        self.mean, self.std = float(y.mean()), float(y.std() or 1.0)

    def save_assets(self, run_dir):
        self.inputs.save(run_dir)
        with open(os.path.join(run_dir, TARGET), "w") as f:
            json.dump({"mean": self.mean, "std": self.std}, f)

    def load_assets(self, run_dir):
        self.inputs.load(run_dir)
        path = os.path.join(run_dir, TARGET)  # a run is untrusted input: check what it holds
        try:
            with open(path) as f:
                d = json.load(f)
            self.mean, self.std = float(d["mean"]), float(d["std"])
        except (OSError, ValueError, TypeError, KeyError) as exc:
            raise RunDirError(f"{path}: unreadable ({type(exc).__name__}: {exc}); train the run again.") from None
        if not (np.isfinite(self.mean) and np.isfinite(self.std) and self.std > 0):
            raise RunDirError(f"{path}: mean {self.mean} and std {self.std} are not a finite mean and a "
                              f"positive scale; the file was edited or damaged. Train the run again.")

    def dataset(self, records, *, training, first_epoch=0):
        from seqkit.data.pipeline import make_array_dataset

        r = self.recipe
        ys = [np.float32((getattr(x, "value", 0.0) - self.mean) / self.std) for x in records]
        return make_array_dataset([self.inputs.encode(x) for x in records], ys,
                                  batch_size=r.training.batch_size, shuffle=training, seed=r.seed,
                                  bucket=False, max_length=r.data.max_length, first_epoch=first_epoch)

    # ---- model
    def build_model(self):
        import keras

        from seqkit.layers.pooling import SequencePooling
        from seqkit.layers.stack import apply_stack, make_plugin

        cfg = self.recipe.model
        inp, x = self.inputs.input_layer(cfg)
        x = apply_stack(x, make_plugin(cfg, self.recipe.cell_options), cfg, causal=False)
        x = SequencePooling("final", cfg.bidirectional, name="pooling")(x)
        return keras.Model(inp, keras.layers.Dense(1, name="logits")(x), name="regression")

    def loss(self):
        import keras

        return keras.losses.MeanSquaredError()

    def metrics(self):
        return []

    def values(self, model, records):
        """Predicted values (original units), ``[N]`` float."""
        out = []
        for x, _ in self.dataset(records, training=False):
            out.extend(np.asarray(model(x, training=False))[:, 0])
        return np.asarray(out) * self.std + self.mean

    def evaluate(self, model, records):
        y = np.asarray([r.value for r in records])
        return {"mae": float(np.mean(np.abs(self.values(model, records) - y))), "examples": len(y)}

    def baselines(self, prep):
        out = {}
        for s in ("valid", "test"):
            y = np.asarray([r.value for r in prep.splits.get(s) or []])
            if len(y):
                out[s] = {"mae": float(np.mean(np.abs(y - self.mean)))}
        return {"training-mean": out}

    # ---- answers
    def predict(self, model, records):
        return [{"where": r.where, "value": round(float(v), 5)}
                for r, v in zip(records, self.values(model, records))]

    # ---- export and streaming
    def stepper(self, model):
        from seqkit.heads.sequence.stepper import SequenceStepper
        from seqkit.registry import CELLS

        return SequenceStepper(model, CELLS.get(self.recipe.model.cell).state_names, kind="tokens",
                               pooling="final", bidirectional=self.recipe.model.bidirectional)

    def export_metadata(self, stepper, full_sequence):
        return {"output": "logits [B, 1]: the standardised value if the sequence ended here",
                "target": {"mean": self.mean, "std": self.std}}

    @classmethod
    def stream_export(cls, export, metadata, request):
        from seqkit.data.vocab import UNK_ID
        from seqkit.runtime.streaming import StreamingModel

        rt = StreamingModel(export)
        index = {t: i for i, t in enumerate(metadata["vocab"])}
        mean, std = metadata["target"]["mean"], metadata["target"]["std"]
        name, text = request.read()
        for n, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            rt.reset()
            for tok in line.split():
                z = rt.step(np.asarray([index.get(tok, UNK_ID)], np.int32))
            yield f"{name}:{n}\t{float(np.asarray(z)[0, 0]) * std + mean:.5f}\n"
