"""``seqkit evaluate``: a run's figures on a held-out split, as text or JSON (a thin layer over
:meth:`seqkit.Run.evaluate`); ``--out`` draws the confusion matrix (:mod:`seqkit.cli.diagnose`).

The seqkit modules a command needs only when it runs are imported inside the functions that use
them, so ``seqkit --help`` does not load them."""

from __future__ import annotations

import os

import click

from seqkit.cli.common import with_common_options
from seqkit.cli.diagnose import confusion_picture
from seqkit.runs.rundir import strict_json


def format_baseline(name: str, figs) -> list[str]:
    """``baseline NAME: split figures`` lines (LM baselines are perplexities per split)."""
    if not isinstance(figs, dict):
        return [f"baseline {name}: {figs}"]
    if all(isinstance(v, (int, float)) for v in figs.values()):
        return [f"baseline {name} perplexity: " + ", ".join(f"{s} {v}" for s, v in figs.items())]
    return [f"baseline {name}: {s} " + ", ".join(f"{k} {v:.4f}" for k, v in f.items())
            for s, f in figs.items()]


def format_metrics(m: dict, head=None) -> str:
    lines = []
    for split in ("valid", "test"):
        if split in m:
            figs = head.format_metrics(m[split]) if head is not None else [
                ", ".join(f"{k} {v:.4f}" for k, v in m[split].items() if isinstance(v, (int, float)))]
            lines.append(f"{split}: {figs[0]}")
            lines += figs[1:] if split == "test" else []
    for name, figs in (m.get("baselines") or {}).items():
        lines += format_baseline(name, figs)
    if "train_seconds" in m:
        n = m.get("epochs")
        lines.append(f"trained {n} epoch{'' if n == 1 else 's'} in {m['train_seconds']} s")
    return "\n".join(lines)


def format_settings(settings: dict) -> str:
    """One line of an adaptive mode's valid-chosen settings (its mixture weights averaged over buckets)."""
    parts = [f"{k} {settings[k]}" for k in ("theta", "window", "discount", "min_length")
             if settings.get(k) is not None]
    w = settings.get("weights") or []
    if w:
        mean = [sum(row[i] for row in w) / len(w) for i in range(len(w[0]))]
        parts.append("mean weights " + ", ".join(f"{n} {v:.3f}" for n, v in zip(settings["components"], mean)))
    if settings.get("valid_bits") is not None:
        parts.append(f"valid {settings['valid_bits']:.4f} bits/token (in-sample)")
    return "; ".join(parts)


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--split", type=click.Choice(["test", "valid", "train"]), default="test", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
@click.option("--confusion-matrix", is_flag=True, help="Also report the confusion matrix (acceptor, tagger).")
@click.option("--out", type=click.Path(dir_okay=False),
              help="Also draw the row-normalised confusion matrix into this PNG (+ a .json beside it).")
@click.option("--dynamic", is_flag=True, help="Language model, data.layout stream: also report dynamic "
              "evaluation (an update on each chunk after scoring it; the run's files are not changed, but for the "
              "rms rule's cached gradient statistics, dynamic_stats.npz).")
@click.option("--dynamic-rule", metavar="sgd|rms", help="Update rule of --dynamic: sgd, or rms (Krause et "
              "al. 2018: step / RMS of training gradients, decay scaled by it) [default: recipe "
              "evaluation.dynamic_rule].")
@click.option("--dynamic-lr", type=float, help="Step size eta of --dynamic, > 0 [default: recipe "
              "evaluation.dynamic_lr].")
@click.option("--dynamic-decay", type=float, help="Decay lambda towards the trained weights per chunk, >= 0 "
              "[default: recipe evaluation.dynamic_decay].")
@click.option("--dynamic-chunk", type=int, help="Tokens per scored-then-adapted chunk, > 0 [default: "
              "recipe evaluation.dynamic_chunk].")
@click.option("--cache", is_flag=True, help="Language model, data.layout stream: also score the network "
              "mixed with a continuous cache of its hidden states over the split read so far (Grave et al. "
              "2017; theta, window and weights chosen on the valid split).")
@click.option("--mix", is_flag=True, help="Language model, data.layout stream: also score the network "
              "mixed with an online n-gram (orders 1-16) and a longest-match model that read the training "
              "text, then the split as it is scored (discount and weights chosen on the valid split).")
@click.option("--ensemble", "ensemble", multiple=True, type=click.Path(file_okay=False), metavar="RUN",
              help="Average the network's distributions with those of this run (same recipe data, "
              "vocabularies and split, e.g. another seed of --seeds); repeatable. Language model "
              "(data.layout stream): combines with --cache, --mix, --dynamic. Encoder-decoder: one "
              "beam over the runs' mean log-probabilities, reported beside this run's own figures.")
@click.option("--set", "overrides", multiple=True, metavar="decoding.KEY=VALUE",
              help="Score the outputs of other decoding settings than the recipe's, e.g. --set "
              "decoding.beam_width=10 --set decoding.length_penalty=0.6 (encoder-decoder; choose them "
              "on --split valid); repeatable.")
@click.option("--overwrite", is_flag=True, help="--out: replace the PNG / JSON even when seqkit did not "
              "write them (never a run's own files, the recipe or the data).")
@with_common_options
def evaluate(run_dir, split, as_json, confusion_matrix, out, dynamic=False, dynamic_lr=None,
             dynamic_rule=None, dynamic_decay=None, dynamic_chunk=None, cache=False, mix=False,
             ensemble=(), overwrite=False, overrides=()):
    """Evaluate a trained run on a held-out split (LM: cross-entropy, perplexity; acceptor:
    accuracy, macro-F1; tagger: token accuracy, per-tag P/R/F1, entity F1 for BIO/BIOES)."""
    from seqkit.inference.decoding_overrides import decoding_from_sets
    from seqkit.runs.run import Run

    decoding = decoding_from_sets(overrides)  # checked before anything loads
    run = Run(run_dir)
    outputs = None
    if out:  # the picture and its JSON are checked before the evaluation (seqkit.outputs)
        from seqkit.outputs import picture_outputs, protected_by_runs

        outputs = picture_outputs(out, overwrite=overwrite, protect=protected_by_runs([run_dir]))
    report = run.evaluate(split, confusion_matrix=confusion_matrix or bool(out), dynamic=dynamic,
                          dynamic_lr=dynamic_lr, dynamic_rule=dynamic_rule, dynamic_decay=dynamic_decay,
                          dynamic_chunk=dynamic_chunk, cache=cache, mix=mix,
                          ensemble=list(ensemble), decoding=decoding or None)  # {"split", **res, "baselines"}
    res = {k: v for k, v in report.items() if k not in ("split", "baselines", "compressors", "decoding")}
    baselines, prep = report["baselines"], run.prepared
    if out:
        jpath = confusion_picture(res, out, f"{os.path.basename(os.path.normpath(run_dir))}: {split}",
                                  outputs)
        click.echo(f"{out}: confusion matrix ({jpath} holds the numbers)", err=as_json)
    if as_json:
        click.echo(strict_json(report, indent=2))
        return
    if report.get("decoding"):
        click.echo("decoding: " + ", ".join(f"{k} {v}" for k, v in report["decoding"].items())
                   + " (not the recipe's)")
    for label, figures in (res.items() if "static" in res or "ensemble" in res else [(None, res)]):
        figs = prep.head.format_metrics(figures)
        tag = f" {label}" if label else ""
        count = "" if "examples" in figures else f" ({len(prep.splits[split])} examples)"  # a head's own count
        click.echo(f"{split}{tag}{count}: {figs[0]}")
        for line in figs[1:]:
            click.echo(line)
        if "rule" in figures:
            click.echo(f"  update rule: {figures['rule']}")
        if "settings" in figures:
            click.echo(f"  chosen on valid: {format_settings(figures['settings'])}")
    for name, bits in (report.get("compressors") or {}).items():
        click.echo(f"compressor {name}: " + (f"{bits:.4f} bits/token" if isinstance(bits, float) else bits))
    for name, per_split in baselines.items():
        if isinstance(per_split, dict) and split in per_split:
            click.echo("\n".join(format_baseline(name, {split: per_split[split]})))
