"""The life of a run directory: one writer at a time, safe replacement, staging.

- **Lock.** A training into ``PARENT/NAME`` holds ``fcntl.flock`` on
  ``PARENT/.NAME.lock`` (it holds the holder's PID and host, and is removed when
  the holder ends; the kernel releases a dead process's lock, and the next
  training takes it over). A second training into the same directory fails at
  once (:class:`RunLock`).
- **What may be replaced.** Only a seqkit run (see
  :func:`seqkit.runs.rundir.not_a_run_because`) or an empty folder, and never the
  current folder, a home directory, or a folder holding the recipe, a data file,
  a plugin file or the current folder (:func:`check_target`).
- **Staging.** A new run trains in ``PARENT/.NAME.staging-PID`` and takes the
  name ``NAME`` only once its first epoch is saved (:class:`Staging`): the
  previous run is renamed to ``PARENT/.NAME.old-PID``, the staging folder to
  ``NAME``, and the old run is deleted. A run that fails before that leaves the
  previous one as it was.
- **Leftovers.** Staging / old folders of processes that have died are removed
  (an old run whose replacement never took its name is put back) by the next
  training into the same parent folder (:func:`remove_stale`); the same goes for
  ``OUT.partial-PID`` folders of interrupted exports (:func:`remove_stale_exports`).

The POSIX-only modules fcntl and pwd are imported where used, behind ``except ImportError``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import time

from seqkit import log
from seqkit.errors import RunDirError
from seqkit.runs.rundir import foreign_in_run, foreign_in_tree, not_a_run_because

STAGED = re.compile(r"^\.(?P<name>.+)\.(?P<kind>staging|old)-(?P<pid>\d+)$")
EXPORT_PARTIAL = re.compile(r"^(?P<name>.+)\.partial-(?P<pid>\d+)$")
EXPORT_NAMES = frozenset(("model.tflite", "saved_model", "full_sequence_saved_model", "pinned_saved_model",
                          "metadata.json", "vocab.json", "target_vocab.json", "labels.json", "parity.json"))


def split_run_path(run_path: str) -> tuple[str, str]:
    """``(parent, name)`` of a run directory path (``runs/x/`` -> ``("runs", "x")``)."""
    path = os.path.abspath(run_path)
    return os.path.dirname(path), os.path.basename(path)


def lock_path(run_path: str) -> str:
    """``PARENT/.NAME.lock``: the lock file of the run directory ``PARENT/NAME``."""
    parent, name = split_run_path(run_path)
    return os.path.join(parent, f".{name}.lock")


def pid_alive(pid: int) -> bool:
    """True when a process ``pid`` exists on this machine (this process included)."""
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


class RunLock:
    """An exclusive ``flock`` on ``PARENT/.NAME.lock`` for the run directory ``PARENT/NAME``.

    Use as a context manager, or :meth:`acquire` / :meth:`release`.
    """

    def __init__(self, run_path: str, busy=None):
        self.run_path = run_path
        self.path = lock_path(run_path)
        self.fd = None
        self.made = []
        self.busy = busy  # (holder dict, lock path) -> the error to raise; None: training's message

    def acquire(self) -> "RunLock":
        """Take the lock (creating the parent folder), or fail at once.

        Raises:
            RunDirError: another live process holds it (the message names the directory,
                the holder's PID and host).
        """
        try:
            import fcntl
        except ImportError:  # not a POSIX system: no lock (and no second-writer check)
            log.warn(f"{self.run_path}: this system has no fcntl; a second training into the same "
                     f"run directory is not prevented.")
            return self
        parent = os.path.dirname(self.path)
        self.made = []  # folders this lock created (removed again on release when left empty)
        while not os.path.isdir(parent) and parent != os.path.dirname(parent):
            self.made.append(parent)
            parent = os.path.dirname(parent)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        while True:
            try:  # O_NOFOLLOW: a lock path planted as a symbolic link is refused, never written through
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            except OSError as exc:
                if os.path.islink(self.path):
                    raise RunDirError(f"{self.path}: the lock file of {self.run_path} is a symbolic link, "
                                      f"which seqkit never writes through. Remove the link (it is not "
                                      f"seqkit's), or choose another folder.") from exc
                raise
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                if self.busy is not None:
                    raise self.busy(holder, self.path) from None
                raise RunDirError(
                    f"{self.run_path}: another seqkit training is writing this run directory "
                    f"(PID {holder.get('pid', '?')} on {holder.get('host', '?')}, since "
                    f"{holder.get('since', '?')}; lock file {self.path}). Two trainings into one "
                    f"directory would overwrite each other's checkpoints: wait for it to finish or stop "
                    f"it, or pass another --run-dir. A lock whose process has died is taken over "
                    f"by itself.") from None
            try:  # the file we locked must still be the one at the path (a holder unlinks it on release)
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "since": time.strftime("%Y-%m-%d %H:%M:%S")}).encode())
        self.fd = fd
        return self

    def release(self) -> None:
        """Remove the lock file and release the lock (a no-op when not held)."""
        if self.fd is None:
            return
        try:
            os.unlink(self.path)  # while still holding it: a waiter that opened it retries
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = None
        for folder in self.made:  # deepest first; a folder that holds something stays
            try:
                os.rmdir(folder)
            except OSError:
                break
        self.made = []

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def _read_holder(fd: int) -> dict:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return json.loads(os.read(fd, 4096).decode() or "{}")
    except (OSError, ValueError):
        return {}


def _lock_is_held(path: str) -> bool:
    """True when some process holds the flock on ``path`` (False when there is no such file)."""
    try:
        import fcntl
    except ImportError:
        return False

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken just now


def _homes() -> set[str]:
    homes = {os.path.realpath(os.path.expanduser("~"))}
    try:
        import pwd

        homes |= {os.path.realpath(p.pw_dir) for p in pwd.getpwall() if p.pw_dir not in ("", "/")}
    except (ImportError, OSError):
        pass
    return homes


def protected_paths(recipe) -> list[tuple[str, str]]:
    """``[(what, path)]`` that a run directory must never be or hold: the current folder, the
    recipe file, the data files and folders (:func:`seqkit.recipe.data_path_keys`), the plugin
    files, and the files and runs a head reads (its ``path_keys``, ``run_keys``)."""
    out = [("the current folder", os.getcwd())]
    src = getattr(recipe, "path", None)
    if src and os.path.exists(src):
        out.append(("the recipe file", src))
    from seqkit.recipe import data_path_keys, path_values

    opts = getattr(recipe, "data_options", None)
    for key in data_path_keys(opts) if opts is not None else ():
        what = "the data folder" if key.endswith("_dir") else "the data file"  # tfds's data_dir
        for val in path_values(getattr(opts, key, None)):
            out.append((f"{what} (data.{key})", val))
    for spec in getattr(recipe, "plugins", None) or []:
        if isinstance(spec, str) and spec.endswith(".py"):
            out.append(("the plugin file", spec))
    head = getattr(recipe, "head_options", None)
    keys = [(k, "a file the recipe reads") for k in getattr(type(head), "path_keys", ())] + \
        [(k, "a run the recipe reads") for k in getattr(type(head), "run_keys", ())]  # e.g. teachers
    for dotted, what in keys:
        val = head
        for part in dotted.split("."):
            val = getattr(val, part, None)
        for path in path_values(val):
            out.append((f"{what} (head.{dotted})", path))
    return out


def check_target(run_path: str, recipe, overwrite: bool) -> str:
    """Decide whether a new run may be written to ``run_path``.

    Returns:
        ``"absent"``, ``"empty"`` (an empty folder: it is replaced) or ``"run"`` (a seqkit run that
        ``overwrite`` allows to replace).

    Raises:
        RunDirError: ``run_path`` is not a folder, is a symbolic link, is the current folder, a home
            directory, or holds the recipe, a data file, a plugin file or the current folder; is a
            folder that is not a seqkit run; or is a run and ``overwrite`` is false.
    """
    if STAGED.match(os.path.basename(os.path.abspath(run_path))):
        raise RunDirError(f"{run_path}: names like .NAME.staging-PID and .NAME.old-PID are seqkit's own "
                          f"staging folders (removed once their process has ended); pass another --run-dir.")
    if not os.path.lexists(run_path):
        return "absent"
    why = None
    if os.path.islink(run_path):
        why = "it is a symbolic link; seqkit writes runs only into folders it made"
    elif not os.path.isdir(run_path):
        why = "it is a file, not a folder"
    if why is None:
        real = os.path.realpath(run_path)
        if real in _homes():
            why = "it is a home directory"
        for what, p in protected_paths(recipe):
            rp = os.path.realpath(p)
            if rp == real or rp.startswith(real.rstrip(os.sep) + os.sep):
                why = (f"it is {what}" if rp == real else f"it holds {what} ({p})")
                break
    if why:
        raise RunDirError(f"{run_path}: cannot be a run directory: {why}, and seqkit replaces only run "
                          f"directories of its own. Nothing was changed; pass another --run-dir "
                          f"(runs go to runs/NAME by default).")
    if not os.listdir(run_path):
        return "empty"
    why = not_a_run_because(run_path)
    if why:
        raise RunDirError(f"{run_path}: exists and is not a seqkit run directory ({why}); seqkit "
                          f"writes a run only into a new or empty folder and, with --overwrite, replaces "
                          f"only an earlier run (recipe.yaml, state.json and the files seqkit writes). "
                          f"Nothing was changed; pass another --run-dir.")
    if not overwrite:
        raise RunDirError(f"{run_path}: the run directory exists already. Pass --overwrite to "
                          f"replace it, --resume to continue it, or --run-dir for a new one.")
    return "run"


class Staging:
    """A new run trained in ``PARENT/.NAME.staging-PID``, renamed to ``PARENT/NAME`` by :meth:`promote`.

    Attributes:
        path: the staging folder.
        target: the run directory it becomes.
        promoted: :meth:`promote` has run.
    """

    def __init__(self, run_path: str):
        name = split_run_path(run_path)[1]
        self.target = os.path.normpath(run_path)
        self.path = os.path.join(os.path.dirname(self.target), f".{name}.staging-{os.getpid()}")
        self.aside = os.path.join(os.path.dirname(self.target), f".{name}.old-{os.getpid()}")
        self.promoted = False

    def create(self) -> str:
        """Make the (fresh) staging folder; returns its path.

        Raises:
            OSError: the parent folder is not writable.
        """
        shutil.rmtree(self.path, ignore_errors=True)
        os.makedirs(self.path)
        return self.path

    def promote(self, callbacks=(), run=None) -> None:
        """Give the staging folder the run's name; delete the run it replaces.

        Callbacks that hold paths inside the staging folder (TensorBoard's log dir,
        BackupAndRestore's folder) are pointed at the same paths in the run directory
        (TensorBoard's writers are closed first; it opens new ones there); ``run``
        (a :class:`~seqkit.runs.rundir.RunDir`) gets the new path.

        Raises:
            RunDirError: the target changed meanwhile into something that is not a seqkit
                run or an empty folder (it is left alone).
            OSError: a rename failed (the previous run is renamed back first).
        """
        if os.path.lexists(self.target):
            empty = (os.path.isdir(self.target) and not os.path.islink(self.target)
                     and not os.listdir(self.target))
            why = None if empty else not_a_run_because(self.target)
            if why:
                raise RunDirError(f"{self.target}: changed while the new run trained ({why}); it is "
                                  f"left alone and the new run is dropped. Pass another --run-dir.")
        _close_tensorboard(callbacks)
        replaced = os.path.lexists(self.target)
        if replaced:
            os.rename(self.target, self.aside)
        try:
            os.rename(self.path, self.target)
        except BaseException:
            if replaced:
                os.rename(self.aside, self.target)
            raise
        self.promoted = True
        _retarget(callbacks, self.path, self.target)
        if run is not None:
            run.path = self.target
        if replaced:
            shutil.rmtree(self.aside, ignore_errors=True)

    def discard(self) -> None:
        """Remove the staging folder (the run directory is untouched)."""
        if not self.promoted:
            shutil.rmtree(self.path, ignore_errors=True)


def _close_tensorboard(callbacks) -> None:
    for cb in callbacks:
        if hasattr(cb, "_close_writers") and hasattr(cb, "_writers"):
            cb._close_writers()
            cb._writers = {}  # reopened lazily, under the new log dir


def _retarget(callbacks, old: str, new: str) -> None:
    for cb in callbacks:
        for key, val in list(vars(cb).items()):
            if isinstance(val, str) and (val == old or val.startswith(old + os.sep)):
                setattr(cb, key, new + val[len(old):])


def _only(path: str, allowed) -> bool:
    try:
        return all(allowed(n) for n in os.listdir(path))
    except OSError:
        return False


def remove_stale(parent: str, own_name: str | None = None) -> list[str]:
    """Remove ``.NAME.staging-PID`` and ``.NAME.old-PID`` folders in ``parent`` left by dead processes.

    Only folders of that name whose PID is not alive, whose ``.NAME.lock`` nobody holds
    (``own_name``: the caller holds that lock) and that hold nothing but run files are touched.
    An ``.old`` folder whose run directory is missing (its replacement was cut off between the
    two renames) is renamed back to ``NAME`` instead of being removed.

    Returns:
        The paths removed or restored (a folder that cannot be removed is warned about, not raised).
    """
    done = []
    try:
        entries = os.listdir(parent)
    except OSError:
        return done
    for entry in entries:
        m = STAGED.match(entry)
        path = os.path.join(parent, entry)
        if not m or os.path.islink(path) or not os.path.isdir(path) or pid_alive(int(m["pid"])):
            continue
        name = m["name"]
        if name != own_name and _lock_is_held(os.path.join(parent, f".{name}.lock")):
            continue
        if foreign_in_run(path) is not None:
            continue  # not only a run's files, at any depth: someone else's folder, left alone
        target = os.path.join(parent, name)
        try:
            if m["kind"] == "old" and not os.path.lexists(target):
                os.rename(path, target)
                log.warn(f"{target}: put back (a replacement by process {m['pid']} was cut off).")
            else:
                shutil.rmtree(path)
                log.info(f"removed {path}, left by process {m['pid']} that has ended.")
        except OSError as exc:  # a clean-up that fails does not stop the training
            log.warn(f"{path}: could not tidy up ({exc}).")
            continue
        done.append(path)
    return done


def _saved_model_file(name: str) -> bool:
    """A file TensorFlow writes into a SavedModel folder (``saved_model.pb``, ``fingerprint.pb``,
    ``variables/variables.*``, ``assets/...`` -- an export's assets are its vocabulary files)."""
    return (name in ("saved_model.pb", "fingerprint.pb", "keras_metadata.pb")
            or name.startswith("variables.") or name in EXPORT_NAMES or name.endswith(".txt"))


def foreign_in_export(path: str) -> str | None:
    """The first entry below an export folder's subfolders (its SavedModels) that a SavedModel
    does not hold, or a symbolic link, or None (:func:`seqkit.runs.rundir.foreign_in_tree`)."""
    for n in sorted(os.listdir(path)):
        p = os.path.join(path, n)
        if os.path.islink(p):
            return n
        if os.path.isdir(p):
            inner = foreign_in_tree(p, _saved_model_file)
            if inner is not None:
                return os.path.join(n, inner)
    return None


def remove_stale_exports(parent: str) -> list[str]:
    """Remove ``OUT.partial-PID`` folders in ``parent`` of exports whose process has died (only
    folders holding nothing but export files).

    Returns:
        The paths removed.
    """
    done = []
    try:
        entries = os.listdir(parent or ".")
    except OSError:
        return done
    for entry in entries:
        m = EXPORT_PARTIAL.match(entry)
        path = os.path.join(parent, entry)
        if (not m or os.path.islink(path) or not os.path.isdir(path) or pid_alive(int(m["pid"]))
                or not _only(path, lambda n: n in EXPORT_NAMES or n.endswith(".tmp"))
                or foreign_in_export(path) is not None):
            continue
        shutil.rmtree(path, ignore_errors=True)
        log.info(f"removed {path}, left by an export (process {m['pid']}) that has ended.")
        done.append(path)
    return done

