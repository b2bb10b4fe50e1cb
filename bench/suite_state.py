"""``--state internal`` step latency of the reference LM at batch 1 (microseconds per step).

The model is the reference LM of :mod:`bench.suite_stream` (vocabulary 5000,
embedding 128, LSTM 256; untrained seeded weights), exported twice per precision
(float32 ``none`` and ``dynamic-range``, int8 weights): the explicit-state step
(``step(token, states...) -> logits, states...``, :func:`bench.lm.export_step_models`)
and the state-inside step (``step(token) -> logits``, the LSTM's ``h`` and ``c`` in
resource variables, :func:`bench.lm.export_stateful_models`).

Contenders per precision Q:

* ``explicit Q bare invoke`` -- inputs set once, ``interpreter.invoke()`` alone: the
  floor of :mod:`bench.suite_stream` and the denominator of its 1.10 target;
* ``explicit Q seqkit runtime`` -- :meth:`seqkit.runtime.StreamingModel.step` (set token
  and states, invoke, read logits and states);
* ``state-inside Q bare invoke`` -- the token set once, ``Invoke`` of the step subgraph
  alone (reads and assigns the variables inside);
* ``state-inside Q seqkit runtime`` -- :meth:`seqkit.runtime.StatefulStreamingModel.step`
  (set token, invoke, read logits).

``ratio``: each row against the explicit bare invoke of its precision (median over
repeats of per-repeat ratios). The ``(paired)`` rows measure the same ratios with
alternating calls, each timed on its own, ratio of per-call medians (see
:mod:`bench.suite_stream`): ``state-inside runtime / explicit bare invoke`` is the
figure for the 1.10 target.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from bench.common import interleaved, summarize
from bench.suite_stream import _bare_invoke, _calls_for, _measure, _paired

QUANT = ("none", "dynamic-range")
LABEL = {"none": "float32", "dynamic-range": "int8 dynamic-range"}


def _stateful_bare_invoke(rt):
    """The step subgraph's ``Invoke`` alone on a state-inside runtime's interpreter (token set once)."""
    w, sg = rt._wrapper, rt._sg_step
    w.SetTensor(rt._in_x, np.array([5], np.int32), sg)
    return lambda: w.Invoke(sg)


def run(args):
    from bench.lm import build_lm, export_stateful_models, export_step_models
    from seqkit.runtime.streaming import StreamingModel

    budget = 0.015 if args.quick else 0.05
    t0 = time.time()
    prep, model = build_lm()
    explicit = export_step_models(prep, model, QUANT)
    inside = export_stateful_models(prep, model, QUANT)
    build_s = time.time() - t0

    contenders, notes, parity, logs = {}, {}, {}, {}
    x = np.array([5], np.int32)
    for q in QUANT:
        L = LABEL[q]
        ex_rt = StreamingModel(model_bytes=explicit[q][0], metadata=explicit[q][1])
        in_rt = StreamingModel(model_bytes=inside[q][0], metadata=inside[q][1])
        ex_rt.reset()
        in_rt.reset()
        toks = np.random.default_rng(0).integers(4, 5000, 50)
        parity[L] = float(max(np.abs(ex_rt.step([t]) - in_rt.step([t])).max() for t in toks))
        ex_bare = _bare_invoke(explicit[q][0])
        contenders[f"explicit {L} bare invoke"] = _measure(ex_bare, budget)
        notes[f"explicit {L} bare invoke"] = f"{len(explicit[q][0]) / 1e6:.1f} MB model"
        contenders[f"explicit {L} seqkit runtime"] = _measure(lambda rt=ex_rt: rt.step(x), budget)
        notes[f"explicit {L} seqkit runtime"] = "StreamingModel.step: set token + h, c; invoke; get logits + h, c"
        in_bare = _stateful_bare_invoke(StreamingModel(model_bytes=inside[q][0], metadata=inside[q][1]))
        contenders[f"state-inside {L} bare invoke"] = _measure(in_bare, budget)
        notes[f"state-inside {L} bare invoke"] = f"{len(inside[q][0]) / 1e6:.1f} MB model; Invoke(step subgraph)"
        contenders[f"state-inside {L} seqkit runtime"] = _measure(lambda rt=in_rt: rt.step(x), budget)
        notes[f"state-inside {L} seqkit runtime"] = "StatefulStreamingModel.step: set token; invoke; get logits"
        pairs = _calls_for(lambda rt=in_rt: rt.step(x), budget)
        for name, first, second, note in (
                (f"state-inside runtime / explicit bare invoke, {L} (paired)", ex_bare,
                 lambda rt=in_rt: rt.step(x), "two interpreters, alternating calls"),
                (f"state-inside runtime / state-inside bare invoke, {L} (paired)", _stateful_bare_invoke(in_rt),
                 lambda rt=in_rt: rt.step(x), "one interpreter, alternating calls"),
                (f"explicit runtime / explicit bare invoke, {L} (paired)", ex_rt.interpreter.invoke,
                 lambda rt=ex_rt: rt.step(x), "one interpreter, alternating calls")):
            contenders[name] = lambda a=first, b=second, n=pairs, log=logs.setdefault(name, []): _paired(a, b, n, log)
            notes[name] = note + "; ratio of per-call medians"

    samples = interleaved(contenders, args.repeats, warmup=1)
    rows = []
    for name, vals in samples.items():
        q = next(q for q in QUANT if LABEL[q] in name)
        row = {"contender": name, "metric": "us/step", **summarize(vals), "notes": notes.get(name, "")}
        if name.endswith("(paired)"):
            row["metric"] = "ratio"
        else:
            base = samples[f"explicit {LABEL[q]} bare invoke"]
            row["ratio"] = statistics.median(v / b for v, b in zip(vals, base))
        rows.append(row)
    med = {r["contender"]: r["median"] for r in rows}
    target = {L: round(med[f"state-inside runtime / explicit bare invoke, {L} (paired)"], 3) for L in LABEL.values()}
    per_call = {name: {"first_us": round(statistics.median(a for a, _ in v[1:]), 1),  # v[0]: warm-up
                       "second_us": round(statistics.median(b for _, b in v[1:]), 1)} for name, v in logs.items()}
    extra = {
        "model": {"vocab": 5000, "embedding": 128, "units": 256, "cell": "lstm", "batch": 1,
                  "weights": "untrained (seeded)", "build_and_convert_s": round(build_s, 1)},
        "state_inside_runtime_over_explicit_bare_invoke": target,
        "target": 1.10,
        "parity_max_abs_logit_diff_state_inside_vs_explicit_50_steps": parity,
        "paired_per_call_medians": per_call,
        "summary": "state-inside seqkit runtime / explicit bare invoke (paired): "
                   + ", ".join(f"{k} {v:.3f}" for k, v in target.items()) + " (target <= 1.10)",
    }
    return rows, extra
