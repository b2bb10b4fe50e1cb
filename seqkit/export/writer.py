"""``seqkit export``: write a SavedModel and/or a TFLite step model, checked against Keras first.

Everything is written into ``OUT.partial-PID`` and renamed to ``OUT`` only
after the parity check passes, so a failed or interrupted export leaves no
half-written model. Layout::

    OUT/model.tflite      the step model (--format tflite | all), or with --full-sequence
                          the pinned-shape `predict` model; with --state internal the step
                          model keeps its state inside (signatures step + reset, see
                          seqkit.export.stateful)
    OUT/saved_model/      signatures step, initial_state, predict, generate, sample, generate_text
                          (--format saved_model | all; acceptor/tagger: step, initial_state, predict,
                          predict_text; bidirectional: predict, predict_text; frames: no *_text;
                          seqkit.inference.serving describes the text signatures; seq2seq: see
                          seqkit.heads.seq2seq.export)
    OUT/subword.model     the run's SentencePiece model (data.tokenizer sentencepiece; named by
                          metadata.json's subword_model)
    OUT/metadata.json     vocabulary, labels, normaliser, special ids, input, state layout,
                          quantization, recipe, versions (the same JSON is embedded in
                          model.tflite: seqkit.export.embedded_metadata); an int8 LSTM step
                          model: cell_state_scaling (its c states carry c / scale,
                          seqkit.export.cell_scaling)
    OUT/vocab.json        the vocabulary (id = position; token inputs)
    OUT/char_vocab.json   the character vocabulary (model.char_embedding; also in metadata.json,
                          with max_chars: a step is the word id, then its characters' ids)
    OUT/labels.json       the class / tag names (id = position; acceptor, tagger)
    OUT/parity.json       the parity report (max |logit diff|, arg-max agreement; a CRF
                          tagger: also Viterbi tag agreement with the Keras model)

A CRF tagger (``head.crf: true``): ``predict`` (SavedModel, and the
``--full-sequence`` TFLite model) outputs ``tags [B, T] int32`` decoded by Viterbi in
the graph besides the emissions ``logits``; the step model outputs emissions, and
``metadata.json`` carries ``crf`` (``transitions``, ``start``, ``end``) for the runtime's
Viterbi at the end of each sequence.

TensorFlow, Keras and the seqkit modules that import them and NumPy are imported inside the
functions that use them, so importing this module does not load TensorFlow; the TFLite converters
are looked up in :mod:`seqkit.export.tflite` at each call, so they can be replaced there.
"""

from __future__ import annotations

import contextlib
import os
import shutil

import seqkit
from seqkit import log
from seqkit.data.subword import SUBWORD_MODEL
from seqkit.data.vocab import END_ID, PAD_ID, START_ID, UNK_ID
from seqkit.errors import DataError, SeqkitError, refuse_bidirectional
from seqkit.export import embedded_metadata, int16_cell
from seqkit.export.archive import build_archive, build_full_sequence_archive, predict_input_spec, stepper_for
from seqkit.export.calibration import (calibration_records, full_sequence_samples, parity_records, parity_split,
                                       parity_words, step_samples)
from seqkit.export.cell_scaling import scaled_stepper, stepper_inputs
from seqkit.export.embedded_metadata import versioned
from seqkit.export.frame_lengths import LENGTHS
from seqkit.export.id_lookups import gathered_ids
from seqkit.export.options import (DEFAULT_AGREEMENT, DEFAULT_TOLERANCE, FORMATS, STATES,  # noqa: F401
                                   ExportOptions)
from seqkit.export.parity import ParityCase, stream_logits
from seqkit.export.sample import SAMPLE_FILE, read_export_sample, read_records_file
from seqkit.export.stateful import check_stateful_request, export_stateful_tflite
from seqkit.export.tflite import FULL_INTEGER, verify_default
from seqkit.export.unrolled import unrolled
from seqkit.inference.serving import text_unsupported
from seqkit.outputs import check_export_folder
from seqkit.runs.lifecycle import remove_stale_exports
from seqkit.runs.rundir import strict_json
from seqkit.runtime.full_sequence import FullSequenceModel
from seqkit.runtime.streaming import StreamingModel
from seqkit.runtime.viterbi import viterbi
from seqkit.training.train import load_run


@contextlib.contextmanager
def staged_dir(out: str):
    """Yield a fresh ``OUT.partial-PID`` directory; when the block ends without an exception,
    replace ``out`` with it (an existing ``out`` is removed first: the caller checked
    ``--overwrite``). Whatever happens, no ``.partial`` directory is left behind, and those of
    exports whose process died (killed mid-export) are removed first."""
    tmp = f"{out.rstrip(os.sep)}.partial-{os.getpid()}"
    remove_stale_exports(os.path.dirname(os.path.abspath(tmp)))
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        yield tmp
        if os.path.exists(out):
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_out(out: str, run_dir: str, overwrite: bool) -> None:
    """Refuse an ``--out`` that would lose something: a non-empty directory without
    ``--overwrite``, and even with it anything but an earlier export (a run directory, a
    folder holding the run, a folder of other files).

    Raises:
        SeqkitError: naming the directory and the fix.
    """
    real_out, real_run = os.path.realpath(out), os.path.realpath(run_dir)
    if os.path.exists(out) and (real_out == real_run or real_run.startswith(real_out + os.sep)):
        raise SeqkitError(f"--out {out}: that is the run directory or a folder holding it; an "
                          f"export there would replace the run. Choose another --out, e.g. "
                          f"exports/{os.path.basename(real_run.rstrip(os.sep))}.")
    check_export_folder(out)  # not inside a run directory, not a symbolic link
    if not os.path.exists(out) or (os.path.isdir(out) and not os.listdir(out)):
        return
    if not overwrite:
        raise SeqkitError(f"{out}: exists and is not empty. Pass --overwrite to replace an earlier "
                          f"export there, or choose another --out.")
    model = os.path.join(out, "model.tflite")
    is_export = os.path.isdir(out) and (
        (_is_seqkit_metadata(os.path.join(out, "metadata.json"))
         and (os.path.isfile(model) or os.path.isdir(os.path.join(out, "saved_model"))))
        or (os.path.isfile(model) and _carries_metadata(model)))  # metadata.json deleted: the model's own
    check_export_folder(out, replacing=True)  # nothing but export files in it
    if not is_export:
        raise SeqkitError(f"--out {out}: --overwrite replaces only an earlier seqkit export (a "
                          f"directory with seqkit's metadata.json and model.tflite or saved_model/, or with a "
                          f"model.tflite carrying seqkit's metadata); this one is something else and "
                          f"is left alone. Choose another --out.")


def _is_seqkit_metadata(path: str) -> bool:
    """Whether ``path`` is a ``metadata.json`` seqkit wrote: a small JSON object naming
    ``seqkit_version`` and ``schema_version`` (another tool's ``metadata.json`` is not)."""
    from seqkit.runs.json_files import bounded_json

    try:
        meta = bounded_json(path)
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "seqkit_version" in meta and "schema_version" in meta


def _carries_metadata(path: str) -> bool:
    """Whether the ``.tflite`` at ``path`` carries seqkit's embedded metadata (an export's model)."""
    try:
        return embedded_metadata.read(path, validate=False) is not None
    except SeqkitError:
        return False


def metadata_for(prep, stepper, quantize: str, full_sequence: dict | None = None) -> dict:
    """The ``metadata.json`` of an export (what a runtime needs besides the model; its fields:
    docs/export-metadata.md, versioned by :func:`seqkit.export.embedded_metadata.versioned`).

    Acceptor / tagger exports add ``labels`` (class id = position), ``input.kind``
    ``token``/``frame``, ``normalizer`` (frames: mean/std, applied *inside* the model --
    feed raw frames), ``pooling``
    (acceptor) and ``output`` (what the logits mean). ``artefact`` is ``step``,
    ``predict`` (a bidirectional run's SavedModel alone) or ``full_sequence``
    (then ``full_sequence`` gives the pinned batch, length and input;
    the argument is ``{"batch", "length", "spec": tf.TensorSpec}``).
    """
    import keras
    import tensorflow as tf

    def describe(spec):
        return {"name": spec.name, "dtype": spec.dtype.name, "shape": spec.shape.as_list(),
                "kind": "token" if spec.dtype.is_integer else "frame"}

    d = prep.recipe.data
    meta = {
        "seqkit_version": seqkit.__version__, "tensorflow_version": tf.__version__,
        "keras_version": keras.__version__, "head": prep.recipe.head.type,
        "artefact": "full_sequence" if full_sequence else ("step" if stepper is not None else "predict"),
        "input": describe(stepper.input_spec()) if stepper is not None else None,
        "special_ids": {"pad": PAD_ID, "unk": UNK_ID, "start": START_ID, "end": END_ID},
        "state_layout": [] if stepper is None else
        [{"name": n, "size": int(s), "shape": [None, int(s)], "dtype": "float32"}
         for n, s in zip(stepper.state_names(), stepper.state_sizes())],
        "tokenizer": d.tokenizer, "lowercase": d.lowercase,
        "layout": d.layout,  # "stream": generation carries the state across line ends
        "quantize": quantize, "vocab": prep.vocab.tokens if prep.vocab is not None else None,
        "recipe": prep.recipe.to_dict(),
    }
    if d.tokenizer == "sentencepiece":  # the model file beside metadata.json (write_subword_models)
        meta["subword_model"] = SUBWORD_MODEL
        meta["subword"] = prep.head.tokenizer.describe()
    if full_sequence:
        meta["full_sequence"] = {"batch": full_sequence["batch"], "length": full_sequence["length"],
                                 "input": describe(full_sequence["spec"])}
    meta["logits_index"] = prep.head.logits_index  # which list the logits' columns index
    meta.update(prep.head.export_metadata(stepper, bool(full_sequence)))  # labels, output, ...

    return versioned(meta, tokenization=meta.get("token_mode") or d.tokenizer)


def subword_files(prep, meta: dict) -> dict[str, bytes]:
    """The sentencepiece model files ``metadata.json`` names, ``{file name: bytes}``, for
    :func:`seqkit.export.embedded_metadata.embed` (so a lone ``.tflite`` carries its tokenizer)."""
    out = {}
    if meta.get("subword_model"):
        out[meta["subword_model"]] = prep.head.tokenizer.model.proto
    if meta.get("target_subword_model"):
        out[meta["target_subword_model"]] = prep.head.target_tokenizer.model.proto
    return out


def write_subword_models(prep, meta: dict, folder: str) -> None:
    """Copy the run's sentencepiece model(s) into an export ``folder`` under the names
    ``meta["subword_model"]`` / ``meta["target_subword_model"]`` give (none: nothing)."""
    if meta.get("subword_model"):
        prep.head.tokenizer.save(folder, meta["subword_model"])
    if meta.get("target_subword_model"):
        prep.head.target_tokenizer.save(folder, meta["target_subword_model"])


def crf_metadata(model) -> dict | None:
    """``{"transitions", "start", "end", "decoding"}`` of a CRF tagger's model, else None."""
    from seqkit.layers.crf import crf_layer

    crf = crf_layer(model)
    if crf is None:
        return None
    return {"transitions": crf.transitions.numpy().tolist(), "start": crf.start_transitions.numpy().tolist(),
            "end": crf.end_transitions.numpy().tolist(),
            "decoding": "Viterbi over the whole sequence: logits are emissions, a step's tag can change "
                        "until the sequence ends (full-sequence predict: the 'tags' output)"}


def _viterbi_rows(z, lengths, crf: dict) -> list:
    w = [crf[k] for k in ("transitions", "start", "end")]
    return [viterbi(z[i, :n], *w) for i, n in enumerate(lengths)]


def _check_tags(res: dict, what: str, ref: list, got: list, min_agreement: float) -> None:
    """Add the Viterbi tag agreement of ``got`` with the Keras ``ref`` paths to ``res``; refuse below
    ``min_agreement``."""
    import numpy as np

    same = [np.asarray(a) == np.asarray(b)[:len(a)] for a, b in zip(ref, got)]
    res["viterbi_agreement"] = float(np.mean(np.concatenate(same))) if same else 1.0
    res["viterbi_paths_equal"] = float(np.mean([s.all() for s in same])) if same else 1.0
    log.info(f"parity {what}: Viterbi tag agreement {res['viterbi_agreement']:.4f}, whole paths "
             f"equal {res['viterbi_paths_equal']:.4f}")
    if res["viterbi_agreement"] < min_agreement:
        raise SeqkitError(f"parity check failed for the {what} model: Viterbi tag agreement "
                          f"{res['viterbi_agreement']:.4f} < {min_agreement}; nothing was written.")


def export_run(run_dir: str, out: str, options: ExportOptions | None = None, **kwargs) -> dict:
    """Export a trained run; return the parity report (what ``seqkit export`` does).

    The run's head writes the export (:meth:`seqkit.heads.base.Head.export`; default
    :func:`write_step_export`), staged in ``OUT.partial-PID`` and renamed to ``out`` only after
    its parity check passed.

    Args:
        run_dir: a run directory.
        out: the export directory (must not exist, or be empty, unless ``overwrite``).
        options: an :class:`~seqkit.export.options.ExportOptions`; or its fields as keyword
            arguments (``fmt="all", quantize="int8", ...``).

    Raises:
        SeqkitError: bad options, an option the run's head cannot honour, a non-builtin op, a
            conversion the converter refuses, or a parity failure (nothing is written then).
    """
    if options is None:
        options = ExportOptions(**kwargs)
    elif kwargs:
        raise SeqkitError("export_run: give an ExportOptions or keyword options, not both.")
    o = options.check()
    check_out(out, run_dir, o.overwrite)
    prep, model = load_for_export(run_dir, calibration=o.calibration, parity=o.parity)
    resolve_full_sequence(prep, o)
    calib = calibration_for(prep, o.quantize, o.calibration_examples)
    if o.state == "internal":
        check_stateful_request(prep, fmt=o.fmt, full_sequence=o.full_sequence, batch=o.batch, run_dir=run_dir)
    return prep.head.export(prep, model, out, o, calib)


def resolve_full_sequence(prep, options: ExportOptions) -> None:
    """Decide ``options.full_sequence`` where the user left it open (``None``).

    A run with no step model (a bidirectional encoder: its backward pass reads the sequence from
    the end) whose head exports whole sequences (``Head.full_sequence_export``) is exported as
    the whole-sequence TFLite model, for ``[batch, length]`` (``length`` default: the run's
    ``data.max_length``); every other run as its step model, and so is a request that only a
    step model answers (``state="internal"``, ``int16_cell``; a bidirectional run refuses them
    by name). The choice is printed.
    """
    if options.full_sequence is not None:
        return
    can_step = prep.head.has_stepper() and not prep.recipe.model.bidirectional
    options.full_sequence = bool(prep.head.full_sequence_export and not can_step
                                 and options.fmt != "saved_model" and options.state == "explicit"
                                 and not options.int16_cell)
    if options.full_sequence:
        length = options.length or prep.recipe.data.max_length
        log.info(f"export: the encoder is bidirectional (no step model), so the TFLite model is the "
                 f"whole-sequence one for [batch, length] = [{options.batch}, {length}] (--batch, "
                 f"--length change it; longer inputs are refused by it).")


def write_step_export(prep, model, out: str, options: ExportOptions, calib: list | None) -> dict:
    """The default :meth:`~seqkit.heads.base.Head.export`: a step model (the head's
    :meth:`~seqkit.heads.base.Head.stepper`) or, with ``full_sequence``, a whole-sequence model,
    as TFLite and/or SavedModel, written into ``out`` through :func:`staged_dir` after the parity
    check (:class:`~seqkit.export.parity.ParityCase`) passed; return the parity report.

    ``options`` (:class:`~seqkit.export.options.ExportOptions`, checked) holds what follows.

    Args:
        prep, model: the loaded run (:func:`seqkit.training.train.load_run`, with its data).
        out: the export directory (must not exist, or be empty, unless ``overwrite``).
        calib: the training records a full-integer export calibrates on (else None).

    Options:
        fmt: ``"tflite"``, ``"saved_model"`` or ``"all"``.
        quantize: TFLite precision: ``"none"`` (float32), ``"float16"`` / ``"dynamic-range"``
            (float16 / int8 weights, float activations), ``"int8"`` (int8 weights and
            activations) or ``"int16x8"`` (int16 activations, int8 weights); the full-integer
            two calibrate on ``calibration_examples`` records of the training split
            (:mod:`seqkit.export.calibration`).
        tolerance: largest allowed max |logit difference| (default 1e-4 for float32,
            not checked for quantized models).
        min_agreement: smallest allowed arg-max agreement (the gate; default 0.999 float32,
            0.99 float16 / dynamic-range, 0.98 int16x8, 0.95 int8).
        io_type: full-integer modes: ``"float"`` inputs and outputs (quantized inside the
            model) or ``"int"`` (int8 / int16 frames, states, logits; token ids stay int32; the
            runtimes convert with each tensor's scale and zero point).
        calibration_examples: training records the full-integer calibration streams.
        cell_scaling: ``int8`` step models (explicit or internal state): LSTM cells carry
            their cell state divided by a per-unit scale from the calibration records
            (:mod:`seqkit.export.cell_scaling`; metadata ``cell_state_scaling``). False: the
            plain cell state, one quantization range for all its units. (``int16x8`` holds the
            state in int16 and is exported without it.)
        parity_examples: held-out (test split) examples streamed for the check.
        calibration, parity: JSON Lines files of records replacing the training / held-out
            records; without them the run's data is read, or, where it is missing, the run's
            ``export_sample.json`` (:mod:`seqkit.export.sample`).
        full_sequence: the TFLite model is the full-sequence ``predict`` for a pinned
            ``[batch, length]`` input instead of the step model (the only choice for a
            bidirectional encoder); the SavedModel keeps ``step`` when the head can stream.
        batch, length: the pinned shape (``length`` default: the run's ``data.max_length``).
            With ``state="internal"``, ``batch`` is the rows of the state kept inside the model.
        state: ``"explicit"`` (the step model takes and returns every state tensor) or
            ``"internal"`` (the TFLite step model keeps its state in resource variables and has
            a ``reset`` signature, see :mod:`seqkit.export.stateful`; heads with
            ``internal_state``). The parity report's ``tflite`` then also holds
            ``explicit_state_max_abs_diff`` (against the explicit-state TFLite model).

    The report's comparisons also hold ``task`` (``{"metric", "keras", "export", "scored"}``:
    perplexity or accuracy of Keras and of the export on the same held-out records).

    Raises:
        SeqkitError: a step export of a head that cannot stream (bidirectional), a
            full-sequence export of a head without ``full_sequence_export``, a non-builtin op, a
            conversion the converter refuses, or a parity failure.
    """
    import numpy as np
    import tensorflow as tf

    from seqkit.export.tflite import convert_signature, convert_step, op_names

    fmt, quantize, full_sequence = options.fmt, options.quantize, options.full_sequence
    tolerance, min_agreement = options.tolerance, options.min_agreement
    batch, length, state, io_type = options.batch, options.length, options.state, options.io_type
    parity_examples, run_dir = options.parity_examples, prep.run_dir or "RUN_DIR"
    if full_sequence and not prep.head.full_sequence_export:
        if prep.recipe.model.bidirectional:
            raise refuse_bidirectional(run_dir, whole=False)
        raise SeqkitError(f"--full-sequence: a {prep.recipe.head.type} run exports the step model that "
                          f"`seqkit stream` runs one input at a time; --full-sequence (a pinned "
                          f"whole-sequence model) is for heads that answer whole sequences from a "
                          f"bidirectional encoder. Drop --full-sequence.")
    if not full_sequence and ((batch != 1 and state != "internal") or length is not None):
        raise SeqkitError("--batch / --length pin the shape of a --full-sequence export (and "
                          "--length the encoder of a seq2seq export; --batch also the state of "
                          "--state internal); this export has none. Add --full-sequence or drop them.")
    can_step = prep.head.has_stepper() and not prep.recipe.model.bidirectional
    if prep.recipe.model.bidirectional and not full_sequence and fmt != "saved_model":
        raise refuse_bidirectional(run_dir, whole=prep.head.full_sequence_export)  # before writing anything
    scaled = scaling = None
    if quantize == "int8" and options.cell_scaling and can_step and not full_sequence:
        scaled, scaling = scaled_stepper(stepper_for(prep, model), *stepper_inputs(prep, calib))
    if options.int16_cell:
        if scaled is None:
            raise SeqkitError(f"--int16-cell: the run's cells are not stock Keras LSTM cells (cell "
                              f"'{prep.recipe.model.cell}'), whose cell state it keeps in int16. "
                              f"Export with --quantize int8 alone, or int16x8.")
        scaling = {**scaling, "clip": None}  # no clip before tanh (seqkit.export.int16_cell)
    length = (length or prep.recipe.data.max_length) if full_sequence else None
    held_out = parity_records(prep, parity_examples)
    case = ParityCase(prep, model, held_out, length)
    if length is not None:
        full = np.asarray(prep.head.parity_inputs(held_out)[1])
        if (full > length).any():
            log.warn(f"{int((full > length).sum())} of {len(full)} held-out examples are longer than "
                     f"--length {length}: the parity check compares their first {length} steps, and "
                     f"the export refuses such inputs (raise --length to take them whole).")
        elif len(full) and 2 * int(full.max()) <= length:  # every step is unrolled: size grows with it
            log.info(f"--length {length}: the longest of the {len(full)} held-out examples has "
                     f"{int(full.max())} steps; a --length nearer the inputs you expect makes a smaller, "
                     f"faster model (it refuses longer ones).")

    with staged_dir(out) as tmp:
        sm_dir = os.path.join(tmp, "saved_model")
        if fmt == "tflite" and full_sequence:  # it converts its own pinned archive (below)
            stepper = stepper_for(prep, model) if can_step else None
        else:  # --format tflite: the converter's source alone, so the step signatures alone
            archive, stepper = build_archive(prep, model, with_step=can_step,
                                             text=fmt in ("saved_model", "all"),
                                             step_only=fmt == "tflite" and can_step,
                                             stepper=scaled if fmt == "tflite" else None)
            archive.write_out(sm_dir, verbose=False)
        fs = ({"batch": batch, "length": length, "spec": predict_input_spec(prep, batch, length)}
              if full_sequence else None)
        meta = metadata_for(prep, stepper, quantize, fs)
        meta["io_type"] = io_type
        if scaled is not None:  # the TFLite model's states; a SavedModel's carry c itself
            meta["cell_state_scaling"] = {**scaling, "applies_to": "model.tflite"}
        crf = crf_metadata(model)
        ref_tags = None
        if crf is not None:
            from seqkit.layers.crf import crf_layer

            meta["crf"] = crf
            meta["output"] += (" (CRF emissions; predict also gives tags [B, T] int32, the Viterbi "
                               "paths)" if stepper is None else
                               " (CRF emissions: run Viterbi over the sequence with metadata crf)")
            ref_tags = [t[:n] for t, n in zip(
                crf_layer(model).decode(tf.constant(case.reference), tf.constant(case.valid)).numpy(),
                case.lengths)]
        report = {"examples": len(held_out), "parity_split": parity_split(prep), "quantize": quantize,
                  "artefact": meta["artefact"], "tolerance": tolerance,
                  "min_argmax_agreement": min_agreement, **calibration_report(calib, io_type)}
        if scaled is not None:
            report["cell_state_scaling"] = scaling["states"]
        if fmt in ("saved_model", "all"):
            loaded = tf.saved_model.load(sm_dir)
            if stepper is not None:
                step = loaded.signatures["step"]
                names = [s["name"] for s in meta["state_layout"]]
                state = {}

                def sm_reset(b):
                    state.update(loaded.signatures["initial_state"](batch_size=tf.constant(b)))

                def sm_step(xt):
                    res = step(**{meta["input"]["name"]: tf.constant(xt)}, **{n: state[n] for n in names})
                    state.update({n: res[n] for n in names})
                    return res["logits"].numpy()

                z = stream_logits(sm_step, sm_reset, case.stream_input())
                report["saved_model"] = case.check_stream(z)
                _check(report["saved_model"], "SavedModel step", 1e-4, 0.999)
                if crf is not None:
                    _check_tags(report["saved_model"], "SavedModel step + Viterbi", ref_tags,
                                _viterbi_rows(z, case.lengths, crf), 0.999)
            if "predict" in loaded.signatures:
                pred = loaded.signatures["predict"](**{predict_input_spec(prep).name: tf.constant(case.x)})
                report["saved_model_predict"] = case.check_full(pred["logits"].numpy())
                _check(report["saved_model_predict"], "SavedModel predict", 1e-4, 0.999)
                if crf is not None:
                    _check_tags(report["saved_model_predict"], "SavedModel predict", ref_tags,
                                list(pred["tags"].numpy()), 0.999)
        if fmt in ("tflite", "all"):
            conv_dir = sm_dir  # the converter refuses the text signatures' lookup tables (Flex ops)
            if fmt == "all" and (text_unsupported(prep) is None or scaled is not None) and not full_sequence:
                conv_dir = os.path.join(tmp, "tflite_source_saved_model")  # step signatures alone
                build_archive(prep, model, step_only=True, stepper=scaled)[0].write_out(conv_dir, verbose=False)
            if full_sequence:
                fs_dir = os.path.join(tmp, "full_sequence_saved_model")
                # full-integer frames: a lengths input marks the padding (no int is NaN)
                lengths_in = bool(calib) and fs["spec"].dtype == tf.float32
                if lengths_in:
                    meta["full_sequence"]["lengths"] = {"name": LENGTHS, "dtype": "int32", "shape": [batch]}
                # full integer: no WHILE to quantize, int32 ids read by GATHER alone, float 1 / 0
                # masks applied by arithmetic (int16x8 has no SELECT_V2 / CAST kernel; int8's
                # SELECT_V2 cost the POS tagger 5 points of agreement)
                fmask = "float32" if calib else "bool"
                with unrolled(model, True) if calib else contextlib.nullcontext(), \
                        gathered_ids(model, fmask) if calib else contextlib.nullcontext():
                    build_full_sequence_archive(prep, model, batch, length, lengths=lengths_in,
                                                mask_dtype=fmask).write_out(fs_dir, verbose=False)
                rep = calib and full_sequence_samples(prep, calib, batch, length, fs["spec"].name,
                                                      lengths=lengths_in)
                data = convert_signature(fs_dir, quantize, "predict", representative=rep, io_type=io_type)
                shutil.rmtree(fs_dir)
                runner = FullSequenceModel(model_bytes=data, metadata=meta)
                outs = runner.predict([case.x[i, : n] for i, n in enumerate(case.lengths)])
                got = np.zeros_like(case.reference)
                for i, o in enumerate(outs):
                    got[i, : len(o)] = o
                report["tflite"] = case.check_full(got)
                if crf is not None:
                    tflite_tags = runner.predict_tags([case.x[i, : n] for i, n in enumerate(case.lengths)])
            elif state == "internal":
                data, report["tflite"], z = export_stateful_tflite(prep, model, tmp, meta, case,
                                                                   quantize, batch, conv_dir,
                                                                   calibration=calib, io_type=io_type,
                                                                   stepper=scaled)
                if crf is not None:
                    tflite_tags = _viterbi_rows(z, case.lengths, crf)
            elif options.int16_cell:
                src = os.path.join(tmp, "int16_cell_saved_model")
                stepper = int16_cell.unclipped(scaled, *stepper_inputs(prep, calib))
                build_archive(prep, model, step_only=True, stepper=stepper)[0].write_out(src, verbose=False)
                rep = step_samples(prep, calib, src, meta["input"]["name"])
                data = int16_cell.quantize(convert_step(src, "none"), rep)
                shutil.rmtree(src)
                meta["quantizer"] = {"tool": int16_cell.quantizer_version(),
                                     "int16_ops": list(int16_cell.INT16_OPS),
                                     "meaning": "int8 weights and matrix products (gate pre-activations "
                                                "scaled per unit), int16 element-wise ops (the cell "
                                                "state), float inputs and outputs"}
                rt = StreamingModel(model_bytes=data, metadata=meta)
                z = stream_logits(rt.step, rt.reset, case.stream_input())
                report["tflite"] = case.check_stream(z)
                if crf is not None:
                    tflite_tags = _viterbi_rows(z, case.lengths, crf)
            else:
                rep = calib and step_samples(prep, calib, conv_dir, meta["input"]["name"])
                data = convert_step(conv_dir, quantize, representative=rep, io_type=io_type)
                rt = StreamingModel(model_bytes=data, metadata=meta)
                z = stream_logits(rt.step, rt.reset, case.stream_input())
                report["tflite"] = case.check_stream(z)
                if crf is not None:
                    tflite_tags = _viterbi_rows(z, case.lengths, crf)
            if conv_dir != sm_dir:
                shutil.rmtree(conv_dir)

            meta["verified"] = verify_default(data)  # LiteRT's default interpreter (XNNPACK on) ran it
            data = embedded_metadata.embed(data, meta, subword_files(prep, meta))  # the file describes itself
            report["tflite"].update({"ops": op_names(data), "bytes": len(data)})
            _check(report["tflite"], f"TFLite {meta['artefact']} ({quantize})", tolerance, min_agreement,
                   parity_split(prep))
            why = prep.head.export_gate(report["tflite"].get("task"), quantize)
            if why:
                raise SeqkitError(f"parity check failed for the TFLite {meta['artefact']} ({quantize}) "
                                  f"model: {why}; nothing was written.")
            if crf is not None:
                _check_tags(report["tflite"], f"TFLite {meta['artefact']} ({quantize})", ref_tags,
                            tflite_tags, min_agreement)
            with open(os.path.join(tmp, "model.tflite"), "wb") as f:
                f.write(data)
        if fmt == "tflite" and os.path.isdir(sm_dir):
            shutil.rmtree(sm_dir)
        with open(os.path.join(tmp, "metadata.json"), "w", encoding="utf-8") as f:
            f.write(strict_json(meta, indent=1, ensure_ascii=False))
        if prep.vocab is not None:
            prep.vocab.save(os.path.join(tmp, "vocab.json"))
        if meta.get("char_vocab"):
            prep.head.inputs.chars.save(tmp)  # char_vocab.json
        write_subword_models(prep, meta, tmp)
        if "labels" in meta:
            with open(os.path.join(tmp, "labels.json"), "w", encoding="utf-8") as f:
                f.write(strict_json(meta["labels"], ensure_ascii=False))
        with open(os.path.join(tmp, "parity.json"), "w", encoding="utf-8") as f:
            f.write(strict_json(report, indent=2))
    return report


def calibration_for(prep, quantize: str, n: int) -> list | None:
    """The training records a full-integer export calibrates on (None for other modes).

    Raises:
        SeqkitError: the run's training split is empty.
    """
    if quantize not in FULL_INTEGER:
        return None
    recs = calibration_records(prep, n)
    if not recs:
        raise SeqkitError(f"--quantize {quantize}: the run's training split is empty, so there is "
                          f"nothing to calibrate the integer ranges on; use --quantize dynamic-range.")
    return recs


def calibration_report(calib: list | None, io_type: str) -> dict:
    """The parity report's ``io_type`` and ``calibration`` entries (full-integer modes)."""
    if calib is None:
        return {}
    return {"io_type": io_type, "calibration": {"split": "train", "examples": len(calib),
                                                "drawn": "numpy default_rng(recipe seed)"}}


def _check(res: dict, what: str, tolerance: float | None, min_agreement: float, split: str = "test") -> None:
    """Log a parity result and refuse one past ``tolerance`` / ``min_agreement`` (``split``: the
    split its records came from, :func:`seqkit.export.calibration.parity_split`)."""
    task = res.get("task")
    where = parity_words(split) + (" (no held-out data)" if split == "train" else "")
    log.info(f"parity {what}: max |logit diff| {res['max_abs_diff']:.3g}, arg-max agreement "
             f"{res['argmax_agreement']:.4f} over {res['positions']} positions"
             + (f"; {where} {task['metric']} {task['export']:.4g} (Keras {task['keras']:.4g})"
                if task else ""))
    if tolerance is not None and res["max_abs_diff"] > tolerance:
        raise SeqkitError(f"parity check failed for the {what} model: max |logit diff| "
                          f"{res['max_abs_diff']:.3g} > tolerance {tolerance:g}; nothing was written. "
                          f"Raise --tolerance only if you accept the difference.")
    if res["argmax_agreement"] < min_agreement:
        raise SeqkitError(f"parity check failed for the {what} model: arg-max agreement "
                          f"{res['argmax_agreement']:.4f} < {min_agreement}; nothing was written."
                          + (f" {where.capitalize()} {task['metric']}: {task['export']:.4g} against "
                             f"{task['keras']:.4g} for Keras float32." if task else "")
                          + " Lower --min-agreement to accept it, or export a finer precision "
                            "(--quantize int16x8, dynamic-range, float16 or none; an LSTM step model may keep int8 "
                            "products with an int16 cell state: --quantize int8 --int16-cell).")


def load_for_export(run_dir: str, *, calibration: str | None = None, parity: str | None = None):
    """Load a run for export: ``(prep, model)`` with ``prep.splits`` holding the records the
    export calibrates on (``train``) and checks parity on (``test``).

    The run's data source is read when it is there; when it is not (:class:`DataError`: a copied
    run directory, a deleted file), the run's ``export_sample.json`` is used. ``calibration`` /
    ``parity``: JSON Lines files of records (:func:`read_records_file`) that replace the training
    / held-out records; with both, the data source is not read at all.

    Raises:
        SeqkitError: the data is missing and so is the sample (naming both and the fix), or a
            records file is bad.
    """
    given = {"train": read_records_file(calibration) if calibration else None,
             "test": read_records_file(parity) if parity else None}
    if all(v is not None for v in given.values()):
        prep, model = load_run(run_dir, with_data=False)
        prep.source = f"records files {os.path.basename(calibration)}, {os.path.basename(parity)}"
    else:
        try:
            prep, model = load_run(run_dir, with_data=True)
        except DataError as exc:
            try:
                sample = read_export_sample(run_dir)
            except SeqkitError as missing:
                raise SeqkitError(f"{run_dir}: the run's data cannot be read ({exc}) and {missing} "
                                  f"Give the records with --calibration FILE and --parity FILE "
                                  f"(JSON Lines, one record per line, e.g. {{\"text\": \"...\"}}), or "
                                  f"put the data back where the recipe says.") from exc
            log.info(f"the run's data is not readable here ({str(exc).splitlines()[0][:160]}); "
                     f"exporting with the run's {SAMPLE_FILE} ({len(sample['calibration'])} "
                     f"calibration, {len(sample['parity'])} parity records).")
            prep, model = load_run(run_dir, with_data=False)
            prep.source = SAMPLE_FILE
            prep.splits = {"train": sample["calibration"], "valid": [], "test": sample["parity"]}
    splits = dict(prep.splits)
    for k, v in given.items():
        if v is not None:
            splits[k] = prep.head.check_records(v, k)  # a language model's long lines cut as in training
    splits.setdefault("valid", [])
    prep.splits = splits
    return prep, model
