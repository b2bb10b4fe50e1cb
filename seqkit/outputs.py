"""The one writer of every path a user names with ``--out`` (pictures, their JSON, exports).

The rule, the same for every command (``plot``, ``diagnose``, ``evaluate --out``,
``attention``, ``export``):

* **Named first.** Every file a command will write -- the PNG and the JSON beside it -- is
  named and checked before any of them is written (:class:`FileOutputs`).
* **Only seqkit's own files are replaced.** An existing file is replaced only when seqkit wrote
  it (:func:`written_by_seqkit`: a PNG whose ``Software`` text chunk says ``seqkit``, a JSON
  object whose ``"written_by"`` says ``seqkit``), or when the user passes ``--overwrite``.
* **Never, even with --overwrite:** a folder, a symbolic link, a file inside a seqkit run
  directory (its model, recipe, vocabulary ...: :func:`run_dir_holding`), or a path the command
  reads (the recipe and data files in use: ``protect``).
* **Staged.** Each file is written to a hidden temporary name in its own folder and renamed
  into place only once all of them are written (:meth:`FileOutputs.write`); a failure leaves
  the earlier files as they were and no temporary behind.
* **Exports** (a folder) keep the rule of :func:`seqkit.export.writer.check_out` and hold a
  lock like training's (:func:`export_lock`): a second ``seqkit export`` into the same folder
  fails at once.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Callable, Iterable, Sequence

import seqkit
from seqkit.errors import SeqkitError
from seqkit.guards import resource_error, write_error
from seqkit.recipe import load_recipe
from seqkit.runs.lifecycle import RunLock, protected_paths
from seqkit.runs.rundir import BEST, RECIPE, STATE

#: The value of the ``"written_by"`` key of every JSON seqkit writes beside a picture, and the
#: start of the ``Software`` text chunk of every PNG it draws.
MARK = "seqkit"
JSON_KEY = "written_by"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class OutputPathError(SeqkitError):
    """An ``--out`` path seqkit will not write: it would replace something seqkit did not write,
    a run's own file, or a file the command reads."""


def png_metadata() -> dict:
    """The ``metadata=`` of ``savefig`` that marks a PNG as seqkit's (``{"Software": "seqkit X"}``)."""
    return {"Software": f"{MARK} {seqkit.__version__}"}


def json_mark(command: str) -> dict:
    """``{"written_by": "seqkit COMMAND"}``: the key that marks a JSON object as seqkit's."""
    return {JSON_KEY: f"{MARK} {command}".strip()}


def _png_software(path: str, limit: int = 1 << 20) -> str | None:
    """The ``Software`` tEXt chunk of a PNG (read up to its first IDAT, at most ``limit`` bytes)."""
    try:
        with open(path, "rb") as f:
            if f.read(8) != PNG_SIGNATURE:
                return None
            seen = 8
            while seen < limit:
                head = f.read(8)
                if len(head) < 8:
                    return None
                n, kind = struct.unpack(">I4s", head)
                if kind == b"IDAT" or n > limit:
                    return None
                body = f.read(n)
                f.read(4)  # CRC
                seen += 12 + n
                if kind == b"tEXt" and b"\0" in body:
                    key, _, value = body.partition(b"\0")
                    if key == b"Software":
                        return value.decode("latin-1")
    except OSError:
        return None
    return None


def written_by_seqkit(path: str) -> bool:
    """True when the file at ``path`` carries seqkit's mark: a PNG whose ``Software`` chunk starts
    with ``seqkit``, or a JSON object (at most 256 MiB) whose ``"written_by"`` does."""
    if not os.path.isfile(path) or os.path.islink(path):
        return False
    software = _png_software(path)
    if software is not None:
        return software.startswith(MARK)
    try:
        if os.path.getsize(path) > 256 << 20:
            return False
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and str(obj.get(JSON_KEY, "")).startswith(MARK)


def is_run_dir(folder: str) -> bool:
    """True when ``folder`` looks like a seqkit run directory (``recipe.yaml`` beside
    ``state.json`` or ``model.keras``), complete or not."""
    return os.path.isfile(os.path.join(folder, RECIPE)) and (
        os.path.isfile(os.path.join(folder, STATE)) or os.path.isfile(os.path.join(folder, BEST)))


def run_dir_holding(path: str) -> str | None:
    """The seqkit run directory that ``path`` is in (or is), at any depth, else ``None``."""
    folder = os.path.realpath(path)
    while True:
        if os.path.isdir(folder) and is_run_dir(folder):
            return folder
        up = os.path.dirname(folder)
        if up == folder:
            return None
        folder = up


def _same(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _signature(path: str):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)


class FileOutputs:
    """The files one command writes at a user's ``--out`` (e.g. ``curves.png`` and ``curves.json``),
    checked together when made and written together by :meth:`write`.

    Args:
        paths: every file the command will write (main file first, then its companions).
        overwrite: replace files seqkit did not write (``--overwrite``).
        protect: ``[(what, path)]`` the command reads (recipe, data files): never replaced.
        option: the option that named the paths, for messages (``--out``).

    Raises:
        OutputPathError: a path is a folder or a symbolic link, lies in a run directory, is a
            protected file, or is a file seqkit did not write (without ``overwrite``). The
            message names the path, the companion files and the fix.
    """

    def __init__(self, paths: Sequence[str], *, overwrite: bool = False,
                 protect: Iterable[tuple[str, str]] = (), option: str = "--out"):
        self.paths = [os.fspath(p) for p in paths]
        self.overwrite = overwrite
        self.protect = list(protect)
        self.option = option
        self._seen = {p: self._check(p) for p in self.paths}

    def _refuse(self, path: str, why: str, fix: str) -> OutputPathError:
        main = self.paths[0]
        names = (f" ({self.option} {main} writes {' and '.join(self.paths)})"
                 if len(self.paths) > 1 else "")
        return OutputPathError(f"{path}: {why}{names}. Nothing was written; {fix}")

    def _check(self, path: str):
        other = "choose another " + self.option
        run = run_dir_holding(os.path.dirname(os.path.abspath(path)) or ".")
        if run is not None:
            raise self._refuse(path, f"lies inside the seqkit run directory {run}, and seqkit writes "
                               f"a run's files only while it trains (a file there would replace "
                               f"one of them or make the run a folder --overwrite no longer "
                               f"replaces)", f"{other} outside the run, e.g. beside it.")
        for what, p in self.protect:
            if p and os.path.exists(p) and _same(p, path):
                raise self._refuse(path, f"is {what}, which this command reads", f"{other}.")
        if not os.path.lexists(path):
            return None
        if os.path.islink(path):
            raise self._refuse(path, "is a symbolic link, and seqkit replaces only files it wrote",
                               f"{other}.")
        if os.path.isdir(path):
            raise self._refuse(path, "is a folder, not a file", f"{other} (a file name).")
        if not written_by_seqkit(path) and not self.overwrite:
            raise self._refuse(path, "exists and was not written by seqkit", f"pass --overwrite to "
                               f"replace it, or {other}.")
        return _signature(path)

    def write(self, writers: dict[str, Callable[[str], None]]) -> None:
        """Write every path: ``writers[path](temporary_path)`` writes the content, then all the
        temporaries are renamed into place (after checking no path changed since the check).

        Missing folders on the way to a path are made first.

        Raises:
            OutputPathError: a path changed (was created or replaced) meanwhile.
            SeqkitError: a folder cannot be made or is not writable, the disk is full (the path
                named).
        """
        missing = set(self.paths) - set(writers)
        if missing:  # a programming error: every named file is written
            raise ValueError(f"no writer for {sorted(missing)}")
        tmps = {p: os.path.join(os.path.dirname(p) or ".", f".{os.path.basename(p)}.{os.getpid()}.tmp")
                for p in self.paths}
        try:
            for p in self.paths:  # a folder the user named that is not there yet is made
                os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
            for p in self.paths:
                writers[p](tmps[p])
            for p in self.paths:
                if _signature(p) != self._seen[p]:
                    raise self._refuse(p, "changed while seqkit was writing its output (another "
                                       "process wrote it)", "run the command again.")
            for p in self.paths:
                os.replace(tmps[p], p)
        except OSError as exc:
            err = write_error(exc, target=self.paths[0]) or resource_error(exc, self.paths[0])
            if err is None:
                raise SeqkitError(f"{self.paths[0]}: cannot write it ({exc}); check that the folder "
                                  f"exists and is writable.") from exc
            raise err from exc
        finally:
            for t in tmps.values():
                try:
                    os.unlink(t)
                except OSError:
                    pass


def picture_outputs(png: str, *, overwrite: bool = False, protect: Iterable[tuple[str, str]] = (),
                    with_json: bool = True, option: str = "--out") -> FileOutputs:
    """The :class:`FileOutputs` of a picture: ``png`` and (``with_json``) the JSON beside it
    (:func:`seqkit.diagnostics.plots.json_path`)."""
    root, ext = os.path.splitext(png)
    paths = [png] + ([(root if ext.lower() == ".png" else png) + ".json"] if with_json else [])
    return FileOutputs(paths, overwrite=overwrite, protect=protect, option=option)


def protected_by_runs(runs: Iterable[str]) -> list[tuple[str, str]]:
    """``[(what, path)]`` the recipes of ``runs`` read: their data and plugin files (the runs'
    own files are refused anyway: :func:`run_dir_holding`)."""
    out = []
    for r in runs:
        try:
            recipe = load_recipe(os.path.join(r, "recipe.yaml"))
        except Exception:  # an unreadable recipe: the command itself reports it
            continue
        out += [(w, p) for w, p in protected_paths(recipe) if w != "the current folder"]
    return out


#: The names an export folder holds (seqkit.export.writer, seq2seq_writer, stateful, portable).
EXPORT_NAMES = frozenset(("model.tflite", "saved_model", "full_sequence_saved_model",
                          "pinned_saved_model", "stateful_saved_model", "tflite_source_saved_model",
                          "metadata.json", "vocab.json", "target_vocab.json", "labels.json",
                          "char_vocab.json", "parity.json", "subword.model", "target_subword.model",
                          "model.keras"))


def check_export_folder(out: str, replacing: bool = False) -> None:
    """Refuse an export folder inside a run directory or a symbolic link, and (``replacing``: an
    existing folder ``--overwrite`` would replace) one holding anything but the files an export
    writes.

    Raises:
        OutputPathError: naming the folder, what is in the way and the fix.
    """
    run = run_dir_holding(os.path.dirname(os.path.abspath(out)) or ".")
    if run is not None:
        raise OutputPathError(f"--out {out}: lies inside the seqkit run directory {run}; an export "
                              f"there would make the run a folder `train --overwrite` no longer "
                              f"replaces. Nothing was written; choose another --out, e.g. "
                              f"exports/{os.path.basename(run)}.")
    if os.path.islink(out):
        raise OutputPathError(f"--out {out}: a symbolic link; seqkit writes exports only into folders "
                              f"it made. Nothing was written; choose another --out.")
    if replacing and os.path.isdir(out):
        from seqkit.runs.lifecycle import foreign_in_export

        other = sorted(n for n in os.listdir(out) if n not in EXPORT_NAMES)
        inner = None if other else foreign_in_export(out)  # below its SavedModel folders
        if inner is not None:
            other = [inner]
        if other:
            shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
            raise OutputPathError(f"--out {out}: holds files an export does not write ({shown}); "
                                  f"--overwrite replaces only an earlier seqkit export, and this "
                                  f"folder is left alone. Nothing was written; choose another --out.")


def export_lock(out: str):
    """The lock of an export folder ``PARENT/NAME``: ``PARENT/.NAME.lock``, the kind training takes
    (:class:`seqkit.runs.lifecycle.RunLock`). Use as a context manager.

    Raises (on entering):
        OutputPathError: another live seqkit process exports into ``out`` (PID, host, lock file).
    """
    def busy(holder: dict, path: str) -> SeqkitError:
        return OutputPathError(
            f"--out {out}: another seqkit export is writing this folder (PID {holder.get('pid', '?')} "
            f"on {holder.get('host', '?')}, since {holder.get('since', '?')}; lock file {path}). Two "
            f"exports into one folder would replace each other: wait for it to finish or stop it, or "
            f"choose another --out. A lock whose process has died is taken over by itself.")

    return RunLock(out, busy=busy)
