"""What training says while it runs: the step count of an epoch and an ETA from the first epoch
on, and, when early stopping ends a run, why and which epoch the run keeps.

* Keras's own progress bar (``fit(verbose=1)``) shows ``N/Unknown`` steps during the first epoch
  of a dataset whose length ``tf.data`` cannot tell (a bucketed one): :func:`steps_progbar_class`
  gives it the counted number of steps (:func:`epoch_steps`) from the start.
* :func:`training_progress_class`'s callback logs (``seqkit`` logger, INFO) the plan before the
  first epoch -- ``training: 20 epochs of 412 steps (batch 32); early stopping may end it sooner
  (patience 3 on val_cross_entropy)`` -- and after each epoch the time it took and the time left,
  :func:`eta_seconds`. Where Keras draws no bar (the stream loop of a language model), it draws
  :mod:`seqkit.progress`'s line over the epoch's steps (a terminal only).
* :func:`early_stop_summary` says when early stopping ended training: after which epoch, which
  epoch the run keeps (its ``model.keras``), the metric watched and the patience; ``train`` logs it
  and writes it into ``metrics.json`` under ``early_stopping``.

Keras is imported inside the functions that use it, so importing this module does not load
TensorFlow.
"""

from __future__ import annotations

import time

from seqkit import log
from seqkit.progress import Progress, _clock


def epoch_steps(prep, train_ds, count) -> int | None:
    """Optimizer steps in one training epoch, or ``None`` where they cannot be counted cheaply.

    ``training.steps_per_epoch`` when set; a stream's chunk count (``len``, no pass over the
    text); a ``tf.data`` dataset's cardinality when known; otherwise (a bucketed dataset) the
    batches of a pass over a fresh copy of the training split (the pipeline only, no model; the
    dataset being trained is not iterated, so its per-epoch shuffling is untouched).

    Args:
        prep: the :class:`~seqkit.training.train.Prepared` of the run.
        train_ds: the training dataset ``fit`` gets (a ``tf.data.Dataset`` or a stream).
        count: counts a fresh copy's batches, ``count(prep) -> int | None``
            (:func:`seqkit.training.train.steps_per_epoch_of`; passed in, so this module does not
            import the training loop that imports it).

    Returns:
        The step count (int >= 1) or ``None``.
    """
    steps = prep.recipe.training.steps_per_epoch
    if hasattr(train_ds, "epoch_chunks"):  # a stream: its length is the chunk count
        n = len(train_ds)
        return min(n, steps) if steps else (n or None)
    if steps:
        return steps
    n = count(prep)
    return n if n else None


def eta_seconds(epoch_seconds: list[float], remaining: int) -> float:
    """Seconds the ``remaining`` epochs will take, from the durations of the finished ones.

    The first epoch of a process also traces and compiles the model, so once a later epoch has
    finished the first one is left out: ``mean(epoch_seconds[1:]) * remaining``; with only one,
    ``epoch_seconds[0] * remaining``.

    Args:
        epoch_seconds: wall-clock seconds of each epoch finished by this process, in order (>= 1 item).
        remaining: epochs still to train (>= 0).

    Returns:
        Seconds (float >= 0); 0.0 when ``remaining`` is 0.

    Raises:
        ValueError: ``epoch_seconds`` is empty.
    """
    if not epoch_seconds:
        raise ValueError("eta_seconds needs the duration of at least one finished epoch")
    steady = epoch_seconds[1:] or epoch_seconds
    return sum(steady) / len(steady) * max(int(remaining), 0)


def best_epoch(history: list[dict], monitor: str) -> tuple[int, float] | None:
    """``(epoch, value)`` of the first epoch with the lowest ``monitor`` in ``history.json``'s
    entries (the epoch whose weights are the run's ``model.keras``); ``None`` when no entry has it."""
    seen = [(h[monitor], h["epoch"]) for h in history if h.get(monitor) is not None]
    if not seen:
        return None
    value, epoch = min(seen, key=lambda item: (item[0], item[1]))
    return int(epoch), float(value)


def early_stop_summary(stopped_after: int, epochs: int, history: list[dict], monitor: str,
                       patience: int, min_delta: float) -> tuple[dict, str]:
    """What early stopping did, as ``metrics.json`` records it and as a log line.

    Args:
        stopped_after: the last epoch trained (1-based).
        epochs: ``training.epochs``.
        history: ``history.json``'s entries (``{"epoch": n, monitor: value, ...}``).
        monitor: the metric watched, e.g. ``"val_cross_entropy"``.
        patience, min_delta: ``training.early_stopping``'s.

    Returns:
        ``({"stopped_after_epoch", "epochs", "best_epoch", "best", "monitor", "patience",
        "min_delta"}, message)``.
    """
    best = best_epoch(history, monitor)
    record = {"stopped_after_epoch": int(stopped_after), "epochs": int(epochs),
              "best_epoch": best[0] if best else None, "best": best[1] if best else None,
              "monitor": monitor, "patience": int(patience), "min_delta": float(min_delta)}
    by = f" by more than {min_delta:g}" if min_delta else ""
    kept = (f"The run keeps epoch {best[0]} ({monitor} {best[1]:.4f}) as its model.keras."
            if best else "")
    message = (f"early stopping: {monitor} has not improved{by} for {patience} epoch"
               f"{'s' if patience != 1 else ''} (training.early_stopping.patience {patience}), so "
               f"training ended after epoch {stopped_after} of {epochs}. {kept}").rstrip()
    return record, message


def steps_progbar_class():
    """A ``keras.callbacks.ProgbarLogger`` subclass whose ``__init__(steps)`` takes the epoch's
    step count, used where Keras's ``fit`` does not know it (``params["steps"]`` is None)."""
    import keras

    class StepsProgbar(keras.callbacks.ProgbarLogger):
        """Keras's progress bar with a known target from the first epoch on."""

        def __init__(self, steps: int | None):
            super().__init__()
            self.counted = steps

        def set_params(self, params):
            super().set_params(params)
            if self.target is None and self.counted:
                self.target = int(self.counted)

        def _finalize_progbar(self, logs):
            # a bucketed epoch may end a step or two off the count: end the bar where it ended
            if self.progbar is not None and self.seen and self.seen != self.target:
                self.target = self.progbar.target = self.seen
            super()._finalize_progbar(logs)

    return StepsProgbar


def training_progress_class():
    """The callback class that logs training's plan, each epoch's time and the ETA (see the module
    docstring). ``__init__(epochs, steps, what, draw_steps=False, first_epoch=0)``:

    * ``epochs``: ``training.epochs`` (the last epoch, 1-based);
    * ``steps``: steps per epoch (None: unknown);
    * ``what``: the rest of the plan line, e.g. ``"batch 32; early stopping may end it sooner"``;
    * ``draw_steps``: draw :mod:`seqkit.progress`'s line over each epoch's steps (where no Keras bar
      is drawn);
    * ``first_epoch``: the epochs already trained (a resumed run), 0-based index of the first one.
    """
    import keras

    class TrainingProgress(keras.callbacks.Callback):
        """Logs ``training: ...`` before the first epoch and ``epoch E/N took T; ETA ...`` after each."""

        def __init__(self, epochs: int, steps: int | None, what: str = "", draw_steps: bool = False,
                     first_epoch: int = 0):
            super().__init__()
            self.epochs, self.steps, self.what, self.draw_steps = int(epochs), steps, what, draw_steps
            self.first_epoch = int(first_epoch)
            self.durations: list[float] = []
            self._t0 = 0.0
            self._bar = None

        def on_train_begin(self, logs=None):  # before Keras's "Epoch 1/N"
            left = self.epochs - self.first_epoch
            counted = f" of {self.steps:,} step{'s' if self.steps != 1 else ''}" if self.steps else ""
            plan = f"{left} epoch{'s' if left != 1 else ''}{counted}"
            if self.first_epoch:  # a resumed run
                plan += (f" (epoch {self.epochs})" if left == 1 else
                         f" (epochs {self.first_epoch + 1}-{self.epochs})")
            log.info(f"training: {plan}" + (f"; {self.what}" if self.what else ""))

        def on_epoch_begin(self, epoch, logs=None):
            self._t0 = time.monotonic()
            if self.draw_steps:
                self._bar = Progress(self.steps or 0, f"epoch {epoch + 1}/{self.epochs}", "steps")

        def on_train_batch_end(self, batch, logs=None):
            if self._bar is not None:
                self._bar.update()

        def on_epoch_end(self, epoch, logs=None):
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            self.durations.append(time.monotonic() - self._t0)
            left = self.epochs - (epoch + 1)
            line = f"epoch {epoch + 1}/{self.epochs} took {_clock(self.durations[-1])}"
            if left:
                line += (f"; ETA {_clock(eta_seconds(self.durations, left))} for the {left} epoch"
                         f"{'s' if left != 1 else ''} left")
            log.info(line)

    return TrainingProgress
