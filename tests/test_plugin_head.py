"""A head seqkit does not ship (``examples/heads/sequence_regression.py``, the example of
docs/heads.md: per-sequence regression, loaded with ``--plugin``) goes through every command: train, evaluate, predict, export (TFLite,
parity checked), stream from the lone ``.tflite``, ``--json``; diagnose refuses it by name. And no
built-in head is named outside ``seqkit/heads/``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from seqkit.cli import main

HEAD = str(Path(__file__).parent.parent / "examples" / "heads" / "sequence_regression.py")


def _data(path: Path, n: int, seed: int) -> None:
    """Rows ``text<TAB>value``: 3-8 tokens from {a, b, c}; the value is the number of ``a``s."""
    rng = np.random.default_rng(seed)
    rows = ["text\tlabel"]
    for _ in range(n):
        toks = rng.choice(["a", "b", "c"], size=int(rng.integers(3, 9)))
        rows.append(f"{' '.join(toks)}\t{int((toks == 'a').sum())}")
    path.write_text("\n".join(rows) + "\n")


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory, keras):
    d = tmp_path_factory.mktemp("plugin_head")
    _data(d / "counts.tsv", 400, 0)
    recipe = {"name": "counts", "seed": 1,
              "data": {"source": "table", "path": str(d / "counts.tsv"), "format": "tsv",
                       "tokenizer": "whitespace", "max_length": 12,
                       "split": {"valid": 0.1, "test": 0.2, "shuffle": True}},
              "model": {"cell": "gru", "units": 24, "embedding_dim": 8, "layers": 1},
              "head": {"type": "sequence_regression"},
              "training": {"epochs": 25, "batch_size": 32, "learning_rate": 0.01}}
    (d / "r.yaml").write_text(json.dumps(recipe))
    run = str(d / "run")
    res = CliRunner().invoke(main, ["train", str(d / "r.yaml"), "--run-dir", run, "--plugin", HEAD])
    assert res.exit_code == 0, res.output
    assert "has no example of" not in res.output  # label_classes = False: counts are not classes
    assert "baseline training-mean: test mae" in res.output
    return d, run


def test_plugin_head_trains_and_beats_the_mean(plugin_run):
    d, run = plugin_run
    res = CliRunner().invoke(main, ["evaluate", run, "--json", "--plugin", HEAD])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    # counting 'a's: the learned model must beat predicting the training mean on the same test split
    assert got["mae"] < 0.7 * got["baselines"]["training-mean"]["test"]["mae"], got


def test_plugin_head_predicts_exports_and_streams_the_same_values(plugin_run, tmp_path):
    d, run = plugin_run
    lines = ["a a b c", "b b b", "c a a a a b", "a"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    r = CliRunner()
    res = r.invoke(main, ["predict", run, "--input", str(tmp_path / "in.txt"), "--format", "jsonl",
                          "--plugin", HEAD])
    assert res.exit_code == 0, res.output
    predicted = [json.loads(x)["value"] for x in res.stdout.splitlines()]
    assert len(predicted) == 4
    assert abs(predicted[2] - 4) < 1.0 and abs(predicted[1]) < 1.0  # it learned to count

    out = str(tmp_path / "export")
    res = r.invoke(main, ["export", run, "--out", out, "--parity-examples", "8", "--plugin", HEAD])
    assert res.exit_code == 0, res.output
    parity = json.loads((Path(out) / "parity.json").read_text())
    assert parity["tflite"]["max_abs_diff"] < 1e-4  # step model streamed == Keras whole sequence

    tflite = str(Path(out) / "model.tflite")  # the lone file: metadata inside it
    os.remove(Path(out) / "metadata.json")
    res = r.invoke(main, ["stream", tflite, "--input", str(tmp_path / "in.txt"), "--plugin", HEAD])
    assert res.exit_code == 0, res.output
    streamed = [float(x.split("\t")[1]) for x in res.stdout.splitlines()]
    np.testing.assert_allclose(streamed, predicted, atol=2e-4)

    import seqkit
    from seqkit.runtime.request import stream

    assert stream(tflite, text="\n".join(lines), name=str(tmp_path / "in.txt")) == res.stdout  # the Python call the CLI makes

    # the plugin not given, in a fresh process (this one has the head registered now)
    res = subprocess.run([sys.executable, "-m", "seqkit.cli", "stream", tflite, "--input",
                          str(tmp_path / "in.txt")], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "sequence_regression" in res.stderr and "--plugin" in res.stderr
    assert seqkit.load(run).predict("\n".join(lines)) == [
        {"where": f"<input>:{i}", "value": v} for i, v in enumerate(predicted, start=1)]


def test_plugin_head_exports_full_integer_calibrated_on_its_own_inputs(plugin_run, tmp_path):
    """int8 calibration reads the head's parity_inputs (not a language model's text pairs): the
    quantized step model streams values close to the float model's."""
    d, run = plugin_run
    out = str(tmp_path / "q8")
    res = CliRunner().invoke(main, ["export", run, "--out", out, "--quantize", "int8", "--parity-examples", "8",
                                    "--plugin", HEAD])
    assert res.exit_code == 0, res.output
    parity = json.loads((Path(out) / "parity.json").read_text())
    assert 0 < parity["tflite"]["max_abs_diff"] < 0.25, parity["tflite"]  # standardised units
    lines = "a a b c\nb b b\nc a a a a b\n"
    float_values = [r["value"] for r in __import__("seqkit").load(run).predict(lines)]
    from seqkit.runtime.request import stream

    streamed = [float(x.split("\t")[1]) for x in stream(out, text=lines).splitlines()]
    np.testing.assert_allclose(streamed, float_values, atol=0.5)


def test_plugin_head_is_refused_where_it_declares_nothing(plugin_run, tmp_path):
    d, run = plugin_run
    r = CliRunner()
    res = r.invoke(main, ["diagnose", run, "--out", str(tmp_path / "d.png"), "--plugin", HEAD])
    assert "Traceback" not in res.output, res.output
    assert "declares none" in res.output and "sequence_regression" in res.output, res.output
    res = r.invoke(main, ["plot", run, "--out", str(tmp_path / "curves.png"), "--plugin", HEAD])
    assert res.exit_code == 0, res.output  # training curves: generic, from history.json
    curves = json.loads((tmp_path / "curves.json").read_text())["runs"][run]
    assert len(curves["epoch"]) == len(curves["series"]["loss"]) >= 1
    res = r.invoke(main, ["generate", run, "--plugin", HEAD])
    assert res.exit_code != 0 and "generate needs a language_model run" in res.output
    assert "use `seqkit predict`" in res.output


BUILTIN = re.compile(r"""["'](seq2seq|language_model|tagger|acceptor)["']""")
#: files that may name a built-in head outside seqkit/heads/, and why
ALLOWED: dict = {}


def test_no_builtin_head_is_named_outside_the_heads():
    root = Path(__file__).parent.parent
    found = []
    for path in sorted((root / "seqkit").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("seqkit/heads/") or rel in ALLOWED:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if BUILTIN.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert found == [], "\n".join(found)


def test_the_machinery_imports_no_builtin_head():
    """Outside ``seqkit/heads/`` nothing imports a built-in head's modules (``seqkit.heads`` itself,
    for the default head's name, and the contract ``seqkit.heads.base`` with its checks
    ``seqkit.heads.contract`` aside); the one exception,
    ``seqkit.runtime.Seq2SeqModel``, is looked up on first use for code written against it."""
    import ast

    root = Path(__file__).parent.parent
    allowed = {"seqkit.heads", "seqkit.heads.base", "seqkit.heads.contract"}
    found = []
    for path in sorted((root / "seqkit").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("seqkit/heads/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            mod = node.module if isinstance(node, ast.ImportFrom) else None
            if mod and mod.startswith("seqkit.heads") and mod not in allowed:
                found.append(f"{rel}:{node.lineno}: {mod}")
    assert [f.split(":")[0] + " " + f.split(": ")[1] for f in found] == [
        "seqkit/runtime/__init__.py seqkit.heads.seq2seq.runtime"], found


def test_damaged_plugin_assets_and_non_finite_targets_are_named(plugin_run, tmp_path):
    """The example head checks the file it keeps in the run and its targets; the file and row named."""
    import shutil

    d, run = plugin_run
    (tmp_path / "in.txt").write_text("a b c\n")
    for text in ("{}", '{"mean": 0, "std": 0}', "garbage", '{"mean": NaN, "std": 1}'):
        bad = tmp_path / "bad"
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(run, bad)
        (bad / "regression_target.json").write_text(text)
        res = CliRunner().invoke(main, ["predict", str(bad), "--input", str(tmp_path / "in.txt"), "--plugin", HEAD])
        assert res.exit_code == 2 and "regression_target.json" in res.output, (text, res.output)
        assert "internal error" not in res.output
    rows = (d / "counts.tsv").read_text().splitlines()
    (tmp_path / "nan.tsv").write_text("\n".join(rows[:5] + ["a b\tnan"] + rows[5:60]) + "\n")
    recipe = json.loads((d / "r.yaml").read_text())
    recipe["data"]["path"] = str(tmp_path / "nan.tsv")
    (tmp_path / "r.yaml").write_text(json.dumps(recipe))
    res = CliRunner().invoke(main, ["train", str(tmp_path / "r.yaml"), "--run-dir", str(tmp_path / "r"),
                                    "--plugin", HEAD])
    assert res.exit_code == 2 and "nan.tsv:6: 'nan' is not a finite number" in res.output, res.output


def test_an_exception_in_a_plugin_heads_code_names_the_plugin_and_line(plugin_run, tmp_path):
    """A head plugin whose own code raises (here: its load_assets, on every run) gets an error
    naming the plugin, its file and line, not seqkit's 'internal error'."""
    d, run = plugin_run
    plugin = tmp_path / "broken_head.py"
    plugin.write_text(  # loaded after the example (--plugin HEAD --plugin broken_head.py)
        "from seqkit.registry import HEADS, register_head\n"
        "\n"
        "\n"
        "@register_head('broken_regression')\n"
        "class Broken(HEADS.get('sequence_regression')):\n"
        "    def load_assets(self, run_dir):\n"
        "        return {}['mean']\n")
    recipe = json.loads((d / "r.yaml").read_text())
    recipe["head"]["type"] = "broken_regression"
    recipe["training"]["epochs"] = 1
    (tmp_path / "r.yaml").write_text(json.dumps(recipe))
    run = str(tmp_path / "run")
    from seqkit.registry import HEADS

    try:
        res = CliRunner().invoke(main, ["train", str(tmp_path / "r.yaml"), "--run-dir", run, "--plugin", HEAD,
                                        "--plugin", str(plugin)])
        assert res.exit_code == 0, res.output  # training writes the assets and never loads them
        res = CliRunner().invoke(main, ["evaluate", run, "--plugin", HEAD, "--plugin", str(plugin)])
    finally:  # the head stays out of later tests' lists of heads
        HEADS._entries.pop("broken_regression", None)
    assert res.exit_code == 2, res.output
    assert (f"head.type: the plugin head 'broken_regression' from {plugin} failed in load_assets() "
            f"({plugin}:7): KeyError: 'mean'") in res.output, res.output
    assert "internal error" not in res.output


def test_a_plugin_head_reads_a_table_input_by_its_text_column(plugin_run, tmp_path):
    """The default read_inputs: a .tsv / .jsonl input is a table, read by the head's first table
    column (text), row for row as the same texts given a line each."""
    d, run = plugin_run
    texts = ["a a b", "c c", "b a a a"]
    (tmp_path / "in.tsv").write_text("id\ttext\n" + "".join(f"{i}\t{t}\n" for i, t in enumerate(texts)))
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t, "n": i}) + "\n" for i, t in enumerate(texts)))
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n")
    got = {}
    for name in ("in.tsv", "in.jsonl", "in.txt"):
        res = CliRunner().invoke(main, ["predict", run, "--input", str(tmp_path / name), "--format", "jsonl",
                                        "--plugin", HEAD])
        assert res.exit_code == 0, res.output
        got[name] = [json.loads(x) for x in res.stdout.splitlines()]
    values = [r["value"] for r in got["in.txt"]]
    assert [r["value"] for r in got["in.tsv"]] == [r["value"] for r in got["in.jsonl"]] == values
    assert [r["where"].rsplit(":", 1)[1] for r in got["in.tsv"]] == ["2", "3", "4"]


def test_a_bidirectional_plugin_head_without_a_whole_sequence_export_is_pointed_at_the_saved_model(plugin_run, tmp_path):
    d, _ = plugin_run
    recipe = json.loads((d / "r.yaml").read_text())
    recipe["model"]["bidirectional"], recipe["training"]["epochs"] = True, 1
    (tmp_path / "r.yaml").write_text(json.dumps(recipe))
    run = str(tmp_path / "bi")
    assert CliRunner().invoke(main, ["train", str(tmp_path / "r.yaml"), "--run-dir", run, "-q",
                                     "--plugin", HEAD]).exit_code == 0
    for extra in ([], ["--full-sequence"]):
        res = CliRunner().invoke(main, ["export", run, "--out", str(tmp_path / "e"), "--plugin", HEAD, *extra])
        assert res.exit_code == 2 and "exports no whole-sequence TFLite model either" in res.output, res.output
        assert "--format saved_model" in res.output and not (tmp_path / "e").exists()
    res = CliRunner().invoke(main, ["export", run, "--out", str(tmp_path / "e"), "--format", "saved_model",
                                    "--parity-examples", "4", "--plugin", HEAD])
    assert res.exit_code == 0, res.output
