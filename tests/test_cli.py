"""The click CLI end to end through CliRunner: train, evaluate, generate, list, validate, errors."""

import json

import pytest
from click.testing import CliRunner

from seqkit.cli import main
from tests.conftest import make_recipe


@pytest.fixture(scope="module")
def runner():
    return CliRunner()


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory, runner, keras):
    import yaml

    d = tmp_path_factory.mktemp("cli")
    recipe = d / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(make_recipe(data={"limit": 200}, training={"epochs": 1})))
    run = d / "run"
    res = runner.invoke(main, ["train", str(recipe), "--run-dir", str(run), "--quiet"])
    assert res.exit_code == 0, res.output
    return recipe, run, res


def test_train_prints_metrics_and_writes_run(cli_run):
    recipe, run, res = cli_run
    assert "test: accuracy" in res.output and "baseline 3-gram perplexity" in res.output
    assert json.load(open(run / "metrics.json"))["epochs"] == 1


def test_evaluate_json_matches_metrics_file(cli_run, runner):
    _, run, _ = cli_run
    res = runner.invoke(main, ["evaluate", str(run), "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    want = json.load(open(run / "metrics.json"))["test"]
    assert got["perplexity"] == pytest.approx(want["perplexity"], rel=1e-5)


def test_generate_is_seeded_and_starts_with_prompt(cli_run, runner):
    _, run, _ = cli_run
    args = ["generate", str(run), "--prompt", "The ", "--num", "2", "--max-length", "30", "--seed", "4"]
    a, b = runner.invoke(main, args), runner.invoke(main, args)
    assert a.exit_code == 0, a.output
    lines = a.output.splitlines()
    assert len(lines) == 2 and all(line.startswith("The ") for line in lines)
    assert a.output == b.output
    g = runner.invoke(main, ["generate", str(run), "--prompt", "x", "--greedy", "--num", "2"])
    first, second = g.output.splitlines()
    assert first == second  # greedy rows are identical


def test_list_shows_builtins_with_origin(runner):
    res = runner.invoke(main, ["list"])
    assert res.exit_code == 0
    assert "lstm" in res.output and "seqkit (built in)" in res.output and "pydoc_topics" in res.output
    res = runner.invoke(main, ["list", "heads"])
    assert "language_model" in res.output and "lstm" not in res.output
    line = next(ln for ln in res.output.splitlines() if ln.strip().startswith("acceptor"))
    assert line.endswith("(seqkit init --task classify)")  # the --task word of each head
    heads = json.loads(runner.invoke(main, ["list", "heads", "--json"]).output)["heads"]
    assert {h["name"]: h["init_task"] for h in heads if h["origin"] == "seqkit (built in)"} == {
        "acceptor": "classify", "tagger": "tag", "language_model": "lm", "seq2seq": "seq2seq"}


def test_validate_ok_and_errors(tmp_path, runner, write_recipe):
    path = write_recipe(make_recipe())
    res = runner.invoke(main, ["validate", path, "--no-data"])
    assert res.exit_code == 0 and res.output.strip().endswith("OK")
    res = runner.invoke(main, ["validate", path, "--no-data", "--set", "model.units=abc"])
    assert res.exit_code == 2
    assert "--set model.units: expected a positive integer, got 'abc'" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(main, ["validate", path, "--no-data", "--set", "model.cell=lsmt"])
    assert res.exit_code == 2 and "Did you mean 'lstm'?" in res.output


def test_clear_errors_for_bad_run_dirs_and_files(tmp_path, runner, write_recipe):
    res = runner.invoke(main, ["evaluate", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "no such run directory" in res.output
    (tmp_path / "empty").mkdir()
    res = runner.invoke(main, ["generate", str(tmp_path / "empty")])
    assert res.exit_code == 2 and "not a complete seqkit run directory" in res.output
    path = write_recipe(make_recipe(data={"source": "text_lines", "path": "missing.txt", "limit": None}))
    res = runner.invoke(main, ["train", path, "--run-dir", str(tmp_path / "r")])
    assert res.exit_code == 2 and "no such file" in res.output and not (tmp_path / "r").exists()
    res = runner.invoke(main, ["train", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2 and "no such recipe file" in res.output


def test_bidirectional_lm_refused_with_clear_error(tmp_path, runner, write_recipe):
    path = write_recipe(make_recipe(model={"bidirectional": True}))
    res = runner.invoke(main, ["train", path, "--run-dir", str(tmp_path / "r")])
    assert res.exit_code == 2 and "reads the future" in res.output
    assert not (tmp_path / "r").exists()


def test_plugin_option_registers_a_cell(tmp_path, runner):
    p = tmp_path / "cells.py"
    p.write_text("import seqkit\nfrom seqkit.cells.gru import GRUPlugin\n\n"
                 "@seqkit.register_cell('cli_test_cell')\nclass C(GRUPlugin):\n    '''A GRU by another name.'''\n")
    res = runner.invoke(main, ["list", "cells", "--plugin", str(p)])
    assert res.exit_code == 0 and "cli_test_cell" in res.output


def test_resume_through_cli_trains_longer(cli_run, runner):
    _, run, _ = cli_run
    res = runner.invoke(main, ["train", "--resume", str(run), "--set", "training.epochs=2", "--quiet"])
    assert res.exit_code == 0, res.output
    assert [h["epoch"] for h in json.load(open(run / "history.json"))] == [1, 2]
    res = runner.invoke(main, ["train", "--resume", str(run), "--set", "training.epochs=2"])
    assert res.exit_code == 2 and "already trained for 2 of 2 epochs" in res.output


def test_evaluate_names_the_acceptor_example_count_once(tiny_acceptor, runner):
    """The acceptor reports its own example count; the line gives it once, equal to the split's."""
    import re

    res = runner.invoke(main, ["evaluate", tiny_acceptor])
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("test"))
    counts = re.findall(r"(\d+) examples", line)
    assert counts == ["6"], line  # 30% of the 20 utterances held out
