"""``--resume`` is exact with dropout on: a run killed (``kill -9``) in an epoch and resumed
writes the history and metrics of the uninterrupted run, bit for bit (timings aside), for every
head. Keras does not save dropout seed generators' state, so each epoch reseeds them from
``(seed, epoch)``; the checkpoint carries its own epoch, so a kill between files is harmless."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import make_recipe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMING = {"seconds", "train_seconds", "load_average"}


def untimed(obj):
    """``obj`` without the fields of the moment (``seconds`` per epoch, ``train_seconds``, the
    machine's ``load_average`` as training started)."""
    if isinstance(obj, dict):
        return {k: untimed(v) for k, v in obj.items() if k not in TIMING}
    if isinstance(obj, list):
        return [untimed(v) for v in obj]
    return obj


def run_files(run) -> dict:
    return {name: untimed(json.load(open(os.path.join(run, name), encoding="utf-8")))
            for name in ("history.json", "metrics.json")}


def cli(args, cwd, **kw):
    env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([sys.executable, "-m", "seqkit.cli", *args], cwd=str(cwd), env=env,
                          capture_output=True, text=True, timeout=900, **kw)


def epochs_in(path) -> list:
    try:
        return [h["epoch"] for h in json.load(open(path, encoding="utf-8"))]
    except (OSError, ValueError):
        return []


@pytest.mark.slow  # the kill in the final evaluation and after early stopping stay in the default run: -m slow (suite time)
def test_kill_9_in_epoch_2_then_resume_equals_the_uninterrupted_run(tmp_path):
    """The case to get right: a seeded LM with ``model.dropout: 0.1`` killed in epoch 2."""
    raw = make_recipe(data={"limit": 600}, model={"units": 32, "embedding_dim": 16, "dropout": 0.1},
                      training={"epochs": 3, "batch_size": 8})
    recipe = tmp_path / "lm.yaml"
    recipe.write_text(yaml.safe_dump(raw), encoding="utf-8")
    straight = tmp_path / "straight"
    res = cli(["train", str(recipe), "--run-dir", str(straight), "--quiet"], tmp_path)
    assert res.returncode == 0, res.stderr
    secs = [h["seconds"] for h in json.load(open(straight / "history.json"))]
    epoch_2 = secs[1] - secs[0]

    env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3"}
    mid_epoch = False
    for attempt, share in enumerate((0.4, 0.15, 0.05)):
        run = tmp_path / f"killed{attempt}"
        proc = subprocess.Popen([sys.executable, "-m", "seqkit.cli", "train", str(recipe), "--run-dir", str(run),
                                 "--quiet"], cwd=str(tmp_path), env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 600
            while epochs_in(run / "history.json") != [1] and proc.poll() is None and time.time() < deadline:
                time.sleep(0.01)
            time.sleep(share * epoch_2)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
        assert (run / "last.keras").exists(), "the run was killed before its first epoch finished"
        mid_epoch = epochs_in(run / "history.json") == [1]
        state = json.load(open(run / "state.json"))
        assert state["status"] == "running"  # killed: nothing could mark it
        res = cli(["train", "--resume", str(run), "--quiet"], tmp_path)
        assert res.returncode == 0, res.stderr
        assert run_files(run) == run_files(straight)
        print(f"attempt {attempt}: killed {share:.0%} into epoch 2 ({epoch_2:.1f} s); mid-epoch: {mid_epoch}")
        if mid_epoch:
            break
    assert mid_epoch, f"no kill landed inside epoch 2 (epoch 2 takes {epoch_2:.1f} s)"


def small(head: str, epochs: int, tmp_path):
    """A tiny seeded recipe for ``head`` with every dropout it has switched on."""
    from seqkit.recipe import recipe_from_dict
    from tests.test_export_seq2seq import WORDS
    from tests.test_export_sequence import TAG_TRAIN, TS_HEAD, ts_case

    training = {"epochs": epochs, "batch_size": 4, "early_stopping": None}
    if head == "language_model":
        raw = make_recipe(data={"limit": 60}, model={"units": 8, "embedding_dim": 8, "dropout": 0.3,
                                                     "recurrent_dropout": 0.3},
                          training={**training, "batch_size": 16})
    elif head == "tagger":
        (tmp_path / "tags.txt").write_text(TAG_TRAIN, encoding="utf-8")
        raw = {"name": "tag", "seed": 3,
               "data": {"source": "word_tag", "path": str(tmp_path / "tags.txt"), "max_length": 8,
                        "split": {"valid": 0.2, "test": 0.2, "shuffle": True}},
               "model": {"cell": "lstm", "units": 8, "embedding_dim": 6, "layers": 2, "dropout": 0.3,
                         "recurrent_dropout": 0.2, "bidirectional": True},
               "head": {"type": "tagger", "output_dropout": 0.3}, "training": training}
    elif head == "acceptor":
        (tmp_path / "train.ts").write_text(TS_HEAD + "".join(ts_case(i) for i in range(24)))
        raw = {"name": "acc", "seed": 3,
               "data": {"source": "ts", "train_path": str(tmp_path / "train.ts"), "max_length": 6,
                        "split": {"valid": 0.2, "test": 0.2, "shuffle": True}},
               "model": {"cell": "gru", "units": 8, "layers": 1, "bidirectional": True, "dropout": 0.3,
                         "recurrent_dropout": 0.3},
               "head": {"type": "acceptor", "pooling": "mean", "output_dropout": 0.3}, "training": training}
    else:
        (tmp_path / "tiny.dict").write_text("\n".join(f"{w} {p}" for w, p in WORDS.items()) + "\n",
                                            encoding="utf-8")
        raw = {"name": "g2p", "seed": 3,
               "data": {"source": "cmudict", "path": str(tmp_path / "tiny.dict"), "max_length": 6,
                        "split": {"valid": 0.2, "test": 0.2, "shuffle": True}},
               "model": {"cell": "lstm", "units": 8, "embedding_dim": 8, "layers": 2, "bidirectional": True,
                         "dropout": 0.3, "recurrent_dropout": 0.3},
               "head": {"type": "seq2seq", "decoder_units": 8, "attention": "bahdanau"},
               "training": {**training, "learning_rate": 0.02}}
    return recipe_from_dict(raw)


@pytest.mark.parametrize("head", ["language_model",  # acceptor, tagger, seq2seq: -m slow (suite time)
                                  pytest.param("acceptor", marks=pytest.mark.slow),
                                  pytest.param("tagger", marks=pytest.mark.slow),
                                  pytest.param("seq2seq", marks=pytest.mark.slow)])
def test_resume_after_one_epoch_equals_two_epochs_straight(head, tmp_path, keras):
    from seqkit.training.train import train

    straight, cut = str(tmp_path / "straight"), str(tmp_path / "cut")
    train(small(head, 2, tmp_path), straight, verbose=0)
    train(small(head, 1, tmp_path), cut, verbose=0)
    train(small(head, 2, tmp_path), cut, resume=True, verbose=0)
    assert run_files(cut) == run_files(straight)


def test_a_resumed_run_counts_the_training_time_of_its_saved_epochs(tmp_path, keras, monkeypatch):
    """The first process's clock jumps 1000 s between its readings: epoch 1 took over 1000 s.
    Resumed on a real clock, epoch 2's ``seconds`` and ``train_seconds`` still count those."""
    import itertools
    import types

    from seqkit.training import train as train_module

    jumps = itertools.count()
    monkeypatch.setattr(train_module, "time", types.SimpleNamespace(time=lambda: time.time() + 1000 * next(jumps)))
    run = str(tmp_path / "run")
    train_module.train(small("language_model", 1, tmp_path), run, verbose=0)
    first = json.load(open(os.path.join(run, "history.json")))[0]["seconds"]
    assert first >= 1000
    monkeypatch.setattr(train_module, "time", time)
    train_module.train(small("language_model", 2, tmp_path), run, resume=True, verbose=0)
    hist = json.load(open(os.path.join(run, "history.json")))
    metrics = json.load(open(os.path.join(run, "metrics.json")))
    assert hist[0]["seconds"] == first
    assert first < hist[1]["seconds"] < first + 600 and hist[1]["seconds"] <= metrics["train_seconds"] < first + 600


def test_dropout_masks_follow_seed_and_epoch_in_fresh_and_loaded_models(tmp_path, keras):
    """Every seed generator is found (Dropout layers, both directions' cells) and a loaded model
    gets the same states as the model it was saved from."""
    from seqkit.training.train import load_model, prepare, compile_model, reseed_epoch, seed_generators

    r = small("tagger", 1, tmp_path)
    prep = prepare(r)
    model = compile_model(prep)
    gens = seed_generators(model)
    # per layer: the input Dropout, forward + backward LSTM layers, each with its cell; + output dropout
    assert len(gens) >= 2 * (1 + 2) + 1
    model.save(str(tmp_path / "m.keras"))
    loaded = load_model(str(tmp_path / "m.keras"))
    for epoch in (0, 5):
        reseed_epoch(model, 7, epoch)
        reseed_epoch(loaded, 7, epoch)
        a = [g.state.numpy().tolist() for g in seed_generators(model)]
        assert a == [g.state.numpy().tolist() for g in seed_generators(loaded)]
        assert len({s[0] for s in a}) == len(a) and all(s[1] == 0 for s in a)
    reseed_epoch(model, 7, 6)
    assert [g.state.numpy().tolist() for g in seed_generators(model)] != a


@pytest.mark.slow  # 17-163 s under xdist; the default run stays under 15 min (run with -m slow)
def test_resume_trusts_the_checkpoint_over_state_files_that_lag(tmp_path, keras):
    """Killed after last.keras was replaced but before history.json / state.json: the resume
    starts after the checkpoint's epoch, not the state file's, and repeats no history entry."""
    from seqkit.training.train import train

    straight, run = str(tmp_path / "straight"), str(tmp_path / "run")
    train(small("language_model", 3, tmp_path), straight, verbose=0)
    train(small("language_model", 2, tmp_path), run, verbose=0)
    hist = json.load(open(os.path.join(run, "history.json")))
    with open(os.path.join(run, "history.json"), "w") as f:
        json.dump(hist[:1], f)
    with open(os.path.join(run, "state.json"), "w") as f:
        json.dump({"epoch": 1, "best": hist[0]["val_cross_entropy"], "status": "running"}, f)
    os.remove(os.path.join(run, "metrics.json"))
    train(small("language_model", 3, tmp_path), run, resume=True, verbose=0)
    assert run_files(run) == run_files(straight)


def test_run_killed_in_its_final_evaluation_resumes_to_finish(tmp_path, keras):
    from seqkit.errors import RunDirError
    from seqkit.training.train import train

    straight, run = str(tmp_path / "straight"), str(tmp_path / "run")
    train(small("acceptor", 2, tmp_path), straight, verbose=0)
    train(small("acceptor", 2, tmp_path), run, verbose=0)
    os.remove(os.path.join(run, "metrics.json"))
    state = json.load(open(os.path.join(run, "state.json")))
    with open(os.path.join(run, "state.json"), "w") as f:
        json.dump({**state, "status": "running"}, f)
    train(small("acceptor", 2, tmp_path), run, resume=True, verbose=0)
    assert run_files(run) == run_files(straight)
    assert json.load(open(os.path.join(run, "state.json")))["status"] == "finished"
    with pytest.raises(RunDirError, match="already trained for 2 of 2 epochs"):
        train(small("acceptor", 2, tmp_path), run, resume=True, verbose=0)


def test_run_killed_after_early_stopping_resumes_to_finish_without_training(tmp_path, keras):
    """Early stopping ended the run after epoch 5 of 8 and the process died before metrics.json:
    the resume trains no sixth epoch (the straight run did not), it only finishes."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    r = recipe_from_dict(make_recipe(data={"limit": 120}, model={"cell": "gru", "units": 16},
                                     training={"epochs": 8, "learning_rate": 0.05, "steps_per_epoch": 3,
                                               "early_stopping": {"patience": 2}}))
    straight, run = str(tmp_path / "straight"), str(tmp_path / "run")
    train(r, straight, verbose=0)
    train(r, run, verbose=0)
    stopped = len(json.load(open(os.path.join(run, "history.json"))))
    assert stopped < 8
    os.remove(os.path.join(run, "metrics.json"))
    state = json.load(open(os.path.join(run, "state.json")))
    with open(os.path.join(run, "state.json"), "w") as f:
        json.dump({**state, "status": "running"}, f)
    train(r, run, resume=True, verbose=0)
    assert run_files(run) == run_files(straight)
    assert json.load(open(os.path.join(run, "state.json"))) == {**state, "status": "finished"}


def test_resume_checks_the_recipe_the_checkpoint_was_trained_with(tmp_path, keras):
    """last.keras records its recipe: a recipe.yaml edited away from it (another data slice, a
    learning rate) is refused by name before anything trains; restored, the run resumes; a
    change through --set is refused as before; a resumable change (epochs) goes through."""
    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.recipe import recipe_from_dict
    from seqkit.runs.rundir import read_checkpoint_state
    from seqkit.training.train import train

    raw = make_recipe(data={"limit": 60}, model={"units": 4, "embedding_dim": 4}, training={"epochs": 1})
    run = tmp_path / "run"
    train(recipe_from_dict(raw), str(run), verbose=0)
    original = (run / "recipe.yaml").read_text(encoding="utf-8")
    assert read_checkpoint_state(str(run / "last.keras"))["recipe"] == yaml.safe_load(original)
    edited = yaml.safe_load(original)
    edited["data"]["limit"], edited["training"]["learning_rate"] = 80, 0.5
    (run / "recipe.yaml").write_text(yaml.safe_dump(edited), encoding="utf-8")
    before = (run / "last.keras").read_bytes()
    res = CliRunner().invoke(main, ["train", "--resume", str(run), "--set", "training.epochs=2", "-q"])
    assert res.exit_code == 2, res.output
    assert ("recipe.yaml: differs from the recipe last.keras was trained with: data.limit (60 in the "
            "checkpoint, 80 in the file), training.learning_rate (0.01 in the checkpoint, 0.5 in the "
            "file)") in res.output
    assert (run / "last.keras").read_bytes() == before and epochs_in(run / "history.json") == [1]
    (run / "recipe.yaml").write_text(original, encoding="utf-8")
    res = CliRunner().invoke(main, ["train", "--resume", str(run), "--set", "training.learning_rate=0.5", "-q"])
    assert res.exit_code == 2 and "--resume cannot change training.learning_rate (0.01 -> 0.5)" in res.output
    res = CliRunner().invoke(main, ["train", "--resume", str(run), "--set", "training.epochs=2", "-q"])
    assert res.exit_code == 0, res.output
    assert epochs_in(run / "history.json") == [1, 2]


def test_a_checkpoint_without_its_recipe_resumes_with_a_warning(tmp_path, keras, capsys, seqkit_stderr):
    """A last.keras written before checkpoints kept their recipe: the resume cannot check
    recipe.yaml against it, says so, and goes on with the file as it is."""
    import json as _json
    import zipfile

    from seqkit.recipe import recipe_from_dict
    from seqkit.runs.rundir import CHECKPOINT_STATE, read_checkpoint_state
    from seqkit.training.train import train

    raw = make_recipe(data={"limit": 60}, model={"units": 4, "embedding_dim": 4}, training={"epochs": 1})
    run = tmp_path / "run"
    train(recipe_from_dict(raw), str(run), verbose=0)
    last = run / "last.keras"
    state = read_checkpoint_state(str(last))
    state.pop("recipe")
    with zipfile.ZipFile(last) as z:
        entries = {n: z.read(n) for n in z.namelist() if n != CHECKPOINT_STATE}
    with zipfile.ZipFile(last, "w") as z:
        for n, data in entries.items():
            z.writestr(n, data)
        z.writestr(CHECKPOINT_STATE, _json.dumps(state))
    capsys.readouterr()
    train(recipe_from_dict({**raw, "training": {**raw["training"], "epochs": 2}}), str(run), resume=True, verbose=0)
    assert "last.keras records no recipe" in capsys.readouterr().err
    assert epochs_in(run / "history.json") == [1, 2]
    assert "recipe" in read_checkpoint_state(str(last))  # the next checkpoints record it
