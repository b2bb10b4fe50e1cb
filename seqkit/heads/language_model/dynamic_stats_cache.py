"""The RMS rule's gradient statistics, kept in the run directory between evaluations.

:func:`seqkit.heads.language_model.dynamic_eval.gradient_stats` reads the whole training split (46 of the 75-90 s
of ``seqkit evaluate --dynamic`` on the 2-layer ``lm-pydoc-stream`` run). Its result depends only
on the model's weights, the training token stream, its columns and chunk length, and
``max_chunks``, so :func:`cached_gradient_stats` stores it in ``RUN/dynamic_stats.npz``
(:data:`CACHE`) the first time and reuses it while every one of those inputs is unchanged.

The file is plain NumPy arrays (read with ``allow_pickle=False``: loading a run never runs code):

* ``key``: a 0-d string array, the JSON of :func:`stats_key` (what the statistics were taken on);
* ``ms_0 .. ms_{n-1}``: float64 arrays, one per ``model.trainable_variables`` entry.

A file whose key differs is recomputed and replaced; one that cannot be read, or whose arrays do
not match the model, is ignored with a logged warning and replaced. It is written to
a staging file of its own (``dynamic_stats.npz.<pid>.tmp``) and renamed into place; a directory that cannot be written is evaluated
all the same (logged, nothing stored).

The gradient statistics' module (:mod:`seqkit.heads.language_model.dynamic_eval`, which imports
Keras) is imported inside the function that uses it, so importing this module does not load
TensorFlow.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from seqkit import log

#: The cache file's name inside a run directory (one of :data:`seqkit.runs.rundir.RUN_NAMES`).
CACHE = "dynamic_stats.npz"
#: Bumped when the statistics' definition or the file's layout changes (older files are recomputed).
FORMAT = 1


#: the largest mean square of a gradient the cache accepts (a larger one is recomputed, warned)
MAX_MEAN_SQUARE = 1e30


def weights_digest(model) -> str:
    """SHA-256 over every variable of ``model`` (path, shape, dtype, float32/int values in order):
    the weights the statistics are taken with, whichever file they were loaded from."""
    h = hashlib.sha256()
    for w in model.weights:
        v = np.ascontiguousarray(np.asarray(w.numpy()))
        h.update(f"{getattr(w, 'path', w.name)}|{v.shape}|{v.dtype}\n".encode())
        h.update(v.tobytes())
    return h.hexdigest()


def data_fingerprint(data) -> str:
    """A fingerprint of the training token stream ``data`` reads.

    In-memory :class:`~seqkit.data.stream.StreamData`: SHA-256 of its ``[B, L]`` int32 token
    columns (so the text, the vocabulary's ids and the column count are all in it).
    :class:`~seqkit.data.lazy_corpus.LazyStreamData` (``text_corpus``, too large to hash at each
    call): each file's absolute path, size and ``st_mtime_ns``, the tokenizer, lowercasing, the
    vocabulary's tokens and the column count and length.
    """
    h = hashlib.sha256()
    cols = getattr(data, "columns", None)
    if isinstance(cols, np.ndarray):
        c = np.ascontiguousarray(cols, np.int32)
        h.update(f"stream|{c.shape}\n".encode())
        h.update(c.tobytes())
        return h.hexdigest()
    corpus = data.corpus
    files = []
    for p in corpus.paths:
        st = os.stat(p)
        files.append([os.path.abspath(p), st.st_size, st.st_mtime_ns])
    h.update(json.dumps({"files": files, "tokenizer": corpus.tokenizer, "lowercase": corpus.lowercase,
                         "vocab": list(data.vocab.tokens), "columns": data.batch_size,
                         "length": data.length}).encode())
    return h.hexdigest()


def stats_key(model, data, max_chunks) -> dict:
    """What :func:`~seqkit.heads.language_model.dynamic_eval.gradient_stats` ``(model, data, max_chunks)``
    depends on: ``{"format", "weights", "data", "columns", "chunk", "max_chunks", "shapes"}``."""
    return {"format": FORMAT, "weights": weights_digest(model), "data": data_fingerprint(data),
            "columns": int(data.batch_size), "chunk": int(data.bptt),
            "max_chunks": None if max_chunks is None else int(max_chunks),
            "shapes": [list(map(int, w.shape)) for w in model.trainable_variables]}


def _read(path: str, key: dict, shapes: list):
    """The cached arrays, or ``(None, why)``: why not (``None``: no file, silently)."""
    if not os.path.exists(path):
        return None, None
    try:
        with np.load(path, allow_pickle=False) as z:
            saved = json.loads(str(z["key"][()]))
            if saved != key:
                return None, "stale"
            ms = [np.array(z[f"ms_{i}"], np.float64) for i in range(len(shapes))]
            extra = len(z.files) - 1 - len(shapes)
    except Exception as exc:  # a damaged file of any kind: zip, npy header, JSON, missing array
        return None, f"{type(exc).__name__}: {exc}"
    if extra or any(list(m.shape) != s for m, s in zip(ms, shapes)):
        return None, "its arrays do not match the model's weights"
    if not all(np.isfinite(m).all() and (m >= 0).all() for m in ms):
        return None, "it holds a negative or non-finite mean square"
    if any((m > MAX_MEAN_SQUARE).any() for m in ms):  # float32 gradients square to below ~1e30
        return None, f"it holds a mean square above {MAX_MEAN_SQUARE:g}, which no trained model's gradients reach"
    return ms, None


def _write(path: str, key: dict, ms) -> None:
    # a name of its own (the process id): two evaluations of one run at once each stage their own
    # file; the name stays one a run holds (seqkit.runs.rundir.is_run_name)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:  # a file object: np.savez would append .npz to a name
            np.savez(f, key=np.array(json.dumps(key, sort_keys=True)),
                     **{f"ms_{i}": np.asarray(m, np.float64) for i, m in enumerate(ms)})
        os.replace(tmp, path)
    except OSError:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def cached_gradient_stats(model, data, max_chunks: int | None = None, run_dir: str | None = None) -> list:
    """:func:`~seqkit.heads.language_model.dynamic_eval.gradient_stats` ``(model, data, max_chunks)``, kept in
    ``run_dir/`` :data:`CACHE` (module docstring).

    Args:
        model, data, max_chunks: as ``gradient_stats``.
        run_dir: the run directory; None: computed every time, nothing stored.

    Returns:
        One float64 array per ``model.trainable_variables`` entry (equal, bit for bit, to what
        ``gradient_stats`` returned when the file was written).

    Raises:
        ValueError: as ``gradient_stats`` (no training chunk). A cache file that cannot be read or
            written raises nothing (logged).
    """
    from seqkit.heads.language_model import dynamic_eval

    if run_dir is None:
        return dynamic_eval.gradient_stats(model, data, max_chunks)
    path = os.path.join(run_dir, CACHE)
    key = stats_key(model, data, max_chunks)
    ms, why = _read(path, key, key["shapes"])
    if ms is not None:
        log.info(f"dynamic evaluation: gradient statistics read from {path}.")
        return ms
    if why not in (None, "stale"):
        log.warn(f"dynamic evaluation: ignoring the gradient-statistics cache {path} ({why}); "
                 f"computing them again and replacing it.")
    ms = dynamic_eval.gradient_stats(model, data, max_chunks)
    try:
        _write(path, key, ms)
    except OSError as exc:
        log.info(f"dynamic evaluation: the gradient statistics were not stored ({path}: "
                 f"{exc.strerror or exc}); the next call computes them again.")
    return ms
