"""Masking for real-valued frames: padding frames are NaN.

Frame batches ``[B, T, D]`` are padded with NaN, a value no real frame holds
(data sources refuse NaN in their files). :class:`FrameMask` turns a NaN
frame into zeros and marks it as padding in the Keras mask, so the recurrent
stack skips it -- unlike ``keras.layers.Masking(0.0)``, a genuine all-zero
frame (silence) stays a valid step.
"""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="seqkit")
class FrameMask(keras.layers.Layer):
    """``frames [B, T, D] float32 (NaN = padding) -> [B, T, D]`` with mask ``[B, T] bool``.

    A step is padding when any of its ``D`` values is NaN; its values become 0.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, inputs):
        return ops.where(ops.isnan(inputs), ops.zeros_like(inputs), inputs)

    def compute_mask(self, inputs, mask=None):
        return ops.logical_not(ops.any(ops.isnan(inputs), axis=-1))

    def compute_output_shape(self, input_shape):
        return input_shape
