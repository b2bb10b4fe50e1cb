"""Checks the forecast plugin's tests share: two synthetic monthly series, and the check that a
trained run's ``predict``, its ``export`` (TFLite parity) and the lone ``.tflite``'s ``stream``
give the same forecasts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np


def seasonal(n: int, m: int, slope: float, amp: float, noise: float, seed: int, level: float = 20.0) -> np.ndarray:
    """``[n]`` float64: ``level + slope*k + amp*sin(2*pi*k/m)`` plus Gaussian noise (sd ``noise``)."""
    rng = np.random.default_rng(seed)
    k = np.arange(n)
    return level + slope * k + amp * np.sin(2 * np.pi * k / m) + rng.normal(0, noise, n)


def two_series_csv(path: Path, n: int = 240) -> None:
    """Monthly rows ``month,id,value`` of two positive seasonal series with different dynamics,
    rounded to 1/1024 so that float32 frames hold them exactly."""
    import pandas as pd

    t = pd.date_range("2000-01-01", periods=n, freq="MS")
    rows = []
    for sid, y in (("a", np.exp(seasonal(n, 12, 0.004, 0.2, 0.04, seed=5, level=3.0))),
                   ("b", np.exp(seasonal(n, 12, 0.0, 0.1, 0.12, seed=6, level=2.0)))):
        y = np.round(y * 1024) / 1024
        rows += [f"{tt:%Y-%m-%d},{sid},{v:.10f}" for tt, v in zip(t, y)]
    path.write_text("month,id,value\n" + "\n".join(rows) + "\n")


def predict_export_stream_agree(run: str, csv: Path, out: Path, context: int = 24, extra: int = 3) -> dict:
    """Series ``b``'s last ``context + extra`` rows: ``seqkit predict`` on the first ``context``,
    ``seqkit export`` (TFLite max |diff| < 1e-4), then ``seqkit stream`` of the lone ``.tflite``
    (its metadata.json removed: the model file carries what it needs) over all of them, whose
    first forecast must be predict's (rtol 1e-3). Returns the export's metadata.json."""
    import pandas as pd
    from click.testing import CliRunner

    from seqkit.cli import main

    rows = pd.read_csv(csv)
    rows = rows[rows.id == "b"].tail(context + extra)
    rows.head(context).to_csv(out / "first.csv", index=False)
    rows.to_csv(out / "rows.csv", index=False)
    r = CliRunner()
    res = r.invoke(main, ["predict", run, "--input", str(out / "first.csv"), "--format", "jsonl"])
    assert res.exit_code == 0, res.output
    first = json.loads(res.stdout)
    res = r.invoke(main, ["export", run, "--out", str(out / "exp")])
    assert res.exit_code == 0, res.output
    assert json.loads((out / "exp" / "parity.json").read_text())["tflite"]["max_abs_diff"] < 1e-4
    meta = json.loads((out / "exp" / "metadata.json").read_text())
    os.remove(out / "exp" / "metadata.json")
    res = r.invoke(main, ["stream", str(out / "exp" / "model.tflite"), "--input", str(out / "rows.csv")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert len(lines) == extra + 1 and lines[0].split("\t")[1] == first["origin"]
    np.testing.assert_allclose([float(v) for v in lines[0].split("\t")[2].split()], first["forecast"], rtol=1e-3)
    return meta


def train_two_series_run(d: Path, name: str, smoothing, batch_size: int, learning_rate: float) -> str:
    """Write :func:`two_series_csv` into ``d`` and train a small GRU forecaster on it through
    ``seqkit train`` (context 24, horizon 6, log transform, seasonal-MAE scale, deseasonalised
    inputs, smoothed anchor with ``head.smoothing: smoothing``; 2 epochs). Returns the run directory."""
    from click.testing import CliRunner

    from seqkit.cli import main

    two_series_csv(d / "s.csv")
    recipe = {"name": name, "seed": 1,
              "data": {"source": "timeseries", "path": "s.csv", "time_column": "month", "id_column": "id",
                       "target": "value", "calendar": ["month"], "context": 24, "horizon": 6,
                       "valid_steps": 24, "test_steps": 24},
              "model": {"cell": "gru", "units": 8, "layers": 1},
              "head": {"type": "forecast", "season": 12, "ets": False, "transform": "log",
                       "scale": "seasonal_mae", "inputs": "deseasonalised", "anchor": "smoothed",
                       "smoothing": smoothing},
              "training": {"epochs": 2, "batch_size": batch_size, "learning_rate": learning_rate,
                           "early_stopping": None}}
    (d / "r.yaml").write_text(json.dumps(recipe))
    run = str(d / "run")
    res = CliRunner().invoke(main, ["train", str(d / "r.yaml"), "--run-dir", run])
    assert res.exit_code == 0, res.output
    return run
