"""Integer LSTM step models of a trained run, side by side: arg-max agreement with Keras float32,
the task metric, size, per-step latency and what LiteRT's default interpreter delegates.

    pip install -e ".[quantizer]"       # ai-edge-quantizer, for the last row
    python -m bench.int8_lstm runs/lm-pydoc-chars [--examples 200] [--steps 2000] [--out DIR]

Rows (all with float inputs and outputs, states carried in float between steps, as
``seqkit export`` writes them):

* ``float32``: the converter, no quantization.
* ``int8 (converter)``: what ``seqkit export --quantize int8`` writes (TensorFlow's converter,
  per-unit cell-state scaling with the clip, :mod:`seqkit.export.cell_scaling`).
* ``int16x8 (converter)``: ``--quantize int16x8``.
* ``int8 + int16 cell (ai-edge-quantizer)``: ``--quantize int8 --int16-cell``
  (:mod:`seqkit.export.int16_cell`): int8 lookup, concatenation and matrix products, int16
  element-wise cell ops.

The parity records and calibration are the export's (the run's data or its
``export_sample.json``: 128 training records, the first ``--examples`` held-out ones); latency
is the median / p95 of ``--steps`` batch-1 steps of seqkit's runtime after 20 warm-up steps, as
``seqkit bench-step``. A measurement, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--examples", type=int, default=200, help="held-out records compared")
    ap.add_argument("--steps", type=int, default=2000, help="timed steps per model")
    ap.add_argument("--out", help="keep the .tflite files and results.json here")
    a = ap.parse_args(argv)

    from seqkit.errors import SeqkitError
    from seqkit.export import int16_cell
    from seqkit.export.archive import build_archive, stepper_for
    from seqkit.export.calibration import step_samples
    from seqkit.export.cell_scaling import scaled_stepper, stepper_inputs
    from seqkit.export.parity import ParityCase, stream_logits
    from seqkit.export.tflite import convert_step, verify_default
    from seqkit.export.writer import calibration_for, load_for_export, metadata_for
    from seqkit.runtime.streaming import StreamingModel

    out = a.out or tempfile.mkdtemp(prefix="int8_lstm_")
    os.makedirs(out, exist_ok=True)
    prep, model = load_for_export(a.run_dir)
    calib = calibration_for(prep, "int8", 128)
    held = prep.splits.get("test") or prep.splits.get("valid") or prep.splits["train"]
    case = ParityCase(prep, model, held[: a.examples])
    base = stepper_for(prep, model)
    scaled, _ = scaled_stepper(base, *stepper_inputs(prep, calib))
    meta = {**metadata_for(prep, base, "int8"), "io_type": "float"}
    name_in = meta["input"]["name"]

    def source(stepper, name):
        d = os.path.join(out, f"saved_model_{name}")
        if not os.path.isdir(d):
            build_archive(prep, model, step_only=True, stepper=stepper)[0].write_out(d, verbose=False)
        return d

    rows = []

    def measure(label, data):
        with open(os.path.join(out, label.split()[0] + "_" + str(len(rows)) + ".tflite"), "wb") as f:
            f.write(data)
        rt = StreamingModel(model_bytes=data, metadata=meta)
        res = case.check_stream(stream_logits(rt.step, rt.reset, case.stream_input()))
        rt.reset(1)
        x1 = np.array([4], np.int32)
        for _ in range(20):
            rt.step(x1)
        ts = []
        for _ in range(a.steps):
            t0 = time.perf_counter()
            rt.step(x1)
            ts.append((time.perf_counter() - t0) * 1e6)
        verified = verify_default(data)
        row = {"model": label, "argmax_agreement": res["argmax_agreement"], "task": res.get("task"),
               "max_abs_diff": res["max_abs_diff"], "bytes": len(data),
               "step_median_us": float(np.median(ts)), "step_p95_us": float(np.percentile(ts, 95)),
               "delegated_partitions": verified.get("delegated_partitions")}
        rows.append(row)
        print(json.dumps(row), flush=True)

    plain = source(base, "plain")
    measure("float32", convert_step(plain, "none"))
    measure("int8 (converter)", convert_step(source(scaled, "scaled"), "int8", representative=step_samples(
        prep, calib, source(scaled, "scaled"), name_in)))
    measure("int16x8 (converter)", convert_step(plain, "int16x8", representative=step_samples(
        prep, calib, plain, name_in)))
    try:
        int16_cell.quantizer_version()
    except SeqkitError as exc:
        print(f"{exc} (its row is left out)")
    else:
        src = source(int16_cell.unclipped(scaled, *stepper_inputs(prep, calib)), "int16_cell")
        measure("int8 + int16 cell (ai-edge-quantizer)", int16_cell.quantize(
            convert_step(src, "none"), step_samples(prep, calib, src, name_in)))

    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"run": os.path.abspath(a.run_dir), "examples": len(case.x), "rows": rows}, f, indent=1)
    print(f"{'model':<40} {'agreement':>9} {'task':>8} {'bytes':>10} {'median us':>10} {'p95 us':>8}")
    for r in rows:
        task = r["task"]["export"] if r["task"] else float("nan")
        print(f"{r['model']:<40} {r['argmax_agreement']:>9.4f} {task:>8.4f} {r['bytes']:>10,} "
              f"{r['step_median_us']:>10.1f} {r['step_p95_us']:>8.1f}")


if __name__ == "__main__":
    main()
