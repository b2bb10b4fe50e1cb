"""bench's forecast suite: the windows darts and GluonTS are handed end exactly at the test origins,
and their training series stop at the end of the training period (no PyTorch needed here)."""

import os

import numpy as np
import pandas as pd
import pytest

from bench.forecast_external import darts_arrays, darts_epochs, gluonts_entries, gluonts_freq
from bench.forecast_windows import RECIPES, gradient_steps, load_problem

RECIPE = """name: tiny-forecast
seed: 3
data:
  source: timeseries
  path: tiny.csv
  time_column: time
  id_column: sid
  target: y
  calendar: [hour]
  context: 4
  horizon: 2
  valid_steps: 4
  test_steps: 6
  eval_stride: 2
model:
  cell: lstm
  units: 8
head:
  type: forecast
  season: 3
training:
  epochs: 3
  batch_size: 8
"""


def series_values(n):
    t = np.arange(n)
    return 2.0 * t + t % 3  # y_t - y_{t-3} = 6 everywhere: seasonal naive scale 6 (m = 3)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("fc")
    rows = []
    for sid, n in (("a", 40), ("b", 30)):
        times = pd.date_range("2024-01-01", periods=n, freq="h")
        rows += [f"{t.isoformat(sep=' ')},{sid},{v:g}" for t, v in zip(times, series_values(n))]
    (root / "tiny.csv").write_text("time,sid,y\n" + "\n".join(rows) + "\n")
    (root / "tiny.yaml").write_text(RECIPE)
    return load_problem(str(root / "tiny.yaml"))


def test_periods_windows_and_scales_by_hand(tiny):
    a, b = tiny.series["a"], tiny.series["b"]
    # a: 40 steps = 30 train + 4 valid + 6 test; b: 30 = 20 + 4 + 6
    assert (a.train_end, a.valid_end, b.train_end, b.valid_end) == (30, 34, 20, 24)
    # test origins every 2 steps from the validation end while origin + 2 <= n
    assert [(w.sid, w.origin) for w in tiny.windows] == [("a", 34), ("a", 36), ("a", 38),
                                                          ("b", 24), ("b", 26), ("b", 28)]
    assert tiny.windows[2].target.tolist() == [2 * 38 + 38 % 3, 2 * 39 + 39 % 3]  # [78, 78]
    assert tiny.scales().tolist() == [6.0] * 6
    assert a.mean == pytest.approx(30.0)  # mean(2t, t < 30) = 29, mean(t % 3) = 1
    assert tiny.seed == 3 and tiny.freq == "h"
    # training windows: a: origins 4..28 (25), b: 4..18 (15); 3 epochs of ceil(40 / 8) batches
    assert tiny.train_windows == 40 and gradient_steps(tiny) == 15
    assert darts_epochs(tiny, 15) == (3, 40)  # stride-1 windows: 25 + 15, 5 batches an epoch


def test_darts_inputs_end_at_origins_and_training_stops_at_train_end(tiny):
    train, wins = darts_arrays(tiny)
    for (times, v, cal), s in zip(train, tiny.series.values()):
        assert len(v) == s.train_end and times[-1] == s.times[s.train_end - 1]
        assert times[-1] < s.times[s.train_end]  # the validation period's first step is left out
        np.testing.assert_allclose(v * s.std + s.mean, s.y[:s.train_end], atol=1e-4)
        assert cal.shape == (s.train_end, 2)
    for (times, v, cal), w in zip(wins, tiny.windows):
        s = tiny.series[w.sid]
        assert len(v) == tiny.context == len(times)
        assert times[-1] == s.times[w.origin - 1]
        assert times[-1] + np.timedelta64(1, "h") == s.times[w.origin]  # the first target's time
        np.testing.assert_allclose(v * s.std + s.mean, s.y[w.origin - 4:w.origin], atol=1e-4)
        np.testing.assert_allclose(cal, s.calendar[w.origin - 4:w.origin])
        hour = pd.DatetimeIndex(times).hour.to_numpy()
        np.testing.assert_allclose(cal[:, 0], np.sin(2 * np.pi * hour / 24), atol=1e-6)


def test_gluonts_entries_stop_at_train_end_and_origins(tiny):
    train, test = gluonts_entries(tiny, "h")
    assert [len(e["target"]) for e in train] == [30, 20]
    np.testing.assert_array_equal(train[0]["target"], series_values(40)[:30])
    assert train[0]["start"] == pd.Period("2024-01-01 00:00", "h")
    assert [len(e["target"]) for e in test] == [w.origin for w in tiny.windows]
    for e, w in zip(test, tiny.windows):
        assert e["item_id"] == w.sid and e["target"][-1] == series_values(40 if w.sid == "a" else 30)[w.origin - 1]


def test_gluonts_period_frequencies():
    assert [gluonts_freq(f) for f in ("MS", "QS-JAN", "YS-JAN", "30min", "h", "W-SUN")] == \
        ["M", "Q", "Y", "30min", "h", "W-SUN"]


def test_shipped_recipes_windows_and_budgets():
    el = load_problem(RECIPES["forecast-electricity"])
    # 4032 half-hours: 2688 train, 672 valid, 672 test; origins 3360, 3372, ..., 3984 (eval_stride 12)
    s = el.series["series"]
    assert (s.train_end, s.valid_end, len(s.y)) == (2688, 3360, 4032)
    assert [w.origin for w in el.windows] == list(range(3360, 3985, 12))
    # seqkit: origins 96, 98, ..., 2640 -> 1273 windows, 20 batches of 64, 20 epochs = 400 steps;
    # darts: every origin 96..2640 -> 2545 windows, 40 batches: 10 epochs
    assert (el.train_windows, gradient_steps(el)) == (1273, 400)
    assert darts_epochs(el, 400) == (10, 2545)
    mo = load_problem(RECIPES["forecast-monthly"])
    assert len(mo.windows) == 65 and len(mo.series) == 5 and mo.freq == "MS"
    assert {sid: (w.origin, len(mo.series[sid].y)) for sid, w in
            ((w.sid, w) for w in mo.windows if w.origin == mo.series[w.sid].valid_end)} == {
        "air_passengers": (120, 144), "aus_wine_sales": (152, 176), "mauna_loa_co2": (502, 526),
        "elnino_sst": (708, 732), "uk_road_ksi": (168, 192)}
    assert os.path.isfile(mo.recipe_path)
