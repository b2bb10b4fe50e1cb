"""A run directory is data, never code: loading a run imports nothing the run names.

The run below is trained with a file plugin (``evil.py``) that leaves a marker file when it is
imported. Its recipe lists ``plugins: [evil.py]`` and its ``plugins.json`` records the file; neither
may make ``generate``, ``evaluate``, ``train --resume`` or ``load_run`` import it. They stop with a
RunDirError naming the ``--plugin`` to pass; passing it works.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import make_recipe

ROOT = Path(__file__).resolve().parents[1]

EVIL = '''
import pathlib

pathlib.Path(__file__).with_name("MARKER").write_text("the plugin ran")

import seqkit
from seqkit.cells.lstm import LSTMPlugin


@seqkit.register_cell("evil_lstm")
class EvilLSTM(LSTMPlugin):
    """An LSTM under another name (a plugin cell)."""
'''


def cli(*args, timeout=300):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([sys.executable, "-m", "seqkit.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def evil_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("trust")
    (d / "evil.py").write_text(EVIL, encoding="utf-8")
    raw = make_recipe(plugins=["evil.py"], data={"limit": 60}, training={"epochs": 1},
                      model={"cell": "evil_lstm", "units": 8, "embedding_dim": 4})
    (d / "recipe.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    res = cli("train", str(d / "recipe.yaml"), "--run-dir", str(d / "run"), "--quiet")
    assert res.returncode == 0, res.stderr[-3000:]
    assert (d / "MARKER").exists()  # the user's own recipe may load its plugins
    (d / "MARKER").unlink()
    assert (d / "run" / "plugins.json").exists()
    assert "evil.py" in (d / "run" / "recipe.yaml").read_text()
    return d


def _refused(res, d):
    assert res.returncode == 2, res.stdout + res.stderr[-3000:]
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert f"--plugin {d / 'evil.py'}" in res.stderr and "evil_lstm" in res.stderr
    assert not (d / "MARKER").exists(), "loading the run ran the plugin file it names"


@pytest.mark.slow  # resume and load_run stay in the default run: -m slow (suite time)
def test_generate_imports_nothing_the_run_names(evil_run):
    _refused(cli("generate", str(evil_run / "run"), "--max-length", "3"), evil_run)


@pytest.mark.slow  # resume and load_run stay in the default run: -m slow (suite time)
def test_evaluate_imports_nothing_the_run_names(evil_run):
    _refused(cli("evaluate", str(evil_run / "run")), evil_run)


# One fresh process (each imports TensorFlow, ~9 CPU-s) runs, through the CLI's click entry,
# `train --resume` of the run (refused: it imports nothing the run names; MARKER is read right
# after it), then `generate --plugin evil.py` (the user passed the file: it runs).
RESUME_THEN_PLUGIN = """
import json, pathlib, sys
from click.testing import CliRunner
from seqkit.cli import main

d = pathlib.Path(sys.argv[1])
out = {}
for key, args in (("resume", ["train", "--resume", str(d / "run"), "--set", "training.epochs=2"]),
                  ("plugin", ["generate", str(d / "run"), "--max-length", "3", "--greedy",
                              "--plugin", str(d / "evil.py")])):
    res = CliRunner().invoke(main, args)
    out[key] = {"returncode": res.exit_code, "stdout": res.stdout, "stderr": res.stderr,
                "exception": repr(res.exception) if res.exit_code not in (0, 2) else None,
                "marker": (d / "MARKER").exists()}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def resume_then_plugin(evil_run):
    """``{"resume": ..., "plugin": ...}``: exit code, stdout, stderr and whether MARKER existed
    after each command, from one fresh process (:data:`RESUME_THEN_PLUGIN`); MARKER is removed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    res = subprocess.run([sys.executable, "-c", RESUME_THEN_PLUGIN, str(evil_run)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    (evil_run / "MARKER").unlink(missing_ok=True)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_resume_imports_nothing_the_run_names(evil_run, resume_then_plugin):
    got = resume_then_plugin["resume"]
    assert got["returncode"] == 2, got
    assert "Traceback" not in got["stderr"] and "internal error" not in got["stderr"]
    assert f"--plugin {evil_run / 'evil.py'}" in got["stderr"] and "evil_lstm" in got["stderr"]
    assert not got["marker"], "loading the run ran the plugin file it names"


def test_load_run_and_load_recipe_import_nothing(evil_run):
    from seqkit.errors import RecipeError, RunDirError
    from seqkit.recipe import load_recipe
    from seqkit.registry import CELLS
    from seqkit.training.train import load_run

    assert "evil_lstm" not in CELLS
    with pytest.raises(RunDirError) as info:
        load_run(str(evil_run / "run"))
    assert f"--plugin {evil_run / 'evil.py'}" in str(info.value)
    with pytest.raises(RecipeError, match="unknown cell 'evil_lstm'"):  # re-reading the run's recipe
        load_recipe(str(evil_run / "run" / "recipe.yaml"))
    assert not (evil_run / "MARKER").exists()
    assert "evil_lstm" not in CELLS


def test_without_plugins_json_the_recipe_names_are_checked_too(evil_run, tmp_path):
    from seqkit.errors import RunDirError
    from seqkit.training.train import load_run

    run = tmp_path / "copy"
    shutil.copytree(evil_run / "run", run)
    (run / "plugins.json").unlink()
    with pytest.raises(RunDirError) as info:
        load_run(str(run))
    msg = str(info.value)
    assert "cell 'evil_lstm'" in msg and f"--plugin {evil_run / 'evil.py'}" in msg
    assert "does not import code a run directory names" in msg
    assert not (evil_run / "MARKER").exists()


def test_plugin_passed_on_the_command_line_works(resume_then_plugin):
    """In the process of :func:`test_resume_imports_nothing_the_run_names`, after the refusal."""
    got = resume_then_plugin["plugin"]
    assert got["returncode"] == 0, got
    assert got["marker"]  # the user passed it: it ran
