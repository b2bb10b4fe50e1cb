"""Training: data -> vocabulary -> model -> ``fit`` with clipping, checkpoints, early stopping.

The public entry points are :func:`prepare` (data, splits, vocabulary, head),
:func:`train` (a whole run into a run directory, or ``resume``) and
:func:`load_run` (what ``evaluate`` and ``generate`` start from).
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from dataclasses import dataclass, field

from seqkit import log
from seqkit.data.split import assemble_splits
from seqkit.data.vocab import Vocabulary
from seqkit.heads.language_model import chunk_long  # noqa: F401  (public since the first release)
from seqkit.errors import DataError, RunDirError, SeqkitError
from seqkit.recipe import Recipe, load_recipe
from seqkit.registry import DATA, HEADS
from seqkit.rundir import (BEST, HISTORY, LAST, LOGS, METRICS, RECIPE, STATE, RunDir,
                           atomic_save_model, atomic_write_json, atomic_write_text, read_json)

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
    """

    recipe: Recipe
    head: object
    splits: dict = field(default_factory=dict)
    source: str = ""

    @property
    def vocab(self):
        """The head's input vocabulary (``None`` for frame inputs)."""
        return getattr(self.head, "vocab", None)

    @property
    def chunked(self) -> int:
        return getattr(self.head, "chunked", 0)


def seed_everything(seed: int, deterministic: bool) -> None:
    """Seed Python, NumPy and TensorFlow; optionally make TF ops deterministic."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(seed)
    if deterministic:
        tf.config.experimental.enable_op_determinism()


def prepare(recipe: Recipe, vocab: Vocabulary | None = None, *, run_dir: str | None = None,
            read_data: bool = True) -> Prepared:
    """Read the data source, split it, fit (or load) the head's assets.

    Args:
        recipe: the validated recipe.
        vocab: an input vocabulary to reuse (language model; kept for callers of old).
        run_dir: load the head's assets (vocabularies, normaliser) from this run
            directory instead of fitting them on the training split.
        read_data: read the data source (False: only make the head, e.g. for predict).

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
        splits = assemble_splits(loaded, d.split.valid, d.split.test, shuffle=d.split.shuffle,
                                 seed=recipe.seed, limit=d.limit)
    if run_dir is not None:
        head.load_assets(run_dir)
    elif vocab is None:
        if not read_data:
            raise SeqkitError("prepare: the head's assets need the training data or a run directory.")
        head.fit(splits["train"])
    if read_data and hasattr(head, "check_splits"):
        head.check_splits(splits)
    return Prepared(recipe, head, splits, described)


def make_split_dataset(prep: Prepared, split: str, training: bool, first_epoch: int = 0):
    """The batched ``tf.data.Dataset`` of one split (shuffled per epoch when ``training``)."""
    return prep.head.dataset(prep.splits[split], training=training, first_epoch=first_epoch)


def make_optimizer(t):
    """The recipe's optimizer with global-norm gradient clipping (``training.clipnorm``).

    Clipping: ``g <- g * tau / ||g||_2`` over all gradients together when
    ``||g||_2 > tau`` (Pascanu, Mikolov & Bengio 2013, alg. 1).
    """
    from seqkit.optimizers import OPTIMIZERS

    cls = OPTIMIZERS[t.optimizer]
    return cls(learning_rate=t.learning_rate, global_clipnorm=t.clipnorm)


def compile_model(prep: Prepared, model=None):
    """Build (or take) the head's model and compile it with the recipe's training settings."""
    from seqkit.losses import share_cross_entropy

    model = model if model is not None else prep.head.build_model()
    t = prep.recipe.training
    loss, metrics = prep.head.loss(), prep.head.metrics()
    share_cross_entropy(loss, metrics)  # the exact cross-entropy metric reuses the loss's softmax
    model.compile(optimizer=make_optimizer(t), loss=loss, metrics=metrics, jit_compile=t.jit_compile)
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


def _callback_class():
    import keras

    class RunCheckpoint(keras.callbacks.Callback):
        """Each epoch: save last.keras (+ optimizer), keep the best as model.keras, log history."""

        def __init__(self, run: RunDir, monitor: str, best, history: list, t0: float):
            super().__init__()
            self.run, self.monitor, self.best, self.history, self.t0 = run, monitor, best, history, t0
            self.epochs_done = 0

        def on_epoch_end(self, epoch, logs=None):
            logs = {k: float(v) for k, v in (logs or {}).items()}
            atomic_save_model(self.model, self.run.file(LAST))
            value = logs.get(self.monitor)
            improved = value is not None and (self.best is None or value < self.best)
            if improved:
                self.best = value
                atomic_save_model(self.model, self.run.file(BEST))
            self.history.append({"epoch": epoch + 1, **logs, "seconds": round(time.time() - self.t0, 1)})
            atomic_write_json(self.run.file(HISTORY), self.history)
            atomic_write_json(self.run.file(STATE), {"epoch": epoch + 1, "best": self.best,
                                                     "monitor": self.monitor, "status": "running"})
            self.epochs_done += 1

    return RunCheckpoint


def _early_stopping_class():
    import keras

    class ResumableEarlyStopping(keras.callbacks.EarlyStopping):
        """``EarlyStopping`` that starts from the monitored values of the epochs already done
        (``past``, oldest first; ``None`` where the value is missing), as if it had seen them."""

        def __init__(self, *args, past=(), **kwargs):
            super().__init__(*args, **kwargs)
            self.past = list(past)

        def on_train_begin(self, logs=None):
            super().on_train_begin(logs)
            if self.monitor_op is None:
                self._set_monitor_op()
            for value in self.past:  # on_epoch_end's bookkeeping (no baseline, no restore)
                if value is None:
                    continue
                self.wait += 1
                if self._is_improvement(value, self.best):
                    self.best, self.wait = value, 0

    return ResumableEarlyStopping


def train(recipe: Recipe, run_path: str, *, resume: bool = False, overwrite: bool = False,
          verbose: int = 1) -> dict:
    """Train a recipe into ``run_path`` (or continue the run there when ``resume``).

    Args:
        recipe: the validated recipe (for ``resume``, the run's own recipe).
        run_path: the run directory.
        resume: continue from ``last.keras`` and ``state.json``.
        overwrite: replace an existing run directory.
        verbose: Keras ``fit`` verbosity (1 = progress bar).

    Returns:
        The final metrics (also written to ``metrics.json``).

    Raises:
        RunDirError: the run exists (without ``overwrite``/``resume``) or is not resumable.
        SeqkitError: bad data or recipe.
    """
    import keras

    from seqkit.distribute import make_distribution

    t = recipe.training
    dist = make_distribution(t.distribute)  # before anything else touches TF's devices
    seed_everything(recipe.seed, t.deterministic)
    run = RunDir(run_path)
    # only the chief writes the run directory; other workers write to a scratch copy
    out = run if dist.is_chief else RunDir(tempfile.mkdtemp(prefix="seqkit-worker-"))
    state, history = {"epoch": 0, "best": None}, []
    if resume:
        run.check(need_model=False)
        if not os.path.isfile(run.file(LAST)):
            raise RunDirError(f"{run_path}: nothing to resume (no {LAST}: no epoch finished).")
        state = run.state()
        history = read_json(run.file(HISTORY), default=[])
        if state.get("epoch", 0) >= t.epochs:
            raise RunDirError(f"{run_path}: already trained for {state['epoch']} of {t.epochs} epochs. "
                              f"To train longer: seqkit train --resume {run_path} "
                              f"--set training.epochs=N.")
        prep = prepare(recipe, run_dir=run_path)
    else:
        if dist.is_chief and run.exists() and os.listdir(run_path) and not overwrite:
            raise RunDirError(f"{run_path}: the run directory exists already. Pass --overwrite to "
                              f"replace it, --resume to continue it, or --run-dir for a new one.")
        prep = prepare(recipe)  # all data errors surface before anything is written

    with dist.strategy.scope():
        train_ds = make_split_dataset(prep, "train", training=True, first_epoch=state.get("epoch", 0))
        has_valid = bool(prep.splits["valid"])
        valid_ds = make_split_dataset(prep, "valid", training=False) if has_valid else None
        model = load_model(run.file(LAST)) if resume else compile_model(prep)
    exact = "cross_entropy" if any(m.name == "cross_entropy" for m in prep.head.metrics()) else "loss"
    monitor = f"val_{exact}" if has_valid else exact
    if not resume:
        if out.exists():
            out.remove()
        os.makedirs(out.path)
        atomic_write_text(out.file(RECIPE), recipe.to_yaml())
        prep.head.save_assets(out.path)
        from seqkit.plugins import write_provenance

        write_provenance(out.path, recipe)  # plugins.json: what a reload needs, named
    params = count_parameters(model)
    log.info(f"data: {prep.source}; {', '.join(f'{k} {len(v)}' for k, v in prep.splits.items())} "
             f"examples; {prep.head.describe_assets()}")
    log.info(f"model: {recipe.head.type} / {recipe.model.cell} x{recipe.model.layers}, "
             f"{params['total']:,} parameters ({', '.join(f'{k} {v:,}' for k, v in params.items() if k not in ('total', 'trainable'))})")
    if dist.replicas > 1 or t.distribute.strategy != "none":
        log.info(f"distribute: {t.distribute.strategy}, {dist.replicas} replicas, this process is the "
                 f"{dist.worker}; global batch {t.batch_size}, {t.batch_size / dist.replicas:g} per replica")
        if t.batch_size % dist.replicas:
            log.warn(f"training.batch_size {t.batch_size} is not a multiple of {dist.replicas} "
                     f"replicas; replicas get unequal shares of each batch.")

    t0 = time.time()
    ckpt = _callback_class()(out, monitor, state.get("best"), history, t0)
    callbacks = [ckpt, keras.callbacks.TensorBoard(out.file(LOGS), profile_batch=0)]
    if t.early_stopping is not None and t.early_stopping.patience > 0:
        # a resumed run starts from the patience count and best value its epochs so far left, so
        # it stops where the uninterrupted run would (a fresh EarlyStopping forgot both)
        done = [h.get(monitor) for h in history if h.get("epoch", 0) <= state.get("epoch", 0)]
        callbacks.append(_early_stopping_class()(
            monitor=monitor, mode="min", patience=t.early_stopping.patience,
            min_delta=t.early_stopping.min_delta, past=done))
    if t.distribute.backup:
        backup = (run.file("backup") if dist.is_chief else os.path.join(
            tempfile.gettempdir(), f"seqkit-backup-{recipe.name}-{dist.worker.replace(' ', '')}"))
        callbacks.append(keras.callbacks.BackupAndRestore(backup))
    if t.distribute.strategy != "none":
        _build_from_local_batch(model, train_ds, dist.strategy)
    # data.layout stream: the language model's truncated-BPTT loop takes fit's place
    fit = prep.head.fit_stream(model) if getattr(prep.head, "stream", False) else model.fit
    try:
        fit(train_ds, validation_data=valid_ds, epochs=t.epochs, initial_epoch=state.get("epoch", 0),
                  steps_per_epoch=t.steps_per_epoch, callbacks=callbacks, verbose=verbose,
                  shuffle=False)
    except KeyboardInterrupt:
        if ckpt.epochs_done == 0 and not resume:
            out.remove()
            raise SeqkitError("interrupted before the first epoch finished; nothing was kept.")
        st = out.state()
        st["status"] = "interrupted"
        atomic_write_json(out.file(STATE), st)
        raise SeqkitError(f"interrupted; {st['epoch']} epochs are saved. Continue with "
                          f"`seqkit train --resume {run_path}`.")
    except BaseException as exc:
        if ckpt.epochs_done == 0 and not resume:
            out.remove()
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
    if not dist.is_chief:
        return {"worker": dist.worker, "epochs": len(history), "history": history}

    best = load_model(run.file(BEST)) if os.path.isfile(run.file(BEST)) else model
    if not os.path.isfile(run.file(BEST)):
        atomic_save_model(best, run.file(BEST))
    metrics = {"recipe": recipe.name, "source": prep.source, "epochs": len(history),
               "train_seconds": round(train_seconds, 1), "parameters": params,
               "vocabulary": len(prep.vocab) if prep.vocab is not None else None,
               "replicas": dist.replicas,
               "examples": {k: len(v) for k, v in prep.splits.items()}}
    for split in ("valid", "test"):
        if prep.splits[split]:
            metrics[split] = evaluate_model(prep, best, split)
    metrics["baselines"] = prep.head.baselines(prep)
    atomic_write_json(run.file(METRICS), metrics)
    st = run.state()
    st["status"] = "finished"
    atomic_write_json(run.file(STATE), st)
    return metrics


def _build_from_local_batch(model, train_ds, strategy) -> None:
    """Build ``model``'s optimizer and metrics from a local batch before ``fit``/``evaluate``.

    Under a strategy, Keras 3.15 first *reduces a distributed data batch across
    replicas* just to build the model symbolically. That fails when replicas
    hold batches of different shapes (the last, partial batch of a bucket:
    "Inputs to operation AddN ... must have the same size and shape"), and
    always under ``MultiWorkerMirroredStrategy`` ("Attempt to convert a value
    (PerReplica...)"; keras-team/keras#20585). Building from this process's own
    first batch does the same work without the reduce (see also
    :func:`seqkit.distribute._patch_keras_scalar_reduce`).
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


def load_model(path: str):
    """Load a ``.keras`` file with seqkit's custom objects, in Keras safe mode.

    Raises:
        RunDirError: the file is missing, corrupt, or needs a plugin that is not available.
    """
    import keras

    import seqkit.layers.decoder  # noqa: F401  (registers custom objects)
    import seqkit.layers.frame_mask  # noqa: F401
    import seqkit.layers.fused_gru  # noqa: F401
    import seqkit.layers.fused_lstm  # noqa: F401
    import seqkit.layers.pooling  # noqa: F401
    import seqkit.losses  # noqa: F401
    import seqkit.optimizers  # noqa: F401

    if not os.path.isfile(path):
        raise RunDirError(f"{path}: no such model file.")
    try:
        return keras.saving.load_model(path, safe_mode=True)
    except Exception as exc:
        import zipfile

        from seqkit.plugins import keras_classes_needed

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
    recipe = load_recipe(run.file(RECIPE))
    prep = prepare(recipe, run_dir=run_path, read_data=with_data)
    model = load_model(run.file(BEST))
    compile_model(prep, model)
    return prep, model
