"""Console output: ``-v``/``-q`` on every command, ``--json`` of train/validate/list/inspect/
generate agreeing with their text output, progress lines (an ETA on a terminal only, never from a
plain library call), and click's shell completion as docs/commands.md documents it."""

from __future__ import annotations

import io
import json
import re
import shutil

import pytest
import yaml
from click.testing import CliRunner

from seqkit.cli import main
from tests.conftest import make_recipe


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def lm(tmp_path_factory, keras):
    d = tmp_path_factory.mktemp("output")
    recipe = d / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(make_recipe(data={"limit": 120}, training={"epochs": 1},
                                                 model={"units": 16, "embedding_dim": 8})))
    res = cli("train", recipe, "--run-dir", d / "run", "--json")
    assert res.exit_code == 0, res.output
    return d, recipe, d / "run", res


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_render_shows_count_bar_and_eta():
    from seqkit.progress import render

    # 25 of 100 in 10 s: 0.4 s each, 75 left -> ETA 30 s; 25% of a 24-character bar = 6 '#'
    assert render("decoding", 25, 100, "sources", 10.0) == (
        "seqkit: decoding 25/100 sources [######..................]  25% 0:10 elapsed, ETA 0:30")
    assert render("decoding", 0, 8800, "sources", 0.0).endswith("0% 0:00 elapsed, ETA ?")
    assert render("evaluating", 7, 0, "batches", 3725.0) == "seqkit: evaluating 7 batches, 1:02:05 elapsed"


def test_every_command_takes_verbose_and_quiet():
    for name, command in main.commands.items():
        opts = {o for p in command.params for o in p.opts}
        assert {"-v", "--verbose", "-q", "--quiet"} <= opts, name
    res = cli("list", "-v", "-q")
    assert res.exit_code == 2 and "exclude each other" in res.output


def test_train_json_holds_the_run_metrics_and_only_json(lm):
    d, _, run, res = lm
    out = json.loads(res.stdout)  # Keras's progress bar went to stderr
    assert out["run_dir"] == str(run)
    saved = json.load(open(run / "metrics.json"))
    assert out["metrics"]["test"]["perplexity"] == pytest.approx(saved["test"]["perplexity"])
    assert "seqkit: data:" in res.stderr  # INFO lines show by default


def test_plain_train_keeps_keras_progress_bar_off_stdout(lm, tmp_path):
    _, recipe, _, _ = lm
    res = cli("train", recipe, "--run-dir", tmp_path / "plain")
    assert res.exit_code == 0, res.output
    assert "1/1" in res.stderr or "━" in res.stderr  # Keras drew its bar, on stderr
    lines = res.stdout.splitlines()
    assert lines[-1] == f"run directory: {tmp_path / 'plain'}" and "━" not in res.stdout
    assert "\x1b" not in res.stdout and all(not line.startswith(("1/", "Epoch")) for line in lines)


def test_levels_default_verbose_quiet(lm, tmp_path):
    d, _, run, _ = lm
    default, verbose, quiet = (cli("evaluate", run, *f) for f in ((), ("-v",), ("-q",)))
    assert default.exit_code == verbose.exit_code == quiet.exit_code == 0
    assert default.stdout == verbose.stdout == quiet.stdout
    assert re.match(r"test \(\d+ examples\): accuracy [\d.]+, cross_entropy", default.stdout)
    assert default.stderr == "" and quiet.stderr == ""  # not a terminal: no progress line
    assert re.search(r"^seqkit: evaluating: \d+ batches in [\d.]+ s$", verbose.stderr, re.M)
    # -q keeps warnings, hides progress and INFO lines (train: no Keras progress bar)
    res = cli("generate", run, "--prompt", "Th\u00a4 ", "--max-length", "3", "-q")
    assert res.exit_code == 0 and "seqkit: warning:" in res.stderr and "[UNK]" in res.stderr
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    res = cli("train", "--resume", copy, "--set", "training.epochs=2", "-q")
    assert res.exit_code == 0, res.output
    assert res.stderr == "" and "run directory:" in res.stdout and "Epoch" not in res.output


def test_generate_json_matches_the_text(lm):
    _, _, run, _ = lm
    text = cli("generate", run, "--prompt", "Th", "--num", "2", "--seed", "3", "--max-length", "8")
    js = cli("generate", run, "--prompt", "Th", "--num", "2", "--seed", "3", "--max-length", "8", "--json")
    assert text.exit_code == js.exit_code == 0, text.output + js.output
    out = json.loads(js.stdout)
    assert out["prompt"] == "Th" and [o["text"] for o in out["outputs"]] == text.stdout.splitlines()
    beam = ("--beam-width", "3", "--n-best", "2", "--max-length", "6")
    text, js = cli("generate", run, "--prompt", "Th", *beam), cli("generate", run, "--prompt", "Th", *beam, "--json")
    rows = [line.split("\t") for line in text.stdout.splitlines()]
    assert [(f"{o['score']:.4f}", o["text"]) for o in json.loads(js.stdout)["outputs"]] == [tuple(r) for r in rows]


def test_list_json_matches_the_text():
    text, js = cli("list", "cells"), cli("list", "cells", "--json")
    assert text.exit_code == js.exit_code == 0
    out = json.loads(js.stdout)
    names = [line.split()[0] for line in text.stdout.splitlines()[1:]
             if line.startswith("  ") and "CONFLICT" not in line and not line.strip().startswith("BROKEN")]
    assert [c["name"] for c in out["cells"]] == names
    assert {"name": "lstm", "origin": "seqkit (built in)"}.items() <= next(
        c for c in out["cells"] if c["name"] == "lstm").items()
    assert "heads" not in out


def test_validate_json_resolved_recipe_or_errors(lm):
    _, recipe, _, _ = lm
    text, js = cli("validate", recipe), cli("validate", recipe, "--json")
    assert text.exit_code == js.exit_code == 0, js.output
    out = json.loads(js.stdout)
    assert out["ok"] and out["resolved"]["model"]["units"] == 16 and out["resolved"]["training"]["epochs"] == 1
    counts = ", ".join(f"{k} {v}" for k, v in out["data"]["examples"].items())
    assert counts in text.stdout and f"{out['parameters']['total']:,} parameters" in text.stdout
    bad = cli("validate", recipe, "--json", "--no-data", "--set", "model.units=-3", "--set", "training.epochs=0")
    assert bad.exit_code == 2
    out = json.loads(bad.stdout)
    assert not out["ok"] and len(out["errors"]) == 2
    assert any("model.units" in e for e in out["errors"]) and any("training.epochs" in e for e in out["errors"])
    assert "error: invalid recipe (2 problems)" in bad.stderr


def test_export_parity_progress_on_a_terminal_only_and_inspect_json(lm, tmp_path, monkeypatch, capfd):
    from seqkit import progress
    from seqkit.runs.run import Run

    _, _, run, _ = lm
    term = FakeTerminal()
    monkeypatch.setattr("sys.stderr", term)
    Run(run).evaluate("test")  # a library call draws nothing, even on a terminal
    assert term.getvalue() == ""
    with progress.shown():  # what the CLI does around a command, without -q
        Run(run).export(str(tmp_path / "x"), parity_examples=4)
    drawn = term.getvalue()
    monkeypatch.undo()
    assert re.search(r"\rseqkit: parity check \d+/\d+ steps \[#+\] 100% \d+:\d\d elapsed, ETA 0:00", drawn)
    assert drawn.endswith("\r\x1b[K")  # erased when done
    out, err = capfd.readouterr()  # (TFLite's C++ runtime prints its own INFO line at fd level)
    assert out == "" and "seqkit" not in err
    text, js = cli("inspect", tmp_path / "x"), cli("inspect", tmp_path / "x", "--json")
    assert text.exit_code == js.exit_code == 0, js.output
    out = json.loads(js.stdout)
    assert f"{out['bytes']:,} bytes" in text.stdout and "ops: " + ", ".join(out["ops"]) in text.stdout
    for key, sig in out["signatures"].items():
        assert f"signature '{key}':" in text.stdout
        for name, t in sig["inputs"].items():
            assert re.search(rf"in  {name}\s+{re.escape(str(t['shape']))}\s+{t['dtype']}", text.stdout)
    assert out["metadata"]["head"] == "language_model" and isinstance(out["metadata"]["vocab_size"], int)


@pytest.mark.parametrize("shell, marker", [("bash", "complete -o"), ("zsh", "#compdef seqkit"),
                                           ("fish", "complete --no-files --command seqkit")])
def test_shell_completion_script_as_documented(shell, marker):
    res = CliRunner().invoke(main, [], prog_name="seqkit", env={"_SEQKIT_COMPLETE": f"{shell}_source"})
    assert res.exit_code == 0 and marker in res.stdout
