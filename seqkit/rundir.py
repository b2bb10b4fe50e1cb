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

Every file is written to a temporary name and renamed into place, so an
interrupted run never leaves a half-written file.

Every JSON file is strict JSON (RFC 8259: no ``NaN`` or ``Infinity`` literals):
:func:`strict_json` writes a number that is not finite as ``null``. Training
stops on a non-finite loss (:mod:`seqkit.train`), so a ``null`` marks only a
figure that is genuinely undefined or beyond float range (e.g. the perplexity
``exp(cross_entropy)`` of a cross-entropy above ~88 nats in float32).
"""

from __future__ import annotations

import json
import math
import os
import shutil

from seqkit.errors import RunDirError

RECIPE, VOCAB, BEST, LAST, STATE, METRICS, HISTORY, LOGS = (
    "recipe.yaml", "vocab.json", "model.keras", "last.keras", "state.json", "metrics.json",
    "history.json", "logs")
LABELS, NORMALIZER, INPUTS = "labels.json", "normalizer.json", "inputs.json"


def atomic_write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and ``os.replace``."""
    tmp = path + ".tmp"
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


def atomic_write_json(path: str, obj) -> None:
    """Write ``obj`` as strict JSON (:func:`strict_json`), atomically."""
    atomic_write_text(path, strict_json(obj, indent=2, ensure_ascii=False) + "\n")


#: The entry of a checkpoint's ``.keras`` archive that records the training state it belongs to.
CHECKPOINT_STATE = "seqkit_state.json"


def atomic_save_model(model, path: str, state: dict | None = None) -> None:
    """``model.save`` to a temporary ``.keras`` file, then rename into place.

    ``state`` (a JSON-able dict) is stored inside the archive as :data:`CHECKPOINT_STATE`
    (Keras ignores the entry), so the checkpoint and the epoch count and history it
    belongs to are replaced in one rename: a run killed between writing ``last.keras``
    and ``state.json`` still resumes from a consistent point (:meth:`RunDir.resume_point`).
    """
    import zipfile

    tmp = path[: -len(".keras")] + ".tmp.keras"
    model.save(tmp)
    if state is not None:
        with zipfile.ZipFile(tmp, "a") as z:
            z.writestr(CHECKPOINT_STATE, strict_json(state, ensure_ascii=False))
    os.replace(tmp, path)


def read_checkpoint_state(path: str) -> dict | None:
    """The state stored in a ``.keras`` checkpoint by :func:`atomic_save_model` (``None``: none)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            if CHECKPOINT_STATE not in z.namelist():
                return None
            return json.loads(z.read(CHECKPOINT_STATE).decode("utf-8"))
    except (OSError, zipfile.BadZipFile, ValueError):
        return None


def read_json(path: str, default=None):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        if default is not None:
            return default
        raise


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
        return read_json(self.file(STATE), default={"epoch": 0, "best": None, "status": "new"})

    def resume_point(self) -> tuple[dict, list]:
        """``(state, history)`` of the epoch ``last.keras`` holds, for ``--resume``.

        The checkpoint records its own epoch, best value and history (see
        :func:`atomic_save_model`); ``state.json`` and ``history.json`` are written after it
        and may lag one epoch behind when the process was killed in between. Runs
        written before checkpoints carried their state fall back to those two files.
        History entries past the checkpoint's epoch are dropped.
        """
        state = self.state()
        saved = read_checkpoint_state(self.file(LAST))
        if saved is not None:
            history = saved.get("history", [])
            state = {**state, "epoch": saved["epoch"], "best": saved.get("best")}
        else:
            history = read_json(self.file(HISTORY), default=[])
        history = [h for h in history if h.get("epoch", 0) <= state.get("epoch", 0)]
        return state, history

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
