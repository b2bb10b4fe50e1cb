"""Shipping a run as a device would take it: the portable ``.keras`` file checked with a relative
tolerance, every ``.tflite`` verified in LiteRT's default interpreter (XNNPACK on), export from a
copied run directory without its data, one consistent metadata schema, and the standalone
``examples/litert_stream.py`` giving ``seqkit stream``'s output."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest


@pytest.fixture(scope="module")
def loud_lm(tiny_lm, tmp_path_factory):
    """A copy of the tiny trained LM whose output layer is scaled by 1000: logits in the thousands,
    where float32 values are ~1e-4 apart."""
    from seqkit.training.train import load_model

    run = str(tmp_path_factory.mktemp("loud") / "run")
    shutil.copytree(tiny_lm("lstm"), run)
    model = load_model(os.path.join(run, "model.keras"))
    dense = [layer for layer in model.layers if layer.__class__.__name__ == "Dense"][-1]
    dense.set_weights([w * 1000.0 for w in dense.get_weights()])
    model.save(os.path.join(run, "model.keras"))
    return run


def test_keras_export_of_large_logits_passes_a_relative_tolerance(loud_lm, tmp_path):
    from seqkit.export.portable import export_portable_keras

    report = export_portable_keras(loud_lm, str(tmp_path / "k"))
    # an absolute 1e-6 could not hold at this scale; relative to the largest output it does
    assert report["max_abs_diff"] > 1e-6
    assert report["max_rel_diff"] <= 1e-5 == report["tolerance"]
    assert report["max_rel_diff"] == pytest.approx(report["max_abs_diff"] / report["scale"])
    assert report["scale"] > 100


def test_keras_export_honours_tolerance_from_the_cli(loud_lm, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main

    res = CliRunner().invoke(main, ["export", loud_lm, "--format", "keras", "--out",
                                    str(tmp_path / "k"), "--tolerance", "1e-12"])
    assert res.exit_code != 0 and "--tolerance 1e-12" in res.output, res.output
    assert not (tmp_path / "k" / "model.keras").exists()
    res = CliRunner().invoke(main, ["export", loud_lm, "--format", "keras", "--out",
                                    str(tmp_path / "k"), "--tolerance", "1e-3"])
    assert res.exit_code == 0 and "tolerance 0.001" in res.output, res.output


TAG_TRAIN = "".join(["the/D dog/N runs/V\n", "a/D cat/N sleeps/V fast/R\n", "the/D cat/N runs/V\n",
                     "a/D dog/N sleeps/V\n"] * 6)


@pytest.fixture(scope="module")
def moved_tagger(tmp_path_factory, keras):
    """``(original run, copy)``: a tiny tagger trained on a word/TAG file, and a copy of its run
    directory in another folder, with the data file deleted."""
    import yaml

    from seqkit.recipe import load_recipe
    from seqkit.training.train import train

    d = tmp_path_factory.mktemp("tagger_data")
    (d / "train.txt").write_text(TAG_TRAIN, encoding="utf-8")
    (d / "r.yaml").write_text(yaml.safe_dump({
        "name": "tag", "seed": 1,
        "data": {"source": "word_tag", "path": str(d / "train.txt"), "max_length": 8,
                 "split": {"valid": 0.2, "test": 0.2, "shuffle": True}},
        "model": {"cell": "lstm", "units": 8, "embedding_dim": 6, "layers": 1},
        "head": {"type": "tagger"},
        "training": {"epochs": 2, "batch_size": 4, "early_stopping": None}}), encoding="utf-8")
    train(load_recipe(str(d / "r.yaml")), str(d / "run"), verbose=0)
    copy = tmp_path_factory.mktemp("elsewhere") / "run"
    shutil.copytree(d / "run", copy)
    (d / "train.txt").unlink()
    return str(d / "run"), str(copy), str(d)


def _strings(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)
    elif isinstance(obj, str):
        yield obj


def test_the_run_keeps_a_fixed_seeded_export_sample(moved_tagger):
    from seqkit.export.sample import CALIBRATION_RECORDS, read_export_sample

    _, copy, data_dir = moved_tagger
    with open(os.path.join(copy, "export_sample.json"), encoding="utf-8") as f:
        raw = json.load(f)
    assert raw["format"] == "seqkit export sample" and raw["version"] == 1 and raw["seed"] == 1
    sample = read_export_sample(copy)
    # 24 records, 20% test (5) and 20% valid: 14 training records, all kept (< 128)
    assert len(sample["parity"]) == 5 and len(sample["calibration"]) == 14 < CALIBRATION_RECORDS
    assert all(r.tokens and len(r.tags) == len(r.tokens) for r in sample["parity"])
    assert not any(data_dir in s for s in _strings(raw))  # file names only
    from seqkit.runs.rundir import not_a_run_because

    assert not_a_run_because(copy) is None  # still a run seqkit may replace (train --overwrite)


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_a_copied_run_exports_without_its_data(moved_tagger, tmp_path, quantize):
    from seqkit.export.embedded_metadata import read

    _, copy, data_dir = moved_tagger
    from seqkit.export.writer import export_run

    report = export_run(copy, str(tmp_path / "e"), quantize=quantize, parity_examples=32,
                        min_agreement=0)  # a 2-epoch toy: the gate is not the point here
    assert report["examples"] == 5  # the sample's held-out records
    if quantize == "int8":
        assert report["calibration"]["examples"] == 14
    meta = read(str(tmp_path / "e" / "model.tflite"))
    assert not any(data_dir in s or s.startswith("/") for s in _strings(meta))
    assert meta["recipe"]["data"]["path"] == "train.txt"
    assert meta["verified"]["configuration"] == "default" and meta["verified"]["delegates"] == ["XNNPACK"]
    assert meta["schema_version"] == 1 and meta["tokenization"] == "whitespace"
    assert "tokenizer" not in meta and "token_mode" not in meta


def test_records_files_replace_calibration_and_parity(moved_tagger, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main

    _, copy, _ = moved_tagger
    (tmp_path / "cal.jsonl").write_text("".join(
        json.dumps({"tokens": s.split(), "tags": ["D", "N", "V"][:len(s.split())]}) + "\n"
        for s in ["the dog runs", "a cat sleeps", "the cat runs"]), encoding="utf-8")
    (tmp_path / "par.jsonl").write_text('{"tokens": ["a", "dog", "runs"], "tags": ["D", "N", "V"]}\n'
                                        '{"tokens": ["the", "cat"], "tags": ["D", "N"]}\n',
                                        encoding="utf-8")
    res = CliRunner().invoke(main, ["export", copy, "--out", str(tmp_path / "e"), "--quantize", "int8",
                                    "--min-agreement", "0", "--calibration", str(tmp_path / "cal.jsonl"),
                                    "--parity", str(tmp_path / "par.jsonl")])
    assert res.exit_code == 0, res.output
    parity = json.loads((tmp_path / "e" / "parity.json").read_text(encoding="utf-8"))
    assert parity["examples"] == 2 and parity["tflite"]["positions"] == 5
    assert parity["calibration"]["examples"] == 3
    (tmp_path / "bad.jsonl").write_text('{"tokens": ["a"]}\n{"words": ["b"]}\n', encoding="utf-8")
    res = CliRunner().invoke(main, ["export", copy, "--out", str(tmp_path / "f"),
                                    "--parity", str(tmp_path / "bad.jsonl")])
    assert res.exit_code != 0 and "bad.jsonl:2" in res.output and "words" in res.output
    assert not (tmp_path / "f").exists()


def test_full_sequence_int8_tagger_runs_in_the_default_interpreter(moved_tagger, tmp_path):
    from ai_edge_litert.interpreter import Interpreter

    from seqkit.export.embedded_metadata import read
    from seqkit.export.writer import export_run
    from seqkit.runtime.full_sequence import FullSequenceModel

    _, copy, _ = moved_tagger
    out = tmp_path / "fs"
    export_run(copy, str(out), full_sequence=True, batch=1, quantize="int8", parity_examples=8,
               min_agreement=0)
    model = str(out / "model.tflite")
    assert read(model)["verified"]["delegates"] == ["XNNPACK"]
    it = Interpreter(model_path=model)  # what an app writes: the default op resolver
    it.allocate_tensors()
    x = np.zeros(it.get_input_details()[0]["shape"], np.int32)
    x[0, :3] = [2, 3, 4]
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    plain = it.get_tensor(it.get_output_details()[0]["index"])[0, :3]
    ours = FullSequenceModel(str(out)).predict([x[0, :3]])[0]
    np.testing.assert_array_equal(np.argmax(plain, -1), np.argmax(ours, -1))
    np.testing.assert_allclose(plain, ours, atol=1e-6)


SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                      "litert_stream.py")


def _standalone(args, stdin=""):
    """Run examples/litert_stream.py where ``import seqkit`` fails; return its stdout."""
    import subprocess
    import sys

    code = ("import runpy, sys\nsys.modules['seqkit'] = None\nsys.argv = sys.argv[1:]\n"
            "runpy.run_path(sys.argv[0], run_name='__main__')\n"
            "assert not [m for m, v in sys.modules.items() if v and m.startswith(('seqkit', 'tensorflow'))]\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-c", code, SCRIPT, *args], input=stdin, capture_output=True,
                         text=True, env=env, timeout=120, cwd=os.path.dirname(SCRIPT))
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def _seqkit_stream(args, stdin=""):
    from click.testing import CliRunner

    from seqkit.cli import main

    res = CliRunner().invoke(main, ["stream", *args], input=stdin)
    assert res.exit_code == 0, res.output
    return res.stdout


def test_standalone_script_generates_what_seqkit_stream_generates(tiny_lm_export, tmp_path):
    export, _ = tiny_lm_export("lstm")
    lone = str(tmp_path / "lm.tflite")
    shutil.copy(os.path.join(export, "model.tflite"), lone)  # the file alone, metadata inside
    made = []
    for flags in (["--greedy", "--max-length", "30"],
                  ["--temperature", "0.9", "--top-k", "5", "--seed", "3", "--max-length", "25"],
                  ["--temperature", "1.5", "--seed", "11", "--max-length", "25"]):
        args = [lone, "--prompt", "The ", *flags]
        ours = _standalone(args)
        assert ours == _seqkit_stream(args), flags
        assert ours.startswith("The ")
        made.append(ours)
    assert max(len(m) for m in made) > len("The \n") + 5  # some generated text to compare


def test_standalone_script_tags_what_seqkit_stream_tags(moved_tagger, tmp_path):
    from seqkit.export.writer import export_run

    _, copy, _ = moved_tagger
    export_run(copy, str(tmp_path / "e"), parity_examples=8)
    lone = str(tmp_path / "tagger.tflite")
    shutil.copy(str(tmp_path / "e" / "model.tflite"), lone)
    text = "the dog runs\n\na cat sleeps fast\nthe zebra runs\n"
    ours = _standalone([lone], text)
    assert ours == _seqkit_stream([lone], text)
    assert [len(line.split()) for line in ours.splitlines()] == [3, 4, 3]
    assert ours.splitlines()[2].startswith("the/")
