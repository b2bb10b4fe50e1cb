"""One vector per sequence from an encoder's outputs ``[B, T, H]`` and its mask.

``final``: the output at the last *valid* step (never a padding position).
For a bidirectional encoder (``[B, T, 2H]``, forward half first, as
``keras.layers.Bidirectional(merge_mode="concat")`` returns it) the forward
half is read at the last valid step and the backward half at step 0, where
the backward pass ends after reading the whole valid sequence right to left
(padding steps are masked, so it starts at the last valid step, not on
padding) -- the usual "forward final + backward final" summary
(Graves & Schmidhuber 2005; Goldberg 2017, sec. 16.2.2).

``mean`` / ``max``: masked mean / max over valid steps.

A row with no valid step gives zeros.
"""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="seqkit")
class SequencePooling(keras.layers.Layer):
    """``outputs [B, T, F] float32 (+ mask [B, T]) -> [B, F] float32``.

    Args:
        mode: ``"final"``, ``"mean"`` or ``"max"``.
        bidirectional: for ``final``: the features are ``[forward H, backward H]``.

    Raises:
        ValueError: an unknown mode.
    """

    def __init__(self, mode: str = "final", bidirectional: bool = False, **kwargs):
        super().__init__(**kwargs)
        if mode not in ("final", "mean", "max"):
            raise ValueError(f"SequencePooling: unknown mode {mode!r}")
        self.mode, self.bidirectional = mode, bool(bidirectional)
        self.supports_masking = True

    def get_config(self):
        return {**super().get_config(), "mode": self.mode, "bidirectional": self.bidirectional}

    def call(self, x, mask=None):
        # float arithmetic on the float mask only (no int32 lengths, gathers or casts to int):
        # the same numbers, and a graph whose every op the int16x8 TFLite quantizer handles
        b, t = ops.shape(x)[0], ops.shape(x)[1]
        m = ops.ones((b, t), x.dtype) if mask is None else ops.cast(mask, x.dtype)  # [B, T]
        if self.mode == "mean":
            s = ops.sum(x * m[:, :, None], axis=1)
            return s / ops.maximum(ops.sum(m, axis=1, keepdims=True), 1.0)
        if self.mode == "max":
            # padding filled with the smallest value over all steps (not -1e9): the same max,
            # and no huge constant in the range a full-integer export calibrates
            low = ops.min(x, axis=1, keepdims=True)
            neg = ops.where(m[:, :, None] > 0, x, low)
            return ops.max(neg, axis=1) * ops.minimum(ops.sum(m, axis=1, keepdims=True), 1.0)
        # final: the last valid step. Masks are right-padding (valid steps come first), so
        # m[t] - m[t + 1] is 1 at the last valid step and 0 elsewhere (all 0: no valid step);
        # the sum of x times it is that step's output exactly (x is finite, x * 0 = 0)
        last = m - ops.concatenate([m[:, 1:], ops.zeros_like(m[:, :1])], axis=1)
        fwd = ops.sum(x * last[:, :, None], axis=1)
        if not self.bidirectional:
            return fwd
        h = ops.shape(x)[-1] // 2
        return ops.concatenate([fwd[:, :h], x[:, 0, h:] * m[:, :1]], axis=-1)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[-1])
