"""The fused LSTM's recurrence loops on real variable-length batches: graph loops vs XLA-compiled.

``lm-pydoc-chars`` (LSTM 256, batch 64, lines of 2-160 characters, 126 training batches a pass,
bucketed and each padded to its longest line) through seqkit's recipe path
(``prepare``, ``compile_model``, ``make_split_dataset``), two models in one process:

* ``graph loops``: the forward and BPTT loops as TensorFlow ``while_loop`` s
  (``SEQKIT_RNN_XLA=0`` while the step is traced);
* ``XLA loops``: each compiled by XLA, every batch padded to one of a few lengths inside the layer
  (``SEQKIT_RNN_XLA=1``; :func:`seqkit.layers.fused_rnn.xla_lengths`): what ``auto`` picks for
  such batches where oneDNN runs AVX2 kernels (:func:`seqkit.layers.fused_rnn.use_xla`).

One measurement is one pass over the training batches (Keras's ``train_function`` stepped as
``fit`` does; no validation), the two models alternating pass by pass after one warm-up pass
each (which holds the tracing and, for the XLA loops, compiling: reported as ``first pass``).
Run it with ``--isa avx2`` beside a plain run to see the CPU-kind policy's reason.
"""

from __future__ import annotations

import os
import time


def run(args):
    from bench.common import interleaved, summarize
    from bench.suite_train import keras_stepper, loops_mode
    from seqkit.recipe import load_recipe
    from seqkit.training.train import compile_model, make_split_dataset, prepare, seed_everything

    r = load_recipe(os.path.join("recipes", "lm-pydoc-chars.yaml"))
    seed_everything(r.seed, r.training.deterministic)
    prep = prepare(r)
    ds = make_split_dataset(prep, "train", training=True)
    if args.quick:
        ds = ds.take(20)
    n = sum(1 for _ in ds)

    def make():
        return keras_stepper(compile_model(prep), ds)

    steps, first = {}, {}
    for name, mode in (("graph loops", "0"), ("XLA loops", "1")):
        t0 = time.perf_counter()
        steps[name] = loops_mode(make, mode)
        for _ in range(n - 1):
            out = steps[name]()
        float(out["loss"])
        first[name] = time.perf_counter() - t0

    def one_pass(step):
        t0 = time.perf_counter()
        for _ in range(n):
            out = step()
        float(out["loss"])
        return time.perf_counter() - t0

    res = interleaved({k: (lambda s=s: one_pass(s)) for k, s in steps.items()},
                      repeats=2 if args.quick else args.repeats, warmup=0)
    graph = summarize(res["graph loops"])["median"]
    rows = [{"contender": k, "metric": "s/pass", **summarize(v), "ratio": summarize(v)["median"] / graph,
             "notes": f"first pass {first[k]:.1f} s"} for k, v in res.items()]
    return rows, {"what": f"lm-pydoc-chars, {n} training batches a pass (LSTM 256, batch 64, bucketed lengths)",
                  "ratio": "median seconds a pass over the graph loops' (below 1 is faster)"}
