"""``seqkit export``, ``seqkit stream``, ``seqkit inspect`` and ``seqkit bench-step``: shipping a
run (a thin layer over :meth:`seqkit.Run.export`) and running, reading and timing what was shipped
(the TFLite runtimes of :mod:`seqkit.runtime`).

TensorFlow, Keras and the seqkit modules that import them, NumPy and the seqkit modules a command
needs only when it runs are imported inside the functions that use them, so ``seqkit --help`` loads
neither them nor TensorFlow."""

from __future__ import annotations

import json
import os
import time

import click

from seqkit.cli.common import read_input, with_common_options
from seqkit.errors import SeqkitError
from seqkit.runs.rundir import strict_json


@click.command()
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
@click.option("--cell-scaling/--no-cell-scaling", default=True, show_default=True,
              help="--quantize int8 step models: LSTM cell states carried divided by a per-unit "
              "scale from the calibration records, so each unit uses the whole int8 range; "
              "--no-cell-scaling: the plain cell state, one range for all units.")
@click.option("--int16-cell", is_flag=True,
              help="--quantize int8 step models of LSTM runs: int8 matrix products and an int16 "
              "cell state, by Google's ai-edge-quantizer (pip install \"seqkit[quantizer]\"). "
              "Closer to Keras than plain int8 (lm-pydoc-chars: agreement 0.984 vs 0.949), same "
              "size; on x86 a step costs about what float32's does. See docs/export.md.")
@click.option("--tolerance", type=float, help="Largest allowed max |logit diff| vs Keras [default: 1e-4 for "
              "float32]; --format keras: largest max |diff| / max(1, max |output|) [default: 1e-5].")
@click.option("--min-agreement", type=click.FloatRange(0, 1),
              help="Smallest allowed arg-max agreement vs Keras on held-out data; below it nothing "
              "is written [default: 0.999 float32, 0.99 float16 / dynamic-range, 0.98 int16x8, "
              "0.95 int8].")
@click.option("--parity-examples", type=click.IntRange(min=1), default=32, show_default=True,
              help="Held-out examples streamed through the export for the parity check.")
@click.option("--overwrite", is_flag=True, help="Replace an existing export directory.")
@click.option("--full-sequence/--step", default=None,
              help="TFLite: the whole-sequence model for a pinned --batch/--length, or the step "
              "model [default: whole-sequence for a bidirectional acceptor or tagger, which has "
              "no step model; the step model otherwise].")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True,
              help="--full-sequence: rows per call; --state internal: rows of the state.")
@click.option("--length", type=click.IntRange(min=1),
              help="--full-sequence: steps per row; seq2seq runs: the encoder's pinned source "
              "length [default: the run's data.max_length].")
@click.option("--state", type=click.Choice(["explicit", "internal"]), default="explicit",
              show_default=True,
              help="TFLite step model: explicit (takes and returns its states) or internal (keeps "
              "them inside, signatures step + reset, --batch rows fixed; LM, acceptor, tagger).")
@click.option("--calibration", "calibration_file", type=click.Path(dir_okay=False),
              help="JSON Lines records to calibrate on [default: the run's training data, or its "
              "export_sample.json where the data is missing].")
@click.option("--parity", "parity_file", type=click.Path(dir_okay=False),
              help="JSON Lines records for the parity check [default: the run's held-out data, or "
              "its export_sample.json].")
@with_common_options
def export(run_dir, fmt, out, quantize, io_type, calibration_examples, cell_scaling, int16_cell, tolerance,
           min_agreement, parity_examples, overwrite, full_sequence, batch, length, state,
           calibration_file, parity_file):
    """Export a trained run (SavedModel / TFLite step model; seq2seq: encode + decode_step signatures),
    checked against Keras before writing."""
    from seqkit.export.calibration import parity_words
    from seqkit.runs.run import Run

    report = Run(run_dir).export(out, format=fmt, quantize=quantize, tolerance=tolerance,
                                 min_agreement=min_agreement, parity_examples=parity_examples,
                                 overwrite=overwrite, full_sequence=full_sequence, batch=batch, length=length,
                                 state=state, io_type=io_type, calibration_examples=calibration_examples,
                                 cell_scaling=cell_scaling, int16_cell=int16_cell,
                                 calibration=calibration_file,
                                 parity=parity_file)
    out = report["out"]
    if fmt == "keras":
        r = report
        click.echo(f"keras: {r['path']} (stock Keras layers in place of {', '.join(r['rewritten']) or 'nothing'}), "
                   f"max |output diff| {r['max_abs_diff']:.3g} (relative {r['max_rel_diff']:.3g}, tolerance {r['tolerance']:g})")
        click.echo(f"keras: {r['info']}: its inputs, vocabulary, labels and special ids")
        return
    for kind in ("saved_model", "saved_model_predict", "tflite"):
        if kind in report:
            r = report[kind]
            click.echo(f"{kind}: max |logit diff| {r['max_abs_diff']:.3g}, arg-max agreement "
                       f"{r['argmax_agreement']:.4f} ({r['positions']} positions)"
                       + (f", {r['bytes']:,} bytes, ops {', '.join(r['ops'])}" if kind == "tflite" else "")
                       + (f"; {parity_words(report.get('parity_split', 'test'))} "
                          f"{r['task']['metric']} {r['task']['export']:.4g} (Keras "
                          f"{r['task']['keras']:.4g})" if "task" in r else "")
                       + (f"; state internal, max |logit diff| vs the explicit-state model "
                          f"{r['explicit_state_max_abs_diff']:.3g}" if "explicit_state_max_abs_diff" in r else ""))
        if f"{kind}_decoding" in report:  # seq2seq: outputs identical to Keras's transduce
            r = report[f"{kind}_decoding"]
            click.echo(f"{kind} decoding: identical to Keras on {r['greedy']['identical']:.4f} (greedy), "
                       f"{r['beam']['identical']:.4f} (beam {report['decoding']['beam_width']}) of "
                       f"{r['beam']['sequences']} sources")
    click.echo(f"export directory: {out}")


@click.command()
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
@with_common_options
def stream(export_dir, prompt, max_length, temperature, top_k, greedy, beam_width, seed, input_path):
    """Run an exported TFLite step model one input at a time, carrying the state (the on-device loop).

    Language model: continue --prompt (a model trained with data.layout stream: the prompt's lines
    prime the state and generation goes on past line ends to --max-length). Acceptor: print the running answer after every frame/token.
    Tagger: print each token's tag as it comes (a CRF tagger: each line once it ends, as the
    best tag path -- a step's tag can change until the sequence ends). Encoder-decoder (seq2seq): encode each input line,
    then decode it symbol by symbol (beam search, or --greedy) and print the output symbols.
    A full-sequence export (bidirectional encoder) answers each whole input line / utterance.
    EXPORT_DIR may also be the export's .tflite file alone: its metadata is embedded in it."""
    from seqkit.arguments import real
    from seqkit.runtime.request import StreamRequest, stream_export

    real("temperature", temperature, 0, low_open=True)  # click's FloatRange lets nan through
    request = StreamRequest(prompt=prompt, input_path=input_path, max_length=max_length,
                            temperature=temperature, top_k=top_k, greedy=greedy, beam_width=beam_width,
                            seed=seed)
    for piece in stream_export(export_dir, request):
        click.echo(piece, nl=False)


@click.command()
@click.argument("path", type=click.Path(exists=True))
@click.option("--metadata", "show_metadata", is_flag=True,
              help="Print the metadata embedded in the .tflite (the export's metadata.json) and nothing else.")
@click.option("--json", "as_json", is_flag=True, help='Print {"model", "bytes", "signatures", "ops", '
              '"metadata"} as JSON.')
@with_common_options
def inspect(path, show_metadata, as_json=False):
    """Show a .tflite model's signatures, tensor shapes, ops and size (or an export directory's),
    and the seqkit metadata embedded in it."""
    import numpy as np

    from seqkit.export import embedded_metadata
    from seqkit.export.tflite import interpreter, op_names
    from seqkit.runtime.streaming import read_export_metadata

    model = os.path.join(path, "model.tflite") if os.path.isdir(path) else path
    if not os.path.isfile(model):
        raise SeqkitError(f"{path}: no model.tflite here.")
    it = interpreter(model)
    found = embedded_metadata.entries(model)
    embedded = embedded_metadata.read(model, validate=False)  # untrusted: shown, then checked
    invalid = _invalid_metadata(embedded, model)
    if show_metadata:
        if embedded is None:
            raise SeqkitError(f"{model}: no seqkit metadata embedded (entry '{embedded_metadata.KEY}'): "
                              f"not written by `seqkit export`, or by an older seqkit; export the run again.")
        if invalid is not None:
            click.echo(f"seqkit: warning: {invalid}", err=True)
        try:
            click.echo(strict_json(embedded, indent=1, ensure_ascii=False))
        except RecursionError:
            raise invalid from None
        return
    if as_json:
        _inspect_json(model, it, embedded if invalid is None else None, invalid)
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
    if invalid is not None:  # shown as far as it goes: signatures and ops above, the error here
        click.echo(f"metadata: embedded, not valid: {invalid}")
        return
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


def _invalid_metadata(meta, model: str):
    """The :class:`~seqkit.export.metadata_schema.MetadataError` of embedded metadata that fails
    the schema (``None`` when it passes or there is none)."""
    from seqkit.export.metadata_schema import MetadataError, validate

    if meta is None:
        return None
    try:
        validate(meta, model)
    except MetadataError as exc:
        return exc
    return None


def _describe_tokenizers(meta: dict) -> str:
    """How an export splits its text input (and a seq2seq target), e.g. ``sentencepiece
    (subword.model: sentencepiece unigram, 60 pieces)``."""
    def side(mode, model, about):
        return f"{mode} ({model}: {about})" if model else str(mode)

    from seqkit.export.embedded_metadata import tokenization

    out = side(tokenization(meta), meta.get("subword_model"), meta.get("subword"))
    if meta.get("target_tokenization") or meta.get("target_tokenizer"):
        out += "; target " + side(tokenization(meta, "target"), meta.get("target_subword_model"),
                                  meta.get("target_subword"))
    return out + (", lower-cased" if meta.get("lowercase") else "")


def _inspect_json(model: str, it, embedded: dict | None = None, error=None) -> None:
    """``seqkit inspect --json``: signatures (tensor shapes, ``null`` = any size, dtypes), ops,
    size, and the export's metadata (``metadata.json``, else the copy embedded in the file; less
    its vocabularies) when there is one; ``"metadata_error"``: why the embedded metadata
    (``error``, left out then) fails the schema."""
    import numpy as np

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

    if error is not None:
        out["metadata_error"] = str(error)
    meta = dict(embedded) if embedded else None
    if meta is None and error is None and os.path.isfile(os.path.join(os.path.dirname(model), "metadata.json")):
        meta = read_export_metadata(os.path.dirname(model) or ".")  # an export from before embedding
    if meta:
        for key in ("vocab", "target_vocab", "labels"):  # sizes, not the lists
            if isinstance(meta.get(key), list):
                meta[f"{key}_size"] = len(meta.pop(key))
        out["metadata"] = meta
    click.echo(json.dumps(out, indent=2, ensure_ascii=False))


@click.command("bench-step")
@click.argument("export_dir", type=click.Path())
@click.option("--run", "run_dir", type=click.Path(file_okay=False),
              help="Also time the Keras step of this run (inside tf.function) for comparison.")
@click.option("--steps", type=click.IntRange(min=10), default=500, show_default=True)
@with_common_options
def bench_step(export_dir, run_dir, steps):
    """Per-step latency (median, p95, microseconds) of the TFLite step model, batch 1 (a --state
    internal export: its fixed batch)."""
    import numpy as np

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

        from seqkit.training.train import load_run

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
