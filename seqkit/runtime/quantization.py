"""Reading and writing the integer inputs and outputs of a full-integer TFLite model.

An ``--quantize int8 | int16x8 --io-type int`` export takes and returns int8 (int16)
tensors for what is float in the float model: frames, recurrent states, logits, an
encoder's memory. Each such tensor carries one ``scale`` and ``zero_point``
(per-tensor quantization) in the flatbuffer; the real value is
``scale * (q - zero_point)`` (Jacob et al. 2018, eq. 1). :class:`TensorCodec`
converts at the interpreter boundary, so every runtime keeps its float API:
``encode`` rounds a float array to the tensor's integer type (saturating),
``decode`` returns float32. Token ids (int32, no quantization) and float tensors
pass through unchanged.
"""

from __future__ import annotations

import numpy as np


class TensorCodec:
    """Float <-> stored value of one interpreter tensor.

    Args:
        detail: the tensor's entry of ``get_input_details()`` / ``get_output_details()``
            (a signature runner's or the interpreter's): ``dtype`` and
            ``quantization_parameters`` (``scales``, ``zero_points``) or ``quantization``
            (``(scale, zero_point)``).

    Attributes:
        dtype: the tensor's numpy dtype; ``quantized``: an integer tensor with a scale (the
            others pass through); ``scale`` float, ``zero_point`` int.
    """

    def __init__(self, detail: dict):
        self.dtype = np.dtype(detail["dtype"])
        qp = detail.get("quantization_parameters") or {}
        scales = np.asarray(qp.get("scales", []), np.float64)
        zps = np.asarray(qp.get("zero_points", []), np.int64)
        if scales.size == 0 and detail.get("quantization"):
            s, z = detail["quantization"]
            scales, zps = np.asarray([s], np.float64), np.asarray([z], np.int64)
        self.quantized = self.dtype.kind in "iu" and scales.size > 0 and float(scales[0]) != 0.0
        self.scale = float(scales[0]) if self.quantized else 1.0
        self.zero_point = int(zps[0]) if self.quantized and zps.size else 0
        if self.quantized:
            info = np.iinfo(self.dtype)
            self._lo, self._hi = info.min, info.max

    def encode(self, value) -> np.ndarray:
        """A float array as the tensor's stored values (``round(x / scale) + zero_point``,
        clipped to the integer range); unchanged (cast) for a float or unquantized tensor."""
        if not self.quantized:
            return np.asarray(value, self.dtype)
        q = np.rint(np.asarray(value, np.float32) / np.float32(self.scale)) + self.zero_point
        return np.clip(q, self._lo, self._hi).astype(self.dtype)

    def decode(self, value) -> np.ndarray:
        """Stored values as float32 (``scale * (q - zero_point)``); unchanged otherwise."""
        if not self.quantized:
            return value
        return (np.float32(self.scale) * (np.asarray(value, np.int32) - self.zero_point)).astype(np.float32)


def codecs(details: dict) -> dict:
    """``{name: TensorCodec}`` for a signature runner's input or output details."""
    return {name: TensorCodec(d) for name, d in details.items()}
