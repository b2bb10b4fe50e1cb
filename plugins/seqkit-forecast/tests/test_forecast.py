"""Tests of the seqkit-forecast plugin: metrics and baselines worked by hand, the time split without
leakage, bad tables refused with file and row, and a tiny model on a seasonal series going through
train, evaluate (beating seasonal naive), predict, export (TFLite parity) and stream (== predict)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from click.testing import CliRunner  # noqa: E402

from seqkit.cli import main  # noqa: E402
from seqkit.errors import DataError  # noqa: E402
from seqkit_forecast import baselines as B  # noqa: E402
from seqkit_forecast import metrics as M  # noqa: E402
from seqkit_forecast.source import TimeSeriesOptions, TimeSeriesSource  # noqa: E402

PLUGIN = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ metrics and baselines by hand
def test_point_metrics_by_hand():
    y, f = [[1.0, 2.0, 3.0]], [[2.0, 2.0, 5.0]]
    assert M.mae(y, f) == pytest.approx(1.0)  # (1 + 0 + 2) / 3
    assert M.rmse(y, f) == pytest.approx(np.sqrt(5 / 3))  # (1 + 0 + 4) / 3
    # 100/3 * (2*1/(1+2) + 0 + 2*2/(3+5)) = 100/3 * (2/3 + 1/2)
    assert M.smape(y, f) == pytest.approx(100 / 3 * (2 / 3 + 1 / 2))
    assert M.smape([[0.0]], [[0.0]]) == 0.0  # 0/0 counts 0
    # training period [0, 2, 1, 5, 2, 8], m = 2: |1-0|, |5-2|, |2-1|, |8-5| -> mean 2
    scale = M.seasonal_scale([0, 2, 1, 5, 2, 8], 2)
    assert scale == pytest.approx(2.0)
    assert M.mase(y, f, [scale]) == pytest.approx(0.5)  # MAE 1 / 2
    # two windows of two series: (|1-2|/1 + |4-0|/2) / 2
    assert M.mase([[1.0], [4.0]], [[2.0], [0.0]], [1.0, 2.0]) == pytest.approx(1.5)


def test_pinball_and_coverage_by_hand():
    y = [[1.0, 2.0, 3.0]]
    fq = np.asarray([[[0.0, 2.0], [2.0, 3.0], [4.0, 4.0]]])  # [N=1, H=3, Q=2], levels 0.1 and 0.9
    # q=0.1: y-f = 1, 0, -1 -> 0.1, 0, 0.9;  q=0.9: y-f = -1, -1, -1 -> 0.1, 0.1, 0.1
    assert M.pinball(y, fq, [0.1, 0.9]) == pytest.approx(1.3 / 6)
    # 1 in [0, 2], 2 in [2, 3], 3 not in [4, 4]
    assert M.coverage(y, fq[..., 0], fq[..., 1]) == pytest.approx(2 / 3)
    figs = M.figures(y, fq[..., 0], [1.0], fq, [0.1, 0.9])
    assert figs["nominal"] == pytest.approx(0.8) and figs["coverage"] == pytest.approx(2 / 3)


def test_baselines_by_hand():
    h = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    np.testing.assert_allclose(B.naive(h, 4), [6, 6, 6, 6])
    np.testing.assert_allclose(B.seasonal_naive(h, 4, 3), [4, 5, 6, 4])
    np.testing.assert_allclose(B.drift(h, 4), [7, 8, 9, 10])  # slope (6 - 1) / 5


def test_ets_from_an_origin_is_statsmodels_forecast_with_the_fitted_parameters():
    import warnings

    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    rng = np.random.default_rng(0)
    k = np.arange(120)
    y = 10 + 0.05 * k + 2 * np.sin(2 * np.pi * k / 12) + rng.normal(0, 0.2, 120)
    ets = B.ETS(y[:96], 12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ExponentialSmoothing(y[:96], trend="add", damped_trend=True, seasonal="add",
                                   seasonal_periods=12).fit().forecast(6)
    np.testing.assert_allclose(ets.forecast(y[:96], 6), ref, rtol=1e-9)  # at the training end
    later = ets.forecast(y[:108], 6)  # a later origin reads the 12 new values, no refit
    assert np.mean(np.abs(later - y[108:114])) < 0.6


# ------------------------------------------------------------------ data: split by time
def _series_csv(path: Path, n: int = 400, ids=("a", "b"), seed: int = 0, period: int = 12,
                noise: float = 0.5) -> None:
    """Hourly rows ``time,id,value,temp``: level + 3 sin(2 pi t / period) + noise per series."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = []
    for j, sid in enumerate(ids):
        t = pd.date_range("2024-01-01", periods=n, freq="h")
        k = np.arange(n)
        y = 10 * j + 3 * np.sin(2 * np.pi * k / period) + rng.normal(0, noise, n)
        temp = np.cos(2 * np.pi * k / period) + rng.normal(0, 0.1, n)
        rows += [f"{tt:%Y-%m-%d %H:%M},{sid},{v:.4f},{c:.4f}" for tt, v, c in zip(t, y, temp)]
    path.write_text("time,id,value,temp\n" + "\n".join(rows) + "\n")


def _options(path, **kw):
    base = dict(path=str(path), id_column="id", target="value", covariates=["temp"], context=24,
                horizon=6, valid_steps=48, test_steps=48)
    return TimeSeriesOptions(**{**base, **kw})


def test_split_by_time_and_scaling_read_nothing_after_the_training_period(tmp_path):
    import pandas as pd

    from seqkit_forecast.head import Scaler

    _series_csv(tmp_path / "s.csv", n=300)
    o = _options(tmp_path / "s.csv")
    splits = TimeSeriesSource(o).load()
    table = pd.read_csv(tmp_path / "s.csv", parse_dates=["time"])
    for sid, rows in table.groupby("id"):
        valid_start = rows["time"].iloc[300 - 96]  # the first step of the validation period
        test_start = rows["time"].iloc[300 - 48]
        train = [r for r in splits["train"] if r.label == sid]
        assert train and all(r.times[-1] < valid_start for r in train)  # context and target
        assert max(r.times[-1] for r in train) == rows["time"].iloc[300 - 97]  # the period is used
        valid = [r for r in splits["valid"] if r.label == sid]
        assert valid and all(valid_start <= r.times[24] and r.times[-1] < test_start for r in valid)
        test = [r for r in splits["test"] if r.label == sid]
        assert test and all(r.times[24] >= test_start for r in test)
        # an origin's frames end one step before it (the model never sees its target)
        r = test[0]
        assert r.frames[-1, 0] == pytest.approx(rows["value"].iloc[r.origin - 1], abs=1e-4)
        assert r.target[0] == pytest.approx(rows["value"].iloc[r.origin], abs=1e-4)

    sc = Scaler.fit(splits["train"], o, season=12)
    for sid, rows in table.groupby("id"):
        train_rows = rows.iloc[:300 - 96]
        assert pd.Timestamp(sc.fitted_until[sid]) == train_rows["time"].iloc[-1]
        mean, std = sc.stats[sid]["mean"], sc.stats[sid]["std"]
        # (windows hold float32 frames: agreement to float32 rounding)
        assert mean[0] == pytest.approx(train_rows["value"].mean(), abs=1e-5)
        assert std[0] == pytest.approx(train_rows["value"].std(ddof=0), rel=1e-5)
        # a covariate is an input only: read where a training window's context holds it (all
        # but the period's last horizon = 6 steps, which training windows only forecast)
        assert mean[1] == pytest.approx(train_rows["temp"].iloc[:-6].mean(), abs=1e-5)
        assert sc.mase_scale[sid] == pytest.approx(M.seasonal_scale(train_rows["value"].to_numpy(), 12))


def _bad(tmp_path, text, **kw):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(DataError) as err:
        TimeSeriesSource(_options(p, covariates=[], id_column=None, context=2, horizon=1, valid_steps=1,
                                  test_steps=1, **kw)).load()
    return str(err.value)


def test_bad_tables_are_refused_with_file_and_row(tmp_path):
    head = "time,value\n"
    rows = [f"2024-01-01 0{i}:00,{i}" for i in range(8)]
    msg = _bad(tmp_path, head + "\n".join(rows[:3] + [rows[5], rows[3], rows[4]] + rows[6:]) + "\n")
    assert "bad.csv:6" in msg and "comes before" in msg and "sort the file" in msg  # unsorted
    msg = _bad(tmp_path, head + "\n".join(rows[:4] + [rows[3]] + rows[4:]) + "\n")
    assert "bad.csv:6" in msg and "repeats" in msg  # duplicate time stamp
    msg = _bad(tmp_path, "time,load\n" + "\n".join(r for r in rows) + "\n")
    assert "bad.csv" in msg and "'value'" in msg and "'load'" in msg  # missing target column
    msg = _bad(tmp_path, head + "\n".join(rows[:4]) + "\n")
    assert "bad.csv:2" in msg and "4 steps" in msg and "context + horizon = 3" in msg  # too short
    nan = rows[:3] + ["2024-01-01 03:00,"] + rows[4:]
    msg = _bad(tmp_path, head + "\n".join(nan) + "\n")
    assert "bad.csv:5" in msg and "empty or NaN" in msg and "missing: interpolate" in msg
    gap = rows[:3] + rows[4:]
    msg = _bad(tmp_path, head + "\n".join(gap) + "\n")
    assert "bad.csv:5" in msg and "missing time step" in msg
    msg = _bad(tmp_path, head + "\n".join(rows[:3] + ["2024-01-01 03:00,x"] + rows[4:]) + "\n")
    assert "bad.csv:5" in msg and "'x'" in msg
    msgs = [msg]
    for value in ("inf", "-Infinity", "1e39"):  # no model reads them: refused with the row
        msg = _bad(tmp_path, head + "\n".join(rows[:6] + [f"2024-01-01 06:00,{value}"] + rows[7:]) + "\n")
        assert "bad.csv:8" in msg and f"'{value}', not a finite number" in msg
        msgs.append(msg)
    months = [f"{1990 + i // 12}-{i % 12 + 1:02d}-01,{i}" for i in range(30) if i != 17]  # no June 1991
    msg = _bad(tmp_path, head + "\n".join(months) + "\n")
    assert "bad.csv:19: the time step from row 18 (1991-05-01 00:00:00) to row 19 (1991-07-01" in msg
    assert "usual step (MS)" in msg  # months of 28 to 31 days: the gap is named, not February
    mixed = rows[:3] + ["2024-01-01 03:00+01:00,3"] + rows[4:]  # an offset beside none
    msg = _bad(tmp_path, head + "\n".join(mixed) + "\n")
    assert "bad.csv:2" in msg and "no UTC offset, while row 5 has one" in msg
    for m in msgs + [msg]:
        assert "\n" not in m  # one paragraph


def test_local_times_across_a_summer_time_change_are_read_as_utc(tmp_path):
    """Central European times with their offsets (+01:00, then +02:00 from 2024-03-31 03:00): one
    hour apart in UTC, so an hourly series with no gap."""
    stamps = ["2024-03-31T00:00:00+01:00", "2024-03-31T01:00:00+01:00", "2024-03-31T03:00:00+02:00",
              "2024-03-31T04:00:00+02:00", "2024-03-31T05:00:00+02:00", "2024-03-31T06:00:00+02:00"]
    p = tmp_path / "cet.csv"
    p.write_text("time,value\n" + "".join(f"{t},{i}\n" for i, t in enumerate(stamps)))
    o = _options(p, covariates=[], id_column=None, context=2, horizon=1, valid_steps=1, test_steps=1)
    from seqkit_forecast.source import read_series

    series = read_series(o, str(p))
    assert [str(t)[:16] for t in series[0].times] == ["2024-03-30T23:00", "2024-03-31T00:00", "2024-03-31T01:00",
                                                      "2024-03-31T02:00", "2024-03-31T03:00", "2024-03-31T04:00"]


def test_missing_values_interpolated_only_when_the_recipe_says_so(tmp_path):
    rows = [f"2024-01-01 0{i}:00,{v}" for i, v in enumerate([0, 1, "", 3, 4, 5, 6, 7])]
    p = tmp_path / "gap.csv"
    p.write_text("time,value\n" + "\n".join(rows) + "\n")
    o = _options(p, covariates=[], id_column=None, context=2, horizon=1, valid_steps=1, test_steps=1,
                 missing="interpolate")
    train = TimeSeriesSource(o).load()["train"]
    assert [r.target[0] for r in train[:2]] == [2.0, 3.0]  # the gap filled with 2


def test_bad_table_fails_train_and_writes_nothing(tmp_path):
    (tmp_path / "bad.csv").write_text("time,value\n2024-01-01 01:00,1\n2024-01-01 00:00,2\n")
    recipe = {"name": "bad", "data": {"source": "timeseries", "path": "bad.csv", "context": 2, "horizon": 1},
              "model": {"cell": "gru", "units": 4}, "head": {"type": "forecast"}}
    (tmp_path / "r.yaml").write_text(json.dumps(recipe))
    res = CliRunner().invoke(main, ["train", str(tmp_path / "r.yaml"), "--run-dir", str(tmp_path / "run")])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "bad.csv:3" in res.output and "comes before" in res.output
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------ a tiny model, every command
@pytest.fixture(scope="module")
def seasonal_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("forecast")
    _series_csv(d / "s.csv", n=360, ids=("a", "b"), seed=3, period=12, noise=0.6)
    recipe = {"name": "seasonal", "seed": 2,
              "data": {"source": "timeseries", "path": "s.csv", "id_column": "id", "target": "value",
                       "covariates": ["temp"], "calendar": ["hour"], "context": 24, "horizon": 6,
                       "valid_steps": 48, "test_steps": 60, "stride": 2, "eval_stride": 3},
              "model": {"cell": "gru", "units": 16, "layers": 1},
              "head": {"type": "forecast", "loss": "pinball", "quantiles": [0.1, 0.5, 0.9], "season": 12,
                       "ets": False},
              "training": {"epochs": 12, "batch_size": 32, "learning_rate": 0.01, "early_stopping": None}}
    (d / "r.yaml").write_text(json.dumps(recipe))
    run = str(d / "run")
    res = CliRunner().invoke(main, ["train", str(d / "r.yaml"), "--run-dir", run])
    assert res.exit_code == 0, res.output
    return d, run


def test_model_beats_seasonal_naive_on_a_noisy_seasonal_series(seasonal_run):
    d, run = seasonal_run
    res = CliRunner().invoke(main, ["evaluate", run, "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    snaive = got["baselines"]["seasonal_naive"]["test"]
    # sine + N(0, 0.6): seasonal naive's error has sd 0.6 * sqrt(2), a learned seasonal mean ~0.6
    assert got["mase"] < 0.9 * snaive["mase"], (got, snaive)
    assert got["mae"] < snaive["mae"]
    assert 0.6 <= got["coverage"] <= 0.95 and got["nominal"] == pytest.approx(0.8)
    assert set(got["baselines"]) == {"naive", "seasonal_naive", "drift"}  # ets: false


def test_predict_export_and_stream_give_the_same_forecasts(seasonal_run, tmp_path):
    import pandas as pd

    d, run = seasonal_run
    table = pd.read_csv(d / "s.csv")
    table[table.id == "a"].tail(24).to_csv(tmp_path / "recent.csv", index=False)  # one window
    r = CliRunner()
    res = r.invoke(main, ["predict", run, "--input", str(tmp_path / "recent.csv"), "--format", "jsonl"])
    assert res.exit_code == 0, res.output
    (pred,) = [json.loads(x) for x in res.stdout.splitlines()]
    assert pred["series"] == "a" and len(pred["forecast"]) == 6 and pred["times"][0] == "2024-01-16T00:00:00"
    q = pred["quantiles"]
    assert all(lo <= mid <= hi for lo, mid, hi in zip(q["0.1"], q["0.5"], q["0.9"]))  # never crossing
    assert q["0.5"] == pred["forecast"]

    out = tmp_path / "export"
    res = r.invoke(main, ["export", run, "--out", str(out)])
    assert res.exit_code == 0, res.output
    parity = json.loads((out / "parity.json").read_text())
    assert parity["tflite"]["max_abs_diff"] < 1e-4  # the step model streamed == Keras on windows
    tflite = out / "model.tflite"
    os.remove(out / "metadata.json")  # the lone file carries the scaling
    res = r.invoke(main, ["inspect", "--metadata", str(tflite)])
    assert res.exit_code == 0, res.output
    meta = json.loads(res.stdout[res.stdout.index("{"):])
    assert set(meta["forecast"]["scaling"]) == {"a", "b"} and meta["forecast"]["horizon"] == 6

    # 29 rows: the first 23 fill the step model's window, then one line per observation, each
    # the forecast of the window that ends there
    table[table.id == "a"].tail(29).to_csv(tmp_path / "recent29.csv", index=False)
    table[table.id == "a"].tail(29).head(24).to_csv(tmp_path / "first.csv", index=False)
    res = r.invoke(main, ["predict", run, "--input", str(tmp_path / "first.csv"), "--format", "jsonl"])
    first = json.loads(res.stdout)
    res = r.invoke(main, ["stream", str(tflite), "--input", str(tmp_path / "recent29.csv")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert len(lines) == 29 - 24 + 1
    assert lines[0].split("\t")[1] == first["origin"] and lines[-1].split("\t")[1] == pred["origin"]
    for line, want in [(lines[0], first), (lines[-1], pred)]:
        got = [float(v) for v in line.split("\t")[2].split()]
        np.testing.assert_allclose(got, want["forecast"], atol=2e-3)  # the whole-window forecast

    # stdin: each forecast is printed before the next row is read; interleaved series keep
    # their own state; a row that skips a step is refused with its line
    from seqkit.runtime.request import StreamRequest, stream_export

    a = (tmp_path / "recent29.csv").read_text().splitlines()
    b = table[table.id == "b"].tail(29).to_csv(index=False).splitlines()
    fed = []

    class Fed(StreamRequest):
        def lines(self):
            for line in self.text.splitlines():
                fed.append(line)
                yield line

    it = stream_export(str(tflite), Fed(text="\n".join(a)))
    assert next(it) == lines[0] + "\n" and len(fed) == 1 + 24  # the header and 24 rows, no more
    mixed = [a[0]] + [row for pair in zip(a[1:], b[1:]) for row in pair]
    out = "".join(stream_export(str(tflite), StreamRequest(text="\n".join(mixed)))).splitlines()
    assert [x for x in out if x.startswith("a\t")] == lines and len(out) == 2 * len(lines)
    gap = "\n".join(a[:10] + a[11:])
    res = r.invoke(main, ["stream", str(tflite), "--input", "-"], input=gap)
    assert res.exit_code != 0 and "<stdin>:11" in res.output and "missing time step" in res.output
    res = r.invoke(main, ["stream", str(tflite), "--input", "-"], input="\n".join(a[:3] + [a[3].rsplit(",", 1)[0] + ","]))
    assert res.exit_code != 0 and "<stdin>:4" in res.output and "not a finite number" in res.output

    res = r.invoke(main, ["export", run, "--out", str(tmp_path / "int8"), "--quantize", "int8"])
    assert res.exit_code == 0, res.output
    task = json.loads((tmp_path / "int8" / "parity.json").read_text())["tflite"]["task"]
    assert task["export"] < 1.15 * task["keras"], task  # held-out MAE of the int8 model


def test_prediction_input_too_short_or_unknown_series(seasonal_run, tmp_path):
    import pandas as pd

    d, run = seasonal_run
    table = pd.read_csv(d / "s.csv")
    table[table.id == "a"].tail(10).to_csv(tmp_path / "short.csv", index=False)
    res = CliRunner().invoke(main, ["predict", run, "--input", str(tmp_path / "short.csv")])
    assert res.exit_code != 0 and "10 rows" in res.output and "data.context = 24" in res.output
    t = table[table.id == "a"].tail(24).assign(id="zz")
    t.to_csv(tmp_path / "new.csv", index=False)
    res = CliRunner().invoke(main, ["predict", run, "--input", str(tmp_path / "new.csv")])
    assert res.exit_code != 0 and "'zz'" in res.output and "not in the training data" in res.output
    # the run's hourly steps: the same values stamped every 2 hours are refused, not forecast
    t = table[table.id == "a"].tail(24).copy()
    t["time"] = pd.date_range("2024-03-01", periods=24, freq="2h").strftime("%Y-%m-%d %H:%M")
    t.to_csv(tmp_path / "two_hourly.csv", index=False)
    res = CliRunner().invoke(main, ["predict", run, "--input", str(tmp_path / "two_hourly.csv")])
    assert res.exit_code == 2 and "two_hourly.csv:3: time 2024-03-01 02:00:00 of series 'a' is not one step (h)" in res.output


# ------------------------------------------------------------------ the shipped recipes
@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["forecast-monthly.yaml", "forecast-electricity.yaml"])
def test_shipped_recipe_beats_seasonal_naive(recipe, tmp_path):
    res = CliRunner().invoke(main, ["train", str(PLUGIN / "recipes" / recipe), "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    got = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert got["test"]["mase"] < got["baselines"]["seasonal_naive"]["test"]["mase"], got
