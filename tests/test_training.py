"""Training on a slice of real text: loss drops, seeds reproduce, resume continues, nothing half-written."""

import json
import os

import numpy as np
import pytest

from seqkit.recipe import recipe_from_dict
from tests.conftest import make_recipe


def small(**kw):
    return recipe_from_dict(make_recipe(**kw))


@pytest.fixture(scope="module")
def trained(tmp_path_factory, keras):
    from seqkit.training.train import train

    run = str(tmp_path_factory.mktemp("runs") / "tiny")
    metrics = train(small(data={"limit": 1200}, model={"units": 64}, training={"epochs": 3}), run, verbose=0)
    return run, metrics


def test_held_out_loss_drops_and_beats_unigram(trained, keras):
    from seqkit.training.train import evaluate_model, load_run, prepare

    run, metrics = trained
    prep, model = load_run(run, with_data=True)
    fresh = prepare(prep.recipe, prep.vocab)
    from seqkit.training.train import compile_model

    keras.utils.set_random_seed(7)
    untrained = evaluate_model(fresh, compile_model(fresh), "test")
    after = metrics["test"]
    assert untrained["cross_entropy"] > 4.0  # ~ log(V): a fresh model knows nothing
    assert after["cross_entropy"] < untrained["cross_entropy"] - 1.0
    assert after["perplexity"] < metrics["baselines"]["1-gram"]["test"]
    # the compressors' per-token perplexities sit beside the n-grams (zlib is the weakest of them)
    comp = {k: metrics["baselines"][k]["test"] for k in ("xz -9e", "bzip2 -9", "zlib -9")}
    assert 1.0 < comp["xz -9e"] <= comp["zlib -9"] and comp["bzip2 -9"] > 1.0
    # evaluate on the saved best model gives the figures recorded in metrics.json
    assert evaluate_model(prep, model, "test")["perplexity"] == pytest.approx(after["perplexity"], rel=1e-5)


def test_run_directory_contents(trained):
    run, metrics = trained
    for name in ("recipe.yaml", "vocab.json", "model.keras", "last.keras", "state.json",
                 "metrics.json", "history.json", "logs"):
        assert os.path.exists(os.path.join(run, name)), name
    assert not [f for f in os.listdir(run) if ".tmp" in f]
    state = json.load(open(os.path.join(run, "state.json")))
    assert state["epoch"] == 3 and state["status"] == "finished"
    hist = json.load(open(os.path.join(run, "history.json")))
    assert [h["epoch"] for h in hist] == [1, 2, 3]
    assert state["best"] == min(h["val_cross_entropy"] for h in hist) and state["monitor"] == "val_cross_entropy"
    # where the figures came from: the versions and the CPU this process runs on
    import keras
    import tensorflow as tf

    from seqkit.runs.provenance import cpu_flags, cpu_kind

    m = json.load(open(os.path.join(run, "metrics.json")))["machine"]
    assert (m["tensorflow"], m["keras"]) == (tf.__version__, keras.__version__)
    assert m["cpu_kind"] == cpu_kind(cpu_flags()) and m["cpus"] == os.cpu_count()
    assert set(m["cpu_flags"]) == {f for f, have in cpu_flags().items() if have}


def test_cut_off_model_file_says_so_and_names_the_way_back(trained, tmp_path):
    import shutil

    from seqkit.errors import RunDirError
    from seqkit.training.train import load_model, load_run

    run = str(tmp_path / "copy")
    shutil.copytree(trained[0], run)
    best = os.path.join(run, "model.keras")
    data = open(best, "rb").read()
    open(best, "wb").write(data[: len(data) // 2])  # what a full disk or an interrupted copy leaves
    with pytest.raises(RunDirError, match=r"model.keras: not a complete .keras archive .*Copy the run's "
                                          r"last.keras over it"):
        load_run(run)
    shutil.copy(os.path.join(run, "last.keras"), best)  # the way back the message names works
    assert load_model(best).count_params() > 0


@pytest.mark.slow  # -m slow (suite time): two trainings with one seed agreeing, epoch 1 figures included, is
# also what tests/test_resume_exact.py::test_resume_after_one_epoch_equals_two_epochs_straight
# [language_model] asserts (with dropout on) in the default run, as do the resume tests below
def test_same_seed_same_metrics(tmp_path, keras):
    from seqkit.training.train import train

    r = small(data={"limit": 120}, training={"epochs": 1})
    a = train(r, str(tmp_path / "a"), verbose=0)
    b = train(r, str(tmp_path / "b"), verbose=0)
    assert a["test"] == b["test"] and a["valid"] == b["valid"]


@pytest.mark.slow  # heavy; the default run stays under 15 min on 2 cores (run with -m slow)
def test_resume_continues_from_last_epoch(tmp_path, keras):
    from seqkit.errors import RunDirError
    from seqkit.training.train import train

    run = str(tmp_path / "r")
    train(small(data={"limit": 120}, training={"epochs": 1}), run, verbose=0)
    m = train(small(data={"limit": 120}, training={"epochs": 2}), run, resume=True, verbose=0)
    hist = json.load(open(os.path.join(run, "history.json")))
    assert [h["epoch"] for h in hist] == [1, 2] and m["epochs"] == 2
    with pytest.raises(RunDirError, match="already trained for 2 of 2 epochs"):
        train(small(data={"limit": 120}, training={"epochs": 2}), run, resume=True, verbose=0)
    with pytest.raises(RunDirError, match="exists already"):
        train(small(data={"limit": 120}), run, verbose=0)


def test_resume_with_steps_per_epoch_equals_training_straight_through(tmp_path, keras):
    """Epochs of 2 batches over passes of ~3: a resumed run reads on where the straight run was
    (found by a breaker pass: it used to restart at the epoch number's pass)."""
    from seqkit.training.train import train

    r = lambda n: small(data={"limit": 120}, training={"epochs": n, "steps_per_epoch": 2})  # noqa: E731
    straight = train(r(4), str(tmp_path / "s"), verbose=0)
    run = str(tmp_path / "r")
    train(r(2), run, verbose=0)
    again = train(r(4), run, resume=True, verbose=0)
    hist = [json.load(open(os.path.join(d, "history.json"))) for d in (str(tmp_path / "s"), run)]
    assert [h["epoch"] for h in hist[1]] == [1, 2, 3, 4]
    for a, b in zip(*hist):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-6) and a["val_cross_entropy"] == pytest.approx(
            b["val_cross_entropy"], rel=1e-6)
    assert straight["test"]["perplexity"] == pytest.approx(again["test"]["perplexity"], rel=1e-6)


def test_resume_stops_early_where_training_straight_through_stops(tmp_path, keras):
    """Early stopping counts patience across a resume: a run cut after epoch 4 (epoch 4 already
    worse than epoch 3) stops after epoch 5 as the straight run does. A fresh EarlyStopping
    took epoch 5 as its first best and ran on past it (found by a breaker pass)."""
    from seqkit.training.train import train

    r = lambda n: small(data={"limit": 120}, model={"cell": "gru", "units": 16}, training={  # noqa: E731
        "epochs": n, "learning_rate": 0.05, "steps_per_epoch": 3, "early_stopping": {"patience": 2}})
    train(r(8), str(tmp_path / "s"), verbose=0)
    run = str(tmp_path / "r")
    train(r(4), run, verbose=0)
    train(r(8), run, resume=True, verbose=0)
    hist = [json.load(open(os.path.join(d, "history.json"))) for d in (str(tmp_path / "s"), run)]
    val = [[h["val_cross_entropy"] for h in x] for x in hist]
    # the straight run: best at epoch 3, two epochs without improvement, stopped after epoch 5
    assert len(val[0]) == 5 and min(val[0]) == val[0][2] and min(val[0][3:]) > val[0][2]
    assert [h["epoch"] for h in hist[1]] == [1, 2, 3, 4, 5]
    assert val[1] == pytest.approx(val[0], rel=1e-6)


def test_keras_fit_reads_pass_k_in_epoch_k(tf, keras):
    """The pass counter moves when the consumer asks past a pass's last batch. Keras's fit learns
    the number of batches in epoch 1 and then stops at it: each epoch must still see its own
    pass (a regression here would repeat one order every epoch, silently)."""
    from seqkit.data.pipeline import make_array_dataset

    def data():
        return make_array_dataset([np.full(3, i + 1, np.int32) for i in range(40)], list(range(40)),
                                  batch_size=8, shuffle=True, seed=3, bucket=True, max_length=16)

    seen = []

    class Recorder(keras.Model):
        def train_step(self, batch):
            tf.py_function(lambda y: seen.append(y.numpy().tolist()) or 0, [batch[1]], tf.int32)
            return {"n": tf.constant(0.0)}

    inp = keras.Input((None,), dtype="int32")
    model = Recorder(inp, keras.layers.Dense(2)(keras.layers.Embedding(50, 2)(inp)[:, 0]))
    model.compile("sgd", lambda y, z: tf.reduce_mean(z) * 0.0)
    model.fit(data(), epochs=4, verbose=0, shuffle=False)
    ref = data()
    passes = [[int(v) for _, y in ref for v in y.numpy()] for _ in range(4)]
    assert len(seen) == 20 and len({tuple(p) for p in passes}) == 4
    assert [sum(seen[5 * e:5 * e + 5], []) for e in range(4)] == passes


def test_bad_data_leaves_no_run_directory(tmp_path, keras):
    from seqkit.errors import DataError
    from seqkit.training.train import train

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\xfe\n")
    r = small(data={"source": "text_lines", "path": str(bad), "limit": None})
    with pytest.raises(DataError, match="not UTF-8"):
        train(r, str(tmp_path / "run"), verbose=0)
    assert not (tmp_path / "run").exists()


def test_failure_in_first_epoch_removes_run_directory(tmp_path, keras, monkeypatch):
    import keras as k

    from seqkit.training.train import train

    def boom(self, *a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(k.Model, "fit", boom)
    from seqkit.errors import SeqkitError

    with pytest.raises(SeqkitError, match="nothing was kept"):
        train(small(data={"limit": 60}), str(tmp_path / "run"), verbose=0)
    assert not (tmp_path / "run").exists()


def test_gradient_clipping_by_global_norm(tf, keras):
    """Textbook item 9: g <- g * tau / ||g|| when ||g|| > tau, unchanged otherwise (SGD, lr 1)."""
    from seqkit.recipe import TrainingConfig
    from seqkit.training.train import make_optimizer

    for grads, expected in (([3.0, 4.0], [0.6, 0.8]), ([0.3, 0.4], [0.3, 0.4])):
        a, b = tf.Variable(0.0), tf.Variable(0.0)
        opt = make_optimizer(TrainingConfig(optimizer="sgd", learning_rate=1.0, clipnorm=1.0))
        opt.apply_gradients([(tf.constant(grads[0]), a), (tf.constant(grads[1]), b)])
        assert [-float(a), -float(b)] == pytest.approx(expected, abs=1e-7)


def test_early_stopping_watches_exact_validation_cross_entropy(tmp_path, keras):
    from seqkit.training.train import train

    r = small(data={"limit": 80}, training={"epochs": 6, "early_stopping": {"patience": 1, "min_delta": 10.0}})
    m = train(r, str(tmp_path / "r"), verbose=0)
    assert m["epochs"] == 2  # no epoch improves by 10 nats: stop after patience 1
