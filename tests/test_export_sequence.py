"""Export of acceptor and tagger runs: step models (TFLite and SavedModel) streamed equal the
full-sequence Keras model, reset separates sequences, builtin ops only, bidirectional step export
refused, pinned-shape full-sequence export keeps the mask (padded batch == unpadded), CLI stream."""

import json
import os
import shutil

import numpy as np
import pytest

from tests.conftest import TAG_TRAIN, TS_HEAD, ts_case  # noqa: F401 (also read from here by other files)

def _train(d, recipe):
    import yaml

    from seqkit.recipe import load_recipe
    from seqkit.training.train import train

    (d / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    train(load_recipe(str(d / "r.yaml")), str(d / "run"), verbose=0)
    return str(d / "run")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, keras):
    out = {}
    d = tmp_path_factory.mktemp("tagger")
    (d / "train.txt").write_text(TAG_TRAIN, encoding="utf-8")
    out["tagger"] = _train(d, {
        "name": "tag", "seed": 1,
        "data": {"source": "word_tag", "path": str(d / "train.txt"), "max_length": 8,
                 "split": {"valid": 0.2, "test": 0.2, "shuffle": True}},
        "model": {"cell": "lstm", "units": 8, "embedding_dim": 6, "layers": 2},
        "head": {"type": "tagger"},
        "training": {"epochs": 2, "batch_size": 4, "early_stopping": None}})
    for name, bi, pooling in (("acceptor", False, "mean"), ("bi_acceptor", True, "final")):
        d = tmp_path_factory.mktemp(name)
        (d / "train.ts").write_text(TS_HEAD + "".join(ts_case(i) for i in range(20)))
        out[name] = _train(d, {
            "name": name, "seed": 1,
            "data": {"source": "ts", "train_path": str(d / "train.ts"), "max_length": 6,
                     "split": {"valid": 0.0, "test": 0.3, "shuffle": True}},
            "model": {"cell": "gru", "units": 8, "layers": 1, "bidirectional": bi},
            "head": {"type": "acceptor", "pooling": pooling},
            "training": {"epochs": 2, "batch_size": 4, "early_stopping": None}})
    return out


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory):
    """``exported(name)``: ``(export dir, report)`` of the run exported with ``--format all``
    (16 parity examples), once per module; read only."""
    from seqkit.export.writer import export_run

    cache = {}

    def get(name):
        if name not in cache:
            out = str(tmp_path_factory.mktemp("export_all") / name)
            cache[name] = out, export_run(runs[name], out, fmt="all", parity_examples=16)
        return cache[name]

    return get


def _no_flex(ops):
    return not any(o.startswith("Flex") or o in ("CUSTOM", "DELEGATE") for o in ops)


@pytest.mark.parametrize("name", [pytest.param("tagger", marks=pytest.mark.slow), "acceptor"])  # suite time
def test_step_export_streamed_equals_full_sequence_keras(runs, exported, name):
    from seqkit.runtime.streaming import StreamingModel
    from seqkit.training.train import load_run

    out, report = exported(name)
    for kind in ("tflite", "saved_model", "saved_model_predict"):
        assert report[kind]["max_abs_diff"] <= 1e-5, (kind, report[kind])
        assert report[kind]["argmax_agreement"] == 1.0
    assert _no_flex(report["tflite"]["ops"]) and "FULLY_CONNECTED" in report["tflite"]["ops"]
    meta = json.load(open(os.path.join(out, "metadata.json")))
    prep, model = load_run(runs[name], with_data=True)
    assert meta["labels"] == prep.head.labels.names == json.load(open(os.path.join(out, "labels.json")))
    rec = prep.splits["test"][0]
    rt = StreamingModel(out)  # from the files on disk, independent of the exporter's own check
    if name == "tagger":
        assert meta["input"] == {"name": "token", "dtype": "int32", "shape": [None], "kind": "token"}
        assert [s["name"] for s in meta["state_layout"]] == ["rnn_0_h", "rnn_0_c", "rnn_1_h", "rnn_1_c"]
        ids = prep.head.inputs.encode(rec)
        streamed = np.stack([rt.step(ids[t:t + 1])[0] for t in range(len(ids))])
        np.testing.assert_allclose(streamed, model(ids[None]).numpy()[0], atol=1e-5)
    else:
        assert meta["input"]["kind"] == "frame" and meta["pooling"] == "mean"
        assert [s["name"] for s in meta["state_layout"]] == ["rnn_0_h", "pool_sum", "pool_count"]
        np.testing.assert_allclose(meta["normalizer"]["mean"], prep.head.inputs.normalizer.mean)
        raw = np.asarray(rec.frames, np.float32)  # raw frames: the normaliser is inside the model
        for t in range(len(raw)):
            last = rt.step(raw[t:t + 1])[0]
        np.testing.assert_allclose(last, model(prep.head.inputs.encode(rec)[None]).numpy()[0], atol=1e-5)


def test_two_sequences_with_reset_equal_each_alone(exported):
    from seqkit.runtime.streaming import StreamingModel

    rt = StreamingModel(exported("acceptor")[0])
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(5, 2)).astype("float32"), rng.normal(size=(3, 2)).astype("float32")

    def run(x):
        return np.stack([rt.step(x[t:t + 1])[0] for t in range(len(x))])

    rt.reset()
    alone_a = run(a)
    rt.reset()
    alone_b = run(b)
    rt.reset()
    np.testing.assert_array_equal(run(a), alone_a)
    rt.reset()
    np.testing.assert_array_equal(run(b), alone_b)
    rt.reset()
    run(a)
    assert np.abs(run(b) - alone_b).max() > 1e-4  # without reset the state carries over


def test_bidirectional_run_exports_whole_sequence_by_default_and_refuses_a_step_model(runs, tmp_path):
    """A bidirectional acceptor has no step model: a plain export writes the whole-sequence model
    for [1, data.max_length]; asking for the step model is refused and writes nothing."""
    from seqkit.errors import SeqkitError
    from seqkit.export.writer import export_run
    from seqkit.training.train import load_run

    with pytest.raises(SeqkitError, match=r"bidirectional.*seqkit export .*run` does so when --step"):
        export_run(runs["bi_acceptor"], str(tmp_path / "e"), parity_examples=4, full_sequence=False)
    assert os.listdir(tmp_path) == []
    report = export_run(runs["bi_acceptor"], str(tmp_path / "e"), parity_examples=4)
    assert report["tflite"]["max_abs_diff"] <= 1e-4
    meta = json.load(open(tmp_path / "e" / "metadata.json"))
    prep, _ = load_run(runs["bi_acceptor"])
    assert meta["artefact"] == "full_sequence"
    assert (meta["full_sequence"]["batch"], meta["full_sequence"]["length"]) == (1, prep.recipe.data.max_length)


def test_full_sequence_export_padded_batch_equals_unpadded(runs, tmp_path):
    from seqkit.export.tflite import interpreter
    from seqkit.export.writer import export_run
    from seqkit.runtime.full_sequence import FullSequenceModel
    from seqkit.runtime.streaming import StreamingModel
    from seqkit.errors import SeqkitError
    from seqkit.training.train import load_run

    out = str(tmp_path / "e")
    report = export_run(runs["bi_acceptor"], out, fmt="all", full_sequence=True, batch=3,
                        length=6, parity_examples=7)
    assert report["tflite"]["max_abs_diff"] <= 1e-5 and report["saved_model_predict"]["max_abs_diff"] <= 1e-5
    ops = report["tflite"]["ops"]
    assert _no_flex(ops) and {"WHILE", "REVERSE_V2"} <= set(ops)
    meta = json.load(open(os.path.join(out, "metadata.json")))
    assert meta["artefact"] == "full_sequence" and meta["state_layout"] == []
    assert meta["full_sequence"]["input"] == {"name": "frames", "dtype": "float32", "shape": [3, 6, 2],
                                              "kind": "frame"}
    prep, model = load_run(runs["bi_acceptor"])
    rng = np.random.default_rng(0)
    rows = [rng.normal(size=(n, 2)).astype("float32") for n in (2, 6, 4)]
    # one padded [3, 6, 2] batch (NaN padding) through the .tflite ...
    x = np.full((3, 6, 2), np.nan, np.float32)
    for i, r in enumerate(rows):
        x[i, : len(r)] = r
    runner = interpreter(os.path.join(out, "model.tflite")).get_signature_runner("predict")
    padded = runner(frames=x)["logits"]
    # ... equals Keras on each sequence alone, unpadded (normalised as in training)
    for i, r in enumerate(rows):
        alone = model(prep.head.inputs.normalizer(r)[None]).numpy()[0]
        np.testing.assert_allclose(padded[i], alone, atol=1e-5)
    got = FullSequenceModel(out).predict(rows + rows[:1])  # 4 rows: two calls, filler rows
    np.testing.assert_allclose(np.stack(got[:3]), padded, atol=1e-6)
    lone = str(tmp_path / "acc.tflite")  # the model alone: its metadata is embedded
    shutil.copy(os.path.join(out, "model.tflite"), lone)
    alone = FullSequenceModel(lone)
    assert alone.metadata == meta
    assert all(a.tobytes() == b.tobytes() for a, b in zip(alone.predict(rows), got))
    with pytest.raises(SeqkitError, match="longer than this export's pinned length 6"):
        FullSequenceModel(out).predict([np.zeros((7, 2), np.float32)])
    with pytest.raises(SeqkitError, match="full-sequence model"):
        StreamingModel(out)


def test_full_sequence_tagger_int8_agrees(runs, tmp_path):
    from seqkit.export.writer import export_run

    report = export_run(runs["tagger"], str(tmp_path / "e"), full_sequence=True, batch=2,
                        quantize="dynamic-range", parity_examples=6)
    assert report["tflite"]["argmax_agreement"] >= 0.99 and _no_flex(report["tflite"]["ops"])
    assert "WHILE" in report["tflite"]["ops"]


def test_cli_stream_acceptor_and_tagger(runs, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.heads.sequence.predict import predict, read_records
    from seqkit.training.train import load_run

    r = CliRunner()
    acc, tag = str(tmp_path / "acc"), str(tmp_path / "tag")
    for run, out in ((runs["acceptor"], acc), (runs["tagger"], tag)):
        res = r.invoke(main, ["export", run, "--out", out, "--parity-examples", "4"])
        assert res.exit_code == 0, res.output
    ts = TS_HEAD.replace("@classLabel true up down", "@classLabel false") + ts_case(1, False) + ts_case(4, False)
    (tmp_path / "x.ts").write_text(ts)
    res = r.invoke(main, ["stream", acc, "--input", str(tmp_path / "x.ts")])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert len(lines) == 4 + 3 and lines[0].split("\t")[1] == "step 1"
    finals = [ln.split("\t")[2] for ln in lines if ln.endswith("final")]
    prep, model = load_run(runs["acceptor"])
    want = [p["label"] for p in predict(prep, model, read_records(ts, "x.ts", "ts", prep))]
    assert finals == want
    res = r.invoke(main, ["stream", tag], input="the dog sleeps\na cat runs fast\n")
    assert res.exit_code == 0, res.output
    prep, model = load_run(runs["tagger"])
    recs = read_records("the dog sleeps\na cat runs fast\n", "-", "text", prep)
    want = [" ".join(f"{w}/{t}" for w, t in zip(p["tokens"], p["tags"])) for p in predict(prep, model, recs)]
    assert res.output.splitlines() == want
    res = r.invoke(main, ["stream", tag], input="the qqqxz dog\n")  # an unknown word: warned, once
    assert res.exit_code == 0, res.output
    assert "1 of 3 input tokens are not in the export's vocabulary" in res.stderr and "'qqqxz'" in res.stderr
    res = r.invoke(main, ["inspect", acc])
    assert res.exit_code == 0 and "pool_sum" in res.output and "input frame" in res.output


def test_cli_stream_of_full_sequence_exports_equals_predict(runs, tmp_path):
    """A bidirectional acceptor (and a tagger exported --full-sequence) streams whole sequences:
    one final answer per utterance / every tag of a line, as `seqkit predict` gives them."""
    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.heads.sequence.predict import predict, read_records
    from seqkit.training.train import load_run

    r = CliRunner()
    acc, tag = str(tmp_path / "bacc"), str(tmp_path / "ftag")
    for run, out in ((runs["bi_acceptor"], acc), (runs["tagger"], tag)):
        res = r.invoke(main, ["export", run, "--out", out, "--full-sequence", "--batch", "2",
                              "--parity-examples", "4"])
        assert res.exit_code == 0, res.output
    ts = (TS_HEAD.replace("@classLabel true up down", "@classLabel false") + ts_case(1, False)
          + ts_case(4, False) + ts_case(7, False))
    (tmp_path / "x.ts").write_text(ts)
    res = r.invoke(main, ["stream", acc, "--input", str(tmp_path / "x.ts")])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert len(lines) == 3 and all(ln.endswith("final") for ln in lines)
    prep, model = load_run(runs["bi_acceptor"])
    want = [p["label"] for p in predict(prep, model, read_records(ts, "x.ts", "ts", prep))]
    assert [ln.split("\t")[2] for ln in lines] == want
    text = "the dog sleeps\na cat runs fast\nthe cat\n"
    res = r.invoke(main, ["stream", tag], input=text)
    assert res.exit_code == 0, res.output
    prep, model = load_run(runs["tagger"])
    want = [" ".join(f"{w}/{t}" for w, t in zip(p["tokens"], p["tags"]))
            for p in predict(prep, model, read_records(text, "-", "text", prep))]
    assert res.output.splitlines() == want
    pinned = json.load(open(os.path.join(tag, "metadata.json")))["full_sequence"]["length"]
    res = r.invoke(main, ["stream", tag], input="the cat\n" + "the " * (pinned + 1) + "\n")
    assert res.exit_code != 0 and f":2: a sequence of {pinned + 1} steps is longer" in res.output


def test_bidirectional_run_exports_a_saved_model_predict_without_full_sequence(runs, tmp_path):
    """What the refusal message offers works: --format saved_model alone (predict, any shape);
    streaming such an export says it is SavedModel-only."""
    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.export.writer import export_run

    out = str(tmp_path / "sm")
    report = export_run(runs["bi_acceptor"], out, fmt="saved_model", parity_examples=5)
    assert report["saved_model_predict"]["max_abs_diff"] <= 1e-5
    assert sorted(os.listdir(out)) == ["labels.json", "metadata.json", "parity.json", "saved_model"]
    assert json.load(open(os.path.join(out, "metadata.json")))["artefact"] == "predict"
    res = CliRunner().invoke(main, ["stream", out, "--input", "x.ts"])
    assert res.exit_code == 2 and "SavedModel-only export" in res.output


def test_stream_refuses_stdin_that_is_not_utf8(runs, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.export.writer import export_run

    out = str(tmp_path / "tag")
    export_run(runs["tagger"], out, parity_examples=3)
    res = CliRunner().invoke(main, ["stream", out], input=b"the \xce\xd2 dog\n")
    assert res.exit_code == 2 and "<stdin>: not UTF-8" in res.output and "iconv" in res.output
    res = CliRunner().invoke(main, ["stream", out, "--prompt", "the dog"], input="the dog\n")
    assert res.exit_code == 2 and "--prompt is for language-model exports" in res.output
