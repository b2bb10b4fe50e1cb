"""Pictures of training and of a trained model, each with a JSON of the plotted numbers beside it.

* :func:`draw_diagnose` -- ``seqkit diagnose``: gradient norm vs lag (log y, one line
  per run/layer/state) and gate histograms (:mod:`seqkit.diagnostics.diagnose`);
* :func:`draw_curves` -- ``seqkit plot``: training curves from ``history.json``;
* :func:`draw_confusion` -- ``seqkit evaluate --confusion-matrix --out``: the
  row-normalised confusion matrix of an acceptor or tagger.

Needs matplotlib (the ``plot`` extra), drawn with the Agg backend (no display).

The optional package matplotlib is imported where used, so seqkit works without it.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from seqkit.errors import SeqkitError
from seqkit.outputs import json_mark, picture_outputs, png_metadata


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend.

    Raises:
        SeqkitError: matplotlib is not installed (names ``pip install "seqkit[plot]"``).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise SeqkitError("seqkit draws its pictures with matplotlib, which is not installed. Install "
                          "it with `pip install \"seqkit[plot]\"` (or `pip install matplotlib`).") from exc
    return plt


def json_path(png: str) -> str:
    """The JSON written beside a PNG: ``x/name.png -> x/name.json``."""
    root, ext = os.path.splitext(png)
    return (root if ext.lower() == ".png" else png) + ".json"


def json_safe(obj):
    """``obj`` (dicts, lists, tuples, floats, NumPy scalars) with every non-finite float made
    ``None``, recursively: JSON has no NaN or infinity."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        return json_safe(obj.item())
    return obj


def _save(fig, plt, path: str, data: dict, outputs=None, command: str = "") -> str:
    """Write the PNG and its JSON, staged and renamed together (:class:`seqkit.outputs.FileOutputs`:
    ``outputs`` when the caller checked the paths already, else checked here without
    ``--overwrite``); returns the JSON's path. The PNG and the JSON carry seqkit's mark, so the
    next drawing to the same path may replace them.

    Raises:
        SeqkitError: the folder is missing or not writable; OutputPathError: a path that is not
            seqkit's to replace (:mod:`seqkit.outputs`).
    """
    jpath = json_path(path)
    try:
        outputs = outputs or picture_outputs(path)

        def png(tmp):
            fig.savefig(tmp, dpi=110, format="png", metadata=png_metadata())

        def js(tmp):
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({**json_mark(command), **json_safe(data)}, f, indent=1)

        outputs.write({path: png, jpath: js})
    finally:
        plt.close(fig)
    return jpath


def _label(run: str) -> str:
    return os.path.basename(os.path.normpath(run)) or run


# ---------------------------------------------------------------------- diagnose
def draw_diagnose(results: list, path: str, outputs=None) -> str:
    """Gradient norm by lag and gate histograms of one or more runs.

    Args:
        results: :func:`seqkit.diagnostics.diagnose.diagnose_run` outputs.
        path: the PNG to write; the JSON (``results`` as plotted) goes beside it.
        outputs: the :class:`seqkit.outputs.FileOutputs` of ``path`` and its JSON, when the caller
            checked them already (e.g. with ``--overwrite``); else checked here.

    Returns:
        The JSON's path.

    Raises:
        SeqkitError: matplotlib missing, or the file cannot be written.
    """
    plt = pyplot()
    panels = [(r, i, layer) for r in results if r.get("gates")
              for i, layer in enumerate(r["gates"]["layers"])]
    ncol = 3
    nrow = 1 + math.ceil(len(panels) / ncol)
    fig = plt.figure(figsize=(12, 4.2 + 2.6 * (nrow - 1)))
    grid = fig.add_gridspec(nrow, ncol, height_ratios=[1.6] + [1] * (nrow - 1))
    ax = fig.add_subplot(grid[0, :])
    for r in results:
        for c in r["gradient_flow"]["curves"]:
            norm = np.asarray(c["norm"], float)
            ok = np.isfinite(norm) & (norm > 0)
            h = c["horizon"]
            lab = (f"{_label(r['run'])} ({r['gradient_flow']['cell']}) layer {c['layer']} {c['state']}: "
                   f"horizon {h if h is not None else '> ' + str(r['gradient_flow']['max_lag'])}")
            ax.plot(np.asarray(c["lags"])[ok], norm[ok], label=lab,
                    linestyle="--" if c["state"] != "h" else ("-." if c.get("direction") == "backward" else "-"))
    ax.set_yscale("log")
    ax.set_xlabel("lag k (steps)")
    ax.set_ylabel("mean ||dL_t / ds_{t-k}||")
    title = "gradient flow through time (horizon: first k below 1e-3 of k = 0)"
    if any(r["gradient_flow"].get("encoder_decoder") for r in results):
        title += "\nseq2seq: whole target loss w.r.t. encoder states, lag from the source end"
    if any(r["gradient_flow"].get("bidirectional") for r in results):
        title += "\nbackward direction: lag k = dL_t/ds_(t+k), k positions later in the sequence"
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    for n, (r, i, layer) in enumerate(panels):
        a = fig.add_subplot(grid[1 + n // ncol, n % ncol])
        edges = np.asarray(r["gates"]["bins"])
        centers = (edges[:-1] + edges[1:]) / 2
        for name, g in layer.items():
            a.step(centers, g["histogram"], where="mid",
                   label=f"{name}: mean {g['mean']:.2f}, sat. {g['saturated']:.0%}")
        gname = r["gates"]["names"][i] if r["gates"].get("names") else i
        a.set_title(f"{_label(r['run'])} layer {gname} gates", fontsize=9)
        a.set_xlim(0, 1)
        a.set_xlabel("gate value", fontsize=8)
        a.set_ylabel("fraction", fontsize=8)
        a.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, plt, path, {"runs": results}, outputs, "diagnose")


# ---------------------------------------------------------------------- training curves
_SKIP = {"epoch", "seconds"}
_LR = ("learning_rate", "lr")


def curve_series(history: list) -> dict:
    """``history.json`` rows -> ``{"epoch": [E], "series": {key: [E] (None where absent)}}``."""
    keys = []
    for row in history:
        for k, v in row.items():
            if k not in _SKIP and k not in keys and isinstance(v, (int, float)):
                keys.append(k)
    return {"epoch": [row.get("epoch", i + 1) for i, row in enumerate(history)],
            "series": {k: [row.get(k) for row in history] for k in keys}}


def draw_curves(histories: dict, path: str, outputs=None) -> str:
    """Training curves of one or more runs: one panel per metric (train solid, valid dashed,
    one colour per run), plus the learning rate (log y) when the history holds it.

    Args:
        histories: ``{run name: history.json rows}``.
        path: the PNG; its JSON holds :func:`curve_series` per run.
        outputs: as :func:`draw_diagnose`.

    Returns:
        The JSON's path.

    Raises:
        SeqkitError: no numbers to draw, matplotlib missing, unwritable file.
    """
    data = {run: curve_series(h) for run, h in histories.items()}
    metrics = []
    for d in data.values():
        for k in d["series"]:
            base = k[4:] if k.startswith("val_") else k
            if base not in metrics:
                metrics.append(base)
    if not metrics:
        raise SeqkitError("the runs' history.json files hold no per-epoch numbers to draw; train "
                          "at least one epoch first.")
    metrics = ([m for m in metrics if m == "loss"] + [m for m in metrics if m not in _LR and m != "loss"]
               + [m for m in metrics if m in _LR])
    plt = pyplot()
    ncol = min(3, len(metrics))
    nrow = math.ceil(len(metrics) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.2 * nrow), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for n, m in enumerate(metrics):
        ax = axes[n // ncol][n % ncol]
        for r, (run, d) in enumerate(data.items()):
            col = colors[r % len(colors)]
            for key, style, split in ((m, "-", "train"), ("val_" + m, "--", "valid")):
                ys = d["series"].get(key)
                if ys is None:
                    continue
                pts = [(e, y) for e, y in zip(d["epoch"], ys) if y is not None]
                if pts:
                    ax.plot(*zip(*pts), style, color=col, marker="o", markersize=3,
                            label=f"{_label(run)} {split}" if m not in _LR else _label(run))
        if m in _LR:
            ax.set_yscale("log")
        ax.set_title(m, fontsize=10)
        ax.set_xlabel("epoch", fontsize=8)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for n in range(len(metrics), nrow * ncol):
        axes[n // ncol][n % ncol].axis("off")
    fig.tight_layout()
    return _save(fig, plt, path, {"runs": data}, outputs, "plot")


# ---------------------------------------------------------------------- confusion matrix
def normalize_rows(matrix) -> np.ndarray:
    """Counts ``[R, C]`` -> each row divided by its sum (a row of zeros stays zeros)."""
    m = np.asarray(matrix, np.float64)
    s = m.sum(axis=1, keepdims=True)
    return np.divide(m, s, out=np.zeros_like(m), where=s > 0)


def draw_confusion(cm: dict, path: str, title: str = "", outputs=None) -> str:
    """The row-normalised confusion matrix (rows true, columns predicted).

    Args:
        cm: :func:`seqkit.metrics.classification.confusion_matrix` output ``{"rows", "columns", "matrix"}``.
        path: the PNG; its JSON holds the labels, the counts and the normalised rows.
        outputs: as :func:`draw_diagnose`.

    Returns:
        The JSON's path. Labels stay readable at ~50 classes (the figure grows,
        x labels turn vertical, cell numbers are printed up to 15 classes).

    Raises:
        SeqkitError: matplotlib missing, unwritable file.
    """
    plt = pyplot()
    rows, cols = list(cm["rows"]), list(cm["columns"])
    norm = normalize_rows(cm["matrix"])
    n = max(len(rows), len(cols))
    side = max(5.0, 0.26 * n + 2.5)
    font = 9 if n <= 20 else 7 if n <= 50 else 5
    fig, ax = plt.subplots(figsize=(side + 1.0, side))
    im = ax.imshow(norm, cmap="Blues", vmin=0.0, vmax=1.0, aspect="equal")
    ax.set_xticks(range(len(cols)), cols, rotation=90, fontsize=font)
    ax.set_yticks(range(len(rows)), rows, fontsize=font)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    if n <= 15:
        for i in range(len(rows)):
            for j in range(len(cols)):
                if norm[i, j] >= 0.005:
                    ax.text(j, i, f"{norm[i, j]:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if norm[i, j] > 0.5 else "black")
    ax.set_title(title or "confusion matrix (rows normalised)", fontsize=10)
    fig.colorbar(im, ax=ax, fraction=0.04)
    fig.tight_layout()
    return _save(fig, plt, path, {"rows": rows, "columns": cols, "counts": cm["matrix"],
                                  "normalized": norm.tolist()}, outputs, "evaluate")
