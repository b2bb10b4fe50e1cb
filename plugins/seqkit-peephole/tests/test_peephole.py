"""Tests of the peephole_lstm cell plugin: worked numbers, parity across paths, entry point, export."""

from __future__ import annotations

import importlib.metadata
import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402

from seqkit.cells.base import CellSpec  # noqa: E402
from seqkit.registry import CELLS  # noqa: E402
from seqkit_peephole import PeepholeLSTMCell, PeepholeLSTMPlugin  # noqa: E402


def _cell_with(kernel, recurrent, bias, peephole):
    cell = PeepholeLSTMCell(len(peephole[0]))
    cell.build((None, len(kernel)))
    cell.set_weights([np.asarray(kernel, np.float32), np.asarray(recurrent, np.float32),
                      np.asarray(peephole, np.float32), np.asarray(bias, np.float32)])
    return cell


def test_one_step_by_hand():
    # H = D = 1; gate order i, f, c, o. x = 1, h_{t-1} = 0.5, c_{t-1} = 1:
    #   i = sig(0.5 + 0.1*0.5 + 0   + 0.3*1)   = sig(0.85)
    #   f = sig(-0.5 + 0.2*0.5 + 1  - 0.2*1)   = sig(0.4)
    #   c = f*1 + i*tanh(1.0 - 0.3*0.5)        = 0.598688 + 0.700567*0.691069 = 1.082828
    #   o = sig(0.25 + 0.4*0.5 + 0.5*c)         (the output gate sees the new c)
    #   h = o * tanh(c)                         = 0.579297
    cell = _cell_with([[0.5, -0.5, 1.0, 0.25]], [[0.1, 0.2, -0.3, 0.4]], [0, 1, 0, 0],
                      [[0.3], [-0.2], [0.5]])
    h, (h2, c) = cell(np.ones((1, 1), np.float32), [np.full((1, 1), 0.5, np.float32),
                                                    np.ones((1, 1), np.float32)])
    assert float(c[0, 0]) == pytest.approx(1.082828, abs=1e-6)
    assert float(h[0, 0]) == pytest.approx(0.579297, abs=1e-6)
    np.testing.assert_array_equal(h, h2)


def test_zero_peepholes_reduce_to_the_keras_lstm_cell():
    rng = np.random.default_rng(0)
    lstm = keras.layers.LSTMCell(5)
    lstm.build((None, 3))
    w, u, b = [rng.normal(size=v.shape).astype(np.float32) for v in lstm.weights]
    lstm.set_weights([w, u, b])
    cell = _cell_with(w, u, b, np.zeros((3, 5)))
    x = rng.normal(size=(4, 3)).astype(np.float32)
    s = [rng.normal(size=(4, 5)).astype(np.float32) for _ in range(2)]
    ref, (rh, rc) = lstm(x, s)
    out, (h, c) = cell(x, s)
    np.testing.assert_allclose(out, ref, atol=1e-6)
    np.testing.assert_allclose(c, rc, atol=1e-6)


def test_full_sequence_equals_step_by_step_with_padding():
    rng = np.random.default_rng(1)
    plugin = PeepholeLSTMPlugin(CellSpec(units=6))
    layer = plugin.make_layer(return_sequences=True, name="rnn_0")
    B, T, D = 3, 7, 4
    x = rng.normal(size=(B, T, D)).astype(np.float32)
    lengths = np.array([7, 4, 1])
    mask = np.arange(T)[None, :] < lengths[:, None]
    full = np.asarray(layer(x, mask=mask))
    cell = layer.cell
    h, c = np.zeros((B, 6), np.float32), np.zeros((B, 6), np.float32)
    for t in range(T):
        y, (h_new, c_new) = cell(x[:, t], [h, c])
        for b in range(B):
            if mask[b, t]:
                assert np.max(np.abs(full[b, t] - np.asarray(y)[b])) <= 1e-5
        keep = mask[:, t:t + 1]
        h, c = np.where(keep, h_new, h), np.where(keep, c_new, c)


def test_parameter_count_and_state_layout():
    plugin = PeepholeLSTMPlugin(CellSpec(units=8))
    layer = plugin.make_layer(name="rnn_0")
    layer(np.zeros((1, 2, 5), np.float32))
    assert sum(int(np.prod(w.shape)) for w in layer.weights) == 4 * (8 * (5 + 8) + 8) + 3 * 8
    assert plugin.state_names == ("h", "c") and plugin.state_size == [8, 8]


def test_installed_entry_point_registers_the_cell_with_its_package():
    eps = [ep for ep in importlib.metadata.entry_points(group="seqkit.cells") if ep.name == "peephole_lstm"]
    assert eps and eps[0].dist.name == "seqkit-peephole"
    assert CELLS.get("peephole_lstm") is PeepholeLSTMPlugin
    assert CELLS.entry("peephole_lstm").origin.startswith("seqkit-peephole")


def test_refuses_recurrent_dropout():
    from seqkit.errors import RecipeError

    with pytest.raises(RecipeError, match="model.recurrent_dropout"):
        PeepholeLSTMPlugin(CellSpec(units=4, recurrent_dropout=0.2))


def test_saved_model_reloads_in_safe_mode(tmp_path):
    plugin = PeepholeLSTMPlugin(CellSpec(units=4))
    inp = keras.Input((None, 3))
    model = keras.Model(inp, plugin.make_layer(name="rnn_0")(inp))
    x = np.random.default_rng(2).normal(size=(2, 5, 3)).astype(np.float32)
    model.save(tmp_path / "m.keras")
    again = keras.saving.load_model(tmp_path / "m.keras", safe_mode=True)
    np.testing.assert_array_equal(model(x), again(x))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    raw = {"name": "tiny-peephole", "seed": 3,
           "data": {"source": "pydoc_topics", "tokenizer": "char", "max_length": 160, "limit": 160,
                    "split": {"valid": 0.1, "test": 0.1}},
           "model": {"cell": "peephole_lstm", "units": 16, "embedding_dim": 8, "layers": 2},
           "head": {"type": "language_model"},
           "training": {"epochs": 1, "batch_size": 32, "learning_rate": 0.01, "early_stopping": None}}
    run = str(tmp_path_factory.mktemp("peephole") / "run")
    train(recipe_from_dict(raw), run, verbose=0)
    return run


@pytest.mark.slow  # heavy; the default run stays under 15 min on 2 cores (run with -m slow)
def test_tflite_step_model_matches_keras(tiny_run, tmp_path):
    from seqkit.export.writer import export_run

    report = export_run(tiny_run, str(tmp_path / "export"), fmt="tflite", parity_examples=6)
    tfl = report["tflite"]
    assert tfl["max_abs_diff"] <= 1e-4 and tfl["argmax_agreement"] >= 0.999
    assert not [op for op in tfl["ops"] if op.startswith("Flex") or op == "CUSTOM"]
    assert (tmp_path / "export" / "model.tflite").is_file()


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
