"""TFLite (LiteRT) conversion of the step signature, builtin ops only.

What holds with TF 2.21 / Keras 3.15 / ai-edge-litert 2.3: the step model
``(token, states) -> (logits, states)`` converts to builtin ops (GATHER,
FULLY_CONNECTED, LOGISTIC, TANH, ...); full-sequence recurrent models with a
dynamic batch do not (TensorList ops), which is why the step model is the
TFLite artefact; with the input shape pinned (``predict`` of
:func:`seqkit.export.archive.build_full_sequence_archive`) they do, as a WHILE
loop that keeps the padding mask -- the artefact for bidirectional encoders. A CRF
tagger's in-graph Viterbi (``tf.scan``) converts the same way, as a second WHILE.
An encoder-decoder converts to one model with two signatures, ``encode``
(pinned ``[1, S_max]``) and ``decode_step`` (dynamic batch), see
:mod:`seqkit.heads.seq2seq.archive`. A ``--state internal`` step model converts with resource
variables enabled (``VAR_HANDLE`` / ``READ_VARIABLE`` / ``ASSIGN_VARIABLE`` / ``CALL_ONCE``, all
builtins), signatures ``step`` + ``reset``, see :mod:`seqkit.export.stateful`.

Full-integer quantization (``int8``: int8 weights and activations; ``int16x8``: int16
activations, int8 weights, ``EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8``)
calibrates on a representative dataset (:mod:`seqkit.export.calibration`) and restricts the
converter to the integer builtin kernels, so an op without one fails the conversion rather
than falling back to float. With ``io_type="int"`` the model's float inputs and outputs
(frames, states, logits, an encoder's memory) become int8 / int16 too, read and written with
each tensor's ``scale`` and ``zero_point`` (``real = scale * (q - zero_point)``; the runtimes
do it, :mod:`seqkit.runtime.quantization`); token ids stay int32.

TensorFlow, Keras and the seqkit modules that import them, NumPy and LiteRT are imported inside the
functions that use them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import re

from seqkit._quiet import litert_quietly
from seqkit.errors import SeqkitError
from seqkit.export.unrolled import while_ops

QUANTIZE = ("none", "float16", "dynamic-range", "int8", "int16x8")
FULL_INTEGER = ("int8", "int16x8")
IO_TYPES = ("float", "int")


def check_modes(quantize: str, io_type: str = "float") -> None:
    """Refuse an unknown ``--quantize`` / ``--io-type``, or integer I/O without a full-integer mode.

    Raises:
        SeqkitError: naming the flag, its value and the accepted ones.
    """
    if quantize not in QUANTIZE:
        raise SeqkitError(f"--quantize {quantize}: expected one of {', '.join(QUANTIZE)}.")
    if io_type not in IO_TYPES:
        raise SeqkitError(f"--io-type {io_type}: expected one of {', '.join(IO_TYPES)}.")
    if io_type != "float" and quantize not in FULL_INTEGER:
        raise SeqkitError(f"--io-type {io_type}: integer inputs and outputs need a full-integer "
                          f"model (--quantize {' or '.join(FULL_INTEGER)}); --quantize {quantize} "
                          f"keeps float activations. Drop --io-type or choose int8 / int16x8.")


def convert_step(saved_model_dir: str, quantize: str = "none", *, representative=None,
                 io_type: str = "float") -> bytes:
    """Convert the ``step`` signature of a SavedModel (see :func:`convert_signature`)."""
    return convert_signature(saved_model_dir, quantize, "step", representative=representative,
                             io_type=io_type)


def convert_signature(saved_model_dir: str, quantize: str = "none",
                      signature: str | list[str] = "step", *, resource_variables: bool = False,
                      representative=None, io_type: str = "float") -> bytes:
    """Convert one signature (or several, into one model) of a SavedModel to a ``.tflite`` flatbuffer.

    Args:
        saved_model_dir: a SavedModel written from :mod:`seqkit.export.archive`.
        quantize: ``"none"`` (float32), ``"float16"`` (float16 weights),
            ``"dynamic-range"`` (int8 weights, float activations), ``"int8"`` (int8 weights
            and activations) or ``"int16x8"`` (int16 activations, int8 weights).
        signature: ``"step"``, (pinned shape) ``"predict"``, or a list such as
            ``["encode", "decode_step"]`` (an encoder-decoder: one model, both signatures).
        resource_variables: keep mutable ``tf.Variable`` s as TFLite resource variables
            (``VAR_HANDLE`` / ``READ_VARIABLE`` / ``ASSIGN_VARIABLE``): the state of a
            ``--state internal`` export (:mod:`seqkit.export.stateful`).
        representative: full-integer modes only: a list of calibration samples (see
            :mod:`seqkit.export.calibration`).
        io_type: full-integer modes: ``"float"`` (float inputs / outputs, quantized inside the
            model) or ``"int"`` (int8 / int16 inputs and outputs).

    Returns:
        The model bytes.

    Raises:
        SeqkitError: the model needs ops outside the TFLite builtins (Flex /
            select-TF ops, which the LiteRT interpreter cannot run), or, in a full-integer mode,
            an op without an integer kernel (named in the message).
    """
    import tensorflow as tf

    check_modes(quantize, io_type)
    keys = [signature] if isinstance(signature, str) else list(signature)
    signature = " + ".join(keys)
    conv = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir, signature_keys=keys)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if resource_variables:
        conv.experimental_enable_resource_variables = True
    if quantize == "float16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    elif quantize == "dynamic-range":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
    elif quantize in FULL_INTEGER:
        if not representative:
            raise SeqkitError(f"--quantize {quantize}: no calibration samples (the training split "
                              f"gave none); full-integer quantization needs them.")

        loops = while_ops(saved_model_dir, keys)
        if loops:
            raise SeqkitError(
                f"--quantize {quantize}: the {' + '.join(loops)} signature holds a WHILE loop (a "
                f"recurrent layer that is not unrolled, or a CRF's in-graph Viterbi); the TF "
                f"{tf.__version__} full-integer quantizer crashes on WHILE, so it is refused and "
                f"nothing was written. Export the step model (without --full-sequence; a CRF "
                f"CRF runtime runs Viterbi itself), or use --quantize dynamic-range.")
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: iter(representative)
        int_type = tf.int8 if quantize == "int8" else tf.int16
        conv.target_spec.supported_ops = [
            tf.lite.OpsSet.TFLITE_BUILTINS_INT8 if quantize == "int8"
            else tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        if io_type == "int":
            conv.inference_input_type = conv.inference_output_type = int_type
    try:
        data = conv.convert()
    except Exception as exc:  # the converter raises ConverterError with the op list
        if quantize in FULL_INTEGER:
            empty = re.findall(r"Empty min/max for tensor ([^\s.]+)", str(exc))
            if empty:
                raise SeqkitError(
                    f"--quantize {quantize}: the TF {tf.__version__} converter recorded no range "
                    f"for the tensor {empty[0]} of the {signature} model during calibration "
                    f"(converter: 'Empty min/max for tensor {empty[0]}'). The int16x8 quantizer "
                    f"asks a range of int32 tensors that feed ops other than a lookup (such as "
                    f"--state internal reset's rows), while its calibration logs float tensors "
                    f"only (seqkit's step, full-sequence and seq2seq exports read ids by lookups "
                    f"alone and convert). Nothing was written. Export with --quantize int8, or "
                    f"int16x8 without --state internal.") from exc
            ops = unquantizable_ops(str(exc))
            raise SeqkitError(
                f"--quantize {quantize}: the {signature} model does not convert to integer builtin "
                f"kernels" + (f"; no {quantize} kernel for: {', '.join(ops)}" if ops else "")
                + f" (converter: {_first_lines(str(exc))}). Nothing was written. Export with "
                f"--quantize " + ("int8" if quantize == "int16x8" else "dynamic-range")
                + " (or dynamic-range: int8 weights, float activations) instead.") from exc
        raise SeqkitError(f"the {signature} model does not convert to TFLite builtin ops ({exc}). "
                          f"Models that need Flex (select TF) ops are refused: the LiteRT "
                          f"interpreter on a phone cannot run them.") from exc
    bad = [op for op in op_names(data) if op.startswith("Flex") or op in ("CUSTOM", "DELEGATE")]
    if bad:
        raise SeqkitError(f"the converted {signature} model contains non-builtin ops ({', '.join(bad)}); refused.")
    return data


def unquantizable_ops(message: str) -> list[str]:
    """Op names a converter error says lack an integer kernel (``'tfl.while'`` -> ``WHILE``),
    sorted, distinct; empty when the message names none."""
    found = re.findall(r"'(?:tfl|tf)\.([A-Za-z0-9_]+)' op", message)
    found += re.findall(r"[Qq]uantization (?:to 16x8-bit )?(?:is )?not (?:yet )?supported for op:? "
                        r"'?([A-Za-z0-9_.]+)", message)
    return sorted({f.split(".")[-1].upper() for f in found})


def _first_lines(message: str, n: int = 3) -> str:
    lines = [ln.strip() for ln in message.splitlines() if "error" in ln.lower() or "op" in ln.lower()]
    return " | ".join((lines or [message.strip()])[:n])[:600]


#: how every export is verified and every seqkit runtime runs a ``.tflite``: LiteRT's default
#: interpreter configuration, as an app's ``Interpreter`` gets it (Android's and iOS's too)
DEFAULT_CONFIGURATION = ("ai_edge_litert.interpreter.Interpreter with its default op resolver "
                         "(builtin kernels + the XNNPACK delegate)")


def _zeros_for(details) -> dict:
    import numpy as np

    return {k: (np.ones if k == "rows" else np.zeros)(d["shape"], d["dtype"]) for k, d in details.items()}


def _prepare_all(it) -> None:
    """Invoke every signature of a fresh interpreter once on zeros (``reset``: all rows), so each
    delegate prepares its partition now (XNNPACK prepares a full-integer graph on the first call)."""
    sigs = it.get_signature_list()
    if not sigs:
        import numpy as np

        for d in it.get_input_details():
            it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        it.invoke()
        return
    for key in sorted(sigs, key=lambda k: k != "reset"):  # a stateful model: reset first
        r = it.get_signature_runner(key)
        r(**_zeros_for(r.get_input_details()))


def _refused(exc: Exception, model, what: str = "this model") -> SeqkitError:
    ops = ", ".join(op_names(model))
    return SeqkitError(
        f"{what} does not run in LiteRT's default interpreter configuration ({DEFAULT_CONFIGURATION}), "
        f"which apps on Android and iOS use too: {_first_lines(str(exc), 4)}. Its ops: {ops}. seqkit "
        f"does not fall back to the builtin kernels alone, since an app's default interpreter would "
        f"fail the same way. Export another precision (--quantize none, dynamic-range or int16x8) "
        f"or the step model (without --full-sequence).")


def interpreter(model: bytes | str):
    """An ``ai_edge_litert`` interpreter for model bytes or a ``.tflite`` path (tensors allocated),
    in LiteRT's default configuration (:data:`DEFAULT_CONFIGURATION`: XNNPACK on), its signatures
    each invoked once on zeros (a stateful model is reset afterwards by its runtime).

    The model is untrusted: read bounded and checked against the TFLite schema, then tried in a
    child process (:func:`seqkit.export.model_check.check`), before LiteRT loads it here.

    Raises:
        SeqkitError: the file is unreadable, damaged (the structure check names the part) or
            crashes LiteRT (the child's signal); LiteRT refuses it (its reason); or the default
            configuration refuses the model (XNNPACK "failed to prepare"), with XNNPACK's reason
            and the model's ops -- there is no silent fallback to the builtin kernels, which an
            app's default interpreter would not make either.
    """
    from ai_edge_litert.interpreter import Interpreter

    from seqkit.export import model_check

    path = not isinstance(model, (bytes, bytearray, memoryview))
    where = str(model) if path else "this model"
    data = model_check.read_model(model) if path else bytes(model)
    model_check.check(data, where)
    try:
        with litert_quietly():  # its "Created TensorFlow Lite XNNPACK delegate" line, on every load
            it = Interpreter(model_content=data)
            it.allocate_tensors()
            if "reset" not in it.get_signature_list():  # a pure function: a probe call changes nothing
                _prepare_all(it)
    except (RuntimeError, ValueError) as exc:
        if "XNNPACK" in str(exc) or "elegate" in str(exc):
            raise _refused(exc, data, where) from exc
        raise SeqkitError(f"{where}: LiteRT cannot load this model ({_first_lines(str(exc), 3)}). The "
                          f"file was damaged, or was not written by `seqkit export`; export the run "
                          f"again.") from exc
    return it


def verify_default(model: bytes) -> dict:
    """Run every signature of ``model`` once in LiteRT's default interpreter configuration and say
    what ran it: the ``verified`` entry of an export's metadata.

    Returns:
        ``{"runtime": "ai_edge_litert X.Y.Z", "configuration": "default", "op_resolver": "AUTO",
        "delegates": ["XNNPACK"] (empty when XNNPACK took no node), "delegated_partitions": int}``.

    Raises:
        SeqkitError: the default configuration refuses the model (see :func:`interpreter`).
    """
    import ai_edge_litert
    from ai_edge_litert.interpreter import Interpreter

    try:
        with litert_quietly():
            it = Interpreter(model_content=bytes(model))
            it.allocate_tensors()
            _prepare_all(it)
    except (RuntimeError, ValueError) as exc:
        if "XNNPACK" not in str(exc) and "elegate" not in str(exc):
            raise
        raise _refused(exc, model, "the exported model") from exc
    n = sum(o["op_name"] == "DELEGATE" for o in it._get_ops_details())
    return {"runtime": f"ai_edge_litert {getattr(ai_edge_litert, '__version__', '?')}",
            "configuration": "default", "op_resolver": "AUTO",
            "delegates": ["XNNPACK"] if n else [], "delegated_partitions": int(n)}


def op_names(model: bytes | str) -> list[str]:
    """Sorted distinct op names of a TFLite model, every subgraph included
    (e.g. ``['FULLY_CONNECTED', 'GATHER', 'WHILE', ...]``).

    Read from the flatbuffer itself (``ai_edge_litert.schema_py_generated``), not from an
    interpreter: the interpreter lists the primary subgraph's nodes only, which hides a second
    signature (an encoder-decoder's ``encode``) and the bodies of WHILE loops, and its default
    delegate would hide ops behind ``DELEGATE`` nodes. A custom op is named by its custom code
    (``Flex...`` for select-TF ops), or ``CUSTOM`` when it has none.
    """
    from ai_edge_litert import schema_py_generated as schema

    if not isinstance(model, (bytes, bytearray)):
        with open(model, "rb") as f:
            model = f.read()
    m = schema.Model.GetRootAsModel(model, 0)
    builtin = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    codes = []
    for i in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(i)
        code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())  # codes > 127 live in BuiltinCode
        if code == schema.BuiltinOperator.CUSTOM:
            codes.append((oc.CustomCode() or b"").decode() or "CUSTOM")
        else:
            codes.append(builtin.get(code, str(code)))
    return sorted({codes[g.Operators(j).OpcodeIndex()]
                   for g in (m.Subgraphs(k) for k in range(m.SubgraphsLength()))
                   for j in range(g.OperatorsLength())})
