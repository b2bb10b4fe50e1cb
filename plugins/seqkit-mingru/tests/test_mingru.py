"""Tests of the mingru cell plugin: worked numbers, scan == recurrence, padding, entry point, export."""

from __future__ import annotations

import importlib.metadata
import math
import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from seqkit.cells.base import CellSpec  # noqa: E402
from seqkit.registry import CELLS  # noqa: E402
from seqkit_mingru import MinGRU, MinGRUCell, MinGRUPlugin, g, log_g  # noqa: E402


def sequential_numpy(cell, x, mask, h0=None):
    """The plain recurrence in float64 NumPy; masked steps keep the state (a = 1, b = 0)."""
    w, b = (np.asarray(v, np.float64) for v in cell.get_weights())
    H = cell.units
    B, T, _ = x.shape
    h = np.zeros((B, H)) if h0 is None else np.asarray(h0, np.float64)
    out = np.zeros((B, T, H))
    for t in range(T):
        k = x[:, t].astype(np.float64) @ w + b
        z = 1 / (1 + np.exp(-k[:, :H]))
        kh = k[:, H:]
        ht = np.where(kh >= 0, kh + 0.5, 1 / (1 + np.exp(-kh)))
        new = (1 - z) * h + z * ht
        h = np.where(mask[:, t:t + 1], new, h)
        out[:, t] = h
    return out


def _data(B=4, T=160, D=5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(B, T, D)).astype(np.float32) * 2
    lengths = np.array([T, T // 3, 1, 0])[:B]  # full, short, one step, all padding
    return x, np.arange(T)[None, :] < lengths[:, None]


def test_one_step_by_hand():
    # H = D = 1, kernel [w_z, w_h] = [0, 1], x = 1, h_{t-1} = 1:
    #   z = sigmoid(0) = 0.5, h~ = g(1) = 1.5, h = 0.5 * 1 + 0.5 * 1.5 = 1.25
    # and with w_h = -1: h~ = g(-1) = sigmoid(-1) = 0.268941, h = 0.5 + 0.5 * 0.268941 = 0.634471
    cell = MinGRUCell(1)
    cell.build((None, 1))
    one = np.ones((1, 1), np.float32)
    cell.set_weights([np.array([[0.0, 1.0]], np.float32), np.zeros(2, np.float32)])
    assert float(cell(one, [one])[0][0, 0]) == pytest.approx(1.25, abs=1e-6)
    cell.set_weights([np.array([[0.0, -1.0]], np.float32), np.zeros(2, np.float32)])
    assert float(cell(one, [one])[0][0, 0]) == pytest.approx(0.634471, abs=1e-6)


def test_g_is_positive_continuous_and_log_g_is_its_log():
    v = np.linspace(-30, 30, 601).astype(np.float32)
    gv, lg = np.asarray(g(v)), np.asarray(log_g(v))
    assert gv.min() > 0 and float(g(np.float32(0.0))) == 0.5 == pytest.approx(1 / (1 + math.exp(0)))
    np.testing.assert_allclose(np.exp(lg), gv, rtol=1e-5)


def test_parallel_scan_equals_sequential_recurrence_with_padding():
    x, mask = _data()
    layer = MinGRU(7)
    scan = np.asarray(layer(x, mask=mask))
    ref = sequential_numpy(layer.cell, x, mask)
    assert np.max(np.abs(scan - ref)) <= 1e-5
    assert np.all(scan[3] == 0)  # an all-padding row keeps the zero state
    # padding keeps the state: every padded step repeats the last valid state
    np.testing.assert_array_equal(scan[1, 160 // 3:], np.broadcast_to(scan[1, 160 // 3 - 1], (160 - 160 // 3, 7)))


def test_parallel_scan_with_initial_state_of_any_sign():
    x, mask = _data(seed=1)
    layer = MinGRU(3)
    h0 = np.random.default_rng(2).normal(size=(4, 3)).astype(np.float32)
    scan = np.asarray(layer(x, mask=mask, initial_state=[h0]))
    assert np.max(np.abs(scan - sequential_numpy(layer.cell, x, mask, h0))) <= 1e-5


@pytest.mark.parametrize("go_backwards", [False, True])
def test_scan_layer_equals_keras_rnn_over_its_cell(go_backwards):
    x, mask = _data(seed=3)
    layer = MinGRU(6, go_backwards=go_backwards, return_state=True)
    out, last = layer(x, mask=mask)
    rnn = keras.layers.RNN(layer.cell, return_sequences=True, return_state=True, go_backwards=go_backwards)
    ref, ref_last = rnn(x, mask=mask)
    assert np.max(np.abs(np.asarray(out) - np.asarray(ref))) <= 1e-5
    assert np.max(np.abs(np.asarray(last) - np.asarray(ref_last))) <= 1e-5


def test_gradients_are_finite_and_match_the_recurrence():
    x, mask = _data(T=40, seed=4)
    layer = MinGRU(5)
    layer(x)
    rnn = keras.layers.RNN(layer.cell, return_sequences=True)
    grads = []
    for f in (layer, rnn):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.sin(f(x, mask=mask)))
        grads.append([gr.numpy() for gr in tape.gradient(loss, layer.trainable_weights)])
    for a, b in zip(*grads):
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, b, atol=1e-4, rtol=1e-4)


def test_bidirectional_wraps_the_scan_layer():
    x, mask = _data(T=12, seed=5)
    bi = keras.layers.Bidirectional(MinGRU(4))
    out = np.asarray(bi(x, mask=mask))
    assert out.shape == (4, 12, 8)
    fwd = bi.forward_layer
    rnn = keras.layers.RNN(fwd.cell, return_sequences=True, zero_output_for_mask=True)
    assert np.max(np.abs(out[..., :4] - np.asarray(rnn(x, mask=mask)))) <= 1e-5


def test_plugin_parameters_and_state_layout():
    plugin = MinGRUPlugin(CellSpec(units=8))
    layer = plugin.make_layer(name="rnn_0")
    layer(np.zeros((1, 2, 5), np.float32))
    assert sum(int(np.prod(w.shape)) for w in layer.weights) == 2 * (5 * 8 + 8)
    assert layer.cell.kernel is layer.weights[0]  # the step models read the same weights
    assert plugin.state_names == ("h",)


def test_installed_entry_point_registers_the_cell_with_its_package():
    eps = [ep for ep in importlib.metadata.entry_points(group="seqkit.cells") if ep.name == "mingru"]
    assert eps and eps[0].dist.name == "seqkit-mingru"
    assert CELLS.get("mingru") is MinGRUPlugin
    assert CELLS.entry("mingru").origin.startswith("seqkit-mingru")


def test_saved_model_reloads_in_safe_mode(tmp_path):
    inp = keras.Input((None, 3))
    model = keras.Model(inp, MinGRUPlugin(CellSpec(units=4)).make_layer(name="rnn_0")(inp))
    x = np.random.default_rng(6).normal(size=(2, 5, 3)).astype(np.float32)
    model.save(tmp_path / "m.keras")
    again = keras.saving.load_model(tmp_path / "m.keras", safe_mode=True)
    np.testing.assert_array_equal(model(x), again(x))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    raw = {"name": "tiny-mingru", "seed": 3,
           "data": {"source": "pydoc_topics", "tokenizer": "char", "max_length": 160, "limit": 160,
                    "split": {"valid": 0.1, "test": 0.1}},
           "model": {"cell": "mingru", "units": 16, "embedding_dim": 8, "layers": 2},
           "head": {"type": "language_model"},
           "training": {"epochs": 1, "batch_size": 32, "learning_rate": 0.01, "early_stopping": None}}
    run = str(tmp_path_factory.mktemp("mingru") / "run")
    train(recipe_from_dict(raw), run, verbose=0)
    return run


@pytest.mark.slow  # heavy; the default run stays under 15 min on 2 cores (run with -m slow)
def test_tflite_step_model_matches_the_parallel_scan(tiny_run, tmp_path):
    from seqkit.export.writer import export_run

    report = export_run(tiny_run, str(tmp_path / "export"), fmt="tflite", parity_examples=6)
    tfl = report["tflite"]  # Keras reference = the scan layer; TFLite = the step recurrence
    assert tfl["max_abs_diff"] <= 1e-4 and tfl["argmax_agreement"] >= 0.999
    assert not [op for op in tfl["ops"] if op.startswith("Flex") or op == "CUSTOM"]


@pytest.mark.slow  # the peephole plugin's fresh-process reload stays in the default run: -m slow (suite time)
def test_run_reloads_in_a_fresh_process_and_predicts_identically(tiny_run, tmp_path):
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    import seqkit
    from seqkit.training.train import load_run

    _, model = load_run(tiny_run)
    x = np.array([[2, 10, 11, 12, 5, 0], [2, 7, 0, 0, 0, 0]], np.int32)
    np.save(tmp_path / "x.npy", x)
    script = textwrap.dedent("""
        import sys, numpy as np
        from seqkit.training.train import load_run  # nothing imported by hand: the entry point does it
        _, model = load_run(sys.argv[1])
        np.save(sys.argv[2] + "/y.npy", np.asarray(model(np.load(sys.argv[2] + "/x.npy"), training=False)))
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(seqkit.__file__).resolve().parents[1])}
    res = subprocess.run([sys.executable, "-c", script, tiny_run, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.asarray(model(x, training=False)))
