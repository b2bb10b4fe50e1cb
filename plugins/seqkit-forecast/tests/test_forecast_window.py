"""The forecast head's window layers worked by hand: the target inputs (level, differences,
relative), the anchors (naive, seasonal naive, checked against the baselines module; exponential
smoothing over the window, worked step by step), the log
transform and the seasonal-MAE scale, and the window step model streaming what the model answers."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from seqkit.errors import DataError  # noqa: E402
from seqkit_forecast import baselines as B  # noqa: E402
from seqkit_forecast import metrics as M  # noqa: E402
from seqkit_forecast.head import Scaler  # noqa: E402
from seqkit_forecast.window import Anchor, TargetInputs, WindowStepper, anchor_forecast, smoothed_forecast  # noqa: E402

# one window [B=1, T=5, D=2]: target 1, 3, 6, 10, 15 and a covariate
FRAMES = np.asarray([[[1, 0.5], [3, 0.4], [6, 0.3], [10, 0.2], [15, 0.1]]], np.float32)


def test_target_inputs_by_hand():
    lvl = np.asarray(TargetInputs("level")(FRAMES))
    np.testing.assert_array_equal(lvl, FRAMES)
    dif = np.asarray(TargetInputs("difference")(FRAMES))
    np.testing.assert_array_equal(dif[0, :, 0], [0, 2, 3, 4, 5])  # y_t - y_{t-1}, 0 first
    rel = np.asarray(TargetInputs("relative")(FRAMES))
    np.testing.assert_array_equal(rel[0, :, 0], [-14, -12, -9, -5, 0])  # y_t - y_{T-1}
    # deseasonalised (m = 2, alpha = gamma = 0.5, no trend; the smoothing worked in
    # test_smoothed_anchor_by_hand): seasons 0.5, -0.5, 1.5, 2.5, 4.5, final level 10.5, so
    # y_t - s_t - 10.5 = 1 - 0.5 - 10.5, 3 + 0.5 - 10.5, 6 - 1.5 - 10.5, 10 - 2.5 - 10.5, 15 - 4.5 - 10.5
    des = np.asarray(TargetInputs("deseasonalised", 2, (0.5, 0.0, 0.5, 0.0))(FRAMES))
    np.testing.assert_allclose(des[0, :, 0], [-10, -7, -6, -3, 0], atol=1e-6)
    for x in (dif, rel, des):
        np.testing.assert_array_equal(x[..., 1], FRAMES[..., 1])  # covariates pass through
    with pytest.raises(ValueError, match="level, difference, relative, deseasonalised"):
        TargetInputs("ratio")


def test_anchors_by_hand_and_equal_to_the_baselines():
    y = FRAMES[..., 0]
    np.testing.assert_array_equal(anchor_forecast(y, "last", 3, 2), [[15, 15, 15]])
    # m = 2: steps 1..5 take y_{T-2}, y_{T-1}, then again: 10, 15, 10, 15, 10
    np.testing.assert_array_equal(anchor_forecast(y, "seasonal", 5, 2), [[10, 15, 10, 15, 10]])
    for H, m in [(5, 2), (3, 3), (7, 4)]:
        np.testing.assert_allclose(anchor_forecast(y, "seasonal", H, m)[0], B.seasonal_naive(y[0], H, m))
        np.testing.assert_allclose(anchor_forecast(y, "last", H, m)[0], B.naive(y[0], H))
    # the layer adds the reference to each of Q = 2 levels of each step (row h * Q + q)
    logits = np.arange(10, dtype=np.float32).reshape(1, 10) / 10
    got = np.asarray(Anchor("seasonal", horizon=5, levels=2, season=2)(FRAMES, logits))
    want = logits + np.repeat(anchor_forecast(y, "seasonal", 5, 2), 2, axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(Anchor("none", 5, 2, 2)(FRAMES, logits)), logits)


def test_smoothed_anchor_by_hand():
    y = FRAMES[..., 0].astype(np.float64)  # 1, 3, 6, 10, 15; m = 2
    # start: first season mean 2, second 8 -> trend b = 3, level 2 + 3 / 2 = 3.5, season 0.5, -0.5
    # no trend (phi 0), alpha = gamma = 0.5:
    #   t=2: e = 6 - 3.5 - 0.5 = 2   -> level 4.5,  s_2 = 0.5 + 1 = 1.5
    #   t=3: e = 10 - 4.5 + 0.5 = 6  -> level 7.5,  s_3 = -0.5 + 3 = 2.5
    #   t=4: e = 15 - 7.5 - 1.5 = 6  -> level 10.5, s_4 = 1.5 + 3 = 4.5
    #   forecasts: 10.5 + s_3, 10.5 + s_4, 10.5 + s_3
    np.testing.assert_allclose(smoothed_forecast(y, 3, 2, (0.5, 0.0, 0.5, 0.0)), [[13, 15, 13]])
    # trend, phi = 1, alpha = beta = gamma = 0.5:
    #   t=2: e = 6 - 3.5 - 3 - 0.5 = -1   -> level 6,    b 2.5, s_2 = 0
    #   t=3: e = 10 - 6 - 2.5 + 0.5 = 2   -> level 9.5,  b 3.5, s_3 = 0.5
    #   t=4: e = 15 - 9.5 - 3.5 - 0 = 2   -> level 14,   b 4.5, s_4 = 1
    #   forecasts: 14 + 4.5 + 0.5, 14 + 9 + 1, 14 + 13.5 + 0.5
    np.testing.assert_allclose(smoothed_forecast(y, 3, 2, (0.5, 0.5, 0.5, 1.0)), [[19, 24, 28]])
    np.testing.assert_allclose(anchor_forecast(y, "smoothed", 3, 2, (0.5, 0.5, 0.5, 1.0)), [[19, 24, 28]])
    # a line plus a season that sums to 0 is continued exactly, whatever alpha, beta, gamma
    t = np.arange(40)
    season = np.asarray([1.0, -1.0, 0.5, -0.5])
    line = (2 + 0.5 * t + season[t % 4])[None]
    for p in [(0.1, 0.0, 0.9, 1.0), (1.0, 1.0, 0.0, 1.0), (0.3, 0.2, 0.3, 1.0)]:
        np.testing.assert_allclose(smoothed_forecast(line[:, :32], 8, 4, p)[0], line[0, 32:], atol=1e-9)


def test_smoothed_anchor_layer_is_the_numpy_recursion():
    rng = np.random.default_rng(1)
    frames = rng.normal(size=(4, 30, 3)).astype(np.float32)
    logits = rng.normal(size=(4, 7 * 2)).astype(np.float32)
    for p in [(0.3, 0.0, 0.3, 0.98), (0.8, 0.1, 0.05, 0.9), (1.0, 0.0, 0.0, 0.0)]:
        got = np.asarray(Anchor("smoothed", horizon=7, levels=2, season=6, smoothing=p)(frames, logits))
        want = logits + np.repeat(smoothed_forecast(frames[..., 0], 7, 6, p), 2, axis=1)
        np.testing.assert_allclose(got, want, atol=1e-5)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        Anchor("smoothed", 7, 1, 6, smoothing=(0.3, 0.0, 1.5, 0.9))
    with pytest.raises(ValueError, match="at least 2 seasons"):
        Anchor("smoothed", 7, 1, 16)(frames, logits[:, :7])


def test_smoothed_anchor_needs_two_seasons_of_context():
    from seqkit.errors import RecipeError
    from seqkit.recipe import Recipe
    from seqkit_forecast.head import ForecastHead

    recipe = {"name": "r", "data": {"source": "timeseries", "path": "x.csv", "context": 20, "horizon": 6},
              "model": {"cell": "gru", "units": 4}, "head": {"type": "forecast", "season": 12, "anchor": "smoothed"}}
    with pytest.raises(RecipeError) as e:
        ForecastHead(Recipe.from_dict(recipe))
    assert "head.anchor" in str(e.value) and "data.context (20)" in str(e.value) and "24" in str(e.value)
    recipe["head"].update(anchor="seasonal", inputs="deseasonalised")
    with pytest.raises(RecipeError, match=r"head.inputs: deseasonalised .* data.context \(20\)"):
        ForecastHead(Recipe.from_dict(recipe))
    recipe["head"].update(anchor="smoothed", inputs="difference")
    recipe["data"]["context"] = 24
    head = ForecastHead(Recipe.from_dict(recipe))
    assert head.options.smoothing.values() == (0.3, 0.0, 0.3, 0.98)
    recipe["head"]["smoothing"] = {"level": 0.5, "season": 1.2}
    with pytest.raises(RecipeError, match="head.smoothing.season"):
        Recipe.from_dict(recipe)


def test_log_transform_and_seasonal_mae_scale():
    class Window:  # what Scaler.fit reads of a training record
        def __init__(self, values, start):
            self.label = "s"
            self.frames = np.asarray(values[:4], np.float32)[:, None]
            self.target = list(values[4:])
            self.times = np.arange(start, start + len(values))

    from types import SimpleNamespace

    data = SimpleNamespace(context=4, covariates=[], calendar=[])
    series = [1.0, 2.0, 4.0, 8.0, 2.0, 4.0, 8.0, 16.0]  # log2 steps; season 4
    sc = Scaler.fit([Window(series[:6], 0), Window(series[2:], 2)], data, season=4, transform="log",
                    scale="seasonal_mae")
    logs = np.log(series)
    assert sc.stats["s"]["mean"][0] == pytest.approx(logs.mean())
    # the target's scale: the in-sample seasonal naive MAE of the logs, |log 2 - log 1| ... = log 2
    assert sc.stats["s"]["std"][0] == pytest.approx(M.seasonal_scale(logs, 4)) == pytest.approx(np.log(2))
    assert sc.mase_scale["s"] == pytest.approx(M.seasonal_scale(series, 4))  # MASE stays in units
    z = sc.target([4.0, 8.0], "s", "here")
    np.testing.assert_allclose(z, (np.log([4.0, 8.0]) - logs.mean()) / np.log(2), atol=1e-6)  # 0 and 1
    np.testing.assert_allclose(sc.unscale(z, "s", "here"), [4.0, 8.0], rtol=1e-6)  # round trip
    with pytest.raises(DataError, match=r"series 's'.*> 0.*head.transform: none"):
        Scaler.fit([Window([1.0, 0.0, 2.0, 3.0, 4.0], 0)], data, season=4, transform="log")


def test_window_stepper_streams_what_the_model_answers():
    import keras

    C, D, H = 5, 2, 3
    for kind, inputs in (("seasonal", "difference"), ("smoothed", "deseasonalised")):
        inp = keras.Input((C, D))
        x = TargetInputs(inputs, 2, (0.4, 0.1, 0.3, 0.9))(inp)
        x = keras.layers.LSTM(4, name="lstm")(x)
        out = Anchor(kind, H, 1, 2, (0.4, 0.1, 0.3, 0.9))(inp, keras.layers.Dense(H)(x))
        model = keras.Model(inp, out)
        st = WindowStepper(model, C, D)
        assert st.state_names() == ["window"] and st.state_sizes() == [C * D]
        rng = np.random.default_rng(0)
        series = rng.normal(size=(2, 9, D)).astype(np.float32)
        states = st.initial_state(2)
        for t in range(series.shape[1]):
            logits, states = st.step(series[:, t], states)
            if t + 1 >= C:  # a full window ends at t: the step answers the model on it
                want = np.asarray(model(series[:, t + 1 - C:t + 1]))
                np.testing.assert_allclose(np.asarray(logits), want, atol=1e-5, err_msg=kind)


def test_future_calendar_is_the_calendar_of_the_steps_ahead():
    import pandas as pd

    from seqkit_forecast.source import calendar_features
    from seqkit_forecast.window import FutureCalendar, calendar_advance

    for freq, cal in [("30min", ["hour", "day_of_week"]), ("MS", ["month"]), ("h", ["hour"])]:
        times = pd.date_range("2024-03-01", periods=10 + 6, freq=freq)
        feats = calendar_features(times, cal)  # [16, 2K]: the true features, window and beyond
        frames = np.concatenate([np.ones((10, 1), np.float32), feats[:10]], axis=1)[None]
        got = np.asarray(FutureCalendar(1, calendar_advance(freq, cal), 6)(frames)).reshape(6, -1)
        np.testing.assert_allclose(got, feats[10:], atol=1e-5, err_msg=freq)
    assert calendar_advance("30min", ["hour", "day_of_week"]) == [pytest.approx(1 / 48), pytest.approx(1 / 336)]
    assert calendar_advance("MS", ["month", "hour"]) == [pytest.approx(1 / 12), 0.0]
    assert calendar_advance(None, ["month"]) is None


def test_an_exports_forecast_metadata_is_checked_before_use():
    from seqkit.errors import SeqkitError
    from seqkit_forecast.metadata import read_forecast_metadata

    good = {"context": 4, "horizon": 2, "quantiles": [0.1, 0.5, 0.9], "point_level": 1, "time_column": "t",
            "id_column": None, "target": "y", "covariates": [], "calendar": ["month"],
            "scaling": {"a": {"mean": [1.0, 0.0, 0.0], "std": [2.0, 1.0, 1.0]}}, "frequency": "MS",
            "transform": "log"}
    fc = read_forecast_metadata({"forecast": good}, "m.tflite")
    assert fc.horizon == 2 and fc.scaling["a"].std == [2.0, 1.0, 1.0] and fc.transform == "log"
    bad = [({}, "no 'forecast' entry"),
           ({**good, "horizon": "2"}, "forecast.horizon"),  # a string, not a JSON integer
           ({**good, "context": True}, "forecast.context"),
           ({**good, "point_level": 3}, "point_level 3 with 3 level"),
           ({**good, "scaling": {"a": {"mean": [1.0, 0, 0], "std": [0.0, 1.0, 1.0]}}}, "forecast.scaling.a.std.0"),
           ({**good, "scaling": {"a": {"mean": [float("nan"), 0, 0], "std": [1.0] * 3}}}, "forecast.scaling.a.mean.0"),
           ({**good, "scaling": {"a": {"mean": [1e39, 0, 0], "std": [1.0] * 3}}}, "forecast.scaling.a.mean.0"),
           ({**good, "frequency": "fortnightly-ish"}, "not a pandas frequency"),
           ({**good, "scaling": {"a": {"mean": [1.0], "std": [1.0]}}}, "1 scaled columns"),
           ({**good, "calendar": ["weekday"]}, "forecast.calendar.0"),
           ({**good, "transform": "exp"}, "forecast.transform")]
    for meta, says in bad:
        with pytest.raises(SeqkitError) as e:
            read_forecast_metadata({"forecast": meta} if meta else {}, "m.tflite")
        assert "m.tflite" in str(e.value) and says in str(e.value), (says, str(e.value))


def test_the_head_module_alone_registers_every_layer_a_saved_model_names():
    # a saved forecast run is loaded in a fresh process that imports the head through its entry
    # point only; every custom object the model names must be registered by then
    import subprocess
    import sys

    names = ["QuantileOutput", "ForecastLoss", "TargetInputs", "Anchor", "FutureCalendar"]
    # (importing the plugin's source first, with Keras loaded, must not meet a half-imported module)
    code = ("import keras, seqkit_forecast.source, seqkit_forecast.head\n"
            "from seqkit.registry import HEADS\n"
            "assert HEADS.get('forecast').__name__ == 'ForecastHead'\n"
            f"missing = [n for n in {names!r} if keras.saving.get_registered_object('seqkit_forecast>' + n) is None]\n"
            "print(missing)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_an_export_more_than_ten_percent_worse_than_keras_is_refused():
    from seqkit_forecast.head import ForecastHead

    gate = ForecastHead.export_gate
    head = ForecastHead.__new__(ForecastHead)  # the gate reads only the class's margin
    assert gate(head, {"metric": "mae_scaled", "keras": 0.5, "export": 0.549, "scored": 9}, "int8") is None
    why = gate(head, {"metric": "mae_scaled", "keras": 0.6715, "export": 1.902, "scored": 9}, "int8")
    assert "1.902" in why and "0.6715" in why and "10%" in why and "dynamic-range" in why
    assert gate(head, None, "int8") is None  # no targets: nothing to gate on


def test_balanced_series_weights_by_hand():
    from seqkit_forecast.head import series_weights

    # 4 windows of a, 1 of b: N = 5, S = 2 -> a: 5 / 8 each (total 2.5), b: 5 / 2 (total 2.5)
    w = series_weights(["a", "a", "b", "a", "a"])
    np.testing.assert_allclose(w, [0.625, 0.625, 2.5, 0.625, 0.625])
    assert w.mean() == pytest.approx(1.0)
