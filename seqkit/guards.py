"""Checks that turn a user's mistake into one clear paragraph instead of an "internal error".

* :func:`check_model_fits`: estimate a recipe's parameter count before building the model and
  refuse one that cannot fit in memory (``--set model.units=2000000000``).
* :func:`build_model`: build the head's model; out-of-memory while building (plugin cells, whose
  size seqkit cannot estimate) and a plugin cell whose ``call`` raises become a
  :class:`~seqkit.errors.SeqkitError` naming the plugin, where it came from and the shapes.
* :func:`check_model_matches`: a ``model.keras`` copied in from another run (weight shapes that
  differ from the run's recipe and vocabularies) is a :class:`~seqkit.errors.RunDirError`.
* :func:`write_error`: a ``PermissionError`` / read-only file system on a path, as a message.

TensorFlow, Keras and the seqkit modules that import them and NumPy are imported inside the
functions that use them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import errno
import inspect
import os
import sys
import tempfile
from collections import Counter

from seqkit.cells.base import CellSpec
from seqkit.errors import RunDirError, SeqkitError
from seqkit.registry import CELLS, DATA, HEADS

BYTES_PER_PARAMETER = 16  # float32: the weight, its gradient, Adam's two moment slots (4 bytes each)


def memory_bytes() -> int | None:
    """This machine's physical memory in bytes (``None`` when the OS does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):  # pragma: no cover - not POSIX
        return None


def _gib(n: float) -> str:
    """Bytes as ``12.5 GiB`` (``TiB``, ``PiB``, ``EiB`` for more; then ``1.2e+24 bytes``)."""
    for unit, power in (("GiB", 30), ("TiB", 40), ("PiB", 50), ("EiB", 60)):
        if n < 1024 * 2**power or unit == "EiB" and n < 1e6 * 2**60:
            return f"{n / 2**power:,.1f} {unit}"
    return f"{n:.2g} bytes"


def _count(n: int) -> str:
    """``1,234,567`` parameters, or ``1.6e+19`` for counts no one reads digit by digit."""
    return f"{n:,}" if n < 10**12 else f"{n:.2g}"


def estimate_parameters(prep) -> int | None:
    """A lower bound of the model's parameter count from the recipe and the head's vocabularies.

    Counts the input embedding, the encoder stack of a built-in cell (``None`` for a plugin cell
    that does not implement :meth:`~seqkit.cells.base.CellPlugin.parameter_count`), the output
    layer, and for seq2seq the target embedding and the decoder cells.
    """
    recipe, head = prep.recipe, prep.head
    cfg = recipe.model
    try:  # as seqkit.layers.stack.make_plugin, without its fast-path warning
        plugin = CELLS.get(cfg.cell)(CellSpec(units=cfg.units, options=recipe.cell_options))
    except Exception:  # the build reports it
        return None
    vocab = getattr(head, "vocab", None)
    width = getattr(getattr(head, "inputs", None), "width", 0) or 0
    total = len(vocab) * cfg.embedding_dim if vocab is not None else 0
    d = cfg.embedding_dim if vocab is not None else (width or cfg.embedding_dim)
    per_direction = 2 if cfg.bidirectional else 1
    for _ in range(cfg.layers):
        n = plugin.parameter_count(d)
        if n is None:
            return None
        total += per_direction * n
        d = per_direction * cfg.units
    target = getattr(head, "target_vocab", None)
    labels = getattr(head, "labels", None)
    if target is not None:  # seq2seq: target embedding, decoder cells (input at least E), logits
        t = len(target)
        total += t * cfg.embedding_dim + cfg.layers * (plugin.parameter_count(cfg.embedding_dim) or 0)
        total += cfg.units * t + t
    elif labels is not None:
        total += d * len(labels) + len(labels)
    elif vocab is not None:
        total += d * len(vocab) + len(vocab)
    return total


def _too_large(n: int, memory: int, how: str) -> SeqkitError:
    return SeqkitError(
        f"model: this recipe needs {how}{_count(n)} parameters: {_gib(4 * n)} of float32 weights and "
        f"about {_gib(BYTES_PER_PARAMETER * n)} to train them (weights, gradients and Adam's two "
        f"moment slots, {BYTES_PER_PARAMETER} bytes per parameter), more than this machine's "
        f"{_gib(memory)} of memory. Lower model.units (and model.layers, model.embedding_dim, "
        f"data.max_vocab), e.g. --set model.units=256.")


def check_model_fits(prep) -> None:
    """Refuse a model whose estimated training memory exceeds this machine's memory.

    Raises:
        SeqkitError: the estimate (parameters, float32 bytes, bytes with Adam's slots) and the fix.
    """
    n = estimate_parameters(prep)
    memory = memory_bytes()
    if n is None or memory is None:
        return
    if n * BYTES_PER_PARAMETER > memory:
        raise _too_large(n, memory, "about " if n else "")


def _plugin_entry(name: str):
    try:
        entry = CELLS.entry(name)
    except Exception:
        return None
    return None if entry.origin == "seqkit (built in)" else entry


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    try:
        import tensorflow as tf

        return isinstance(exc, tf.errors.ResourceExhaustedError)
    except ImportError:  # pragma: no cover
        return False


def _shapes(value) -> str:
    """``[2, 8]`` for a tensor, ``([2, 8], [2, 8])`` for a list of them, ``?`` otherwise."""
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_shapes(v) for v in value) + ")"
    shape = getattr(value, "shape", None)
    if shape is None:
        return "?"
    return "[" + ", ".join("None" if s is None else str(s) for s in tuple(shape)) + "]"


def _plugin_sources(entry) -> tuple[str, ...]:
    """The plugin's source file, or its top-level package folder (all of its modules)."""
    top = (getattr(entry.obj, "__module__", "") or "").split(".")[0]
    package = sys.modules.get(top)
    folders = [os.path.realpath(p) + os.sep for p in getattr(package, "__path__", None) or []]
    if folders:
        return tuple(folders)
    try:
        return (os.path.realpath(inspect.getsourcefile(entry.obj) or ""),)
    except TypeError:
        return ()


def _plugin_frame(exc: BaseException, entry):
    """The innermost traceback frame of ``exc`` in the plugin's own code (or ``None``)."""
    sources = _plugin_sources(entry)
    if not sources:
        return None
    found, seen = None, set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        tb = exc.__traceback__
        while tb is not None:
            name = os.path.realpath(tb.tb_frame.f_code.co_filename)
            if any(name == s or (s.endswith(os.sep) and name.startswith(s)) for s in sources):
                found = tb.tb_frame
            tb = tb.tb_next
        if found is not None:
            return found
        exc = exc.__cause__ or exc.__context__
    return None


def plugin_cell_error(exc: BaseException, cell: str, expected_input: str = "") -> SeqkitError | None:
    """A :class:`SeqkitError` for an exception raised inside the plugin cell ``cell`` (else ``None``).

    The message names the cell, the file or package it came from, the shapes its ``call`` was
    given (read from the failing frame) and the error.
    """
    entry = _plugin_entry(cell)
    if entry is None:
        return None
    frame = _plugin_frame(exc, entry)
    if frame is None:
        return None

    code = frame.f_code
    args = inspect.getargvalues(frame)
    given = ", ".join(f"{a} {_shapes(args.locals[a])}" for a in args.args[1:] if a in args.locals
                      and _shapes(args.locals[a]) != "?")
    first = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return SeqkitError(
        f"model.cell: the plugin cell '{cell}' from {entry.origin} failed in {code.co_name}() "
        f"({code.co_filename}:{frame.f_lineno})"
        + (f" given {given}" if given else "")
        + (f"; seqkit expects {expected_input}" if expected_input else "")
        + f": {' '.join(line.strip() for line in first[:3])[:600].rstrip('.')}. The cell's code has the bug, "
        f"or the recipe's model keys do not suit it: check the plugin (its author or "
        f"`seqkit list cells`), or use a built-in cell (model.cell: lstm, gru or simple_rnn).")


def plugin_code_error(exc: BaseException, entry, kind: str, key: str) -> SeqkitError | None:
    """A :class:`SeqkitError` for an exception raised inside the code of the plugin ``entry``
    (a head or data source registered by a package or a ``--plugin`` file), else ``None``.

    The message names the plugin, where it came from, the function and line that raised and the
    error, and says where the fault lies: the plugin's code, or what it reads (the recipe's keys,
    the data, the files it keeps in a run).
    """
    frame = _plugin_frame(exc, entry)
    if frame is None:
        return None
    code = frame.f_code
    first = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return SeqkitError(
        f"{key}: the plugin {kind} '{entry.name}' from {entry.origin} failed in {code.co_name}() "
        f"({code.co_filename}:{frame.f_lineno}): "
        f"{' '.join(line.strip() for line in first[:3])[:600].rstrip('.')}. The plugin's code has the "
        f"bug, or what it reads does not suit it (the recipe's keys, the data, or the files it "
        f"keeps in the run): check the plugin (its author, or `seqkit list`).")


def _expected_cell_io(prep) -> str:
    cfg, head = prep.recipe.model, prep.head
    d = cfg.embedding_dim if getattr(head, "vocab", None) is not None else (
        getattr(getattr(head, "inputs", None), "width", 0) or cfg.embedding_dim)
    try:
        n_states = len(CELLS.get(cfg.cell).state_names)
    except Exception:
        n_states = 1
    return (f"inputs [batch, {d}] (layer 0; [batch, {cfg.units}] above it), states "
            f"{n_states} x [batch, {cfg.units}], returning outputs [batch, {cfg.units}] and the states")


def build_model(prep):
    """``prep.head.build_model()`` after :func:`check_model_fits`; user errors as SeqkitError.

    Raises:
        SeqkitError: too large a model (estimated, or out of memory while building), or a plugin
            cell that raised while the model was built (named, with its origin and shapes).
    """
    check_model_fits(prep)
    cell = prep.recipe.model.cell
    try:
        model = prep.head.build_model()
        if _plugin_entry(cell) is not None:
            check_plugin_cells(model, cell)
        return model
    except SeqkitError:
        raise
    except Exception as exc:
        if _is_oom(exc):
            memory = memory_bytes() or 0
            entry = _plugin_entry(cell)
            who = f"the plugin cell '{cell}' from {entry.origin}" if entry else f"the cell '{cell}'"
            raise SeqkitError(
                f"model: building the model with {who} ran out of memory ({type(exc).__name__}; "
                f"model.units={prep.recipe.model.units}, model.layers={prep.recipe.model.layers}, "
                f"model.embedding_dim={prep.recipe.model.embedding_dim}); training needs about "
                f"{BYTES_PER_PARAMETER} bytes per parameter and this machine has "
                f"{_gib(memory)}. Lower model.units (and model.layers, model.embedding_dim), e.g. "
                f"--set model.units=256.") from exc
        err = plugin_cell_error(exc, cell, _expected_cell_io(prep))
        if err is not None:
            raise err from exc
        raise


def check_plugin_cells(model, cell: str) -> None:
    """Call each recurrent layer's cell of ``model`` once, on zeros, and check it keeps the cell
    contract (:class:`seqkit.cells.base.CellPlugin`): ``call(x [1, D], states [1, s] per entry of
    state_size) -> (y [1, output_size], new states of the same sizes)``. A cell that breaks it
    would fail later inside Keras's loop, far from its code.

    Raises:
        SeqkitError: names the plugin cell, where it came from, what it declared and returned.
    """
    import numpy as np

    from seqkit.layers.stack import recurrent_layers

    entry = _plugin_entry(cell)
    for layer in recurrent_layers(model):
        c = getattr(layer, "cell", None)
        x_in = layer.input[0] if isinstance(layer.input, (list, tuple)) else layer.input
        if c is None or x_in is None:
            continue
        sizes = list(c.state_size) if isinstance(c.state_size, (list, tuple)) else [c.state_size]
        x = np.zeros((1, int(x_in.shape[-1])), "float32")
        y, new = c(x, [np.zeros((1, int(s)), "float32") for s in sizes], training=False)
        new = list(new) if isinstance(new, (list, tuple)) else [new]
        got = [int(s.shape[-1]) for s in new]
        out = getattr(c, "output_size", None)
        if got != [int(s) for s in sizes] or (out is not None and int(y.shape[-1]) != int(out)):
            raise SeqkitError(
                f"model.cell: the plugin cell '{cell}' from {entry.origin if entry else 'a plugin'} "
                f"breaks the cell contract in layer {layer.name}: it declares state_size {sizes} and "
                f"output_size {out}, but one call returned new states of sizes {got} and an output "
                f"of size {int(y.shape[-1])}. Each new state must have the size state_size declares "
                f"for it, and the output the size of output_size (docs/cells.md, section 1): fix "
                f"the cell's state_size / output_size or what its call returns.")


def check_model_matches(prep, model, path: str, *, given: str | None = None) -> None:
    """Refuse a loaded model whose weight shapes differ from what the run's recipe builds.

    A ``model.keras`` copied in from another run loads (it carries its own architecture) but does
    not fit this run's vocabularies and recipe. The expected shapes come from building the
    recipe's model (weights only, no optimizer), skipped when that would not fit in memory.

    ``given``: the model was handed over by the caller named so (``"Run.from_model"``), not read
    from a run: the message says the model does not fit the recipe, and how to build one that does.

    Raises:
        RunDirError: names the file, the first weights that differ (expected vs found), the fix.
        SeqkitError: (``given``) the same, naming the caller and the recipe instead of a file.
    """
    import numpy as np

    n = sum(int(np.prod(w.shape)) for w in model.weights)
    memory = memory_bytes()
    if memory is not None and n * 8 > memory:
        return
    try:
        expected = prep.head.build_model()
    except Exception:  # the recipe does not build here: leave the loaded model as it is
        return

    want = Counter(tuple(int(d) for d in w.shape) for w in expected.weights)
    found = [(w.path, tuple(int(d) for d in w.shape)) for w in model.weights]
    del expected
    if want == Counter(shape for _, shape in found):  # order and auto-names may differ: shapes only
        return
    left, odd = Counter(want), []
    for name, shape in found:
        if left[shape] > 0:
            left[shape] -= 1
        else:
            odd.append(f"{name} {list(shape)}")
    missing = [list(shape) for shape, k in left.items() for _ in range(k)]
    more = lambda items: " and more" if len(items) > 3 else ""  # noqa: E731
    diffs = [f"its weights {', '.join(odd[:3]) + more(odd) if odd else '(all of them)'} do not fit; "
             f"this run's recipe and vocabularies need weights of shapes "
             f"{', '.join(str(m) for m in missing[:3]) + more(missing) if missing else '(fewer)'}"]
    if given is not None:
        raise SeqkitError(
            f"{given}: the model does not fit the recipe '{prep.recipe.name}': {'; '.join(diffs)}. "
            f"Build the model with seqkit.build(recipe), or make the recipe's model keys (model.cell, "
            f"model.units, model.layers, model.embedding_dim, ...) describe yours. Nothing was written.")
    run = os.path.dirname(path) or "."
    raise RunDirError(
        f"{path}: this model does not belong to the run in {run}: {'; '.join(diffs)}. It was "
        f"probably copied in from another run. Copy that run's whole directory instead, put this "
        f"run's own {os.path.basename(path)} back, or train again.")


def write_error(exc: OSError, command: str = "", target: str | None = None) -> SeqkitError | None:
    """A message for a permission error / read-only file system on a path (else ``None``).

    ``target``: the path the command was asked to write, when ``exc`` concerns a folder above it.
    """
    if not (isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)):
        return None
    path = exc.filename or "a file"
    folder = path if os.path.isdir(path) else os.path.dirname(path) or "."
    elsewhere = {"train": "or write the run elsewhere with --run-dir DIR",
                 "export": "or write the export elsewhere with --out DIR",
                 "attention": "or write the picture elsewhere with --out FILE",
                 "resume": "or copy the run to a writable folder and resume that copy"}.get(
        command, "or choose another path")
    where = f"{target}: cannot write it: {path}" if target and target != path else f"{path}"
    return SeqkitError(
        f"{where}: permission denied ({exc.strerror or exc}). Make {folder} writable by you "
        f"(e.g. chmod u+rwx {folder}; a read-only file system has to be remounted), {elsewhere}.")


class ResourceError(SeqkitError, OSError):
    """The machine ran out of something while seqkit wrote or computed: disk space (``ENOSPC``,
    ``EDQUOT``), the file-size limit (``EFBIG``, ``ulimit -f``) or memory (``MemoryError``)."""


_RESOURCE_FIX = {
    errno.ENOSPC: ("the disk is full", "free space on that disk (or write elsewhere: --run-dir / --out)"),
    errno.EDQUOT: ("the disk quota is used up", "free space in your quota (or write elsewhere: --run-dir / --out)"),
    errno.EFBIG: ("the file would pass this process's file-size limit (ulimit -f)",
                  "raise the limit (`ulimit -f unlimited`) or write smaller files (a smaller model, "
                  "fewer examples)"),
}


def resource_error(exc: BaseException, target: str | None = None, *,
                   loading: bool = False) -> "ResourceError | None":
    """A :class:`ResourceError` for disk full, file-size limit or out of memory (else ``None``).

    Args:
        exc: the exception (``OSError`` with errno ``ENOSPC`` / ``EDQUOT`` / ``EFBIG``, or
            ``MemoryError``).
        target: the path the command was writing, named when ``exc`` carries none.
        loading: ``target`` is a model being loaded (Keras unpacks a ``.keras`` archive into
            temporary files, which is what failed); the message says so and names ``target``.

    The message says that files seqkit was writing were staged and are left as they were.
    """
    if isinstance(exc, MemoryError):
        what = f" while working on {target}" if target else ""
        return ResourceError(
            f"{target or 'seqkit'}: this machine ran out of memory{what} (MemoryError). Nothing "
            f"half-written was kept. Use smaller inputs or a smaller model (model.units, "
            f"training.batch_size, data.max_length), or a machine with more memory.")
    if not isinstance(exc, OSError) or exc.errno not in _RESOURCE_FIX:
        return None
    why, fix = _RESOURCE_FIX[exc.errno]
    if loading:
        return ResourceError(
            f"{target}: cannot load the model: Keras unpacks it into temporary files, and writing "
            f"them failed: {why} ({exc.strerror or exc}). The file itself is as it was. To go on, "
            f"{fix}, then run the command again.")
    path = exc.filename or target or "a file"
    return ResourceError(
        f"{path}: cannot write it: {why} ({exc.strerror or exc}). seqkit writes every file under "
        f"a temporary name and renames it when complete, so the files there before are as they "
        f"were and nothing half-written was kept. To go on, {fix}, then run the command again.")


def check_writable(path: str, command: str) -> None:
    """Fail fast, before any work, when ``path`` (a folder to write, or its nearest existing
    parent) cannot be written: a probe folder is made there and removed.

    Raises:
        SeqkitError: :func:`write_error`'s message (names the path and the fix).
    """
    folder = os.path.abspath(path)
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        return  # a file in the way: the command itself says so
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".seqkit-write-check-", dir=folder))
    except OSError as exc:
        exc.filename = folder
        err = write_error(exc, command, target=path)
        if err is None:
            raise
        raise err from exc


def user_error(exc: BaseException, command: str = "") -> SeqkitError | None:
    """The user's mistake behind an unexpected exception, as a SeqkitError (else ``None``).

    Disk full, a file-size limit or out of memory (:func:`resource_error`), a permission error
    on a path (:func:`write_error`), or an exception raised inside a registered
    plugin cell's code (:func:`plugin_cell_error`; e.g. while training) or a plugin head's or
    data source's (:func:`plugin_code_error`).
    """
    err = resource_error(exc)  # disk full, file-size limit, out of memory
    if err is not None:
        return err
    if isinstance(exc, OSError):
        err = write_error(exc, command)
        if err is not None:
            return err
    try:
        names = [e.name for e in CELLS.entries() if e.origin != "seqkit (built in)"]
    except Exception:  # pragma: no cover
        return None
    for name in names:
        err = plugin_cell_error(exc, name)
        if err is not None:
            return err
    for registry, kind, key in ((HEADS, "head", "head.type"), (DATA, "data source", "data.source")):
        try:
            entries = [e for e in registry.entries() if e.origin != "seqkit (built in)"]
        except Exception:  # pragma: no cover
            continue
        for entry in entries:
            err = plugin_code_error(exc, entry, kind, key)
            if err is not None:
                return err
    return None
