"""``seqkit recipes`` and ``seqkit init``: the shipped recipes, and a starter recipe for the user's
own data (thin layers over :func:`seqkit.recipes` and :mod:`seqkit.starter`).

The seqkit modules a command needs only when it runs are imported inside the functions that use
them, so ``seqkit --help`` does not load them."""

from __future__ import annotations

import json

import click

from seqkit.cli.common import with_common_options


@click.command("recipes")
@click.option("--json", "as_json", is_flag=True,
              help='Print [{"name", "head", "source", "summary", "path"}] as JSON.')
@with_common_options
def recipes_(as_json=False):
    """List the recipes shipped with seqkit, a line each.

    Train one by name: seqkit train NAME (e.g. seqkit train lm-pydoc-chars).
    """
    from seqkit.shipped import recipes

    found = recipes()
    if as_json:
        click.echo(json.dumps([{"name": r.name, "head": r.head, "source": r.source, "summary": r.summary,
                                "path": r.path} for r in found], indent=2, ensure_ascii=False))
        return
    width = max(len(r.name) for r in found)
    for r in found:
        click.echo(f"{r.name:<{width}}  {r.head:<14}  {r.summary}")


@click.command("init")
@click.option("--task", required=True,
              help="classify: a label per text (acceptor); tag: a tag per token (tagger); lm: a "
                   "language model; seq2seq: text to text; a head plugin may add its own (the "
                   "forecasting plugin: forecast). `seqkit list heads` shows what is installed.")
@click.option("--data", "data", required=True, multiple=True, type=click.Path(exists=True),
              help="Your data: a table, a CoNLL or word/TAG file, a text file or a folder of text "
                   "(lm); seq2seq: two aligned files (give --data twice) or a table.")
@click.option("--out", type=click.Path(dir_okay=False),
              help="The recipe file to write [default: NAME.yaml, e.g. reviews-classify.yaml].")
@click.option("--overwrite", is_flag=True, help="Replace --out if seqkit init wrote it.")
@with_common_options
def init(task, data, out, overwrite):
    """Write a starter recipe for your own data file, with the format and columns it detected.

    \b
    Examples:
      seqkit init --task classify --data reviews.csv
      seqkit init --task tag --data train.conll
      seqkit init --task seq2seq --data train.en --data train.de
      seqkit init --task lm --data texts/
      seqkit init --task forecast --data sales.csv     # with seqkit-forecast installed
    """
    from seqkit.api import init as write_init

    path = write_init(task, list(data), out, overwrite=overwrite)
    click.echo(path)
    click.echo(f"seqkit: next: seqkit validate {path} && seqkit train {path}", err=True)
