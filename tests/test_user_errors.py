"""A user's mistake is one paragraph naming the file or key and the fix, never "internal error".

Each case ended in "internal error ... please report it" before: a model far too large, a seed
out of range, a read-only run or export folder, a damaged state.json / history.json, a
model.keras copied in from another run, a plugin cell whose ``call`` raises.
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
TINY = dict(data={"limit": 60}, training={"epochs": 1}, model={"units": 8, "embedding_dim": 4})


def cli(*args, timeout=300, fresh=False):
    """``seqkit ARGS`` from the repository root, as ``subprocess.CompletedProcess`` (returncode,
    stdout, stderr). In this process through click's CliRunner (the command's own error
    handling; TensorFlow imported once, not ~5 CPU-s per call), a traceback that escaped the
    command appended to stderr as a process would print it; with ``fresh``, a separate
    ``python -m seqkit.cli`` process (a case that imports a user's plugin file, which would stay
    registered in this process)."""
    if fresh:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
        return subprocess.run([sys.executable, "-m", "seqkit.cli", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
    import traceback

    from click.testing import CliRunner

    from seqkit.cli import main

    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        res = CliRunner().invoke(main, [str(a) for a in args])
    finally:
        os.chdir(cwd)
    err = res.stderr
    if res.exc_info is not None and not isinstance(res.exception, SystemExit):
        err += "".join(traceback.format_exception(*res.exc_info))
    return subprocess.CompletedProcess(args, res.exit_code, res.stdout, err)


def user_error(res, *names):
    """Exit 2, one paragraph, no traceback; every string of ``names`` in the message."""
    msg = res.stderr
    assert res.returncode == 2, (res.returncode, res.stdout[-2000:], msg[-3000:])
    assert "Traceback" not in msg and "internal error" not in msg, msg[-3000:]
    for name in names:
        assert name in msg, (name, msg[-3000:])
    return msg


@pytest.fixture(scope="module")
def runs(tmp_path_factory, keras):
    """Two tiny trained runs of one recipe that differ in model.units (and so in weight shapes)."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    d = tmp_path_factory.mktemp("user-errors")
    train(recipe_from_dict(make_recipe(**TINY)), str(d / "a"), verbose=0)
    other = make_recipe(**TINY)
    other["model"] = {**other["model"], "units": 6}
    train(recipe_from_dict(other), str(d / "b"), verbose=0)
    (d / "recipe.yaml").write_text(yaml.safe_dump(make_recipe(**TINY)))
    return d


def _copy(runs, tmp_path, name="a"):
    run = tmp_path / name
    shutil.copytree(runs / name, run)
    return run


# ---------------------------------------------------------------- a model far too large

def test_model_far_too_large_is_refused_before_building(runs, tmp_path):
    res = cli("train", str(runs / "recipe.yaml"), "--run-dir", str(tmp_path / "big"), "--quiet",
              "--set", "model.units=2000000000")
    msg = user_error(res, "model.units", "parameters", "GiB", "Adam")
    assert "about 1.6e+19 parameters" in msg  # 4 * (h * (d + h) + h) with h = 2e9
    assert not (tmp_path / "big").exists()


def test_plugin_cell_out_of_memory_while_building_names_it(runs):
    import seqkit
    from seqkit.cells.lstm import LSTMPlugin
    from seqkit.errors import SeqkitError
    from seqkit.guards import build_model
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import prepare

    @seqkit.register_cell("test_hungry_cell")
    class Hungry(LSTMPlugin):
        def make_layer(self, **kw):
            raise MemoryError()

    recipe = recipe_from_dict(make_recipe(**{**TINY, "model": {"cell": "test_hungry_cell", "units": 8}}))
    with pytest.raises(SeqkitError) as info:
        build_model(prepare(recipe))
    msg = str(info.value)
    assert "test_hungry_cell" in msg and "ran out of memory" in msg and "model.units" in msg


def test_estimate_matches_the_built_model_for_builtin_cells(keras):
    from seqkit.guards import estimate_parameters
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import count_parameters, prepare

    for model in ({"cell": "lstm", "layers": 2}, {"cell": "gru"}, {"cell": "simple_rnn"}):
        prep = prepare(recipe_from_dict(make_recipe(**{**TINY, "model": {**TINY["model"], **model}})))
        assert estimate_parameters(prep) == count_parameters(prep.head.build_model())["total"]


# ---------------------------------------------------------------- seed

def test_seed_out_of_range_names_seed(runs):
    user_error(cli("validate", str(runs / "recipe.yaml"), "--no-data", "--set", "seed=4294967296"),
               "--set seed: expected an integer in [0, 4294967295]")


# ---------------------------------------------------------------- read-only folders

def _read_only_folder(tmp_path) -> Path:
    """A folder seqkit cannot write into (as root, /sys refuses new entries)."""
    if os.geteuid() == 0:
        return Path("/sys")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    return ro


def test_read_only_run_folder_names_it_and_the_fix(runs, tmp_path):
    ro = _read_only_folder(tmp_path)
    res = cli("train", str(runs / "recipe.yaml"), "--run-dir", str(ro / "seqkit-run"), "--quiet")
    user_error(res, str(ro), "permission denied", "--run-dir")


def test_read_only_export_folder_names_it_and_the_fix(runs, tmp_path):
    ro = _read_only_folder(tmp_path)
    res = cli("export", str(runs / "a"), "--out", str(ro / "seqkit-export"))
    user_error(res, str(ro), "permission denied", "--out")


def test_permission_error_while_writing_is_named(tmp_path):
    from seqkit.guards import user_error as to_user_error

    err = to_user_error(PermissionError(13, "Permission denied", str(tmp_path / "x" / "state.json")), "train")
    assert str(tmp_path / "x" / "state.json") in str(err) and "--run-dir" in str(err)


# ---------------------------------------------------------------- damaged run files

def test_corrupt_state_json_on_resume_names_the_file(runs, tmp_path):
    run = _copy(runs, tmp_path)
    (run / "state.json").write_text('{"epoch": 1, "best": ')
    user_error(cli("train", "--resume", str(run), "--set", "training.epochs=2", "--quiet"),
               str(run / "state.json"), "not valid JSON", "delete it")


def test_state_json_of_wrong_types_names_the_file(runs, tmp_path):
    from seqkit.errors import RunDirError
    from seqkit.runs.rundir import RunDir

    run = _copy(runs, tmp_path)
    (run / "state.json").write_text(json.dumps({"epoch": "1", "best": 2.0}))
    with pytest.raises(RunDirError, match=r"state.json: 'epoch' must be a whole number"):
        RunDir(str(run)).state()


def test_history_json_of_wrong_types_on_resume_names_the_file(runs, tmp_path):
    run = _copy(runs, tmp_path)
    (run / "history.json").write_text(json.dumps([{"epoch": 1, "val_cross_entropy": "low"}]))
    user_error(cli("train", "--resume", str(run), "--set", "training.epochs=2", "--quiet"),
               str(run / "history.json"), "val_cross_entropy", "must be a number")


@pytest.mark.parametrize("state, words", [({}, "'epoch' must be a whole number"),
                                          ({"epoch": -5}, "'epoch' must be a whole number"),
                                          ([1], "expected a JSON object"),
                                          ({"epoch": 1, "history": "abc"}, "'history' must be a list")])
def test_a_checkpoint_state_of_wrong_shape_on_resume_names_the_checkpoint(runs, tmp_path, state, words):
    import zipfile

    run = _copy(runs, tmp_path)
    last = run / "last.keras"
    with zipfile.ZipFile(last) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members["seqkit_state.json"] = json.dumps(state).encode()
    with zipfile.ZipFile(last, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)
    before = (run / "state.json").read_text()
    user_error(cli("train", "--resume", str(run), "--set", "training.epochs=2", "--quiet"),
               "last.keras (seqkit_state.json inside it)", words)
    assert (run / "state.json").read_text() == before  # the run is not marked failed


def test_metrics_json_baselines_of_the_wrong_shape_are_left_out(runs, tmp_path):
    run = _copy(runs, tmp_path)
    saved = json.loads((run / "metrics.json").read_text())
    (run / "metrics.json").write_text(json.dumps({**saved, "baselines": {"y": {"test": [1]}, "z": 3}}))
    res = cli("evaluate", str(run))
    assert res.returncode == 0 and "internal error" not in res.stderr, res
    assert res.stdout.startswith("test (") and "baseline y" not in res.stdout and "baseline z" not in res.stdout


def test_corrupt_metrics_json_on_evaluate_names_the_file(runs, tmp_path):
    run = _copy(runs, tmp_path)
    (run / "metrics.json").write_text("{oops")
    user_error(cli("evaluate", str(run)), str(run / "metrics.json"), "not valid JSON")


# ---------------------------------------------------------------- a model from another run

def test_model_keras_from_another_run_names_file_and_shapes(runs, tmp_path):
    run = _copy(runs, tmp_path)
    shutil.copy(runs / "b" / "model.keras", run / "model.keras")
    msg = user_error(cli("evaluate", str(run)), str(run / "model.keras"), "another run")
    assert "[4, 24]" in msg and "[4, 32]" in msg  # found (units 6) vs expected (units 8)


# ---------------------------------------------------------------- a plugin cell whose call raises

BAD_CELL = '''
import keras
from keras import ops

import seqkit
from seqkit.cells.base import CellPlugin


@keras.saving.register_keras_serializable(package="test_bad_cell")
class BadCell(keras.layers.Layer):
    def __init__(self, units, **kw):
        super().__init__(**kw)
        self.units, self.state_size, self.output_size = units, units, units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1] + 1, self.units))  # one row too many

    def call(self, inputs, states):
        h = ops.matmul(inputs, self.kernel) + states[0]
        return h, [h]


@seqkit.register_cell("bad_cell")
class BadCellPlugin(CellPlugin):
    def make_cell(self, name=None):
        return BadCell(self.spec.units, name=name)
'''


def test_plugin_cell_whose_call_raises_names_plugin_origin_and_shapes(runs, tmp_path):
    plugin = tmp_path / "bad_cell.py"
    plugin.write_text(BAD_CELL, encoding="utf-8")
    res = cli("train", str(runs / "recipe.yaml"), "--run-dir", str(tmp_path / "run"), "--quiet",
              "--plugin", str(plugin), "--set", "model.cell=bad_cell", fresh=True)
    # the cell is first called once on zeros right after the model is built (the contract check)
    msg = user_error(res, "plugin cell 'bad_cell'", str(plugin), "call()", "inputs [1, 4]",
                     "states ([1, 8])")
    assert "[1,4]" in msg and "[5,8]" in msg  # TensorFlow's own shapes of the failing op (eager matmul)
    assert not (tmp_path / "run").exists()


def test_a_reader_that_stops_reading_ends_the_command_quietly():
    # `seqkit recipes | head -0`: stdout's reader is gone before anything is written
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    p = subprocess.Popen([sys.executable, "-m", "seqkit.cli", "recipes"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 1
    assert "internal error" not in err and "BrokenPipe" not in err and "Traceback" not in err, err


def test_a_run_whose_training_has_not_finished_is_used_with_a_warning(runs, tmp_path, caplog):
    import logging

    import seqkit

    run = _copy(runs, tmp_path)
    with caplog.at_level(logging.WARNING, logger="seqkit"):
        finished = seqkit.load(str(run)).evaluate("test")
    assert "has not finished" not in caplog.text
    state = json.loads((run / "state.json").read_text())
    (run / "state.json").write_text(json.dumps({**state, "status": "running"}))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="seqkit"):
        again = seqkit.load(str(run)).evaluate("test")
    assert again == finished  # the same weights, now with the warning
    assert (f"{run}: training has not finished (state.json: running, {state['epoch']} of 1 epochs done)"
            in caplog.text and f"seqkit train --resume {run}" in caplog.text)


@pytest.mark.parametrize("name, damage, words", [
    ("vocab.json", lambda p: (p.unlink(), os.symlink("/dev/zero", p)), "not a regular file"),
    ("state.json", lambda p: (p.unlink(), os.symlink("/dev/zero", p)), "not a regular file"),
    ("vocab.json", lambda p: p.write_text("[" * 100_000), "nested too deep"),
    ("plugins.json", lambda p: p.write_text('[{"name": "zzz", "kind": [1]}]'), "plugins.json: unreadable"),
])
def test_a_run_file_that_is_a_device_too_deep_or_of_wrong_types_is_named(runs, tmp_path, name, damage, words):
    run = _copy(runs, tmp_path)
    damage(run / name)
    user_error(cli("evaluate", run), name, words)


def test_a_label_list_that_is_not_a_list_of_names_is_named(tmp_path):
    from seqkit.data.labels import LabelVocabulary
    from seqkit.errors import RunDirError

    for text in ('{"a": 1}', '[[1], {}]', '[true]', '[]'):  # [] was an IndexError in predict
        (tmp_path / "labels.json").write_text(text)
        with pytest.raises(RunDirError, match="labels.json: cannot read the label list"):
            LabelVocabulary.load(str(tmp_path / "labels.json"))
    (tmp_path / "labels.json").write_text('["neg", "pos"]')
    assert LabelVocabulary.load(str(tmp_path / "labels.json")).names == ["neg", "pos"]


def test_a_vocabulary_listing_a_token_twice_is_named(tmp_path):
    """Every later id would point one token off (the duplicate's second entry shadowed the first);
    the model's answers then change without a word."""
    from seqkit.data.vocab import Vocabulary
    from seqkit.errors import RunDirError

    (tmp_path / "vocab.json").write_text('["<pad>", "[UNK]", "<s>", "</s>", "a", "a", "c"]')
    with pytest.raises(RunDirError, match=r"vocab.json: cannot read the vocabulary \(the token 'a' is listed twice\)"):
        Vocabulary.load(str(tmp_path / "vocab.json"))


def test_resume_refuses_a_run_whose_logs_folder_is_a_link_elsewhere(runs, tmp_path):
    run = _copy(runs, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(run / "logs"), str(elsewhere))
    os.symlink(elsewhere, run / "logs")
    before = sorted(p.name for p in elsewhere.rglob("*"))
    user_error(cli("train", "--resume", str(run), "--set", "training.epochs=2", "--quiet"),
               "logs is a symbolic link")
    assert sorted(p.name for p in elsewhere.rglob("*")) == before


def test_set_messages_name_the_override_and_stay_short(tmp_path, write_recipe):
    """A --set below a scalar key is blamed on --set, not on the recipe's line; a value of 100,000
    characters is echoed in part (the message stays a paragraph)."""
    from click.testing import CliRunner

    from seqkit.cli import main

    path = write_recipe(make_recipe())
    res = CliRunner().invoke(main, ["validate", path, "--set", "model.units.x=3"])
    assert res.exit_code == 2 and "--set model.units.x: model.units: expected a positive integer" in res.output
    res = CliRunner().invoke(main, ["validate", path, "--set", "model.cell=" + "x" * 100_000])
    assert res.exit_code == 2 and len(res.output) < 3000, len(res.output)
    assert "(100,002 characters)" in res.output or "characters, cut)" in res.output, res.output[-300:]
