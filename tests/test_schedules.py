"""Learning-rate schedules (``training.schedule``): formulas by hand, the rate per epoch in
history.json, and ``--resume`` continuing the schedule where the uninterrupted run is."""

import json
import math
import os

import pytest

from tests.conftest import make_recipe


def test_warmup_cosine_at_given_steps_by_hand(keras):
    from seqkit.training.schedules import WarmupCosine

    lr = WarmupCosine(0.1, decay_steps=10, warmup_steps=4, min_learning_rate=0.01)
    # warm-up 0.1 * (s + 1) / 4; then 0.01 + 0.09 * (1 + cos(pi * (s - 4) / 10)) / 2; then 0.01
    hand = {0: 0.025, 1: 0.05, 3: 0.1, 4: 0.1, 6: 0.01 + 0.09 * (1 + math.cos(0.2 * math.pi)) / 2,
            9: 0.055, 14: 0.01, 100: 0.01}
    for s, want in hand.items():
        assert float(lr(s)) == pytest.approx(want, rel=1e-6), s
    assert float(lr(6)) == pytest.approx(0.0914058, rel=1e-6)


def test_step_decay_at_given_steps_by_hand(keras):
    from seqkit.training.schedules import WarmupStepDecay

    lr = WarmupStepDecay(0.1, step_size=5, factor=0.5, warmup_steps=2)
    hand = {0: 0.05, 1: 0.1, 2: 0.1, 6: 0.1, 7: 0.05, 11: 0.05, 12: 0.025, 22: 0.00625}
    for s, want in hand.items():
        assert float(lr(s)) == pytest.approx(want, rel=1e-6), s


def test_plateau_arithmetic_by_hand():
    """patience 2, min_delta 0.1, cooldown 1, factor 0.5, floor 0.2 (worked through by hand)."""
    from seqkit.training.schedules import PlateauState

    st = PlateauState(1.0, factor=0.5, patience=2, min_delta=0.1, cooldown=1, min_learning_rate=0.2)
    values = [5, 4.95, 4.92, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0]
    assert [st.update(v) for v in values] == [1, 1, .5, .5, .5, .25, .25, .25, .2, .2, .2, .2]
    assert st.update(None) == 0.2 and st.best == 4.0


def test_cosine_without_decay_steps_spans_the_run(keras):
    from seqkit.recipe import Recipe
    from seqkit.training.schedules import WarmupCosine, make_schedule

    t = Recipe.from_dict(make_recipe(training={"epochs": 3, "schedule": {
        "type": "cosine", "warmup_steps": 5}})).training
    s = make_schedule(t, steps_per_epoch=10)
    assert isinstance(s, WarmupCosine) and (s.decay_steps, s.warmup_steps, s.peak) == (25, 5, 0.01)
    assert float(s(29)) == pytest.approx(0.01 * (1 + math.cos(math.pi * 24 / 25)) / 2, rel=1e-5)
    from seqkit.errors import RecipeError

    with pytest.raises(RecipeError, match="decay_steps"):
        make_schedule(t, steps_per_epoch=None)
    long = Recipe.from_dict(make_recipe(training={"epochs": 1, "schedule": {
        "type": "cosine", "warmup_steps": 10}})).training
    with pytest.raises(RecipeError, match="warm-up steps are the whole run"):
        make_schedule(long, steps_per_epoch=10)


def _fit_rates(keras, model, x, y, epochs, initial_epoch=0):
    """Per-update learning rates (read before each update) of ``model.fit``."""
    from seqkit.training.schedules import current_learning_rate

    rates = []

    class Rates(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            rates.append(current_learning_rate(self.model.optimizer))

    model.fit(x, y, batch_size=2, epochs=epochs, initial_epoch=initial_epoch, shuffle=False, verbose=0,
              callbacks=[Rates()])
    return rates


def test_resume_from_a_saved_optimizer_continues_the_schedule(tmp_path, keras):
    """Fast form of the slow end-to-end test: a model saved after epoch 1 of a warm-up + cosine
    schedule, loaded and fitted on, uses the rates and reaches the weights of the straight fit."""
    import numpy as np

    from seqkit.recipe import Recipe
    from seqkit.training.schedules import WarmupCosine
    from seqkit.training.train import make_optimizer

    t = Recipe.from_dict(make_recipe(training={"epochs": 3, "optimizer": "adamw", "weight_decay": 0.01,
                                               "schedule": {"type": "cosine", "warmup_steps": 2}})).training
    x = np.linspace(-1, 1, 8, dtype="float32").reshape(4, 2)
    y = np.array([[1.0], [0.0], [1.0], [0.5]], "float32")

    def model():
        keras.utils.set_random_seed(1)
        m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        m.compile(make_optimizer(t, steps_per_epoch=2), "mse", run_eagerly=True)  # no tracing: fast
        return m

    straight = model()
    rates = _fit_rates(keras, straight, x, y, 3)
    f = WarmupCosine(0.01, decay_steps=4, warmup_steps=2)
    assert rates == pytest.approx([float(f(s)) for s in range(6)], rel=1e-6)
    assert rates[:3] == pytest.approx([0.005, 0.01, 0.01], rel=1e-6)
    part = model()
    first = _fit_rates(keras, part, x, y, 1)
    part.save(tmp_path / "last.keras")
    import seqkit  # noqa: F401  (registers seqkit's Keras classes)

    loaded = keras.saving.load_model(tmp_path / "last.keras")
    loaded.run_eagerly = True
    assert first + _fit_rates(keras, loaded, x, y, 3, initial_epoch=1) == rates
    np.testing.assert_array_equal(loaded.get_weights()[0], straight.get_weights()[0])


def test_plateau_replay_sets_the_rate_the_straight_run_reached(keras):
    """A resumed run's plateau callback, given the past epochs' values, is where the straight one is."""
    from seqkit.recipe import Recipe
    from seqkit.training.schedules import plateau_callback

    t = Recipe.from_dict(make_recipe(training={"learning_rate": 1.0, "schedule": {
        "type": "plateau", "factor": 0.5, "patience": 1, "cooldown": 1}})).training
    values = [3.0, 3.5, 3.4, 3.6, 2.0, 2.5]

    def model():
        m = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        m.compile(make_opt(t), "mse")
        return m

    from seqkit.training.train import make_optimizer as make_opt

    straight, m = plateau_callback(t, "val_loss"), model()
    straight.set_model(m)
    straight.on_train_begin()
    lrs = []
    for e, v in enumerate(values):
        lrs.append(float(m.optimizer.learning_rate.numpy()))
        straight.on_epoch_end(e, {"val_loss": v})
    # 3 best; 3.5 waits 1 -> 0.5, cooldown; 3.4 cools; 3.6 waits -> 0.25, cooldown; 2.0 best; 2.5 cools
    assert lrs == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    for k in range(len(values)):
        cb, m2 = plateau_callback(t, "val_loss", past=values[:k]), model()
        cb.set_model(m2)
        cb.on_train_begin()
        assert float(m2.optimizer.learning_rate.numpy()) == lrs[k]


TINY = dict(data={"limit": 60, "max_length": 60}, model={"units": 8, "embedding_dim": 4},
            training={"batch_size": 16})


def _tiny(**training):
    raw = make_recipe(**TINY)
    raw["training"].update(training)
    return raw


def _history(path):
    return json.load(open(os.path.join(path, "history.json"), encoding="utf-8"))


def _untimed(h):
    return [{k: v for k, v in e.items() if k != "seconds"} for e in h]


@pytest.mark.slow
def test_cosine_history_rates_and_resume_equal_the_straight_run(tmp_path, keras):
    """history.json's learning_rate is the formula at each epoch's last update; a run stopped
    after epoch 1 and resumed to 2 epochs has the uninterrupted run's rates, losses and steps."""
    import seqkit
    from seqkit.training.schedules import WarmupCosine

    sched = {"type": "cosine", "warmup_steps": 2, "decay_steps": 6, "min_learning_rate": 0.001}
    straight = seqkit.train(_tiny(epochs=2, schedule=sched), tmp_path / "straight")
    part = tmp_path / "part"
    seqkit.train(_tiny(epochs=1, schedule=sched), part)
    seqkit.train(seqkit.Recipe.from_yaml(str(part / "recipe.yaml"), {"training.epochs": 2}), part,
                 resume=True)
    h = _history(straight.path)
    assert _untimed(_history(part)) == _untimed(h)
    steps = int(keras.saving.load_model(os.path.join(straight.path, "last.keras")).optimizer.iterations.numpy())
    assert steps % 2 == 0 and steps >= 4  # updates only: the same number each epoch
    f = WarmupCosine(0.01, 6, 2, 0.001)
    assert [e["learning_rate"] for e in h] == pytest.approx(
        [float(f(steps // 2 - 1)), float(f(steps - 1))], rel=1e-6)
    from seqkit.errors import RunDirError

    with pytest.raises(RunDirError, match="training.schedule.warmup_steps"):  # the checkpoint fixes it
        seqkit.train(seqkit.Recipe.from_yaml(str(part / "recipe.yaml"), {
            "training.epochs": 3, "training.schedule.warmup_steps": 1}), part, resume=True)


@pytest.mark.slow
def test_plateau_lowers_the_rate_and_resume_replays_it(tmp_path):
    """min_delta 100: no epoch after the first improves, so with patience 1 the rate halves after
    epochs 2 and 3; a run resumed after epoch 2 replays history.json and continues at 0.005."""
    import seqkit

    sched = {"type": "plateau", "factor": 0.5, "patience": 1, "min_delta": 100.0}
    straight = seqkit.train(_tiny(epochs=3, schedule=sched), tmp_path / "straight")
    h = _history(straight.path)
    assert [e["learning_rate"] for e in h] == pytest.approx([0.01, 0.01, 0.005])
    part = tmp_path / "part"
    seqkit.train(_tiny(epochs=2, schedule=sched), part)
    seqkit.train(seqkit.Recipe.from_yaml(str(part / "recipe.yaml"), {"training.epochs": 3}), part,
                 resume=True)
    assert _untimed(_history(part)) == _untimed(h)
