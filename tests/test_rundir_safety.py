"""Run directories are seqkit's only to replace: --overwrite refuses anything but a seqkit
run (and never the current folder, a home, or a folder holding the recipe or data); a replacement
takes effect only after the new run's first saved epoch; one writer per run directory (a lock);
leftover staging folders of dead processes are cleaned up. One tiny trained run is made once and
copied for each test."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
import yaml
from click.testing import CliRunner

from seqkit.cli import main
from seqkit.errors import DataError, RecipeError, RunDirError, SeqkitError
from tests.conftest import make_recipe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = dict(data={"limit": 120}, model={"units": 16, "embedding_dim": 8}, training={"epochs": 1})

FAILING_CELL = textwrap.dedent('''
    import os
    import keras
    import seqkit

    class BrokenCell(keras.layers.Layer):
        """An LSTM-shaped cell that builds fine and raises as soon as it trains."""

        def __init__(self, units, **kwargs):
            super().__init__(**kwargs)
            self.units, self.state_size, self.output_size = units, [units], units

        def build(self, input_shape):
            self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")

        def call(self, inputs, states, training=False):
            if training:  # says what the run's folder holds while it trains
                raise RuntimeError(f"broken cell: fails in the first epoch; {sorted(os.listdir(RUNS))}")
            h = keras.ops.matmul(inputs, self.kernel)
            return h, [h]

    @seqkit.register_cell("broken_for_test")
    class BrokenPlugin(seqkit.CellPlugin):
        state_names = ("h",)

        def make_cell(self, name=None):
            return BrokenCell(self.spec.units, name=name)
''')

SLOW_CELL = textwrap.dedent('''
    import time
    import keras
    import seqkit

    @keras.saving.register_keras_serializable(package="slow_for_test")
    class SlowCell(keras.layers.SimpleRNNCell):
        """A SimpleRNN cell that takes {secs} s to build (keeps the run directory's lock held)."""

        def build(self, input_shape):
            time.sleep({secs})
            super().build(input_shape)

    @seqkit.register_cell("slow_for_test")
    class SlowPlugin(seqkit.CellPlugin):
        state_names = ("h",)

        def make_cell(self, name=None):
            return SlowCell(self.spec.units, name=name)
''')


def digest(root) -> list:
    """Sorted (relative path, sha256 or 'dir') of every entry under ``root``."""
    out = []
    for d, dirs, files in os.walk(root):
        for n in dirs:
            out.append((os.path.relpath(os.path.join(d, n), root), "dir"))
        for n in files:
            with open(os.path.join(d, n), "rb") as f:
                out.append((os.path.relpath(os.path.join(d, n), root), hashlib.sha256(f.read()).hexdigest()))
    return sorted(out)


def recipe(**sections):
    from seqkit.recipe import recipe_from_dict

    return recipe_from_dict(make_recipe(**{**TINY, **sections}))


def write_yaml(path, raw) -> str:
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(raw, f, sort_keys=False)
    return str(path)


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.fixture(scope="module")
def base_run(tmp_path_factory, keras):
    """A finished tiny run (recipe.yaml, state.json, model files, logs/)."""
    from seqkit.training.train import train

    path = str(tmp_path_factory.mktemp("base") / "tiny")
    train(recipe(), path, verbose=0)
    return path


@pytest.fixture
def run_copy(base_run, tmp_path):
    def make(dest):
        dest = str(tmp_path / dest)
        shutil.copytree(base_run, dest)
        return dest
    return make


def cli_train(*args):
    return CliRunner().invoke(main, ["train", *[str(a) for a in args], "--quiet"])


# ---------------------------------------------------------------- what --overwrite may replace

def test_recipe_names_that_leave_their_folder_are_refused():
    from seqkit.recipe import recipe_from_dict

    for bad in ("..", ".", "a/b", ".hidden"):
        with pytest.raises(RecipeError, match=r"name: .*" + ("expected" if "/" in bad else "folder name")):
            recipe_from_dict(make_recipe(name=bad))
    assert recipe_from_dict(make_recipe(name="v1.2_run-3")).name == "v1.2_run-3"
    with pytest.raises(RecipeError, match=r"name: .* of at most 100 characters"):  # beyond a folder name's room
        recipe_from_dict(make_recipe(name="a" * 101))
    with pytest.raises(RecipeError, match=r"model.layers: expected a positive integer <= 256, got 3000"):
        recipe_from_dict(make_recipe(model={"layers": 3000}))


def test_overwrite_refuses_a_folder_that_is_not_a_seqkit_run(tmp_path, run_copy):
    rec = write_yaml(tmp_path / "r.yaml", make_recipe(**TINY))
    docs = tmp_path / "mydocs"
    docs.mkdir()
    (docs / "thesis.txt").write_text("years of work")
    looks_like_run = run_copy("run_plus_notes")  # a run someone added a file to
    with open(os.path.join(looks_like_run, "notes.txt"), "w") as f:
        f.write("mine")
    for folder, why in ((str(docs), "thesis.txt"), (looks_like_run, "notes.txt")):
        before = digest(tmp_path)
        res = cli_train(rec, "--run-dir", folder, "--overwrite")
        assert res.exit_code == 2, res.output
        assert folder in res.output and "not a seqkit run directory" in res.output and why in res.output
        assert "Traceback" not in res.output
        assert digest(tmp_path) == before


def test_overwrite_refuses_a_folder_with_a_runs_names_but_not_its_contents(tmp_path, run_copy):
    rec = write_yaml(tmp_path / "r.yaml", make_recipe(**TINY))
    proj = tmp_path / "proj"  # another tool's recipe.yaml and state.json, a log and a backup
    for name, text in (("recipe.yaml", "kind: Deployment\n"), ("state.json", '{"app": "mine"}'),
                       ("logs/server.log", "years of logs"), ("backup/db.sql", "a database")):
        (proj / name).parent.mkdir(parents=True, exist_ok=True)
        (proj / name).write_text(text)
    deep = run_copy("run_with_a_log")  # a real run someone put a file into, below logs/
    with open(os.path.join(deep, "logs", "diary.txt"), "w") as f:
        f.write("mine")
    for folder, why in ((proj, "backup/db.sql"), (deep, "logs/diary.txt")):
        before = digest(tmp_path)
        res = cli_train(rec, "--run-dir", folder, "--overwrite")
        assert res.exit_code == 2 and "not a seqkit run directory" in res.output and why in res.output, res.output
        assert digest(tmp_path) == before
    (proj / "logs" / "server.log").unlink()
    (proj / "backup" / "db.sql").unlink()
    res = cli_train(rec, "--run-dir", proj, "--overwrite")
    assert res.exit_code == 2 and "state.json is not one seqkit wrote" in res.output, res.output


def test_a_lock_path_planted_as_a_symbolic_link_is_never_written_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("my file")
    runs = tmp_path / "runs"
    runs.mkdir()
    os.symlink(victim, runs / ".tiny.lock")
    res = cli_train(write_yaml(tmp_path / "r.yaml", make_recipe(**TINY)), "--run-dir", runs / "tiny")
    assert res.exit_code == 2 and "is a symbolic link" in res.output, res.output
    assert victim.read_text() == "my file" and not (runs / "tiny").exists()


def test_overwrite_refuses_the_current_folder_and_folders_holding_recipe_data_or_home(
        tmp_path, run_copy, monkeypatch):
    # the current folder (and its parent), even when it is a seqkit run
    here = run_copy("here")
    rec = write_yaml(tmp_path / "r.yaml", make_recipe(**TINY))
    monkeypatch.chdir(here)
    for folder in (".", here, ".."):
        before = digest(tmp_path)
        res = cli_train(rec, "--run-dir", folder, "--overwrite")
        assert res.exit_code == 2 and folder in res.output, res.output
        assert "current folder" in res.output
        assert digest(tmp_path) == before
    monkeypatch.chdir(tmp_path)
    # a run whose own recipe.yaml is the recipe being trained
    own = run_copy("own")
    before = digest(tmp_path)
    res = cli_train(os.path.join(own, "recipe.yaml"), "--run-dir", own, "--overwrite")
    assert res.exit_code == 2 and own in res.output and "holds the recipe file" in res.output, res.output
    assert digest(tmp_path) == before
    # a folder holding the recipe and the data file; a folder holding only the data file
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    (proj / "data" / "corpus.txt").write_text("\n".join(f"line {i} of text" for i in range(80)))
    rec2 = write_yaml(proj / "lm.yaml", make_recipe(**{**TINY, "data": {
        "source": "text_lines", "path": "data/corpus.txt", "limit": 80, "tokenizer": "char"}}))
    for folder, why in ((proj, "holds the recipe file"), (proj / "data", "holds the data file")):
        before = digest(tmp_path)
        res = cli_train(rec2, "--run-dir", folder, "--overwrite")
        assert res.exit_code == 2 and str(folder) in res.output and why in res.output, res.output
        assert digest(tmp_path) == before
    # a home directory, even one that looks like a run
    home = run_copy("home")
    monkeypatch.setenv("HOME", home)
    before = digest(tmp_path)
    res = cli_train(rec, "--run-dir", home, "--overwrite")
    assert res.exit_code == 2 and "home directory" in res.output, res.output
    assert digest(tmp_path) == before


def test_every_path_a_recipe_reads_is_protected(tmp_path):
    """Lists, mappings and declared path keys count, not only ``path`` / ``*_path`` strings."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.runs.lifecycle import protected_paths

    def listed(data):
        rec = recipe_from_dict(make_recipe(data=data), base_dir=str(tmp_path))
        return {p: what for what, p in protected_paths(rec)}

    hf = listed({"source": "hf_datasets", "builder": "csv", "text_column": "text",
                 "data_files": {"train": ["a.csv", "b.csv"], "test": "c.csv"}})
    assert {str(tmp_path / f) for f in ("a.csv", "b.csv", "c.csv")} <= set(hf)
    assert hf[str(tmp_path / "a.csv")] == "the data file (data.data_files)"
    tfds = listed({"source": "tfds", "name": "toy", "data_dir": "tfds_data"})
    assert tfds[str(tmp_path / "tfds_data")] == "the data folder (data.data_dir)"
    corpus = listed({"source": "text_corpus", "train_path": ["p1.txt", "p2.txt"], "vocab_file": "v.txt",
                     "layout": "stream", "limit": None})
    assert {str(tmp_path / f) for f in ("p1.txt", "p2.txt", "v.txt")} <= set(corpus)


def test_an_empty_existing_folder_is_used(tmp_path, keras):
    from seqkit.training.train import train

    (tmp_path / "empty").mkdir()
    train(recipe(), str(tmp_path / "empty"), verbose=0)
    assert os.path.isfile(tmp_path / "empty" / "metrics.json")
    assert sorted(os.listdir(tmp_path)) == ["empty"]  # no staging, old or lock left


# ---------------------------------------------------------------- all-or-nothing replacement

def test_a_failing_overwrite_leaves_the_previous_run_byte_identical(tmp_path, run_copy):
    from seqkit.training.train import train

    runs = tmp_path / "runs"
    runs.mkdir()
    prev = run_copy("runs/tiny")
    plugin = tmp_path / "broken.py"
    plugin.write_text(FAILING_CELL.replace("RUNS", repr(str(runs))))
    bad = recipe(plugins=[str(plugin)], model={"cell": "broken_for_test", "units": 8, "embedding_dim": 8})
    before = digest(runs)
    with pytest.raises(RuntimeError, match="broken cell") as failed:
        train(bad, prev, overwrite=True, verbose=0)
    # it failed while training in its staging folder, beside the untouched run and the lock
    assert f"'.tiny.staging-{os.getpid()}'" in str(failed.value) and "'.tiny.lock'" in str(failed.value)
    assert digest(runs) == before  # no staging folder, no lock file, the run as it was
    # a brand-new run that fails in its first epoch leaves nothing
    with pytest.raises(RuntimeError, match="broken cell"):
        train(bad, str(runs / "new"), verbose=0)
    assert digest(runs) == before
    # Ctrl-C in the first epoch: the same, with the interrupted message
    ctrl_c = tmp_path / "ctrl_c.py"
    ctrl_c.write_text(FAILING_CELL.replace("RUNS", repr(str(runs))).replace("RuntimeError", "KeyboardInterrupt")
                      .replace("broken_for_test", "interrupted_for_test"))
    with pytest.raises(SeqkitError, match=r"interrupted before the first epoch finished; nothing was kept \("
                                          + re.escape(prev) + " is as it was"):
        train(recipe(plugins=[str(ctrl_c)], model={"cell": "interrupted_for_test", "units": 8, "embedding_dim": 8}),
              prev, overwrite=True, verbose=0)
    assert digest(runs) == before
    # one that fails before training (a data error) into a folder that did not exist leaves nothing
    (tmp_path / "blank.txt").write_text("\n")
    with pytest.raises(DataError):
        train(recipe(data={"source": "text_lines", "path": str(tmp_path / "blank.txt")}),
              str(tmp_path / "new" / "deeper" / "run"), verbose=0)
    assert not os.path.exists(tmp_path / "new")


def test_a_successful_overwrite_replaces_the_run_and_tensorboard_writes_into_it(tmp_path, run_copy):
    import tensorflow as tf
    from tensorflow.core.util import event_pb2

    from seqkit.training.train import train

    runs = tmp_path / "runs"
    runs.mkdir()
    prev = run_copy("runs/tiny")
    old_events = {n for _, _, files in os.walk(prev) for n in files if n.startswith("events.")}
    train(recipe(model={"units": 12, "embedding_dim": 8}, training={"epochs": 2}), prev,
          overwrite=True, verbose=0)
    assert sorted(os.listdir(runs)) == ["tiny"]  # no staging, old or lock left
    assert yaml.safe_load(open(os.path.join(prev, "recipe.yaml")))["model"]["units"] == 12
    assert json.load(open(os.path.join(prev, "state.json")))["epoch"] == 2
    # TensorBoard went on writing into the final run directory after the rename: both epochs there
    for sub, tag in (("train", "epoch_loss"), ("validation", "epoch_loss")):
        files = os.listdir(os.path.join(prev, "logs", sub))
        assert not old_events & set(files)
        steps = []
        for n in files:
            for rec in tf.data.TFRecordDataset(os.path.join(prev, "logs", sub, n)):
                ev = event_pb2.Event.FromString(rec.numpy())
                steps += [ev.step for v in ev.summary.value if v.tag == tag]
        assert sorted(steps) == [0, 1], (sub, steps)


# ---------------------------------------------------------------- one writer per run directory

def test_a_held_lock_refuses_train_and_resume_at_once(tmp_path, run_copy):
    from seqkit.runs.lifecycle import RunLock, lock_path

    run = run_copy("tiny")
    rec = write_yaml(tmp_path / "r.yaml", make_recipe(**TINY))
    before = digest(run)
    with RunLock(run):  # another holder (flock conflicts between open files, even in one process)
        for args in ((rec, "--run-dir", run, "--overwrite"), ("--resume", run, "--set", "training.epochs=2")):
            t0 = time.time()
            res = cli_train(*args)
            assert res.exit_code == 2, res.output
            assert "another seqkit training is writing" in res.output and f"PID {os.getpid()}" in res.output
            assert run in res.output and time.time() - t0 < 30
    assert digest(run) == before
    assert not os.path.exists(lock_path(run))  # the holder removed its lock file


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path, keras):
    from seqkit.runs.lifecycle import lock_path
    from seqkit.training.train import train

    path = str(tmp_path / "tiny")
    code = ("import os, sys; from seqkit.runs.lifecycle import RunLock; RunLock(sys.argv[1]).acquire(); "
            "os.kill(os.getpid(), 9)")
    subprocess.run([sys.executable, "-c", code, path], env={**os.environ, "PYTHONPATH": ROOT}, timeout=60)
    assert os.path.isfile(lock_path(path))  # left behind by the killed holder
    train(recipe(), path, verbose=0)
    assert os.path.isfile(os.path.join(path, "metrics.json")) and not os.path.exists(lock_path(path))


def test_two_trainings_into_one_directory_one_trains_the_other_fails_at_once(tmp_path):
    plugin = tmp_path / "slow.py"
    plugin.write_text(SLOW_CELL.format(secs=10))
    rec = write_yaml(tmp_path / "r.yaml", make_recipe(**{**TINY, "model": {
        "cell": "slow_for_test", "units": 8, "embedding_dim": 8}}))
    run = str(tmp_path / "run")
    cmd = [sys.executable, "-m", "seqkit.cli", "train", rec, "--run-dir", run, "--quiet", "--plugin", str(plugin)]
    env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
    procs = [subprocess.Popen(cmd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    ended = {}
    try:
        while len(ended) < 2:
            for i, p in enumerate(procs):
                if i not in ended and p.poll() is not None:
                    ended[i] = time.time()
            time.sleep(0.2)
        outs = [p.communicate(timeout=10) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], [o[1][-2000:] for o in outs]
    loser = next(i for i, p in enumerate(procs) if p.returncode == 2)
    winner = 1 - loser
    assert "another seqkit training is writing" in outs[loser][1] and f"PID {procs[winner].pid}" in outs[loser][1]
    assert "Traceback" not in outs[loser][1]
    assert ended[loser] < ended[winner]  # it did not wait for the other one
    assert json.load(open(os.path.join(run, "metrics.json")))["epochs"] == 1
    assert sorted(os.listdir(tmp_path)) == ["r.yaml", "run", "slow.py"]


# ---------------------------------------------------------------- leftovers of dead processes

def test_stale_staging_folders_of_dead_processes_are_removed_and_others_kept(tmp_path, base_run):
    from seqkit.training.train import train

    runs = tmp_path / "runs"
    runs.mkdir()
    dead = dead_pid()
    stale = [runs / f".tiny.staging-{dead}", runs / f".other.staging-{dead}", runs / f".gone.old-{dead}"]
    for d in stale:
        shutil.copytree(base_run, d)
    keep = {".cache": "x.bin", f".notes.staging-{dead}": "thesis.txt",  # not a run's files
            f".busy.staging-{os.getppid()}": "state.json"}  # a live process's
    for d, f in keep.items():
        (runs / d).mkdir()
        (runs / d / f).write_text("mine")
    # a run's names at the top, someone else's files below them: never removed, never renamed
    for d, below in ((f".photos.staging-{dead}", "backup/img.raw"), (f".notes.old-{dead}", "logs/diary.txt")):
        (runs / d / below).parent.mkdir(parents=True)
        (runs / d / below).write_text("mine")
        keep[d] = below
    kept = [digest(runs / d) for d in keep if not d.startswith(".busy")]
    train(recipe(), str(runs / "tiny"), verbose=0)
    # the .old folder whose run directory is missing was a replacement cut off midway: put back
    assert sorted(os.listdir(runs)) == sorted(["tiny", "gone", *keep])
    assert digest(runs / "gone") == digest(base_run)
    assert [digest(runs / d) for d in keep if not d.startswith(".busy")] == kept


def test_an_export_removes_partial_folders_of_dead_exports(tmp_path):
    from seqkit.export.writer import staged_dir

    dead = dead_pid()
    exports = tmp_path / "exports"
    for name, files in ((f"tiny.partial-{dead}", ["metadata.json", "model.tflite"]),
                        (f"old.partial-{dead}", ["parity.json"]),
                        (f"mine.partial-{dead}", ["thesis.txt"]),            # not an export's files
                        (f"results.partial-{dead}", ["metadata.json", "saved_model/important.bin"]),
                        (f"busy.partial-{os.getppid()}", ["metadata.json"])):  # a live process's
        (exports / name).mkdir(parents=True)
        for f in files:
            (exports / name / f).parent.mkdir(exist_ok=True)
            (exports / name / f).write_text("x")
    with staged_dir(str(exports / "tiny")) as tmp:
        open(os.path.join(tmp, "metadata.json"), "w").close()
    assert sorted(os.listdir(exports)) == sorted(["tiny", f"mine.partial-{dead}", f"results.partial-{dead}",
                                                  f"busy.partial-{os.getppid()}"])
    assert (exports / f"results.partial-{dead}" / "saved_model" / "important.bin").read_text() == "x"


def test_run_names_match_the_modules_that_write_them():
    from seqkit.heads.seq2seq.head import TARGET_VOCAB
    from seqkit.plugins import PLUGINS
    from seqkit.runs.rundir import RUN_NAMES, is_run_name, not_a_run_because

    assert {PLUGINS, TARGET_VOCAB} <= RUN_NAMES
    assert is_run_name("state.json.tmp") and is_run_name("model.tmp.keras") and not is_run_name("x.tmp")
    assert is_run_name("dynamic_stats.npz.12.tmp") and not is_run_name("notes.txt.12.tmp") \
        and not is_run_name("dynamic_stats.npz.x.tmp")
    assert not_a_run_because(ROOT).startswith("it holds files seqkit does not write")


def test_run_dir_errors_are_run_dir_errors(tmp_path):
    from seqkit.runs.lifecycle import check_target

    (tmp_path / "f").write_text("x")
    with pytest.raises(RunDirError, match="is a file"):
        check_target(str(tmp_path / "f"), None, True)
    with pytest.raises(RunDirError, match="seqkit's own staging folders"):
        check_target(str(tmp_path / ".x.staging-12"), None, True)
    assert check_target(str(tmp_path / "new"), None, False) == "absent"
