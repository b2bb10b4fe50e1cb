"""``head.smoothing.learn``: the smoothing parameters as weights of the model. Untrained they are
exactly the recipe's values; trained on forecasts of a known smoothing they move towards it (the
ones at 0 or 1 stay); a trained run's saved model, its step model and its export all forecast with
the learned values."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from forecast_checks import predict_export_stream_agree, train_two_series_run  # noqa: E402
from seqkit_forecast.window import Anchor, LearnedSmoothing, TargetInputs, WindowStepper, smooth_window, smoothed_forecast  # noqa: E402


def test_untrained_learned_smoothing_is_the_fixed_recursion():
    rng = np.random.default_rng(2)
    frames = rng.normal(size=(3, 30, 2)).astype(np.float32)
    p = (0.2, 0.0, 0.3, 1.0)
    layer = LearnedSmoothing(p)
    wide = np.asarray(layer(frames))
    assert wide.shape == (3, 30, 6)
    np.testing.assert_array_equal(wide[..., :2], frames)
    np.testing.assert_allclose(wide[..., 2:], np.broadcast_to(p, (3, 30, 4)), atol=1e-7)
    assert layer.free == [True, False, True, False]  # 0 and 1 are kept as given
    for start in ("first", "all"):
        got = np.asarray(Anchor("smoothed", 7, 1, 6, fitted=True, start=start)(wide, np.zeros((3, 7), np.float32)))
        np.testing.assert_allclose(got, smoothed_forecast(frames[..., 0], 7, 6, p, start), atol=1e-5)
        des = np.asarray(TargetInputs("deseasonalised", 6, fitted=True, start=start)(wide))
        lvl, _, s = smooth_window(frames[..., 0].astype(np.float64), 6, p, start=start)
        np.testing.assert_allclose(des[..., 0], frames[..., 0] - np.stack(s, 1) - lvl[:, None], atol=1e-5)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        LearnedSmoothing((0.2, 0.0, 1.3, 1.0))


def test_learned_smoothing_moves_towards_the_smoothing_that_made_the_targets():
    import keras

    # targets: the forecasts of level 0.7, season 0.05 over noisy seasonal windows; the model is
    # the anchor alone (a zero network output), started from level 0.2, season 0.3
    rng = np.random.default_rng(0)
    t = np.arange(36)
    y = (np.sin(2 * np.pi * t / 6)[None] + rng.normal(0, 0.4, (256, 36)).cumsum(1) * 0.3).astype(np.float32)
    truth, start = (0.7, 0.0, 0.05, 1.0), (0.2, 0.0, 0.3, 1.0)
    target = smoothed_forecast(y, 6, 6, truth).astype(np.float32)
    inp = keras.Input((36, 1))
    wide = LearnedSmoothing(start, name="smoothing")(inp)
    zero = keras.layers.Lambda(lambda f: 0.0 * f[:, 0, :1] + np.zeros((1, 6), np.float32))(inp)
    model = keras.Model(inp, Anchor("smoothed", 6, 1, 6, fitted=True)(wide, zero))
    model.compile(keras.optimizers.Adam(0.05), "mae")
    before = np.mean(np.abs(np.asarray(model(y[..., None])) - target))
    model.fit(y[..., None], target, batch_size=64, epochs=30, verbose=0)
    after = np.mean(np.abs(np.asarray(model(y[..., None])) - target))
    a, b, g, phi = model.get_layer("smoothing").values()
    assert after < 0.2 * before, (before, after)
    assert abs(a - 0.7) < 0.1 and abs(g - 0.05) < 0.1, (a, g)
    assert (b, phi) == (0.0, 1.0)  # not learned


@pytest.fixture(scope="module")
def learned_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("learned")
    run = train_two_series_run(
        d, "learned", {"level": 0.2, "trend": 0.0, "season": 0.3, "damping": 1.0, "start": "all", "learn": True},
        16, 0.01)
    return d, run


@pytest.mark.slow  # about 2 minutes on 2 cores (training, predict, export, stream); -m slow runs it
def test_a_learned_run_forecasts_with_its_learned_parameters_saved_streamed_and_exported(learned_run, tmp_path):
    from seqkit.training.train import load_run

    d, run = learned_run
    assert "learn: true" in (Path(run) / "recipe.yaml").read_text()  # the resolved recipe reads back
    prep, model = load_run(run, with_data=True)
    p = model.get_layer("smoothing").values()
    assert p[1] == 0.0 and p[3] == 1.0 and (abs(p[0] - 0.2) > 1e-3 or abs(p[2] - 0.3) > 1e-3), p  # trained
    assert prep.head.width == 1 + 2  # the parameters are weights, not frame columns
    # the saved model's anchor is the numpy recursion with the learned values
    x, _ = prep.head.arrays(prep.splits["test"][:3])
    ref = np.asarray(model.get_layer("anchor")(model.get_layer("smoothing")(x), np.zeros((3, 6), np.float32)))
    np.testing.assert_allclose(ref, smoothed_forecast(x[..., 0], 6, 12, tuple(p), "all"), atol=1e-4)
    # the step model streams what the model answers
    st, states = WindowStepper(model, 24, 3), None
    states = st.initial_state(3)
    for k in range(24):
        logits, states = st.step(x[:, k], states)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(model(x)), atol=1e-5)
    # the export: parity, and the lone .tflite streams what predict answers
    predict_export_stream_agree(run, d / "s.csv", tmp_path)


def test_learn_recipe_key_checks():
    from seqkit.errors import RecipeError
    from seqkit.recipe import Recipe

    recipe = {"name": "r", "data": {"source": "timeseries", "path": "x.csv", "context": 24, "horizon": 6},
              "model": {"cell": "gru", "units": 4},
              "head": {"type": "forecast", "season": 12, "anchor": "seasonal", "smoothing": {"learn": True}}}
    with pytest.raises(RecipeError, match="head.smoothing.learn learns the parameters"):
        Recipe.from_dict(recipe)
    recipe["head"].update(anchor="smoothed", smoothing={"fitted": True, "learn": True})
    with pytest.raises(RecipeError, match="give one of them"):
        Recipe.from_dict(recipe)
