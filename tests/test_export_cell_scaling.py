"""Per-unit LSTM cell-state scaling of full-integer step exports (seqkit.export.cell_scaling): the
rewritten step equals Keras's in float32, an int8 export of an LSTM whose cell state is forced
large agrees with Keras better than the same export without it, and the exported step streams
(its state, c / s, fed back as returned; c recovered from the metadata's scales)."""

import json
import os
import shutil

import numpy as np
import pytest

FAST = {"parity_examples": 12, "calibration_examples": 24}


def _stream(stepper, x):
    """Logits ``[N, T, V]`` and the states after every step of ``x [N, T]`` (float32 Keras)."""
    import tensorflow as tf

    step = tf.function(stepper.step)
    states, z, seen = stepper.initial_state(len(x)), [], []
    for t in range(x.shape[1]):
        logits, states = step(tf.constant(x[:, t]), list(states))
        z.append(np.asarray(logits))
        seen.append([np.asarray(s) for s in states])
    return np.stack(z, 1), seen


def _force_counter(model, unit: int = 0, g: float = 0.9):
    """Make ``unit`` of the first LSTM layer count: input and forget gates open (bias 12, no
    weights), candidate ``g`` (bias ``atanh(g)``), so its cell state grows by about ``g`` a step
    (``c_t ~ t g``) while the output does not change (``tanh(c)`` saturates)."""
    from seqkit.layers.stack import recurrent_layers

    cell = recurrent_layers(model)[0].cell
    H = cell.units
    k, r, b = cell.kernel.numpy(), cell.recurrent_kernel.numpy(), cell.bias.numpy()
    for gate, bias in ((0, 12.0), (1, 12.0), (2, float(np.arctanh(g)))):
        col = gate * H + unit
        k[:, col], r[:, col], b[col] = 0.0, 0.0, bias
    cell.kernel.assign(k)
    cell.recurrent_kernel.assign(r)
    cell.bias.assign(b)


def test_scaled_step_equals_keras_in_float32_and_spares_other_cells(tiny_lm, keras):
    from seqkit.export.archive import stepper_for
    from seqkit.export.calibration import calibration_records
    from seqkit.export.cell_scaling import CLIP, scaled_stepper, stepper_inputs
    from seqkit.training.train import load_run

    prep, model = load_run(tiny_lm("lstm"), with_data=True)
    _force_counter(model)  # one unit's |c| reaches ~60, beyond the clip K = 8
    st = stepper_for(prep, model)
    calib = calibration_records(prep, 24)
    scaled, desc = scaled_stepper(st, *stepper_inputs(prep, calib))
    assert desc["states"] == ["rnn_0_c", "rnn_1_c"] and desc["clip"] == CLIP
    s0 = np.asarray(desc["scale"]["rnn_0_c"])
    assert s0.shape == (16,) and s0[0] == s0.max() > 4 * CLIP  # the counting unit
    assert scaled.state_names() == st.state_names() and scaled.state_sizes() == st.state_sizes()
    x, _ = stepper_inputs(prep, prep.splits["test"][:8])
    want, ws = _stream(st, x)
    got, gs = _stream(scaled, x)
    assert np.abs(got - want).max() <= 1e-6 * max(1.0, np.abs(want).max())
    c_index = {n: i for i, n in enumerate(st.state_names())}
    for t in range(x.shape[1]):
        for name, s in desc["scale"].items():
            i = c_index[name]  # the carried state is c / s
            np.testing.assert_allclose(gs[t][i] * np.asarray(s, np.float32), ws[t][i], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gs[t][c_index["rnn_1_h"]], ws[t][c_index["rnn_1_h"]], atol=1e-6)
    assert np.abs(ws[-1][c_index["rnn_0_c"]][:, 0]).max() > CLIP  # the clip was exercised


def test_only_stock_lstm_cells_are_rescaled(keras):
    from seqkit.export.cell_scaling import scalable, scaled_stepper

    assert scalable(keras.layers.LSTMCell(4))
    assert not scalable(keras.layers.LSTMCell(4, activation="relu"))
    assert not scalable(keras.layers.GRUCell(4)) and not scalable(keras.layers.SimpleRNNCell(4))

    class Steps:  # a stepper of GRU and simple RNN cells: left as it is
        cells = [keras.layers.GRUCell(4), keras.layers.SimpleRNNCell(4)]

    assert scaled_stepper(Steps(), np.zeros((1, 2), np.int32), np.ones((1, 2), bool)) == (None, None)


@pytest.fixture(scope="module")
def counter_run(tiny_lm, tmp_path_factory):
    """A copy of the tiny LSTM LM run whose first layer's unit 0 counts (:func:`_force_counter`)."""
    from seqkit.training.train import load_run

    run = str(tmp_path_factory.mktemp("counter") / "run")
    shutil.copytree(tiny_lm("lstm"), run)
    _, model = load_run(run)
    _force_counter(model)
    model.save(os.path.join(run, "model.keras"))
    return run


def test_int8_export_of_a_large_cell_state_agrees_better_with_scaling_and_streams(counter_run, tmp_path):
    from seqkit.export.writer import export_run
    from seqkit.runtime import StreamingModel
    from seqkit.training.train import load_run

    plain = export_run(counter_run, str(tmp_path / "plain"), quantize="int8", min_agreement=0,
                       cell_scaling=False, **FAST)
    out = str(tmp_path / "scaled")
    scaled = export_run(counter_run, out, quantize="int8", min_agreement=0, **FAST)
    assert "cell_state_scaling" not in plain and scaled["cell_state_scaling"] == ["rnn_0_c", "rnn_1_c"]
    assert scaled["tflite"]["argmax_agreement"] > plain["tflite"]["argmax_agreement"]
    assert scaled["tflite"]["task"]["export"] < plain["tflite"]["task"]["export"]  # perplexity
    meta = json.load(open(os.path.join(out, "metadata.json")))
    s = np.asarray(meta["cell_state_scaling"]["scale"]["rnn_0_c"], np.float32)

    # the runtime streams the state it is given back; zeros start a sequence; c = s * state
    prep, model = load_run(counter_run)
    from seqkit.export.archive import stepper_for

    ids = np.asarray([[2, 5, 9, 7, 4, 11, 6, 3, 8, 5] * 3], np.int32)
    want, ws = _stream(stepper_for(prep, model), ids)
    rt = StreamingModel(out)
    z1 = np.stack([rt.step([i])[0] for i in ids[0]])
    c = rt.states["rnn_0_c"] * s
    rt.reset()
    assert all(not v.any() for v in rt.states.values())
    z2 = np.stack([rt.step([i])[0] for i in ids[0]])
    np.testing.assert_array_equal(z1, z2)
    c_keras = ws[-1][1][0]
    rp = StreamingModel(str(tmp_path / "plain"))
    for i in ids[0]:
        rp.step([i])
    c_plain = rp.states["rnn_0_c"][0]
    # every unit but the counting one keeps its own precision: c within a few hundredths, where the
    # plain export's one range for all units (±|c| of the counter, ~74) rounds c by tenths; the
    # counter itself (+0.9 a step = 1.6 steps of its int8 state) drifts in both
    err_scaled, err_plain = np.abs(c[0] - c_keras)[1:], np.abs(c_plain - c_keras)[1:]
    assert err_scaled.mean() < 0.2 * err_plain.mean()
    assert (z1.argmax(-1) == want[0].argmax(-1)).mean() >= 0.8


def test_int8_state_inside_carries_the_scaled_state(counter_run, tmp_path):
    from seqkit.export.writer import export_run
    from seqkit.runtime import StreamingModel

    out = str(tmp_path / "inside")
    r = export_run(counter_run, out, quantize="int8", state="internal", min_agreement=0, **FAST)
    plain = export_run(counter_run, str(tmp_path / "plain"), quantize="int8", state="internal",
                       min_agreement=0, cell_scaling=False, **FAST)
    assert r["cell_state_scaling"] == ["rnn_0_c", "rnn_1_c"] and "cell_state_scaling" not in plain
    assert r["tflite"]["argmax_agreement"] > plain["tflite"]["argmax_agreement"]
    meta = json.load(open(os.path.join(out, "metadata.json")))
    assert meta["state"] == "internal" and len(meta["cell_state_scaling"]["scale"]["rnn_1_c"]) == 16
    rt = StreamingModel(out)
    z1 = np.stack([rt.step([i])[0] for i in (2, 5, 9, 7)])
    rt.reset()
    np.testing.assert_array_equal(np.stack([rt.step([i])[0] for i in (2, 5, 9, 7)]), z1)
