"""``seqkit diagnose`` and ``seqkit plot``, and the pictures of ``seqkit evaluate --out``: the
commands and the work behind them (the numbers come from :mod:`seqkit.diagnostics`).

The seqkit modules a command needs only when it runs are imported inside the functions that use
them, so ``seqkit --help`` does not load them."""

from __future__ import annotations

import os

import click

from seqkit.cli.common import with_common_options
from seqkit.errors import SeqkitError


def diagnose_runs(runs: list, out_dir: str, *, max_lag: int, examples: int, positions: int,
                  split: str, overwrite: bool = False) -> tuple[str, str, list]:
    """Diagnose each run and draw them into ``out_dir/diagnose.png`` (+ ``diagnose.json``), both
    checked before the work (:mod:`seqkit.outputs`; ``overwrite``: replace files seqkit did not write).

    Returns:
        ``(png path, json path, results)`` (results: :func:`seqkit.diagnostics.diagnose.diagnose_run` per run).

    Raises:
        SeqkitError: a run that cannot be diagnosed, an unwritable ``out_dir``, no matplotlib.
    """
    from seqkit.diagnostics.diagnose import diagnose_run
    from seqkit.diagnostics.plots import draw_diagnose, pyplot
    from seqkit.outputs import picture_outputs, protected_by_runs

    pyplot()  # fail early, before the slow part, when matplotlib is missing
    png = os.path.join(out_dir, "diagnose.png")
    if os.path.lexists(out_dir) and (os.path.islink(out_dir) or not os.path.isdir(out_dir)):
        raise SeqkitError(f"--out {out_dir}: not a folder; diagnose writes diagnose.png and "
                          f"diagnose.json into a folder. Choose another --out.")
    outputs = picture_outputs(png, overwrite=overwrite, protect=protected_by_runs(runs))  # before the work
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise SeqkitError(f"--out {out_dir}: cannot create the folder ({exc}); pick a writable path.") from exc
    results = [diagnose_run(r, max_lag=max_lag, examples=examples, positions=positions, split=split)
               for r in runs]
    return png, draw_diagnose(results, png, outputs), results


def summary_lines(results: list) -> list[str]:
    """One line per run/layer/state (horizon, norm at k = 0) and per gate (mean, saturated)."""
    lines = []
    for r in results:
        flow = r["gradient_flow"]
        for c in flow["curves"]:
            h = c["horizon"]
            lines.append(f"{r['run']}: {flow['cell']} layer {c['layer']} {c['state']}: gradient horizon "
                         f"{h if h is not None else '> ' + str(flow['max_lag'])} steps "
                         f"(|dL/ds| {c['norm'][0]:.3g} at k = 0, {c['rows'][0]} rows)")
        if r["gates"] is None and flow.get("encoder_decoder"):
            lines.append(f"{r['run']}: {flow['lag_definition']} (gate statistics are not read for "
                         f"seq2seq encoders)")
            continue
        if r["gates"] is None:
            lines.append(f"{r['run']}: cell '{flow['cell']}' exposes no gates (CellPlugin.gates); "
                         f"gradient flow only")
            continue
        gnames = r["gates"].get("names") or list(range(len(r["gates"]["layers"])))
        for i, layer in enumerate(r["gates"]["layers"]):
            for name, g in layer.items():
                lines.append(f"{r['run']}: layer {gnames[i]} {name} gate: mean {g['mean']:.3f}, saturated "
                             f"{g['saturated']:.1%} (< 0.1: {g['below']:.1%}, > 0.9: {g['above']:.1%})")
    return lines


def plot_runs(runs: list, out: str, overwrite: bool = False) -> list[str]:
    """Draw the training curves of ``runs`` (their ``history.json``) into ``out`` and the pictures
    their heads draw (:func:`seqkit.diagnostics.run_plots.plot_runs`); returns the paths written.

    Every path is checked first (:mod:`seqkit.outputs`): never a run's own file; a file seqkit did
    not write only with ``overwrite``.

    Raises:
        RunDirError: a run without ``history.json``. SeqkitError: see :func:`seqkit.diagnostics.plots.draw_curves`.
    """
    from seqkit.diagnostics.run_plots import plot_runs as draw

    return draw(runs, out, overwrite=overwrite)


def confusion_picture(figures: dict, out: str, title: str, outputs=None) -> str:
    """Draw ``figures["confusion_matrix"]`` into ``out``; returns the JSON path. ``outputs``: the
    :class:`seqkit.outputs.FileOutputs` the caller checked before evaluating (else checked here).

    Raises:
        SeqkitError: the head reports no confusion matrix (only acceptor and tagger do).
    """
    from seqkit.diagnostics.plots import draw_confusion

    cm = figures.get("confusion_matrix")
    if not cm:
        raise SeqkitError("--out draws the confusion matrix, which only acceptor and tagger runs "
                          "report; this run's head has none. Drop --out.")
    return draw_confusion(cm, out, title, outputs)


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for diagnose.png and diagnose.json.")
@click.option("--max-lag", type=click.IntRange(min=1), default=50, show_default=True,
              help="Largest lag K of the gradient norm dL_t/ds_{t-k}.")
@click.option("--examples", type=click.IntRange(min=1), default=32, show_default=True,
              help="Held-out sequences read per run.")
@click.option("--positions", type=click.IntRange(min=1), default=8, show_default=True,
              help="Loss steps t per sequence (language model, tagger).")
@click.option("--split", type=click.Choice(["test", "valid", "train"]), default="test", show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace diagnose.png / diagnose.json even when seqkit "
              "did not write them (never a run's own files).")
@with_common_options
def diagnose(runs, out_dir, max_lag, examples, positions, split, overwrite):
    """Gradient flow through time (norm of dL_t/ds_{t-k} by lag k, the horizon where it falls
    below 1e-3 of k = 0) and gate statistics of trained runs, drawn into one PNG + JSON."""

    png, jpath, results = diagnose_runs(list(runs), out_dir, max_lag=max_lag, examples=examples,
                                       positions=positions, split=split, overwrite=overwrite)
    for line in summary_lines(results):
        click.echo(line)
    click.echo(f"wrote {png} and {jpath}")


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="PNG to write (+ a .json beside "
              "it); a run whose head draws pictures of its own (e.g. a forecasting run's backtest) also "
              "gets OUT-NAME.png (several runs: OUT-RUN-NAME.png), each with its .json.")
@click.option("--overwrite", is_flag=True, help="Replace the PNGs / JSONs even when seqkit did not write "
              "them (never a run's own files).")
@with_common_options
def plot(runs, out, overwrite):
    """Draw training curves (train/valid loss and metrics per epoch, learning rate if logged)
    from the runs' history.json, several runs overlaid, and the pictures a run's head draws for
    it: a forecasting run's backtest (the test period with the forecasts of its origins and their
    quantile bands)."""

    written = plot_runs(list(runs), out, overwrite=overwrite)
    for png, jpath in zip(written[::2], written[1::2]):
        click.echo(f"wrote {png} and {jpath}")
