"""Training: data -> vocabulary -> model -> ``fit`` with clipping, checkpoints, early stopping.

The public entry points are :func:`prepare` (data, splits, vocabulary, head),
:func:`train` (a whole run into a run directory, or ``resume``) and
:func:`load_run` (what ``evaluate`` and ``generate`` start from).

TensorFlow, Keras and the seqkit modules that import them, NumPy and PyYAML are imported inside the
functions that use them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import math
import os
import random
import tempfile
import time
import warnings
import zipfile
from dataclasses import dataclass, field

from seqkit import log
from seqkit.data.split import assemble_splits
from seqkit.data.vocab import Vocabulary
from seqkit.errors import DataError, RunDirError, SeqkitError
from seqkit.export.sample import write_export_sample
from seqkit.guards import build_model, check_model_matches, resource_error
from seqkit.heads.contract import checked_baselines
from seqkit.plugins import keras_classes_needed
from seqkit.recipe import Recipe, load_recipe
from seqkit.registry import DATA, HEADS
from seqkit.runs.lifecycle import RunLock, Staging, check_target, remove_stale, split_run_path
from seqkit.runs.provenance import machine, write_provenance
from seqkit.runs.rundir import (BEST, HISTORY, LAST, LOGS, METRICS, RECIPE, STATE, RunDir, atomic_save_model,
                                atomic_write_json, atomic_write_text, read_checkpoint_state, read_json)
from seqkit.training import grad_stats, precision, selection
from seqkit.training.distribute import make_distribution

# A bucketed dataset has no known length until its first pass; Keras then warns that the
# "input ran out of data" at the end of it, which is expected here.
warnings.filterwarnings("ignore", message="Your input ran out of data")


@dataclass
class Prepared:
    """Everything needed to build datasets and a model for a recipe.

    Attributes:
        recipe: the recipe.
        head: the task head, with its assets (vocabularies, normaliser) fitted or loaded.
        splits: ``{"train": [Record], "valid": [...], "test": [...]}`` (empty when not read).
        source: the data source's one-line description.
        run_dir: the run directory it was loaded from (None while training).
    """

    recipe: Recipe
    head: object
    splits: dict = field(default_factory=dict)
    source: str = ""
    run_dir: str | None = None

    @property
    def vocab(self):
        """The head's input vocabulary (``None`` for frame inputs)."""
        return getattr(self.head, "vocab", None)

    @property
    def chunked(self) -> int:
        return getattr(self.head, "chunked", 0)


class NonFiniteError(SeqkitError):
    """Training stopped: the loss (or a validation loss, or the weights) stopped being finite."""


def seed_everything(seed: int, deterministic: bool) -> None:
    """Seed Python, NumPy and TensorFlow; optionally make TF ops deterministic."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(seed)
    if deterministic:
        tf.config.experimental.enable_op_determinism()


def seed_generators(model) -> list:
    """Every ``keras.random.SeedGenerator`` of ``model``'s layers (nested models, wrappers and
    RNN cells included), in layer-traversal order, each once.

    These hold the state dropout masks are drawn from (``Dropout``, a cell's ``dropout`` and
    ``recurrent_dropout``, :class:`~seqkit.layers.fused_lstm.FusedLSTM`'s input mask). Keras
    3.15 does not save it in ``.keras`` files: a loaded layer starts from a fresh random seed
    and counter 0.
    """
    out, seen = [], set()
    for layer in model._flatten_layers(include_self=True, recursive=True):
        for sg in getattr(layer, "_seed_generators", ()):
            if id(sg) not in seen:
                seen.add(id(sg))
                out.append(sg)
    return out


def epoch_seed(seed: int, epoch: int, *stream: int) -> int:
    """A 31-bit seed that depends only on ``(seed, epoch, *stream)`` (NumPy ``SeedSequence``)."""
    import numpy as np

    return int(np.random.SeedSequence([seed % 2 ** 32, epoch, *stream]).generate_state(1)[0]) & 0x7FFFFFFF


def reseed_epoch(model, seed: int, epoch: int) -> None:
    """Make epoch ``epoch``'s randomness a function of ``(seed, epoch)`` alone.

    Sets the state of every seed generator of ``model`` (:func:`seed_generators`; the
    ``i``-th gets ``[epoch_seed(seed, epoch, 1, i), 0]``), of Keras's global seed generator
    if one exists, and the Python and NumPy global generators. Called at the start of
    every epoch, it makes ``--resume`` exact with dropout on: the seed generators' state is
    not in the checkpoint, and need not be. TensorFlow's global generator is not reseeded:
    Keras's TensorFlow backend draws only stateless random ops from seed generators.
    """
    import numpy as np
    from keras.src.backend.common import global_state
    from keras.src.random.seed_generator import GLOBAL_SEED_GENERATOR

    for i, sg in enumerate(seed_generators(model)):
        sg.state.assign(np.array([epoch_seed(seed, epoch, 1, i), 0], dtype=sg.state.dtype))
    glob = global_state.get_global_attribute(GLOBAL_SEED_GENERATOR)
    if glob is not None:
        glob.state.assign(np.array([epoch_seed(seed, epoch, 2), 0], dtype=glob.state.dtype))
    random.seed(epoch_seed(seed, epoch, 3))
    np.random.seed(epoch_seed(seed, epoch, 4))


def prepare(recipe: Recipe, vocab: Vocabulary | None = None, *, run_dir: str | None = None,
            read_data: bool = True, derive: bool = True) -> Prepared:
    """Read the data source, split it, fit (or load) the head's assets.

    Args:
        recipe: the validated recipe.
        vocab: an input vocabulary to reuse (language model; kept for callers of old).
        run_dir: load the head's assets (vocabularies, normaliser) from this run
            directory instead of fitting them on the training split.
        read_data: read the data source (False: only make the head, e.g. for predict).
        derive: let the head derive its training records from the split
            (:meth:`~seqkit.heads.base.Head.derive_training`, e.g. head.distill's teacher
            outputs); False keeps the split as read (``seqkit validate``: no teacher decoding).

    Raises:
        DataError: the source is empty or unreadable, a split is empty, or the records
            do not suit the head.
        RunDirError: ``run_dir`` lacks an asset file.
    """
    d = recipe.data
    head = HEADS.get(recipe.head.type)(recipe, vocab)
    splits, described = {}, ""
    if read_data:
        source = DATA.get(d.source)(recipe.data_options, recipe)
        described = source.describe()
        loaded = source.load()
        if not any(loaded.values()):
            raise DataError(f"data: the source {described} gave no examples.")
        if d.limit and "all" in loaded:
            loaded["all"] = loaded["all"][: d.limit]
        loaded = {k: head.check_records(v, k) for k, v in loaded.items()}
        if getattr(loaded.get("train"), "lazy", False):  # text_corpus: explicit files, never carved
            splits = {k: loaded.get(k, []) for k in ("train", "valid", "test")}
        else:
            splits = assemble_splits(loaded, d.split.valid, d.split.test, shuffle=d.split.shuffle,
                                     seed=recipe.split_seed, limit=d.limit, classes=head.label_classes)
    if run_dir is not None:  # before derive_training, which may check what it reads back against them
        head.load_assets(run_dir)
    if read_data and derive and splits.get("train"):
        splits["train"] = head.derive_training(splits, run_dir)
    if run_dir is None and vocab is None:
        if not read_data:
            raise SeqkitError("prepare: the head's assets need the training data or a run directory.")
        head.fit(splits["train"])
    if read_data and hasattr(head, "check_splits"):
        head.check_splits(splits)
    return Prepared(recipe, head, splits, described)


def make_split_dataset(prep: Prepared, split: str, training: bool, first_epoch: int = 0):
    """The batched ``tf.data.Dataset`` of one split (shuffled per epoch when ``training``)."""
    return prep.head.dataset(prep.splits[split], training=training, first_epoch=first_epoch)


def make_optimizer(t, steps_per_epoch: int | None = None):
    """The recipe's optimizer with global-norm clipping, weight decay and learning-rate schedule.

    Clipping: ``g <- g * tau / ||g||_2`` over all gradients together when
    ``||g||_2 > tau`` (Pascanu, Mikolov & Bengio 2013, alg. 1). ``training.weight_decay``
    ``lambda``: decoupled weight decay (Loshchilov & Hutter 2019, alg. 2, line 12), Keras's
    form ``theta <- theta - eta_t * lambda * theta`` applied to every trainable weight before
    the optimizer's own step (``null``: Keras's default, 0.004 for ``adamw``, none otherwise).
    ``training.schedule``: :mod:`seqkit.training.schedules` (``steps_per_epoch`` sizes a ``cosine``
    without ``decay_steps``).
    """
    from seqkit.training.optimizers import OPTIMIZERS
    from seqkit.training.schedules import make_schedule

    cls = OPTIMIZERS[t.optimizer]
    extra = {} if t.weight_decay is None else {"weight_decay": t.weight_decay}
    return cls(learning_rate=make_schedule(t, steps_per_epoch), global_clipnorm=t.clipnorm, **extra)


def steps_per_epoch_of(prep: Prepared, train_ds=None) -> int | None:
    """Optimizer steps in one training epoch: ``training.steps_per_epoch``, else the batches
    (stream: chunks) of the first epoch of the training split, counted; ``None`` without data.

    ``train_ds``: a stream's :class:`~seqkit.data.stream.StreamData` to count (a ``tf.data``
    training set is not passed: iterating it would advance its per-pass shuffling)."""
    t = prep.recipe.training
    if t.steps_per_epoch:
        return t.steps_per_epoch
    if not prep.splits.get("train"):
        return None
    ds = train_ds if train_ds is not None else make_split_dataset(prep, "train", training=True)
    if hasattr(ds, "epoch_chunks"):  # data.layout stream
        return len(ds.epoch_chunks(0))
    n = int(ds.cardinality())
    return n if n > 0 else sum(1 for _ in ds)


def _needs_run_length(t) -> bool:
    return t.schedule.type == "cosine" and t.schedule.decay_steps is None


def compile_model(prep: Prepared, model=None, *, steps_per_epoch: int | None = None,
                  precision: str | None = None):
    """Build (or take) the head's model and compile it with the recipe's training settings.

    ``steps_per_epoch`` sizes a ``cosine`` schedule without ``decay_steps`` (default: counted
    from the training split when it is loaded; without data the optimizer, which then only
    serves evaluation, gets the constant ``training.learning_rate``).

    ``precision``: the Keras policy a new model is built under (``float32``, ``mixed_bfloat16``,
    ``mixed_float16``; default: ``training.precision`` resolved by
    :func:`seqkit.training.precision.resolve`); a given ``model`` keeps its own. Under
    ``mixed_float16`` the optimizer is wrapped in a loss-scale optimizer.
    """
    from seqkit.training import precision as mp
    from seqkit.training.losses import share_cross_entropy

    if model is None:
        if precision is None:
            precision = mp.resolve(prep.recipe.training.precision, gpu=mp.gpu_bf16())[0]
        with mp.policy_scope(precision):
            model = build_model(prep)  # too large / a failing plugin: named
        mp.restrict(model, precision)
    else:
        precision = mp.model_precision(model)
    t = prep.recipe.training
    loss, metrics = prep.head.loss(), prep.head.metrics()
    share_cross_entropy(loss, metrics)  # the exact cross-entropy metric reuses the loss's softmax
    if _needs_run_length(t) and steps_per_epoch is None:
        steps_per_epoch = steps_per_epoch_of(prep)
        if steps_per_epoch is None:
            t = t.model_copy(update={"schedule": t.schedule.model_copy(update={"type": "constant"})})
    model.compile(optimizer=mp.wrap_optimizer(make_optimizer(t, steps_per_epoch), precision), loss=loss,
                  metrics=metrics, jit_compile=t.jit_compile)
    return model


def count_parameters(model) -> dict:
    """``{"total": n, "trainable": n, layer name: n, ...}`` (weights of each layer)."""
    import numpy as np

    out = {"total": int(sum(np.prod(w.shape) for w in model.weights)),
           "trainable": int(sum(np.prod(w.shape) for w in model.trainable_weights))}
    for layer in model.layers:
        n = int(sum(np.prod(w.shape) for w in layer.weights))
        if n:
            out[layer.name] = n
    return out


def _finite_weights(model) -> bool:
    import numpy as np

    return all(np.isfinite(w.numpy()).all() for w in model.trainable_weights)


def _callback_class():
    import keras

    class RunCheckpoint(keras.callbacks.Callback):
        """Each epoch: save last.keras (+ optimizer), keep the best as model.keras, log history.

        A non-finite training loss (checked after every batch), validation loss, monitored
        value or weight (checked at the epoch's end, before anything is saved) stops training
        with :class:`NonFiniteError`; the files of the last finished epoch stay as they were.
        """

        def __init__(self, run: RunDir, monitor: str, best, history: list, t0: float, advice: str = "",
                     recipe: dict | None = None):
            super().__init__()
            self.run, self.monitor, self.best, self.history, self.t0 = run, monitor, best, history, t0
            self.advice = advice
            self.recipe = recipe  # the resolved recipe, kept in last.keras: what a resume checks against
            self.epochs_done = 0
            self.on_first_checkpoint = None  # called once the first epoch is saved (staging -> run)
            self.epoch, self.steps = 0, 0

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch, self.steps = epoch, 0

        def on_train_batch_end(self, batch, logs=None):
            self.steps = batch + 1
            loss = (logs or {}).get("loss")
            if loss is not None and not math.isfinite(float(loss)):
                self._stop(f"the training loss became {float(loss)} at epoch {self.epoch + 1}, "
                           f"step {batch + 1} (batch {batch + 1} of the epoch)")

        def _stop(self, what: str):
            kept = (f"Nothing was saved for epoch {self.epoch + 1}; the run keeps epoch {self.epoch}'s "
                    f"checkpoint ({LAST}, {BEST}), which `seqkit train --resume` continues from"
                    if self.epoch else "No epoch had finished, so nothing is kept")
            raise NonFiniteError(f"training stopped: {what}. {kept}. {self.advice}")

        def on_epoch_end(self, epoch, logs=None):
            logs = {k: float(v) for k, v in (logs or {}).items()}
            checked = [k for k in logs if k == self.monitor or k.endswith("loss") or k.endswith("cross_entropy")]
            for k in checked:
                if not math.isfinite(logs[k]):
                    self._stop(f"{k} is {logs[k]} at the end of epoch {epoch + 1} (after step {self.steps})")
            if not _finite_weights(self.model):
                self._stop(f"the weights hold NaN or infinite values at the end of epoch {epoch + 1} "
                           f"(after step {self.steps})")
            value = logs.get(self.monitor)
            improved = value is not None and (self.best is None or value < self.best)
            if improved:
                self.best = value
                atomic_save_model(self.model, self.run.file(BEST))
            from seqkit.training.schedules import current_learning_rate

            # the rate of the epoch's last update (a plateau callback after this one lowers it later)
            logs["learning_rate"] = current_learning_rate(
                self.model.optimizer, max(int(self.model.optimizer.iterations.numpy()) - 1, 0))
            self.history.append({"epoch": epoch + 1, **logs, "seconds": round(time.time() - self.t0, 1)})
            # last.keras carries its epoch, best and history: the checkpoint is the commit point a
            # resume starts from even if the process dies before history.json / state.json follow
            atomic_save_model(self.model, self.run.file(LAST), state={
                "epoch": epoch + 1, "best": self.best, "monitor": self.monitor, "history": self.history,
                **({"recipe": self.recipe} if self.recipe is not None else {})})
            atomic_write_json(self.run.file(HISTORY), self.history)
            atomic_write_json(self.run.file(STATE), {"epoch": epoch + 1, "best": self.best,
                                                     "monitor": self.monitor, "status": "running"})
            self.epochs_done += 1
            if self.epochs_done == 1 and self.on_first_checkpoint is not None:
                self.on_first_checkpoint()

    return RunCheckpoint


def _epoch_seeds_class():
    import keras

    class EpochSeeds(keras.callbacks.Callback):
        """At the start of each epoch, :func:`reseed_epoch` from ``(seed, epoch)``."""

        def __init__(self, seed: int):
            super().__init__()
            self.seed = seed

        def on_epoch_begin(self, epoch, logs=None):
            reseed_epoch(self.model, self.seed, epoch)

    return EpochSeeds


def _early_stopping_class():
    import keras

    class ResumableEarlyStopping(keras.callbacks.EarlyStopping):
        """``EarlyStopping`` that starts from the monitored values of the epochs already done
        (``past``, oldest first; ``None`` where the value is missing), as if it had seen them."""

        def __init__(self, *args, past=(), **kwargs):
            super().__init__(*args, **kwargs)
            self.past = list(past)
            self.stopped_after = None  # the last epoch trained (1-based) when this callback ended training

        def on_epoch_end(self, epoch, logs=None):
            super().on_epoch_end(epoch, logs)
            if self.model.stop_training and self.stopped_epoch == epoch:
                self.stopped_after = epoch + 1

        def on_train_begin(self, logs=None):
            super().on_train_begin(logs)
            self.replay()

        def replay(self) -> bool:
            """Replay ``past`` (on_epoch_end's bookkeeping; no baseline, no restore). Returns
            whether the uninterrupted run stopped after the last of those epochs."""
            self.wait, self.best = 0, None
            if self.monitor_op is None:
                self._set_monitor_op()
            for value in self.past:
                if value is None:
                    continue
                self.wait += 1
                if self._is_improvement(value, self.best):
                    self.best, self.wait = value, 0
            return len(self.past) > 1 and self.wait >= self.patience

    return ResumableEarlyStopping


def train(recipe: Recipe, run_path: str, *, resume: bool = False, overwrite: bool = False,
          verbose: int = 1) -> dict:
    """Train a recipe into ``run_path`` (or continue the run there when ``resume``).

    The process that writes the run (the chief) holds the run directory's lock
    (:class:`seqkit.runs.lifecycle.RunLock`, ``PARENT/.NAME.lock``) throughout. A new run
    trains in ``PARENT/.NAME.staging-PID`` and takes the name ``run_path`` when its first
    epoch is saved, replacing the previous run only then; if it fails before, the staging
    folder is removed and ``run_path`` is as it was. ``resume`` writes in place.

    Args:
        recipe: the validated recipe (for ``resume``, the run's own recipe).
        run_path: the run directory.
        resume: continue from ``last.keras`` and ``state.json``.
        overwrite: replace an existing run directory (only a seqkit run: see
            :func:`seqkit.runs.lifecycle.check_target`).
        verbose: Keras ``fit`` verbosity (1 = progress bar).

    Returns:
        The final metrics (also written to ``metrics.json``).

    Raises:
        RunDirError: another training holds the run directory; the run exists (without
            ``overwrite``/``resume``); ``run_path`` is not something seqkit may replace (a folder
            that is not a seqkit run, the current folder, a home directory, a folder holding the
            recipe or data); or the run is not resumable.
        SeqkitError: bad data or recipe; interrupted.
    """
    t = recipe.training
    dist = make_distribution(t.distribute)  # before anything else touches TF's devices
    seed_everything(recipe.seed, t.deterministic)
    if not dist.is_chief:  # only the chief writes (and locks) the run directory
        return _train(recipe, run_path, dist, resume, overwrite, verbose)
    with RunLock(run_path):
        return _train(recipe, run_path, dist, resume, overwrite, verbose)


def _train(recipe: Recipe, run_path: str, dist, resume: bool, overwrite: bool, verbose: int) -> dict:
    """The body of :func:`train` (under the run directory's lock in the chief)."""
    import keras

    t = recipe.training
    run, stage, replaces = RunDir(run_path), None, None
    # only the chief writes the run directory; other workers write to a scratch copy
    out = run if dist.is_chief else RunDir(tempfile.mkdtemp(prefix="seqkit-worker-"))
    state, history = {"epoch": 0, "best": None}, []
    if dist.is_chief:
        remove_stale(*split_run_path(run_path))  # staging folders of trainings that died
    if resume:
        run.check(need_model=False)
        if not os.path.isfile(run.file(LAST)):
            raise RunDirError(f"{run_path}: nothing to resume (no {LAST}: no epoch finished).")
        from seqkit.runs.rundir import foreign_in_tree

        link = foreign_in_tree(run_path, lambda _name: True)  # any name, but never a link: training writes here
        if link is not None:
            raise RunDirError(f"{run_path}: {link} is a symbolic link; seqkit writes a run only into "
                              f"folders it made, so it does not resume one that points elsewhere. "
                              f"Replace the link with the folder it points to (or remove it), then resume.")
        _check_resume_changes(recipe, run)
        state, history = run.resume_point()  # what last.keras itself records (see RunDir.resume_point)
        if state.get("epoch", 0) >= t.epochs and state.get("status") == "finished":
            raise RunDirError(f"{run_path}: already trained for {state['epoch']} of {t.epochs} epochs. "
                              f"To train longer: seqkit train --resume {run_path} "
                              f"--set training.epochs=N.")
        prep = prepare(recipe, run_dir=run_path)
    else:
        if dist.is_chief:
            replaces = check_target(run_path, recipe, overwrite)
            stage = Staging(run_path)
            run.path = stage.path  # until the first epoch is saved (``out`` is ``run``)
        prep = prepare(recipe)  # all data errors surface before anything is written

    policy, why = precision.resolve(t.precision, gpu=precision.gpu_bf16())
    with dist.strategy.scope():
        train_ds = make_split_dataset(prep, "train", training=True, first_epoch=state.get("epoch", 0))
        has_valid = bool(prep.splits["valid"])
        valid_ds = make_split_dataset(prep, "valid", training=False) if has_valid else None
        # counted on a dataset of its own: a pass over train_ds would move its shuffling on an epoch
        steps = (steps_per_epoch_of(prep, train_ds if hasattr(train_ds, "epoch_chunks") else None)
                 if _needs_run_length(t) and not resume else None)
        model = (load_model(run.file(LAST), keep_precision=True) if resume else
                 compile_model(prep, steps_per_epoch=steps, precision=policy))
    if resume:
        check_model_matches(prep, model, run.file(LAST))  # not a last.keras from another run
        saved = precision.model_precision(model)  # a resumed run trains on in its own precision
        if saved != policy:
            policy, why = saved, f"as the run was trained (its {LAST}), not {policy} ({why})"
    if t.precision != "float32" or policy != "float32":
        log.info(f"precision: {policy} ({why}; training.precision: {t.precision})")
    exact = "cross_entropy" if any(m.name == "cross_entropy" for m in prep.head.metrics()) else "loss"
    monitor = selection.resolve(t.monitor, f"val_{exact}" if has_valid else exact, has_valid)
    params = count_parameters(model)
    log.info(f"data: {prep.source}; {', '.join(f'{k} {len(v)}' for k, v in prep.splits.items())} "
             f"examples; {prep.head.describe_assets()}")
    log.info(f"model: {recipe.head.type} / {recipe.model.cell} x{recipe.model.layers}, "
             f"{params['total']:,} parameters ({', '.join(f'{k} {v:,}' for k, v in params.items() if k not in ('total', 'trainable'))})")
    if t.schedule.type != "constant":
        import keras as _k

        sched = getattr(model.optimizer, "inner_optimizer", model.optimizer)._learning_rate
        shown = (", ".join(f"{k} {v:g}" for k, v in sched.get_config().items())
                 if isinstance(sched, _k.optimizers.schedules.LearningRateSchedule) else
                 f"factor {t.schedule.factor:g} after {t.schedule.patience} epochs without improvement")
        log.info(f"learning rate: {t.schedule.type} ({shown})")
    if dist.replicas > 1 or t.distribute.strategy != "none":
        log.info(f"distribute: {t.distribute.strategy}, {dist.replicas} replicas, this process is the "
                 f"{dist.worker}; global batch {t.batch_size}, {t.batch_size / dist.replicas:g} per replica")
        if t.batch_size % dist.replicas:
            log.warn(f"training.batch_size {t.batch_size} is not a multiple of {dist.replicas} "
                     f"replicas; replicas get unequal shares of each batch.")

    # a resumed run counts on from the training time its saved epochs took, so history's
    # "seconds" and metrics' train_seconds are the run's, not this process's
    t0 = time.time() - (float(history[-1].get("seconds") or 0.0) if history else 0.0)
    machine_record = machine()  # versions and CPU, with the load as training starts
    import yaml

    ckpt = _callback_class()(out, monitor, state.get("best"), history, t0, advice=_nonfinite_advice(recipe),
                             recipe=yaml.safe_load(recipe.to_yaml()))
    # epoch n's dropout masks depend on (seed, n) only, so a resumed run draws what the
    # uninterrupted one drew (the seed generators' state is not in last.keras)
    callbacks = [_epoch_seeds_class()(recipe.seed), ckpt,
                 keras.callbacks.TensorBoard(out.file(LOGS), profile_batch=0)]
    # a run killed after its last epoch's checkpoint (in the final evaluation, or after early
    # stopping's last epoch) only finishes: it trains no further epoch
    train_more = state.get("epoch", 0) < t.epochs
    if t.monitor is not None:  # the head's decoded figures into the epoch's logs, before ckpt reads them
        callbacks.insert(0, selection.callback(prep.head, prep.splits["valid"]))
    if t.diagnostics:  # gradient norms into the epoch's logs, before ckpt writes history.json
        callbacks.insert(0, grad_stats.callback(grad_stats.attach(getattr(model.optimizer, "inner_optimizer", model.optimizer))))
    stopper = None
    if t.early_stopping is not None and t.early_stopping.patience > 0:
        # a resumed run starts from the patience count and best value its epochs so far left, so
        # it stops where the uninterrupted run would (a fresh EarlyStopping forgot both)
        done = [h.get(monitor) for h in history if h.get("epoch", 0) <= state.get("epoch", 0)]
        stopper = _early_stopping_class()(
            monitor=monitor, mode="min", patience=t.early_stopping.patience,
            min_delta=t.early_stopping.min_delta, past=done)
        callbacks.append(stopper)
        if resume and state.get("status") != "finished" and stopper.replay():
            train_more = False
            stopper.stopped_after = state.get("epoch", 0)  # what the straight run recorded
    if t.schedule.type == "plateau":  # after ckpt: history.json records the epoch's own rate
        from seqkit.training.schedules import plateau_callback

        done = [h.get(monitor) for h in history if h.get("epoch", 0) <= state.get("epoch", 0)]
        callbacks.append(plateau_callback(t, monitor, past=done))
    if t.distribute.backup:
        backup = (run.file("backup") if dist.is_chief else os.path.join(
            tempfile.gettempdir(), f"seqkit-backup-{recipe.name}-{dist.worker.replace(' ', '')}"))
        callbacks.append(keras.callbacks.BackupAndRestore(backup))
    if t.distribute.strategy != "none":
        _build_from_local_batch(model, train_ds, dist.strategy)
    if stage is not None:
        ckpt.on_first_checkpoint = lambda: stage.promote(callbacks, run)
        if replaces == "run":
            log.info(f"{run_path} is replaced once the new run's first epoch is saved (until then it "
                     f"trains in {stage.path}).")
    # data.layout stream: the language model's truncated-BPTT loop takes fit's place
    streamed = getattr(prep.head, "stream", False)
    fit = prep.head.fit_stream(model) if streamed else model.fit
    if verbose and train_more:  # the step count and an ETA from the first epoch (last: after the other callbacks)
        callbacks.extend(_progress_callbacks(prep, train_ds, t, monitor, streamed, steps,
                                             state.get("epoch", 0)))
    try:
        if not resume:
            if stage is not None:
                stage.create()
            atomic_write_text(out.file(RECIPE), recipe.to_yaml())
            prep.head.save_assets(out.path)

            write_provenance(out.path, recipe)  # plugins.json: what a reload needs, named
        if train_more:
            fit(train_ds, validation_data=valid_ds, epochs=t.epochs, initial_epoch=state.get("epoch", 0),
                steps_per_epoch=t.steps_per_epoch, callbacks=callbacks, verbose=verbose, shuffle=False)
        if stage is not None and not stage.promoted:
            stage.promote(callbacks, run)
    except KeyboardInterrupt:
        if (ckpt.epochs_done == 0 and not resume) or (stage is not None and not stage.promoted):
            if stage is not None:
                stage.discard()
            raise SeqkitError("interrupted before the first epoch finished; nothing was kept"
                              + (f" ({run_path} is as it was)." if replaces == "run" else "."))
        st = out.state()
        st["status"] = "interrupted"
        atomic_write_json(out.file(STATE), st)
        raise SeqkitError(f"interrupted; {st['epoch']} epochs are saved. Continue with "
                          f"`seqkit train --resume {run_path}`.")
    except BaseException as exc:
        discarded = stage is not None and not stage.promoted  # failed before its first epoch
        if stage is not None:
            stage.discard()  # nothing once promoted: the run keeps its saved epochs
        if not discarded and dist.is_chief and isinstance(exc, Exception) and (resume or ckpt.epochs_done):
            _mark_failed(out, exc)
        if dist.replicas > 1 and _is_peer_failure(exc):
            raise SeqkitError(f"distributed training stopped: a worker or device stopped answering "
                              f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}). Restart every "
                              f"worker; with training.distribute.backup: true the job resumes from its "
                              f"last epoch.") from exc
        raise
    finally:
        if not dist.is_chief:
            out.remove()
    train_seconds = time.time() - t0
    stopped = None  # when early stopping ended training: why, and the epoch the run keeps
    if stopper is not None and stopper.stopped_after:
        from seqkit.training.progress import early_stop_summary

        stopped, message = early_stop_summary(stopper.stopped_after, t.epochs, history, monitor,
                                              t.early_stopping.patience, t.early_stopping.min_delta)
        log.info(message)
    if not dist.is_chief:
        return {"worker": dist.worker, "epochs": len(history), "history": history}

    try:  # the final evaluation can still fail (e.g. a test file the model cannot read): marked
        best = load_model(run.file(BEST)) if os.path.isfile(run.file(BEST)) else model
        if not os.path.isfile(run.file(BEST)):
            atomic_save_model(best, run.file(BEST))
        metrics = {"recipe": recipe.name, "source": prep.source, "epochs": len(history),
                   "train_seconds": round(train_seconds, 1), "parameters": params,
                   "vocabulary": len(prep.vocab) if prep.vocab is not None else None,
                   "replicas": dist.replicas,
                   "examples": {k: len(v) for k, v in prep.splits.items()},
                   "machine": machine_record,
                   "precision": {"requested": t.precision, "policy": policy, "why": why}}
        for split in ("valid", "test"):
            if prep.splits[split]:
                metrics[split] = evaluate_model(prep, best, split)
        metrics["baselines"] = checked_baselines(prep)
        if stopped is not None:
            metrics["early_stopping"] = stopped
        watched = [(h[monitor], h["epoch"]) for h in history if isinstance(h.get(monitor), (int, float))]
        if watched:  # the epoch model.keras holds: the first of the lowest monitored values
            value, epoch = min(watched)
            metrics["kept"] = {"epoch": epoch, "monitor": monitor, "value": value}

        write_export_sample(prep, run.path)  # what export needs of the data, for a run copied without it
        atomic_write_json(run.file(METRICS), metrics)
        st = run.state()
        st["status"] = "finished"
        atomic_write_json(run.file(STATE), st)
        return metrics
    except KeyboardInterrupt:
        st = run.state()
        st["status"] = "interrupted"
        atomic_write_json(run.file(STATE), st)
        n = st["epoch"]
        raise SeqkitError(f"interrupted in the final evaluation; {n} epoch{'' if n == 1 else 's'} saved. Finish "
                          f"with `seqkit train --resume {run_path}`.") from None
    except Exception as exc:
        _mark_failed(run, exc)
        raise


def _progress_callbacks(prep: Prepared, train_ds, t, monitor: str, streamed: bool, steps: int | None,
                        done: int) -> list:
    """Keras's progress bar with the epoch's step count known from the first epoch (``fit``; the
    stream loop draws seqkit's own line instead) and the callback that logs the plan and the ETA
    (:mod:`seqkit.training.progress`). ``steps``: the count already made for a schedule, if any;
    ``done``: the epochs already trained (a resumed run)."""
    from seqkit.training.progress import epoch_steps, steps_progbar_class, training_progress_class

    steps = steps or epoch_steps(prep, train_ds, steps_per_epoch_of)
    what = f"batch {t.batch_size}"
    if t.early_stopping is not None and t.early_stopping.patience > 0:
        what += (f"; early stopping may end it sooner (patience {t.early_stopping.patience} on "
                 f"{monitor})")
    out = [] if streamed else [steps_progbar_class()(steps)]
    return out + [training_progress_class()(t.epochs, steps, what, draw_steps=streamed, first_epoch=done)]


def _nonfinite_advice(recipe: Recipe) -> str:
    """The usual fixes for a loss that became NaN or infinite, with the recipe's settings."""
    t = recipe.training
    clip = (f"lower training.clipnorm (now {t.clipnorm:g})" if t.clipnorm else
            "set training.clipnorm (e.g. 1.0: clip the gradients by global norm)")
    return (f"Usual fixes: lower training.learning_rate (now {t.learning_rate:g}); {clip}; or check "
            f"the cell (model.cell: {recipe.model.cell}) for an operation that overflows or divides "
            f"by zero.")


#: Recipe keys a resumed run may change (the rest is fixed by the run's model, optimizer and data).
RESUMABLE_CHANGES = ("training.epochs", "training.early_stopping", "training.steps_per_epoch",
                     "training.diagnostics", "decoding.", "evaluation.")


def _flatten(d, prefix=""):
    out = {}
    for k, v in (d or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _frozen_changes(before: dict, after: dict) -> list[str]:
    """The flattened recipe keys a resume may not change (:data:`RESUMABLE_CHANGES` aside) whose
    values differ between ``before`` and ``after`` (sorted)."""
    from seqkit.recipe import TrainingConfig

    # a key newer than the run's recipe holding its default changes nothing
    defaults = _flatten({"training": TrainingConfig().model_dump(mode="json")})
    # a monitored figure decoded each epoch (training.monitor) is measured with the recipe's
    # decoding, so the decoding the best value and patience were counted with stays fixed
    fixed = ("decoding.",) if before.get("training.monitor") is not None else ()
    return sorted(k for k in set(before) | set(after)
                  if before.get(k) != after.get(k)
                  and (not k.startswith(RESUMABLE_CHANGES) or k.startswith(fixed))
                  and not (k not in before and k in defaults and after.get(k) == defaults[k]))


def _check_resume_changes(recipe: Recipe, run: RunDir) -> None:
    """Refuse a resume whose recipe changes what the checkpoint fixes (model, optimizer, data).

    ``last.keras`` holds the model and its compiled optimizer, so a changed ``model.units`` or
    ``training.learning_rate`` would be ignored or fail obscurely; only the keys in
    :data:`RESUMABLE_CHANGES` may differ. The recipe compared against is the one ``last.keras``
    records (checkpoints written since seqkit kept it there), else the run's ``recipe.yaml``; a
    ``recipe.yaml`` edited (or damaged) away from the checkpoint's recipe is refused by name.

    Raises:
        RunDirError: naming each changed key and the fix (``--set``, or train a new run).
    """
    import yaml

    try:
        with open(run.file(RECIPE), encoding="utf-8") as f:
            saved = yaml.safe_load(f)
    except (OSError, yaml.YAMLError, RecursionError):
        return  # load_recipe has named a damaged recipe.yaml already
    saved = _flatten(saved) if isinstance(saved, dict) else {}
    checkpoint = read_checkpoint_state(run.file(LAST))
    trained = checkpoint.get("recipe") if isinstance(checkpoint, dict) else None
    if isinstance(trained, dict):
        trained = _flatten(trained)
        edited = _frozen_changes(trained, saved)
        if edited:
            shown = ", ".join(f"{k} ({trained.get(k)!r} in the checkpoint, {saved.get(k)!r} in the file)"
                              for k in edited[:4])
            more = f" and {len(edited) - 4} more" if len(edited) > 4 else ""
            raise RunDirError(f"{run.file(RECIPE)}: differs from the recipe {LAST} was trained with: "
                              f"{shown}{more}. The file was edited or damaged, and a resume continues "
                              f"the checkpoint's model, optimizer and data. Restore those values; what a "
                              f"resume may change (training.epochs, training.early_stopping, ...) goes "
                              f"through --set.")
        saved = trained
    elif checkpoint is None or isinstance(checkpoint, dict):  # another shape: resume_point names it
        log.warn(f"{run.file(LAST)} records no recipe (a checkpoint written before seqkit kept it "
                 f"there, or one whose state entry cannot be read), so {run.file(RECIPE)} cannot be "
                 f"checked against what the model was trained with: the resume trusts the file as it "
                 f"is, and the next checkpoints record it.")
    now = _flatten(yaml.safe_load(recipe.to_yaml()))
    changed = _frozen_changes(saved, now)
    if changed:
        shown = ", ".join(f"{k} ({saved.get(k)!r} -> {now.get(k)!r})" for k in changed[:4])
        raise RunDirError(f"{run.path}: --resume cannot change {shown}: the checkpoint fixes the model, "
                          f"its optimizer and the data. Only training.epochs, training.early_stopping, "
                          f"training.steps_per_epoch, training.diagnostics, decoding.* (not with "
                          f"training.monitor, which decodes each epoch) and evaluation.* may change; to "
                          f"change the rest, train a new run.")


def _mark_failed(run: RunDir, exc: BaseException) -> None:
    """Record in ``state.json`` that training stopped on ``exc`` (``"status": "failed"``)."""
    try:
        st = run.state()
        st["status"] = "failed"
        st["reason"] = str(exc) if isinstance(exc, SeqkitError) else f"{type(exc).__name__}: {exc}"
        atomic_write_json(run.file(STATE), st)
    except Exception:  # noqa: BLE001  (never hide the error that stopped training)
        pass


def _build_from_local_batch(model, train_ds, strategy) -> None:
    """Build ``model``'s optimizer and metrics from a local batch before ``fit``/``evaluate``.

    Under a strategy, Keras 3.15 first *reduces a distributed data batch across
    replicas* just to build the model symbolically. That fails when replicas
    hold batches of different shapes (the last, partial batch of a bucket:
    "Inputs to operation AddN ... must have the same size and shape"), and
    always under ``MultiWorkerMirroredStrategy`` ("Attempt to convert a value
    (PerReplica...)"; keras-team/keras#20585). Building from this process's own
    first batch does the same work without the reduce (see also
    :func:`seqkit.training.distribute._patch_keras_scalar_reduce`).
    """
    x, y = next(iter(train_ds))

    def build(iterator=None, data_batch=None):
        with strategy.scope():
            model._symbolic_build(data_batch=(x, y, None))

    model._maybe_symbolic_build = build


def _is_peer_failure(exc: BaseException) -> bool:
    """True for the errors collective ops raise when a peer worker dies or times out."""
    import tensorflow as tf

    return isinstance(exc, (tf.errors.DeadlineExceededError, tf.errors.UnavailableError,
                            tf.errors.CancelledError, tf.errors.AbortedError))


def evaluate_model(prep: Prepared, model, split: str) -> dict:
    """Exact metrics of ``model`` on one split (sums over tokens, not means of batch means)."""
    return prep.head.evaluate(model, prep.splits[split])


def load_model(path: str, keep_precision: bool = False):
    """Load a ``.keras`` file with seqkit's custom objects, in Keras safe mode.

    A model trained under a mixed precision policy computes in float32 once loaded
    (:func:`seqkit.training.precision.to_float32`: the same float32 weights), so evaluation,
    generation and export are float32; ``keep_precision`` keeps the saved policies (``--resume``).

    Raises:
        RunDirError: the file is missing, corrupt, or needs a plugin that is not available.
        ResourceError: unpacking it ran out of disk, file size or memory (:func:`seqkit.guards.resource_error`).
    """
    import keras

    import seqkit.layers.crf  # noqa: F401  (registers custom objects)
    import seqkit.layers.decoder  # noqa: F401
    import seqkit.layers.frame_mask  # noqa: F401
    import seqkit.layers.fused_gru  # noqa: F401
    import seqkit.layers.fused_lstm  # noqa: F401
    import seqkit.layers.pooling  # noqa: F401
    import seqkit.training.losses  # noqa: F401
    import seqkit.training.optimizers  # noqa: F401
    import seqkit.training.schedules  # noqa: F401

    if not os.path.isfile(path):
        raise RunDirError(f"{path}: no such model file.")
    try:
        model = keras.saving.load_model(path, safe_mode=True)
    except Exception as exc:
        err = resource_error(exc, path, loading=True)  # disk full, file-size limit, out of memory
        if err is not None:
            raise err from exc
        try:  # a .keras file is a zip archive: a cut-off or overwritten one fails here
            with zipfile.ZipFile(path) as z:
                damaged = z.testzip()
        except (zipfile.BadZipFile, OSError, EOFError) as zexc:
            damaged = str(zexc)
        if damaged:
            sibling = "last.keras" if os.path.basename(path) != "last.keras" else "model.keras"
            raise RunDirError(f"{path}: not a complete .keras archive ({damaged}); the file was cut "
                              f"off (a full disk, an interrupted copy) or overwritten. Copy the run's "
                              f"{sibling} over it if that model will do, or train again.") from exc
        needed = keras_classes_needed(path)
        raise RunDirError(f"{path}: cannot load the model ({type(exc).__name__}: {exc}). If the run "
                          f"used a plugin cell or head, install it or pass --plugin"
                          + (f" (the model names {', '.join(needed)})." if needed else ".")) from exc
    return model if keep_precision else precision.to_float32(model)


def _warn_unfinished(run_path: str, state: dict, epochs: int) -> None:
    """Log a warning when ``state.json`` says training has not finished (``running``: still
    training, or killed without a word; ``interrupted``; ``failed``): the run's model is then the
    best of the epochs done so far."""
    status = state.get("status")
    if status in ("running", "interrupted", "failed"):
        log.warn(f"{run_path}: training has not finished (state.json: {status}, {state.get('epoch', 0)} of "
                 f"{epochs} epochs done), so this uses the best model of those epochs. If it is not still "
                 f"training, continue it with `seqkit train --resume {run_path}`.")


def load_run(run_path: str, with_data: bool = False):
    """Load a run for evaluation or generation.

    Args:
        run_path: a run directory made by :func:`train`.
        with_data: also read the data source and re-make the recipe's splits.

    Returns:
        ``(prep, model)``: :class:`Prepared` with the run's own vocabulary and
        recipe, and the best model.

    Raises:
        RunDirError: not a run directory, or unreadable files.
    """
    run = RunDir(run_path).check()
    recipe = load_recipe(run.file(RECIPE), load_plugins=False)  # a run directory is data, never code
    _warn_unfinished(run_path, run.state(), recipe.training.epochs)
    from seqkit.data.base import reading_a_run

    with reading_a_run():  # a run's recipe may not make seqkit download its data
        prep = prepare(recipe, run_dir=run_path, read_data=with_data)
    prep.run_dir = run_path
    model = load_model(run.file(BEST))

    check_model_matches(prep, model, run.file(BEST))  # not a model.keras from another run
    compile_model(prep, model)
    return prep, model
