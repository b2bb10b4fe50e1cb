"""``head.smoothing.start: all``: the window's initial seasonal terms averaged over all its whole
seasons (the classical decomposition's seasonal indices), worked by hand; the Keras layers equal
the numpy recursion, the step model streams what the model answers, a saved model keeps the
start, and the recipe key reads, dumps and reloads."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from seqkit_forecast.window import Anchor, TargetInputs, WindowStepper, smooth_window, smoothed_forecast  # noqa: E402

# one window, m = 2, T = 6 (K = 3 whole seasons)
Y = np.asarray([[1.0, 3.0, 4.0, 5.0, 5.0, 7.0]])


def test_all_seasons_start_by_hand():
    # season means M = 2, 4.5, 6 at t = 0.5, 2.5, 4.5; least-squares slope over k = -1, 0, 1:
    # (6 - 2) / 2 per season = 1 per step; the line 4.1667 + (t - 2.5): 1.6667, 2.6667, 3.6667,
    # 4.6667, 5.6667, 6.6667; y less it: -2/3, 1/3, 1/3, 1/3, -2/3, 1/3 -> s_0 = mean(-2/3, 1/3,
    # -2/3) = -1/3, s_1 = mean(1/3, 1/3, 1/3) = 1/3 (they sum to 0).
    # Level and trend still from the first two seasons: b = (4.5 - 2) / 2 = 1.25, l = 2 + 1.25 / 2.
    # (first: s_0 = 1 - (2.625 - 1.25) = -0.375, s_1 = 3 - 2.625 = 0.375.)
    lvl, b, s = smooth_window(Y, 2, (0.0, 0.0, 0.0, 1.0), start="all")
    np.testing.assert_allclose([s[0][0], s[1][0]], [-1 / 3, 1 / 3])
    _, _, s_first = smooth_window(Y, 2, (0.0, 0.0, 0.0, 1.0))
    np.testing.assert_allclose([s_first[0][0], s_first[1][0]], [-0.375, 0.375])
    # alpha = beta = gamma = 0, phi = 1: nothing updates; the level climbs b a step over
    # t = 2..5: 2.625 + 4 * 1.25 = 7.625; forecasts 7.625 + h 1.25 + s: 8.5417, 10.4583, 11.0417
    assert lvl[0] == pytest.approx(7.625) and b[0] == pytest.approx(1.25)
    np.testing.assert_allclose(smoothed_forecast(Y, 3, 2, (0.0, 0.0, 0.0, 1.0), "all")[0],
                               [7.625 + 1.25 - 1 / 3, 7.625 + 2.5 + 1 / 3, 7.625 + 3.75 - 1 / 3])
    # alpha = gamma = 0.5, phi = 0 (no trend), from l = 2.625, s = -1/3, 1/3:
    # t=2: e = 4 - 2.625 + 1/3 = 1.708333, l = 3.479167, s_2 = -1/3 + 0.854167 = 0.520833
    # t=3: e = 5 - 3.479167 - 1/3 = 1.1875, l = 4.072917, s_3 = 1/3 + 0.59375 = 0.927083
    # t=4: e = 5 - 4.072917 - 0.520833 = 0.40625, l = 4.276042, s_4 = 0.723958
    # t=5: e = 7 - 4.276042 - 0.927083 = 1.796875, l = 5.174479, s_5 = 1.825521
    # forecasts l + s_4, l + s_5, l + s_4
    np.testing.assert_allclose(smoothed_forecast(Y, 3, 2, (0.5, 0.0, 0.5, 0.0), "all")[0],
                               [5.898438, 7.0, 5.898438], atol=1e-6)
    with pytest.raises(ValueError, match="first, all"):
        smooth_window(Y, 2, start="last")


def test_all_seasons_start_continues_a_line_plus_season_and_ignores_a_partial_season():
    # a line plus a zero-sum season: every start recovers it exactly, so the forecast continues it;
    # T = 26 with m = 4 holds 6 whole seasons and two steps more
    t = np.arange(34.0)
    y = (0.5 * t + np.tile([2.0, -1.0, 0.5, -1.5], 9)[:34])[None]
    for p in [(0.3, 0.0, 0.3, 1.0), (0.7, 0.2, 0.1, 1.0)]:
        np.testing.assert_allclose(smoothed_forecast(y[:, :26], 8, 4, p, "all")[0], y[0, 26:], atol=1e-9)
    # noise: the first 6 seasons alone set the start (the two steps after them only run the recursion)
    rng = np.random.default_rng(3)
    z = rng.normal(size=(2, 26))
    _, _, s = smooth_window(z, 4, (0.0, 0.0, 0.0, 1.0), start="all")
    _, _, s24 = smooth_window(z[:, :24], 4, (0.0, 0.0, 0.0, 1.0), start="all")
    np.testing.assert_allclose(np.stack(s[:4]), np.stack(s24[:4]))
    np.testing.assert_allclose(np.sum(s[:4], axis=0), 0.0, atol=1e-12)


def test_all_seasons_start_keras_layers_are_the_numpy_recursion():
    rng = np.random.default_rng(1)
    frames = rng.normal(size=(4, 33, 3)).astype(np.float32)  # m = 6: 5 whole seasons + 3 steps
    logits = rng.normal(size=(4, 7 * 2)).astype(np.float32)
    for p in [(0.2, 0.0, 0.3, 1.0), (0.8, 0.1, 0.05, 0.9)]:
        got = np.asarray(Anchor("smoothed", 7, 2, 6, p, start="all")(frames, logits))
        want = logits + np.repeat(smoothed_forecast(frames[..., 0], 7, 6, p, "all"), 2, axis=1)
        np.testing.assert_allclose(got, want, atol=1e-5)
        des = np.asarray(TargetInputs("deseasonalised", 6, p, start="all")(frames))
        lvl, _, s = smooth_window(frames[..., 0].astype(np.float64), 6, p, start="all")
        np.testing.assert_allclose(des[..., 0], frames[..., 0] - np.stack(s, 1) - lvl[:, None], atol=1e-5)
        np.testing.assert_array_equal(des[..., 1:], frames[..., 1:])
    with pytest.raises(ValueError, match="first, all"):
        Anchor("smoothed", 7, 1, 6, start="mean")
    with pytest.raises(ValueError, match="first, all"):
        TargetInputs("deseasonalised", 6, start="mean")


def test_all_seasons_start_streams_and_survives_save_and_load(tmp_path):
    import keras

    C, D, H, p = 7, 2, 3, (0.4, 0.1, 0.3, 0.9)
    inp = keras.Input((C, D))
    x = TargetInputs("deseasonalised", 2, p, start="all")(inp)
    x = keras.layers.LSTM(4)(x)
    model = keras.Model(inp, Anchor("smoothed", H, 1, 2, p, start="all")(inp, keras.layers.Dense(H)(x)))
    rng = np.random.default_rng(0)
    series = rng.normal(size=(2, 11, D)).astype(np.float32)
    st, states = WindowStepper(model, C, D), None
    states = st.initial_state(2)
    for t in range(series.shape[1]):
        logits, states = st.step(series[:, t], states)
        if t + 1 >= C:
            np.testing.assert_allclose(np.asarray(logits), np.asarray(model(series[:, t + 1 - C:t + 1])), atol=1e-5)
    # the start is part of the layers' config: a reloaded model forecasts the same, and differs
    # from the same weights started from the first season
    path = tmp_path / "m.keras"
    model.save(path)
    back = keras.models.load_model(path)
    assert back.layers[1].start == "all"
    np.testing.assert_allclose(np.asarray(back(series[:, :C])), np.asarray(model(series[:, :C])), atol=1e-6)
    first = keras.Model.from_config(
        {**model.get_config(), "layers": [
            {**L, "config": {**L["config"], "start": "first"}} if "start" in L["config"] else L
            for L in model.get_config()["layers"]]},
        custom_objects={"TargetInputs": TargetInputs, "Anchor": Anchor})
    first.set_weights(model.get_weights())
    assert np.abs(np.asarray(first(series[:, :C])) - np.asarray(model(series[:, :C]))).max() > 1e-3


def test_start_recipe_key_reads_dumps_and_reloads():
    from seqkit.errors import RecipeError
    from seqkit.recipe import Recipe
    from seqkit_forecast.head import ForecastHead, SmoothingOptions

    recipe = {"name": "r", "data": {"source": "timeseries", "path": "x.csv", "context": 24, "horizon": 6},
              "model": {"cell": "gru", "units": 4},
              "head": {"type": "forecast", "season": 12, "anchor": "smoothed",
                       "smoothing": {"level": 0.2, "start": "all"}}}
    head = ForecastHead(Recipe.from_dict(recipe))
    assert head.options.smoothing.start == "all" and head.options.smoothing.values() == (0.2, 0.0, 0.3, 0.98)
    assert SmoothingOptions().start == "first"
    for given in ({"level": 0.2, "start": "all"}, {"fitted": True, "start": "all"}, "fitted"):
        o = SmoothingOptions.model_validate(given)
        assert SmoothingOptions.model_validate(o.model_dump()) == o, given  # a run's recipe.yaml reloads
    assert SmoothingOptions.model_validate({"fitted": True, "start": "all"}).model_dump() == {"fitted": True, "start": "all"}
    recipe["head"]["smoothing"] = {"start": "middle"}
    with pytest.raises(RecipeError, match="head.smoothing.start"):
        Recipe.from_dict(recipe)
