"""Forecast accuracy and training time: seqkit's ``forecast`` head beside darts, GluonTS and the
statistical baselines, on the same test windows of the plugin's recipes.

``python -m bench --suite forecast [--seeds N] [--recipe NAME] [--threads T]`` (from the repository
root). Recipes: ``forecast-electricity`` (one half-hourly series, context 96, horizon 48, m = 48)
and ``forecast-monthly`` (5 monthly series with an id column, context 60, horizon 12, m = 12),
from ``plugins/seqkit-forecast/recipes``.

Every contender is scored on the same windows: the ``test`` records of the plugin's
``timeseries`` source (:func:`bench.forecast_windows.load_problem`), with the plugin's own figures
(:func:`seqkit_forecast.metrics.figures`): MASE with each series' training-period seasonal naive
MAE as its scale (seqkit's ``forecast_assets.json`` scale, checked equal), sMAPE (M4), and for
quantile recipes the pinball loss and the coverage of the outer levels. Every contender learns
from each series' training period only; the validation and test periods reach no fitted value.

Contenders (one row per recipe and contender):

* ``seqkit forecast``: the recipe trained through :func:`seqkit.train` (seed ``recipe.seed + i``
  for ``i < N``, ``--set seed=S``); its test figures are ``run.metrics["test"]`` and its training
  time ``run.metrics["train_seconds"]`` (the fit loop, with its per-epoch validation and
  checkpoint). seqkit keeps its best epoch by validation loss and stops early by its default
  ``training.early_stopping`` (patience 3), so the recipe's epochs are a maximum (the report names
  the epochs run); the recipe's recurrent stack: an LSTM of 64 on electricity, a GRU of 32 on
  monthly.
* ``darts BlockRNNModel LSTM`` (``bench.forecast_external``, a process of its own): ``C`` steps in,
  ``H`` out at once, ``hidden_dim`` = the recipe's units, its layers, no dropout; the recipe's
  calendar features (the plugin's own sine/cosine pairs) as past covariates; each series
  standardised with its training period's mean and std, as seqkit does; the recipe's loss
  (``QuantileRegression`` of the recipe's levels for the pinball recipe, L1 otherwise), learning
  rate and batch size. It trains on every window of the training periods (stride 1) for as many
  epochs as give seqkit's number of optimizer steps (electricity: seqkit's windows are 2 steps
  apart, so 10 darts epochs for seqkit's 20); it keeps its last epoch (darts' default).
* ``GluonTS DeepAR`` (the same way): ``DeepAREstimator`` of ``gluonts.torch`` with
  ``hidden_size`` = the recipe's units, its layers, ``dropout_rate=0``, ``context_length=C`` and
  ``lags_seq=[1]``, so the network reads exactly the ``C`` observations before an origin (its
  default lags would reach weeks back on half-hourly data); its own per-window mean scaling, its
  frequency's time features, a Student-t output; ``num_batches_per_epoch`` = seqkit's batches per
  epoch and ``max_epochs`` = the recipe's epochs (the same optimizer steps), the recipe's learning
  rate and batch size; it keeps its best epoch by training loss (GluonTS's default). Point
  forecast: the median of 100 sample paths; quantiles: those of the samples.
* ``GluonTS DeepAR, default lags``: the same with GluonTS's own lags for the frequency
  (``lags_seq=None``), what a GluonTS user gets by default: it reads ``C + max lag - 1``
  observations before an origin (96 + 1008 half-hours, 36 + 36 months), more history than the
  other contenders; same windows, same targets.
* ``seasonal naive`` and ``ETS``: the plugin's baselines (:mod:`seqkit_forecast.baselines`) on
  the same windows; ETS (statsmodels' Holt-Winters, additive damped trend and season) is fitted
  once per series on its training period, and its "training time" is that fit. These two do not
  depend on the seed.

darts and GluonTS need PyTorch: ``pip install -e "plugins/seqkit-forecast[bench]"`` (best in a
virtual environment of its own: PyTorch beside TensorFlow slows nothing of seqkit's, but the test
suite does not need it). Without them their rows are skipped with a one-line note.

Threads: ``--threads T`` (default 1 here) sets TensorFlow's intra-op threads for seqkit and
PyTorch's for darts and GluonTS, so each contender trains with the same number of cores. On a
shared 2-core machine PyTorch's default two-thread pool, competing with other processes, made darts
about 19x slower than one thread; ``--threads 2`` measures the libraries' two-thread pools on a
quiet machine. ``--quick``: 2 epochs (and the same steps for the others), a smoke run.

Rows: ``metric`` is the test MASE (``median`` / ``min`` / ``max`` over the seeds); ``mase``,
``smape``, ``pinball``, ``coverage``, ``train_seconds`` hold ``{"mean", "sd", "values"}`` (sample
sd, None for one seed); the report's ``markdown`` table gives mean ± sd.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench.forecast_windows import RECIPES, load_problem, use_plugin_source

EXTERNAL = {"darts BlockRNNModel LSTM": "darts", "GluonTS DeepAR": "gluonts",
            "GluonTS DeepAR, default lags": "gluonts-lags"}
INSTALL = 'pip install -e "plugins/seqkit-forecast[bench]"   # darts[torch], gluonts[torch], torch'
ORDER = ("seqkit forecast", "darts BlockRNNModel LSTM", "GluonTS DeepAR", "GluonTS DeepAR, default lags",
         "seasonal naive", "ETS")
FIGURES = ("mase", "smape", "pinball", "coverage", "train_seconds")


def missing_libraries(lib: str) -> list[str]:
    """The modules ``lib`` (``darts`` / ``gluonts``) needs that this interpreter cannot import."""
    need = {"darts": ("torch", "darts", "pytorch_lightning"), "gluonts": ("torch", "gluonts", "lightning"),
            "gluonts-lags": ("torch", "gluonts", "lightning")}[lib]
    return [m for m in need if importlib.util.find_spec(m) is None]


def stat(values: list) -> dict:
    """``{"mean", "sd", "values"}`` of per-seed values (sample sd; None for fewer than 2 or a
    missing value)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "sd": None, "values": values}
    return {"mean": statistics.fmean(vals), "sd": statistics.stdev(vals) if len(vals) > 1 else None,
            "values": [None if v is None else round(float(v), 6) for v in values]}


def show(s: dict | None, spec: str = ".3f") -> str:
    """``mean`` (``mean ± sd`` with seeds) as text; ``-`` when absent."""
    if not s or s.get("mean") is None:
        return "-"
    out = format(s["mean"], spec)
    return out + (f" ± {format(s['sd'], spec)}" if s.get("sd") is not None else "")


def _set_tf_threads(threads: int) -> None:
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    except RuntimeError:  # TensorFlow already initialised by an earlier suite of this process
        pass


def seqkit_row(recipe: str, seeds: list[int], quick: bool, tmp: str, problem) -> tuple[dict, dict]:
    """Train the recipe once per seed with :func:`seqkit.train`; ``({figure: [per seed]}, checks)``."""
    import seqkit

    per = {k: [] for k in FIGURES}
    checks = {}
    for seed in seeds:
        run_dir = os.path.join(tmp, f"{problem.name}-seed{seed}")
        overrides = [f"seed={seed}"] + (["training.epochs=2"] if quick else [])
        run = seqkit.train(recipe, run_dir, overrides=overrides)
        m = run.metrics
        test = m["test"]
        for k in ("mase", "smape", "pinball", "coverage"):
            per[k].append(test.get(k))
        per["train_seconds"].append(m["train_seconds"])
        per.setdefault("epochs", []).append(m.get("epochs"))
        with open(os.path.join(run_dir, "forecast_assets.json"), encoding="utf-8") as f:
            scale = json.load(f)["mase_scale"]
        ours = {sid: s.scale for sid, s in problem.series.items()}
        checks[f"seed {seed}"] = {
            "test_windows": {"seqkit": test.get("windows"), "suite": len(problem.windows)},
            "mase_scale_max_rel_diff": max(abs(scale[k] - v) / v for k, v in ours.items()),
            "epochs": m.get("epochs"),
            "seqkit_baselines_test_mase": {k: v.get("test", {}).get("mase") for k, v in m.get("baselines", {}).items()}}
    return per, checks


def baseline_rows(problem) -> dict:
    """Seasonal naive and ETS on the problem's windows: ``{name: {figure: value}}``."""
    use_plugin_source()
    from seqkit_forecast import baselines as B
    from seqkit_forecast import metrics as M

    y, scales, H, m = problem.targets(), problem.scales(), problem.horizon, problem.season
    out = {}
    t0 = time.perf_counter()
    sn = np.stack([B.seasonal_naive(problem.series[w.sid].y[:w.origin], H, m) for w in problem.windows])
    out["seasonal naive"] = {**M.figures(y, sn, scales), "train_seconds": 0.0,
                             "forecast_seconds": time.perf_counter() - t0}
    t0 = time.perf_counter()
    ets = {sid: B.ETS(s.y[:s.train_end], m) for sid, s in problem.series.items()}
    fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    f = np.stack([ets[w.sid].forecast(problem.series[w.sid].y[:w.origin], H) for w in problem.windows])
    out["ETS"] = {**M.figures(y, f, scales), "train_seconds": fit, "forecast_seconds": time.perf_counter() - t0}
    return out


def external_row(lib: str, recipe: str, seeds: list[int], quick: bool, threads: int, tmp: str, problem):
    """Run ``bench.forecast_external`` once per seed in a child process; ``({figure: [per seed]},
    configs, error or None)``."""
    use_plugin_source()
    from seqkit_forecast import metrics as M

    per, configs = {k: [] for k in FIGURES}, []
    y, scales = problem.targets(), problem.scales()
    for seed in seeds:
        out = os.path.join(tmp, f"{problem.name}-{lib}-seed{seed}.npz")
        cmd = [sys.executable, "-m", "bench.forecast_external", lib, recipe, "--seed", str(seed),
               "--threads", str(threads), "--out", out] + (["--epochs", "2"] if quick else [])
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
            return per, configs, f"{lib} failed (exit {proc.returncode}): {tail[0][:300]}"
        with np.load(out) as d:
            levels = [float(v) for v in d["levels"]]
            fig = M.figures(y, d["point"], scales, d["quantiles"] if levels else None, levels or None)
            for k in ("mase", "smape", "pinball", "coverage"):
                per[k].append(fig.get(k))
            per["train_seconds"].append(float(d["train_seconds"]))
            configs.append(json.loads(str(d["config"])))
    return per, configs, None


def run(args):
    plugin = use_plugin_source()
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    threads = args.threads or 1
    _set_tf_threads(threads)
    names = getattr(args, "recipe", None) or list(RECIPES)
    n_seeds = max(1, getattr(args, "seeds", 1) or 1)
    only = set(args.only or ()) or None
    if only and only - set(ORDER):  # e.g. the train suite's names in a run of several suites
        print(f"--only {', '.join(sorted(only - set(ORDER)))}: not a forecast contender (they are "
              f"{', '.join(ORDER)}); ignored here.", flush=True)
        only = (only & set(ORDER)) or None
    libs = {}
    for row, lib in EXTERNAL.items():
        if only and row not in only:
            continue
        gone = missing_libraries(lib)
        if gone:
            print(f"skip {row}: {', '.join(gone)} not importable here; install: {INSTALL}", flush=True)
        else:
            libs[row] = lib
    rows, checks, configs, lines = [], {}, {}, []
    tmp = tempfile.mkdtemp(prefix="seqkit-bench-forecast-")
    try:
        for name in names:
            recipe = RECIPES.get(name, name)
            problem = load_problem(recipe)
            seeds = [problem.seed + i for i in range(n_seeds)]
            results = {}
            t_all = time.perf_counter()
            if not only or "seqkit forecast" in only:
                print(f"-- {problem.name}: seqkit forecast, seeds {seeds}", flush=True)
                results["seqkit forecast"], checks[problem.name] = seqkit_row(recipe, seeds, args.quick, tmp, problem)
            for row, lib in libs.items():
                print(f"-- {problem.name}: {row}, seeds {seeds}", flush=True)
                per, cfg, err = external_row(lib, recipe, seeds, args.quick, threads, tmp, problem)
                configs[f"{problem.name}: {row}"] = cfg
                if err:
                    print(f"skip {row} on {problem.name}: {err}", flush=True)
                    continue
                results[row] = per
            print(f"-- {problem.name}: seasonal naive, ETS", flush=True)
            for row, fig in baseline_rows(problem).items():
                if not only or row in only:
                    results[row] = {k: [fig.get(k)] for k in FIGURES}  # one value: no seed
            print(f"-- {problem.name}: {time.perf_counter() - t_all:.0f} s", flush=True)
            ref = statistics.fmean(results["seqkit forecast"]["mase"]) if "seqkit forecast" in results else None
            desc = (f"{problem.name}: {len(problem.windows)} test windows, {len(problem.series)} series, "
                    f"C {problem.context}, H {problem.horizon}, m {problem.season}"
                    + (f"; quantiles {problem.quantiles} (nominal coverage "
                       f"{problem.quantiles[-1] - problem.quantiles[0]:g})" if len(problem.quantiles) > 1 else ""))
            lines.append(f"\n{desc}\n\n| contender | test MASE | sMAPE % | pinball | coverage | train s |\n"
                         f"|---|---|---|---|---|---|")
            for row in [r for r in ORDER if r in results]:
                per = results[row]
                st = {k: stat(per[k]) for k in FIGURES}
                mase = [v for v in per["mase"] if v is not None]
                rows.append({"contender": f"{problem.name}: {row}", "metric": "test MASE",
                             "median": statistics.median(mase), "min": min(mase), "max": max(mase),
                             "samples": [round(v, 4) for v in mase],
                             "ratio": statistics.fmean(mase) / ref if ref else None,
                             "notes": f"sMAPE {show(st['smape'], '.2f')}, train {show(st['train_seconds'], '.1f')} s"
                                      + (f", epochs {per['epochs']}" if per.get("epochs") else ""),
                             "recipe": problem.name, "seeds": seeds if row not in ("seasonal naive", "ETS") else None,
                             **st})
                label = row + (f" (epochs {', '.join(map(str, per['epochs']))})" if per.get("epochs") else "")
                lines.append(f"| {label} | {show(st['mase'])} | {show(st['smape'], '.2f')} | "
                             f"{show(st['pinball'], '.1f')} | {show(st['coverage'], '.3f')} | "
                             f"{show(st['train_seconds'], '.1f')} |")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows, {"what": "test MASE (training-period seasonal naive scale), sMAPE (M4) and training seconds "
                          "of seqkit's forecast head, darts, GluonTS and the plugin's baselines on the same "
                          "test windows",
                  "ratio": "mean test MASE over seqkit forecast's on the same recipe",
                  "threads": f"{threads} intra-op thread(s) for TensorFlow and PyTorch",
                  "seeds": f"{n_seeds} (recipe seed + 0..{n_seeds - 1}); baselines do not depend on the seed",
                  "seqkit_forecast": plugin, "checks": checks, "external_config": configs,
                  "markdown": "\n".join(lines).lstrip("\n") + "\n"}
