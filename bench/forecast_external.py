"""The forecast suite's external contenders, each trained and run in a process of its own:
``python -m bench.forecast_external LIB RECIPE --seed S --out FILE.npz``.

``LIB`` is ``darts`` (darts' ``BlockRNNModel`` with an LSTM), ``gluonts`` (GluonTS's PyTorch
``DeepAREstimator`` reading the recipe's context) or ``gluonts-lags`` (the same with GluonTS's
default lags, which reach further back). Both need PyTorch (``pip install -e "plugins/seqkit-forecast[bench]"``); a
process of their own keeps PyTorch's and TensorFlow's thread pools apart (together in one process
they slow each other several times over) and keeps TensorFlow out of their timing.

Each learns from the recipe's training period of every series alone
(:meth:`bench.forecast_windows.ForecastProblem.train_series`) and forecasts the recipe's test
windows (:func:`bench.forecast_windows.load_problem`) from their origins; what each reads and how
it is sized is in :mod:`bench.suite_forecast`'s docstring.

The output file holds ``point`` ``float64 [N, H]`` (the point forecasts of the N test windows in
the series' units), ``quantiles`` ``float64 [N, H, Q]`` and ``levels`` ``[Q]`` (Q = 0 when the
recipe has no quantiles), ``train_seconds`` (the wall time of the library's fit call),
``predict_seconds``, and ``config`` (a JSON string: the settings used).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

from bench.forecast_windows import ForecastProblem, gradient_steps, load_problem


def darts_epochs(p: ForecastProblem, steps: int) -> tuple[int, int]:
    """``(epochs, samples)``: darts trains on every window of each training period (stride 1:
    ``samples = sum(n - C - H + 1)``); the epochs giving about ``steps`` optimizer steps at the
    recipe's batch size (at least 1)."""
    samples = sum(max(0, s.train_end - p.context - p.horizon + 1) for s in p.series.values())
    per_epoch = -(-samples // p.batch_size)
    return max(1, round(steps / per_epoch)), samples


def gluonts_freq(freq: str) -> str:
    """The period frequency GluonTS's ``pd.Period`` start stamps need for a pandas offset alias:
    month / quarter / year *start* offsets (``MS``, ``QS-JAN``, ``YS-JAN``) become their period
    (``M``, ``Q``, ``Y``); others are kept (``30min``, ``h``, ``D``, ``W-SUN``)."""
    for start, period in (("MS", "M"), ("QS", "Q"), ("YS", "Y"), ("AS", "Y")):
        if freq == start or freq.startswith(start + "-"):
            return period
    return freq


def darts_arrays(p: ForecastProblem) -> tuple[list, list]:
    """What darts is given, as arrays: ``(train, windows)``, each a list of ``(times [n]
    datetime64, values float32 [n] standardised, calendar float32 [n, 2 * len(calendar)])``.
    ``train``: each series' training period (``n = train_end``); ``windows``: each test window's
    ``C`` steps before its origin (``n = C``). Standardised with each series' training-period mean
    and std (:class:`bench.forecast_windows.SeriesSplit`)."""
    def part(s, lo, hi):
        return (s.times[lo:hi], ((s.y[lo:hi] - s.mean) / s.std).astype(np.float32), s.calendar[lo:hi])

    train = [part(s, 0, s.train_end) for s in p.series.values()]
    wins = [part(p.series[w.sid], w.origin - p.context, w.origin) for w in p.windows]
    return train, wins


def gluonts_entries(p: ForecastProblem, freq: str) -> tuple[list, list]:
    """GluonTS datasets (lists of ``{"start": pd.Period, "target": float32 [n], "item_id"}``):
    ``train``, each series' training period; ``test``, one entry per test window holding the
    series from its start up to the window's origin (GluonTS's age feature counts from the series'
    start, as in training; DeepAR with ``lags_seq=[1]`` reads the last ``context_length`` values)."""
    import pandas as pd

    train = [{"start": pd.Period(times[0], freq), "target": y.astype(np.float32), "item_id": sid}
             for sid, (times, y) in p.train_series().items()]
    test = [{"start": pd.Period(p.series[w.sid].times[0], freq),
             "target": p.series[w.sid].y[:w.origin].astype(np.float32), "item_id": w.sid} for w in p.windows]
    return train, test


def _quiet():
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    for name in ("lightning", "lightning.pytorch", "pytorch_lightning", "gluonts", "darts"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _trainer(tmp: str) -> dict:
    return {"accelerator": "cpu", "devices": 1, "enable_progress_bar": False, "enable_model_summary": False,
            "logger": False, "default_root_dir": tmp}


def run_darts(p: ForecastProblem, seed: int, steps: int, tmp: str) -> dict:
    """darts ``BlockRNNModel(model="LSTM")``: ``C`` steps in, ``H`` out at once (as seqkit's
    ``forecast`` head), the recipe's calendar features as past covariates, each series standardised
    with its training period's mean and std; the recipe's loss (``QuantileRegression`` for a pinball
    recipe, else L1 / MSE)."""
    import torch
    from darts import TimeSeries
    from darts.models import BlockRNNModel
    from darts.utils.likelihood_models.torch import QuantileRegression

    def ts(times, values):
        import pandas as pd

        return TimeSeries.from_times_and_values(pd.DatetimeIndex(times), np.asarray(values, np.float32), freq=p.freq)

    epochs, samples = darts_epochs(p, steps)
    kw = {"loss_fn": torch.nn.L1Loss() if p.loss == "mae" else torch.nn.MSELoss()} if not p.quantiles else \
        {"likelihood": QuantileRegression(quantiles=list(p.quantiles))}
    model = BlockRNNModel(input_chunk_length=p.context, output_chunk_length=p.horizon, model="LSTM",
                          hidden_dim=p.units, n_rnn_layers=p.layers, dropout=0.0, batch_size=p.batch_size,
                          n_epochs=epochs, optimizer_kwargs={"lr": p.learning_rate}, random_state=seed,
                          work_dir=tmp, save_checkpoints=False, pl_trainer_kwargs=_trainer(tmp), **kw)
    (series, covs), (ins, cins) = (([ts(t, v) for t, v, _ in part],
                                    [ts(t, c) for t, _, c in part] if p.calendar else None)
                                   for part in darts_arrays(p))
    t0 = time.perf_counter()
    model.fit(series, past_covariates=covs, verbose=False)
    train_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = model.predict(n=p.horizon, series=ins, past_covariates=cins,
                        predict_likelihood_parameters=bool(p.quantiles), verbose=False)
    predict_seconds = time.perf_counter() - t0
    z = np.stack([o.values() for o in out]).astype(np.float64)  # [N, H, Q or 1] scaled
    mean = np.asarray([p.series[w.sid].mean for w in p.windows])[:, None, None]
    std = np.asarray([p.series[w.sid].std for w in p.windows])[:, None, None]
    f = z * std + mean
    q = list(p.quantiles)
    point = f[..., q.index(0.5)] if q else f[..., 0]
    return {"point": point, "quantiles": f if q else np.zeros(point.shape + (0,)), "levels": np.asarray(q, float),
            "train_seconds": train_seconds, "predict_seconds": predict_seconds,
            "config": {"model": "BlockRNNModel(model='LSTM')", "hidden_dim": p.units, "n_rnn_layers": p.layers,
                       "input_chunk_length": p.context, "output_chunk_length": p.horizon,
                       "batch_size": p.batch_size, "n_epochs": epochs, "training_samples": samples,
                       "lr": p.learning_rate, "loss": "QuantileRegression" if q else p.loss,
                       "past_covariates": list(p.calendar), "scaling": "training period mean/std per series",
                       "steps": epochs * -(-samples // p.batch_size), "seed": seed}}


def run_gluonts(p: ForecastProblem, seed: int, steps: int, tmp: str, default_lags: bool = False) -> dict:
    """GluonTS ``DeepAREstimator`` (PyTorch): an autoregressive LSTM with a Student-t output,
    ``lags_seq=[1]`` and ``context_length=C`` (so it reads exactly the last ``C`` observations
    before an origin), its own per-window mean scaling and its frequency's time features; trained
    for ``steps`` batches (``num_batches_per_epoch`` = seqkit's batches per epoch, the recipe's
    epochs); point forecast = the median of 100 sample paths.

    ``default_lags``: GluonTS's lags for the frequency instead (``get_lags_for_frequency``: up to
    1009 steps at ``30min``, 37 at monthly), so it reads ``C + max lag - 1`` observations before
    an origin: more history than the other contenders get."""
    import lightning.pytorch as pl
    from gluonts.torch import DeepAREstimator

    pl.seed_everything(seed, workers=True, verbose=False)
    freq = gluonts_freq(p.freq)
    per_epoch = -(-p.train_windows // p.batch_size)
    epochs = max(1, round(steps / per_epoch))
    est = DeepAREstimator(freq=freq, prediction_length=p.horizon, context_length=p.context,
                          num_layers=p.layers, hidden_size=p.units, lr=p.learning_rate, dropout_rate=0.0,
                          lags_seq=None if default_lags else [1], batch_size=p.batch_size, num_batches_per_epoch=per_epoch,
                          trainer_kwargs={**_trainer(tmp), "max_epochs": epochs})
    train, test = gluonts_entries(p, freq)
    t0 = time.perf_counter()
    predictor = est.train(train)
    train_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    fc = list(predictor.predict(test, num_samples=100))
    predict_seconds = time.perf_counter() - t0
    q = list(p.quantiles)
    point = np.stack([f.quantile(0.5) for f in fc]).astype(np.float64)
    quant = np.stack([np.stack([f.quantile(v) for v in q], axis=-1) for f in fc]).astype(np.float64) if q else \
        np.zeros(point.shape + (0,))
    return {"point": point, "quantiles": quant, "levels": np.asarray(q, float), "train_seconds": train_seconds,
            "predict_seconds": predict_seconds,
            "config": {"model": "DeepAREstimator (gluonts.torch)", "hidden_size": p.units, "num_layers": p.layers,
                       "context_length": p.context, "prediction_length": p.horizon,
                       "lags_seq": "GluonTS's default for the frequency" if default_lags else [1],
                       "past_length": est.create_lightning_module().model._past_length,
                       "batch_size": p.batch_size, "num_batches_per_epoch": per_epoch, "max_epochs": epochs,
                       "lr": p.learning_rate, "dropout_rate": 0.0, "freq": freq, "num_samples": 100,
                       "point": "median of the samples", "steps": epochs * per_epoch, "seed": seed}}


RUNNERS = {"darts": run_darts, "gluonts": run_gluonts,
           "gluonts-lags": lambda p, seed, steps, tmp: run_gluonts(p, seed, steps, tmp, default_lags=True)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.forecast_external",
                                 description="Train one external forecaster on a forecast recipe's training "
                                             "period and forecast its test windows (see the module docstring).")
    ap.add_argument("lib", choices=sorted(RUNNERS))
    ap.add_argument("recipe")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=None,
                    help="seqkit epochs whose optimizer steps the library gets [the recipe's]")
    ap.add_argument("--threads", type=int, default=None, help="PyTorch intra-op threads [PyTorch's default]")
    ap.add_argument("--out", required=True, help="the .npz file written")
    a = ap.parse_args(argv)
    _quiet()
    import torch

    if a.threads:
        torch.set_num_threads(a.threads)
    p = load_problem(a.recipe)
    steps = gradient_steps(p, a.epochs)
    with tempfile.TemporaryDirectory(prefix="seqkit-bench-fc-") as tmp:
        res = RUNNERS[a.lib](p, a.seed, steps, tmp)
    res["config"] = json.dumps({**res["config"], "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
                                "version": _version(a.lib)})
    tmp_out = f"{a.out}.partial-{os.getpid()}.npz"
    np.savez(tmp_out, **res)
    os.replace(tmp_out, a.out)
    return 0


def _version(lib: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(lib.split("-")[0])
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
