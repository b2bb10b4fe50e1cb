"""``head.smoothing: fitted``: each series' smoothing parameters fitted as ETS(A,Ad,A) on its own
training period. The anchor's recursion is statsmodels' ETS with the same parameters; the fitted
values are what statsmodels fits on the series directly; the anchor and the deseasonalised inputs
use each series' own; a run keeps them (a damaged or missing value refused, naming the file and
key); the step model and the export's stream answer what the Keras model does."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from click.testing import CliRunner  # noqa: E402

from seqkit.cli import main  # noqa: E402
from seqkit.errors import RunDirError  # noqa: E402
from seqkit_forecast import metrics as M  # noqa: E402
from seqkit_forecast.baselines import fit_smoothing  # noqa: E402
from seqkit_forecast.head import Scaler  # noqa: E402
from forecast_checks import predict_export_stream_agree, seasonal, train_two_series_run  # noqa: E402
from seqkit_forecast.window import Anchor, TargetInputs, WindowStepper, smooth_window, smoothed_forecast  # noqa: E402


def _ets(z, m, **kw):
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    return ETSModel(np.asarray(z, float), error="add", trend="add", damped_trend=True, seasonal="add",
                    seasonal_periods=m, **kw)


def test_the_window_recursion_is_statsmodels_ets_with_the_same_parameters():
    # ETSModel started (initialization "known") from the state the window's first two seasons
    # give, fed the rest of the window with the parameters fixed, forecasts what the anchor does:
    # the fitted values mean the same thing in both
    m, H = 4, 7
    y = seasonal(40, m, 0.3, 2.0, 0.5, seed=0)
    first, second = y[:m].mean(), y[m:2 * m].mean()
    b = (second - first) / m
    level = first + b * (m - 1) / 2
    seasons = [y[j] - (level - (m - 1 - j) * b) for j in range(m)]
    for p in [(0.4, 0.1, 0.2, 0.9), (0.9, 0.0, 0.05, 0.8), (0.1, 0.05, 0.5, 0.98)]:
        mod = _ets(y[m:], m, initialization_method="known", initial_level=level, initial_trend=b,
                   initial_seasonal=seasons)
        with warnings.catch_warnings(), mod.fix_params(dict(zip(mod.param_names, p))):
            warnings.simplefilter("ignore")
            want = mod.fit(disp=False).forecast(H)
        np.testing.assert_allclose(smoothed_forecast(y[None], H, m, p)[0], want, atol=1e-9, err_msg=str(p))


class _Window:  # what Scaler.fit reads of a training record
    def __init__(self, sid, values, start, context):
        self.label = sid
        self.frames = np.asarray(values[:context], np.float32)[:, None]
        self.target = list(values[context:])
        self.times = np.arange(start, start + len(values))


def test_fitted_parameters_are_statsmodels_ets_on_the_scaled_training_period():
    from types import SimpleNamespace

    m, C, H = 12, 24, 6
    series = {"up": np.exp(seasonal(120, m, 0.01, 0.2, 0.03, seed=1, level=3.0)),
              "noisy": np.exp(seasonal(120, m, 0.0, 0.1, 0.15, seed=2, level=2.0))}
    # float32 values, as a window's frames hold them: both fits read the same numbers
    series = {k: v.astype(np.float32).astype(np.float64) for k, v in series.items()}
    windows = [_Window(sid, y[o:o + C + H], o, C) for sid, y in series.items() for o in range(0, 120 - C - H + 1, 3)]
    data = SimpleNamespace(context=C, covariates=[], calendar=[])
    sc = Scaler.fit(windows, data, season=m, transform="log", scale="seasonal_mae", smoothing=True)
    assert set(sc.smoothing) == {"up", "noisy"}
    for sid, y in series.items():
        z = np.log(y)
        z = (z - z.mean()) / M.seasonal_scale(z, m)  # the head's transformed, scaled units
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = _ets(z, m).fit(disp=False)
        want = [float(res.params[res.model.param_names.index(k)])
                for k in ("smoothing_level", "smoothing_trend", "smoothing_seasonal", "damping_trend")]
        np.testing.assert_allclose(sc.smoothing[sid], want, rtol=1e-6, atol=1e-9, err_msg=sid)
        assert all(0 <= v <= 1 for v in sc.smoothing[sid])
    assert sc.smoothing["up"] != sc.smoothing["noisy"]  # each series its own
    # the frames carry them: [T, 1] -> [T, 1 + 4], the series' parameters on every row
    x = sc.frames(windows[0].frames, "up", "here")
    assert x.shape == (C, 5)
    np.testing.assert_allclose(x[:, 1:], np.tile(sc.smoothing["up"], (C, 1)), rtol=1e-6)
    assert sc.to_dict()["smoothing"] == sc.smoothing and "smoothing" not in Scaler(sc.stats).to_dict()
    with pytest.raises(ValueError, match="at least 26 needed"):
        fit_smoothing(np.zeros(20), 12)


def test_fitted_anchor_and_inputs_are_the_numpy_recursion_worked_per_series():
    rng = np.random.default_rng(4)
    m, T, H, Q = 6, 30, 7, 2
    params = np.asarray([[0.3, 0.0, 0.3, 0.98], [0.8, 0.1, 0.05, 0.9], [1.0, 0.0, 0.0, 0.0]])
    data = rng.normal(size=(3, T, 2)).astype(np.float32)
    frames = np.concatenate([data, np.repeat(params[:, None, :], T, axis=1)], axis=2).astype(np.float32)
    logits = rng.normal(size=(3, H * Q)).astype(np.float32)
    got = np.asarray(Anchor("smoothed", H, Q, m, fitted=True)(frames, logits))
    des = np.asarray(TargetInputs("deseasonalised", m, fitted=True)(frames))
    assert des.shape == (3, T, 2)  # the parameter columns are not read by the encoder
    for i, p in enumerate(params):  # each window with its own parameters, one at a time
        ref = smoothed_forecast(data[i:i + 1, :, 0], H, m, tuple(p))[0]
        np.testing.assert_allclose(got[i], logits[i] + np.repeat(ref, Q), atol=1e-5, err_msg=str(p))
        lvl, _, s = smooth_window(data[i:i + 1, :, 0].astype(np.float64), m, tuple(p))
        np.testing.assert_allclose(des[i, :, 0], data[i, :, 0] - np.concatenate(s) - lvl[0], atol=1e-5)
        np.testing.assert_array_equal(des[i, :, 1], data[i, :, 1])
    # numpy with [N, 4] parameters is the same as one window at a time
    np.testing.assert_allclose(smoothed_forecast(data[..., 0], H, m, params),
                               np.concatenate([smoothed_forecast(data[i:i + 1, :, 0], H, m, tuple(params[i]))
                                               for i in range(3)]), atol=1e-12)


def test_the_step_model_streams_what_the_model_answers_with_fitted_parameters():
    import keras

    C, D, H = 6, 2, 3
    inp = keras.Input((C, D + 4))
    x = keras.layers.GRU(4)(TargetInputs("deseasonalised", 2, fitted=True)(inp))
    model = keras.Model(inp, Anchor("smoothed", H, 1, 2, fitted=True)(inp, keras.layers.Dense(H)(x)))
    st = WindowStepper(model, C, D + 4)
    rng = np.random.default_rng(0)
    params = np.asarray([[0.2, 0.05, 0.3, 0.95], [0.7, 0.0, 0.1, 0.8]], np.float32)
    series = np.concatenate([rng.normal(size=(2, 10, D)), np.repeat(params[:, None], 10, axis=1)], axis=2)
    series = series.astype(np.float32)
    states = st.initial_state(2)
    for t in range(series.shape[1]):
        logits, states = st.step(series[:, t], states)
        if t + 1 >= C:
            np.testing.assert_allclose(np.asarray(logits), np.asarray(model(series[:, t + 1 - C:t + 1])), atol=1e-5)


@pytest.fixture(scope="module")
def fitted_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("fitted")
    run = train_two_series_run(d, "fitted", "fitted", 32, 0.003)
    return d, run


def test_a_run_keeps_each_series_fitted_parameters_and_refuses_damaged_ones(fitted_run, tmp_path):
    import shutil

    import pandas as pd

    from seqkit.training.train import load_run

    d, run = fitted_run
    assets = json.loads((Path(run) / "forecast_assets.json").read_text())
    got = assets["smoothing"]
    table = pd.read_csv(d / "s.csv")
    for sid in ("a", "b"):  # what statsmodels fits on the series' scaled training period
        z = np.log(table[table.id == sid].value.to_numpy()[:240 - 48])
        z = (z - z.mean()) / M.seasonal_scale(z, 12)
        np.testing.assert_allclose(got[sid], fit_smoothing(z, 12), rtol=1e-6)
    assert got["a"] != got["b"]
    prep, model = load_run(run, with_data=True)
    head = prep.head
    assert head.scaler.smoothing == got and head.width == 1 + 2 + 4
    assert "smoothing: fitted" in (Path(run) / "recipe.yaml").read_text()  # the resolved recipe reads back
    # the saved model answers with each series' own parameters: its anchor on its own (zero
    # network output) is the numpy recursion with that series' parameters
    recs = prep.splits["test"][:1] + [r for r in prep.splits["test"] if r.label == "b"][:1]
    assert [r.label for r in recs] == ["a", "b"]
    x, _ = head.arrays(recs)
    anchor = model.get_layer("anchor")
    assert anchor.fitted
    ref = np.asarray(anchor(x, np.zeros((2, 6), np.float32)))
    for i, r in enumerate(recs):
        np.testing.assert_allclose(ref[i], smoothed_forecast(x[i:i + 1, :, 0], 6, 12, tuple(got[r.label]))[0],
                                   atol=1e-4)
    for damage, key in ((lambda a: a["smoothing"]["a"].__setitem__(2, 1.5), "smoothing.a.2"),
                        (lambda a: a["smoothing"].pop("b"), "smoothing.b"),
                        (lambda a: a["smoothing"]["a"].__setitem__(0, "x"), "smoothing.a.0"),
                        (lambda a: a.pop("smoothing"), "smoothing: missing"),
                        # the scaling and calendar every forecast run keeps
                        (lambda a: a["scaling"]["a"]["mean"].__setitem__(0, float("nan")), "scaling.a.mean.0"),
                        (lambda a: a["scaling"]["b"]["std"].__setitem__(0, 0.0), "scaling.b.std.0"),
                        (lambda a: a["scaling"]["b"]["std"].__setitem__(0, -1.0), "scaling.b.std.0"),
                        (lambda a: a["scaling"]["a"]["mean"].__setitem__(0, 1e308), "scaling.a.mean.0"),
                        (lambda a: a["scaling"]["a"]["mean"].pop(), "2 means but 3 scales"),
                        (lambda a: [a["scaling"]["a"][k].pop() for k in ("mean", "std")], "scaling.a' scales 2"),
                        (lambda a: a["mase_scale"].__setitem__("a", 0), "mase_scale.a"),
                        (lambda a: a.__setitem__("frequency", "bogus"), "frequency"),
                        (lambda a: a.__setitem__("scaling", {}), "scaling")):
        bad = tmp_path / "bad"
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(run, bad)
        broken = json.loads(json.dumps(assets))
        damage(broken)
        (bad / "forecast_assets.json").write_text(json.dumps(broken))
        with pytest.raises(RunDirError) as e:
            load_run(str(bad))
        assert str(bad / "forecast_assets.json") in str(e.value) and key in str(e.value), str(e.value)
        res = CliRunner().invoke(main, ["evaluate", str(bad)])
        assert res.exit_code != 0 and key in res.output


def test_export_and_stream_of_a_fitted_run_give_the_predicted_forecasts(fitted_run, tmp_path):
    d, run = fitted_run
    meta = predict_export_stream_agree(run, d / "s.csv", tmp_path)["forecast"]
    assert meta["smoothing"] == json.loads((Path(run) / "forecast_assets.json").read_text())["smoothing"]


def test_an_exports_fitted_parameters_are_checked_before_use():
    from seqkit.errors import SeqkitError
    from seqkit_forecast.metadata import read_forecast_metadata

    good = {"context": 24, "horizon": 6, "quantiles": [], "point_level": 0, "time_column": "t", "id_column": "id",
            "target": "y", "covariates": [], "calendar": [], "frequency": "MS", "transform": "log",
            "scaling": {"a": {"mean": [1.0], "std": [2.0]}, "b": {"mean": [0.0], "std": [1.0]}},
            "smoothing": {"a": [0.1, 0.0, 0.2, 0.98], "b": [0.5, 0.1, 0.0, 0.8]}}
    assert read_forecast_metadata({"forecast": good}, "m.tflite").smoothing["b"] == [0.5, 0.1, 0.0, 0.8]
    for smoothing, says in (({"a": [0.1, 0.0, 1.2, 0.98], "b": [0.5, 0.1, 0.0, 0.8]}, "forecast.smoothing.a.2"),
                            ({"a": [0.1, 0.0, 0.2, 0.98]}, "series 'b' has no four smoothing"),
                            ({"a": [0.1, 0.0, 0.2], "b": [0.5, 0.1, 0.0, 0.8]}, "series 'a' has no four"),
                            ({"a": [0.1, 0.0, "x", 0.98], "b": [0.5, 0.1, 0.0, 0.8]}, "forecast.smoothing.a.2")):
        with pytest.raises(SeqkitError) as e:
            read_forecast_metadata({"forecast": {**good, "smoothing": smoothing}}, "m.tflite")
        assert "m.tflite" in str(e.value) and says in str(e.value), (says, str(e.value))
