"""``seqkit export`` of an encoder-decoder (``seq2seq``) run: SavedModel and/or TFLite, checked first.

Layout (written into ``OUT.partial-PID``, renamed to ``OUT`` only after every
parity check passes, as for the other heads: :func:`seqkit.export.writer.staged_dir`)::

    OUT/model.tflite        signatures encode ([1, S_max] source) and decode_step (--format tflite | all)
    OUT/saved_model/        signatures encode, decode_step, generate, beam_search (--format saved_model | all)
    OUT/metadata.json       source and target vocabularies, special ids, state layout, encoder
                            pinned length and widths, attention kind, decoding defaults, recipe, versions
                            (also embedded in model.tflite: seqkit.export.embedded_metadata)
    OUT/vocab.json          the source vocabulary (id = position)
    OUT/target_vocab.json   the target vocabulary (id = position)
    OUT/parity.json         the parity report (see :mod:`seqkit.heads.seq2seq.parity`)

The signatures are described in :mod:`seqkit.heads.seq2seq.archive`; a
bidirectional encoder is exported as it is (the encoder never streams; only
the decoder steps).

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow; the TFLite converters are looked up in
:mod:`seqkit.export.tflite` at each call, so they can be replaced there.
"""

from __future__ import annotations

import contextlib
import os
import shutil

import seqkit
from seqkit import log
from seqkit.data.subword import SUBWORD_MODEL, TARGET_SUBWORD_MODEL
from seqkit.data.vocab import END_ID, PAD_ID, START_ID, UNK_ID
from seqkit.errors import SeqkitError
from seqkit.export import embedded_metadata
from seqkit.export.calibration import parity_records, seq2seq_samples
from seqkit.export.embedded_metadata import versioned
from seqkit.export.id_lookups import gathered_ids, shifted_attention
from seqkit.export.tflite import verify_default
from seqkit.export.unrolled import unrolled
from seqkit.export.writer import _check, calibration_report, staged_dir, subword_files
from seqkit.heads.seq2seq.archive import build_seq2seq_archive, state_names, widths
from seqkit.heads.seq2seq.parity import SavedModelSeq2Seq, Seq2SeqParityCase, identical, saved_model_decodes
from seqkit.heads.seq2seq.runtime import Seq2SeqModel
from seqkit.progress import progress
from seqkit.runs.rundir import strict_json

ARTEFACT = "encoder_decoder"


def metadata_for_seq2seq(prep, model, quantize: str, source_length: int) -> dict:
    """The ``metadata.json`` of a seq2seq export (what a runtime needs besides the model).

    Keys beyond the common ones (versions, ``head``, ``special_ids``, ``tokenizer``,
    ``lowercase``, ``quantize``, ``recipe``): ``vocab`` (source) and ``target_vocab``
    (id = position), ``input`` (``source [1, S_max] int32``), ``state_layout`` (the
    decoder states, in signature order), ``encoder`` (``pinned_length`` ``S_max``,
    ``batch`` 1, ``memory_width``, ``keys_width``, ``bidirectional``), ``attention``,
    ``decoding`` (``beam_width``, ``n_best``, ``length_penalty``, ``max_length``: the
    defaults of ``seqkit predict``) and ``signatures`` (one line each).
    """
    import keras
    import tensorflow as tf

    r, w = prep.recipe, widths(model)
    dec = r.decoding
    meta = {
        "seqkit_version": seqkit.__version__, "tensorflow_version": tf.__version__,
        "keras_version": keras.__version__, "head": prep.recipe.head.type, "artefact": ARTEFACT,
        "logits_index": prep.head.logits_index,
        "input": {"name": "source", "dtype": "int32", "shape": [1, source_length], "kind": "token"},
        "special_ids": {"pad": PAD_ID, "unk": UNK_ID, "start": START_ID, "end": END_ID},
        "state_layout": [{"name": n, "size": s, "shape": [None, s], "dtype": "float32"}
                         for n, s in zip(state_names(model), w["states"])],
        "encoder": {"pinned_length": source_length, "batch": 1, "memory_width": w["memory"],
                    "keys_width": w["keys"], "bidirectional": r.model.bidirectional},
        "attention": prep.head.options.attention,
        "decoding": {"beam_width": dec.beam_width, "n_best": dec.n_best,
                     "length_penalty": dec.length_penalty,
                     "max_length": min(dec.max_length, r.data.max_length)},
        "signatures": {
            "encode": "source [1, S_max] int32 (0 = padding) -> memory [1, S_max, Hm], memory_mask "
                      "[1, S_max] float32 (1 = real), keys [1, S_max, A], start states [1, H]",
            "decode_step": "token [K] int32, memory, memory_mask, keys, states (K rows) -> "
                           "logits [K, V], states",
            "generate": "SavedModel only: source [B, S], max_length [] -> tokens [B, L], lengths [B]",
            "beam_search": "SavedModel only: source [B, S], max_length [] -> tokens [B, N, L], "
                           "lengths [B, N], scores [B, N]",
            "predict_text": "SavedModel only: text [B] string (raw sources, tokenized in the graph) -> "
                            "output [B], hypotheses [B, N] string (symbols joined by spaces), scores [B, N]",
            "generate_text": "SavedModel only: text [B] string -> output [B] string (greedy)"},
        "tokenizer": r.data.tokenizer, "lowercase": r.data.lowercase, "quantize": quantize,
        "vocab": prep.head.vocab.tokens, "target_vocab": prep.head.target_vocab.tokens,
        "recipe": r.to_dict(),
        **subword_metadata(prep),
    }

    return versioned(meta, tokenization=r.data.tokenizer, target_tokenization=meta.get("target_tokenizer"))


def subword_metadata(prep) -> dict:
    """``subword_model`` / ``target_tokenizer`` / ``target_subword_model``: the sentencepiece model
    files an export carries beside ``metadata.json`` (empty without sentencepiece)."""
    head, out = prep.head, {}
    if prep.recipe.data.tokenizer == "sentencepiece":
        out.update(subword_model=SUBWORD_MODEL, subword=head.tokenizer.describe())
    if head.target_mode is not None:
        out["target_tokenizer"] = head.target_mode
    if head.target_subword:
        out.update(target_subword_model=TARGET_SUBWORD_MODEL, target_subword=head.target_tokenizer.describe())
    return out


def export_seq2seq(prep, model, out: str, *, fmt: str, quantize: str, tolerance: float | None,
                   min_agreement: float, parity_examples: int, length: int | None,
                   io_type: str = "float", calibration: list | None = None) -> dict:
    """Export a loaded seq2seq run (:meth:`seqkit.heads.seq2seq.Seq2SeqHead.export`, called by
    :func:`seqkit.export.writer.export_run`, which checked the arguments); return the parity report.

    Args:
        length: the pinned encoder length ``S_max`` (default the run's ``data.max_length``).
        io_type, calibration: full-integer modes: integer or float I/O, and the training
            records to calibrate on (:func:`seqkit.export.calibration.seq2seq_samples`).

    The report's ``tflite_decoding`` also gives ``wer``: the
    word error rate (:func:`seqkit.metrics.edit_distance.g2p_error_rates`, a word wrong when its
    greedy output differs from its target) of Keras's and the export's greedy outputs on the
    held-out sources (``tflite`` ``task`` repeats it).

    Raises:
        SeqkitError: no held-out pair fits ``S_max``, a non-builtin op, or a parity failure
            (nothing is written then).
    """
    import tensorflow as tf

    from seqkit.export.tflite import convert_signature, op_names

    S = length or prep.recipe.data.max_length
    held_out = parity_records(prep, parity_examples)
    case = Seq2SeqParityCase(prep, model, held_out, S)
    n = len(held_out)
    if 2 * len(case.sources) < n:
        raise SeqkitError(f"only {len(case.sources)} of the {n} held-out pairs have a source of at "
                          f"most --length {S} symbols, too few to check the export; raise --length "
                          f"(default: the run's data.max_length).")
    if len(case.sources) < n:
        log.warn(f"{n - len(case.sources)} of {n} held-out pairs have a source longer than --length "
                 f"{S} and are left out of the parity check; the export refuses such sources.")
    meta = metadata_for_seq2seq(prep, model, quantize, S)
    meta["io_type"] = io_type
    dec = meta["decoding"]
    refs = case.references(model, beam_width=dec["beam_width"], length_penalty=dec["length_penalty"],
                           max_length=dec["max_length"])
    report = {"examples": len(case.sources), "quantize": quantize, "artefact": ARTEFACT,
              "tolerance": tolerance, "min_argmax_agreement": min_agreement,
              "decoding": {**dec, "reference": "seqkit.heads.seq2seq.transduce (Keras)"},
              **calibration_report(calibration, io_type)}
    with staged_dir(out) as tmp:
        if fmt in ("saved_model", "all"):
            sm_dir = os.path.join(tmp, "saved_model")
            build_seq2seq_archive(prep, model).write_out(sm_dir, verbose=False)
            loaded = tf.saved_model.load(sm_dir)
            report["saved_model"] = case.check_teacher_forced(SavedModelSeq2Seq(loaded, state_names(model)))
            _check(report["saved_model"], "SavedModel encode + decode_step", 1e-4, 0.999)
            got = saved_model_decodes(loaded, case.src, dec["max_length"])
            report["saved_model_decoding"] = {k: identical(refs[k], got[k]) for k in ("greedy", "beam")}
        if fmt in ("tflite", "all"):
            pin_dir = os.path.join(tmp, "pinned_saved_model")
            # full integer: no WHILE to quantize, int32 ids read by GATHER alone, float 1 / 0
            # masks applied by arithmetic (int16x8 has no SELECT_V2 / CAST / DIV kernel)
            fi = bool(calibration)
            with unrolled(model, True) if fi else contextlib.nullcontext(), \
                    gathered_ids(model, "float32") if fi else contextlib.nullcontext(), \
                    shifted_attention() if fi else contextlib.nullcontext():
                build_seq2seq_archive(prep, model, source_length=S,
                                      lookups=fi).write_out(pin_dir, verbose=False)
            rep = calibration and seq2seq_samples(prep, calibration, pin_dir, S)
            data = convert_signature(pin_dir, quantize, ["encode", "decode_step"], representative=rep,
                                     io_type=io_type)
            shutil.rmtree(pin_dir)
            rt = Seq2SeqModel(model_bytes=data, metadata=meta)
            report["tflite"] = case.check_teacher_forced(rt)

            meta["verified"] = verify_default(data)  # LiteRT's default interpreter (XNNPACK on) ran it
            data = embedded_metadata.embed(data, meta, subword_files(prep, meta))  # the file describes itself
            report["tflite"].update({"ops": op_names(data), "bytes": len(data)})

            with progress(2 * len(case.sources), "parity check (TFLite decoding)", "decodes") as bar:
                greedy = [(rt.greedy(s), bar.update())[0] for s in case.sources]
                beam = [(rt.beam_search(s)[0][0], bar.update())[0] for s in case.sources]
            report["tflite_decoding"] = {"greedy": identical(refs["greedy"], greedy),
                                         "beam": identical(refs["beam"], beam),
                                         "wer": {"keras": case.wer(refs["greedy"]), "export": case.wer(greedy)}}
            report["tflite"]["task"] = {"metric": "wer", "keras": case.wer(refs["greedy"]),
                                        "export": case.wer(greedy), "scored": len(greedy)}
            _check(report["tflite"], f"TFLite encode + decode_step ({quantize})", tolerance, min_agreement)
            with open(os.path.join(tmp, "model.tflite"), "wb") as f:
                f.write(data)
        with open(os.path.join(tmp, "metadata.json"), "w", encoding="utf-8") as f:
            f.write(strict_json(meta, indent=1, ensure_ascii=False))
        prep.head.vocab.save(os.path.join(tmp, "vocab.json"))
        prep.head.target_vocab.save(os.path.join(tmp, "target_vocab.json"))
        with open(os.path.join(tmp, "parity.json"), "w", encoding="utf-8") as f:
            f.write(strict_json(report, indent=2))
    return report
