"""Run directories: what training leaves behind, and what evaluate/generate read.

Layout::

    RUN/recipe.yaml     the resolved recipe (defaults filled, overrides applied)
    RUN/vocab.json      the input token list (id = position), for token inputs
    RUN/labels.json     the label (acceptor) or tag (tagger) list, id = position
    RUN/normalizer.json per-feature mean and standard deviation, for frame inputs
    RUN/inputs.json     input facts the head needs at prediction time (kind, width, longest)
    RUN/model.keras     the best model so far (lowest validation loss)
    RUN/last.keras      the latest epoch's model with optimizer state (for --resume)
    RUN/state.json      {"epoch": completed epochs, "best": best val loss, "status": ...}
    RUN/metrics.json    final metrics (valid, test, baselines, parameters, timings)
    RUN/history.json    per-epoch metrics
    RUN/logs/           TensorBoard event files
    RUN/plugins.json    the plugins the run needs (only when the recipe uses some)
    RUN/target_vocab.json  the output token list, for seq2seq runs
    RUN/subword.model   the SentencePiece model of data.tokenizer sentencepiece (seqkit.data.subword)
    RUN/target_subword.model  the target side's SentencePiece model (seq2seq, target_tokenizer sentencepiece)
    RUN/backup/         BackupAndRestore's state (training.distribute.backup), while training
    RUN/dynamic_stats.npz  the rms rule's gradient statistics, kept by evaluate --dynamic
                        (seqkit.heads.language_model.dynamic_stats_cache: plain arrays, keyed by weights and data)

A directory is a seqkit run (one that ``train --overwrite`` may replace) when it
holds ``recipe.yaml`` and ``state.json`` and nothing but the names above (and
their ``*.tmp`` / ``*.tmp.keras`` temporaries): see :func:`not_a_run_because`.

Every file is written to a temporary name and renamed into place, so an
interrupted run never leaves a half-written file.

Every JSON file is strict JSON (RFC 8259: no ``NaN`` or ``Infinity`` literals):
:func:`strict_json` writes a number that is not finite as ``null``. Training
stops on a non-finite loss (:mod:`seqkit.training.train`), so a ``null`` marks only a
figure that is genuinely undefined or beyond float range (e.g. the perplexity
``exp(cross_entropy)`` of a cross-entropy above 709.78 nats, beyond float64:
:mod:`seqkit.metrics.perplexity`).

The seqkit modules ``seqkit --help`` does not load are imported inside the functions that use them,
since ``seqkit --help`` imports this module.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import zipfile

from seqkit.errors import RunDirError
from seqkit.runs.json_files import bounded_json

RECIPE, VOCAB, BEST, LAST, STATE, METRICS, HISTORY, LOGS = (
    "recipe.yaml", "vocab.json", "model.keras", "last.keras", "state.json", "metrics.json",
    "history.json", "logs")
LABELS, NORMALIZER, INPUTS = "labels.json", "normalizer.json", "inputs.json"
PLUGINS, TARGET_VOCAB, BACKUP = "plugins.json", "target_vocab.json", "backup"
SUBWORD_MODEL, TARGET_SUBWORD_MODEL = "subword.model", "target_subword.model"
DYNAMIC_STATS = "dynamic_stats.npz"  # seqkit.heads.language_model.dynamic_stats_cache.CACHE
EXPORT_SAMPLE = "export_sample.json"  # seqkit.export.sample: what export needs of the data
CHAR_VOCAB = "char_vocab.json"  # seqkit.data.word_chars: the character vocabulary of word inputs
PROVENANCE = "provenance.json"  # bench.tables --train: commit, command, machine and load of the run
# every name a run directory can hold (seqkit.plugins.PLUGINS, seqkit.heads.seq2seq.TARGET_VOCAB and
# seqkit.data.subword's SUBWORD_MODEL / TARGET_SUBWORD_MODEL are the same strings; tests/test_rundir_safety.py
# and tests/test_subword.py check; tests/test_dynamic_stats_cache.py checks DYNAMIC_STATS)
RUN_NAMES = frozenset((RECIPE, VOCAB, BEST, LAST, STATE, METRICS, HISTORY, LOGS, LABELS, NORMALIZER,
                       INPUTS, PLUGINS, TARGET_VOCAB, BACKUP, SUBWORD_MODEL, TARGET_SUBWORD_MODEL,
                       DYNAMIC_STATS, EXPORT_SAMPLE, CHAR_VOCAB, PROVENANCE))


def is_run_name(name: str) -> bool:
    """True for a name seqkit writes into a run directory, or one of their temporaries
    (``state.json.tmp`` from :func:`atomic_write_text`, ``last.tmp.keras`` from
    :func:`atomic_save_model`, ``dynamic_stats.npz.<pid>.tmp`` from the dynamic-evaluation cache)."""
    if name in RUN_NAMES:
        return True
    if name.endswith(".tmp"):
        stem = name[: -len(".tmp")]
        head, _, pid = stem.rpartition(".")
        if stem in RUN_NAMES or (pid.isdigit() and head in RUN_NAMES):  # NAME.tmp, NAME.<pid>.tmp
            return True
    return name.endswith(".tmp.keras") and name[: -len(".tmp.keras")] + ".keras" in RUN_NAMES


#: Files below a run's folders: TensorBoard's event files (``logs/``) and Keras's
#: ``BackupAndRestore`` files (``backup/``, ``training.backup``), by their names at any depth.
_SUBTREE_FILES = {LOGS: lambda n: n.startswith("events.out.tfevents."),
                  BACKUP: lambda n: n.split(".bkp")[0] in ("latest.weights.h5", "training_metadata.json")}
#: Most entries a folder's tree may hold to be recognised as seqkit's (a bound on the walk).
MAX_TREE_ENTRIES = 100_000


def foreign_in_tree(root: str, allowed) -> str | None:
    """The first entry under the folder ``root`` (relative path) that is a symbolic link or a file
    whose name ``allowed(name)`` rejects, or ``"(more than MAX_TREE_ENTRIES entries)"``; None
    when every entry is seqkit's. Links are never followed."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            seen += 1
            p = os.path.join(dirpath, n)
            if seen > MAX_TREE_ENTRIES:
                return f"(more than {MAX_TREE_ENTRIES:,} entries)"
            if os.path.islink(p) or (n in filenames and not allowed(n)):
                return os.path.relpath(p, root)
    return None


def foreign_in_run(path: str) -> str | None:
    """The first entry of the folder ``path`` that a run directory does not hold (a name seqkit
    does not write at its top, a symbolic link, or a file below ``logs/`` / ``backup/`` other than
    TensorBoard's and Keras's backup files; an unreadable folder counts as foreign), or None."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return "(its entries cannot be read)"
    for n in names:
        p = os.path.join(path, n)
        if not is_run_name(n) or os.path.islink(p):
            return n
        if os.path.isdir(p):
            inner = foreign_in_tree(p, _SUBTREE_FILES.get(n, lambda _n: False))
            if inner is not None:
                return os.path.join(n, inner)
    return None


def _state_is_seqkits(path: str) -> bool:
    """Whether ``path`` (a ``state.json``) is one seqkit wrote: a JSON object with a whole-number
    ``epoch`` (read only when it is a small regular file)."""
    try:
        st = bounded_json(path, 1 << 20)
    except (OSError, ValueError):
        return False
    return state_problem(st) is None and "epoch" in st


def not_a_run_because(path: str) -> str | None:
    """``None`` when ``path`` is a seqkit run directory (``recipe.yaml`` and a ``state.json``
    seqkit wrote, nothing but the names a run holds, and below its ``logs/`` and ``backup/``
    nothing but TensorBoard's and Keras's files), else why not, in words (for messages)."""
    if os.path.islink(path):
        return "it is a symbolic link"
    if not os.path.isdir(path):
        return "it is not a folder"
    names = sorted(os.listdir(path))
    other = [n for n in names if not is_run_name(n)]
    if other:
        shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
        return f"it holds files seqkit does not write ({shown})"
    missing = [n for n in (RECIPE, STATE) if n not in names]
    if missing:
        return f"it lacks {' and '.join(missing)}"
    foreign = foreign_in_run(path)
    if foreign is not None:
        return f"it holds {foreign}, which seqkit does not write"
    if not _state_is_seqkits(os.path.join(path, STATE)):
        return f"its {STATE} is not one seqkit wrote (a JSON object with a whole-number epoch)"
    return None


@contextlib.contextmanager
def _writing(tmp: str):
    """Around the writing of the temporary file ``tmp``: when it fails with an ``OSError`` (a full
    disk, a file-size limit), ``tmp`` is removed (nothing half-written stays) and the error gets
    ``tmp`` as its ``filename`` when it has none (a failing ``write()``, or Keras's archive
    writer, names no file), so the message names the file that could not be written."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = tmp
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and ``os.replace``.

    Raises:
        OSError: the write failed (its ``filename`` names the temporary file, which is removed).
    """
    tmp = path + ".tmp"
    with _writing(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
    os.replace(tmp, path)


def finite_or_null(obj):
    """``obj`` with every float that is NaN or infinite replaced by ``None`` (dicts, lists and
    tuples walked; NumPy scalars and arrays made plain Python values)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_null(v) for v in obj]
    if hasattr(obj, "tolist") and type(obj).__module__ == "numpy":  # np.float32, np.int64, arrays
        return finite_or_null(obj.tolist())
    return obj


def strict_json(obj, **kwargs) -> str:
    """``json.dumps(obj)`` as strict JSON: non-finite numbers become ``null``
    (:func:`finite_or_null`) and ``allow_nan=False`` guards the rest."""
    return json.dumps(finite_or_null(obj), allow_nan=False, **kwargs)


def json_line(obj) -> str:
    """One line of JSON Lines output: :func:`strict_json`, UTF-8 text kept as it is, except that
    U+2028, U+2029 and U+0085 inside strings are written escaped (``\\u2028``): valid JSON either
    way, but a reader that splits lines with Python's ``str.splitlines`` (or a JavaScript one)
    would break the record at them."""
    text = strict_json(obj, ensure_ascii=False)
    for ch in ("\u2028", "\u2029", "\u0085"):
        text = text.replace(ch, f"\\u{ord(ch):04x}")
    return text


def atomic_write_json(path: str, obj) -> None:
    """Write ``obj`` as strict JSON (:func:`strict_json`), atomically."""
    atomic_write_text(path, strict_json(obj, indent=2, ensure_ascii=False) + "\n")


#: The entry of a checkpoint's ``.keras`` archive that records the training state it belongs to.
CHECKPOINT_STATE = "seqkit_state.json"
#: Largest state entry read back (its history and recipe: a few hundred KB for thousands of epochs).
MAX_CHECKPOINT_STATE = 64 << 20


def atomic_save_model(model, path: str, state: dict | None = None) -> None:
    """``model.save`` to a temporary ``.keras`` file, then rename into place.

    ``state`` (a JSON-able dict) is stored inside the archive as :data:`CHECKPOINT_STATE`
    (Keras ignores the entry), so the checkpoint and the epoch count and history it
    belongs to are replaced in one rename: a run killed between writing ``last.keras``
    and ``state.json`` still resumes from a consistent point (:meth:`RunDir.resume_point`).

    Raises:
        OSError: the write failed (a full disk, a file-size limit); its ``filename`` names the
            temporary file, which is removed, and ``path`` is as it was.
    """
    tmp = path[: -len(".keras")] + ".tmp.keras"
    with _writing(tmp):  # a failed write: no half-written archive left, the error names it
        model.save(tmp)
        if state is not None:
            with zipfile.ZipFile(tmp, "a") as z:
                z.writestr(CHECKPOINT_STATE, strict_json(state, ensure_ascii=False))
    os.replace(tmp, path)


_IF_DELETED = {
    STATE: "the run then counts as not started: --resume trains every epoch again from last.keras",
    HISTORY: "the per-epoch log starts again, and a resumed run's early stopping forgets its count",
    METRICS: "evaluate then shows no baselines; training again writes it",
}


def damaged(path: str, problem: str) -> RunDirError:
    """The RunDirError for a run file that is not what seqkit wrote (names the file and the fix)."""
    name = os.path.basename(path)
    fix = (f"Restore it from a copy of the run, or delete it ({_IF_DELETED[name]})."
           if name in _IF_DELETED else "Restore it from a copy of the run, or train again.")
    return RunDirError(f"{path}: {problem}; the file was damaged or edited by hand. {fix}")


def state_problem(st) -> str | None:
    """What is wrong with a ``state.json`` object (``{"epoch": int >= 0, "best": number or null,
    ...}``; a missing ``epoch`` reads as 0), in words, or None."""
    if not isinstance(st, dict):
        return f"expected a JSON object with epoch and best, found a {type(st).__name__}"
    epoch, best = st.get("epoch", 0), st.get("best")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        return f"'epoch' must be a whole number >= 0, found {epoch!r}"
    if best is not None and (isinstance(best, bool) or not isinstance(best, (int, float))):
        return f"'best' must be a number or null, found {best!r}"
    return None


def history_problem(hist) -> str | None:
    """What is wrong with a ``history.json`` list (objects with a whole-number ``epoch`` and numbers
    for the losses a resumed run's early stopping reads), in words, or None."""
    if not isinstance(hist, list):
        return f"expected a JSON list of per-epoch objects, found a {type(hist).__name__}"
    for i, h in enumerate(hist):
        if not isinstance(h, dict) or isinstance(h.get("epoch"), bool) or not isinstance(h.get("epoch"), int):
            return f"entry {i} is not an object with a whole-number 'epoch' (found {str(h)[:80]})"
        bad = [k for k, v in h.items() if (k.startswith("val_") or k in ("loss", "cross_entropy"))
               and v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)))]
        if bad:
            return f"entry {i}: '{bad[0]}' must be a number, found {h[bad[0]]!r}"
    return None


def _check_checkpoint_state(saved, where: str) -> None:
    """Refuse a checkpoint state of another shape than :func:`atomic_save_model` writes: a
    ``state.json`` object with its ``epoch`` (:func:`state_problem`) and a ``history`` list
    (:func:`history_problem`).

    Raises:
        RunDirError: naming ``where`` and the fix.
    """
    problem = state_problem(saved)
    if problem is None and "epoch" not in saved:
        problem = "'epoch' must be a whole number >= 0, found None"
    if problem is None:
        wrong = history_problem(saved.get("history", []))
        problem = f"'history' must be a list of per-epoch objects ({wrong})" if wrong else None
    if problem:
        raise RunDirError(f"{where}: {problem}; the checkpoint was damaged or edited by hand. Restore "
                          f"the run from a copy, or train again (its model.keras still evaluates).")


def read_checkpoint_state(path: str) -> dict | None:
    """The state stored in a ``.keras`` checkpoint by :func:`atomic_save_model` (``None``: none)."""
    try:
        with zipfile.ZipFile(path) as z:
            if CHECKPOINT_STATE not in z.namelist():
                return None
            entry = z.getinfo(CHECKPOINT_STATE)
            if entry.file_size > MAX_CHECKPOINT_STATE:
                return None
            return json.loads(z.read(CHECKPOINT_STATE).decode("utf-8"))
    except (OSError, zipfile.BadZipFile, ValueError, RecursionError):
        return None


def read_json(path: str, default=None):
    """Read a run's JSON file (``default`` when it is missing and a default is given).

    Raises:
        RunDirError: the file is not valid JSON, not a regular file or too large (names the file
            and the fix).
    """
    try:
        return bounded_json(path)
    except FileNotFoundError:
        if default is not None:
            return default
        raise
    except (UnicodeDecodeError, ValueError) as exc:
        raise damaged(path, f"not valid JSON ({exc})") from exc


class RunDir:
    """A run directory at ``path``.

    Raises (from :meth:`check`):
        RunDirError: the directory is missing or lacks the files of a run.
    """

    def __init__(self, path: str):
        self.path = path

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def exists(self) -> bool:
        return os.path.isdir(self.path)

    def check(self, need_model: bool = True) -> "RunDir":
        if not os.path.isdir(self.path):
            raise RunDirError(f"{self.path}: no such run directory. Train first with "
                              f"`seqkit train RECIPE` (runs go to runs/NAME by default).")
        missing = [n for n in (RECIPE,) if not os.path.isfile(self.file(n))]
        if need_model and not os.path.isfile(self.file(BEST)):
            missing.append(BEST)
        if missing:
            raise RunDirError(f"{self.path}: not a complete seqkit run directory (missing "
                              f"{', '.join(missing)}). Point at a directory made by `seqkit train`; "
                              f"an interrupted run can be continued with `seqkit train --resume "
                              f"{self.path}`.")
        from seqkit.plugins import require_run_plugins

        require_run_plugins(self.path)  # a missing plugin is named before Keras meets its class
        return self

    def state(self) -> dict:
        """``state.json`` (``{"epoch": 0, ...}`` when missing).

        Raises:
            RunDirError: not JSON, or not ``{"epoch": int >= 0, "best": number or null, ...}``.
        """
        path = self.file(STATE)
        st = read_json(path, default={"epoch": 0, "best": None, "status": "new"})
        problem = state_problem(st)
        if problem:
            raise damaged(path, problem)
        return st

    def history(self) -> list:
        """``history.json``: one object per finished epoch (``[]`` when missing).

        Raises:
            RunDirError: not JSON, or not a list of objects with a whole-number ``epoch`` (and
                numbers for the losses a resumed run's early stopping reads).
        """
        path = self.file(HISTORY)
        hist = read_json(path, default=[])
        problem = history_problem(hist)
        if problem:
            raise damaged(path, problem)
        return hist

    def resume_point(self) -> tuple[dict, list]:
        """``(state, history)`` of the epoch ``last.keras`` holds, for ``--resume``.

        The checkpoint records its own epoch, best value and history (see
        :func:`atomic_save_model`); ``state.json`` and ``history.json`` are written after it
        and may lag one epoch behind when the process was killed in between. Runs
        written before checkpoints carried their state fall back to those two files.
        History entries past the checkpoint's epoch are dropped.
        """
        state = self.state()
        history = self.history()  # read even when unused: a damaged file is named, not skipped
        saved = read_checkpoint_state(self.file(LAST))
        if saved is not None:
            _check_checkpoint_state(saved, f"{self.file(LAST)} ({CHECKPOINT_STATE} inside it)")
            history = saved.get("history", [])
            state = {**state, "epoch": saved["epoch"], "best": saved.get("best")}
        history = [h for h in history if h.get("epoch", 0) <= state.get("epoch", 0)]
        return state, history

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
