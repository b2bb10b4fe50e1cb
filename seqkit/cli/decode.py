"""``seqkit generate``, ``seqkit predict`` and ``seqkit attention``: answers of a trained run
(thin layers over :meth:`seqkit.Run.generate`, :meth:`~seqkit.Run.predict`,
:meth:`~seqkit.Run.transduce` and :meth:`~seqkit.Run.attention`), and how their lines are printed.

The seqkit modules a command needs only when it runs are imported inside the functions that use
them, so ``seqkit --help`` does not load them."""

from __future__ import annotations

import json

import click

from seqkit.cli.common import read_input, with_common_options
from seqkit.runs.rundir import json_line, strict_json


@click.command()
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
@click.option("--num", type=click.IntRange(min=1, max=10_000), default=1, show_default=True,
              help="How many sampled continuations (at most 10,000; they are sampled as one batch).")
@click.option("--seed", type=int, default=0, show_default=True, help="Sampling seed (any integer).")
@click.option("--cache", is_flag=True, help="Language model, data.layout stream: draw each token from the "
              "network mixed with a continuous cache of its hidden states over the prompt and the text "
              "generated so far (Grave et al. 2017), as evaluate --cache scores it; settings chosen on the "
              "valid split. Sampling or --greedy only; --temperature applies to the network before "
              "mixing, --top-k / --top-p to the mixture.")
@click.option("--mix", is_flag=True, help="Language model, data.layout stream: draw each token from the "
              "network mixed with an online n-gram and a longest-match model that read the training text, "
              "then the prompt and the text generated so far, as evaluate --mix scores it (reading the "
              "training text takes a while on a large corpus); combines with --cache.")
@click.option("--json", "as_json", is_flag=True, help='Print {"prompt", "outputs": [{"text", "score"?}]} as JSON.')
@with_common_options
def generate(run_dir, prompt, max_length, temperature, top_k, top_p, greedy, beam_width,
             length_penalty, n_best, min_length, num, seed, cache=False, mix=False, as_json=False):
    """Generate text from a trained language-model run (sampling, greedy or beam search; --cache /
    --mix: from the network mixed with the adaptive models of evaluate --cache / --mix)."""
    from seqkit.runs.run import Run, check_decoding_options

    check_decoding_options(greedy=greedy, beam_width=beam_width, length_penalty=length_penalty,
                           n_best=n_best, min_length=min_length, adaptive=cache or mix)  # before the run is read

    results = Run(run_dir).generate(prompt, max_length=max_length, temperature=temperature, top_k=top_k,
                                    top_p=top_p, greedy=greedy, beam_width=beam_width,
                                    length_penalty=length_penalty, n_best=n_best, min_length=min_length,
                                    num=num, seed=seed, cache=cache, mix=mix)
    if as_json:  # beam search: (text, score) pairs; sampling and greedy: texts
        click.echo(json.dumps({"prompt": prompt, "outputs": [
            {"text": r} if isinstance(r, str) else {"text": r[0], "score": float(r[1])} for r in results]},
            indent=2, ensure_ascii=False))
        return
    for r in results:  # beam search: (text, score) pairs, the score shown when there are several
        click.echo(r if isinstance(r, str) else r[0] if len(results) == 1 else f"{r[1]:.4f}\t{r[0]}")


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--input", "input_path", default="-", show_default=True,
              help="Input file, or - for stdin.")
@click.option("--input-format", type=click.Choice(["auto", "text", "conll", "ts", "table"]), default="auto",
              show_default=True, help="text: one sequence per line; conll: a token per line, blank "
              "lines between sequences; ts: UCR/UEA .ts file; table: CSV / TSV / JSON lines, the "
              "run's text (tagger: tokens) column read, other columns ignored; auto: ts for a "
              "frames run or a *.ts file, table for a *.csv, *.tsv, *.tab, *.jsonl or *.ndjson "
              "file, conll for a *.conll, *.conllu, *.iob or *.bio file, else text.")
@click.option("--format", "out_format", type=click.Choice(["text", "jsonl"]), default="text",
              show_default=True, help="Output: text lines or JSON lines.")
@click.option("--probabilities", is_flag=True, help="Also print the probabilities.")
@click.option("--beam-width", type=int, help="seq2seq runs: beam width [default: recipe decoding.beam_width].")
@click.option("--n-best", type=int, help="seq2seq runs: print the N best outputs with their scores "
              "(N <= beam width) [default: 1].")
@click.option("--length-penalty", type=float, help="seq2seq runs: GNMT length penalty alpha "
              "[default: recipe decoding.length_penalty].")
@click.option("--plot", type=click.Path(dir_okay=False), help="Also draw the answers into this PNG, for "
              "a run whose head draws them (a forecasting run: the input's last rows, the forecast and "
              "its quantile bands). Checked before the run loads.")
@click.option("--overwrite", is_flag=True, help="--plot: replace the PNG even when seqkit did not write it "
              "(never a run's own files, the recipe, the data or the input).")
@with_common_options
def predict(run_dir, input_path, input_format, out_format, probabilities, beam_width, n_best,
            length_penalty, plot=None, overwrite=False):
    """Label sequences (acceptor), tag tokens (tagger) or transduce lines (seq2seq, e.g. words to
    pronunciations: `input<TAB>rank<TAB>score<TAB>output` per hypothesis) with a trained run; a
    plugin head answers its own way (a forecasting run: the next steps of each series in a table
    like its training file)."""

    if beam_width is not None or n_best is not None:  # fail before loading the run
        from seqkit.inference.decoding import check_beam_args

        check_beam_args(beam_width if beam_width is not None else max(n_best or 1, 1), n_best or 1,
                        length_penalty or 0.0, 0, 1)
    name, text = read_input(input_path)
    from seqkit.runs.run import Run

    run = Run(run_dir)
    results = run.predict(text, input_format=input_format, beam_width=beam_width, n_best=n_best,
                          length_penalty=length_penalty, name=name, plot=plot, overwrite=overwrite)
    head = run.prepared.head
    if head.answers == "transduce":
        for res in results:
            click.echo(format_pair(res, out_format))
        return
    for res in results:
        click.echo(head.format_prediction(res, out_format, probabilities))
    if plot:
        click.echo(f"wrote {plot}", err=True)


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--input", "text", required=True, help="The source, e.g. a word.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="PNG file to write.")
@click.option("--beam-width", type=click.IntRange(min=1), help="Beam width of the drawn output "
              "[default: recipe decoding.beam_width].")
@click.option("--overwrite", is_flag=True, help="Replace --out even when seqkit did not write it "
              "(never a run's own files, the recipe or the data).")
@with_common_options
def attention(run_dir, text, out, beam_width, overwrite):
    """Draw the attention weights of a seq2seq run for one input (source along x, output along y)."""
    from seqkit.data.lines import split_lines
    from seqkit.diagnostics.alignment import draw
    from seqkit.outputs import picture_outputs, protected_by_runs
    from seqkit.runs.run import Run

    outputs = picture_outputs(out, overwrite=overwrite, protect=protected_by_runs([run_dir]), with_json=False)
    source, target, w = Run(run_dir).attention(text, beam_width=beam_width, name="--input")
    src = next(line.strip() for line in split_lines(text) if line.strip())  # the line aligned
    draw(source, target, w, out, title=f"{src} -> {' '.join(target[:-1])}", outputs=outputs)
    click.echo(f"{out}: {len(target)} x {len(source)} attention weights ({' '.join(target[:-1])})")


def format_pair(res: dict, fmt: str) -> str:
    """``text``: one line per hypothesis, ``input<TAB>rank<TAB>score<TAB>symbols`` (rank from 1;
    a sentencepiece target prints its decoded text);
    ``jsonl``: the dict as one JSON line."""
    if fmt == "jsonl":
        return json_line(res)
    return "\n".join(f"{res['input']}\t{k}\t{h['score']:.4f}\t{h['text'] if 'text' in h else ' '.join(h['output'])}"
                     for k, h in enumerate(res["hypotheses"], start=1))
