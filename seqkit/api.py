"""seqkit's Python API: the front door (``seqkit.Recipe``, ``seqkit.train``, ``seqkit.load``,
``seqkit.build``, ``seqkit.Run``), re-exported lazily by ``import seqkit``.

These call what the command line calls, so a run trained here is the run ``seqkit train`` writes,
and results and error messages (:class:`seqkit.SeqkitError` subclasses) are the CLI's. A library
call prints nothing: Keras progress bars are off unless ``verbose=1``, and seqkit's own progress
lines and warnings go to the ``seqkit`` :mod:`logging` logger (``logging.basicConfig(level=
logging.INFO)`` shows them). See ``docs/python-api.md``.
"""

from __future__ import annotations

import contextlib
import os

from seqkit import arguments as a
from seqkit import log
from seqkit._quiet import import_tensorflow_quietly
from seqkit.errors import SeqkitError
from seqkit.guards import build_model, check_writable
from seqkit.log import to_stderr
from seqkit.progress import shown
from seqkit.recipe import Recipe, load_recipe, override_strings
from seqkit.runs.run import Alignment, Run
from seqkit.runs.rundir import RECIPE, RunDir
from seqkit.runtime.request import stream as _stream
from seqkit.training.seeds import train_seeds as do_train_seeds
from seqkit.training.train import (compile_model, count_parameters, make_split_dataset, prepare,
                                   seed_everything)
from seqkit.training.train import train as do_train

__all__ = ["Alignment", "Preprocessing", "Recipe", "Run", "build", "init", "load", "stream", "train", "train_seeds",
           "validate"]


@contextlib.contextmanager
def _shown(verbose: int):
    """``verbose >= 1``: seqkit's log lines and progress lines go to stderr, as on the command line."""
    if verbose:
        with to_stderr(), shown():
            yield
    else:
        yield


def _recipe(recipe, what: str, overrides=()) -> Recipe:
    """A validated :class:`Recipe` from a recipe file or a dict with ``overrides`` (``--set``
    strings or ``{"a.b": value}``) applied, or a Recipe as it is (refused with overrides: it is
    validated already, with the paths, plugins and defaults of the file or dict it came from)."""
    import_tensorflow_quietly()  # TF's C++ start-up lines (oneDNN, CUDA probing) are not ours to print
    overrides = override_strings(overrides)
    if isinstance(recipe, Recipe):
        if overrides:
            raise SeqkitError(f"{what}: overrides apply to a recipe file or dict; this seqkit.Recipe is "
                              f"validated already. Give them where it is made: "
                              f"seqkit.Recipe.from_yaml(path, overrides=...) or "
                              f".from_dict(raw, overrides=...).")
        return recipe
    if isinstance(recipe, (str, os.PathLike)):
        return load_recipe(os.fspath(recipe), overrides)
    if isinstance(recipe, dict):
        return Recipe.from_dict(recipe, overrides)
    raise SeqkitError(f"{what}: expected a recipe file, a shipped recipe's name, a dict or a "
                      f"seqkit.Recipe; got {type(recipe).__name__}.")


def train(recipe=None, run_dir=None, *, overwrite: bool = False, resume: bool = False,
          verbose: int = 0, overrides=()) -> Run | None:
    """Train a recipe into a run directory, as ``seqkit train`` does.

    Args:
        recipe: a :class:`seqkit.Recipe`, a recipe file or a recipe dict. With ``resume`` it may
            be ``None``: the run's own ``recipe.yaml`` is used (its ``plugins:`` not imported).
        run_dir: the run directory [default: ``runs/NAME``; with ``resume``, required].
        overwrite: replace an existing run directory (only a seqkit run).
        resume: continue the interrupted run in ``run_dir`` from its last finished epoch (a
            recipe with a larger ``training.epochs`` trains longer).
        verbose: 0 (default) prints nothing; 1 shows Keras's progress bar and seqkit's progress
            lines on stderr; 2 one line per epoch.
        overrides: ``["KEY.PATH=VALUE", ...]`` (``--set``) or ``{"KEY.PATH": value}``, applied to
            a recipe file or dict or, with ``resume`` and no recipe, to the run's own recipe (e.g.
            ``training.epochs=20``); refused with a :class:`seqkit.Recipe` (validated already).

    Returns:
        The :class:`Run` (``run.metrics`` holds the final metrics, as ``metrics.json``); ``None``
        in a non-chief worker of a multi-worker job, which writes no run.

    Raises:
        RecipeError: the recipe does not validate.
        DataError: the data source is empty or unreadable, or does not suit the head.
        RunDirError: ``run_dir`` exists (without ``overwrite``/``resume``), is not something
            seqkit may replace, is locked by another training, or has nothing to resume.
        SeqkitError: interrupted (Ctrl-C), and the other errors of :func:`seqkit.training.train.train`.
    """
    overrides = override_strings(overrides)
    run_dir = a.path("run_dir", run_dir, optional=True, option="--run-dir")
    if resume:
        if run_dir is None:
            raise SeqkitError("train(resume=True) needs run_dir: the run to continue.")
        run_dir = os.fspath(run_dir)
        RunDir(run_dir).check(need_model=False)  # names a missing plugin; imports nothing
        if recipe is None:  # the run's own recipe is data: its plugins: are not imported
            rec = load_recipe(os.path.join(run_dir, RECIPE), overrides, load_plugins=False)
        else:
            rec = _recipe(recipe, "train", overrides)
        check_writable(run_dir, "resume")
    else:
        if recipe is None:
            raise SeqkitError("train: give a recipe (a seqkit.Recipe, a recipe file or a dict).")
        rec = _recipe(recipe, "train", overrides)
        run_dir = os.fspath(run_dir) if run_dir is not None else os.path.join("runs", rec.name)
        check_writable(run_dir, "train")

    with _shown(verbose):
        metrics = do_train(rec, run_dir, resume=resume, overwrite=overwrite, verbose=verbose)
    if "worker" in metrics:  # a non-chief worker of a multi-worker job
        log.info(f"{metrics['worker']}: trained {metrics['epochs']} epochs; the chief writes {run_dir}")
        return None
    return Run(run_dir)


def train_seeds(recipe, seeds: int, run_dir=None, *, overwrite: bool = False, verbose: int = 0,
                on_run=None, overrides=()) -> dict:
    """Train a recipe with ``seeds`` seeds and summarise the spread, as ``seqkit train --seeds N``.

    Run ``i`` uses seed ``recipe.seed + i`` and goes to ``RUN_DIR-seed<S>`` (``RUN_DIR``
    default ``runs/NAME``); the summary (mean, sample sd with ``n - 1``, min, max and the
    per-seed values of every numeric valid/test figure) is written to ``RUN_DIR-seeds.json``
    (:mod:`seqkit.training.seeds`). Run again after a stop, it continues: a seed's run that
    finished with the same recipe is kept, an unfinished one resumed (``overwrite`` retrains all).
    ``on_run(path, how)`` (optional) is called as each seed's run is ready, ``how`` one of
    ``"trained"``, ``"resumed"``, ``"kept"``. ``overrides`` as for :func:`train` (a recipe file
    or dict; refused with a :class:`Recipe`).

    Returns:
        The summary dict; ``summary["runs"]`` lists the run directories (open each with
        :func:`load`), ``summary["path"]`` the JSON file.

    Raises:
        RecipeError, DataError, RunDirError, SeqkitError: as :func:`train`; every run directory
        is checked before the first one trains.
    """
    seeds = a.whole("seeds", seeds, 1)
    run_dir = a.path("run_dir", run_dir, optional=True, option="--run-dir")
    if on_run is not None and not callable(on_run):
        raise a.ArgumentTypeError(f"on_run={on_run!r}: must be a function called as on_run(path, how), "
                                  f"or None; got a {type(on_run).__name__}.")
    rec = _recipe(recipe, "train_seeds", overrides)
    with _shown(verbose):
        return do_train_seeds(rec, seeds, run_dir, overwrite=overwrite, verbose=verbose, on_run=on_run)


def load(run_dir) -> Run:
    """Open a trained run directory (any head): ``seqkit.load("runs/lm")``.

    Returns:
        A :class:`Run`; the model is loaded on first use.

    Raises:
        RunDirError: not a run directory, or a plugin it needs is missing.
        SeqkitError: ``run_dir`` is not a path (``str`` or ``os.PathLike``).
    """
    return Run(run_dir)


class Preprocessing:
    """The data side of a recipe, as :func:`seqkit.build` returns it with the model: the splits,
    the head with its fitted vocabularies / labels / normaliser, and the ``tf.data`` pipelines
    training uses (bucketed, padded, per-epoch shuffled).

    Attributes:
        prepared: the :class:`seqkit.training.train.Prepared` underneath.
        recipe: the recipe.
        head: the task head (``head.vocab``, ``head.labels``, ...).
        splits: ``{"train": [Record], "valid": [...], "test": [...]}``.
    """

    def __init__(self, prepared):
        self.prepared = prepared

    def __repr__(self) -> str:
        counts = ", ".join(f"{k} {len(v)}" for k, v in self.splits.items())
        return f"Preprocessing({self.recipe.name!r}: {counts})"

    @property
    def recipe(self) -> Recipe:
        return self.prepared.recipe

    @property
    def head(self):
        return self.prepared.head

    @property
    def splits(self) -> dict:
        return self.prepared.splits

    @property
    def vocab(self):
        """The input vocabulary (``None`` for frame inputs)."""
        return self.prepared.vocab

    def dataset(self, split: str, *, training: bool | None = None, first_epoch: int = 0):
        """The batched ``tf.data.Dataset`` of ``(inputs, targets)`` for one split.

        Args:
            split: ``"train"``, ``"valid"`` or ``"test"``.
            training: reshuffle each pass (default: ``split == "train"``).
            first_epoch: the epoch the first pass stands for (its shuffle order).

        Returns:
            ``(inputs, targets)`` batches. ``inputs``: token ids ``[B, T] int32`` (0 pads) or
            frames ``[B, T, D] float32`` (NaN pads). ``targets`` (int32) use **0 for "no
            target"**, so padding never counts: a language model's next-token ids ``[B, T]``
            (its vocabulary holds id 0 for padding); a tagger's tag ids **plus one** ``[B, T]``
            and an acceptor's class ids **plus one** ``[B]`` (class ``c`` of ``head.labels`` --
            logit ``c`` of ``[B, C]`` -- is target ``c + 1``). The compiled loss and metrics read
            them so (:mod:`seqkit.training.losses`, ``offset``); a stock
            ``keras.losses.SparseCategoricalCrossentropy`` needs ``targets - 1`` and a mask of
            its own.

        Raises:
            SeqkitError: an unknown or empty split.
        """
        if not self.splits.get(split):
            raise SeqkitError(f"split {split!r}: " + ("empty in this recipe (data.split)." if split in self.splits
                                                      else f"expected one of {', '.join(self.splits)}."))

        return make_split_dataset(self.prepared, split, training=split == "train" if training is None
                                  else training, first_epoch=first_epoch)


def build(recipe, *, verbose: int = 0):
    """Read a recipe's data and build its model, compiled as ``seqkit train`` compiles it, for
    you to train yourself; :meth:`Run.from_model` then writes the run directory.

    Seeds Python, NumPy and TensorFlow with ``recipe.seed`` first (as training does).

    Args:
        recipe: a :class:`seqkit.Recipe`, a recipe file or a recipe dict.
        verbose: 1 shows seqkit's log lines (data, vocabulary) on stderr.

    Returns:
        ``(model, pre)``: a compiled ``keras.Model`` (optimizer with the recipe's clipping, the
        head's masked loss and exact metrics) and its :class:`Preprocessing`.

    Raises:
        RecipeError / DataError: as :func:`train`; SeqkitError: a model too large for memory.
    """
    rec = _recipe(recipe, "build")
    with _shown(verbose):
        seed_everything(rec.seed, rec.training.deterministic)
        prep = prepare(rec)
        model = compile_model(prep)
    return model, Preprocessing(prep)


def validate(recipe, overrides=(), *, data: bool = True) -> dict:
    """Check a recipe without training (``seqkit validate``): every key, and with ``data`` the data
    source, the head's assets and the model it builds.

    Args:
        recipe: a YAML path, a shipped recipe's name, a dict or a :class:`Recipe`.
        overrides: ``["KEY.PATH=VALUE", ...]`` (``--set``) or ``{"KEY.PATH": value}``, applied
            to a recipe file, name or dict; refused with a :class:`Recipe` (validated already).
        data: also read the data and build the model (the training split as read: a head's
            derived training records, e.g. head.distill's teacher outputs, are made by training).

    Returns:
        ``{"recipe", "ok": True, "resolved": {...}}`` and with ``data`` also ``"data": {"source",
        "examples": {split: n}, "assets"}`` and ``"parameters": {"total", "trainable", ...}``.

    Raises:
        RecipeError: every problem of the recipe at once (file, line and key named).
        DataError: the data cannot be read; SeqkitError: a model too large for memory.
    """
    rec = _recipe(recipe, "validate", overrides)
    name = (recipe.name if isinstance(recipe, Recipe) else "<dict>" if isinstance(recipe, dict)
            else os.fspath(recipe))
    out = {"recipe": name, "ok": True, "resolved": rec.to_dict()}
    if data:
        prep = prepare(rec, derive=False)  # the split as read: no head.distill teacher decoding
        out["data"] = {"source": str(prep.source), "examples": {k: len(v) for k, v in prep.splits.items()},
                       "assets": prep.head.describe_assets()}
        out["parameters"] = count_parameters(build_model(prep))
    return out


def init(task: str, data, out=None, *, overwrite: bool = False) -> str:
    """Write a starter recipe for the user's own data, as ``seqkit init --task TASK --data DATA``:
    the head whose ``starter_task`` is ``task`` looks at the file(s) and names the format and
    columns it found (:mod:`seqkit.starter`).

    Args:
        task: a head's ``starter_task`` word (built in: classify, tag, lm and seq2seq; a plugin
            head may add its own, e.g. forecast with seqkit-forecast installed).
        data: a file or folder path, or a list of them (``seq2seq``: source and target files).
        out: the recipe file [default: ``NAME.yaml`` in the current folder].
        overwrite: replace ``out`` when ``seqkit init`` wrote it (never another file).

    Returns:
        The path written (``str``).

    Raises:
        seqkit.starter.InitError: an unknown task, a missing file, data the head cannot read, or
            ``out`` exists (without ``overwrite``, or not written by ``seqkit init``).
    """
    from seqkit.starter import write_starter

    task = a.text("task", task, option="--task")
    paths = [a.path("data", p, option="--data") for p in (data if isinstance(data, (list, tuple)) else [data])]
    out = a.path("out", out, optional=True, option="--out")
    return write_starter(task, paths, out, overwrite=overwrite)


def stream(export, **options) -> str:
    """Run an exported ``.tflite`` (an export directory or the file alone) as ``seqkit stream`` does
    and return what it prints (:func:`seqkit.runtime.request.stream`; ``options``: ``prompt=``,
    ``text=``, ``max_length=``, ``temperature=``, ``top_k=``, ``greedy=``, ``beam_width=``, ``seed=``).

    Raises:
        SeqkitError: no export or invalid metadata, a head not registered here, a bad option.
    """
    return _stream(os.fspath(export), **options)
