"""Training: data -> vocabulary -> model -> ``fit`` with clipping, checkpoints, early stopping.

The public entry points are :func:`prepare` (data, splits, vocabulary, head),
:func:`train` (a whole run into a run directory, or ``resume``) and
:func:`load_run` (what ``evaluate`` and ``generate`` start from).
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass, field

from seqkit import log
from seqkit.data.split import split_examples
from seqkit.data.vocab import Vocabulary, tokenize
from seqkit.errors import DataError, RunDirError, SeqkitError
from seqkit.recipe import Recipe, load_recipe
from seqkit.registry import DATA, HEADS
from seqkit.rundir import (BEST, HISTORY, LAST, LOGS, METRICS, RECIPE, STATE, VOCAB, RunDir,
                           atomic_save_model, atomic_write_json, atomic_write_text, read_json)

# A bucketed dataset has no known length until its first pass; Keras then warns that the
# "input ran out of data" at the end of it, which is expected here.
warnings.filterwarnings("ignore", message="Your input ran out of data")


@dataclass
class Prepared:
    """Everything needed to build datasets and a model for a recipe."""

    recipe: Recipe
    vocab: Vocabulary
    head: object
    splits: dict = field(default_factory=dict)
    source: str = ""
    chunked: int = 0


def chunk_long(examples: list[str], max_tokens: int, tokenizer: str) -> tuple[list[str], int]:
    """Split examples longer than ``max_tokens`` tokens into consecutive pieces.

    Returns:
        ``(examples, n_split)`` where ``n_split`` counts examples that were cut.
    """
    out, n = [], 0
    for ex in examples:
        toks = list(ex) if tokenizer == "char" else ex.split()
        if len(toks) <= max_tokens:
            out.append(ex)
            continue
        n += 1
        sep = "" if tokenizer == "char" else " "
        out.extend(sep.join(toks[i:i + max_tokens]) for i in range(0, len(toks), max_tokens))
    return out, n


def seed_everything(seed: int, deterministic: bool) -> None:
    """Seed Python, NumPy and TensorFlow; optionally make TF ops deterministic."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(seed)
    if deterministic:
        tf.config.experimental.enable_op_determinism()


def prepare(recipe: Recipe, vocab: Vocabulary | None = None) -> Prepared:
    """Read the data source, split it, build (or reuse) the vocabulary, make the head.

    Raises:
        DataError: the source is empty or unreadable, or a split is empty.
    """
    d = recipe.data
    source = DATA.get(d.source)(recipe.data_options, recipe)
    examples = source.examples()
    if d.limit:
        examples = examples[: d.limit]
    if not examples:
        raise DataError(f"data: the source {source.describe()} gave no examples.")
    examples, n_cut = chunk_long(examples, d.max_length - 1, d.tokenizer)
    if n_cut:
        log.warn(f"{n_cut} examples were longer than data.max_length - 1 = {d.max_length - 1} "
                 f"tokens and were split into pieces; raise data.max_length to keep them whole.")
    splits = split_examples(examples, d.split.valid, d.split.test, shuffle=d.split.shuffle,
                            seed=recipe.seed)
    if vocab is None:
        vocab = Vocabulary.build((tokenize(x, d.tokenizer, d.lowercase) for x in splits["train"]),
                                 min_count=d.min_count, max_size=d.max_vocab)
    head = HEADS.get(recipe.head.type)(recipe, vocab)
    return Prepared(recipe, vocab, head, splits, source.describe(), n_cut)


def make_split_dataset(prep: Prepared, split: str, training: bool):
    """The batched ``tf.data.Dataset`` of one split (shuffled when ``training``)."""
    from seqkit.data.pipeline import make_dataset

    r = prep.recipe
    return make_dataset(prep.splits[split], prep.vocab, prep.head.to_pair,
                        tokenizer=r.data.tokenizer, lowercase=r.data.lowercase,
                        batch_size=r.training.batch_size, max_length=r.data.max_length,
                        shuffle=training, seed=r.seed, bucket=r.data.bucket)


def make_optimizer(t):
    """The recipe's optimizer with global-norm gradient clipping (``training.clipnorm``).

    Clipping: ``g <- g * tau / ||g||_2`` over all gradients together when
    ``||g||_2 > tau`` (Pascanu, Mikolov & Bengio 2013, alg. 1).
    """
    import keras

    cls = {"adam": keras.optimizers.Adam, "adamw": keras.optimizers.AdamW,
           "sgd": keras.optimizers.SGD, "rmsprop": keras.optimizers.RMSprop}[t.optimizer]
    return cls(learning_rate=t.learning_rate, global_clipnorm=t.clipnorm)


def compile_model(prep: Prepared, model=None):
    """Build (or take) the head's model and compile it with the recipe's training settings."""
    model = model if model is not None else prep.head.build_model()
    t = prep.recipe.training
    model.compile(optimizer=make_optimizer(t), loss=prep.head.loss(), metrics=prep.head.metrics(),
                  jit_compile=t.jit_compile)
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

    run = RunDir(run_path)
    t = recipe.training
    seed_everything(recipe.seed, t.deterministic)
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
        prep = prepare(recipe, Vocabulary.load(run.file(VOCAB)))
    else:
        if run.exists() and os.listdir(run_path) and not overwrite:
            raise RunDirError(f"{run_path}: the run directory exists already. Pass --overwrite to "
                              f"replace it, --resume to continue it, or --run-dir for a new one.")
        prep = prepare(recipe)  # all data errors surface before anything is written

    train_ds = make_split_dataset(prep, "train", training=True)
    has_valid = bool(prep.splits["valid"])
    valid_ds = make_split_dataset(prep, "valid", training=False) if has_valid else None
    monitor = "val_loss" if has_valid else "loss"

    if resume:
        model = load_model(run.file(LAST))
    else:
        model = compile_model(prep)
        if run.exists():
            run.remove()
        os.makedirs(run_path)
        atomic_write_text(run.file(RECIPE), recipe.to_yaml())
        from seqkit.plugins import write_provenance

        write_provenance(run_path, recipe)  # plugins.json: what a reload needs, named
        prep.vocab.save(run.file(VOCAB))
    params = count_parameters(model)
    log.info(f"data: {prep.source}; {', '.join(f'{k} {len(v)}' for k, v in prep.splits.items())} "
             f"examples; vocabulary {len(prep.vocab)}")
    log.info(f"model: {recipe.head.type} / {recipe.model.cell} x{recipe.model.layers}, "
             f"{params['total']:,} parameters ({', '.join(f'{k} {v:,}' for k, v in params.items() if k not in ('total', 'trainable'))})")

    t0 = time.time()
    ckpt = _callback_class()(run, monitor, state.get("best"), history, t0)
    callbacks = [ckpt, keras.callbacks.TensorBoard(run.file(LOGS), profile_batch=0)]
    if t.early_stopping is not None and t.early_stopping.patience > 0:
        callbacks.append(keras.callbacks.EarlyStopping(monitor=monitor, patience=t.early_stopping.patience,
                                                       min_delta=t.early_stopping.min_delta))
    try:
        model.fit(train_ds, validation_data=valid_ds, epochs=t.epochs, initial_epoch=state.get("epoch", 0),
                  steps_per_epoch=t.steps_per_epoch, callbacks=callbacks, verbose=verbose,
                  shuffle=False)
    except KeyboardInterrupt:
        if ckpt.epochs_done == 0 and not resume:
            run.remove()
            raise SeqkitError("interrupted before the first epoch finished; nothing was kept.")
        st = run.state()
        st["status"] = "interrupted"
        atomic_write_json(run.file(STATE), st)
        raise SeqkitError(f"interrupted; {st['epoch']} epochs are saved. Continue with "
                          f"`seqkit train --resume {run_path}`.")
    except BaseException:
        if ckpt.epochs_done == 0 and not resume:
            run.remove()
        raise
    train_seconds = time.time() - t0

    best = load_model(run.file(BEST)) if os.path.isfile(run.file(BEST)) else model
    if not os.path.isfile(run.file(BEST)):
        atomic_save_model(best, run.file(BEST))
    metrics = {"recipe": recipe.name, "source": prep.source, "epochs": len(history),
               "train_seconds": round(train_seconds, 1), "parameters": params,
               "vocabulary": len(prep.vocab),
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


def evaluate_model(prep: Prepared, model, split: str) -> dict:
    """Exact metrics of ``model`` on one split (sums over tokens, not means of batch means)."""
    ds = make_split_dataset(prep, split, training=False)
    res = model.evaluate(ds, verbose=0, return_dict=True)
    return prep.head.summarize(res)


def load_model(path: str):
    """Load a ``.keras`` file with seqkit's custom objects, in Keras safe mode.

    Raises:
        RunDirError: the file is missing, corrupt, or needs a plugin that is not available.
    """
    import keras

    import seqkit.losses  # noqa: F401  (registers custom objects)

    if not os.path.isfile(path):
        raise RunDirError(f"{path}: no such model file.")
    try:
        return keras.saving.load_model(path, safe_mode=True)
    except Exception as exc:
        from seqkit.plugins import keras_classes_needed

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
    vocab = Vocabulary.load(run.file(VOCAB))
    if with_data:
        prep = prepare(recipe, vocab)
    else:
        prep = Prepared(recipe, vocab, HEADS.get(recipe.head.type)(recipe, vocab))
    model = load_model(run.file(BEST))
    compile_model(prep, model)
    return prep, model
