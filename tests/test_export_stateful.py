"""``--state internal``: a TFLite step model that keeps its recurrent state in resource variables.

Parity with the explicit-state model of the same file's run (float32 and int8 dynamic-range),
reset, two interpreters, a batch fixed at export, builtin state ops in the flatbuffer, the CLI and
the Python API, acceptor and tagger through the same code path, and refusals."""

import json
import os
import shutil

import numpy as np
import pytest

from tests.test_export_sequence import TS_HEAD, _train, ts_case

STATE_OPS = {"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"}
# the explicit-state LM step's builtins (tests/test_export.py) plus the state ops and CALL_ONCE
# (the initialiser that zeroes the variables when the interpreter first runs); reset: NOT_EQUAL,
# EXPAND_DIMS, SELECT_V2
BUILTINS = {"ADD", "DEQUANTIZE", "FULLY_CONNECTED", "GATHER", "LOGISTIC", "MUL", "SPLIT", "SUB", "TANH",
            "RESHAPE", "STRIDED_SLICE", "RELU", "CONCATENATION", "CALL_ONCE", "DIV", "MAXIMUM",
            "SELECT_V2", "GREATER", "NOT_EQUAL", "EXPAND_DIMS"} | STATE_OPS


@pytest.fixture(scope="module")
def lm(tiny_lm, tiny_lm_export):
    """A tiny 2-layer LSTM LM and its explicit-state float32 export: ``(run, explicit export)``
    (conftest's session ones, shared with tests/test_export.py; read only)."""
    return tiny_lm("lstm"), tiny_lm_export("lstm")[0]


def _stream(rt, tokens):
    return np.stack([rt.step([t])[0] for t in tokens])


def test_lm_state_inside_equals_explicit_state_reset_and_two_interpreters(lm, tmp_path):
    from seqkit.export import embedded_metadata
    from seqkit.export.tflite import op_names
    from seqkit.export.writer import export_run
    from seqkit.runtime import StatefulStreamingModel, StreamingModel

    run, explicit_dir = lm
    out = str(tmp_path / "s")
    report = export_run(run, out, state="internal", parity_examples=4)
    assert report["tflite"]["explicit_state_max_abs_diff"] <= 1e-6
    assert report["tflite"]["max_abs_diff"] <= 1e-5 and report["tflite"]["argmax_agreement"] == 1.0
    ops = set(op_names(os.path.join(out, "model.tflite")))  # read from the flatbuffer, every subgraph
    assert STATE_OPS <= ops and ops <= BUILTINS, ops - BUILTINS
    assert not any(o.startswith("Flex") or o in ("CUSTOM", "DELEGATE") for o in ops)
    meta = json.load(open(os.path.join(out, "metadata.json")))
    assert meta["state"] == "internal" and meta["batch"] == 1 and meta["input"]["shape"] == [1]
    assert embedded_metadata.read(os.path.join(out, "model.tflite")) == meta
    assert [s["shape"] for s in meta["state_layout"]] == [[1, 16]] * 4

    rt, ex = StreamingModel(out), StreamingModel(explicit_dir)
    assert isinstance(rt, StatefulStreamingModel) and rt.states is None
    sigs = rt.interpreter.get_signature_list()
    assert sigs["reset"] == {"inputs": ["rows"], "outputs": ["batch_size"]}
    assert sigs["step"] == {"inputs": ["token"], "outputs": ["logits"]}  # the input alone, logits alone
    V = len(meta["vocab"])
    rng = np.random.default_rng(0)
    a, b = rng.integers(4, V, 50).tolist(), rng.integers(4, V, 20).tolist()
    ex.reset()
    want_a = _stream(ex, a)
    ex.reset()
    want_b = _stream(ex, b)
    got_a = _stream(rt, a)  # the first call, without reset: the initialiser zeroed the state
    assert np.abs(got_a - want_a).max() <= 1e-6
    rt.reset()
    got_b = _stream(rt, b)
    assert np.abs(got_b - want_b).max() <= 1e-6
    carried = _stream(rt, b)  # without reset the state carries over
    assert np.abs(carried - want_b).max() > 1e-4

    # two interpreters of one file, stepped in turn: separate states
    one, two = StreamingModel(out), StreamingModel(out)
    one.reset()
    two.reset()
    za, zb = [], []
    for t in range(50):
        za.append(one.step([a[t]])[0])
        if t < len(b):
            zb.append(two.step([b[t]])[0])
    assert np.abs(np.stack(za) - want_a).max() <= 1e-6
    assert np.abs(np.stack(zb) - want_b).max() <= 1e-6

    # an id outside the vocabulary: LiteRT's refusal named (it was its raw RuntimeError)
    from seqkit.errors import SeqkitError

    with pytest.raises(SeqkitError, match=r"step: LiteRT refused the input .*one token id per row"):
        one.step([10**6])


def test_int8_state_inside_batch_two_through_the_python_api(lm, tmp_path):
    from seqkit.errors import SeqkitError
    from seqkit.runs.run import Run
    from seqkit.runtime import StreamingModel

    run, _ = lm
    report = Run(run).export(str(tmp_path / "s8"), quantize="dynamic-range", state="internal", batch=2,
                             parity_examples=3)
    # the explicit-state int8 model streamed over the same rows: same int8 weights, same kernels
    assert report["tflite"]["explicit_state_max_abs_diff"] <= 1e-6
    assert report["tflite"]["argmax_agreement"] >= 0.99
    assert STATE_OPS <= set(report["tflite"]["ops"]) and "Flex" not in " ".join(report["tflite"]["ops"])
    rt = StreamingModel(report["out"])
    assert rt.batch == 2
    rng = np.random.default_rng(1)
    a, b, c = (rng.integers(4, 40, 30).astype(np.int32) for _ in range(3))

    def rows(x, y):
        rt.reset(2)
        return np.stack([rt.step(np.array([x[t], y[t]])) for t in range(30)], axis=1)

    ab, ac = rows(a, b), rows(a, c)
    assert np.array_equal(ab[0], ac[0])  # rows of the batch keep separate states
    assert np.abs(ab[1] - ac[1]).max() > 1e-4
    assert np.array_equal(rows(b, a)[1], ab[0])  # and a row's answers do not depend on its place
    rt.reset(2)  # reset_rows: row 1 starts c afresh halfway through while row 0 carries on with a
    half = np.stack([rt.step(np.array([a[t], b[t]])) for t in range(15)], axis=1)
    rt.reset_rows([0, 1])
    rest = np.stack([rt.step(np.array([a[t], c[t - 15]])) for t in range(15, 30)], axis=1)
    assert np.array_equal(np.concatenate([half[0], rest[0]]), ab[0])
    assert np.array_equal(rest[1], ac[1][:15])
    with pytest.raises(SeqkitError, match="batch of 2 row"):
        rt.reset(1)
    with pytest.raises(SeqkitError, match=r"input shape \[2\]"):
        rt.step([5])


def test_refusals_name_what_is_supported_and_write_nothing(lm, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.errors import SeqkitError
    from seqkit.export.writer import export_run

    run, _ = lm
    with pytest.raises(SeqkitError, match="a --full-sequence model has none to keep"):
        export_run(run, str(tmp_path / "a"), state="internal", full_sequence=True)
    with pytest.raises(SeqkitError, match="applies to the TFLite model"):
        export_run(run, str(tmp_path / "b"), state="internal", fmt="saved_model")
    with pytest.raises(SeqkitError, match="--state sideways: expected one of explicit, internal"):
        export_run(run, str(tmp_path / "c"), state="sideways")
    res = CliRunner().invoke(main, ["export", run, "--out", str(tmp_path / "d"), "--state", "internal",
                                    "--format", "saved_model"])
    assert res.exit_code != 0 and "applies to the TFLite model" in res.output
    assert "Traceback" not in res.output
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def sequence_runs(tmp_path_factory, keras, tiny_tagger):
    """A 1-layer GRU tagger (conftest's session run, shared with tests/test_export_int8.py; read
    only) and a 1-layer LSTM acceptor with max pooling over frames, trained here."""
    out = {"tagger": tiny_tagger}
    d = tmp_path_factory.mktemp("st_acc")
    (d / "train.ts").write_text(TS_HEAD + "".join(ts_case(i) for i in range(20)))
    out["acceptor"] = _train(d, {
        "name": "acc", "seed": 1,
        "data": {"source": "ts", "train_path": str(d / "train.ts"), "max_length": 6,
                 "split": {"valid": 0.0, "test": 0.3, "shuffle": True}},
        "model": {"cell": "lstm", "units": 8, "layers": 1},
        "head": {"type": "acceptor", "pooling": "max"},
        "training": {"epochs": 1, "batch_size": 4, "early_stopping": None}})
    return out


def test_cli_tagger_and_acceptor_with_state_inside_stream_as_keras_predicts(sequence_runs, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.heads.sequence.predict import predict, read_records
    from seqkit.training.train import load_run

    r = CliRunner()
    tag, acc = str(tmp_path / "tag"), str(tmp_path / "acc")
    for run, out in ((sequence_runs["tagger"], tag), (sequence_runs["acceptor"], acc)):
        res = r.invoke(main, ["export", run, "--out", out, "--state", "internal", "--parity-examples", "2"])
        assert res.exit_code == 0, res.output
        assert "state internal, max |logit diff| vs the explicit-state model 0" in res.output
        report = json.load(open(os.path.join(out, "parity.json")))
        assert report["tflite"]["explicit_state_max_abs_diff"] <= 1e-6
        assert STATE_OPS <= set(report["tflite"]["ops"])
    text = "the dog sleeps\na cat runs fast\nthe cat\n"
    res = r.invoke(main, ["stream", tag], input=text)
    assert res.exit_code == 0, res.output
    prep, model = load_run(sequence_runs["tagger"])
    want = [" ".join(f"{w}/{t}" for w, t in zip(p["tokens"], p["tags"]))
            for p in predict(prep, model, read_records(text, "-", "text", prep))]
    assert res.output.splitlines() == want
    lone = str(tmp_path / "tag.tflite")  # the model alone: its metadata is embedded
    shutil.copy(os.path.join(tag, "model.tflite"), lone)
    res = r.invoke(main, ["stream", lone], input=text)
    assert res.exit_code == 0 and res.output.splitlines() == want, res.output
    ts = TS_HEAD.replace("@classLabel true up down", "@classLabel false") + "".join(
        ts_case(i, False) for i in (1, 4, 7))
    (tmp_path / "x.ts").write_text(ts)
    res = r.invoke(main, ["stream", acc, "--input", str(tmp_path / "x.ts")])
    assert res.exit_code == 0, res.output
    finals = [ln.split("\t")[2] for ln in res.output.splitlines() if ln.endswith("final")]
    prep, model = load_run(sequence_runs["acceptor"])
    assert finals == [p["label"] for p in predict(prep, model, read_records(ts, "x.ts", "ts", prep))]
    res = r.invoke(main, ["inspect", acc])
    assert res.exit_code == 0 and "state inside the model (batch 1): rnn_0_h rnn_0_c pool_max" in res.output


def test_a_conversion_the_converter_refuses_names_the_failure_offers_explicit_and_writes_nothing(
        lm, tmp_path, monkeypatch):
    """The converter's own message is quoted (here the one TF 2.21 gives a full-integer calibration
    of a signature without inputs, which is why ``reset`` takes ``rows``) and the explicit-state
    model offered; nothing is written."""
    from tensorflow.lite.python.lite import TFLiteSavedModelConverterV2  # what from_saved_model makes

    from seqkit.errors import SeqkitError
    from seqkit.export.writer import export_run

    real = TFLiteSavedModelConverterV2.convert

    def convert(self):
        if getattr(self, "experimental_enable_resource_variables", False):
            raise ValueError("Failed to parse the model: NULL SignatureDef inputs for exported method reset")
        return real(self)

    monkeypatch.setattr(TFLiteSavedModelConverterV2, "convert", convert)
    with pytest.raises(SeqkitError, match=r"(?s)--state internal --quantize dynamic-range: the converter "
                       r"cannot produce this stateful model: .*NULL SignatureDef inputs for exported method "
                       r"reset.*The explicit-state model converts with the same --quantize dynamic-range"):
        export_run(lm[0], str(tmp_path / "e"), state="internal", quantize="dynamic-range", parity_examples=2)
    assert list(tmp_path.iterdir()) == []
