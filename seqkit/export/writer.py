"""``seqkit export``: write a SavedModel and/or a TFLite step model, checked against Keras first.

Everything is written into ``OUT.partial-PID`` and renamed to ``OUT`` only
after the parity check passes, so a failed or interrupted export leaves no
half-written model. Layout::

    OUT/model.tflite      the step model (--format tflite | all)
    OUT/saved_model/      signatures step, initial_state, predict, generate, sample (--format saved_model | all)
    OUT/metadata.json     vocabulary, special ids, input, state layout, quantization, recipe, versions
    OUT/vocab.json        the vocabulary (id = position)
    OUT/parity.json       the parity report (max |logit diff|, arg-max agreement)
"""

from __future__ import annotations

import json
import os
import shutil

from seqkit import log
from seqkit.errors import SeqkitError

FORMATS = ("tflite", "saved_model", "all")
DEFAULT_TOLERANCE = {"none": 1e-4, "float16": None, "dynamic-range": None}
DEFAULT_AGREEMENT = {"none": 0.999, "float16": 0.99, "dynamic-range": 0.99}


def metadata_for(prep, stepper, quantize: str) -> dict:
    """The ``metadata.json`` of an export (what a runtime needs besides the model)."""
    import keras
    import tensorflow as tf

    import seqkit
    from seqkit.data.vocab import END_ID, PAD_ID, START_ID, UNK_ID

    spec = stepper.input_spec()
    return {
        "seqkit_version": seqkit.__version__, "tensorflow_version": tf.__version__,
        "keras_version": keras.__version__, "head": prep.recipe.head.type,
        "input": {"name": spec.name, "dtype": spec.dtype.name, "shape": spec.shape.as_list(),
                  "kind": "token" if spec.dtype.is_integer else "frame"},
        "special_ids": {"pad": PAD_ID, "unk": UNK_ID, "start": START_ID, "end": END_ID},
        "state_layout": [{"name": n, "size": int(s), "shape": [None, int(s)], "dtype": "float32"}
                         for n, s in zip(stepper.state_names(), stepper.state_sizes())],
        "tokenizer": prep.recipe.data.tokenizer, "lowercase": prep.recipe.data.lowercase,
        "quantize": quantize, "vocab": prep.vocab.tokens, "recipe": prep.recipe.to_dict(),
    }


def export_run(run_dir: str, out: str, *, fmt: str = "tflite", quantize: str = "none",
               tolerance: float | None = None, min_agreement: float | None = None,
               parity_examples: int = 32, overwrite: bool = False) -> dict:
    """Export a trained run; return the parity report.

    Args:
        run_dir: a run directory.
        out: the export directory (must not exist, or be empty, unless ``overwrite``).
        fmt: ``"tflite"``, ``"saved_model"`` or ``"all"``.
        quantize: TFLite weights: ``"none"``, ``"float16"``, ``"dynamic-range"``.
        tolerance: largest allowed max |logit difference| (default 1e-4 for float32,
            not checked for quantized models).
        min_agreement: smallest allowed arg-max agreement (default 0.999 float32, 0.99 quantized).
        parity_examples: held-out (test split) examples streamed for the check.

    Raises:
        SeqkitError: bad arguments, a non-streamable head, a non-builtin op, or a parity failure.
    """
    import numpy as np
    import tensorflow as tf

    from seqkit.export.archive import build_archive
    from seqkit.export.parity import compare, padded_pairs, stream_logits
    from seqkit.export.tflite import convert_step, op_names
    from seqkit.runtime.streaming import StreamingModel
    from seqkit.train import load_run

    if fmt not in FORMATS:
        raise SeqkitError(f"--format {fmt}: expected one of {', '.join(FORMATS)}.")
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)) and not overwrite:
        raise SeqkitError(f"{out}: exists and is not empty. Pass --overwrite to replace it, or "
                          f"choose another --out.")
    tolerance = DEFAULT_TOLERANCE[quantize] if tolerance is None else tolerance
    min_agreement = DEFAULT_AGREEMENT[quantize] if min_agreement is None else min_agreement
    prep, model = load_run(run_dir, with_data=True)
    held_out = prep.splits.get("test") or prep.splits.get("valid") or prep.splits["train"]
    x, valid = padded_pairs(prep, held_out[:parity_examples])
    reference = np.asarray(model(x, training=False))

    tmp = f"{out.rstrip(os.sep)}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        archive, stepper = build_archive(prep, model)
        sm_dir = os.path.join(tmp, "saved_model")
        archive.write_out(sm_dir, verbose=False)
        meta = metadata_for(prep, stepper, quantize)
        report = {"examples": len(held_out[:parity_examples]), "quantize": quantize,
                  "tolerance": tolerance, "min_argmax_agreement": min_agreement}
        if fmt in ("saved_model", "all"):
            loaded = tf.saved_model.load(sm_dir)
            step = loaded.signatures["step"]
            names = [s["name"] for s in meta["state_layout"]]
            state = {}

            def sm_reset(b):
                state.update(loaded.signatures["initial_state"](batch_size=tf.constant(b)))

            def sm_step(xt):
                res = step(**{meta["input"]["name"]: tf.constant(xt)}, **{n: state[n] for n in names})
                state.update({n: res[n] for n in names})
                return res["logits"].numpy()

            report["saved_model"] = compare(reference, stream_logits(sm_step, sm_reset, x), valid)
            _check(report["saved_model"], "SavedModel step", 1e-4, 0.999)
        if fmt in ("tflite", "all"):
            data = convert_step(sm_dir, quantize)
            rt = StreamingModel(model_bytes=data, metadata=meta)
            report["tflite"] = compare(reference, stream_logits(rt.step, rt.reset, x), valid)
            report["tflite"].update({"ops": op_names(data), "bytes": len(data)})
            _check(report["tflite"], f"TFLite ({quantize})", tolerance, min_agreement)
            with open(os.path.join(tmp, "model.tflite"), "wb") as f:
                f.write(data)
        if fmt == "tflite":
            shutil.rmtree(sm_dir)
        with open(os.path.join(tmp, "metadata.json"), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1, ensure_ascii=False)
        prep.vocab.save(os.path.join(tmp, "vocab.json"))
        with open(os.path.join(tmp, "parity.json"), "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
        if os.path.exists(out):
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report


def _check(res: dict, what: str, tolerance: float | None, min_agreement: float) -> None:
    log.info(f"parity {what}: max |logit diff| {res['max_abs_diff']:.3g}, arg-max agreement "
             f"{res['argmax_agreement']:.4f} over {res['positions']} positions")
    if tolerance is not None and res["max_abs_diff"] > tolerance:
        raise SeqkitError(f"parity check failed for the {what} model: max |logit diff| "
                          f"{res['max_abs_diff']:.3g} > tolerance {tolerance:g}; nothing was written. "
                          f"Raise --tolerance only if you accept the difference.")
    if res["argmax_agreement"] < min_agreement:
        raise SeqkitError(f"parity check failed for the {what} model: arg-max agreement "
                          f"{res['argmax_agreement']:.4f} < {min_agreement}; nothing was written.")
