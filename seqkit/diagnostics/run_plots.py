"""``seqkit plot`` / :meth:`seqkit.Run.plot`: the training curves of one or more runs, and the
pictures each run's head draws for it (``Head.run_figures``, e.g. a forecasting run's backtest).

``--out curves.png`` writes ``curves.png`` + ``curves.json`` (the curves) and, for a run whose head
draws pictures, ``curves-NAME.png`` + ``curves-NAME.json`` per picture (several runs:
``curves-RUN-NAME.png``, ``RUN`` the run folder's name). Every path is checked before anything is
drawn (:mod:`seqkit.outputs`).

Looking a run's head up imports the installed head plugins, and with them TensorFlow (its start-up
lines hidden); the seqkit modules that load a run are imported inside the functions that use them.
"""

from __future__ import annotations

import json
import os

from seqkit import log
from seqkit.errors import RunDirError, SeqkitError
from seqkit.runs.json_files import bounded_json
from seqkit.runs.rundir import HISTORY, RECIPE


def _label(run: str) -> str:
    return os.path.basename(os.path.normpath(run)) or run


def head_figures(run: str) -> tuple:
    """The names of the pictures the head of ``run`` draws (``Head.run_figures``); ``()`` for a
    folder without ``recipe.yaml``. A head that is not available here (a plugin not installed)
    draws none: a logged warning says so, and the training curves are still drawn."""
    from seqkit._quiet import import_tensorflow_quietly
    from seqkit.recipe import load_recipe
    from seqkit.registry import HEADS

    path = os.path.join(run, RECIPE)
    if not os.path.isfile(path):
        return ()
    import_tensorflow_quietly()  # the heads (plugins included) import Keras: its start-up lines are not ours
    try:
        return tuple(HEADS.get(load_recipe(path, load_plugins=False).head.type).run_figures)
    except SeqkitError as exc:
        log.warn(f"{run}: its head's pictures are not drawn ({exc}); the training curves are.")
        return ()


def figure_paths(runs: list, out: str) -> list[tuple[str, str, str]]:
    """``[(run, picture name, png path)]`` of the head pictures ``seqkit plot RUNS --out OUT`` draws:
    ``OUT-NAME.png`` for one run, ``OUT-RUN-NAME.png`` for several (``RUN``: the folder's name, with
    its position appended when two runs share one)."""
    root = os.path.splitext(out)[0] if out.lower().endswith(".png") else out
    labels = [_label(r) for r in runs]
    out_list = []
    for i, r in enumerate(runs):
        lab = labels[i] if labels.count(labels[i]) == 1 else f"{labels[i]}{i + 1}"
        for name in head_figures(r):
            stem = f"{root}-{name}" if len(runs) == 1 else f"{root}-{lab}-{name}"
            out_list.append((r, name, stem + ".png"))
    return out_list


def read_history(run: str) -> list:
    """The per-epoch rows of ``run/history.json``.

    Raises:
        RunDirError: no such file, not JSON, or not a list of rows.
    """
    p = os.path.join(run, HISTORY)
    try:
        h = bounded_json(p)
    except FileNotFoundError:
        raise RunDirError(f"{p}: no such file. `seqkit plot` reads the history.json a run "
                          f"writes after each epoch; point at a run directory made by "
                          f"`seqkit train`.") from None
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{p}: cannot read it as JSON ({exc}); the run directory is damaged.") from exc
    if not isinstance(h, list):
        raise RunDirError(f"{p}: expected a list of per-epoch rows; the file is not a seqkit history.")
    return [row for row in h if isinstance(row, dict)]


def plot_runs(runs: list, out: str, overwrite: bool = False, opened: dict | None = None) -> list[str]:
    """Draw the training curves of ``runs`` into ``out`` (+ its JSON) and each run's head pictures
    (:func:`figure_paths`).

    Args:
        runs: run directories; out: the curves' PNG; overwrite: replace files seqkit did not write
            (never a run's own files or the files its recipe reads); opened: ``{run path: Run}``
            already loaded (else each run with pictures is loaded here, its data read).

    Returns:
        Every path written: ``[out, its JSON, picture PNG, its JSON, ...]``.

    Raises:
        RunDirError: a run without ``history.json``. OutputPathError: a path seqkit may not write
        (all checked before anything is drawn). SeqkitError: see
        :func:`seqkit.diagnostics.plots.draw_curves` and ``Head.draw_run_figure``.
    """
    from seqkit.diagnostics.plots import draw_curves, json_path, pyplot
    from seqkit.outputs import picture_outputs, protected_by_runs

    outputs = picture_outputs(out, overwrite=overwrite)
    figures = figure_paths(list(runs), out)
    protect = protected_by_runs([r for r in dict.fromkeys(r for r, _, _ in figures)])
    checked = [picture_outputs(png, overwrite=overwrite, protect=protect) for _, _, png in figures]
    histories = {r: read_history(r) for r in runs}
    if figures:
        pyplot()  # matplotlib missing: said before a run loads
    written = [out, draw_curves(histories, out, outputs)]
    opened = dict(opened or {})
    loaded: dict = {}
    for (r, name, png), outs in zip(figures, checked):
        if r in opened:  # a seqkit.Run the caller holds: its loaded model is reused
            loaded[r] = opened[r]._load(with_data=True)
        elif r not in loaded:
            from seqkit._quiet import import_tensorflow_quietly
            from seqkit.training.train import load_run

            import_tensorflow_quietly()
            loaded[r] = load_run(r, with_data=True)
        prep, model = loaded[r]
        prep.head.draw_run_figure(name, prep, model, png, outs)
        written += [png, json_path(png)]
    return written
