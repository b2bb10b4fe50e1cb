"""The reference LM shape of the benchmarks, built the seqkit way with untrained weights.

Vocabulary 5000, embedding 128, one LSTM layer of 256 units, Dense logits
(2.32 M parameters); training batch 32, length 64; streaming batch 1. The
model comes from the ``language_model`` head of a recipe (the same code
``seqkit train`` runs) over a synthetic 5000-token vocabulary, with weights
from a fixed seed: timings do not depend on trained values, except where a
suite says so (decoding stops when the end token wins).
"""

from __future__ import annotations

import os
import tempfile

LM_SHAPE = {"vocab": 5000, "embedding": 128, "units": 256, "layers": 1, "batch": 32, "length": 64}


def lm_recipe(*, vocab: int = 5000, embedding: int = 128, units: int = 256, cell: str = "lstm",
              batch: int = 32, length: int = 64, seed: int = 0, **model):
    """A validated language-model recipe of the given shape (the data source is never read)."""
    from seqkit.recipe import recipe_from_dict

    return recipe_from_dict({
        "name": "bench-lm", "seed": seed,
        "data": {"source": "pydoc_topics", "tokenizer": "whitespace", "max_length": length + 1,
                 "max_vocab": vocab},
        "model": {"cell": cell, "units": units, "embedding_dim": embedding, "layers": 1, **model},
        "head": {"type": "language_model"},
        "training": {"batch_size": batch, "epochs": 1, "early_stopping": None},
    })


def build_lm(**shape):
    """``(prep, model)``: a :class:`seqkit.training.train.Prepared` over a synthetic vocabulary of
    ``shape['vocab']`` ids and the head's (untrained, seeded) Keras model."""
    import keras

    from seqkit.data.vocab import SPECIALS, Vocabulary
    from seqkit.training.train import prepare

    recipe = lm_recipe(**shape)
    n = shape.get("vocab", LM_SHAPE["vocab"])
    vocab = Vocabulary(list(SPECIALS) + [f"w{i}" for i in range(n - len(SPECIALS))])
    keras.utils.set_random_seed(recipe.seed)
    prep = prepare(recipe, vocab, read_data=False)
    return prep, prep.head.build_model()


def export_step_models(prep, model, quantizations=("none", "float16", "dynamic-range")) -> dict:
    """``{quantize: (model_bytes, metadata)}``: the TFLite step model as ``seqkit export`` makes
    it (``ExportArchive`` of :func:`seqkit.export.archive.build_archive`, then
    :func:`seqkit.export.tflite.convert_step`), without the parity check."""
    from seqkit.export.archive import build_archive
    from seqkit.export.tflite import convert_step
    from seqkit.export.writer import metadata_for

    archive, stepper = build_archive(prep, model)
    out = {}
    with tempfile.TemporaryDirectory(prefix="seqkit-bench-") as tmp:
        sm = os.path.join(tmp, "saved_model")
        archive.write_out(sm, verbose=False)
        for q in quantizations:
            out[q] = (convert_step(sm, q), metadata_for(prep, stepper, q))
    return out


def export_stateful_models(prep, model, quantizations=("none", "dynamic-range"), batch: int = 1) -> dict:
    """``{quantize: (model_bytes, metadata)}``: the ``--state internal`` TFLite step model as
    ``seqkit export --state internal`` makes it (:mod:`seqkit.export.stateful`), without the
    parity check."""
    from seqkit.export.stateful import build_stateful_archive, convert_stateful, mark_internal
    from seqkit.export.writer import metadata_for

    archive, stepper = build_stateful_archive(prep, model, batch)
    out = {}
    with tempfile.TemporaryDirectory(prefix="seqkit-bench-") as tmp:
        sm = os.path.join(tmp, "saved_model")
        archive.write_out(sm, verbose=False)
        for q in quantizations:
            meta = metadata_for(prep, stepper, q)
            mark_internal(meta, batch)
            out[q] = (convert_stateful(sm, q), meta)
    return out


def write_export(model_bytes: bytes, metadata: dict, out_dir: str) -> str:
    """Write ``model.tflite`` + ``metadata.json`` (what :class:`StreamingModel` reads); return ``out_dir``."""
    import json

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "model.tflite"), "wb") as f:
        f.write(model_bytes)
    with open(os.path.join(out_dir, "metadata.json"), "w", encoding="utf-8") as f:
        json.dump(metadata, f)
    return out_dir


def torch_lm_step(model):
    """A PyTorch ``nn.Embedding`` + ``nn.LSTMCell`` + ``nn.Linear`` step with the Keras model's
    weights (Keras gate order i, f, c, o is PyTorch's i, f, g, o; one bias -> ``bias_ih``),
    or ``None`` when torch is not installed."""
    try:
        import torch
    except ImportError:
        return None
    import numpy as np

    emb = np.asarray(model.get_layer("embedding").embeddings)
    cell = model.get_layer("rnn_0").cell
    kernel, rec, bias = (np.asarray(w) for w in cell.weights)
    dense = model.get_layer("logits")
    w_out, b_out = (np.asarray(w) for w in dense.weights)
    units = rec.shape[0]

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(*emb.shape)
            self.cell = torch.nn.LSTMCell(emb.shape[1], units)
            self.out = torch.nn.Linear(units, w_out.shape[1])

        def forward(self, token, h, c):
            h, c = self.cell(self.emb(token), (h, c))
            return self.out(h), h, c

    step = Step().eval()
    with torch.no_grad():
        step.emb.weight.copy_(torch.from_numpy(emb))
        step.cell.weight_ih.copy_(torch.from_numpy(kernel.T.copy()))
        step.cell.weight_hh.copy_(torch.from_numpy(rec.T.copy()))
        step.cell.bias_ih.copy_(torch.from_numpy(bias))
        step.cell.bias_hh.zero_()
        step.out.weight.copy_(torch.from_numpy(w_out.T.copy()))
        step.out.bias.copy_(torch.from_numpy(b_out))
    return step
