"""What training says as it runs: the steps of an epoch from the first epoch on (not Keras's
``N/Unknown``), an ETA after each epoch, and, when early stopping ends a run, after which epoch,
which epoch the run keeps, the metric watched and the patience."""

import json
import os
import re

import numpy as np
import pytest

from seqkit.recipe import recipe_from_dict
from seqkit.training.progress import best_epoch, early_stop_summary, eta_seconds
from tests.conftest import make_recipe

# ---------------------------------------------------------------- pure helpers (no TensorFlow)


def test_eta_leaves_out_the_first_epoch_once_a_later_one_finished():
    # the first epoch also traces the model: 10 s; then 4 s and 6 s -> 5 s an epoch, 3 left -> 15 s
    assert eta_seconds([10.0, 4.0, 6.0], 3) == pytest.approx(15.0)
    assert eta_seconds([8.0], 2) == pytest.approx(16.0)  # one epoch known: it is all there is
    assert eta_seconds([8.0, 2.0], 0) == 0.0
    with pytest.raises(ValueError):
        eta_seconds([], 4)


def test_best_epoch_is_the_first_lowest_value():
    history = [{"epoch": 1, "val_loss": 2.0}, {"epoch": 2, "val_loss": 1.5}, {"epoch": 3, "val_loss": 1.5},
               {"epoch": 4, "val_loss": 1.7}, {"epoch": 5}]
    assert best_epoch(history, "val_loss") == (2, 1.5)  # model.keras is replaced only on a strict improvement
    assert best_epoch(history, "val_accuracy") is None


def test_early_stop_summary_names_epochs_metric_and_patience():
    history = [{"epoch": 1, "val_cross_entropy": 3.25}, {"epoch": 2, "val_cross_entropy": 3.5},
               {"epoch": 3, "val_cross_entropy": 3.75}]
    record, message = early_stop_summary(3, 20, history, "val_cross_entropy", 2, 0.0)
    assert record == {"stopped_after_epoch": 3, "epochs": 20, "best_epoch": 1, "best": 3.25,
                      "monitor": "val_cross_entropy", "patience": 2, "min_delta": 0.0}
    assert message == ("early stopping: val_cross_entropy has not improved for 2 epochs "
                       "(training.early_stopping.patience 2), so training ended after epoch 3 of 20. "
                       "The run keeps epoch 1 (val_cross_entropy 3.2500) as its model.keras.")
    _, message = early_stop_summary(2, 6, history[:2], "val_cross_entropy", 1, 0.5)
    assert "has not improved by more than 0.5 for 1 epoch (" in message


# ---------------------------------------------------------------- Keras's bar knows the steps


def test_keras_bar_knows_the_step_count_in_the_first_epoch(keras, tf):
    """A dataset tf.data cannot count (a filter, as after bucketing): Keras's own bar has no target
    in epoch 1 (what printed ``N/Unknown``); seqkit's bar has the counted one from the first step."""
    from seqkit.training.progress import steps_progbar_class

    ds = tf.data.Dataset.from_tensor_slices((np.ones((10, 3), np.float32), np.zeros((10, 1), np.float32)))
    ds = ds.batch(2).filter(lambda x, y: True)
    assert int(ds.cardinality()) == int(tf.data.UNKNOWN_CARDINALITY)

    class Probe(keras.callbacks.Callback):
        def __init__(self, bar):
            super().__init__()
            self.bar, self.targets = bar, []

        def on_train_batch_end(self, batch, logs=None):
            self.targets.append(self.bar.target)

    def targets(bar):
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        probe = Probe(bar)
        model.fit(ds, epochs=1, verbose=0, callbacks=[bar, probe], shuffle=False)
        return probe.targets

    assert targets(keras.callbacks.ProgbarLogger()) == [None] * 5
    assert targets(steps_progbar_class()(5)) == [5] * 5


# ---------------------------------------------------------------- a training run, told as it runs


def test_training_logs_steps_eta_and_where_early_stopping_ended(tmp_path, keras, capsys, seqkit_stderr):
    from seqkit.training.train import make_split_dataset, prepare, train

    raw = make_recipe(data={"limit": 80}, model={"units": 8, "embedding_dim": 8},
                      training={"epochs": 6, "batch_size": 8, "early_stopping": {"patience": 1, "min_delta": 10.0}})
    run = str(tmp_path / "r")
    metrics = train(recipe_from_dict(raw), run, verbose=1)
    captured = capsys.readouterr()
    err, out = captured.err, captured.out

    # the step count, counted before the first epoch, is the number of steps epoch 1 ran
    plan = re.search(r"seqkit: training: 6 epochs of (\d+) steps; batch 8; early stopping may end it "
                     r"sooner \(patience 1 on val_cross_entropy\)", err)
    assert plan, err
    steps = int(plan.group(1))
    prep = prepare(recipe_from_dict(raw))
    assert steps == sum(1 for _ in make_split_dataset(prep, "train", training=True))
    assert f"{steps}/{steps}" in out and "Unknown" not in out
    assert re.search(r"seqkit: epoch 1/6 took \d+:\d\d; ETA \d+:\d\d for the 5 epochs left", err), err

    # no epoch improves by 10 nats: stopped after epoch 2; the kept epoch is the best of the two
    history = json.load(open(os.path.join(run, "history.json")))
    assert [h["epoch"] for h in history] == [1, 2]
    values = [h["val_cross_entropy"] for h in history]
    kept = 1 if values[0] <= values[1] else 2
    assert metrics["early_stopping"] == {
        "stopped_after_epoch": 2, "epochs": 6, "best_epoch": kept, "best": pytest.approx(values[kept - 1]),
        "monitor": "val_cross_entropy", "patience": 1, "min_delta": 10.0}
    assert ("seqkit: early stopping: val_cross_entropy has not improved by more than 10 for 1 epoch "
            "(training.early_stopping.patience 1), so training ended after epoch 2 of 6. The run keeps "
            f"epoch {kept} (val_cross_entropy {values[kept - 1]:.4f}) as its model.keras.") in err
    # model.keras is that epoch: its validation figure is the one history recorded for it
    assert metrics["valid"]["cross_entropy"] == pytest.approx(values[kept - 1], rel=1e-5)
    assert json.load(open(os.path.join(run, "metrics.json")))["early_stopping"]["best_epoch"] == kept


def test_stream_training_plan_counts_chunks(tmp_path, keras, capsys, seqkit_stderr):
    """The language model's stream loop (no Keras bar): the plan names the epoch's chunk count,
    the stream's length, and no early stopping means no early-stopping line; a resumed run's plan
    names the epochs still to train."""
    from seqkit.training.train import make_split_dataset, prepare, train

    def recipe(epochs):
        return recipe_from_dict(make_recipe(data={"layout": "stream", "limit": 40},
                                            model={"units": 8, "embedding_dim": 8},
                                            training={"epochs": epochs, "batch_size": 4, "bptt": 16}))

    run = str(tmp_path / "s")
    metrics = train(recipe(2), run, verbose=1)
    err = capsys.readouterr().err
    chunks = len(make_split_dataset(prepare(recipe(2)), "train", training=True))
    assert chunks > 1
    assert f"seqkit: training: 2 epochs of {chunks} steps; batch 4\n" in err
    assert "seqkit: epoch 1/2 took " in err and "for the 1 epoch left" in err
    assert "seqkit: epoch 2/2 took " in err and "early stopping" not in err
    assert "early_stopping" not in metrics
    train(recipe(3), run, resume=True, verbose=1)
    assert f"seqkit: training: 1 epoch of {chunks} steps (epoch 3); batch 4\n" in capsys.readouterr().err


def test_train_draws_keras_bar_only_on_a_terminal(tmp_path, keras):
    """`seqkit train` into a pipe or a log file: one plain line per epoch (no carriage returns or
    colour codes, which Keras writes whatever the stream); on a terminal the redrawn bar."""
    import io
    import sys

    import yaml
    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.cli.train import keras_verbosity

    raw = make_recipe(data={"limit": 40}, model={"units": 4, "embedding_dim": 4}, training={"epochs": 2, "batch_size": 8})
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(raw))
    res = CliRunner().invoke(main, ["train", str(tmp_path / "r.yaml"), "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    assert "\r" not in res.output and "\x1b[" not in res.output
    assert len(re.findall(r"^7/7 - .* - val_perplexity: [0-9.]+$", res.stderr, re.M)) == 2, res.stderr

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    real = sys.stderr
    try:
        sys.stderr = Terminal()
        assert (keras_verbosity(False), keras_verbosity(True)) == (1, 0)
        sys.stderr = io.StringIO()
        assert keras_verbosity(False) == 2
    finally:
        sys.stderr = real
