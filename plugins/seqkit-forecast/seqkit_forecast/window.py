"""What the forecast head's encoder reads and what its output is added to, and its step model.

* :class:`TargetInputs` (``head.inputs``): how the window's target column reaches the encoder --
  its scaled level, its first differences, its level relative to the window's last observation, or
  the window less the seasonal terms and final level of exponential smoothing run over it
  (:func:`smooth_window`); the last three leave the encoder nothing that depends on where the
  series' level has wandered, e.g. a trend carrying the test period beyond the training period's
  range.
* :class:`Anchor` (``head.anchor``): the reference forecast the network's output is added to --
  none, the last observation (naive), the observation one season before each future step
  (seasonal naive), or exponential smoothing run over the window (``smoothed``: a level that
  follows shifts, a damped trend and a seasonal profile smoothed over the window's seasons); the
  network then learns a correction of that forecast.
* :class:`LearnedSmoothing` (``head.smoothing.learn``): the smoothing parameters as weights of the
  model, appended to the frames for the two layers above to read.
* :class:`FutureCalendar` (``head.future_calendar``): the calendar features of the ``horizon``
  steps after the window, known in advance, computed inside the model from the last observation's
  (so the step model needs no second input).
* :class:`WindowStepper`: the export's step model. Its state is the last ``context`` observations,
  so each step reruns the whole model on the window that ends at the new observation: a stream of
  observations gives, from the ``context``-th on, exactly the forecasts the Keras model gives for
  the same windows (no drift from carrying a recurrent state past the window it was trained on).
"""

from __future__ import annotations

import numpy as np

import keras

INPUTS = ("level", "difference", "relative", "deseasonalised")
ANCHORS = ("none", "last", "seasonal", "smoothed")
#: ``head.smoothing`` defaults: ``(level alpha, trend beta, season gamma, damping phi)``
SMOOTHING = (0.3, 0.0, 0.3, 0.98)
#: ``head.smoothing.start``: the initial seasonal terms from the window's first season, or from
#: all its whole seasons (:func:`smooth_window`)
STARTS = ("first", "all")
#: ``head.smoothing: fitted`` appends each series' fitted ``(alpha, beta, gamma, phi)`` to every
#: frame as this many last columns, read by :class:`TargetInputs` and :class:`Anchor`
FITTED_COLUMNS = 4


def _param(v):
    """A smoothing parameter: a Python float for a scalar, else the array or tensor ``[N]`` as is."""
    return float(v) if len(getattr(v, "shape", ())) == 0 else v


def frame_parameters(frames):
    """``frames [B, T, D + 4]`` of ``head.smoothing: fitted`` -> ``(alpha, beta, gamma, phi)``,
    each ``[B]`` (the last frame's last :data:`FITTED_COLUMNS` columns)."""
    return tuple(frames[:, -1, k - FITTED_COLUMNS] for k in range(FITTED_COLUMNS))


@keras.saving.register_keras_serializable(package="seqkit_forecast")
class TargetInputs(keras.layers.Layer):
    """``frames [B, T, D] float32 -> [B, T, D] float32`` with column 0 (the scaled target ``y``)
    replaced: ``level``: ``y_t`` (unchanged); ``difference``: ``y_t - y_{t-1}`` (0 at ``t = 0``);
    ``relative``: ``y_t - y_{T-1}`` (0 at the last step); ``deseasonalised``: ``y_t - s_t -
    l_{T-1}``, the seasonal term ``s_t`` and the final level ``l_{T-1}`` of exponential smoothing
    run over the window (:func:`smooth_window`; ES-RNN's input normalisation, Smyl 2020, in
    additive form). The other columns pass through.

    Args:
        mode: one of :data:`INPUTS`; season: ``m`` and smoothing: ``(alpha, beta, gamma, phi)``
            (``deseasonalised``; the window must hold at least ``2 m`` steps);
        fitted: the frames' last :data:`FITTED_COLUMNS` columns hold each series' own ``(alpha,
            beta, gamma, phi)`` (``head.smoothing: fitted``), used instead of ``smoothing`` and
            dropped from the output (``[B, T, D + 4] -> [B, T, D]``);
        start: the smoothing's initial seasonal terms, one of :data:`STARTS` (:func:`smooth_window`).

    Raises:
        ValueError: an unknown mode or start.
    """

    def __init__(self, mode: str = "level", season: int = 1, smoothing=SMOOTHING, fitted: bool = False,
                 start: str = "first", **kwargs):
        super().__init__(**kwargs)
        if mode not in INPUTS:
            raise ValueError(f"TargetInputs mode {mode!r}: one of {', '.join(INPUTS)}")
        if start not in STARTS:
            raise ValueError(f"TargetInputs start {start!r}: one of {', '.join(STARTS)}")
        self.mode, self.season, self.smoothing = mode, int(season), [float(v) for v in smoothing]
        self.fitted, self.start = bool(fitted), start

    def get_config(self):
        return {**super().get_config(), "mode": self.mode, "season": self.season, "smoothing": self.smoothing,
                "fitted": self.fitted, "start": self.start}

    def call(self, frames):
        from keras import ops

        smoothing = self.smoothing
        if self.fitted:
            smoothing = frame_parameters(frames)
            frames = frames[:, :, :-FITTED_COLUMNS]
        if self.mode == "level":
            return frames
        y = frames[:, :, :1]
        if self.mode == "difference":
            y = ops.concatenate([ops.zeros_like(y[:, :1]), y[:, 1:] - y[:, :-1]], axis=1)
        elif self.mode == "relative":
            y = y - y[:, -1:]
        else:
            lvl, _, s = smooth_window(frames[:, :, 0], self.season, smoothing,
                                      mean=lambda x: ops.mean(x, axis=1), start=self.start)
            y = (frames[:, :, 0] - ops.stack(s, axis=1) - lvl[:, None])[:, :, None]
        return ops.concatenate([y, frames[:, :, 1:]], axis=-1)


@keras.saving.register_keras_serializable(package="seqkit_forecast")
class LearnedSmoothing(keras.layers.Layer):
    """``frames [B, T, D] float32 -> [B, T, D + 4] float32``: the frames with the smoothing
    parameters ``(alpha, beta, gamma, phi)`` appended to every step as :data:`FITTED_COLUMNS`
    columns, for :class:`TargetInputs` and :class:`Anchor` built with ``fitted=True`` to read
    (``head.smoothing.learn``). Each parameter strictly inside ``(0, 1)`` is ``sigmoid(w)`` of a
    trainable weight ``w`` started at ``log(v / (1 - v))`` (so the untrained layer gives exactly
    ``smoothing``) and learned with the network on its multi-step loss, as Smyl's ES-RNN learns its
    smoothing coefficients (*Int. J. Forecasting* 36(1), 2020); one at 0 or 1 (e.g. no trend update,
    an undamped trend) is a choice of model and stays fixed. The weights are the model's, so
    prediction, the step model and the export use the learned values as they are.

    Args:
        smoothing: the four starting values, each in ``[0, 1]``.

    Raises:
        ValueError: not four values in ``[0, 1]``.
    """

    def __init__(self, smoothing=SMOOTHING, **kwargs):
        super().__init__(**kwargs)
        smoothing = [float(v) for v in smoothing]
        if len(smoothing) != 4 or not all(0.0 <= v <= 1.0 for v in smoothing):
            raise ValueError(f"LearnedSmoothing {smoothing}: four values (alpha, beta, gamma, phi) in [0, 1]")
        self.smoothing = smoothing
        self.free = [0.0 < v < 1.0 for v in smoothing]
        start = [float(np.log(v / (1 - v))) if f else 0.0 for v, f in zip(smoothing, self.free)]
        self.logits = self.add_weight(name="logits", shape=(FITTED_COLUMNS,),
                                      initializer=keras.initializers.Constant(start), trainable=True)

    def get_config(self):
        return {**super().get_config(), "smoothing": self.smoothing}

    def parameters(self):
        """The current ``(alpha, beta, gamma, phi)`` as a Keras tensor ``[4]`` float32."""
        from keras import ops

        free = np.asarray(self.free, np.float32)
        fixed = np.where(self.free, 0.0, self.smoothing).astype(np.float32)
        return free * ops.sigmoid(ops.cast(self.logits, "float32")) + fixed

    def values(self) -> list[float]:
        """The current ``(alpha, beta, gamma, phi)`` as Python floats."""
        return [float(v) for v in np.asarray(keras.ops.convert_to_numpy(self.parameters()))]

    def call(self, frames):
        from keras import ops

        cols = ops.zeros_like(frames[:, :, :1]) + ops.cast(self.parameters(), frames.dtype)[None, None, :]
        return ops.concatenate([frames, cols], axis=-1)


def smooth_window(y, season: int, smoothing=SMOOTHING, mean=None, start: str = "first"):
    """Additive damped-trend Holt-Winters (ETS(A,Ad,A)) run over each window ``y [N, T]`` with
    fixed parameters (numpy, or Keras tensors with ``mean(x) -> [N]`` over axis 1 given;
    ``T >= 2 m``). ``smoothing``: four floats shared by every window, or four arrays/tensors
    ``[N]``, each window's own (``head.smoothing: fitted``). ``start``: one of :data:`STARTS`,
    where the initial seasonal terms come from (see below).

    Error-correction form (Hyndman & Athanasopoulos, *Forecasting: Principles and Practice*, 3rd
    ed., sections 8.3 and 8.4; the normalising role of the level and season follows Smyl's
    ES-RNN, *Int. J. Forecasting* 36(1), 2020). With ``(alpha, beta, gamma, phi) = smoothing``:

    * start, from the window's first two seasons: trend ``b = (mean(y_m..y_{2m-1}) -
      mean(y_0..y_{m-1})) / m``; level at step ``m - 1``: ``l = mean(y_0..y_{m-1}) + b (m - 1) / 2``;
      season (``start: first``) ``s_j = y_j - (l - (m - 1 - j) b)`` for ``j < m``, or (``start:
      all``) the mean over the window's ``K = T // m`` whole seasons of ``y_{km+j}`` less the
      least-squares line through the season means ``M_k = mean(y_{km}..y_{km+m-1})`` (slope per
      step ``c = sum_k (k - kbar) M_k / (m sum_k (k - kbar)^2)``, the line ``mean_k M_k + c (t -
      (Km - 1) / 2)``): the classical decomposition's seasonal indices (Hyndman & Athanasopoulos,
      FPP3 sec. 3.4; the initial states of ETS in Hyndman et al., *Forecasting with Exponential
      Smoothing*, 2008, sec. 2.6.1, also average the seasons of a detrended start), which sum to 0;
    * each step ``t = m .. T-1``: ``e = y_t - l - phi b - s_{t-m}``; ``l <- l + phi b + alpha e``;
      ``b <- phi b + beta e``; ``s_t = s_{t-m} + gamma e``.

    Linear in ``y`` for fixed parameters, so it commutes with the per-series affine scaling;
    ``phi = 0`` drops the trend (level and season only).

    Returns:
        ``(level [N], trend [N], seasons)``: the level and trend after the window's last step and
        ``seasons``, the ``T`` seasonal terms ``s_0 .. s_{T-1}`` (each ``[N]``).
    """
    a, b_, g, phi = (_param(v) for v in smoothing)
    mean = mean or (lambda x: np.mean(x, axis=1))
    m, T = season, y.shape[1]
    first, second = mean(y[:, :m]), mean(y[:, m:2 * m])
    b = (second - first) / m
    lvl = first + b * ((m - 1) / 2)
    if start == "all":
        K = T // m
        M = [mean(y[:, k * m:(k + 1) * m]) for k in range(K)]
        w = np.arange(K) - (K - 1) / 2
        c = sum(float(w[k]) * M[k] for k in range(K)) / float(m * np.sum(w ** 2))
        mid = sum(M) / K
        line = [mid + c * (t - (K * m - 1) / 2) for t in range(K * m)]  # [N] each (constants: floats)
        s = [sum(y[:, k * m + j] - line[k * m + j] for k in range(K)) / K for j in range(m)]
    elif start == "first":
        s = [y[:, j] - (lvl - (m - 1 - j) * b) for j in range(m)]
    else:
        raise ValueError(f"smoothing start {start!r}: one of {', '.join(STARTS)}")
    for t in range(m, T):
        e = y[:, t] - lvl - phi * b - s[t - m]
        lvl = lvl + phi * b + a * e
        b = phi * b + b_ * e
        s.append(s[t - m] + g * e)
    return lvl, b, s


def smoothed_forecast(y: np.ndarray, horizon: int, season: int, smoothing=SMOOTHING,
                      start: str = "first") -> np.ndarray:
    """``[N, H]`` forecasts of :func:`smooth_window` run over the windows ``y [N, T]`` (numpy):
    step ``h = 1..H`` ahead is ``l + (phi + phi^2 + ... + phi^h) b + s_{T - m + ((h - 1) mod m)}``.
    ``smoothing``: ``(alpha, beta, gamma, phi)`` for every window, or ``[N, 4]``, each window's own;
    ``start``: one of :data:`STARTS` (:func:`smooth_window`)."""
    y = np.asarray(y, np.float64)
    p = np.asarray(smoothing, np.float64)
    if p.ndim == 2:
        smoothing = tuple(p[:, k] for k in range(4))
    lvl, b, s = smooth_window(y, season, smoothing, start=start)
    T, m = y.shape[1], season
    phi = p[:, 3:4] if p.ndim == 2 else p[3]
    damp = np.cumsum(phi ** np.arange(1, horizon + 1), axis=-1)  # [H] or [N, H]
    return np.stack([lvl + damp[..., h] * b + s[T - m + (h % m)] for h in range(horizon)], axis=1)


def anchor_forecast(y: np.ndarray, kind: str, horizon: int, season: int, smoothing=SMOOTHING,
                    start: str = "first") -> np.ndarray:
    """The reference forecast ``[N, H]`` of windows whose target columns are ``y [N, T]``
    (numpy; the same as :class:`Anchor`): ``none``: zeros; ``last``: ``y_{T-1}`` at every step
    (naive); ``seasonal``: step ``h = 1..H`` is ``y_{T - m + ((h - 1) mod m)}`` (seasonal naive,
    Hyndman & Athanasopoulos, *Forecasting: Principles and Practice*, 3rd ed., section 5.2);
    ``smoothed``: :func:`smoothed_forecast` with ``smoothing`` (four values, or ``[N, 4]``) and
    ``start``."""
    y = np.asarray(y)
    if kind == "none":
        return np.zeros((len(y), horizon), y.dtype)
    if kind == "last":
        return np.repeat(y[:, -1:], horizon, axis=1)
    if kind == "smoothed":
        return smoothed_forecast(y, horizon, season, smoothing, start)
    T = y.shape[1]
    return y[:, [T - season + (h % season) for h in range(horizon)]]


@keras.saving.register_keras_serializable(package="seqkit_forecast")
class Anchor(keras.layers.Layer):
    """``(frames [B, T, D], logits [B, H * Q]) -> logits + reference`` (``float32``), the
    reference forecast of the window's target column (column 0 of ``frames``, scaled units; see
    :func:`anchor_forecast`) added to each of the ``Q`` levels of each step (row ``h * Q + q``).

    Args:
        kind: one of :data:`ANCHORS`; horizon: ``H``; levels: ``Q``; season: ``m`` (``seasonal``:
            the window must hold at least ``m`` steps; ``smoothed``: at least ``2 m``);
        smoothing: ``(alpha, beta, gamma, phi)`` of ``smoothed``, each in ``[0, 1]``;
        fitted: read each window's ``(alpha, beta, gamma, phi)`` from the frames' last
            :data:`FITTED_COLUMNS` columns instead (``head.smoothing: fitted``);
        start: the smoothing's initial seasonal terms, one of :data:`STARTS` (:func:`smooth_window`).

    Raises:
        ValueError: an unknown kind or start, smoothing parameters outside ``[0, 1]``.
    """

    def __init__(self, kind: str = "none", horizon: int = 1, levels: int = 1, season: int = 1,
                 smoothing=SMOOTHING, fitted: bool = False, start: str = "first", **kwargs):
        super().__init__(**kwargs)
        if kind not in ANCHORS:
            raise ValueError(f"Anchor kind {kind!r}: one of {', '.join(ANCHORS)}")
        if start not in STARTS:
            raise ValueError(f"Anchor start {start!r}: one of {', '.join(STARTS)}")
        self.start = start
        smoothing = [float(v) for v in smoothing]
        if len(smoothing) != 4 or not all(0.0 <= v <= 1.0 for v in smoothing):
            raise ValueError(f"Anchor smoothing {smoothing}: four values (alpha, beta, gamma, phi) in [0, 1]")
        self.kind, self.horizon, self.levels, self.season = kind, int(horizon), int(levels), int(season)
        self.smoothing, self.fitted = smoothing, bool(fitted)

    def get_config(self):
        return {**super().get_config(), "kind": self.kind, "horizon": self.horizon, "levels": self.levels,
                "season": self.season, "smoothing": self.smoothing, "fitted": self.fitted, "start": self.start}

    def _smoothed(self, y, params=None):
        """:func:`smoothed_forecast` in Keras ops: ``y [B, T]`` -> ``[B, H]`` (``T`` static);
        ``params``: each window's ``(alpha, beta, gamma, phi)`` (each ``[B]``), else ``smoothing``."""
        from keras import ops

        m, T, H = self.season, y.shape[1], self.horizon
        if T is None or T < 2 * m:
            raise ValueError(f"Anchor smoothed needs a window of at least 2 seasons ({2 * m} steps), not {T}")
        lvl, b, s = smooth_window(y, m, params or self.smoothing, mean=lambda x: ops.mean(x, axis=1),
                                  start=self.start)
        if params is None:
            damp = [float(d) for d in np.cumsum(self.smoothing[3] ** np.arange(1, H + 1))]
        else:  # phi + phi^2 + ... + phi^h, each window's phi
            phi, power, damp = params[3], params[3], [params[3]]
            for _ in range(1, H):
                power = power * phi
                damp.append(damp[-1] + power)
        return ops.stack([lvl + damp[h] * b + s[T - m + (h % m)] for h in range(H)], axis=1)

    def call(self, frames, logits):
        from keras import ops

        if self.kind == "none":
            return logits
        y = frames[:, :, 0]
        H, m = self.horizon, self.season
        if self.kind == "last":
            ref = ops.repeat(y[:, -1:], H, axis=1)
        elif self.kind == "smoothed":
            ref = self._smoothed(y, frame_parameters(frames) if self.fitted else None)
        else:
            T = frames.shape[1]
            if T is None:  # a dynamic window: the last m steps, tiled over the horizon
                last = y[:, -m:]
                ref = ops.tile(last, (1, -(-H // m)))[:, :H]
            else:
                ref = ops.stack([y[:, T - m + (h % m)] for h in range(H)], axis=1)
        ref = ops.repeat(ref[:, :, None], self.levels, axis=2)
        return logits + ops.reshape(ref, (-1, H * self.levels))


def calendar_advance(frequency: str | None, calendar) -> list[float] | None:
    """The phase (in cycles) each calendar feature advances per time step at ``frequency`` (a
    pandas frequency string, e.g. ``30min``, ``D``, ``MS``), one per name of ``calendar`` (see
    :func:`seqkit_forecast.source.calendar_features`): exact for ``hour`` and ``day_of_week`` at a
    fixed step and for ``month`` / ``day_of_year`` at monthly, quarterly or yearly steps; at other
    steps ``month`` advances by the step over the mean month (30.436875 days) and ``day_of_year``
    over 365.25 days, smooth stand-ins for features that jump. None: no usable frequency."""
    import pandas as pd

    from seqkit_forecast.source import frequency_offset

    off = frequency_offset(frequency)
    if off is None:
        return None
    name = type(off).__name__
    months = {"MonthBegin": 1, "MonthEnd": 1, "QuarterBegin": 3, "QuarterEnd": 3, "YearBegin": 12,
              "YearEnd": 12}.get(name)
    if months is not None:
        months *= off.n
        days = months * 30.436875
    else:
        try:
            days = pd.Timedelta(off).total_seconds() / 86400.0
        except (ValueError, TypeError):
            if name != "Week":
                return None
            days = 7.0 * off.n
    out = []
    for c in calendar:
        if c == "hour":
            out.append(0.0 if months else days % 1.0)
        elif c == "day_of_week":
            out.append((days / 7.0) % 1.0)
        elif c == "day_of_year":
            out.append(months / 12.0 if months else days / 365.25)
        else:
            out.append(months / 12.0 if months else days / 30.436875 / 12.0)
    return out


@keras.saving.register_keras_serializable(package="seqkit_forecast")
class FutureCalendar(keras.layers.Layer):
    """``frames [B, T, D] float32 -> [B, H * 2K] float32``: for steps ``k = 1..H`` after the window
    and each of the ``K`` calendar pairs ``(sin a, cos a)`` of the last frame (columns ``first``,
    ``first + 1``, ...), ``(sin(a + 2 pi k w), cos(a + 2 pi k w))`` with ``w`` the feature's
    advance per step (:func:`calendar_advance`): the angle-sum rotation of the known pair.

    Args:
        first: the column of the first calendar sine; advances: ``[K]`` cycles per step; horizon: ``H``.
    """

    def __init__(self, first: int, advances, horizon: int, **kwargs):
        super().__init__(**kwargs)
        self.first, self.advances, self.horizon = int(first), [float(a) for a in advances], int(horizon)

    def get_config(self):
        return {**super().get_config(), "first": self.first, "advances": self.advances, "horizon": self.horizon}

    def call(self, frames):
        from keras import ops

        K, H = len(self.advances), self.horizon
        last = frames[:, -1, self.first:self.first + 2 * K]
        s, c = last[:, 0::2][:, None, :], last[:, 1::2][:, None, :]  # [B, 1, K]
        ang = 2 * np.pi * np.arange(1, H + 1)[:, None] * np.asarray(self.advances)[None, :]  # [H, K]
        ck = ops.convert_to_tensor(np.cos(ang).astype(np.float32))[None]
        sk = ops.convert_to_tensor(np.sin(ang).astype(np.float32))[None]
        out = ops.stack([s * ck + c * sk, c * ck - s * sk], axis=-1)  # [B, H, K, 2]
        return ops.reshape(out, (-1, H * 2 * K))


class WindowStepper:
    """The forecast export's step model (shares the model's weights): ``(frame [B, D] float32
    (scaled), states) -> (logits [B, H * Q] float32, states)``. Its one state, ``window``
    ``[B, C * D]`` float32, holds the last ``C = context`` frames, oldest first (zeros before the
    first observation); each step shifts the new frame in and runs the whole model on the window
    (every recurrent layer unrolled over its ``C`` static steps, :func:`seqkit.export.unrolled.unrolled`).

    Args:
        model: the head's training model; context: ``C``; width: ``D``.
    """

    cells: list = []  # no cell steps on its own: nothing for the int8 cell-state scaling to scale

    def __init__(self, model, context: int, width: int):
        self.model, self.context, self.width = model, int(context), int(width)

    def input_spec(self):
        import tensorflow as tf

        return tf.TensorSpec([None, self.width], tf.float32, name="frame")

    def state_names(self) -> list[str]:
        return ["window"]

    def state_sizes(self) -> list[int]:
        return [self.context * self.width]

    def initial_state(self, batch_size) -> list:
        import tensorflow as tf

        return [tf.zeros([batch_size, self.context * self.width], tf.float32)]

    def step(self, x, states):
        import tensorflow as tf

        from seqkit.export.unrolled import unrolled

        D = self.width
        window = tf.concat([states[0][:, D:], tf.cast(x, tf.float32)], axis=1)
        with unrolled(self.model):
            logits = self.model(tf.reshape(window, [-1, self.context, D]), training=False)
        return logits, [window]
