"""``seqkit export RUN --state internal``: a TFLite step model that keeps its recurrent state inside.

The explicit-state step model (:mod:`seqkit.export.archive`) takes and returns
every state tensor; the caller carries them. This one keeps them in resource
variables (TFLite builtins ``VAR_HANDLE`` / ``READ_VARIABLE`` / ``ASSIGN_VARIABLE``;
a ``CALL_ONCE`` initialiser zeroes them when the interpreter first runs) and has
two signatures (B = the batch fixed at export, default 1):

- ``step(token [B] int32 | frame [B, D] float32) -> {logits [B, C] float32}``:
  reads the states, runs the head's step model (the same
  :meth:`stepper.step <seqkit.heads.language_model.LanguageModelStepper.step>` as the
  explicit export), assigns the new states, returns the logits;
- ``reset(rows [B] int32) -> {batch_size [] int32}``: assigns zeros to the states of
  every row whose ``rows`` entry is not 0 (all ones: the next ``step`` starts new
  sequences in every row; one 1: a new sequence in that row, the others carry on).
  The output is ``B`` (the converter drops a signature without outputs); the
  input is there because the full-integer quantizer's calibration cannot build a
  signature without inputs ("NULL SignatureDef inputs for exported method reset").

State variables: one ``[B, H]`` float32 per entry of ``metadata["state_layout"]``
(per layer, per entry of the cell's ``state_names``; an acceptor's pooling
accumulators too). Each interpreter has its own copy: two interpreters of one
file stream independent sequences. The batch is fixed because a variable's shape
is; a runtime that streams one sequence exports with ``--batch 1``.

Heads: language model, acceptor and tagger (forward encoders; one code path, the
head's stepper). Not seq2seq: beam search reorders its K beams' decoder states
every step (a gather over rows), which a state held inside the model cannot take
without a signature per reordering; and its encoder is a full-sequence model.

Quantization (TF 2.21): ``none``, ``float16``, ``dynamic-range`` (int8
weights) and full-integer ``int8`` convert with the state variables kept
float32 (``int8``: the step quantizes what it reads from them and dequantizes
what it assigns, ``QUANTIZE`` / ``DEQUANTIZE``; calibration streams training
records through ``reset`` + ``step``, :func:`seqkit.export.calibration.stateful_samples`).
``int16x8`` does not: TF 2.21's calibration records no range for ``reset``'s
int32 ``rows`` ("Empty min/max for tensor reset_rows:0"). A converter failure is
reported with the converter's own message and the offer of the explicit-state model.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow; the TFLite converters are looked up in
:mod:`seqkit.export.tflite` at each call, so they can be replaced there.
"""

from __future__ import annotations

import os
import shutil

import numpy as np

from seqkit.errors import SeqkitError, refuse_bidirectional
from seqkit.export.archive import stepper_for
from seqkit.export.calibration import stateful_samples
from seqkit.registry import HEADS
from seqkit.runtime.streaming import StreamingModel

STATE_OPS = ("ASSIGN_VARIABLE", "READ_VARIABLE", "VAR_HANDLE")


def check_stateful_request(prep, *, fmt: str, full_sequence: bool, batch: int, run_dir: str) -> None:
    """Refuse ``--state internal`` where it cannot apply, before anything is converted.

    Raises:
        SeqkitError: a seq2seq run, ``--full-sequence``, ``--format saved_model``, a
            bidirectional encoder, or ``batch < 1``, naming what is supported.
    """
    head = prep.recipe.head.type
    if not prep.head.internal_state:
        which = ", ".join(n for n in HEADS.names() if HEADS.get(n).internal_state)
        raise SeqkitError(
            f"--state internal: supported for the step models of {which} runs; this run's head "
            f"is '{head}', whose export keeps its states explicit (an encoder-decoder's beam "
            f"search, for one, reorders its beams' states every step, which a state kept inside "
            f"the model cannot follow). Export {run_dir} without --state.")
    if full_sequence:
        raise SeqkitError("--state internal keeps a step model's recurrent state between calls; a "
                          "--full-sequence model has none to keep. Drop one of the two.")
    if fmt == "saved_model":
        raise SeqkitError("--state internal applies to the TFLite model (resource variables); a "
                          "SavedModel keeps explicit states. Use --format tflite or --format all "
                          "(all: SavedModel with explicit states, TFLite with internal state).")
    if prep.recipe.model.bidirectional:
        raise refuse_bidirectional(run_dir, whole=prep.head.full_sequence_export)
    if batch < 1:
        raise SeqkitError(f"--batch {batch}: the state's batch must be at least 1.")


def build_stateful_archive(prep, model, batch: int = 1, stepper=None):
    """Return ``(archive, stepper)``: an ``ExportArchive`` with ``step`` and ``reset`` (see the
    module docstring), the states in ``[batch, H]`` float32 ``tf.Variable`` s (zeros).

    ``ExportArchive`` (not a bare ``tf.Module``) tracks the Keras model, so the converter
    freezes its weights to constants; only the state variables, which ``step`` assigns,
    stay resource variables. ``stepper`` replaces the head's step view of ``model`` (cell-state
    scaling, :mod:`seqkit.export.cell_scaling`).
    """
    import keras
    import tensorflow as tf

    st = stepper or stepper_for(prep, model)
    names, sizes = st.state_names(), st.state_sizes()
    variables = [tf.Variable(tf.zeros([batch, n], tf.float32), trainable=False, name=nm)
                 for nm, n in zip(names, sizes)]
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.recurrent_state = variables  # tracked for the SavedModel

    def step(x):
        logits, new = st.step(x, [v.read_value() for v in variables])
        for v, s in zip(variables, new):
            v.assign(s)
        return {"logits": logits}

    def reset(rows):
        zero = tf.not_equal(rows, 0)[:, None]  # [B, 1]
        for v in variables:
            v.assign(tf.where(zero, tf.zeros_like(v), v))
        return {"batch_size": tf.constant(batch, tf.int32)}

    spec = st.input_spec()
    archive.add_endpoint("step", step,
                         input_signature=[tf.TensorSpec([batch, *spec.shape[1:]], spec.dtype, name=spec.name)])
    archive.add_endpoint("reset", reset, input_signature=[tf.TensorSpec([batch], tf.int32, name="rows")])
    return archive, st


def convert_stateful(saved_model_dir: str, quantize: str, representative=None,
                     io_type: str = "float") -> bytes:
    """Convert ``step`` + ``reset`` with resource variables enabled, builtin ops only.

    Returns:
        The model bytes; its ops include ``VAR_HANDLE``, ``READ_VARIABLE``, ``ASSIGN_VARIABLE``.

    Raises:
        SeqkitError: the converter fails (e.g. a quantization mode it cannot apply to a
            stateful model: its message is quoted, the explicit-state model offered), a
            non-builtin op, or the state ops are missing from the result.
    """
    from seqkit.export.tflite import convert_signature, op_names

    try:
        data = convert_signature(saved_model_dir, quantize, ["step", "reset"], resource_variables=True,
                                 representative=representative, io_type=io_type)
    except SeqkitError as exc:
        other = [q for q in ("int8", "dynamic-range", "none") if q != quantize]
        raise SeqkitError(
            f"--state internal --quantize {quantize}: the converter cannot produce this stateful "
            f"model: {exc.__cause__ or exc}. Nothing was written. The explicit-state model "
            f"converts with the same --quantize {quantize} (export without --state internal; the "
            f"runtime carries the states), or keep the state internal with --quantize "
            f"{', '.join(other)}.") from exc
    missing = [op for op in STATE_OPS if op not in op_names(data)]
    if missing:
        raise SeqkitError(f"--state internal: the converted model lacks {', '.join(missing)} (its state "
                          f"would not persist between calls); refused, nothing was written.")
    return data


def stream_fixed_batch(rt, x: np.ndarray, batch: int) -> np.ndarray:
    """Stream ``x [N, T(, D)]`` through a runtime (``reset(b)``, ``step(x_t [b(, D)]) -> [b, C]``)
    whose batch is fixed to ``batch`` rows: groups of ``batch`` rows (the last padded with zero
    rows), ``reset`` before each group, one step per position. Returns logits ``[N, T, C]``."""
    b, n = batch, len(x)
    out = []
    for i in range(0, n, b):
        group = x[i:i + b]
        if len(group) < b:
            group = np.concatenate([group, np.zeros((b - len(group), *x.shape[1:]), x.dtype)])
        rt.reset(b)
        out.append(np.stack([np.asarray(rt.step(group[:, t])) for t in range(x.shape[1])], axis=1))
    return np.concatenate(out)[:n]


def export_stateful_tflite(prep, model, tmp: str, meta: dict, case, quantize: str, batch: int,
                           explicit_saved_model: str | None, *, calibration: list | None = None,
                           io_type: str = "float", stepper=None) -> tuple[bytes, dict, np.ndarray]:
    """Build, convert and check the stateful TFLite model of an export (``tmp``: the staged
    export directory, ``meta``: its metadata, updated here). Returns ``(model bytes, report,
    streamed logits [N, T, C])``.

    The report is :meth:`ParityCase.check_stream` against Keras plus
    ``explicit_state_max_abs_diff``: the largest |logit difference| from the explicit-state TFLite
    model of the same quantization streamed over the same inputs in the same row groups (0 or
    float32 round-off expected: both run the same step graph). A full-integer model
    (``calibration``: the training records, :func:`seqkit.export.calibration.stateful_samples`)
    has no such twin -- the explicit model's ranges are calibrated on its own state inputs --
    so it is compared with Keras only. ``stepper``: the step view to export (default the head's;
    a full-integer export passes its cell-state scaling, :mod:`seqkit.export.cell_scaling`).
    """
    from seqkit.export.tflite import convert_step

    sm_dir = os.path.join(tmp, "stateful_saved_model")
    archive, _ = build_stateful_archive(prep, model, batch, stepper)
    archive.write_out(sm_dir, verbose=False)
    try:
        rep = calibration and stateful_samples(prep, calibration, batch, meta["input"]["name"])
        data = convert_stateful(sm_dir, quantize, rep, io_type)
    finally:
        shutil.rmtree(sm_dir, ignore_errors=True)
    mark_internal(meta, batch)
    x = case.stream_input()
    z = stream_fixed_batch(StreamingModel(model_bytes=data, metadata=meta), x, batch)
    report = case.check_stream(z)
    if explicit_saved_model is not None and calibration is None:
        explicit = StreamingModel(model_bytes=convert_step(explicit_saved_model, quantize),
                                  metadata={**meta, "state": "explicit"})
        ze = stream_fixed_batch(explicit, x, batch)
        report["explicit_state_max_abs_diff"] = float(np.max(np.abs(z - ze)))
    return data, report, z


def mark_internal(meta: dict, batch: int) -> None:
    """Record the internal state in an export's metadata: ``state`` ``"internal"``, ``batch``,
    the pinned input shape, ``[batch, H]`` state shapes and the two signatures."""
    meta["state"] = "internal"
    meta["batch"] = int(batch)
    meta["input"] = {**meta["input"], "shape": [int(batch), *meta["input"]["shape"][1:]]}
    meta["state_layout"] = [{**s, "shape": [int(batch), int(s["size"])]} for s in meta["state_layout"]]
    meta["signatures"] = {
        "step": f"{meta['input']['name']} {meta['input']['shape']} {meta['input']['dtype']} -> "
                f"logits [{batch}, C] float32; reads and assigns the states (resource variables)",
        "reset": f"rows [{batch}] int32 -> batch_size [] int32; assigns zeros to the states of the "
                 f"rows whose entry is not 0 (all ones: every row starts a new sequence)"}
