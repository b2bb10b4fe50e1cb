"""``--quantize int8 --int16-cell``: int8 products and int16 element-wise cell ops by
ai-edge-quantizer, float inputs and outputs, verified in LiteRT's default interpreter; and the
options it refuses. The export tests skip without ai-edge-quantizer (the ``quantizer`` extra)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from seqkit.errors import SeqkitError
from seqkit.export.options import ExportOptions


@pytest.mark.parametrize("kw, named", [({"quantize": "int16x8"}, "--quantize int16x8"),
                                       ({"quantize": "int8", "io_type": "int"}, "--io-type int"),
                                       ({"quantize": "int8", "state": "internal"}, "--state internal"),
                                       ({"quantize": "int8", "cell_scaling": False}, "--no-cell-scaling")])
def test_int16_cell_is_refused_outside_explicit_float_io_int8(kw, named):
    with pytest.raises(SeqkitError, match="--int16-cell") as err:
        ExportOptions(int16_cell=True, **kw).check()
    assert named in str(err.value)


def test_missing_quantizer_is_the_same_one_paragraph_error_in_api_and_cli(monkeypatch, tiny_lm, tmp_path):
    import sys

    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.runs.run import Run

    monkeypatch.setitem(sys.modules, "ai_edge_quantizer", None)  # as if not installed
    run = tiny_lm("lstm")
    with pytest.raises(SeqkitError, match=r'pip install "seqkit\[quantizer\]"') as err:
        Run(run).export(tmp_path / "api", quantize="int8", int16_cell=True)
    assert "\n" not in str(err.value)
    res = CliRunner().invoke(main, ["export", run, "--quantize", "int8", "--int16-cell",
                                    "--out", str(tmp_path / "cli")])
    assert res.exit_code != 0 and str(err.value) in " ".join(res.output.split())
    assert not (tmp_path / "api").exists() and not (tmp_path / "cli").exists()


def test_unclipped_cell_steps_as_keras(tiny_lm, keras):
    """In float32 the step of the unclipped scaled cells, gate pre-activations scaled per unit,
    equals Keras's LSTM step (c = s * ĉ)."""
    import tensorflow as tf

    from seqkit.export.archive import stepper_for
    from seqkit.export.cell_scaling import scaled_stepper, stepper_inputs
    from seqkit.export.int16_cell import unclipped
    from seqkit.export.writer import calibration_for, load_for_export

    prep, model = load_for_export(tiny_lm("lstm"))
    base = stepper_for(prep, model)
    inputs = stepper_inputs(prep, calibration_for(prep, "int8", 16))
    scaled, scaling = scaled_stepper(base, *inputs)
    ours = unclipped(scaled, *inputs)
    r = [cell.gate_scale for cell in ours.cells]
    assert [v.shape for v in r] == [(64,), (64,)]  # 4 gates x 16 units, per layer
    assert all((v > 0).all() and v.max() > 2 * v.min() for v in r)  # per unit, not one number
    x = np.array([5, 9, 12, 3, 7, 30, 4, 4], np.int32)
    sa, sb = base.initial_state(1), ours.initial_state(1)
    for t in x:
        za, sa = base.step(tf.constant([t]), list(sa))
        zb, sb = ours.step(tf.constant([t]), list(sb))
        np.testing.assert_allclose(np.asarray(zb), np.asarray(za), atol=2e-6)
    s = np.asarray(scaling["scale"]["rnn_0_c"], np.float32)
    np.testing.assert_allclose(np.asarray(sb[1]) * s, np.asarray(sa[1]), atol=2e-6)


def test_int16_cell_export_agrees_with_keras_and_returns_states_as_it_takes_them(tiny_lm, tmp_path):
    pytest.importorskip("ai_edge_quantizer")
    from ai_edge_litert.interpreter import Interpreter

    from seqkit.export.writer import export_run

    rep = export_run(tiny_lm("lstm"), str(tmp_path / "e"), quantize="int8", int16_cell=True,
                     parity_examples=12)
    meta = json.loads((tmp_path / "e" / "metadata.json").read_text(encoding="utf-8"))
    assert meta["quantizer"]["tool"].startswith("ai-edge-quantizer")
    assert meta["cell_state_scaling"]["clip"] is None
    assert meta["verified"]["configuration"] == "default" and "XNNPACK" in meta["verified"]["delegates"]
    it = Interpreter(model_path=str(tmp_path / "e" / "model.tflite"))
    runner = it.get_signature_runner("step")
    ins, outs = runner.get_input_details(), runner.get_output_details()
    states = sorted(set(ins) - {"token"})
    assert states == sorted(set(outs) - {"logits"}) and len(states) == 4
    assert {k: outs[k]["dtype"] for k in states} == {k: ins[k]["dtype"] for k in states}
    assert all(ins[k]["dtype"] == np.float32 for k in states) and outs["logits"]["dtype"] == np.float32
    # the cell's element-wise ops in int16, the products' weights in int8
    types = {np.dtype(d["dtype"]) for d in it.get_tensor_details()}
    assert {np.dtype(np.int16), np.dtype(np.int8)} <= types
    # the parity check fed the states back as they came
    t16 = rep["tflite"]
    assert t16["argmax_agreement"] >= 0.98, t16
    assert abs(t16["task"]["export"] - t16["task"]["keras"]) <= 0.01 * t16["task"]["keras"], t16


def test_int16_cell_refuses_a_run_without_lstm_cells_and_writes_nothing(tiny_lm, tmp_path):
    pytest.importorskip("ai_edge_quantizer")
    from seqkit.export.writer import export_run

    with pytest.raises(SeqkitError, match="not stock Keras LSTM cells") as err:
        export_run(tiny_lm("gru"), str(tmp_path / "e"), quantize="int8", int16_cell=True)
    assert "cell 'gru'" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "e").exists()
