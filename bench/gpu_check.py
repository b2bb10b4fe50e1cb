"""GPU check (one short run on a lent GPU machine): does LSTM/GRU training take the cuDNN kernel?

    bash bench/gpu_check.sh            # from the repository root; writes $OUT/gpu_check.json if $OUT is set
    python -m bench.gpu_check --cpu-dry-run --steps 3 --fallback-steps 2 --cpu-steps 2
                                       # every code path on a CPU machine (no cuDNN expected)

What it does, on the reference LM shape (vocabulary 5000, embedding 128, one
recurrent layer of 256, batch 32, length 64; :mod:`bench.lm`, untrained seeded
weights, random token ids without padding), each model built the seqkit way
(recipe -> cell plugin -> ``keras.layers.LSTM`` / ``GRU`` with Keras's default
``use_cudnn="auto"``) and compiled by :func:`seqkit.training.train.compile_model`:

1. environment: TF/Keras versions, whether TF is built with CUDA and its
   CUDA/cuDNN versions, ``nvidia-smi`` (name, driver, memory), TF's GPUs. No
   GPU visible to TF: a message that says why it may be, exit status 2.
2. kernel probe per configuration: the model's gradient traced once with the
   layer as built (``auto``; the cuDNN ops found in the graph, e.g.
   ``CudnnRNNV3``) and once with ``use_cudnn=True``, which Keras refuses with
   a ``ValueError`` unless it takes the cuDNN kernel: success = cuDNN confirmed.
3. training throughput (tokens/s = steps * 32 * 64 / seconds of
   ``model.fit`` over a repeated in-memory batch, after warm-up steps that
   trace) for LSTM and GRU on the GPU (``--steps``, default 300); for two
   recipe options that force the generic kernel, ``recurrent_dropout: 0.1``
   (LSTM) and ``reset_after: false`` (GRU), where seqkit's ``warn_fast_path``
   warning must fire (``--fallback-steps``, default 40); and the LSTM on the
   CPU of the same machine (generic kernel, ``--cpu-steps``, default 20).

Exit status: 0 every check as expected, 1 a check failed (cuDNN not taken
where it should be, taken where it should not, or a missing seqkit warning),
2 no GPU (unless ``--cpu-dry-run``). The JSON holds everything printed.
Budget: well under 5 minutes on one GPU (the shell wrapper kills it at 290 s).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import warnings

B, T = 32, 64


def _nvidia_smi() -> dict:
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        return {"rc": res.returncode, "gpus": [ln.strip() for ln in res.stdout.splitlines() if ln.strip()],
                "stderr": res.stderr.strip()[-300:]}
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"rc": None, "gpus": [], "stderr": f"{type(exc).__name__}: {exc}"}


def _op_types(concrete) -> set:
    """Op types of a concrete function's graph and of the functions it calls."""
    graph = concrete.graph
    ops = {op.type for op in graph.get_operations()}
    for fn in graph.as_graph_def().library.function:
        ops.update(node.op for node in fn.node_def)
    return ops


def _build(cell: str, options: dict):
    """``(prep, model, seqkit_warnings)``: the LM built from a recipe, warnings captured."""
    from seqkit.cells.base import CellPlugin

    from bench.lm import build_lm

    CellPlugin._warned.clear()  # warn_fast_path warns once per process and reason; each case is its own
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prep, model = build_lm(cell=cell, **options)
    return prep, model, [str(w.message) for w in caught if str(w.message).startswith("seqkit:")]


def _probe(model, x, force: bool = True) -> dict:
    """Trace the gradient with the layer as built, then (``force``) with ``use_cudnn=True``; see
    the docstring. Not forced for the CPU figure: under ``tf.device("/CPU:0")`` on a GPU machine
    Keras would still pick the cuDNN op, and soft placement would move it to the GPU."""
    import re

    import tensorflow as tf

    layer = model.get_layer("rnn_0")

    def grads(inp):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(inp, training=True))
        return tape.gradient(loss, model.trainable_variables)

    out = {"use_cudnn_as_built": str(layer.use_cudnn)}
    ops = _op_types(tf.function(grads).get_concrete_function(x))
    out["cudnn_ops_as_built"] = sorted(o for o in ops if "Cudnn" in o)
    if not force:
        out.update(cudnn_forced="not tried", cudnn=bool(out["cudnn_ops_as_built"]))
        return out
    saved = layer.use_cudnn
    layer.use_cudnn = True
    try:
        fn = tf.function(grads)
        ops = _op_types(fn.get_concrete_function(x))
        fn(x)  # and it runs
        out.update(cudnn_forced="ok", cudnn_ops_forced=sorted(o for o in ops if "Cudnn" in o))
    except ValueError as exc:  # Keras: "use_cudnn=True was specified, but cuDNN is not supported ..."
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in str(exc).splitlines() if ln.strip()]
        said = next((ln for ln in lines if "use_cudnn" in ln), None)
        if said is None:
            raise
        out.update(cudnn_forced="refused", refusal=said[:240])
    finally:
        layer.use_cudnn = saved
    out["cudnn"] = bool(out["cudnn_ops_as_built"]) and out["cudnn_forced"] == "ok"
    return out


def _throughput(prep, model, steps: int, warmup: int = 5) -> dict:
    import numpy as np
    import tensorflow as tf

    from seqkit.training.train import compile_model

    model = compile_model(prep, model)
    rng = np.random.default_rng(0)
    x = rng.integers(4, 5000, (B, T)).astype(np.int32)
    y = rng.integers(4, 5000, (B, T)).astype(np.int32)
    ds = tf.data.Dataset.from_tensors((x, y)).repeat()
    t0 = time.perf_counter()
    model.fit(ds, steps_per_epoch=warmup, epochs=1, verbose=0, shuffle=False)
    warm_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    hist = model.fit(ds, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False)
    sec = time.perf_counter() - t0
    return {"steps": steps, "seconds": round(sec, 3), "warmup_s": round(warm_s, 2),
            "ms_per_step": round(sec / steps * 1e3, 3), "tokens_per_s": round(steps * B * T / sec, 1),
            "final_loss": round(float(hist.history["loss"][-1]), 4)}


def _case(name, cell, options, steps, device, expect_cudnn, expect_warning, force_generic=False) -> dict:
    import numpy as np
    import tensorflow as tf

    t0 = time.perf_counter()
    res = {"cell": cell, "options": options, "device": device}
    try:
        with tf.device(device):
            prep, model, warned = _build(cell, options)
            res["seqkit_warnings"] = warned
            if force_generic:  # the CPU figure: Keras would otherwise try cuDNN whenever a GPU exists
                model.get_layer("rnn_0").use_cudnn = False
            x = tf.constant(np.random.default_rng(1).integers(4, 5000, (B, T)), tf.int32)
            res["kernel"] = _probe(model, x, force=not force_generic)
            res["train"] = _throughput(prep, model, steps)
    except Exception as exc:  # report and go on: one short run must say as much as it can
        res["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    problems = []
    if "error" in res:
        problems.append("failed: " + res["error"])
    else:
        if expect_cudnn is not None and res["kernel"]["cudnn"] != expect_cudnn:
            problems.append(f"cuDNN kernel {'not taken' if expect_cudnn else 'taken'} "
                            f"(expected {'cuDNN' if expect_cudnn else 'the generic kernel'})")
        if expect_warning and not res["seqkit_warnings"]:
            problems.append("seqkit's warn_fast_path warning did not fire")
        if not expect_warning and res["seqkit_warnings"]:
            problems.append("unexpected seqkit warning: " + res["seqkit_warnings"][0])
    res["problems"] = problems
    k, tr = res.get("kernel", {}), res.get("train", {})
    print(f"-- {name} [{device}]: "
          + (f"kernel {'cuDNN' if k.get('cudnn') else 'generic'} (ops {k.get('cudnn_ops_as_built')}, "
             f"use_cudnn=True {k.get('cudnn_forced')}); {tr.get('tokens_per_s', float('nan')):,.0f} tokens/s, "
             f"{tr.get('ms_per_step', float('nan'))} ms/step over {tr.get('steps')} steps"
             if "error" not in res else res["error"])
          + (f"; seqkit warning: {res['seqkit_warnings'][0]}" if res.get("seqkit_warnings") else "")
          + ("; PROBLEM: " + "; ".join(problems) if problems else "; as expected"), flush=True)
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gpu_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300, help="timed training steps per cuDNN case [300]")
    ap.add_argument("--fallback-steps", type=int, default=40, help="timed steps per generic-kernel case [40]")
    ap.add_argument("--cpu-steps", type=int, default=20, help="timed steps of the CPU figure [20]")
    ap.add_argument("--cpu-dry-run", action="store_true",
                    help="without a GPU, run every case on the CPU instead of failing (no cuDNN "
                         "expected there): tests this script")
    ap.add_argument("--out", default=os.environ.get("OUT"), help="write gpu_check.json here [$OUT]")
    args = ap.parse_args(argv)
    # TF's C++ warnings stay visible (a missing libcudnn is said there); seqkit would hide them all
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    t_start = time.perf_counter()
    report = {"python": platform.python_version(), "nvidia_smi": _nvidia_smi(),
              "lm_shape": {"vocab": 5000, "embedding": 128, "units": 256, "batch": B, "length": T}}
    try:
        import keras
        import tensorflow as tf

        import seqkit
    except ImportError as exc:
        return _finish(report, args, 3, f"cannot import seqkit / TensorFlow / Keras ({exc}); "
                                        f"run from the repository root after `pip install -e .`.")
    info = tf.sysconfig.get_build_info()
    gpus = tf.config.list_physical_devices("GPU")
    report.update(tensorflow=tf.__version__, keras=keras.__version__, seqkit=seqkit.__version__,
                  tf_built_with_cuda=tf.test.is_built_with_cuda(),
                  tf_cuda_version=info.get("cuda_version"), tf_cudnn_version=info.get("cudnn_version"),
                  tf_gpus=[g.name for g in gpus])
    print(f"TF {tf.__version__} (built with CUDA: {report['tf_built_with_cuda']}, CUDA "
          f"{report['tf_cuda_version']}, cuDNN {report['tf_cudnn_version']}), Keras {keras.__version__}; "
          f"nvidia-smi: {report['nvidia_smi']['gpus'] or report['nvidia_smi']['stderr'] or 'nothing'}; "
          f"TF GPUs: {report['tf_gpus'] or 'none'}", flush=True)
    if not gpus and not args.cpu_dry_run:
        why = ("nvidia-smi sees a GPU but TensorFlow does not: " + (
            "this TensorFlow is built without CUDA" if not report["tf_built_with_cuda"] else
            "its CUDA/cuDNN libraries are probably missing (pip install 'tensorflow[and-cuda]')")
               if report["nvidia_smi"]["gpus"] else "no NVIDIA GPU on this machine (nvidia-smi finds none)")
        return _finish(report, args, 2, f"no GPU visible to TensorFlow: {why}. This check needs a GPU; "
                                        f"use --cpu-dry-run to test the script on a CPU.")
    for g in gpus:
        tf.config.experimental.set_memory_growth(g, True)
    dev = "/GPU:0" if gpus else "/CPU:0"
    on_gpu = bool(gpus)
    cases = [
        ("lstm", "lstm", {}, args.steps, dev, on_gpu, False, False),
        ("gru", "gru", {}, args.steps, dev, on_gpu, False, False),
        ("lstm recurrent_dropout=0.1", "lstm", {"recurrent_dropout": 0.1}, args.fallback_steps, dev,
         False, True, False),
        ("gru reset_after=false", "gru", {"reset_after": False}, args.fallback_steps, dev, False, True, False),
        ("lstm on CPU", "lstm", {}, args.cpu_steps, "/CPU:0", False, False, True),
    ]
    report["cases"] = {name: _case(name, *rest) for name, *rest in cases}
    c = report["cases"]
    tps = lambda name: c[name].get("train", {}).get("tokens_per_s")  # noqa: E731
    report["summary"] = {
        "lstm_cudnn": c["lstm"].get("kernel", {}).get("cudnn"),
        "gru_cudnn": c["gru"].get("kernel", {}).get("cudnn"),
        "tokens_per_s": {name: tps(name) for name in c},
        "gpu_over_cpu_lstm": (round(tps("lstm") / tps("lstm on CPU"), 1)
                              if on_gpu and tps("lstm") and tps("lstm on CPU") else None),
        "fallback_warnings_fired": all(c[n].get("seqkit_warnings") for n in
                                       ("lstm recurrent_dropout=0.1", "gru reset_after=false")),
    }
    problems = [f"{n}: {p}" for n, r in c.items() for p in r["problems"]]
    report["seconds"] = round(time.perf_counter() - t_start, 1)
    if problems:
        return _finish(report, args, 1, "checks failed: " + " | ".join(problems))
    msg = ("all checks as expected" + (" (CPU dry run: no cuDNN anywhere, as expected)" if not on_gpu else
           f"; LSTM {tps('lstm'):,.0f} and GRU {tps('gru'):,.0f} tokens/s on the GPU (cuDNN), "
           f"LSTM {tps('lstm on CPU'):,.0f} tokens/s on the CPU"))
    return _finish(report, args, 0, msg)


def _finish(report: dict, args, status: int, message: str) -> int:
    report.update(status=status, message=message)
    print(("OK: " if status == 0 else f"FAIL ({status}): ") + message, file=sys.stderr if status else sys.stdout,
          flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "gpu_check.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1, default=str)
        print(f"written: {path}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
