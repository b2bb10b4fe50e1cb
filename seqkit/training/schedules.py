"""Learning-rate schedules (``training.schedule``).

``cosine`` and ``step`` are Keras ``LearningRateSchedule`` objects evaluated at the
optimizer's iteration count ``s`` (0 for the first update), so a run resumed from
``last.keras`` (which holds ``optimizer.iterations``) continues the schedule exactly.
``plateau`` is a callback (:class:`PlateauState` holds its arithmetic) whose state is
replayed from ``history.json`` on ``--resume``, as early stopping's is.

Formulas, with ``eta`` = ``training.learning_rate`` (the peak), ``W`` = ``warmup_steps``:

* linear warm-up (Goyal et al. 2017, sec. 2.2, "gradual warmup"), both schedules:
  ``lr(s) = eta * (s + 1) / W`` for ``s < W`` (the ``W``-th update uses ``eta``).
* ``cosine`` (Loshchilov & Hutter 2017, SGDR, eq. 5, one cycle without restarts):
  ``lr(s) = eta_min + (eta - eta_min) * (1 + cos(pi * t)) / 2``, ``t = min(s - W, D) / D``,
  ``D`` = ``decay_steps`` (default: the run's steps after warm-up), ``eta_min`` =
  ``min_learning_rate``; ``eta_min`` after ``W + D`` steps.
* ``step``: ``lr(s) = eta * factor ** floor((s - W) / step_size)`` for ``s >= W``.
* ``plateau`` (as ``keras.callbacks.ReduceLROnPlateau``): after an epoch whose monitored
  value (the checkpoint's: ``val_cross_entropy`` or ``val_loss``) is not below
  ``best - min_delta`` for ``patience`` epochs in a row, ``lr <- max(lr * factor, eta_min)``;
  then ``cooldown`` epochs during which no epoch counts as waiting.

Keras is imported at the top (this module defines Keras classes); ``keras.ops`` only in the
functions that call it.
"""

from __future__ import annotations

import math

import keras

from seqkit import log
from seqkit.errors import RecipeError


def _warmed(step, peak, warmup):
    """``(in warm-up: bool tensor, warm-up lr)`` for float ``step``."""
    from keras import ops

    return ops.less(step, warmup), peak * (step + 1.0) / max(float(warmup), 1.0)


@keras.saving.register_keras_serializable(package="seqkit")
class WarmupCosine(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up then one cosine half-period (see the module docstring).

    Args:
        peak: the learning rate after warm-up, ``eta`` (> 0).
        decay_steps: ``D``, steps of the cosine after warm-up (> 0).
        warmup_steps: ``W`` (>= 0).
        min_learning_rate: ``eta_min`` (>= 0, < ``peak``).

    Call args:
        step: the optimizer's iteration count (int or float scalar).

    Returns:
        float32 scalar learning rate.
    """

    def __init__(self, peak: float, decay_steps: int, warmup_steps: int = 0, min_learning_rate: float = 0.0):
        self.peak, self.decay_steps = float(peak), int(decay_steps)
        self.warmup_steps, self.min_learning_rate = int(warmup_steps), float(min_learning_rate)

    def __call__(self, step):
        from keras import ops

        s = ops.cast(step, "float32")
        warm, lr_warm = _warmed(s, self.peak, self.warmup_steps)
        t = ops.minimum(ops.maximum(s - self.warmup_steps, 0.0), float(self.decay_steps)) / self.decay_steps
        lr = self.min_learning_rate + (self.peak - self.min_learning_rate) * 0.5 * (1.0 + ops.cos(math.pi * t))
        return ops.where(warm, lr_warm, lr)

    def get_config(self):
        return {"peak": self.peak, "decay_steps": self.decay_steps, "warmup_steps": self.warmup_steps,
                "min_learning_rate": self.min_learning_rate}


@keras.saving.register_keras_serializable(package="seqkit")
class WarmupStepDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up then ``eta * factor ** floor((s - W) / step_size)`` (module docstring).

    Args:
        peak: ``eta`` (> 0); step_size: optimizer steps between drops (> 0);
        factor: multiplier per drop, in (0, 1); warmup_steps: ``W`` (>= 0).

    Returns (call): float32 scalar learning rate.
    """

    def __init__(self, peak: float, step_size: int, factor: float = 0.5, warmup_steps: int = 0):
        self.peak, self.step_size = float(peak), int(step_size)
        self.factor, self.warmup_steps = float(factor), int(warmup_steps)

    def __call__(self, step):
        from keras import ops

        s = ops.cast(step, "float32")
        warm, lr_warm = _warmed(s, self.peak, self.warmup_steps)
        drops = ops.floor(ops.maximum(s - self.warmup_steps, 0.0) / self.step_size)
        return ops.where(warm, lr_warm, self.peak * ops.power(self.factor, drops))

    def get_config(self):
        return {"peak": self.peak, "step_size": self.step_size, "factor": self.factor,
                "warmup_steps": self.warmup_steps}


def make_schedule(t, steps_per_epoch: int | None):
    """The optimizer's ``learning_rate`` for ``training`` settings ``t``: a float (``constant``,
    ``plateau``: the callback changes it) or a schedule object.

    Args:
        t: the recipe's :class:`~seqkit.recipe.TrainingConfig`.
        steps_per_epoch: optimizer steps in one epoch (for ``cosine`` without ``decay_steps``).

    Raises:
        RecipeError: ``cosine`` without ``decay_steps`` when the run's length is unknown, or
            a warm-up as long as the whole run.
    """
    sc = t.schedule
    if sc is None or sc.type in ("constant", "plateau"):
        return t.learning_rate
    if sc.type == "step":
        return WarmupStepDecay(t.learning_rate, sc.step_size, sc.factor, sc.warmup_steps)
    decay = sc.decay_steps
    if decay is None:
        if not steps_per_epoch:
            raise RecipeError("training.schedule.decay_steps: the number of optimizer steps per epoch "
                              "is unknown here; set decay_steps (steps of the cosine after warm-up).")
        decay = t.epochs * steps_per_epoch - sc.warmup_steps
        if decay <= 0:
            raise RecipeError(f"training.schedule.warmup_steps: {sc.warmup_steps} warm-up steps are the "
                              f"whole run ({t.epochs} epochs x {steps_per_epoch} steps); lower it or "
                              f"set decay_steps.")
    return WarmupCosine(t.learning_rate, decay, sc.warmup_steps, sc.min_learning_rate)


def current_learning_rate(optimizer, step: int | None = None) -> float:
    """The learning rate ``optimizer`` uses at iteration ``step`` (default: its current one); a
    loss-scale optimizer (``mixed_float16``) answers for the optimizer it wraps."""
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    lr = optimizer._learning_rate
    if isinstance(lr, keras.optimizers.schedules.LearningRateSchedule):
        s = int(optimizer.iterations.numpy()) if step is None else step
        return float(lr(s))
    return float(keras.ops.convert_to_numpy(lr))


class PlateauState:
    """The arithmetic of reduce-on-plateau, in plain Python (see the module docstring).

    Args:
        lr: the starting learning rate; factor, patience, min_delta, cooldown,
            min_learning_rate: as ``training.schedule``.

    Attributes:
        lr, best (``None`` before the first value), wait, cooldown_left.
    """

    def __init__(self, lr: float, factor: float, patience: int, min_delta: float = 0.0,
                 cooldown: int = 0, min_learning_rate: float = 0.0):
        self.lr, self.factor, self.patience = float(lr), float(factor), int(patience)
        self.min_delta, self.cooldown, self.min_lr = float(min_delta), int(cooldown), float(min_learning_rate)
        self.best, self.wait, self.cooldown_left = None, 0, 0

    def update(self, value) -> float:
        """Account one epoch's monitored value (``None``: skipped); return the next epoch's lr."""
        if value is None:
            return self.lr
        cooling = self.cooldown_left > 0
        if cooling:
            self.cooldown_left -= 1
            self.wait = 0
        if self.best is None or value < self.best - self.min_delta:
            self.best, self.wait = value, 0
        elif not cooling:
            self.wait += 1
            if self.wait >= self.patience:
                if self.lr > self.min_lr:
                    self.lr = max(self.lr * self.factor, self.min_lr)
                    self.cooldown_left = self.cooldown
                self.wait = 0
        return self.lr


def plateau_callback(t, monitor: str, past=()):
    """A Keras callback that applies :class:`PlateauState` at each epoch's end.

    Args:
        t: the recipe's ``training`` section (``t.schedule.type == "plateau"``).
        monitor: the logs key to watch.
        past: the monitored values of the epochs already done (a resumed run): replayed in
            ``on_train_begin``, which also sets the optimizer's rate to the replayed one.
    """

    class ReduceOnPlateau(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.past = list(past)

        def replay(self) -> PlateauState:
            sc = t.schedule
            self.state = PlateauState(t.learning_rate, sc.factor, sc.patience, sc.min_delta, sc.cooldown,
                                      sc.min_learning_rate)
            for v in self.past:
                self.state.update(v)
            return self.state

        def on_train_begin(self, logs=None):
            self.replay()
            self.model.optimizer.learning_rate = self.state.lr

        def on_epoch_end(self, epoch, logs=None):
            before = self.state.lr
            after = self.state.update((logs or {}).get(monitor))
            if after != before:
                self.model.optimizer.learning_rate = after

                log.info(f"epoch {epoch + 1}: {monitor} has not improved for {self.state.patience} "
                         f"epochs; learning rate {before:g} -> {after:g}")

    return ReduceOnPlateau()
