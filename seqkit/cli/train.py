"""``seqkit train``, ``seqkit validate`` and ``seqkit list``: from a recipe to a run directory
(thin layers over :func:`seqkit.train`, :func:`seqkit.train_seeds`, :mod:`seqkit.recipe` and
:mod:`seqkit.registry`).

PyYAML and the seqkit modules a command needs only when it runs are imported inside the functions
that use them, so ``seqkit --help`` does not load them."""

from __future__ import annotations

import contextlib
import json
import os
import sys

import click

from seqkit.cli.common import with_common_options
from seqkit.cli.evaluate import format_metrics
from seqkit.errors import RecipeError, SeqkitError
from seqkit.registry import CELLS, DATA, HEADS
from seqkit.runs.rundir import RECIPE, strict_json


def keras_verbosity(quiet: bool) -> int:
    """Keras ``fit`` verbosity: 0 with ``--quiet``; its redrawn progress bar (1) only where stderr,
    where it goes, is a terminal (Keras draws it with carriage returns and colours whatever the
    stream); one line per epoch (2) in a pipe, a log file or CI."""
    if quiet:
        return 0
    try:
        return 1 if sys.stderr.isatty() else 2
    except (AttributeError, ValueError):
        return 2


def _default_run_dir(recipe) -> str:
    return os.path.join("runs", recipe.name)


@click.command()
@click.argument("recipe", required=False, type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE",
              help="Override a recipe key, e.g. --set training.epochs=1 --set model.cell=gru "
                   "(a relative file path given here is read from the current directory).")
@click.option("--run-dir", type=click.Path(file_okay=False), help="Where to write the run [default: runs/NAME].")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False),
              help="Continue an interrupted run from its last finished epoch.")
@click.option("--overwrite", is_flag=True, help="Replace an existing run directory.")
@click.option("--seeds", type=click.IntRange(min=1), default=None, metavar="N",
              help="Train N runs with seeds SEED, SEED+1, ... into RUN_DIR-seed<S> and write "
                   "RUN_DIR-seeds.json: mean, sample sd, min and max of every test figure. Run "
                   "again after a stop, it keeps finished seeds and resumes an unfinished one.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the final metrics and the run directory as JSON.")
@with_common_options
def train(recipe, overrides, run_dir, resume_dir, overwrite, seeds, as_json=False, quiet=False):
    """Train the model a RECIPE describes; write the run directory.

    With --resume RUN_DIR the run's own recipe is used (RECIPE may be left out;
    --set still applies, e.g. --set training.epochs=20 to train longer).
    """
    from seqkit.recipe import load_recipe

    if seeds is not None:
        if resume_dir:
            raise SeqkitError("--seeds and --resume do not combine: run the same --seeds command "
                              "again instead; it keeps the seeds that finished with the same recipe "
                              "and resumes an unfinished one.")
        if not recipe:
            raise click.UsageError("give a RECIPE file with --seeds.")
        from seqkit.training.seeds import format_summary, train_seeds

        rec = load_recipe(recipe, list(overrides))
        with contextlib.redirect_stdout(sys.stderr):  # Keras's progress bar: stdout holds results only
            summary = train_seeds(rec, seeds, run_dir or _default_run_dir(rec), overwrite=overwrite,
                                  verbose=keras_verbosity(quiet))
        if as_json:
            click.echo(json.dumps(summary, indent=2, ensure_ascii=False))
            return
        for line in format_summary(summary, "test") or format_summary(summary, "valid"):
            click.echo(line)
        click.echo(f"runs: {', '.join(summary['runs'])}")
        click.echo(f"summary: {summary['path']}")
        return

    if resume_dir and run_dir and os.path.abspath(run_dir) != os.path.abspath(resume_dir):
        raise SeqkitError("--run-dir and --resume name different directories; use one.")
    if not recipe and not resume_dir:
        raise click.UsageError("give a RECIPE file (or --resume RUN_DIR).")
    from seqkit.api import train as train_run

    # stdout holds the results only (the JSON with --json); Keras writes its progress bar to stdout,
    # so send it to stderr with seqkit's own lines
    with contextlib.redirect_stdout(sys.stderr):
        run = train_run(recipe or None, resume_dir or run_dir, overwrite=overwrite, resume=bool(resume_dir),
                        verbose=keras_verbosity(quiet), overrides=overrides)
    if run is None:  # a non-chief worker of a multi-worker job (logged)
        return
    path, metrics, rec = run.path, run.metrics, run.recipe
    if as_json:
        click.echo(strict_json({"run_dir": path, "metrics": metrics}, indent=2))
        return

    click.echo(format_metrics(metrics, HEADS.get(rec.head.type)(rec)))
    click.echo(f"run directory: {path}")


@click.command("list")
@click.argument("kind", required=False, type=click.Choice(["cells", "heads", "data"]))
@click.option("--json", "as_json", is_flag=True, help='Print {"cells": [{"name", "origin", "doc"}], '
              '"heads": ..., "data": ..., "conflicts": [...], "broken": [...]} as JSON.')
@with_common_options
def list_(kind, as_json=False):
    """List registered cells, heads and data sources, and where each comes from."""
    regs = {"cells": CELLS, "heads": HEADS, "data": DATA}
    if as_json:
        out = {"conflicts": [], "broken": []}
        for name, reg in regs.items():
            if kind and kind != name:
                continue
            out[name] = [{"name": e.name, "origin": e.origin,
                          "doc": ((getattr(e.obj, "__doc__", "") or "").strip().splitlines() or [""])[0],
                          **({"init_task": getattr(e.obj, "starter_task", None)} if name == "heads" else {})}
                         for e in reg.entries()]
            out["conflicts"] += [{"kind": reg.kind, "name": c.name, "claimed_by": sorted(o for o, _ in c.claims)}
                                 for c in reg.conflicts()]
            out["broken"] += [{"kind": b.kind, "entry_point": b.entry_point, "origin": b.origin,
                               "error": b.error} for b in reg.broken]
        click.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    for name, reg in regs.items():
        if kind and kind != name:
            continue
        click.echo(f"{name}:")
        for e in reg.entries():
            doc = (getattr(e.obj, "__doc__", "") or "").strip().splitlines()
            task = getattr(e.obj, "starter_task", None) if name == "heads" else None
            click.echo(f"  {e.name:<16} {e.origin:<22} {doc[0] if doc else ''}"
                       + (f" (seqkit init --task {task})" if task else ""))
        for c in reg.conflicts():
            click.echo(f"  {c.name:<16} CONFLICT: claimed by " + " and ".join(sorted(o for o, _ in c.claims))
                       + "; unusable until one is uninstalled")
        for b in reg.broken:
            click.echo(f"  BROKEN {b.entry_point} ({b.origin}): {b.error}")


@click.command()
@click.argument("recipe", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="Override a recipe key.")
@click.option("--data/--no-data", "check_data", default=True, show_default=True,
              help="Also read the data and build the model (counts, vocabulary, parameters).")
@click.option("--show", is_flag=True, help="Print the resolved recipe (defaults filled).")
@click.option("--json", "as_json", is_flag=True, help='Print {"recipe", "ok": true, "resolved", "data", '
              '"parameters"} as JSON, or {"recipe", "ok": false, "errors": [...]} (exit status 2).')
@with_common_options
def validate(recipe, overrides, check_data, show, as_json=False):
    """Check a RECIPE without training: every key, the data, the model it builds."""
    from seqkit.api import validate as validate_recipe

    try:
        out = validate_recipe(recipe, overrides, data=check_data)
    except RecipeError as exc:
        if as_json:
            click.echo(json.dumps({"recipe": recipe, "ok": False,
                                   "errors": getattr(exc, "problems", None) or [str(exc)]}, indent=2))
        raise
    if as_json:
        click.echo(strict_json(out, indent=2, ensure_ascii=False))
        return
    if show:
        import yaml

        click.echo(yaml.safe_dump(out["resolved"], sort_keys=False, allow_unicode=True).rstrip())
    if check_data:
        d, params = out["data"], out["parameters"]
        click.echo(f"data: {d['source']}: " + ", ".join(f"{k} {v}" for k, v in d["examples"].items())
                   + f" examples; {d['assets']}")
        click.echo(f"model: {params['total']:,} parameters (" +
                   ", ".join(f"{k} {v:,}" for k, v in params.items() if k not in ("total", "trainable")) + ")")
    click.echo(f"{recipe}: OK")
