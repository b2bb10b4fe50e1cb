"""Export: TFLite/SavedModel step models match Keras, builtin ops only, nothing half-written."""

import json
import os

import numpy as np
import pytest


BUILTINS_SEEN = {"ADD", "DEQUANTIZE", "FULLY_CONNECTED", "GATHER", "LOGISTIC", "MUL", "SPLIT", "SUB",
                 "TANH", "RESHAPE", "STRIDED_SLICE", "RELU", "CONCATENATION"}


class _Runs(dict):
    """cell -> run directory of the session's tiny 2-layer LM (conftest ``tiny_lm``), trained
    when first asked for. Read only: a test that writes into a run copies it first."""

    def __init__(self, get):
        super().__init__()
        self.get_run = get

    def __missing__(self, cell):
        self[cell] = self.get_run(cell)
        return self[cell]


@pytest.fixture(scope="module")
def runs(tiny_lm):
    return _Runs(tiny_lm)


@pytest.fixture(scope="module")
def lstm_export(tiny_lm_export):
    """The LSTM run's float32 export (``--format all``, made once per session; read only)."""
    return tiny_lm_export("lstm")[0]


@pytest.mark.parametrize("cell", ["lstm", "gru", pytest.param("simple_rnn", marks=pytest.mark.slow)])
def test_step_exports_equal_full_sequence_keras(tiny_lm_export, cell, tf):
    out, report = tiny_lm_export(cell)  # export_run(run, out, fmt="all", parity_examples=12)
    assert report["tflite"]["max_abs_diff"] <= 1e-5
    assert report["saved_model"]["max_abs_diff"] <= 1e-5
    assert report["tflite"]["argmax_agreement"] == 1.0
    ops = set(report["tflite"]["ops"])
    assert ops <= BUILTINS_SEEN and not any(o.startswith("Flex") for o in ops), ops
    assert {"FULLY_CONNECTED", "GATHER", "TANH"} <= ops
    assert sorted(os.listdir(out)) == ["metadata.json", "model.tflite", "parity.json", "saved_model", "vocab.json"]
    meta = json.load(open(os.path.join(out, "metadata.json")))
    n_states = {"lstm": 2, "gru": 1, "simple_rnn": 1}[cell] * 2
    assert [s["size"] for s in meta["state_layout"]] == [16] * n_states
    assert meta["state_layout"][0]["name"] == "rnn_0_h"


def test_streamed_with_reset_equals_each_alone(lstm_export):
    from seqkit.runtime.streaming import StreamingModel

    rt = StreamingModel(lstm_export)
    a, b = [2, 5, 6, 7], [2, 9, 4]
    run = lambda seq: np.stack([rt.step([t])[0] for t in seq])  # noqa: E731
    rt.reset()
    alone_a = run(a)
    rt.reset()
    alone_b = run(b)
    rt.reset()
    both_a = run(a)
    rt.reset()
    both_b = run(b)
    np.testing.assert_array_equal(alone_a, both_a)
    np.testing.assert_array_equal(alone_b, both_b)
    rt.reset()
    run(a)
    carried = run(b)  # without reset the state carries over: a different answer
    assert np.abs(carried - alone_b).max() > 1e-4


def test_runtime_step_equals_signature_runner_across_batch_changes(lstm_export):
    """The direct set_tensor/invoke step gives the signature runner's answers bit for bit,
    also when the batch changes between calls (tensors resized) and back."""
    from seqkit.export.tflite import interpreter
    from seqkit.runtime.streaming import StreamingModel

    out = lstm_export
    rt = StreamingModel(out)
    runner = interpreter(os.path.join(out, "model.tflite")).get_signature_runner("step")
    names = [s["name"] for s in rt.metadata["state_layout"]]
    rng = np.random.default_rng(0)
    for batch in (1, 3, 1, 2):
        rt.reset(batch)
        ref = {n: np.zeros((batch, 16), np.float32) for n in names}
        for _ in range(4):
            x = rng.integers(2, 10, size=batch).astype(np.int32)
            got = rt.step(x)
            res = runner(token=x, **ref)
            ref = {n: res[n] for n in names}
            np.testing.assert_array_equal(got, res["logits"])
            for n in names:
                np.testing.assert_array_equal(rt.states[n], ref[n])


def test_saved_model_generate_equals_python_decoding(runs, tiny_lm_export, tf):
    from seqkit.inference.decoding import decode
    from seqkit.training.train import load_run

    out = tiny_lm_export("gru")[0]  # --format all: its saved_model is the --format saved_model one
    loaded = tf.saved_model.load(os.path.join(out, "saved_model"))
    prompt = tf.constant([[2, 5, 6], [2, 7, 7]], tf.int32)
    res = loaded.signatures["generate"](prompt=prompt, max_length=tf.constant(15))
    prep, model = load_run(runs["gru"])
    st = prep.head.stepper(model)
    toks, lens = decode(st.step, st.initial_state(2), prompt, max_length=15, greedy=True)
    np.testing.assert_array_equal(res["tokens"].numpy(), toks.numpy())
    np.testing.assert_array_equal(res["lengths"].numpy(), lens.numpy())
    s1 = loaded.signatures["sample"](prompt=prompt, max_length=tf.constant(15),
                                     temperature=tf.constant(0.9), seed=tf.constant(3))
    toks, _ = decode(st.step, st.initial_state(2), prompt, max_length=15, greedy=False,
                     temperature=0.9, seed=3)
    np.testing.assert_array_equal(s1["tokens"].numpy(), toks.numpy())


def test_runtime_generate_matches_keras_greedy(runs, lstm_export, tf):
    from seqkit.inference.decoding import decode
    from seqkit.runtime.streaming import StreamingModel
    from seqkit.training.train import load_run

    new = StreamingModel(lstm_export).generate([2, 5], max_length=12, greedy=True)
    prep, model = load_run(runs["lstm"])
    st = prep.head.stepper(model)
    toks, lens = decode(st.step, st.initial_state(1), tf.constant([[2, 5]]), max_length=12, greedy=True)
    assert new == toks.numpy()[0, : int(lens[0])].tolist()


def test_quantized_export_is_smaller_and_agrees(runs, tiny_lm_export, tmp_path):
    from seqkit.export.writer import export_run

    f32 = tiny_lm_export("lstm")[1]  # the float32 export of the same run
    i8 = export_run(runs["lstm"], str(tmp_path / "q"), quantize="dynamic-range", parity_examples=8)
    assert i8["tflite"]["bytes"] < f32["tflite"]["bytes"]
    assert i8["tflite"]["argmax_agreement"] >= 0.99


def test_parity_failure_and_existing_directory_write_nothing(runs, tmp_path):
    from seqkit.errors import SeqkitError
    from seqkit.export.writer import export_run

    out = tmp_path / "e"
    with pytest.raises(SeqkitError, match="parity check failed .* nothing was written"):
        export_run(runs["lstm"], str(out), quantize="dynamic-range", tolerance=1e-9, parity_examples=4)
    assert not out.exists() and not list(tmp_path.glob("e.partial-*"))
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(SeqkitError, match="exists and is not empty"):
        export_run(runs["lstm"], str(out), parity_examples=4)
    assert os.listdir(out) == ["keep.txt"]


def test_interrupted_conversion_leaves_nothing(runs, tmp_path, monkeypatch):
    import seqkit.export.tflite as tfl
    from seqkit.export.writer import export_run

    def boom(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(tfl, "convert_step", boom)
    with pytest.raises(KeyboardInterrupt):
        export_run(runs["lstm"], str(tmp_path / "e"), parity_examples=4)
    assert os.listdir(tmp_path) == []


def test_cli_export_stream_inspect(runs, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main

    r = CliRunner()
    out = str(tmp_path / "e")
    res = r.invoke(main, ["export", runs["lstm"], "--out", out, "--parity-examples", "4"])
    assert res.exit_code == 0, res.output
    assert "tflite: max |logit diff|" in res.output
    res = r.invoke(main, ["stream", out, "--prompt", "The ", "--max-length", "20", "--greedy"])
    assert res.exit_code == 0 and res.output.startswith("The ")
    res = r.invoke(main, ["inspect", out])
    assert res.exit_code == 0 and "signature 'step'" in res.output and "rnn_0_c" in res.output
    res = r.invoke(main, ["stream", str(tmp_path / "none")])
    assert res.exit_code == 2 and "no model.tflite" in res.output
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(b"not a model")
    res = r.invoke(main, ["inspect", str(bad)])
    assert res.exit_code == 2 and "bad.tflite: not a TFLite model" in res.output


def test_op_names_reads_every_subgraph_and_names_flex_ops(tf, tmp_path):
    """A Flex (select-TF) op is named, so convert_signature can refuse it, and ops of a second
    signature count: the interpreter's own op list shows the primary subgraph only."""
    from seqkit.export.tflite import op_names

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([3], tf.string)])
        def flex(self, x):
            return {"y": tf.strings.length(x) + 1}

        @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
        def plain(self, x):
            return {"y": tf.tanh(x)}

    m = M()
    tf.saved_model.save(m, str(tmp_path / "sm"), signatures={"flex": m.flex, "plain": m.plain})
    conv = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path / "sm"), signature_keys=["plain", "flex"])
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
    data = conv.convert()
    assert op_names(data) == ["ADD", "FlexStringLength", "TANH"]
    (tmp_path / "m.tflite").write_bytes(data)
    assert op_names(str(tmp_path / "m.tflite")) == op_names(data)


def test_overwrite_replaces_only_an_earlier_export_never_the_run_or_other_files(runs, tiny_lm_export,
                                                                                  tmp_path):
    import shutil

    from seqkit.errors import SeqkitError
    from seqkit.export.writer import export_run

    home = tmp_path / "home"
    run = str(home / "run")
    shutil.copytree(runs["gru"], run)
    before = sorted(os.listdir(run))
    for out in (run, str(home)):  # the run itself, a folder holding it
        with pytest.raises(SeqkitError, match="run directory or a folder holding it"):
            export_run(run, out, overwrite=True, parity_examples=2)
    assert sorted(os.listdir(run)) == before
    other = tmp_path / "notes"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(SeqkitError, match="only an earlier seqkit export"):
        export_run(run, str(other), overwrite=True, parity_examples=2)
    assert (other / "notes.txt").read_text() == "keep me"
    # an export's names, another tool's contents: its metadata.json, a file inside saved_model/
    tool = tmp_path / "othertool"
    for name, text in (("metadata.json", '{"name": "my classifier"}'), ("model.tflite", "not seqkit's"),
                       ("labels.json", '["cat", "dog"]')):
        (tool / name).parent.mkdir(parents=True, exist_ok=True)
        (tool / name).write_text(text)
    mine = tmp_path / "mine"
    shutil.copytree(tiny_lm_export("gru")[0], mine)  # a real export someone added a file to
    (mine / "saved_model" / "variables" / "important.bin").write_text("keep me")
    for folder, why in ((tool, "only an earlier seqkit export"), (mine, r"saved_model/variables/important.bin")):
        kept = sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))
        with pytest.raises(SeqkitError, match=why):
            export_run(run, str(folder), overwrite=True, parity_examples=2)
        assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) == kept
    assert (tool / "labels.json").read_text() == '["cat", "dog"]'
    out = str(tmp_path / "e")
    shutil.copytree(tiny_lm_export("gru")[0], out)  # an earlier float32 export of this run
    export_run(run, out, overwrite=True, parity_examples=2, quantize="dynamic-range")
    assert json.load(open(os.path.join(out, "metadata.json")))["quantize"] == "dynamic-range"
    assert "saved_model" not in os.listdir(out)  # replaced whole, not merged into


def test_flags_that_do_not_apply_are_refused(runs, tiny_lm_export, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.errors import SeqkitError
    from seqkit.export.writer import export_run

    with pytest.raises(SeqkitError, match="a language_model run exports the step model"):
        export_run(runs["lstm"], str(tmp_path / "fs"), full_sequence=True, parity_examples=2)
    with pytest.raises(SeqkitError, match="--quantize float16 applies to the TFLite model"):
        export_run(runs["lstm"], str(tmp_path / "sm"), fmt="saved_model", quantize="float16")
    with pytest.raises(SeqkitError, match="pin the shape of a --full-sequence export"):
        export_run(runs["lstm"], str(tmp_path / "b"), batch=8)
    assert not any(tmp_path.iterdir())
    out = tiny_lm_export("lstm")[0]
    r = CliRunner()
    res = r.invoke(main, ["stream", out, "--input", "x.txt"])
    assert res.exit_code == 2 and "continues --prompt" in res.output
    res = r.invoke(main, ["stream", runs["lstm"]])
    assert res.exit_code == 2 and "a run directory, not an export" in res.output
    res = r.invoke(main, ["stream", out, "--prompt", "ab", "--top-k", "100000", "--max-length", "5"])
    assert res.exit_code == 0, res.output
