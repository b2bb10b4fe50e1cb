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
    RUN/backup/         BackupAndRestore's state (training.distribute.backup), while training

A directory is a seqkit run (one that ``train --overwrite`` may replace) when it
holds ``recipe.yaml`` and ``state.json`` and nothing but the names above (and
their ``*.tmp`` / ``*.tmp.keras`` temporaries): see :func:`not_a_run_because`.

Every file is written to a temporary name and renamed into place, so an
interrupted run never leaves a half-written file.
"""

from __future__ import annotations

import json
import os
import shutil

from seqkit.errors import RunDirError

RECIPE, VOCAB, BEST, LAST, STATE, METRICS, HISTORY, LOGS = (
    "recipe.yaml", "vocab.json", "model.keras", "last.keras", "state.json", "metrics.json",
    "history.json", "logs")
LABELS, NORMALIZER, INPUTS = "labels.json", "normalizer.json", "inputs.json"
PLUGINS, TARGET_VOCAB, BACKUP = "plugins.json", "target_vocab.json", "backup"
# every name a run directory can hold (seqkit.plugins.PLUGINS and seqkit.heads.seq2seq.TARGET_VOCAB
# are the same strings; tests/test_rundir_safety.py checks)
RUN_NAMES = frozenset((RECIPE, VOCAB, BEST, LAST, STATE, METRICS, HISTORY, LOGS, LABELS, NORMALIZER,
                       INPUTS, PLUGINS, TARGET_VOCAB, BACKUP))


def is_run_name(name: str) -> bool:
    """True for a name seqkit writes into a run directory, or one of their temporaries
    (``state.json.tmp`` from :func:`atomic_write_text`, ``last.tmp.keras`` from
    :func:`atomic_save_model`)."""
    if name in RUN_NAMES:
        return True
    if name.endswith(".tmp") and name[: -len(".tmp")] in RUN_NAMES:
        return True
    return name.endswith(".tmp.keras") and name[: -len(".tmp.keras")] + ".keras" in RUN_NAMES


def not_a_run_because(path: str) -> str | None:
    """``None`` when ``path`` is a seqkit run directory (``recipe.yaml`` and ``state.json``,
    nothing but the names a run holds), else why not, in words (for messages)."""
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
    return None


def atomic_write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and ``os.replace``."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def atomic_write_json(path: str, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def atomic_save_model(model, path: str) -> None:
    """``model.save`` to a temporary ``.keras`` file, then rename into place."""
    tmp = path[: -len(".keras")] + ".tmp.keras"
    model.save(tmp)
    os.replace(tmp, path)


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

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
