"""int8 LSTM step models with an int16 cell (``seqkit export --quantize int8 --int16-cell``).

TFLite's integer LSTM kernel keeps 8-bit weights and matrix products and a 16-bit cell state (the
"8x8_16" scheme); the converter emits it only for a fused LSTM op, whose states live inside the
interpreter, not in a step model's inputs and outputs. Google's ai-edge-quantizer quantizes a float
``.tflite`` op by op, which gives the same split on seqkit's explicit-state step model:

* the float32 step model of the cell-scaled stepper (:mod:`seqkit.export.cell_scaling`: one gate
  product ``[x, h] [W; U] + b``, the cell state carried as ``ĉ = c / s``) **without the clip**
  before ``tanh`` (an int16 ``tanh`` input needs none, and the quantizer has no ``MINIMUM`` /
  ``MAXIMUM`` configuration), its gate pre-activations scaled per unit
  (:class:`UnclippedScaledLSTMCell`, :func:`gate_maxima`: the int8 product tensor is the
  largest source of error left);
* int8 activations and per-channel int8 weights for the lookup, the concatenation and the
  ``FULLY_CONNECTED`` products (XNNPACK's int8 kernels in LiteRT's default interpreter);
* int16 activations for the element-wise ops (:data:`INT16_OPS`: the gates' ``LOGISTIC`` /
  ``TANH``, ``f ⊙ ĉ + i ⊙ g``, ``tanh(c)``, ``h``), LiteRT's builtin int16 kernels;
* float inputs and outputs (the states are carried in float between steps, as the other int8
  step models with ``--io-type float``); :func:`float_outputs` repairs the quantizer's outputs
  where a state is also an op's input (an LSTM's ``h``).

It keeps int8's size; docs/export.md has its agreement and latency on ``lm-pydoc-chars`` beside
the converter's int8 (on x86 a step costs about what float32's does: LiteRT has no XNNPACK
kernels for int16 element-wise ops).

ai-edge-quantizer (the ``quantizer`` extra) and TensorFlow are imported inside the functions that
use them.
"""

from __future__ import annotations

import contextlib
import copy
import io

import numpy as np

from seqkit.errors import SeqkitError
from seqkit.export.cell_scaling import ScaledLSTMCell

#: ops given int16 activations (int8 weights); every other op gets int8 activations
INT16_OPS = ("MUL", "ADD", "SUB", "TANH", "LOGISTIC", "SPLIT")


def _op_config(bits: int) -> dict:
    return {"activation_tensor_config": {"num_bits": bits, "symmetric": bits == 16,
                                         "granularity": "TENSORWISE", "dtype": "INT"},
            "weight_tensor_config": {"num_bits": 8, "symmetric": True,
                                     "granularity": "CHANNELWISE", "dtype": "INT"},
            "compute_precision": "INTEGER", "explicit_dequantize": False}


def recipe() -> list[dict]:
    """The ai-edge-quantizer recipe (a list of JSON-able dicts): a8w8 for every op, a16w8 for
    :data:`INT16_OPS`, the model's inputs and outputs left float."""
    rec = [{"regex": ".*", "operation": "*", "algorithm_key": "min_max_uniform_quantize",
            "op_config": _op_config(8)}]
    rec += [{"regex": ".*", "operation": op, "algorithm_key": "min_max_uniform_quantize",
             "op_config": _op_config(16)} for op in INT16_OPS]
    rec += [{"regex": ".*", "operation": op, "algorithm_key": "no_quantize"} for op in ("INPUT", "OUTPUT")]
    return rec


class UnclippedScaledLSTMCell(ScaledLSTMCell):
    """:class:`~seqkit.export.cell_scaling.ScaledLSTMCell` without the clip, and with per-unit
    scaled gate pre-activations.

    Args:
        cell, scale, clip: as :class:`~seqkit.export.cell_scaling.ScaledLSTMCell` (``clip`` is
            kept for the record, not applied).
        gate_scale: ``[4H]`` float, positive, or None (1): the product is computed as
            ``z' = [x, h] ([W; U] / r) + b / r`` and each gate's part multiplied back by its
            ``r`` after the split, so the one int8 product tensor holds every unit within about
            ±1 instead of the widest unit's range (a multiply right after the product would be
            folded into its weights by the converter; after the split it is not).

    ``h = o ⊙ tanh(s ⊙ ĉ)``: in float32 Keras's ``LSTMCell`` step to round-off.
    """

    def __init__(self, cell, scale, clip, gate_scale=None):
        super().__init__(cell, scale, clip)
        self.gate_scale = None if gate_scale is None else np.asarray(gate_scale, np.float32)

    def gates(self, x, h):
        """The gate pre-activations ``[x, h] [W; U] + b``, ``[B, 4H]`` float32, unscaled."""
        import tensorflow as tf

        c = self.cell
        z = tf.matmul(tf.concat([x, h], axis=-1), tf.concat([c.kernel, c.recurrent_kernel], axis=0))
        return z + c.bias if c.use_bias else z

    def __call__(self, x, states, training=False):
        import tensorflow as tf

        c = self.cell
        if self.gate_scale is None:
            zi, zf, zg, zo = tf.split(self.gates(x, states[0]), 4, axis=-1)
        else:
            inv = tf.constant(1.0 / self.gate_scale)
            z = tf.matmul(tf.concat([x, states[0]], axis=-1),
                          tf.concat([c.kernel, c.recurrent_kernel], axis=0) * inv)
            if c.use_bias:
                z = z + c.bias * inv
            zi, zf, zg, zo = (part * tf.constant(r) for part, r in
                              zip(tf.split(z, 4, axis=-1), np.split(self.gate_scale, 4)))
        i, f, o, g = tf.sigmoid(zi), tf.sigmoid(zf), tf.sigmoid(zo), tf.tanh(zg)
        c_new = f * states[1] + (i * g) * tf.constant(1.0 / self.scale)
        h = o * tf.tanh(c_new * tf.constant(self.scale))
        return h, [h, c_new]


class _GateRecorder(UnclippedScaledLSTMCell):
    """Steps as its parent (unscaled gates) and keeps the largest ``|z|`` per unit of the rows
    ``self.keep`` (eager only)."""

    def __call__(self, x, states, training=False):
        z = np.abs(np.asarray(self.gates(x, states[0])))[self.keep]
        if len(z):
            self.top = np.maximum(self.top, z.max(axis=0))
        return super().__call__(x, states, training)


def gate_maxima(scaled, x: np.ndarray, valid: np.ndarray) -> list:
    """Stream ``x`` through ``scaled`` (float32, eagerly) and return, per cell, the largest
    ``|z|`` of each gate pre-activation over the ``valid`` positions (``[4H]`` float32; None for
    a cell that is not a :class:`~seqkit.export.cell_scaling.ScaledLSTMCell`).

    Args:
        scaled: a cell-scaled stepper (:func:`~seqkit.export.cell_scaling.scaled_stepper`).
        x, valid: as :func:`~seqkit.export.cell_scaling.cell_state_maxima`.
    """
    import tensorflow as tf

    rec = copy.copy(scaled)
    rec.cells = [_GateRecorder(c.cell, c.scale, c.clip) if isinstance(c, ScaledLSTMCell) else c
                 for c in scaled.cells]
    for c in rec.cells:
        if isinstance(c, _GateRecorder):
            c.top = np.zeros(4 * int(c.cell.units), np.float32)
    states = rec.initial_state(len(x))
    for t in range(x.shape[1]):
        if not valid[:, t].any():
            break  # past every record's end (records start at position 0)
        for c in rec.cells:
            if isinstance(c, _GateRecorder):
                c.keep = valid[:, t]
        states = rec.step(tf.constant(x[:, t]), list(states))[1]
    return [c.top if isinstance(c, _GateRecorder) else None for c in rec.cells]


#: smallest per-unit gate scale (a pre-activation that never leaves 0 on the calibration data)
MIN_GATE_SCALE = 1e-3


def unclipped(scaled, x: np.ndarray | None = None, valid: np.ndarray | None = None):
    """A copy of a cell-scaled stepper (:func:`~seqkit.export.cell_scaling.scaled_stepper`) whose
    scaled LSTM cells are :class:`UnclippedScaledLSTMCell` s (sharing the weights), their gate
    pre-activations scaled per unit by :func:`gate_maxima` of ``x`` / ``valid`` (the calibration
    positions) when given."""
    tops = gate_maxima(scaled, x, valid) if x is not None else [None] * len(scaled.cells)
    out = copy.copy(scaled)
    out.cells = [UnclippedScaledLSTMCell(cell.cell, cell.scale, cell.clip,
                                         None if top is None else np.maximum(top, MIN_GATE_SCALE))
                 if isinstance(cell, ScaledLSTMCell) else cell for cell, top in zip(scaled.cells, tops)]
    return out


def quantizer_version() -> str:
    """``"ai-edge-quantizer X.Y.Z"``, checking that it is installed without importing it (an
    import takes seconds: it loads TensorFlow).

    Raises:
        SeqkitError: ai-edge-quantizer is not installed (names the extra to install).
    """
    import importlib.util
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = importlib.util.find_spec("ai_edge_quantizer") is not None
    except (ImportError, ValueError):  # a module entry without a spec
        found = False
    if not found:
        raise SeqkitError("--int16-cell quantizes with Google's ai-edge-quantizer, which is not "
                          "installed: pip install \"seqkit[quantizer]\" (or ai-edge-quantizer), or "
                          "export without --int16-cell.")
    try:
        return f"ai-edge-quantizer {version('ai-edge-quantizer')}"
    except PackageNotFoundError:
        return "ai-edge-quantizer"


def quantize(float_model: bytes, samples: list[dict], signature: str = "step") -> bytes:
    """Quantize a float32 step model by :func:`recipe`, every output left as the float model has it.

    Args:
        float_model: the ``.tflite`` of :func:`unclipped`'s stepper, float32.
        samples: calibration inputs of ``signature``, ``{input name: array}`` each
            (:func:`seqkit.export.calibration.step_samples`).

    Returns:
        The quantized model's bytes, one plain flatbuffer (:func:`inline_buffers`) whose
        signature outputs have the float model's dtypes (a state fed back as it comes matches
        its input; :func:`float_outputs`).

    Raises:
        SeqkitError: ai-edge-quantizer is missing, or it refused the model (its message), or an
            output's dtype could not be restored.
    """
    quantizer_version()
    from ai_edge_quantizer import quantizer

    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            q = quantizer.Quantizer(float_model, recipe())  # (it prints sizes and a progress bar)
            result = q.quantize(q.calibrate({signature: samples}))
    except Exception as exc:  # the quantizer's own errors (ValueError, RuntimeError, ...)
        raise SeqkitError(f"--int16-cell: ai-edge-quantizer refused the {signature} model "
                          f"({type(exc).__name__}: {str(exc).splitlines()[0][:300]}). Nothing was "
                          f"written. Export without --int16-cell.") from exc
    return float_outputs(inline_buffers(bytes(result.quantized_model)), float_model)


def inline_buffers(model: bytes) -> bytes:
    """``model`` with every buffer inside the flatbuffer.

    ai-edge-quantizer writes a model whose buffers pack to 256 KiB or more with the buffers after
    the flatbuffer, found by offset (the layout TFLite has for models over 2 GiB). LiteRT reads
    it, but seqkit's metadata embedding and readers that walk the flatbuffer expect the usual
    layout the converter writes below 2 GiB; so the data is moved back into the buffers.

    Args:
        model: ``.tflite`` bytes.

    Returns:
        The same bytes when no buffer lies outside; else the repacked model.

    Raises:
        SeqkitError: a model too large for one flatbuffer (2 GiB).
    """
    from ai_edge_litert.tools import flatbuffer_utils

    m = flatbuffer_utils.convert_bytearray_to_object(bytearray(model))
    outside = [b for b in m.buffers or [] if b.offset > 1]  # offset 1: the quantizer's placeholder
    if not outside:
        return bytes(model)
    if sum(b.size for b in outside) >= 2**31 - 2**24:
        raise SeqkitError(f"--int16-cell: the quantized model holds {sum(b.size for b in outside):,} "
                          f"bytes of weights, too many for one TFLite flatbuffer (2 GiB). Export "
                          f"without --int16-cell.")
    for b in outside:
        b.data, b.offset, b.size = bytes(model[b.offset: b.offset + b.size]), 0, 0
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


def _output_types(model) -> dict:
    """``{(signature key, output name): TensorType}`` of a read ``schema.Model``."""
    out = {}
    for i in range(model.SignatureDefsLength()):
        sd = model.SignatureDefs(i)
        g = model.Subgraphs(sd.SubgraphIndex())
        for j in range(sd.OutputsLength()):
            out[(sd.SignatureKey(), sd.Outputs(j).Name())] = g.Tensors(sd.Outputs(j).TensorIndex()).Type()
    return out


def float_outputs(quantized: bytes, float_model: bytes) -> bytes:
    """Point every signature output of ``quantized`` back at a tensor of the float model's dtype.

    ai-edge-quantizer (0.10) mishandles a tensor that is both a model output and an op's input
    when the two need different types -- an LSTM's ``h``: returned as a state, and (as int8) the
    next layer's or the next step's product input. It inserts the ``DEQUANTIZE`` that makes the
    float output, but the subgraph's output list ends up naming the int8 ``QUANTIZE`` made for the
    consumer, and the signature the int16 tensor itself, which is then no graph output at all:
    the interpreter reuses its memory for later tensors, so what the signature returns is int16
    and overwritten (arg-max agreement 0.64 on a tiny two-layer LSTM, 1.000 once repaired). Here
    each such output, and the subgraph output list entry that stands for it, is pointed at the
    ``DEQUANTIZE`` of the tensor the signature names.

    The two integer fields are rewritten in place: the quantizer stores a larger model's buffers
    after the flatbuffer, by offset, which unpacking and packing the flatbuffer would lose.

    Args:
        quantized: the quantizer's ``.tflite`` bytes.
        float_model: the float ``.tflite`` it was made from (the dtypes each output must have).

    Returns:
        The repaired model's bytes (the same bytes when every output already has its dtype).

    Raises:
        SeqkitError: an output whose dtype differs and that has no ``DEQUANTIZE`` to point at.
    """
    import struct

    from ai_edge_litert import schema_py_generated as schema

    want = _output_types(schema.Model.GetRootAs(bytes(float_model), 0))
    data = bytearray(quantized)
    m = schema.Model.GetRootAs(data, 0)
    if _output_types(m) == want:
        return bytes(quantized)
    codes = [max(c.BuiltinCode(), c.DeprecatedBuiltinCode())
             for c in (m.OperatorCodes(i) for i in range(m.OperatorCodesLength()))]
    for i in range(m.SignatureDefsLength()):
        sd = m.SignatureDefs(i)
        g = m.Subgraphs(sd.SubgraphIndex())
        ops = [g.Operators(k) for k in range(g.OperatorsLength())]
        dequantized = {op.Inputs(0): op.Outputs(0) for op in ops
                       if codes[op.OpcodeIndex()] == schema.BuiltinOperator.DEQUANTIZE}
        requantized = {op.Outputs(0): op.Inputs(0) for op in ops
                       if codes[op.OpcodeIndex()] == schema.BuiltinOperator.QUANTIZE}
        for j in range(sd.OutputsLength()):
            out = sd.Outputs(j)
            t, need = out.TensorIndex(), want[(sd.SignatureKey(), out.Name())]
            if g.Tensors(t).Type() == need:
                continue
            d = dequantized.get(t)
            field = out._tab.Offset(6)  # TensorMap.tensor_index (absent: the default 0)
            if d is None or g.Tensors(d).Type() != need or not field:
                raise SeqkitError(f"--int16-cell: ai-edge-quantizer made the '{out.Name().decode()}' "
                                  f"output of the {sd.SignatureKey().decode()} model "
                                  f"{_type_name(g.Tensors(t).Type())} where the float model has "
                                  f"{_type_name(need)}, with no dequantization to return instead. "
                                  f"Nothing was written. Export without --int16-cell.")
            struct.pack_into("<I", data, out._tab.Pos + field, d)
            vec = g._tab.Vector(g._tab.Offset(8))  # SubGraph.outputs
            for k in range(g.OutputsLength()):
                if g.Outputs(k) in (t,) or requantized.get(g.Outputs(k)) == t:
                    struct.pack_into("<i", data, vec + 4 * k, d)
    if _output_types(schema.Model.GetRootAs(data, 0)) != want:  # a repair that did not take
        raise SeqkitError("--int16-cell: the quantized model's output dtypes could not be made those "
                          "of the float model. Nothing was written. Export without --int16-cell.")
    return bytes(data)


def _type_name(code: int) -> str:
    from ai_edge_litert import schema_py_generated as schema

    names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    return names.get(code, str(code)).lower()
