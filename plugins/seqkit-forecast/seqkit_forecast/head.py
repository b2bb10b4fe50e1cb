"""The ``forecast`` head: an encoder RNN reads ``context`` past steps and answers the next ``horizon``
steps at once (a direct multi-horizon forecast), as points or as quantiles.

Model: ``frames [B, C, D] float32`` (the window's ``C = context`` steps of target, covariates and
calendar features, scaled per series) -> the target column as ``head.inputs`` says (level,
differences, or relative to the last observation: :class:`seqkit_forecast.window.TargetInputs`) ->
the recipe's recurrent stack (any cell, :func:`seqkit.layers.stack.apply_stack`) -> the final
step's output -> ``[B, H * Q]`` (the layer :class:`QuantileOutput`; row ``h * Q + q`` is step
``h + 1``'s level ``q``) -> plus the ``head.anchor`` reference forecast (none, naive, seasonal
naive, exponential smoothing over the window: :class:`seqkit_forecast.window.Anchor`) -> ``logits [B, H * Q] float32``, in the target's
scaled units. ``Q = 1`` for a point forecast (loss ``mae`` or ``mse``); with ``head.quantiles``
(e.g. ``[0.1, 0.5, 0.9]``) the loss is the pinball loss averaged over the levels, and the levels
never cross: level 0 is a free value and each next level adds a softplus (> 0) to the one below.

Scaling: each series' target is transformed (``head.transform``: none or log), then every input
column less the mean of the series' *training period* and over a scale (``head.scale``: the
standard deviation, or the in-sample seasonal naive MAE for the target) -- statistics read from
the training windows alone (:meth:`ForecastHead.fit`); forecasts are scaled back and transformed
back. The scaling travels in the run (``forecast_assets.json``) and in an export's metadata
(``forecast.scaling``, ``forecast.transform``), so the lone ``.tflite`` is enough to stream.

``head.smoothing: fitted``: the smoothing parameters of ``anchor: smoothed`` and ``inputs:
deseasonalised`` are each series' own, fitted by maximum likelihood as ETS(A,Ad,A) on its scaled
training period (:func:`seqkit_forecast.baselines.fit_smoothing`; ETS estimation as in Hyndman &
Athanasopoulos, FPP3 8.6; per-series smoothing as in Smyl's ES-RNN, 2020); they travel with the
scaling (``smoothing`` in ``forecast_assets.json`` and the export's ``forecast`` metadata) and
reach the model as the last four columns of every frame (``D + 4`` input columns).
``head.smoothing.learn``: one set for all series, learned with the network as weights of
:class:`seqkit_forecast.window.LearnedSmoothing`, which appends them to the frames inside the model
(the input stays ``D`` columns wide). ``head.smoothing.start``: where each window's initial
seasonal terms come from (:func:`seqkit_forecast.window.smooth_window`).

Export: the step model (:class:`seqkit_forecast.window.WindowStepper`) takes one scaled observation
``frame [B, D] float32`` and its state, the last ``context`` frames, and returns the forecasts of
the next ``horizon`` steps as if the series ended there: from the ``context``-th observation on,
exactly what the Keras model answers for the window that ends at that observation.
"""

from __future__ import annotations

import json
import os
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from seqkit.errors import DataError, RecipeError, RunDirError, SeqkitError
from seqkit.heads.base import Head
from seqkit.registry import register_head

from seqkit_forecast import metrics as M
from seqkit_forecast import window as _window  # noqa: F401  registers the window layers: a saved run loads
from seqkit_forecast.metadata import read_run_assets
from seqkit_forecast.source import TimeSeriesOptions, calendar_features, read_series

ASSETS = "forecast_assets.json"


class SmoothingOptions(BaseModel):
    """``head.smoothing``: the parameters of ``head.anchor: smoothed`` and ``head.inputs:
    deseasonalised`` (additive damped-trend Holt-Winters run over each window,
    :func:`seqkit_forecast.window.smoothed_forecast`): one fixed set for every series, each in
    ``[0, 1]``, or ``head.smoothing: fitted`` (read as ``fitted: true``): each series' own, fitted
    as ETS(A,Ad,A) on its training period (:func:`seqkit_forecast.baselines.fit_smoothing`).

    Attributes:
        level: ``alpha``, how fast the level follows a surprise (1: the last deseasonalised value).
        trend: ``beta``, how fast the trend does (0: the trend the window's first two seasons show).
        season: ``gamma``, how fast the seasonal profile does (0: the window's first season's).
        damping: ``phi``, the trend's damping per step (0: no trend).
        fitted: fit the four per series instead (then none of them is given).
        start: where the window's initial seasonal terms come from: ``first`` (its first season,
            less the line through its first two seasons' means) or ``all`` (the mean over all its
            whole seasons, less the least-squares line through their means: the classical
            decomposition's seasonal indices); see :func:`seqkit_forecast.window.smooth_window`.
        learn: start from the four values and learn those strictly inside ``(0, 1)`` with the
            network, one set for all series (:class:`seqkit_forecast.window.LearnedSmoothing`).
    """

    model_config = ConfigDict(extra="forbid")
    level: float = Field(0.3, ge=0, le=1)
    trend: float = Field(0.0, ge=0, le=1)
    season: float = Field(0.3, ge=0, le=1)
    damping: float = Field(0.98, ge=0, le=1)
    fitted: bool = False
    start: Literal["first", "all"] = "first"
    learn: bool = False

    @model_validator(mode="before")
    @classmethod
    def _word(cls, v):
        if isinstance(v, str):
            if v.strip() != "fitted":
                raise ValueError(f"{v!r}: write 'fitted' (each series' own parameters) or a mapping of "
                                 f"level, trend, season, damping")
            return {"fitted": True}
        return v

    @model_validator(mode="after")
    def _alone(self):
        given = sorted(self.model_fields_set - {"fitted", "start"})
        if self.fitted and self.learn:
            raise ValueError("fitted fixes each series' own parameters and learn learns one set with the "
                             "network; give one of them")
        if self.fitted and given:
            raise ValueError(f"fitted fits all four parameters per series; drop {', '.join(given)} "
                             f"(or drop fitted to fix them for every series)")
        return self

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        # a run's resolved recipe writes ``smoothing: fitted``, as a recipe does, and reads back
        if self.fitted:
            return "fitted" if self.start == "first" else {"fitted": True, "start": self.start}
        return handler(self)

    def values(self) -> tuple:
        """``(alpha, beta, gamma, phi)``."""
        return (self.level, self.trend, self.season, self.damping)


class ForecastOptions(BaseModel):
    """Recipe keys under ``head`` of ``type: forecast``.

    Attributes:
        loss: ``mae`` or ``mse`` (point forecasts); ``pinball`` with ``quantiles``.
        quantiles: increasing levels in (0, 1) (e.g. ``[0.1, 0.5, 0.9]``); empty: a point forecast.
            The point forecast of a quantile model is its 0.5 level (else the middle one).
        season: the seasonal period ``m`` in steps (MASE's scale, seasonal naive, ETS); 1: none.
        ets: also fit the ETS baseline (statsmodels; slower on long seasons).
        transform: ``none``, or ``log`` (the model sees and forecasts the logarithm of the target,
            for series whose seasonal swing grows with their level; every target value must be > 0).
        scale: what each series' (transformed) target is divided by once its training-period mean
            is taken off: ``std`` (its standard deviation) or ``seasonal_mae`` (its in-sample
            seasonal naive mean absolute error, MASE's denominator: an MAE loss is then a MASE loss,
            and each series weighs in by how hard it is to forecast, not by its units).
        inputs: how the target column reaches the encoder (:class:`seqkit_forecast.window.TargetInputs`):
            ``level``, ``difference``, ``relative`` (to the window's last observation) or
            ``deseasonalised`` (less the seasonal terms and the final level of the window's
            exponential smoothing, with ``smoothing``; ``data.context`` must hold two seasons).
        anchor: the reference forecast the network's output is added to
            (:class:`seqkit_forecast.window.Anchor`): ``none``, ``last``, ``seasonal``, or
            ``smoothed`` (Holt-Winters over the window, with ``smoothing``; ``data.context`` must
            hold two seasons).
        smoothing: :class:`SmoothingOptions` (one set for every series), or ``fitted``: each
            series' own, fitted as ETS(A,Ad,A) on its training period (see the module docstring);
            read with ``anchor: smoothed`` and ``inputs: deseasonalised``.
        balance: weigh each series the same in the training loss, whatever its number of
            training windows (each window's weight: windows / (series x that series' windows)).
        future_calendar: the calendar features (``data.calendar``) of the ``horizon`` steps
            ahead, known in advance, also feed the output layer
            (:class:`seqkit_forecast.window.FutureCalendar`).
    """

    model_config = ConfigDict(extra="forbid")
    loss: Literal["mae", "mse", "pinball"] = "mae"
    quantiles: list[float] = []
    season: int = Field(1, ge=1)
    ets: bool = True
    transform: Literal["none", "log"] = "none"
    scale: Literal["std", "seasonal_mae"] = "std"
    inputs: Literal["level", "difference", "relative", "deseasonalised"] = "level"
    anchor: Literal["none", "last", "seasonal", "smoothed"] = "none"
    smoothing: SmoothingOptions = SmoothingOptions()
    future_calendar: bool = False
    balance: bool = False

    @model_validator(mode="after")
    def _levels(self):
        q = self.quantiles
        if any(not 0 < v < 1 for v in q) or any(b <= a for a, b in zip(q, q[1:])):
            raise ValueError(f"quantiles {q}: increasing levels strictly between 0 and 1, e.g. [0.1, 0.5, 0.9]")
        if self.loss == "pinball" and not q:
            raise ValueError("loss pinball needs quantiles, e.g. quantiles: [0.1, 0.5, 0.9]")
        if q and self.loss != "pinball":
            raise ValueError(f"quantiles are trained with loss: pinball (not {self.loss}); set head.loss: "
                             f"pinball or drop head.quantiles")
        if self.smoothing.learn and self.anchor != "smoothed" and self.inputs != "deseasonalised":
            raise ValueError("head.smoothing.learn learns the parameters of head.anchor: smoothed and head.inputs: "
                             f"deseasonalised, and this recipe uses neither (anchor {self.anchor}, inputs "
                             f"{self.inputs}); set one of them or drop head.smoothing.learn")
        if self.smoothing.fitted and self.anchor != "smoothed" and self.inputs != "deseasonalised":
            raise ValueError("head.smoothing: fitted fits the parameters of head.anchor: smoothed and head.inputs: "
                             f"deseasonalised, and this recipe uses neither (anchor {self.anchor}, inputs "
                             f"{self.inputs}); set one of them or drop head.smoothing")
        return self


def _keras():
    import keras

    return keras


keras = _keras()


@keras.saving.register_keras_serializable(package="seqkit_forecast")
class QuantileOutput(keras.layers.Layer):
    """``[B, F] float32 -> [B, H * Q] float32``: a dense layer of ``H * Q`` outputs; with ``Q > 1``
    the levels of each step are made non-decreasing: ``z_0 = a_0``, ``z_q = z_{q-1} +
    softplus(a_q)`` (so quantile forecasts never cross).

    Args:
        horizon: ``H``; levels: ``Q``.
    """

    def __init__(self, horizon: int, levels: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.horizon, self.levels = int(horizon), int(levels)
        self.dense = keras.layers.Dense(self.horizon * self.levels, name="dense")

    def build(self, input_shape):
        self.dense.build(input_shape)

    def get_config(self):
        return {**super().get_config(), "horizon": self.horizon, "levels": self.levels}

    def call(self, x):
        from keras import ops

        a = self.dense(x)
        if self.levels == 1:
            return a
        a = ops.reshape(a, (-1, self.horizon, self.levels))
        z = ops.concatenate([a[..., :1], ops.softplus(a[..., 1:])], axis=-1)
        return ops.reshape(ops.cumsum(z, axis=-1), (-1, self.horizon * self.levels))


@keras.saving.register_keras_serializable(package="seqkit_forecast")
class ForecastLoss(keras.losses.Loss):
    """``y_true [B, H]``, ``y_pred [B, H * Q]`` (scaled units) -> mean absolute or squared error
    (``Q = 1``) or the pinball loss averaged over steps and levels (see :mod:`seqkit_forecast.metrics`)."""

    def __init__(self, kind: str = "mae", quantiles=(), name: str = "forecast_loss", **kwargs):
        super().__init__(name=name, **kwargs)
        self.kind, self.quantiles = kind, [float(q) for q in quantiles]

    def get_config(self):
        return {**super().get_config(), "kind": self.kind, "quantiles": self.quantiles}

    def call(self, y_true, y_pred):
        from keras import ops

        y_true = ops.cast(y_true, "float32")
        if self.kind == "pinball":
            q = ops.convert_to_tensor(np.asarray(self.quantiles, np.float32))
            d = y_true[..., None] - ops.reshape(y_pred, (-1, ops.shape(y_true)[1], len(self.quantiles)))
            return ops.mean(ops.maximum(q * d, (q - 1.0) * d), axis=(1, 2))
        d = y_true - y_pred
        return ops.mean(ops.abs(d) if self.kind == "mae" else d * d, axis=1)


def series_weights(labels: list) -> np.ndarray:
    """``[N]`` float32: window ``i`` of series ``s`` weighs ``N / (S * n_s)`` (``S`` series, ``n_s``
    windows of ``s``), so every series adds the same total weight ``N / S`` and the weights average 1."""
    from collections import Counter

    n = Counter(labels)
    return np.asarray([len(labels) / (len(n) * n[s]) for s in labels], np.float32)


def _iso(t) -> str:
    import pandas as pd

    return pd.Timestamp(t).isoformat()


def future_times(last, freq: str | None, H: int) -> list[str]:
    """The ``H`` time stamps after ``last`` at frequency ``freq`` (ISO strings; None: step numbers)."""
    import pandas as pd

    if freq is None:
        return [f"+{k}" for k in range(1, H + 1)]
    return [_iso(t) for t in pd.date_range(pd.Timestamp(last), periods=H + 1, freq=freq)[1:]]


class Scaler:
    """Per-series standardisation fitted on training windows.

    Attributes:
        stats: ``{series id: {"mean": [D], "std": [D]}}`` (the target is column 0; calendar
            columns keep mean 0, std 1); mase_scale: ``{series id: float}``; fitted_until:
            ``{series id: ISO time}``, the last time stamp the statistics read; frequency: the
            pandas frequency of the time steps; smoothing: None, or ``{series id: [alpha, beta,
            gamma, phi]}`` (``head.smoothing: fitted``), appended to every frame of the series.
    """

    def __init__(self, stats=None, mase_scale=None, fitted_until=None, frequency=None, transform="none",
                 smoothing=None):
        self.stats, self.mase_scale = stats or {}, mase_scale or {}
        self.fitted_until, self.frequency, self.transform = fitted_until or {}, frequency, transform
        self.smoothing = smoothing

    def forward(self, y, where: str = "data"):
        """The transformed target (``log`` or unchanged), float64 like ``y``.

        Raises:
            seqkit.errors.DataError: ``log`` of a value <= 0 (names ``where``).
        """
        y = np.asarray(y, np.float64)
        if self.transform != "log":
            return y
        if (y <= 0).any():
            bad = float(y[y <= 0].flat[0])
            raise DataError(f"{where}: head.transform: log needs every target value > 0; this window "
                            f"holds {bad:g}. Drop the transform (head.transform: none) or shift the "
                            f"series to positive values.")
        return np.log(y)

    def inverse(self, y):
        """The forecasts back in the series' units (``exp`` under ``log``)."""
        return np.exp(y) if self.transform == "log" else y

    @classmethod
    def fit(cls, records: list, data: TimeSeriesOptions, season: int, transform: str = "none",
            scale: str = "std", smoothing: bool = False) -> "Scaler":
        """Statistics of each series' training period, read from the training windows alone
        (every value a window holds, each time stamp once): the mean of each input column and,
        for the target, the standard deviation (``scale: std``) or the in-sample seasonal naive
        MAE (``seasonal_mae``) of the transformed values; MASE's scale in the series' units;
        with ``smoothing``, the ETS(A,Ad,A) parameters fitted on the transformed, scaled target
        (:func:`seqkit_forecast.baselines.fit_smoothing`).

        Raises:
            seqkit.errors.DataError: ``log`` of a value <= 0; with ``smoothing``, a training
                period too short to fit (the series named).
        """
        import pandas as pd

        from seqkit_forecast.baselines import fit_smoothing

        C, K = data.context, 1 + len(data.covariates)
        rows: dict = {}
        for r in records:
            by = rows.setdefault(r.label, {})
            for i, t in enumerate(r.times[:C]):
                by[t] = r.frames[i, :K]
            for j, t in enumerate(r.times[C:]):
                if t not in by:
                    by[t] = np.concatenate([[r.target[j]], np.full(K - 1, np.nan)])
        out = cls(transform=transform)
        for sid, by in rows.items():
            times = sorted(by)
            v = np.stack([by[t] for t in times]).astype(np.float64)
            raw = v[:, 0].copy()
            v[:, 0] = out.forward(raw, f"series '{sid}' (training period)")
            mean, std = np.nanmean(v, axis=0), np.nanstd(v, axis=0)
            if scale == "seasonal_mae":
                std[0] = M.seasonal_scale(v[:, 0], season)
            std = np.where(std > 0, std, 1.0)
            n_cal = 2 * len(data.calendar)
            out.stats[sid] = {"mean": [*map(float, mean), *[0.0] * n_cal], "std": [*map(float, std), *[1.0] * n_cal]}
            if smoothing:
                try:
                    fitted = fit_smoothing((v[:, 0] - mean[0]) / std[0], season)
                except ValueError as exc:
                    raise DataError(f"series '{sid}': head.smoothing: fitted cannot fit ETS on its training "
                                    f"period ({exc}). Lengthen the training period (fewer data.valid_steps "
                                    f"/ test_steps) or give head.smoothing fixed values.") from None
                out.smoothing = out.smoothing or {}
                out.smoothing[sid] = [float(min(max(p, 0.0), 1.0)) for p in fitted]
            out.mase_scale[sid] = M.seasonal_scale(raw, season)
            out.fitted_until[sid] = _iso(times[-1])
            if out.frequency is None and len(times) > 2:
                out.frequency = pd.infer_freq(pd.DatetimeIndex(times))
        return out

    def to_dict(self) -> dict:
        """What the run's ``forecast_assets.json`` and an export's ``forecast`` metadata hold
        (``smoothing`` only when fitted)."""
        out = {"scaling": self.stats, "mase_scale": self.mase_scale, "fitted_until": self.fitted_until,
               "frequency": self.frequency, "transform": self.transform}
        if self.smoothing is not None:
            out["smoothing"] = self.smoothing
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "Scaler":
        """The inverse of :meth:`to_dict` (unchecked; see :meth:`check_smoothing`)."""
        return cls(d["scaling"], d.get("mase_scale"), d.get("fitted_until"), d.get("frequency"),
                   d.get("transform", "none"), d.get("smoothing"))

    def check_smoothing(self) -> str | None:
        """None when every series with a scaling has four finite fitted smoothing parameters in
        ``[0, 1]``; else the first bad key (e.g. ``smoothing.air.2``) and what is wrong with it."""
        if not isinstance(self.smoothing, dict):
            return "smoothing: missing (the run was fitted with head.smoothing: fitted)"
        for sid in self.stats:
            p = self.smoothing.get(sid)
            if not isinstance(p, list) or len(p) != 4:
                return f"smoothing.{sid}: {'missing' if p is None else repr(p)}, not four values (alpha, beta, gamma, phi)"
            for k, v in enumerate(p):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                    return f"smoothing.{sid}.{k}: {v!r}, not a number in [0, 1]"
        return None

    def frames(self, frames, sid: str, where: str) -> np.ndarray:
        """Raw input columns ``[T, D]`` -> the model's input ``[T, D]`` float32: the target
        transformed, then every column less its mean and over its scale; with fitted smoothing,
        ``[T, D + 4]``: the series' ``(alpha, beta, gamma, phi)`` appended to every row."""
        m, s = self.of(sid, where)
        x = np.array(frames, np.float64)
        x[:, 0] = self.forward(x[:, 0], where)
        x = (x - m) / s
        if self.smoothing is not None:
            x = np.concatenate([x, np.broadcast_to(np.asarray(self.smoothing[sid], np.float64), (len(x), 4))], axis=1)
        return x.astype(np.float32)

    def target(self, y, sid: str, where: str) -> np.ndarray:
        """Raw future values ``[H]`` -> scaled units ``[H]`` float32."""
        m, s = self.of(sid, where)
        return ((self.forward(y, where) - m[0]) / s[0]).astype(np.float32)

    def unscale(self, z, sid: str, where: str) -> np.ndarray:
        """Scaled forecasts (any shape) -> the series' units (float64)."""
        m, s = self.of(sid, where)
        return self.inverse(np.asarray(z, np.float64) * float(s[0]) + float(m[0]))

    def of(self, sid: str, where: str):
        """``(mean [D], std [D])`` float32 of series ``sid``.

        Raises:
            seqkit.errors.DataError: a series the run was not trained on (named, with ``where``).
        """
        if sid not in self.stats:
            known = ", ".join(sorted(self.stats)[:8])
            raise DataError(f"{where}: series '{sid}' was not in the training data, so it has no "
                            f"scaling; the run knows {known}{' ...' if len(self.stats) > 8 else ''}.")
        s = self.stats[sid]
        return np.asarray(s["mean"], np.float32), np.asarray(s["std"], np.float32)


@register_head("forecast")
class ForecastHead(Head):
    """Direct multi-horizon forecasting (see the module docstring)."""

    Options = ForecastOptions
    causal = True
    answers = "predict"
    subword_inputs = False
    starter_task = "forecast"

    @classmethod
    def starter(cls, paths, rel):
        """``seqkit init --task forecast`` (:func:`seqkit_forecast.starter.forecast_starter`)."""
        from seqkit_forecast.starter import forecast_starter

        return forecast_starter(paths, rel)

    def __init__(self, recipe, vocab=None):
        """Raises:
            seqkit.errors.RecipeError: ``head.anchor: smoothed`` or ``head.inputs: deseasonalised``
                with a ``data.context`` shorter than two seasons (the smoothing starts from the
                window's first two seasons)."""
        super().__init__(recipe, None)
        self.data: TimeSeriesOptions = recipe.data_options
        o = self.options
        for key, val, other in (("anchor", o.anchor, "seasonal"), ("inputs", o.inputs, "difference")):
            if val in ("smoothed", "deseasonalised") and self.data.context < 2 * o.season:
                raise RecipeError(f"{getattr(recipe, 'path', None) or 'recipe'}: head.{key}: {val} starts "
                                  f"its level, trend and season from the window's first two seasons, so "
                                  f"data.context ({self.data.context}) must be at least 2 x head.season = "
                                  f"{2 * o.season}. Raise data.context or use head.{key}: {other}.")
        self.scaler = Scaler()
        #: each series' smoothing fitted on its training period, appended to its frames
        self.fitted = o.smoothing.fitted
        self.width = self.data.width + (4 if self.fitted else 0)
        q = list(self.options.quantiles)
        self.quantiles = q
        self.levels = max(1, len(q))
        self.point_level = (q.index(0.5) if 0.5 in q else len(q) // 2) if q else 0

    @classmethod
    def check_recipe(cls, config, options) -> list:
        out = super().check_recipe(config, options)
        if config.data.source != "timeseries":
            out.append((("data", "source"), f"head.type forecast reads the windows of the 'timeseries' "
                                             f"source, not '{config.data.source}'."))
        return out

    # ---------------------------------------------------------------- data
    def check_records(self, records, split):
        return records

    def fit(self, train):
        if not train:
            raise DataError("data: no training windows (the training periods are too short).")
        o = self.options
        self.scaler = Scaler.fit(train, self.data, o.season, o.transform, o.scale, smoothing=self.fitted)

    def save_assets(self, run_dir):
        path = os.path.join(run_dir, ASSETS)
        tmp = f"{path}.partial-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.scaler.to_dict(), f, indent=1)
        os.replace(tmp, path)  # staged, then renamed

    def load_assets(self, run_dir):
        path = os.path.join(run_dir, ASSETS)
        try:
            with open(path, encoding="utf-8") as f:
                raw = json.load(f)
        except (OSError, ValueError, RecursionError) as exc:
            raise RunDirError(f"{path}: missing or unreadable ({exc}); the run's scaling is lost. "
                              f"Train the run again.") from exc
        read_run_assets(raw, path, self.data.width)
        self.scaler = Scaler.from_dict(raw)
        bad = self.scaler.check_smoothing() if self.fitted else None
        if bad:
            raise RunDirError(f"{path}: key {bad}. The recipe's head.smoothing: fitted keeps each series' "
                              f"fitted smoothing parameters in this file, and they are damaged or missing, "
                              f"so the run cannot forecast as it was trained. Restore the file or train "
                              f"the run again.")

    def describe_assets(self) -> str:
        out = f"{len(self.scaler.stats)} series, scaling fitted until {max(self.scaler.fitted_until.values(), default='?')}"
        return out + (", smoothing fitted per series" if self.scaler.smoothing is not None else "")

    def arrays(self, records):
        """``(x [N, T, D] float32 scaled, y [N, H] float32 scaled or None)``."""
        x = np.stack([self.scaler.frames(r.frames, r.label, r.where) for r in records])
        if any(r.target is None for r in records):
            return x, None
        return x, np.stack([self.scaler.target(r.target, r.label, r.where) for r in records])

    def dataset(self, records, *, training, first_epoch=0):
        import tensorflow as tf

        from seqkit.data.shuffle import epoch_batches

        x, y = self.arrays(records)
        if y is None:
            y = np.zeros((len(x), self.data.horizon), np.float32)
        xt, yt = tf.constant(x), tf.constant(y)
        t = self.recipe.training
        if training and self.options.balance:
            wt = tf.constant(series_weights([r.label for r in records]))
            pick = lambda i: (tf.gather(xt, i), tf.gather(yt, i), tf.gather(wt, i))  # noqa: E731
        else:
            pick = lambda i: (tf.gather(xt, i), tf.gather(yt, i))  # noqa: E731
        return epoch_batches(np.full(len(x), x.shape[1]), t.batch_size, shuffle=training, seed=self.recipe.seed,
                             first_epoch=first_epoch, steps_per_epoch=t.steps_per_epoch if training else None,
                             batches=lambda ds: ds.map(pick))

    # ---------------------------------------------------------------- model
    def build_model(self):
        from seqkit.layers.pooling import SequencePooling
        from seqkit.layers.stack import apply_stack, make_plugin

        from seqkit_forecast.window import Anchor, LearnedSmoothing, TargetInputs

        cfg, o, d = self.recipe.model, self.options, self.data
        inp = keras.Input((d.context, self.width), name="frames")
        src, fitted = inp, self.fitted
        if o.smoothing.learn:  # the learned parameters travel as the frames' last four columns
            src, fitted = LearnedSmoothing(o.smoothing.values(), name="smoothing")(inp), True
        x = TargetInputs(o.inputs, o.season, o.smoothing.values(), fitted, o.smoothing.start,
                         name="target_inputs")(src)
        x = apply_stack(x, make_plugin(cfg, self.recipe.cell_options), cfg, causal=True)
        x = SequencePooling("final", False, name="pooling")(x)
        if o.future_calendar:
            x = keras.layers.Concatenate(name="with_future_calendar")([x, self._future_calendar()(inp)])
        out = QuantileOutput(d.horizon, self.levels, name="logits")(x)
        out = Anchor(o.anchor, d.horizon, self.levels, o.season, o.smoothing.values(), fitted,
                     o.smoothing.start, name="anchor")(src, out)
        return keras.Model(inp, out, name="forecast")

    def _future_calendar(self):
        from seqkit_forecast.window import FutureCalendar, calendar_advance

        d = self.data
        adv = calendar_advance(self.scaler.frequency, d.calendar)
        if not d.calendar or adv is None:
            raise SeqkitError(f"head.future_calendar: true needs data.calendar features and a regular "
                              f"time step (this data: calendar {list(d.calendar)}, step "
                              f"{self.scaler.frequency or 'unknown'}). Add e.g. data.calendar: [month], "
                              f"or set head.future_calendar: false.")
        return FutureCalendar(1 + len(d.covariates), adv, d.horizon, name="future_calendar")

    def loss(self):
        return ForecastLoss(self.options.loss, self.quantiles)

    def metrics(self):
        return []

    # ---------------------------------------------------------------- figures
    def forecasts(self, model, records) -> np.ndarray:
        """``[N, H, Q]`` forecasts in the series' units."""
        x, _ = self.arrays(records)
        z = np.concatenate([np.asarray(model(x[i:i + 512], training=False)) for i in range(0, len(x), 512)])
        z = z.reshape(len(x), self.data.horizon, self.levels)
        return np.stack([self.scaler.unscale(zi, r.label, r.where) for zi, r in zip(z, records)])

    def _scales(self, records):
        return np.asarray([self.scaler.mase_scale.get(r.label, 1.0) for r in records])

    def evaluate(self, model, records):
        y = np.asarray([r.target for r in records], float)
        f = self.forecasts(model, records)
        out = M.figures(y, f[..., self.point_level], self._scales(records),
                        f if self.levels > 1 else None, self.quantiles or None)
        out["windows"] = len(records)
        return out

    def baselines(self, prep) -> dict:
        """naive, seasonal naive, drift and ETS on the same validation and test windows."""
        from seqkit_forecast.baselines import ETS, baseline_forecasts

        H, m, out = self.data.horizon, self.options.season, {}
        ets = None
        recs = [r for s in ("valid", "test") for r in (prep.splits.get(s) or [])]
        if not recs or not hasattr(recs[0], "history"):
            return {}
        if self.options.ets:
            ets = {}
            for r in recs:
                if r.label not in ets:
                    ets[r.label] = ETS(r.history[:r.train_end], m)
        for split in ("valid", "test"):
            rs = prep.splits.get(split) or []
            if not rs:
                continue
            y = np.asarray([r.target for r in rs], float)
            for name, f in baseline_forecasts(rs, H, m, ets).items():
                out.setdefault(name, {})[split] = M.figures(y, f, self._scales(rs))
        return out

    def format_metrics(self, figures):
        keys = [k for k in ("mae", "rmse", "smape", "mase", "pinball", "coverage") if k in figures]
        line = ", ".join(f"{k} {figures[k]:.4f}" for k in keys)
        if "nominal" in figures:
            line += f" (nominal {figures['nominal']:g})"
        return [line]

    # ---------------------------------------------------------------- answers
    def read_inputs(self, text, name, input_format="auto"):
        """The last ``context`` rows of each series of a table like the training file (same
        columns; the target's recent values included), one record per series.

        Raises:
            seqkit.errors.DataError: a malformed table (file and row named), a series with fewer
                than ``context`` rows, or a series the run was not trained on.
        """
        if input_format not in ("auto", "text"):
            raise SeqkitError(f"{name}: --input-format {input_format}: a forecast run reads a table "
                              f"(CSV) like its training file.")
        from seqkit_forecast.frames import last_windows

        return last_windows(self, read_series(self.data, name if name.endswith(".tsv") else "input.csv",
                                              name, text=text))

    def predict(self, model, records):
        f = self.forecasts(model, records)
        out = []
        for r, fr in zip(records, f):
            res = {"where": r.where, "series": r.label, "origin": _iso(r.times[-1]),
                   "times": future_times(r.times[-1], self.scaler.frequency, self.data.horizon),
                   "forecast": [round(float(v), 5) for v in fr[:, self.point_level]]}
            if self.levels > 1:
                res["quantiles"] = {f"{q:g}": [round(float(v), 5) for v in fr[:, i]]
                                    for i, q in enumerate(self.quantiles)}
            out.append(res)
        return out

    def format_prediction(self, result, fmt="text", probabilities=False):
        """``jsonl``: the result as one JSON line; ``text``: one line per step,
        ``series<TAB>time<TAB>forecast`` (+ a column per quantile level)."""
        if fmt == "jsonl":
            return super().format_prediction(result, fmt, probabilities)
        qs = result.get("quantiles") or {}
        lines = []
        for k, t in enumerate(result["times"]):
            cells = [result["series"], t, f"{result['forecast'][k]:g}"] + [f"{v[k]:g}" for v in qs.values()]
            lines.append("\t".join(cells))
        return "\n".join(lines)

    # ---------------------------------------------------------------- export
    def stepper(self, model):
        from seqkit_forecast.window import WindowStepper

        if self.recipe.model.bidirectional:
            raise SeqkitError("a forecast run's encoder reads forward only (model.bidirectional is refused).")
        return WindowStepper(model, self.data.context, self.width)

    def export(self, prep, model, out, options, calibration):
        """seqkit's step export (:func:`seqkit.export.writer.write_step_export`), gated by the
        largest forecast difference (``--tolerance``, float32) and reporting the held-out scaled MAE
        of Keras and of the export; the arg-max agreement of forecast columns means nothing, so its
        default gate is off (an explicit ``--min-agreement`` other than the default still applies)."""
        import dataclasses

        from seqkit.export.options import DEFAULT_AGREEMENT
        from seqkit.export.writer import write_step_export

        if options.min_agreement == DEFAULT_AGREEMENT.get(options.quantize):
            options = dataclasses.replace(options, min_agreement=0.0)
        return write_step_export(prep, model, out, options, calibration)

    def export_metadata(self, stepper, full_sequence):
        d = self.data
        return {"output": f"logits [B, {d.horizon * self.levels}]: row h * Q + q is step h + 1's "
                          f"forecast at level q (Q = {self.levels}), in the series' scaled units: "
                          f"value = logit * std[0] + mean[0] of forecast.scaling[series]",
                "forecast": {"context": d.context, "horizon": d.horizon, "quantiles": self.quantiles,
                             "point_level": self.point_level, "time_column": d.time_column,
                             "id_column": d.id_column, "target": d.target, "covariates": list(d.covariates),
                             "calendar": list(d.calendar), "input": "frame [B, D]: (raw - mean) / std of "
                                                                    "the series; columns: target, covariates, "
                                                                    "calendar sin/cos pairs" + (
                                                                        ", then forecast.smoothing[series] "
                                                                        "(4 values)" if self.fitted else ""),
                             **self.scaler.to_dict()}}

    def parity_targets(self, records, T):
        if any(r.target is None for r in records):
            return None
        return self.arrays(records)[1]

    #: the most a quantized export's held-out scaled MAE may exceed the Keras model's (fraction)
    EXPORT_MAE_MARGIN = 0.10

    def export_gate(self, task, quantize):
        """Refuse an export whose held-out scaled MAE is more than :attr:`EXPORT_MAE_MARGIN` above
        the Keras model's (the arg-max agreement of forecast columns means nothing here)."""
        if not task or task["export"] <= task["keras"] * (1 + self.EXPORT_MAE_MARGIN):
            return None
        return (f"its held-out scaled MAE is {task['export']:.4g} against {task['keras']:.4g} for Keras "
                f"float32, more than {self.EXPORT_MAE_MARGIN:.0%} worse. Export --quantize dynamic-range "
                f"or none (integer ranges are too coarse for these values, e.g. with head.anchor "
                f"adding the series' level to the output)")

    def task_metric(self, logits, targets, valid):
        """Mean absolute error of the point forecast in scaled units (``{"mae_scaled", "scored"}``)."""
        z = np.asarray(logits).reshape(len(logits), self.data.horizon, self.levels)[..., self.point_level]
        return {"mae_scaled": float(np.mean(np.abs(z - targets))), "scored": int(targets.size)}

    @classmethod
    def stream_export(cls, export, metadata, request):
        """Observations in, a line at a time; from a series' ``context``-th row on,
        ``series<TAB>time<TAB>`` and the ``horizon`` point forecasts out, before the next row is
        read (:func:`seqkit_forecast.stream.forecast_stream`)."""
        from seqkit_forecast.stream import forecast_stream

        return forecast_stream(export, metadata, request)

    # ---------------------------------------------------------------- tables and pictures
    run_figures = ("backtest",)

    def read_frame(self, frame, name="<DataFrame>"):
        """A ``pandas.DataFrame`` like the training table (:func:`seqkit_forecast.frames.read_frame`)."""
        from seqkit_forecast.frames import read_frame

        return read_frame(self, frame, name)

    def results_frame(self, results):
        """One row per series and step (:func:`seqkit_forecast.frames.results_frame`)."""
        from seqkit_forecast.frames import results_frame

        return results_frame(results)

    def draw_prediction(self, results, records, path, outputs):
        """History, forecast and quantile bands (:func:`seqkit_forecast.plot.draw_prediction`)."""
        from seqkit_forecast.plot import draw_prediction

        draw_prediction(self, results, records, path, outputs)

    def draw_run_figure(self, name, prep, model, path, outputs):
        """``backtest``: the test windows' forecasts (:func:`seqkit_forecast.plot.draw_backtest`)."""
        from seqkit_forecast.plot import draw_backtest

        if name != "backtest":
            return super().draw_run_figure(name, prep, model, path, outputs)
        draw_backtest(self, model, prep.splits.get("test") or [], path, outputs, f"{prep.recipe.name}: ")
