"""Where a run's figures came from: software versions and the machine, recorded in ``metrics.json``.

A figure moves with the code (float rounding of a kernel, a reseeded dropout) and can move
with the CPU (vector extensions change the order of floating-point sums), so every run
records, under ``metrics["machine"]``, the versions that trained it and the CPU it ran on.
``bench/machine.py`` (benchmarks) reads the CPU the same way.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version

from seqkit.plugins import PLUGINS, provenance
from seqkit.runs.rundir import atomic_write_json

#: x86 vector extensions worth naming beside a figure, as ``/proc/cpuinfo`` spells them.
FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


def _cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def cpu_flags(cpuinfo: str | None = None) -> dict[str, bool]:
    """The vector extensions of :data:`FLAGS` the CPU reports.

    Args:
        cpuinfo: the text of ``/proc/cpuinfo`` (read from the file when None).

    Returns:
        ``{flag: bool}`` for every name in :data:`FLAGS` (all False where the
        file is missing or has no ``flags`` line, e.g. not Linux/x86).
    """
    if cpuinfo is None:
        cpuinfo = _cpuinfo()
    have: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            have = set(line.split(":", 1)[1].split())
            break
    return {f: f in have for f in FLAGS}


def cpu_kind(flags: dict[str, bool]) -> str:
    """``"avx512"`` (avx512f), ``"avx2"`` (avx2 and fma, no avx512f) or ``"other"``."""
    if flags.get("avx512f"):
        return "avx512"
    if flags.get("avx2") and flags.get("fma"):
        return "avx2"
    return "other"


def cpu_model(cpuinfo: str | None = None) -> str:
    """The first ``model name`` of ``/proc/cpuinfo`` (else :func:`platform.processor`)."""
    for line in (_cpuinfo() if cpuinfo is None else cpuinfo).splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def machine() -> dict:
    """The record a run keeps: ``{"seqkit", "tensorflow", "keras", "python", "platform", "cpu",
    "cpu_kind", "cpu_flags" (the :data:`FLAGS` present), "cpus" (logical), "load_average"
    (1-minute, at the call; None where the OS has none), "gpus" (TensorFlow's visible GPUs)}``.
    Strings and numbers only, JSON-ready. Imports TensorFlow (a run has already). A resumed
    run records the process that finished it."""
    import keras
    import tensorflow as tf

    try:
        seqkit_version = version("seqkit")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        seqkit_version = "unknown"
    flags = cpu_flags()
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:  # pragma: no cover - no load average on this OS
        load = None
    return {"seqkit": seqkit_version, "tensorflow": tf.__version__, "keras": keras.__version__,
            "python": platform.python_version(), "platform": platform.platform(terse=True),
            "cpu": cpu_model(), "cpu_kind": cpu_kind(flags),
            "cpu_flags": [f for f in FLAGS if flags[f]], "cpus": os.cpu_count(), "load_average": load,
            "gpus": len(tf.config.list_physical_devices("GPU"))}


def write_provenance(run_path: str, recipe) -> None:
    """Write ``plugins.json`` into a run directory when the recipe uses plugins (else nothing)."""
    items = provenance(recipe)
    if items:
        atomic_write_json(os.path.join(run_path, PLUGINS), items)
