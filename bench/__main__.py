"""``python -m bench --suite NAME [--suite NAME ...]`` from the repository root.

Suites (each in ``bench/suite_NAME.py``, each a ``run(args) -> (rows, extra)``):

* ``train``  -- LM training tokens/s: seqkit recipe path, the hand-written Keras
  model, PyTorch (when installed: ``pip install -e ".[bench]"``), float32 and bfloat16
  (``--only NAME`` picks contenders).
* ``parts``  -- the train suite's step taken apart (embedding, projections, recurrence,
  softmax CE, clip, Adam) in TensorFlow beside PyTorch: where the time goes.
* ``stream`` -- TFLite step latency: bare ``invoke`` vs the ``seqkit.runtime`` step,
  float32 / float16 / int8, Keras and PyTorch steps beside them.
* ``state``  -- the ``--state internal`` step (state kept in the model) against the
  explicit-state step and a bare ``invoke``, float32 and int8 dynamic-range.
* ``decode`` -- greedy vs beam search (in-graph) vs a Python loop over steps.
* ``data``   -- tf.data input pipeline throughput against the training step.
* ``scale``  -- time per step and peak memory against sequence length and width
  (plot to PNG with the ``plot`` extra).
* ``loops``  -- the fused LSTM's graph loops against its XLA-compiled loops on
  ``lm-pydoc-chars``'s variable-length batches (the ``SEQKIT_RNN_XLA=auto`` policy's reason).
* ``forecast`` -- test MASE, sMAPE and training time of the forecast plugin's model beside
  darts' BlockRNNModel (LSTM), GluonTS's DeepAR, seasonal naive and ETS on the same test windows
  of ``forecast-electricity`` and ``forecast-monthly`` (darts / GluonTS with the plugin's ``bench``
  extra; ``--seeds N``: mean ± sd).
* ``step`` -- a recipe's training step timed per ``--variant`` (its ``--set`` overrides), interleaved,
  and the training time it projects (steps an epoch x epochs): a time budget checked before a long run.
* ``corpus`` -- peak RSS of stream-LM training on a 10 MB and a 1 GB text read
  lazily (``text_corpus``), and the counting pass's time.

Results go to ``bench/results/SUITE.json`` and ``.md`` (git-ignored). These are
measurements, not tests: nothing here asserts.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

SUITES = ("train", "parts", "stream", "state", "decode", "data", "scale", "corpus", "loops", "forecast", "step")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench",
        description="seqkit benchmarks (measurements, not tests): train, parts, stream, state, decode, data, scale, corpus, loops, forecast, step. "
                    "Run from the repository root; reports go to bench/results/SUITE.json and .md.")
    ap.add_argument("--suite", action="append", choices=SUITES + ("all",), required=True,
                    help="suite to run (repeatable; 'all' = every suite but step, which needs a --recipe)")
    ap.add_argument("--repeats", type=int, default=5, help="measured repeats per contender [5]")
    ap.add_argument("--quick", action="store_true", help="fewer steps and sizes (a smoke run)")
    ap.add_argument("--out", default=os.path.join("bench", "results"), help="report directory [bench/results]")
    ap.add_argument("--threads", type=int, default=None,
                    help="intra-op threads for TF and PyTorch [default: the libraries' own; forecast suite: 1]")
    ap.add_argument("--only", action="append", default=None, metavar="CONTENDER",
                    help="train and forecast suites: measure only this contender (repeatable), e.g. --only seqkit "
                         "--only 'seqkit bf16', --only 'GluonTS DeepAR'")
    ap.add_argument("--seeds", type=int, default=1,
                    help="forecast suite: train each model with N seeds (recipe seed + 0..N-1): mean ± sd [1]")
    ap.add_argument("--recipe", action="append", default=None, metavar="NAME",
                    help="forecast suite: forecast-electricity or forecast-monthly (or a recipe file; "
                         "repeatable) [both]; step suite: the one recipe (a file or a shipped recipe's name) to time")
    ap.add_argument("--variant", action="append", default=None, metavar="'KEY=VALUE ...'",
                    help="step suite: recipe overrides as --set takes them, space-separated, timed as one variant "
                         "(repeatable; default: the recipe as written), e.g. --variant '' "
                         "--variant 'training.precision=mixed_bfloat16'")
    ap.add_argument("--isa", choices=("avx2",), default=None,
                    help="cap oneDNN/MKL and XLA (TensorFlow) and ATen (PyTorch) kernels to AVX2 on an AVX-512 "
                         "machine: an approximation of an AVX2 CPU (its kernels, not its cores); "
                         "recorded in the report")
    args = ap.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if args.isa:
        from bench.machine import cap_isa

        cap_isa(args.isa)  # before TensorFlow or PyTorch is imported
    from bench.common import write_report

    names = tuple(n for n in SUITES if n != "step") if "all" in args.suite else tuple(dict.fromkeys(args.suite))
    for name in names:
        mod = importlib.import_module(f"bench.suite_{name}")
        print(f"== suite {name}", flush=True)
        rows, extra = mod.run(args)
        if args.quick:
            extra = {"run": "--quick smoke run: fewer steps and repeats, not for comparison", **extra}
        js, md = write_report(name, rows, extra, args.out)
        print(open(md, encoding="utf-8").read(), flush=True)
        print(f"written: {js}, {md}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
