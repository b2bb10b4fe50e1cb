"""What every suite shares: timing with warm-up and repeats, the environment, and the report files.

A suite returns a list of *rows*; each row is a dict with at least ``contender``,
``metric`` (e.g. ``"tokens/s"``, ``"us/step"``), ``median``, ``min``, ``max``
and ``samples`` (the measured values), plus free-form ``notes``. Contenders of
one suite run in the same process, interleaved repeat by repeat, so a machine
that slows down mid-run slows every contender alike.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from typing import Callable

OUT_DIR = os.path.join("bench", "results")


def summarize(samples: list[float]) -> dict:
    """``{"median", "min", "max", "samples"}`` of a list of measurements."""
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "samples": [round(s, 3) for s in samples]}


def interleaved(contenders: dict[str, Callable[[], float]], repeats: int, warmup: int = 1) -> dict:
    """Run each contender's measurement ``warmup`` times (discarded), then ``repeats`` times,
    round-robin; return ``{name: [values]}``. A measurement function returns one value."""
    for _ in range(warmup):
        for fn in contenders.values():
            fn()
    out = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            out[name].append(fn())
    return out


def time_calls(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of ``fn`` over ``calls`` back-to-back calls (one measurement)."""
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def environment() -> dict:
    """Versions, CPU kind and vector extensions, oneDNN and thread settings (what a reader needs
    to compare two reports; see :mod:`bench.machine`)."""
    from bench.machine import cpu_flags, cpu_kind, machine_kind, onednn

    flags = cpu_flags()
    env = {"python": platform.python_version(), "machine": platform.machine(),
           "cpu": _cpu_name(), "cpus": os.cpu_count(), "cpu_kind": cpu_kind(flags),
           "machine_kind": machine_kind(flags), "cpu_flags": " ".join(f for f, on in flags.items() if on) or None,
           "time": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "commit": git_describe(),
           "command": " ".join(["python -m bench"] + sys.argv[1:]) if sys.argv and sys.argv[0].endswith(
               os.path.join("bench", "__main__.py")) else None,
           "load_average_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None}
    try:
        import keras
        import tensorflow as tf

        env.update(tensorflow=tf.__version__, keras=keras.__version__, onednn=onednn(),
                   tf_intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),
                   tf_inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads())
    except ImportError:  # pragma: no cover
        pass
    try:
        import torch

        env.update(torch=torch.__version__, torch_threads=torch.get_num_threads())
    except ImportError:
        env["torch"] = None
    try:
        from importlib.metadata import version

        env["ai_edge_litert"] = version("ai-edge-litert")
    except Exception:  # pragma: no cover
        env["ai_edge_litert"] = None
    import seqkit

    env["seqkit"] = seqkit.__version__
    return env


def git_describe() -> str:
    """``git describe --always --dirty --tags`` of the working tree (``unknown`` outside git)."""
    import subprocess

    try:
        return subprocess.run(["git", "describe", "--always", "--dirty", "--tags"], capture_output=True,
                              text=True, check=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def markdown_table(rows: list[dict]) -> str:
    """A Markdown table of rows (contender, metric, median, range, vs, notes)."""
    lines = ["| contender | metric | median | range | ratio | notes |", "|---|---|---|---|---|---|"]
    for r in rows:
        fmt = (lambda v: f"{v:,.0f}") if abs(r["median"]) >= 100 else (lambda v: f"{v:.3g}")
        ratio = f"{r['ratio']:.2f}" if r.get("ratio") is not None else ""
        lines.append(f"| {r['contender']} | {r['metric']} | {fmt(r['median'])} | "
                     f"{fmt(r['min'])}-{fmt(r['max'])} | {ratio} | {r.get('notes', '')} |")
    return "\n".join(lines)


def report_markdown(doc: dict, level: int = 2) -> str:
    """A report (``{"suite", "environment", "rows", ...}``) as Markdown: a heading of ``level``,
    the environment line, the rows' table, the suite's own ``doc["markdown"]`` and its other string
    values as ``key: value`` lines."""
    env = doc.get("environment") or {}
    env_line = ", ".join(f"{k} {v}" for k, v in env.items() if v is not None)
    out = f"{'#' * level} bench suite `{doc.get('suite')}`\n\n{env_line}\n"
    if doc.get("rows"):  # a suite may give its whole table as its own markdown
        out += f"\n{markdown_table(doc['rows'])}\n"
    if isinstance(doc.get("markdown"), str):
        out += f"\n{doc['markdown']}"
    for k, v in doc.items():
        if isinstance(v, str) and k not in ("markdown", "suite"):
            out += f"\n{k}: {v}\n"
    return out


def write_report(suite: str, rows: list[dict], extra: dict | None = None, out_dir: str = OUT_DIR) -> tuple[str, str]:
    """Write ``OUT_DIR/{suite}.json`` and ``{suite}.md``; return both paths.

    String values of ``extra`` follow the rows' table in the ``.md`` as ``key: value`` lines, except
    ``extra["markdown"]``: a suite's own Markdown (e.g. a table of several figures a contender),
    written as it is after the rows' table."""
    os.makedirs(out_dir, exist_ok=True)
    doc = {"suite": suite, "environment": environment(), "rows": rows, **(extra or {})}
    js, md = os.path.join(out_dir, f"{suite}.json"), os.path.join(out_dir, f"{suite}.md")
    with open(js, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    with open(md, "w", encoding="utf-8") as f:
        f.write(report_markdown(doc))
    return js, md
