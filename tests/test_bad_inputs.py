"""A catalogue of bad inputs, tried as a hostile new user would.

Every case runs one CLI command through click's runner in a folder that holds a
user's recipe, data, plugin files, a finished run and an export. Each must:

* exit non-zero through a clear error (``SystemExit``, no traceback, never the
  ``internal error`` fallback),
* print a message that names the file, key or flag at fault, and
* change nothing on disk: the folder's listing and every file's bytes are the
  same before and after (``__pycache__`` folders that Python writes when it
  imports a plugin file are ignored).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest
import yaml
from click.testing import CliRunner

from seqkit.cli import main
from tests.conftest import make_recipe

TINY = dict(data={"limit": 160}, training={"epochs": 1})


def _tree(root) -> dict:
    """``{relative path: sha256 or 'dir'}`` of everything under ``root`` (no ``__pycache__``)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        rel = os.path.relpath(dirpath, root)
        out[rel] = "dir"
        for f in filenames:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.join(rel, f)] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory, keras, tiny_lm):
    """Two tiny finished runs and an export of the first, made once: "run", a copy of the
    session's 2-layer LSTM LM (conftest ``tiny_lm``, 16 units), and "other" (1 layer, 24 units),
    trained here through the CLI."""
    d = tmp_path_factory.mktemp("made")
    runner = CliRunner()
    shutil.copytree(tiny_lm("lstm"), d / "run")
    r = d / "other.yaml"
    r.write_text(yaml.safe_dump(make_recipe(model={"units": 24, "embedding_dim": 8}, **TINY)))
    res = runner.invoke(main, ["train", str(r), "--run-dir", str(d / "other"), "--quiet"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["export", str(d / "run"), "--out", str(d / "export"), "--format", "tflite"])
    assert res.exit_code == 0, res.output
    return d


@pytest.fixture
def home(tmp_path, trained, monkeypatch):
    """A user's folder: recipe.yaml, corpus.txt, notes.txt, a finished run, its export."""
    u = tmp_path / "user"
    u.mkdir()
    (u / "recipe.yaml").write_text(yaml.safe_dump(make_recipe(**TINY), sort_keys=False))
    (u / "corpus.txt").write_text("the cat sat on the mat\n" * 40)
    (u / "notes.txt").write_text("my thesis, do not delete\n")
    shutil.copytree(trained / "run", u / "run")
    shutil.copytree(trained / "export", u / "export")
    shutil.copy(trained / "other" / "model.keras", u / "other_model.keras")  # a model of another run
    monkeypatch.chdir(u)
    return u


def recipe(u, fname="bad.yaml", text=None, **sections):
    """Write a recipe (a dict merged into the tiny one, or raw ``text``) into the user's folder."""
    p = u / fname
    p.write_text(text if text is not None else yaml.safe_dump(make_recipe(**{**TINY, **sections}), sort_keys=False))
    return str(p)


def plugin(u, name, body):
    p = u / name
    p.write_text(body)
    return str(p)


def edit_run(u, fname, text=None, data=None):
    p = u / "run" / fname
    if data is not None:
        p.write_bytes(data)
    elif text is None:
        p.unlink()
    else:
        p.write_text(text)
    return "run"


RAISING_CELL = '''
import keras
import seqkit
from seqkit.cells.base import CellPlugin


class BadCell(keras.layers.Layer):
    """A cell whose call multiplies by a matrix of the wrong shape (a raw TF shape error)."""

    def __init__(self, units, **kw):
        super().__init__(**kw)
        self.units, self.state_size, self.output_size = units, units, units

    def call(self, x, states):
        y = keras.ops.matmul(x, keras.ops.ones((3, 3)))
        return y, [y]


@seqkit.register_cell("{name}")
class Broken(CellPlugin):
    def make_cell(self, name=None):
        return BadCell(self.spec.units, name=name)
'''

MARKER_PLUGIN = '''
import pathlib
pathlib.Path(__file__).with_name("RAN").write_text("code from the run directory ran")
'''

# (id, setup(u) -> argv, words the message must contain)
CASES = [
    # ---- recipes: syntax and keys
    ("yaml-syntax", lambda u: ["validate", recipe(u, text="name: x\ndata: [unclosed\n")], ["bad.yaml"]),
    ("empty-recipe", lambda u: ["validate", recipe(u, text="")], ["bad.yaml"]),
    ("recipe-is-a-list", lambda u: ["validate", recipe(u, text="- a\n- b\n")], ["bad.yaml"]),
    ("recipe-missing", lambda u: ["validate", "nope.yaml"], ["nope.yaml"]),
    ("unknown-top-key", lambda u: ["validate", recipe(u, trainig={"epochs": 1})], ["trainig"]),
    ("unknown-model-key", lambda u: ["validate", recipe(u, model={"unts": 3})], ["unts"]),
    ("units-not-number", lambda u: ["validate", recipe(u, model={"units": "abc"})], ["model.units"]),
    ("units-bool", lambda u: ["validate", recipe(u, model={"units": True})], ["model.units"]),
    ("layers-fraction", lambda u: ["validate", recipe(u, model={"layers": 2.5})], ["model.layers"]),
    ("epochs-string", lambda u: ["validate", recipe(u, training={"epochs": "1"})], ["training.epochs"]),
    ("dropout-bool", lambda u: ["validate", recipe(u, model={"bidirectional": "yes please"})],
     ["model.bidirectional"]),
    ("duplicate-key", lambda u: ["validate", recipe(u, text=open(recipe(u, "ok.yaml")).read()
                                                    + "seed: 3\nseed: 4\n")], ["seed"]),
    ("seed-negative", lambda u: ["validate", recipe(u, seed=-1)], ["seed"]),
    ("seed-too-big", lambda u: ["validate", recipe(u, seed=2 ** 32)], ["seed"]),
    ("name-dotdot", lambda u: ["validate", recipe(u, name="..")], ["name"]),
    ("name-dot", lambda u: ["validate", recipe(u, name=".")], ["name"]),
    ("name-slash", lambda u: ["validate", recipe(u, name="a/b")], ["name"]),
    ("lr-inf", lambda u: ["validate", recipe(u, text=open(recipe(u, "ok.yaml")).read().replace(
        "learning_rate: 0.01", "learning_rate: .inf"))], ["learning_rate"]),
    ("lr-nan", lambda u: ["validate", recipe(u, text=open(recipe(u, "ok.yaml")).read().replace(
        "learning_rate: 0.01", "learning_rate: .nan"))], ["learning_rate"]),
    ("lr-zero", lambda u: ["validate", recipe(u, training={"learning_rate": 0})], ["learning_rate"]),
    ("lr-negative", lambda u: ["validate", recipe(u, training={"learning_rate": -0.1})], ["learning_rate"]),
    ("batch-zero", lambda u: ["validate", recipe(u, training={"batch_size": 0})], ["batch_size"]),
    ("dropout-above-one", lambda u: ["validate", recipe(u, model={"dropout": 1.5})], ["model.dropout"]),
    ("split-above-one", lambda u: ["validate", recipe(u, data={"split": {"valid": 1.2}})], ["valid"]),
    ("tokenizer-unknown", lambda u: ["validate", recipe(u, data={"tokenizer": "bpe"})], ["tokenizer"]),
    ("optimizer-unknown", lambda u: ["validate", recipe(u, training={"optimizer": "adamx"})], ["optimizer"]),
    ("top-p-above-one", lambda u: ["validate", recipe(u, decoding={"top_p": 2})], ["top_p"]),
    ("cell-typo", lambda u: ["validate", recipe(u, model={"cell": "lstmm"})], ["lstm"]),
    ("head-unknown", lambda u: ["validate", recipe(u, head={"type": "parser"})], ["parser"]),
    ("source-unknown", lambda u: ["validate", recipe(u, data={"source": "mystery"})], ["mystery"]),
    ("limit-zero", lambda u: ["validate", recipe(u, data={"limit": 0})], ["limit"]),
    ("set-no-equals", lambda u: ["validate", "recipe.yaml", "--set", "training.epochs"], ["training.epochs"]),
    ("set-unknown-key", lambda u: ["validate", "recipe.yaml", "--set", "training.epohcs=3"], ["epohcs"]),
    ("set-bad-value", lambda u: ["validate", "recipe.yaml", "--set", "model.units=-4"], ["model.units"]),
    ("model-too-large", lambda u: ["train", "recipe.yaml", "--set", "model.units=2000000000",
                                   "--run-dir", "big"], ["model.units"]),
    # ---- data files
    ("data-file-missing", lambda u: ["train", recipe(u, data={"source": "text_lines", "path": "gone.txt"}),
                                     "--run-dir", "new"], ["gone.txt"]),
    ("data-file-empty", lambda u: ["train", recipe(u, data={"source": "text_lines", "path": str(
        plugin(u, "empty.txt", ""))}), "--run-dir", "new"], ["empty.txt"]),
    ("data-not-utf8", lambda u: [(u / "bin.txt").write_bytes(b"\xff\xfe\x00abc\n\x80\x81\n" * 5),
                                 "train", recipe(u, data={"source": "text_lines", "path": "bin.txt"}),
                                 "--run-dir", "new"][1:], ["bin.txt"]),
    ("tsv-no-tab", lambda u: ["train", recipe(u, data={"source": "tsv_text_label", "path": plugin(
        u, "labels.tsv", "no tab here\nnor here\n")}, head={"type": "acceptor"}), "--run-dir", "new"],
     ["labels.tsv"]),
    ("word-tag-malformed", lambda u: ["train", recipe(u, data={"source": "word_tag", "path": plugin(
        u, "tags.txt", "the/DT cat\n")}, head={"type": "tagger"}), "--run-dir", "new"], ["tags.txt"]),
    ("conll-one-column", lambda u: ["train", recipe(u, data={"source": "conll", "path": plugin(
        u, "c.conll", "the\ncat\n\n")}, head={"type": "tagger"}), "--run-dir", "new"], ["c.conll"]),
    ("ts-garbage", lambda u: ["train", recipe(u, data={"source": "ts", "path": plugin(
        u, "x.ts", "@problemName x\n@data\n1,2:3\n")}, head={"type": "acceptor"}), "--run-dir", "new"],
     ["x.ts"]),
    # ---- plugins
    ("plugin-file-missing", lambda u: ["validate", "recipe.yaml", "--plugin", "cells_gone.py"], ["cells_gone.py"]),
    ("plugin-module-missing", lambda u: ["validate", "recipe.yaml", "--plugin", "no_such_mod_xyz"],
     ["no_such_mod_xyz"]),
    ("plugin-syntax-error", lambda u: ["validate", "recipe.yaml", "--plugin", plugin(
        u, "syn.py", "def (:\n")], ["syn.py"]),
    ("plugin-raises", lambda u: ["validate", "recipe.yaml", "--plugin", plugin(
        u, "boom.py", "raise RuntimeError('boom at import')\n")], ["boom.py"]),
    ("recipe-plugin-missing", lambda u: ["validate", recipe(u, plugins=["gone_cells.py"])], ["gone_cells.py"]),
    ("plugin-cell-raises", lambda u: ["train", "recipe.yaml", "--plugin", plugin(
        u, "brokencell.py", RAISING_CELL.format(name="broken_cell_a")), "--set", "model.cell=broken_cell_a",
        "--run-dir", "new"], ["broken_cell_a"]),
    # ---- run directories
    ("run-missing", lambda u: ["evaluate", "no_run"], ["no_run"]),
    ("run-not-a-run", lambda u: ["evaluate", "."], ["run directory"]),
    ("run-exists", lambda u: ["train", "recipe.yaml", "--run-dir", "run"], ["--overwrite"]),
    ("overwrite-user-folder", lambda u: [(u / "docs").mkdir(), (u / "docs" / "thesis.txt").write_text("x"),
                                         "train", "recipe.yaml", "--run-dir", "docs", "--overwrite"][2:],
     ["docs"]),
    ("overwrite-cwd", lambda u: ["train", "recipe.yaml", "--run-dir", ".", "--overwrite"], ["current folder"]),
    ("overwrite-parent", lambda u: ["train", "recipe.yaml", "--run-dir", "..", "--overwrite"], ["current folder"]),
    ("overwrite-holds-recipe", lambda u: [(u / "proj").mkdir(), shutil.copy(u / "recipe.yaml", u / "proj"),
                                          "train", "proj/recipe.yaml", "--run-dir", "proj", "--overwrite"][2:],
     ["proj"]),
    ("resume-and-run-dir-differ", lambda u: ["train", "--resume", "run", "--run-dir", "elsewhere"],
     ["--resume"]),
    ("resume-not-a-run", lambda u: ["train", "--resume", "nowhere"], ["nowhere"]),
    ("resume-finished", lambda u: ["train", "--resume", "run"], ["training.epochs"]),
    ("state-json-corrupt", lambda u: ["train", "--resume", edit_run(u, "state.json", "{not json")],
     ["state.json"]),
    ("history-json-corrupt", lambda u: ["train", "--resume", edit_run(u, "history.json", "[1, 2"),
                                        "--set", "training.epochs=3"], ["history.json"]),
    ("recipe-in-run-corrupt", lambda u: ["evaluate", edit_run(u, "recipe.yaml", "name: [\n")],
     ["recipe.yaml"]),
    ("vocab-missing", lambda u: ["evaluate", edit_run(u, "vocab.json")], ["vocab.json"]),
    ("vocab-corrupt", lambda u: ["evaluate", edit_run(u, "vocab.json", "{{{")], ["vocab.json"]),
    ("model-cut-off", lambda u: ["evaluate", edit_run(u, "model.keras", data=(
        u / "run" / "model.keras").read_bytes()[:500])], ["model.keras"]),
    ("model-from-other-run", lambda u: [shutil.copy(u / "other_model.keras", u / "run" / "model.keras"),
                                                "evaluate", "run"][1:],
     ["model.keras"]),
    ("plugins-json-corrupt", lambda u: ["evaluate", edit_run(u, "plugins.json", "[{")], ["plugins.json"]),
    ("run-names-file-plugin", lambda u: [
        plugin(u / "run", "evil.py", MARKER_PLUGIN),
        edit_run(u, "recipe.yaml", (u / "run" / "recipe.yaml").read_text().replace(
            "plugins: []", "plugins: [evil.py]").replace("cell: lstm", "cell: evil_cell")),
        edit_run(u, "plugins.json", json.dumps([{"kind": "cell", "name": "evil_cell", "module": "evil",
                                                  "package": None, "version": None,
                                                  "file": str(u / "run" / "evil.py")}])),
        "generate", "run"][3:], ["--plugin"]),
    # ---- flags on commands that read a run or an export
    ("generate-temperature-zero", lambda u: ["generate", "run", "--temperature", "0"], ["--temperature"]),
    ("generate-num-huge", lambda u: ["generate", "run", "--num", "100000000"], ["--num"]),
    ("generate-nbest-above-beam", lambda u: ["generate", "run", "--beam-width", "2", "--n-best", "3"],
     ["--n-best"]),
    ("predict-on-lm", lambda u: ["predict", "run", "--input", "notes.txt"], ["run"]),
    ("export-overwrite-user-folder", lambda u: ["export", "run", "--out", ".", "--overwrite"], ["--out"]),
    ("export-exists", lambda u: ["export", "run", "--out", "export"], ["export"]),
    ("export-tolerance-nan", lambda u: ["export", "run", "--out", "e2", "--tolerance", "nan"], ["--tolerance"]),
    ("export-agreement-nan", lambda u: ["export", "run", "--out", "e2", "--min-agreement", "nan"],
     ["--min-agreement"]),
    ("portable-into-run", lambda u: ["export", "run", "--format", "keras", "--out", "run", "--overwrite"],
     ["--out"]),
    ("portable-into-user-folder", lambda u: ["export", "run", "--format", "keras", "--out", "."], ["--out"]),
    ("yaml-alias-bomb", lambda u: ["validate", recipe(u, text="name: t\nx0: &a0 [q,q,q,q,q,q,q,q,q,q]\n" + "".join(
        f"x{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 10)))], ["bad.yaml"]),
    ("yaml-nested-too-deep", lambda u: ["validate", recipe(u, text="name: d\ndata: " + "[" * 5000 + "]" * 5000)],
     ["bad.yaml"]),
    ("stream-layout-on-tagger", lambda u: ["validate", recipe(u, data={"layout": "stream"},
                                                              head={"type": "tagger"})], ["data.layout"]),
    ("resume-changes-learning-rate", lambda u: ["train", "--resume", "run", "--set", "training.epochs=3",
                                                "--set", "training.learning_rate=0.5"], ["learning_rate"]),
    ("resume-changes-units", lambda u: ["train", "--resume", "run", "--set", "training.epochs=3",
                                        "--set", "model.units=99"], ["model.units"]),
    ("vocab-wrong-type", lambda u: ["evaluate", edit_run(u, "vocab.json", '{"x": 1}')], ["vocab.json"]),
    ("generate-max-length-huge", lambda u: ["generate", "run", "--max-length", "100000000000"],
     ["--max-length"]),
    ("stream-a-run-dir", lambda u: ["stream", "run", "--prompt", "a"], ["run"]),
    ("inspect-not-tflite", lambda u: ["inspect", "notes.txt"], ["notes.txt"]),
    ("export-metadata-corrupt", lambda u: [(u / "export" / "metadata.json").write_text("{"),
                                           "stream", "export", "--prompt", "a"][1:], ["metadata.json"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_clear_error_and_changes_nothing(case, home):
    name, setup, words = case
    argv = setup(home)
    before = _tree(home.parent)
    res = CliRunner().invoke(main, argv, catch_exceptions=True)
    after = _tree(home.parent)
    out = res.output  # click >= 8.2: stdout and stderr as the terminal shows them
    assert res.exit_code != 0, f"{name}: exit 0\n{out}"
    assert isinstance(res.exception, SystemExit), f"{name}: {type(res.exception).__name__}: {res.exception}"
    assert "Traceback" not in out and "internal error" not in out, f"{name}:\n{out}"
    for w in words:
        assert w in out, f"{name}: message does not name {w!r}:\n{out}"
    changed = sorted(set(before.items()) ^ set(after.items()))
    assert not changed, f"{name}: files changed: {changed[:6]}"
    assert not (home / "run" / "RAN").exists() and not (home / "RAN").exists()


def test_catalogue_is_large_enough():
    assert len(CASES) >= 60
