"""Growth: training step time and peak memory against sequence length and width; streaming flat.

Training (full backpropagation through time): the reference LM (vocabulary
5000, embedding 128, one LSTM layer, batch 32; :mod:`bench.lm`, untrained
seeded weights, random token ids without padding) compiled by
:func:`seqkit.training.train.compile_model` (Adam, global clipnorm, masked cross
entropy -- what ``seqkit train`` runs), timed with ``train_on_batch`` after
two warm-up steps (tracing), against

* sequence length T = 64, 128, 256, 512, 1024 at H = 256, and
* hidden size H = 128, 256, 512 at T = 256

(``--quick``: T = 64, 256 at H = 256 and H = 128 at T = 256).

Each configuration runs in a fresh ``python -m bench.suite_scale --worker``
process, so its memory is its own: *peak RSS* is the process high-water mark
(``VmHWM`` in ``/proc/self/status``; ``ru_maxrss`` where there is no ``/proc``,
which on Linux also counts the parent's RSS at spawn) after the timed steps, and
*training memory* is that peak minus the high-water mark just before the first
training step (TF runtime, model and data already loaded): activations kept
for the backward pass, gradients, optimizer slots. tracemalloc cannot see
TensorFlow's allocations, hence processes.

Streaming: the float32 TFLite step model of the H = 256 LM run by
:class:`seqkit.runtime.StreamingModel` (batch 1, state carried) for 64 ... 1024
steps, also one fresh process per length (one that never imports
TensorFlow): per-step time (median of individually timed steps) and peak RSS
should not depend on the number of steps.

One measurement per configuration (a fresh process each; step times are the
median over the timed steps, with their range). Plot: ``OUT/growth.png``
(time per token and memory against T; ``plot`` extra). ``extra.bptt`` says
what truncated BPTT would save.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

LENGTHS, UNITS = (64, 128, 256, 512, 1024), (128, 256, 512)
QUICK_LENGTHS, QUICK_UNITS = (64, 256), (128, 256)
BATCH = 32


def _peak_mb() -> float:
    """This process's RSS high-water mark in MB: ``VmHWM`` of ``/proc/self/status`` (Linux), else
    ``ru_maxrss``. ``ru_maxrss`` survives ``fork`` + ``exec``: a worker would report the parent's
    RSS at spawn time (TF and a model, ~0.9 GB) whenever that is larger than its own."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _worker_train(a) -> dict:
    import numpy as np

    from seqkit._quiet import import_tensorflow_quietly

    import_tensorflow_quietly()
    import tensorflow as tf

    if a.threads:
        tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    from bench.lm import LM_SHAPE, build_lm
    from seqkit.training.train import compile_model

    prep, model = build_lm(units=a.units, length=a.length, batch=a.batch)
    model = compile_model(prep, model)
    rng = np.random.default_rng(0)
    x = rng.integers(4, LM_SHAPE["vocab"], (a.batch, a.length)).astype(np.int32)
    y = rng.integers(4, LM_SHAPE["vocab"], (a.batch, a.length)).astype(np.int32)
    before = _peak_mb()
    t0 = time.perf_counter()
    for _ in range(2):
        model.train_on_batch(x, y)
    warm_s = time.perf_counter() - t0
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        model.train_on_batch(x, y)
        times.append(time.perf_counter() - t0)
    peak = _peak_mb()
    return {"step_s": times, "warmup_s": warm_s, "peak_rss_mb": peak, "before_train_rss_mb": before,
            "train_mb": peak - before, "parameters": int(model.count_params())}


def _worker_stream(a) -> dict:
    import numpy as np

    from seqkit.runtime.streaming import StreamingModel

    rt = StreamingModel(a.export)
    x = np.array([5], np.int32)
    for _ in range(20):  # warm-up: first invokes set up XNNPACK
        rt.step(x)
    rt.reset(1)
    before = _peak_mb()
    clock, times = time.perf_counter_ns, []
    for t in range(a.length):
        t0 = clock()
        rt.step(np.array([4 + t % 4990], np.int32))
        times.append((clock() - t0) / 1e3)
    peak = _peak_mb()
    return {"step_us": times, "peak_rss_mb": peak, "before_stream_rss_mb": before,
            "stream_mb": peak - before, "tensorflow_imported": "tensorflow" in sys.modules}


def _spawn(kind: str, threads: int | None, timeout: float, **kw) -> dict:
    """Run one configuration in a fresh process from the repository root; its JSON or an error."""
    cmd = [sys.executable, "-m", "bench.suite_scale", "--worker", kind]
    for k, v in kw.items():
        cmd += [f"--{k}", str(v)]
    if threads:
        cmd += ["--threads", str(threads)]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    try:
        res = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.returncode != 0 or not lines:
        return {"error": f"exit {res.returncode}: {res.stderr.strip()[-400:]}"}
    return json.loads(lines[-1])


def _row(contender, metric, values, notes, **more):
    from bench.common import summarize

    return {"contender": contender, "metric": metric, **summarize(values), "notes": notes, **more}


def _fit_line(xs, ys):
    """Least-squares ``(slope, intercept)``."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return slope, my - slope * mx


def _plot(path, train_t, train_h, stream):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed (pip install -e '.[plot]'): no plot"
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    colour = {128: "tab:green", 512: "tab:red"}
    ts, ss = sorted(train_t), sorted(stream)
    ax_t.plot(ts, [train_t[t]["us_per_token"] for t in ts], "o-", color="tab:blue",
              label=f"training, H=256, B={BATCH}")
    ax_t.plot(ss, [stream[t]["us_per_step"] for t in ss], "s-", color="tab:orange",
              label="streaming TFLite step, B=1")
    ax_m.plot(ts, [train_t[t]["train_mb"] for t in ts], "o-", color="tab:blue",
              label="training memory (peak - before training)")
    ax_m.plot(ts, [train_t[t]["peak_rss_mb"] for t in ts], "o--", color="tab:blue", alpha=0.5,
              label="training peak RSS")
    ax_m.plot(ss, [stream[t]["peak_rss_mb"] for t in ss], "s-", color="tab:orange", label="streaming peak RSS")
    for h, r in sorted(train_h.items()):
        if h != 256:
            ax_t.plot([256], [r["us_per_token"]], "^", color=colour.get(h), label=f"training, H={h}")
            ax_m.plot([256], [r["train_mb"]], "^", color=colour.get(h), label=f"training memory, H={h}")
    ax_t.set(xscale="log", xlabel="sequence length T (steps)", ylabel="microseconds per token",
             title="time per token (flat = time linear in T)")
    ax_t.set_ylim(bottom=0)
    ax_m.set(xlabel="sequence length T (steps)", ylabel="MB", title="memory (full BPTT grows linearly in T)")
    ax_m.set_ylim(bottom=0)
    for ax in (ax_t, ax_m):
        ax.set_xticks(LENGTHS, [str(t) for t in LENGTHS])
        ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(args):
    from bench.lm import LM_SHAPE, build_lm, export_step_models, write_export

    lengths, units = (QUICK_LENGTHS, QUICK_UNITS) if args.quick else (LENGTHS, UNITS)
    steps = 2 if args.quick else 4
    configs = [(t, 256) for t in lengths] + [(256, h) for h in units if h != 256]
    results, t_start = {}, time.time()
    for t, h in configs:
        print(f"  scale: training T={t} H={h} ...", flush=True)
        results[(t, h)] = _spawn("train", args.threads, 600, length=t, units=h, batch=BATCH,
                                 steps=steps if t <= 256 else max(2, steps - 1))

    prep, model = build_lm()
    data, meta = export_step_models(prep, model, ("none",))["none"]
    stream = {}
    with tempfile.TemporaryDirectory(prefix="seqkit-bench-") as tmp:
        write_export(data, meta, tmp)
        for t in lengths if not args.quick else (64, 1024):
            print(f"  scale: streaming {t} steps ...", flush=True)
            stream[t] = _spawn("stream", None, 300, export=tmp, length=t)

    rows, train_t, train_h, errors = [], {}, {}, {}
    for (t, h), r in results.items():
        label = f"train T={t} H={h}"
        if "error" in r:
            errors[label] = r["error"]
            continue
        step_ms = [s * 1e3 for s in r["step_s"]]
        tokens = BATCH * t
        r.update(step_ms=statistics.median(step_ms), us_per_token=statistics.median(step_ms) * 1e3 / tokens)
        note = f"B={BATCH}, V={LM_SHAPE['vocab']}, {r['parameters']:,} params; peak RSS {r['peak_rss_mb']:.0f} MB"
        rows.append(_row(label, "ms/step", step_ms, note))
        rows.append(_row(label, "MB training memory", [r["train_mb"]],
                         f"peak RSS {r['peak_rss_mb']:.0f} MB - {r['before_train_rss_mb']:.0f} MB before training"))
        if h == 256:
            train_t[t] = r
        if t == 256:
            train_h[h] = r
    for t, r in stream.items():
        label = f"stream {t} steps"
        if "error" in r:
            errors[label] = r["error"]
            continue
        r["us_per_step"] = statistics.median(r["step_us"])
        rows.append(_row(label, "us/step", r["step_us"], "float32 TFLite, StreamingModel.step, batch 1; "
                         "median of individually timed steps"))
        rows.append(_row(label, "MB peak RSS", [r["peak_rss_mb"]],
                         f"+{r['stream_mb']:.1f} MB while streaming; TF imported: {r['tensorflow_imported']}"))

    extra = {"batch": BATCH, "vocab": LM_SHAPE["vocab"], "embedding": LM_SHAPE["embedding"],
             "weights": "untrained (seeded); random token ids, no padding",
             "timed_steps_per_config": steps, "seconds": round(time.time() - t_start, 1)}
    if errors:
        extra["errors"] = errors
    if len(train_t) >= 2:
        ts = sorted(train_t)
        slope, icpt = _fit_line(ts, [train_t[t]["train_mb"] for t in ts])
        lo, hi = ts[0], ts[-1]
        per_elem = slope * 2**20 / (BATCH * 4)  # float32 values kept per time step per sequence
        extra["train_memory_fit_mb"] = {"slope_mb_per_step": round(slope, 3), "intercept_mb": round(icpt, 1)}
        extra["bptt"] = (
            f"Full BPTT keeps every time step's activations until the backward pass, so training memory "
            f"grows linearly in T: measured {train_t[lo]['train_mb']:.0f} MB at T={lo} and "
            f"{train_t[hi]['train_mb']:.0f} MB at T={hi} (B={BATCH}, H=256, V={LM_SHAPE['vocab']}; "
            f"fit {slope:.2f} MB per step of T, i.e. ~{per_elem:,.0f} float32 values per step per "
            f"sequence: the LSTM's gates and states, O(B*T*H), and, for this vocabulary, the logits and "
            f"their gradient, O(B*T*V)). Truncated BPTT over chunks of k steps (state carried forward "
            f"between chunks, gradients cut at chunk boundaries) keeps only one chunk alive: O(B*k*H) "
            f"activations (O(B*k*V) logits) instead of O(B*T*H) (O(B*T*V)); with k=64 a T={hi} batch "
            f"would need about the T=64 figure, ~{slope * 64 + icpt:.0f} MB by the fit, instead of "
            f"~{slope * hi + icpt:.0f} MB, at the price of gradients that reach at most k steps back "
            f"(the forward state still carries information from further back). The arithmetic per token "
            f"is the same either way (time per step is linear in T). seqkit trains with full BPTT; the LM head "
            f"splits lines longer than data.max_length into independent pieces (no carried state).")
    if len(train_h) >= 2:
        hs = sorted(train_h)
        extra["width"] = (
            f"at T=256, H={hs[0]}..{hs[-1]}: " + ", ".join(
                f"H={h} {train_h[h]['step_ms']:.0f} ms/step, {train_h[h]['train_mb']:.0f} MB" for h in hs)
            + f" (training memory moves little with H: with V={LM_SHAPE['vocab']} the per-step logits "
              f"dominate the H-sized gates and states).")
    if len(stream) >= 2 and all("error" not in r for r in stream.values()):
        ss = sorted(stream)
        extra["streaming_flat"] = (
            f"streaming per-step time {stream[ss[0]]['us_per_step']:.0f} us at {ss[0]} steps vs "
            f"{stream[ss[-1]]['us_per_step']:.0f} us at {ss[-1]} steps; peak RSS "
            f"{stream[ss[0]]['peak_rss_mb']:.0f} MB vs {stream[ss[-1]]['peak_rss_mb']:.0f} MB "
            f"(state is [1, H] per layer whatever the length; the process never imports TensorFlow).")
    if train_t and stream:
        extra["plot"] = _plot(os.path.join(args.out, "growth.png"), train_t, train_h,
                              {t: r for t, r in stream.items() if "error" not in r})
    return rows, extra


def _main():
    ap = argparse.ArgumentParser(description="one configuration of the scale suite (internal)")
    ap.add_argument("--worker", choices=("train", "stream"), required=True)
    ap.add_argument("--length", type=int, required=True)
    ap.add_argument("--units", type=int, default=256)
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--export")
    ap.add_argument("--threads", type=int)
    a = ap.parse_args()
    out = _worker_train(a) if a.worker == "train" else _worker_stream(a)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    _main()
