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
:mod:`seqkit.export.seq2seq_archive`. A ``--state internal`` step model converts with resource
variables enabled (``VAR_HANDLE`` / ``READ_VARIABLE`` / ``ASSIGN_VARIABLE`` / ``CALL_ONCE``, all
builtins), signatures ``step`` + ``reset``, see :mod:`seqkit.export.stateful`.
"""

from __future__ import annotations

from seqkit.errors import SeqkitError

QUANTIZE = ("none", "float16", "dynamic-range")


def convert_step(saved_model_dir: str, quantize: str = "none") -> bytes:
    """Convert the ``step`` signature of a SavedModel (see :func:`convert_signature`)."""
    return convert_signature(saved_model_dir, quantize, "step")


def convert_signature(saved_model_dir: str, quantize: str = "none",
                      signature: str | list[str] = "step", *, resource_variables: bool = False) -> bytes:
    """Convert one signature (or several, into one model) of a SavedModel to a ``.tflite`` flatbuffer.

    Args:
        saved_model_dir: a SavedModel written from :mod:`seqkit.export.archive`.
        quantize: ``"none"`` (float32), ``"float16"`` (float16 weights) or
            ``"dynamic-range"`` (int8 weights, float activations).
        signature: ``"step"``, (pinned shape) ``"predict"``, or a list such as
            ``["encode", "decode_step"]`` (an encoder-decoder: one model, both signatures).
        resource_variables: keep mutable ``tf.Variable`` s as TFLite resource variables
            (``VAR_HANDLE`` / ``READ_VARIABLE`` / ``ASSIGN_VARIABLE``): the state of a
            ``--state internal`` export (:mod:`seqkit.export.stateful`).

    Returns:
        The model bytes.

    Raises:
        SeqkitError: the model needs ops outside the TFLite builtins (Flex /
            select-TF ops, which the LiteRT interpreter cannot run).
    """
    import tensorflow as tf

    if quantize not in QUANTIZE:
        raise SeqkitError(f"--quantize {quantize}: expected one of {', '.join(QUANTIZE)}.")
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
    try:
        data = conv.convert()
    except Exception as exc:  # the converter raises ConverterError with the op list
        raise SeqkitError(f"the {signature} model does not convert to TFLite builtin ops ({exc}). "
                          f"Models that need Flex (select TF) ops are refused: the LiteRT "
                          f"interpreter on a phone cannot run them.") from exc
    bad = [op for op in op_names(data) if op.startswith("Flex") or op in ("CUSTOM", "DELEGATE")]
    if bad:
        raise SeqkitError(f"the converted {signature} model contains non-builtin ops ({', '.join(bad)}); refused.")
    return data


def interpreter(model: bytes | str):
    """An ``ai_edge_litert`` interpreter for model bytes or a ``.tflite`` path (tensors allocated)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=model) if isinstance(model, (bytes, bytearray)) else Interpreter(model_path=model)
    it.allocate_tensors()
    return it


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
