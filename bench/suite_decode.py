"""Decoding speed of the LM shape: greedy vs beam search (width 5), in-graph vs a Python loop.

The model is the reference LM (vocabulary 5000, embedding 128, LSTM 256, see
:mod:`bench.lm`) with **untrained**, seeded weights, decoded through the
head's :class:`~seqkit.heads.language_model.LanguageModelStepper` on the CPU
with TensorFlow. Untrained weights give near-uniform next-token scores, so the
end token would be chosen at random moments; to time the same work for every
contender each one runs exactly ``max_length`` = 64 steps (32 with
``--quick``): greedy with a stop id that no token has, beam search with
``min_length = max_length`` (the end token is forbidden until the last step,
where the hypotheses are cut off). The prompt is ``[<s>, w]`` per row (one
prefill step). Steps taken are read back from the outputs and reported.

Contenders, per batch size B (1, 8, 32; ``--quick``: 1, 8):

* ``greedy in-graph`` -- ``tf.function`` around :func:`seqkit.inference.decoding.decode`
  (``tf.while_loop`` over steps; what the SavedModel ``generate`` signature runs);
* ``beam 5 in-graph`` -- ``tf.function`` around :func:`seqkit.inference.decoding.beam_search`
  with ``beam_width=5`` (``B * 5`` rows per step, ``top_k`` over ``5 * V``
  candidates, state gathers);
* ``greedy Python loop`` -- one ``tf.function`` call per step (step + arg-max
  in the graph), the loop and the state hand-over in Python.

Metric: milliseconds per sequence (time of one batched call / B; lower is
better). One measurement is one call (several at batch 1); contenders are
interleaved repeat by repeat. ``ratio``: beam / greedy in-graph and Python
loop / greedy in-graph at the same batch (median of per-repeat ratios);
``extra.beam_over_greedy`` is the beam ratio per batch (target <= 2.5 at
batch 1).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from bench.common import interleaved, summarize, time_calls

BEAM = 5


def run(args):
    import tensorflow as tf

    from bench.lm import LM_SHAPE, build_lm
    from seqkit.data.vocab import START_ID
    from seqkit.inference.decoding import beam_search, decode

    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    steps = 32 if args.quick else 64
    batches = (1, 8) if args.quick else (1, 8, 32)
    prep, model = build_lm()
    st = prep.head.stepper(model)

    @tf.function(reduce_retracing=True)
    def greedy(prompt):
        return decode(st.step, st.initial_state(tf.shape(prompt)[0]), prompt, max_length=steps,
                      greedy=True, stop_id=-1)

    @tf.function(reduce_retracing=True)
    def beam(prompt):
        return beam_search(st.step, st.initial_state(tf.shape(prompt)[0]), prompt, beam_width=BEAM,
                           max_length=steps, min_length=steps)

    @tf.function(reduce_retracing=True)
    def step_argmax(token, states):
        logits, new = st.step(token, states)
        return tf.argmax(logits, axis=-1, output_type=tf.int32), new

    def python_loop(prompt):
        states = st.initial_state(prompt.shape[0])
        for i in range(prompt.shape[1] - 1):  # prefill: read the prompt but its last token
            _, states = step_argmax(prompt[:, i], states)
        token, out = prompt[:, -1], []
        for _ in range(steps):
            token, states = step_argmax(token, states)
            out.append(token)
        return tf.stack(out, axis=1)

    rng = np.random.default_rng(0)
    contenders, taken, budget = {}, {}, 0.3 if args.quick else 1.0
    for b in batches:
        prompt = tf.constant(np.stack([np.full(b, START_ID), rng.integers(4, LM_SHAPE["vocab"], b)], 1),
                             tf.int32)
        t0 = time.perf_counter()
        g_tokens, _ = greedy(prompt)
        trace_s = time.perf_counter() - t0
        b_res = beam(prompt)
        taken[b] = {"greedy": int(g_tokens.shape[1]), "beam": int(b_res.tokens.shape[2]),
                    "python loop": int(python_loop(prompt).shape[1])}
        t0 = time.perf_counter()
        greedy(prompt)[0].numpy()
        calls = max(1, min(20, int(budget / max(time.perf_counter() - t0, 1e-6))))
        for name, fn in ((f"greedy in-graph, batch {b}", lambda p=prompt: greedy(p)[0].numpy()),
                         (f"beam {BEAM} in-graph, batch {b}", lambda p=prompt: beam(p).tokens.numpy()),
                         (f"greedy Python loop, batch {b}", lambda p=prompt: python_loop(p).numpy())):
            contenders[name] = (lambda fn=fn, calls=calls, b=b: time_calls(fn, calls) * 1e3 / b)
        taken[b]["first_call_s"] = round(trace_s, 2)

    samples = interleaved(contenders, args.repeats, warmup=1)

    rows, beam_ratio, loop_ratio = [], {}, {}
    for name, vals in samples.items():
        b = int(name.rsplit(" ", 1)[1])
        base = samples[f"greedy in-graph, batch {b}"]
        ratio = statistics.median(v / g for v, g in zip(vals, base))
        kind = name.split(",")[0]
        if kind.startswith("beam"):
            beam_ratio[b] = round(ratio, 3)
            note = f"beam_search width {BEAM}, min_length = max_length; {taken[b]['beam']} steps"
        elif "loop" in kind:
            loop_ratio[b] = round(ratio, 3)
            note = f"one tf.function call per step (step + argmax); {taken[b]['python loop']} steps"
        else:
            note = f"decode(greedy=True) in tf.function; {taken[b]['greedy']} steps"
        rows.append({"contender": name, "metric": "ms/sequence", **summarize(vals), "ratio": ratio,
                     "notes": note})

    per_seq = {r["contender"]: r["median"] for r in rows}
    scaling = {kind: {b: round(per_seq[f"{kind}, batch 1"] / per_seq[f"{kind}, batch {b}"], 2)
                      for b in batches}
               for kind in ("greedy in-graph", f"beam {BEAM} in-graph", "greedy Python loop")}
    extra = {
        "model": {**LM_SHAPE, "weights": "untrained (seeded): the end token is never allowed to stop "
                                         "decoding early, so every contender runs the same steps"},
        "max_length": steps, "beam_width": BEAM, "steps_taken": taken,
        "beam_over_greedy": beam_ratio, "beam_over_greedy_target_batch_1": 2.5,
        "python_loop_over_in_graph": loop_ratio,
        "per_sequence_speedup_over_batch_1": scaling,
        "summary": ("beam 5 / greedy per sequence: " + ", ".join(f"batch {b} {r:.2f}" for b, r in beam_ratio.items())
                    + " (target <= 2.5 at batch 1); Python loop / in-graph greedy: "
                    + ", ".join(f"batch {b} {r:.2f}" for b, r in loop_ratio.items())
                    + "; per-sequence speed-up over batch 1: "
                    + "; ".join(f"{k} " + ", ".join(f"x{v} at {b}" for b, v in s.items() if b != 1)
                                for k, s in scaling.items()) + "."),
        "notes": (f"Untrained weights; greedy runs with a stop id no token has, beam search with "
                  f"min_length = max_length = {steps}, so all contenders take {steps} steps. "
                  f"ms/sequence = one batched call / batch size."),
    }
    return rows, extra
