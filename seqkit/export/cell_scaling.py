"""Per-unit LSTM cell-state scaling for int8 step exports (``--quantize int8``).

Full-integer TFLite gives every activation tensor *one* scale (Jacob et al. 2018, eq. 1:
``real = scale * (q - zero_point)``; per-channel scales exist for weights only). An LSTM's cell
state ``c`` is unbounded: in ``lm-pydoc-chars`` (LSTM 256) units count along a line and reach
``|c| = 72`` on the calibration lines (median unit 33, a tenth of the units below 6), so one int8
scale for ``c [B, H]`` has a step of ``2 * 72 / 255 = 0.57`` -- coarser than the useful range of
``tanh(c)`` and than most per-step increments. The step model of an int8 export therefore carries
the cell state divided by a per-unit constant ``s [H]`` (the largest ``|c|`` of each unit over the
calibration records' positions; at least :data:`MIN_SCALE`)::

    z = [x, h_{t-1}] [W; U] + b;   i, f, o = sigmoid(z_i, z_f, z_o);   g = tanh(z_g)
    ĉ_t = f ⊙ ĉ_{t-1} + (i ⊙ g) ⊙ (1 / s)                   (ĉ = c / s: every unit within ±1)
    h_t = o ⊙ tanh(clip(s ⊙ ĉ_t, -K, K))                     (K = :data:`CLIP`)

In exact arithmetic ``s ⊙ ĉ_t = c_t`` and the clip changes nothing where ``|c_t| <= K``; beyond,
``tanh`` is within ``1 - tanh(8) = 2.3e-7`` of ±1 either way, so the step equals Keras's
``LSTMCell`` to float32 round-off (tests/test_export_cell_scaling.py: <= 1e-6). In int8 each
tensor's range is set by the data, not by the largest unit: ``ĉ``, ``f ⊙ ĉ`` and ``i ⊙ g`` within
±1, the scaled increment within ``max |Δc| / s`` (±0.37 here), and the ``tanh`` input within ``±K``:
the clip's scalar bounds make the quantizer give the product ``s ⊙ ĉ`` the clip's range (``MINIMUM``
/ ``MAXIMUM`` share their input's scale), a step of ``2K / 255 = 0.063``. (Clipping ``ĉ`` with
per-unit bounds ``±K / s`` instead widened ``ĉ``'s own range to ``max(K / s)``; a fused
``RELU_N1_TO_1`` on ``ĉ ⊙ s / K`` was given the range of the next product, ±8.) The gate
pre-activations are one ``FULLY_CONNECTED`` with its bias (one rounding, where ``x W + h U + b``
rounds four times).

What remains is 8-bit accumulation: a unit whose increment is about one step of its own ``ĉ``
(``|Δc| ~ s / 127``, a slow counter) still drifts by up to half a step a step. ``int16x8`` keeps
the state in int16 and is exported without this rewrite (on ``lm-pydoc-chars`` it changed its
agreement from 0.9931 to 0.9925).

The exported state ``rnn_{l}_c`` then carries ``ĉ = c / s``, not ``c``. Every seqkit runtime
treats states as opaque (it feeds back what the model returned and starts from zeros, and
``ĉ = 0`` is ``c = 0``), so streaming is unchanged; the export's metadata records it
(``cell_state_scaling``: the scaled state names, ``s`` per unit, ``K``), so ``c = s * ĉ`` is
recoverable. Applied to stock Keras ``LSTMCell`` s (``lstm`` recipes, ``FusedLSTM`` included) with
``tanh`` / ``sigmoid`` activations; other cells (GRU, simple RNN, plugin cells) are left as they
are (a GRU's state is a convex mix of ``tanh`` values, within ±1 already).

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import copy

import numpy as np

from seqkit.export.calibration import step_positions

#: ``K``: ``s ⊙ ĉ`` is clipped to ``±K`` before ``tanh`` (``1 - tanh(8) = 2.3e-7``: exact in float32)
CLIP = 8.0
#: smallest per-unit scale (a unit whose cell state never leaves 0 on the calibration data)
MIN_SCALE = 1e-3


def scalable(cell) -> bool:
    """Whether ``cell`` is a stock Keras ``LSTMCell`` with ``tanh`` / ``sigmoid`` activations (what
    :class:`ScaledLSTMCell` recomputes); plugin subclasses (e.g. a peephole LSTM) are not."""
    import keras

    return (type(cell) is keras.layers.LSTMCell and cell.activation is keras.activations.tanh
            and cell.recurrent_activation is keras.activations.sigmoid)


class ScaledLSTMCell:
    """The step of a Keras ``LSTMCell`` on the scaled cell state ``ĉ = c / s`` (module docstring).

    Args:
        cell: a stock ``keras.layers.LSTMCell`` (:func:`scalable`); its weights are used as they are.
        scale: ``[H]`` float, the per-unit ``s`` (positive).
        clip: ``K``.

    Called as the cell is: ``(x [B, D], [h [B, H], ĉ [B, H]]) -> (h, [h, ĉ])``, float32. The gate
    pre-activations are one product ``[x, h_{t-1}] [W; U] + b`` (one ``FULLY_CONNECTED`` with its
    bias: one rounding in int8, where Keras's ``x W + h U + b`` converts to two products and two
    sums, each rounded).
    """

    def __init__(self, cell, scale, clip: float = CLIP):
        self.cell = cell
        self.state_size = cell.state_size
        self.scale = np.asarray(scale, np.float32)
        self.clip = float(clip)

    def __call__(self, x, states, training=False):
        import tensorflow as tf

        c = self.cell
        h_prev, c_prev = states[0], states[1]
        z = tf.matmul(tf.concat([x, h_prev], axis=-1), tf.concat([c.kernel, c.recurrent_kernel], axis=0))
        if c.use_bias:
            z = z + c.bias
        zi, zf, zg, zo = tf.split(z, 4, axis=-1)
        i, f, o, g = tf.sigmoid(zi), tf.sigmoid(zf), tf.sigmoid(zo), tf.tanh(zg)
        c_new = f * c_prev + (i * g) * tf.constant(1.0 / self.scale)
        # scalar bounds: the quantizer gives the product the clip's range (±K), so no tensor
        # before tanh spans ±max(s) (per-unit bounds on ĉ would widen ĉ's range to max(K / s))
        h = o * tf.tanh(tf.clip_by_value(c_new * tf.constant(self.scale), -self.clip, self.clip))
        return h, [h, c_new]


def _cell_offsets(cells) -> list[int]:
    """The index of each cell's first state in the flat state list."""
    out, k = [], 0
    for cell in cells:
        out.append(k)
        s = cell.state_size
        k += len(s) if isinstance(s, (list, tuple)) else 1
    return out


def cell_state_maxima(stepper, x: np.ndarray, valid: np.ndarray) -> dict[int, np.ndarray]:
    """Stream ``x`` through ``stepper`` (float32 Keras) and return, for each scalable cell's ``c``
    (key: its index in the flat state list), the largest ``|c|`` per unit over the ``valid``
    positions, ``[H]`` float32.

    Args:
        x: ``[N, T]`` int32 ids, ``[N, T, 1 + W]`` ids with characters, or ``[N, T, D]`` frames
            (padding 0, as the calibration streams them).
        valid: ``[N, T]`` bool, the positions that belong to a record.
    """
    import tensorflow as tf

    offsets = [k for cell, k in zip(stepper.cells, _cell_offsets(stepper.cells)) if scalable(cell)]
    step = tf.function(lambda xt, states: stepper.step(xt, states)[1])
    states = stepper.initial_state(len(x))
    top = {k + 1: np.zeros(int(stepper.state_sizes()[k + 1]), np.float32) for k in offsets}
    for t in range(x.shape[1]):
        states = step(tf.constant(x[:, t]), list(states))
        keep = valid[:, t]
        if keep.any():
            for k in top:
                top[k] = np.maximum(top[k], np.abs(np.asarray(states[k]))[keep].max(axis=0))
    return top


def scaled_stepper(stepper, x: np.ndarray, valid: np.ndarray, clip: float = CLIP):
    """Return ``(stepper, description)``: a copy of ``stepper`` whose scalable LSTM cells step on
    the scaled cell state (:class:`ScaledLSTMCell`, ``s`` from :func:`cell_state_maxima` of ``x``),
    and the metadata entry ``cell_state_scaling``; ``(None, None)`` when no cell is scalable.

    The copy shares the model's weights; its ``state_names`` / ``state_sizes`` are the original's.
    """
    if not any(scalable(cell) for cell in stepper.cells):
        return None, None
    maxima = cell_state_maxima(stepper, x, valid)
    names = stepper.state_names()
    out = copy.copy(stepper)
    out.cells = list(stepper.cells)
    scales = {}
    for j, (cell, k) in enumerate(zip(stepper.cells, _cell_offsets(stepper.cells))):
        if k + 1 in maxima:
            s = np.maximum(maxima[k + 1], MIN_SCALE).astype(np.float32)
            out.cells[j] = ScaledLSTMCell(cell, s, clip)
            scales[names[k + 1]] = s
    desc = {
        "states": sorted(scales),
        "clip": float(clip),
        "scale": {n: [float(v) for v in s] for n, s in scales.items()},
        "meaning": "each named state carries the LSTM cell state divided by its per-unit scale "
                   "(c = scale * state); feed back what the model returns, start from zeros",
        "calibration_max_abs_c": {n: float(s.max()) for n, s in scales.items()},
    }
    return out, desc


#: ``(x, valid [N, T] bool)`` of records as the step calibration streams them (padding 0)
stepper_inputs = step_positions
