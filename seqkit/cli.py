"""The ``seqkit`` command line (click).

Every command takes ``--plugin PATH_OR_MODULE`` (repeatable), ``--debug``, and ``-v/--verbose``
(seqkit's DEBUG lines too) or ``-q/--quiet`` (warnings and errors only, no progress). Progress
lines with an ETA (:mod:`seqkit.progress`) are drawn on stderr only when it is a terminal.
A user error prints one paragraph to stderr and exits with status 2; an
internal error exits with 1 (``--debug`` shows the traceback).
"""

from __future__ import annotations

import functools
import json
import os
import sys

import click
import numpy as np

from seqkit.errors import SeqkitError


_NEEDS_TF = {"train", "evaluate", "generate", "validate", "predict", "export", "stream", "inspect",
             "bench_step", "attention", "diagnose"}


def _third_party() -> bool:
    """True when an installed package declares seqkit plugins (their import may pull in TF)."""
    import importlib.metadata

    return any(importlib.metadata.entry_points(group=g) for g in ("seqkit.cells", "seqkit.heads", "seqkit.data"))


def _common(f):
    """Add ``--plugin``, ``--debug``, ``-v/--verbose`` and ``-q/--quiet``, and turn errors into
    clear messages. A command with a ``quiet`` parameter receives ``-q`` (``train``: no Keras
    progress bar)."""
    import inspect

    takes_quiet = "quiet" in inspect.signature(f).parameters

    @click.option("--plugin", "plugins", multiple=True, metavar="PATH_OR_MODULE",
                  help="Import a plugin (.py file or module) that registers cells, heads or data sources. Repeatable.")
    @click.option("--debug", is_flag=True, help="Show the full traceback on errors.")
    @click.option("-v", "--verbose", is_flag=True, help="More detail on stderr (seqkit's DEBUG lines).")
    @click.option("-q", "--quiet", is_flag=True, help="Only warnings and errors on stderr; no progress.")
    @functools.wraps(f)
    def wrapper(*args, plugins=(), debug=False, verbose=False, quiet=False, **kwargs):
        if verbose and quiet:
            raise click.UsageError("-v/--verbose and -q/--quiet exclude each other; give one.")
        if takes_quiet:
            kwargs["quiet"] = quiet
        try:
            from seqkit.registry import load_plugin

            if not debug and (f.__name__ in _NEEDS_TF or (f.__name__ == "list_" and (plugins or _third_party()))):
                from seqkit._quiet import import_tensorflow_quietly

                import_tensorflow_quietly()
            import logging

            from seqkit.log import to_stderr
            from seqkit.progress import shown

            level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
            # seqkit's log lines (a library call prints none) and progress go to stderr
            with to_stderr(level), shown(not quiet):
                for p in plugins:
                    load_plugin(p)
                return f(*args, **kwargs)
        except SeqkitError as exc:
            if debug:
                raise
            click.echo(f"error: {exc}", err=True)
            sys.exit(2)
        except click.exceptions.Exit:
            raise
        except click.ClickException:
            raise
        except Exception as exc:  # an unexpected failure: say so plainly
            if debug:
                raise
            from seqkit.guards import user_error

            err = user_error(exc, f.__name__)  # a read-only folder, a failing plugin cell
            if err is None:
                _internal(exc)
            click.echo(f"error: {err}", err=True)
            sys.exit(2)

    return wrapper


def _internal(exc: BaseException):
    click.echo(f"internal error: {type(exc).__name__}: {exc}\n(run again with --debug for "
               f"the traceback, and please report it)", err=True)
    sys.exit(1)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="seqkit")
def main():
    """seqkit: train, decode and ship recurrent sequence models (Keras 3).

    \b
    Typical use:
      seqkit train recipes/lm-pydoc-chars.yaml
      seqkit evaluate runs/lm-pydoc-chars
      seqkit generate runs/lm-pydoc-chars --prompt "The " --temperature 0.8
    """


def _default_run_dir(recipe) -> str:
    return os.path.join("runs", recipe.name)


@main.command()
@click.argument("recipe", required=False, type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE",
              help="Override a recipe key, e.g. --set training.epochs=1 --set model.cell=gru.")
@click.option("--run-dir", type=click.Path(file_okay=False), help="Where to write the run [default: runs/NAME].")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False),
              help="Continue an interrupted run from its last finished epoch.")
@click.option("--overwrite", is_flag=True, help="Replace an existing run directory.")
@click.option("--seeds", type=click.IntRange(min=1), default=None, metavar="N",
              help="Train N runs with seeds SEED, SEED+1, ... into RUN_DIR-seed<S> and write "
                   "RUN_DIR-seeds.json: mean, sample sd, min and max of every test figure.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the final metrics and the run directory as JSON (Keras's progress bar goes to stderr).")
@_common
def train(recipe, overrides, run_dir, resume_dir, overwrite, seeds, as_json=False, quiet=False):
    """Train the model a RECIPE describes; write the run directory.

    With --resume RUN_DIR the run's own recipe is used (RECIPE may be left out;
    --set still applies, e.g. --set training.epochs=20 to train longer).
    """
    from seqkit.recipe import load_recipe
    from seqkit.rundir import RECIPE

    if seeds is not None:
        if resume_dir:
            raise SeqkitError("--seeds trains new runs; resume one seed's run with "
                              "`seqkit train --resume RUN_DIR-seed<S>` (then run --seeds again with "
                              "--overwrite, or summarise by hand).")
        if not recipe:
            raise click.UsageError("give a RECIPE file with --seeds.")
        from seqkit.seeds import format_summary, train_seeds

        rec = load_recipe(recipe, list(overrides))
        summary = train_seeds(rec, seeds, run_dir or _default_run_dir(rec), overwrite=overwrite,
                              verbose=0 if quiet else 1)
        if as_json:
            click.echo(json.dumps(summary, indent=2, ensure_ascii=False))
            return
        for line in format_summary(summary, "test") or format_summary(summary, "valid"):
            click.echo(line)
        click.echo(f"runs: {', '.join(summary['runs'])}")
        click.echo(f"summary: {summary['path']}")
        return

    if resume_dir:
        if run_dir and os.path.abspath(run_dir) != os.path.abspath(resume_dir):
            raise SeqkitError("--run-dir and --resume name different directories; use one.")
        source = recipe or os.path.join(resume_dir, RECIPE)
        if not os.path.isfile(source):
            raise SeqkitError(f"{resume_dir}: not a run directory (no {RECIPE}).")
        from seqkit.rundir import RunDir

        RunDir(resume_dir).check(need_model=False)  # names a missing plugin; imports nothing
        # the run's own recipe is data: its plugins: are not imported (a RECIPE the user names is)
        rec = load_recipe(source, list(overrides), load_plugins=None if recipe else False)
        path = resume_dir
        from seqkit.guards import check_writable

        check_writable(path, "resume")
    else:
        if not recipe:
            raise click.UsageError("give a RECIPE file (or --resume RUN_DIR).")
        rec = load_recipe(recipe, list(overrides))
        path = run_dir or _default_run_dir(rec)
        from seqkit.guards import check_writable

        check_writable(path, "train")  # a read-only folder fails before the data is read
    from seqkit.train import train as do_train

    import contextlib

    # --json: stdout holds the JSON only; Keras writes its progress bar to stdout, so send it to stderr
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        metrics = do_train(rec, path, resume=bool(resume_dir), overwrite=overwrite, verbose=0 if quiet else 1)
    if as_json:
        from seqkit.rundir import strict_json

        click.echo(strict_json({"run_dir": path, "metrics": metrics}, indent=2))
        return
    if "worker" in metrics:  # a non-chief worker of a multi-worker job
        click.echo(f"{metrics['worker']}: trained {metrics['epochs']} epochs; the chief writes {path}")
        return
    from seqkit.registry import HEADS

    click.echo(_format_metrics(metrics, HEADS.get(rec.head.type)(rec)))
    click.echo(f"run directory: {path}")


def _format_baseline(name: str, figs) -> list[str]:
    """``baseline NAME: split figures`` lines (LM baselines are perplexities per split)."""
    if not isinstance(figs, dict):
        return [f"baseline {name}: {figs}"]
    if all(isinstance(v, (int, float)) for v in figs.values()):
        return [f"baseline {name} perplexity: " + ", ".join(f"{s} {v}" for s, v in figs.items())]
    return [f"baseline {name}: {s} " + ", ".join(f"{k} {v:.4f}" for k, v in f.items())
            for s, f in figs.items()]


def _format_metrics(m: dict, head=None) -> str:
    lines = []
    for split in ("valid", "test"):
        if split in m:
            figs = head.format_metrics(m[split]) if head is not None else [
                ", ".join(f"{k} {v:.4f}" for k, v in m[split].items() if isinstance(v, (int, float)))]
            lines.append(f"{split}: {figs[0]}")
            lines += figs[1:] if split == "test" else []
    for name, figs in (m.get("baselines") or {}).items():
        lines += _format_baseline(name, figs)
    if "train_seconds" in m:
        lines.append(f"trained {m.get('epochs')} epochs in {m['train_seconds']} s")
    return "\n".join(lines)


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--split", type=click.Choice(["test", "valid", "train"]), default="test", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
@click.option("--confusion-matrix", is_flag=True, help="Also report the confusion matrix (acceptor, tagger).")
@click.option("--out", type=click.Path(dir_okay=False),
              help="Also draw the row-normalised confusion matrix into this PNG (+ a .json beside it).")
@click.option("--dynamic", is_flag=True, help="Language model, data.layout stream: also report dynamic "
              "evaluation (an update on each chunk after scoring it; the run's files are not changed).")
@click.option("--dynamic-rule", metavar="sgd|rms", help="Update rule of --dynamic: sgd, or rms (Krause et "
              "al. 2018: step / RMS of training gradients, decay scaled by it) [default: recipe "
              "evaluation.dynamic_rule].")
@click.option("--dynamic-lr", type=float, help="Step size eta of --dynamic, > 0 [default: recipe "
              "evaluation.dynamic_lr].")
@click.option("--dynamic-decay", type=float, help="Decay lambda towards the trained weights per chunk, >= 0 "
              "[default: recipe evaluation.dynamic_decay].")
@click.option("--dynamic-chunk", type=int, help="Tokens per scored-then-adapted chunk, > 0 [default: "
              "recipe evaluation.dynamic_chunk].")
@_common
def evaluate(run_dir, split, as_json, confusion_matrix, out, dynamic=False, dynamic_lr=None,
             dynamic_rule=None, dynamic_decay=None, dynamic_chunk=None):
    """Evaluate a trained run on a held-out split (LM: cross-entropy, perplexity; acceptor:
    accuracy, macro-F1; tagger: token accuracy, per-tag P/R/F1, entity F1 for BIO/BIOES)."""
    from seqkit.run import Run

    run = Run(run_dir)
    report = run.evaluate(split, confusion_matrix=confusion_matrix or bool(out), dynamic=dynamic,
                          dynamic_lr=dynamic_lr, dynamic_rule=dynamic_rule, dynamic_decay=dynamic_decay,
                          dynamic_chunk=dynamic_chunk)  # {"split", **res, "baselines"}
    res = {k: v for k, v in report.items() if k not in ("split", "baselines")}
    baselines, prep = report["baselines"], run.prepared
    if out:
        from seqkit.diagnose_cli import confusion_picture

        jpath = confusion_picture(res, out, f"{os.path.basename(os.path.normpath(run_dir))}: {split}")
        click.echo(f"{out}: confusion matrix ({jpath} holds the numbers)", err=as_json)
    if as_json:
        from seqkit.rundir import strict_json

        click.echo(strict_json(report, indent=2))
        return
    for label, figures in (res.items() if "dynamic" in res else [(None, res)]):
        figs = prep.head.format_metrics(figures)
        tag = f" {label}" if label else ""
        click.echo(f"{split}{tag} ({len(prep.splits[split])} examples): {figs[0]}")
        for line in figs[1:]:
            click.echo(line)
        if label == "dynamic":
            click.echo(f"  update rule: {figures['rule']}")
    for name, per_split in baselines.items():
        if isinstance(per_split, dict) and split in per_split:
            click.echo("\n".join(_format_baseline(name, {split: per_split[split]})))


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--prompt", default="", help="Text to continue (tokenized like the training data; a run "
              "trained with data.layout stream: its lines prime the state, and generation goes on past "
              "line ends).")
@click.option("--max-length", type=click.IntRange(min=1, max=1_000_000),
              help="Most new tokens (at most 1,000,000) [default: recipe decoding.max_length].")
@click.option("--temperature", type=click.FloatRange(min=0, min_open=True), help="Sampling temperature [default: recipe].")
@click.option("--top-k", type=click.IntRange(min=0), help="Sample from the k most likely tokens only (0 = all).")
@click.option("--top-p", type=click.FloatRange(min=0, max=1, min_open=True),
              help="Nucleus sampling: sample from the most likely tokens holding this probability mass (1 = all).")
@click.option("--greedy", is_flag=True, help="Arg-max decoding instead of sampling.")
@click.option("--beam-width", type=int, help="Beam search with this many hypotheses [default: recipe "
              "decoding.beam_width when decoding.strategy is beam].")
@click.option("--length-penalty", type=float, help="GNMT length penalty alpha for beam search (0 = none; "
              "0.6-0.7 favours longer outputs) [default: recipe].")
@click.option("--n-best", type=int, help="Print the N best beam hypotheses with their scores (N <= beam width).")
@click.option("--min-length", type=click.IntRange(min=0), help="Beam search: fewest new tokens before the end marker.")
@click.option("--num", type=click.IntRange(min=1), default=1, show_default=True, help="How many sampled continuations.")
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed.")
@click.option("--json", "as_json", is_flag=True, help='Print {"prompt", "outputs": [{"text", "score"?}]} as JSON.')
@_common
def generate(run_dir, prompt, max_length, temperature, top_k, top_p, greedy, beam_width,
             length_penalty, n_best, min_length, num, seed, as_json=False):
    """Generate text from a trained language-model run (sampling, greedy or beam search)."""
    from seqkit.run import Run, check_decoding_options

    check_decoding_options(greedy=greedy, beam_width=beam_width, length_penalty=length_penalty,
                           n_best=n_best, min_length=min_length)  # before the run is read

    results = Run(run_dir).generate(prompt, max_length=max_length, temperature=temperature, top_k=top_k,
                                    top_p=top_p, greedy=greedy, beam_width=beam_width,
                                    length_penalty=length_penalty, n_best=n_best, min_length=min_length,
                                    num=num, seed=seed)
    if as_json:  # beam search: (text, score) pairs; sampling and greedy: texts
        click.echo(json.dumps({"prompt": prompt, "outputs": [
            {"text": r} if isinstance(r, str) else {"text": r[0], "score": float(r[1])} for r in results]},
            indent=2, ensure_ascii=False))
        return
    for r in results:  # beam search: (text, score) pairs, the score shown when there are several
        click.echo(r if isinstance(r, str) else r[0] if len(results) == 1 else f"{r[1]:.4f}\t{r[0]}")


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--input", "input_path", default="-", show_default=True,
              help="Input file, or - for stdin.")
@click.option("--input-format", type=click.Choice(["auto", "text", "conll", "ts"]), default="auto",
              show_default=True, help="text: one sequence per line; conll: a token per line, blank "
              "lines between sequences; ts: UCR/UEA .ts file; auto: ts for a frames run, else text.")
@click.option("--format", "out_format", type=click.Choice(["text", "jsonl"]), default="text",
              show_default=True, help="Output: text lines or JSON lines.")
@click.option("--probabilities", is_flag=True, help="Also print the probabilities.")
@click.option("--beam-width", type=int, help="seq2seq runs: beam width [default: recipe decoding.beam_width].")
@click.option("--n-best", type=int, help="seq2seq runs: print the N best outputs with their scores "
              "(N <= beam width) [default: 1].")
@click.option("--length-penalty", type=float, help="seq2seq runs: GNMT length penalty alpha "
              "[default: recipe decoding.length_penalty].")
@_common
def predict(run_dir, input_path, input_format, out_format, probabilities, beam_width, n_best,
            length_penalty):
    """Label sequences (acceptor), tag tokens (tagger) or transduce lines (seq2seq, e.g. words to
    pronunciations: `input<TAB>rank<TAB>score<TAB>output` per hypothesis) with a trained run."""
    from seqkit.predict import format_result

    if beam_width is not None or n_best is not None:  # fail before loading the run
        from seqkit.decoding import check_beam_args

        check_beam_args(beam_width if beam_width is not None else max(n_best or 1, 1), n_best or 1,
                        length_penalty or 0.0, 0, 1)
    name, text = _read_input(input_path)
    from seqkit.run import Run

    run = Run(run_dir)
    if input_format == "auto" and input_path.endswith(".ts"):
        input_format = "ts"
    results = run.predict(text, input_format=input_format, beam_width=beam_width, n_best=n_best,
                          length_penalty=length_penalty, name=name)
    if run.prepared.recipe.head.type == "seq2seq":
        from seqkit.transduce_cli import format_pair

        for res in results:
            click.echo(format_pair(res, out_format))
        return
    for res in results:
        click.echo(format_result(res, out_format, probabilities))


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--input", "text", required=True, help="The source, e.g. a word.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="PNG file to write.")
@click.option("--beam-width", type=click.IntRange(min=1), help="Beam width of the drawn output "
              "[default: recipe decoding.beam_width].")
@_common
def attention(run_dir, text, out, beam_width):
    """Draw the attention weights of a seq2seq run for one input (source along x, output along y)."""
    from seqkit.alignment_plot import draw
    from seqkit.run import Run

    source, target, w = Run(run_dir).attention(text, beam_width=beam_width, name="--input")
    src = next(line.strip() for line in text.splitlines() if line.strip())  # the line aligned
    draw(source, target, w, out, title=f"{src} -> {' '.join(target[:-1])}")
    click.echo(f"{out}: {len(target)} x {len(source)} attention weights ({' '.join(target[:-1])})")


@main.command()
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
@_common
def diagnose(runs, out_dir, max_lag, examples, positions, split):
    """Gradient flow through time (norm of dL_t/ds_{t-k} by lag k, the horizon where it falls
    below 1e-3 of k = 0) and gate statistics of trained runs, drawn into one PNG + JSON."""
    from seqkit.diagnose_cli import diagnose as run_diagnose, summary_lines

    png, jpath, results = run_diagnose(list(runs), out_dir, max_lag=max_lag, examples=examples,
                                       positions=positions, split=split)
    for line in summary_lines(results):
        click.echo(line)
    click.echo(f"wrote {png} and {jpath}")


@main.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="PNG to write (+ a .json beside it).")
@_common
def plot(runs, out):
    """Draw training curves (train/valid loss and metrics per epoch, learning rate if logged)
    from the runs' history.json, several runs overlaid."""
    from seqkit.diagnose_cli import plot_runs

    jpath = plot_runs(list(runs), out)
    click.echo(f"wrote {out} and {jpath}")


@main.command("list")
@click.argument("kind", required=False, type=click.Choice(["cells", "heads", "data"]))
@click.option("--json", "as_json", is_flag=True, help='Print {"cells": [{"name", "origin", "doc"}], '
              '"heads": ..., "data": ..., "conflicts": [...], "broken": [...]} as JSON.')
@_common
def list_(kind, as_json=False):
    """List registered cells, heads and data sources, and where each comes from."""
    from seqkit.registry import CELLS, DATA, HEADS

    regs = {"cells": CELLS, "heads": HEADS, "data": DATA}
    if as_json:
        out = {"conflicts": [], "broken": []}
        for name, reg in regs.items():
            if kind and kind != name:
                continue
            out[name] = [{"name": e.name, "origin": e.origin,
                          "doc": ((getattr(e.obj, "__doc__", "") or "").strip().splitlines() or [""])[0]}
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
            click.echo(f"  {e.name:<16} {e.origin:<22} {doc[0] if doc else ''}")
        for c in reg.conflicts():
            click.echo(f"  {c.name:<16} CONFLICT: claimed by " + " and ".join(sorted(o for o, _ in c.claims))
                       + "; unusable until one is uninstalled")
        for b in reg.broken:
            click.echo(f"  BROKEN {b.entry_point} ({b.origin}): {b.error}")


@main.command()
@click.argument("recipe", type=click.Path(dir_okay=False))
@click.option("--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="Override a recipe key.")
@click.option("--data/--no-data", "check_data", default=True, show_default=True,
              help="Also read the data and build the model (counts, vocabulary, parameters).")
@click.option("--show", is_flag=True, help="Print the resolved recipe (defaults filled).")
@click.option("--json", "as_json", is_flag=True, help='Print {"recipe", "ok": true, "resolved", "data", '
              '"parameters"} as JSON, or {"recipe", "ok": false, "errors": [...]} (exit status 2).')
@_common
def validate(recipe, overrides, check_data, show, as_json=False):
    """Check a RECIPE without training: every key, the data, the model it builds."""
    from seqkit.errors import RecipeError
    from seqkit.recipe import load_recipe

    if as_json:
        from seqkit.rundir import strict_json

        try:
            rec = load_recipe(recipe, list(overrides))
        except RecipeError as exc:
            click.echo(json.dumps({"recipe": recipe, "ok": False,
                                   "errors": getattr(exc, "problems", None) or [str(exc)]}, indent=2))
            raise
        out = {"recipe": recipe, "ok": True, "resolved": rec.to_dict()}
        if check_data:
            from seqkit.guards import build_model
            from seqkit.train import count_parameters, prepare

            prep = prepare(rec)
            out["data"] = {"source": str(prep.source), "examples": {k: len(v) for k, v in prep.splits.items()},
                           "assets": prep.head.describe_assets()}
            out["parameters"] = count_parameters(build_model(prep))
        click.echo(strict_json(out, indent=2, ensure_ascii=False))
        return
    rec = load_recipe(recipe, list(overrides))
    if show:
        click.echo(rec.to_yaml().rstrip())
    if check_data:
        from seqkit.guards import build_model
        from seqkit.train import count_parameters, prepare

        prep = prepare(rec)
        model = build_model(prep)
        params = count_parameters(model)
        click.echo(f"data: {prep.source}: " + ", ".join(f"{k} {len(v)}" for k, v in prep.splits.items())
                   + f" examples; {prep.head.describe_assets()}")
        click.echo(f"model: {params['total']:,} parameters (" +
                   ", ".join(f"{k} {v:,}" for k, v in params.items() if k not in ("total", "trainable")) + ")")
    click.echo(f"{recipe}: OK")


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["tflite", "saved_model", "all", "keras"]),
              default="tflite", show_default=True,
              help="TFLite step model, SavedModel with signatures, or both; keras: a portable "
              "inference model.keras with stock Keras layers only (loads without seqkit).")
@click.option("--out", type=click.Path(file_okay=False), help="Export directory [default: exports/NAME].")
@click.option("--quantize", type=click.Choice(["none", "float16", "dynamic-range", "int8", "int16x8"]),
              default="none", show_default=True,
              help="TFLite precision: float32; float16 or int8 (dynamic-range) weights with float "
              "activations; full integer: int8 weights and activations, or int16x8 (int16 "
              "activations, int8 weights), calibrated on training records.")
@click.option("--io-type", type=click.Choice(["float", "int"]), default="float", show_default=True,
              help="--quantize int8 / int16x8: float inputs and outputs (quantized inside the "
              "model) or integer ones (int8 / int16; token ids stay int32).")
@click.option("--calibration-examples", type=click.IntRange(min=1), default=128, show_default=True,
              help="--quantize int8 / int16x8: training records the calibration streams.")
@click.option("--tolerance", type=float, help="Largest allowed max |logit diff| vs Keras [default: 1e-4 for float32].")
@click.option("--min-agreement", type=click.FloatRange(0, 1),
              help="Smallest allowed arg-max agreement vs Keras on held-out data; below it nothing "
              "is written [default: 0.999 float32, 0.99 float16 / dynamic-range, 0.98 int16x8, "
              "0.95 int8].")
@click.option("--parity-examples", type=click.IntRange(min=1), default=32, show_default=True,
              help="Held-out examples streamed through the export for the parity check.")
@click.option("--overwrite", is_flag=True, help="Replace an existing export directory.")
@click.option("--full-sequence", is_flag=True,
              help="TFLite: the whole-sequence model for a pinned --batch/--length instead of the step "
              "model (needed for bidirectional encoders).")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True,
              help="--full-sequence: rows per call; --state internal: rows of the state.")
@click.option("--length", type=click.IntRange(min=1),
              help="--full-sequence: steps per row; seq2seq runs: the encoder's pinned source "
              "length [default: the run's data.max_length].")
@click.option("--state", type=click.Choice(["explicit", "internal"]), default="explicit",
              show_default=True,
              help="TFLite step model: explicit (takes and returns its states) or internal (keeps "
              "them inside, signatures step + reset, --batch rows fixed; LM, acceptor, tagger).")
@_common
def export(run_dir, fmt, out, quantize, io_type, calibration_examples, tolerance, min_agreement,
           parity_examples, overwrite, full_sequence, batch, length, state):
    """Export a trained run (SavedModel / TFLite step model; seq2seq: encode + decode_step signatures),
    checked against Keras before writing."""
    from seqkit.run import Run

    report = Run(run_dir).export(out, format=fmt, quantize=quantize, tolerance=tolerance,
                                 min_agreement=min_agreement, parity_examples=parity_examples,
                                 overwrite=overwrite, full_sequence=full_sequence, batch=batch, length=length,
                                 state=state, io_type=io_type, calibration_examples=calibration_examples)
    out = report["out"]
    if fmt == "keras":
        r = report
        click.echo(f"keras: {r['path']} (stock Keras layers in place of {', '.join(r['rewritten']) or 'nothing'}), "
                   f"max |output diff| {r['max_abs_diff']:.3g}")
        return
    for kind in ("saved_model", "saved_model_predict", "tflite"):
        if kind in report:
            r = report[kind]
            click.echo(f"{kind}: max |logit diff| {r['max_abs_diff']:.3g}, arg-max agreement "
                       f"{r['argmax_agreement']:.4f} ({r['positions']} positions)"
                       + (f", {r['bytes']:,} bytes, ops {', '.join(r['ops'])}" if kind == "tflite" else "")
                       + (f"; held-out {r['task']['metric']} {r['task']['export']:.4g} (Keras "
                          f"{r['task']['keras']:.4g})" if "task" in r else "")
                       + (f"; state internal, max |logit diff| vs the explicit-state model "
                          f"{r['explicit_state_max_abs_diff']:.3g}" if "explicit_state_max_abs_diff" in r else ""))
        if f"{kind}_decoding" in report:  # seq2seq: outputs identical to Keras's transduce
            r = report[f"{kind}_decoding"]
            click.echo(f"{kind} decoding: identical to Keras on {r['greedy']['identical']:.4f} (greedy), "
                       f"{r['beam']['identical']:.4f} (beam {report['decoding']['beam_width']}) of "
                       f"{r['beam']['sequences']} sources")
    click.echo(f"export directory: {out}")


@main.command()
@click.argument("export_dir", type=click.Path())
@click.option("--prompt", default="", help="Text to continue (language-model exports).")
@click.option("--max-length", type=click.IntRange(min=1),
              help="Most new tokens [default: 80; seq2seq: the export's decoding.max_length].")
@click.option("--temperature", type=click.FloatRange(min=0, min_open=True), default=0.8, show_default=True)
@click.option("--top-k", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--greedy", is_flag=True, help="Arg-max decoding instead of sampling (seq2seq: instead of beam search).")
@click.option("--beam-width", type=click.IntRange(min=1),
              help="seq2seq exports: beam width [default: the export's decoding.beam_width].")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--input", "input_path",
              help="Acceptor/tagger exports: a .ts file (frames) or text, one sequence per line "
              "(tokens); seq2seq exports: one source per line; - for stdin [default: stdin].")
@_common
def stream(export_dir, prompt, max_length, temperature, top_k, greedy, beam_width, seed, input_path):
    """Run an exported TFLite step model one input at a time, carrying the state (the on-device loop).

    Language model: continue --prompt (a model trained with data.layout stream: the prompt's lines
    prime the state and generation goes on past line ends to --max-length). Acceptor: print the running answer after every frame/token.
    Tagger: print each token's tag as it comes (a CRF tagger: each line once it ends, as the
    best tag path -- a step's tag can change until the sequence ends). Encoder-decoder (seq2seq): encode each input line,
    then decode it symbol by symbol (beam search, or --greedy) and print the output symbols.
    A full-sequence export (bidirectional encoder) answers each whole input line / utterance.
    EXPORT_DIR may also be the export's .tflite file alone: its metadata is embedded in it."""
    from seqkit.data.subword import TextTokenizer
    from seqkit.data.vocab import START_ID, UNK_ID, Vocabulary
    from seqkit.runtime.streaming import StreamingModel, read_export_metadata

    exported = read_export_metadata(export_dir)
    head = exported.get("head")
    if head == "seq2seq":
        if prompt:
            raise SeqkitError("--prompt is for language-model exports; give a seq2seq export its "
                              "sources with --input FILE (one per line) or on stdin.")
        _stream_seq2seq(export_dir, input_path or "-", greedy=greedy, beam_width=beam_width,
                        max_length=max_length)
        return
    if beam_width is not None:
        raise SeqkitError("--beam-width is for seq2seq exports; this export streams one step model.")
    if head in ("acceptor", "tagger") and prompt:
        raise SeqkitError(f"--prompt is for language-model exports; this {head} export reads its "
                          f"sequences from --input FILE or stdin.")
    if head == "language_model" and input_path:
        raise SeqkitError("--input is for acceptor, tagger and seq2seq exports; a language model "
                          "continues --prompt TEXT.")
    max_length = max_length or 80
    if exported.get("artefact") == "full_sequence":  # bidirectional: whole sequences at once
        from seqkit.runtime.full_sequence import FullSequenceModel

        _stream_sequences(FullSequenceModel(export_dir), input_path or "-", export_dir)
        return
    rt = StreamingModel(export_dir)
    meta = rt.metadata
    if meta["head"] in ("acceptor", "tagger"):
        _stream_sequences(rt, input_path or "-", export_dir)
        return
    if meta["head"] != "language_model":
        raise SeqkitError(f"{export_dir}: streaming text generation needs a language-model export; "
                          f"this one is '{meta['head']}'.")
    vocab = Vocabulary(meta["vocab"])
    tok = TextTokenizer.from_export(export_dir, meta)  # a lone .tflite carries its subword model
    across = meta.get("layout") == "stream"  # a stream-trained model: the state goes on across lines
    encode = lambda text: vocab.encode(tok.split(text))  # noqa: E731
    if across:  # a prompt's lines prime the state, line breaks read as <s> (seqkit.data.stream)
        from seqkit.data.stream import prompt_ids

        ids = prompt_ids(prompt, encode)
    else:
        ids = [START_ID] + encode(prompt)
    if UNK_ID in ids:
        from seqkit import log

        log.warn("prompt tokens outside the vocabulary were read as [UNK].")
    new = rt.generate(ids, max_length=max_length, greedy=greedy, temperature=temperature,
                      top_k=top_k, seed=seed)
    if tok.mode == "sentencepiece":  # decoded with the prompt: a piece's "▁" is the space before it
        toks = tok.split(prompt)
        full, pre = tok.join(toks + vocab.decode_tokens(new)), tok.join(toks)
        click.echo(prompt + full[len(pre):] if full.startswith(pre) else full)
        return
    join = "" if meta["tokenizer"] == "char" else " "
    if across:
        from seqkit.data.stream import decode_lines

        cont = decode_lines(vocab, new, join=join)
        sep = join if prompt and cont and join and not prompt.endswith(("\n", " ")) \
            and not cont.startswith("\n") else ""
        click.echo(prompt + sep + cont)
        return
    click.echo(prompt + (join if prompt and join else "") + vocab.decode(new, join=join))


def _read_input(input_path: str) -> tuple[str, str]:
    """``(name, text)`` of ``--input`` (``-`` = stdin)."""
    if input_path == "-":
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
        if isinstance(data, str):
            return "<stdin>", data
        try:
            return "<stdin>", data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SeqkitError(f"<stdin>: not UTF-8 (byte {exc.start}: {exc.reason}); convert the "
                              f"input first, e.g. `iconv -f GBK -t UTF-8`.") from exc
    from seqkit.data.base import read_text

    return input_path, read_text(input_path, key="--input")


def _stream_seq2seq(export_dir: str, input_path: str, *, greedy: bool, beam_width, max_length) -> None:
    """``seqkit stream`` for encoder-decoder exports: one line of output symbols per input line
    (see :mod:`seqkit.runtime.seq2seq_stream`)."""
    from seqkit.runtime.seq2seq_stream import Seq2SeqModel, read_sources

    if greedy and beam_width is not None:
        raise SeqkitError("--greedy and --beam-width exclude each other (--beam-width 1 with length penalty 0 is greedy).")
    rt = Seq2SeqModel(export_dir)
    name, text = _read_input(input_path)
    for _, ids in read_sources(text, name, rt):
        out = (rt.greedy(ids, max_length) if greedy
               else rt.beam_search(ids, beam_width=beam_width, max_length=max_length)[0][0])
        click.echo(rt.text(out))


def _stream_sequences(rt, input_path: str, export_dir: str | None = None) -> None:
    """``seqkit stream`` for acceptor / tagger exports (see :mod:`seqkit.runtime.sequence_stream`);
    a full-sequence export answers each whole sequence (acceptor: its final line only)."""
    from seqkit.runtime.sequence_stream import full_sequence_answers, read_stream_input, stream_answers

    name, text = _read_input(input_path)
    inputs = read_stream_input(text, name, rt.metadata, export_dir)
    tagger = rt.metadata["head"] == "tagger"
    if tagger and rt.metadata.get("crf"):
        from seqkit import log

        log.info("note: CRF tagger -- tags are the best path of each whole line (Viterbi); a step's "
                 "tag can change until its sequence ends, so each line prints when it ends.")  # -q hides it
    answers = full_sequence_answers if rt.metadata.get("artefact") == "full_sequence" else stream_answers
    for ans in answers(rt, inputs):
        seq = inputs[ans.index]
        last = ans.t == len(seq.steps) - 1
        if tagger:
            word = seq.tokens[ans.t] if seq.tokens is not None else str(ans.t)
            click.echo(f"{word}/{ans.name}" + ("" if last else " "), nl=last)
        else:
            click.echo(f"{seq.where}\tstep {ans.t + 1}\t{ans.name}\t{ans.probability:.4f}"
                       + ("\tfinal" if last else ""))


@main.command()
@click.argument("path", type=click.Path(exists=True))
@click.option("--metadata", "show_metadata", is_flag=True,
              help="Print the metadata embedded in the .tflite (the export's metadata.json) and nothing else.")
@click.option("--json", "as_json", is_flag=True, help='Print {"model", "bytes", "signatures", "ops", '
              '"metadata"} as JSON.')
@_common
def inspect(path, show_metadata, as_json=False):
    """Show a .tflite model's signatures, tensor shapes, ops and size (or an export directory's),
    and the seqkit metadata embedded in it."""
    from seqkit.export import embedded_metadata
    from seqkit.export.tflite import interpreter, op_names
    from seqkit.rundir import strict_json
    from seqkit.runtime.streaming import read_export_metadata

    model = os.path.join(path, "model.tflite") if os.path.isdir(path) else path
    if not os.path.isfile(model):
        raise SeqkitError(f"{path}: no model.tflite here.")
    try:
        it = interpreter(model)
    except ValueError as exc:
        raise SeqkitError(f"{model}: not a valid TFLite model ({exc}).") from exc
    found = embedded_metadata.entries(model)
    embedded = embedded_metadata.read(model)
    if show_metadata:
        if embedded is None:
            raise SeqkitError(f"{model}: no seqkit metadata embedded (entry '{embedded_metadata.KEY}'): "
                              f"not written by `seqkit export`, or by an older seqkit; export the run again.")
        click.echo(strict_json(embedded, indent=1, ensure_ascii=False))
        return
    if as_json:
        _inspect_json(model, it, embedded)
        return
    click.echo(f"{model}: {os.path.getsize(model):,} bytes")
    for key in it.get_signature_list():
        runner = it.get_signature_runner(key)
        click.echo(f"signature '{key}':")
        for kind, details in (("in ", runner.get_input_details()), ("out", runner.get_output_details())):
            for name, d in details.items():
                shape = [int(v) if v >= 0 else None for v in d["shape_signature"]]
                click.echo(f"  {kind} {name:<12} {str(shape):<14} {np.dtype(d['dtype']).name}")
    click.echo("ops: " + ", ".join(op_names(model)))
    meta = embedded
    if os.path.basename(model) == "model.tflite" and os.path.isfile(os.path.join(os.path.dirname(model),
                                                                                  "metadata.json")):
        try:
            meta = read_export_metadata(model)  # metadata.json beside it: must agree with the embedded
        except SeqkitError as exc:
            click.echo(f"seqkit: warning: {exc}", err=True)
    if embedded is not None:
        files = [k for k in found if k.startswith(embedded_metadata.FILE_PREFIX) and found[k]]
        click.echo(f"metadata: embedded, entry '{embedded_metadata.KEY}' ({len(found[embedded_metadata.KEY]):,} "
                   f"bytes of JSON)" + (f", files {', '.join(files)}" if files else ""))
    elif meta is not None:
        click.echo("metadata: metadata.json only (an export from before seqkit embedded it in the model)")
    if meta is not None:
        inp = meta.get("full_sequence", {}).get("input") or meta["input"]
        sizes = (f"vocabulary {len(meta['vocab'])}" if meta.get("vocab") else "frames")
        sizes += f", {len(meta['labels'])} classes" if meta.get("labels") else ""
        if meta.get("target_vocab"):
            enc = meta["encoder"]
            sizes += (f", target vocabulary {len(meta['target_vocab'])}, encoder pinned to "
                      f"[1, {enc['pinned_length']}], attention {meta['attention']}, states "
                      + " ".join(s["name"] for s in meta["state_layout"]))
        if meta.get("state") == "internal":
            sizes += (f", state inside the model (batch {meta.get('batch')}): "
                      + " ".join(s["name"] for s in meta["state_layout"]))
        click.echo(f"head {meta['head']}, {meta.get('artefact', 'step')} model, input {inp['kind']}, "
                   f"{sizes}, quantize {meta['quantize']}"
                   + (", integer I/O" if meta.get("io_type") == "int" else "")
                   + f", seqkit {meta['seqkit_version']}")
        if inp["kind"] == "token":
            click.echo("tokenizer: " + _describe_tokenizers(meta))


def _describe_tokenizers(meta: dict) -> str:
    """How an export splits its text input (and a seq2seq target), e.g. ``sentencepiece
    (subword.model: sentencepiece unigram, 60 pieces)``."""
    def side(mode, model, about):
        return f"{mode} ({model}: {about})" if model else str(mode)

    out = side(meta.get("token_mode") or meta.get("tokenizer"), meta.get("subword_model"), meta.get("subword"))
    if meta.get("target_tokenizer"):
        out += "; target " + side(meta["target_tokenizer"], meta.get("target_subword_model"),
                                  meta.get("target_subword"))
    return out + (", lower-cased" if meta.get("lowercase") else "")


def _inspect_json(model: str, it, embedded: dict | None = None) -> None:
    """``seqkit inspect --json``: signatures (tensor shapes, ``null`` = any size, dtypes), ops,
    size, and the export's metadata (``metadata.json``, else the copy embedded in the file; less
    its vocabularies) when there is one."""
    from seqkit.export.tflite import op_names

    sigs = {}
    for key in it.get_signature_list():
        runner = it.get_signature_runner(key)
        sigs[key] = {kind: {name: {"shape": [int(v) if v >= 0 else None for v in d["shape_signature"]],
                                   "dtype": np.dtype(d["dtype"]).name} for name, d in details.items()}
                     for kind, details in (("inputs", runner.get_input_details()),
                                           ("outputs", runner.get_output_details()))}
    out = {"model": model, "bytes": os.path.getsize(model), "signatures": sigs, "ops": op_names(model)}
    from seqkit.runtime.streaming import read_export_metadata

    meta = dict(embedded) if embedded else None
    if meta is None and os.path.isfile(os.path.join(os.path.dirname(model), "metadata.json")):
        meta = read_export_metadata(os.path.dirname(model) or ".")  # an export from before embedding
    if meta:
        for key in ("vocab", "target_vocab", "labels"):  # sizes, not the lists
            if isinstance(meta.get(key), list):
                meta[f"{key}_size"] = len(meta.pop(key))
        out["metadata"] = meta
    click.echo(json.dumps(out, indent=2, ensure_ascii=False))


@main.command("bench-step")
@click.argument("export_dir", type=click.Path())
@click.option("--run", "run_dir", type=click.Path(file_okay=False),
              help="Also time the Keras step of this run (inside tf.function) for comparison.")
@click.option("--steps", type=click.IntRange(min=10), default=500, show_default=True)
@_common
def bench_step(export_dir, run_dir, steps):
    """Per-step latency (median, p95, microseconds) of the TFLite step model, batch 1 (a --state
    internal export: its fixed batch)."""
    import time

    from seqkit.runtime.streaming import StreamingModel

    def timeit(fn):
        for _ in range(20):
            fn()
        ts = []
        for _ in range(steps):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e6)
        return float(np.median(ts)), float(np.percentile(ts, 95))

    rt = StreamingModel(export_dir)
    rows = int(rt.metadata.get("batch") or 1)  # a --state internal export takes its fixed batch
    shape = [rows] + [int(v) for v in rt.metadata["input"]["shape"][1:]]
    x1 = np.full(shape, 4 if rt.input_dtype.kind == "i" else 0.5, rt.input_dtype)  # one token id / frame
    rows = [("tflite " + rt.metadata["quantize"], *timeit(lambda: rt.step(x1)))]
    if run_dir:
        import tensorflow as tf

        from seqkit.train import load_run

        prep, model = load_run(run_dir)
        if (prep.recipe.head.type != rt.metadata.get("head")
                or (prep.vocab is not None and prep.vocab.tokens != rt.metadata.get("vocab"))):
            raise SeqkitError(f"--run {run_dir}: not the run this export came from (head "
                              f"'{prep.recipe.head.type}', export head '{rt.metadata.get('head')}', "
                              f"or another vocabulary); pass the run you exported.")
        st = prep.head.stepper(model)
        states = st.initial_state(1)
        fn = tf.function(st.step)
        tok = tf.constant(x1)
        rows.append(("keras tf.function", *timeit(lambda: fn(tok, states)[0].numpy())))
    click.echo(f"{'path':<24} {'median us':>10} {'p95 us':>10}")
    for name, med, p95 in rows:
        click.echo(f"{name:<24} {med:>10.1f} {p95:>10.1f}")


if __name__ == "__main__":  # pragma: no cover
    main()
