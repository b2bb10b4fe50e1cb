"""Statistical forecasters on the same windows as the model, for comparison (Hyndman &
Athanasopoulos, "Forecasting: principles and practice", 3rd ed., 2021, sec. 5.2 for the first three).

Each takes a series' history before the origin, ``h [o]`` (float, raw units), and returns the
``H`` forecasts ``[H]``:

* naive: the last value, ``f_{o+k} = y_o``;
* seasonal naive: the value one season before, ``f_{o+k} = y_{o+k-m(floor((k-1)/m)+1)}``;
* drift: the line through the first and the last value, ``f_{o+k} = y_o + k (y_o - y_1) / (o - 1)``;
* ETS: Holt-Winters exponential smoothing from statsmodels (additive damped trend, additive
  season of period ``m`` when ``m > 1``) fitted once on each series' *training period*; each
  origin's forecast runs statsmodels' recursions with those fitted parameters over the history
  up to the origin (no refit, nothing after the origin read).
"""

from __future__ import annotations

import warnings

import numpy as np


def naive(h, H: int, m: int = 1) -> np.ndarray:
    """``[H]``: the last observed value repeated."""
    return np.full(H, float(h[-1]))


def seasonal_naive(h, H: int, m: int) -> np.ndarray:
    """``[H]``: each step's value one season (``m`` steps) earlier, repeated past the first season;
    ``m <= 1`` or a history shorter than ``m``: naive."""
    h = np.asarray(h, float)
    if m <= 1 or len(h) < m:
        return naive(h, H)
    last = h[-m:]
    return np.asarray([last[k % m] for k in range(H)])


def drift(h, H: int, m: int = 1) -> np.ndarray:
    """``[H]``: the last value plus ``k`` times the average change over the history."""
    h = np.asarray(h, float)
    slope = (h[-1] - h[0]) / (len(h) - 1) if len(h) > 1 else 0.0
    return h[-1] + slope * np.arange(1, H + 1)


class ETS:
    """Holt-Winters exponential smoothing fitted on ``train [n]`` (see the module docstring).

    Args:
        train: the training period's values; m: the seasonal period (<= 1: no season).
    """

    def __init__(self, train, m: int):
        from statsmodels.tsa.holtwinters import ExponentialSmoothing

        self.m = m if m > 1 and len(train) >= 2 * m else None
        self.kw = {"trend": "add", "damped_trend": True, "seasonal": "add" if self.m else None,
                   "seasonal_periods": self.m}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.params = ExponentialSmoothing(np.asarray(train, float), **self.kw).fit().params

    def forecast(self, h, H: int) -> np.ndarray:
        """``[H]`` forecasts after the history ``h`` (which starts where the training period did)."""
        from statsmodels.tsa.holtwinters import ExponentialSmoothing

        p = self.params
        init = {"initial_level": p["initial_level"], "initial_trend": p["initial_trend"]}
        if self.m:
            init["initial_seasonal"] = p["initial_seasons"]
        fixed = {k: p[k] for k in ("smoothing_level", "smoothing_trend", "smoothing_seasonal",
                                   "damping_trend") if self.m or k != "smoothing_seasonal"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = ExponentialSmoothing(np.asarray(h, float), initialization_method="known", **init,
                                       **self.kw).fit(**fixed, optimized=False)
            return np.asarray(res.forecast(H), float)


SIMPLE = {"naive": naive, "seasonal_naive": seasonal_naive, "drift": drift}


def baseline_forecasts(records: list, H: int, m: int, ets: dict | None = None) -> dict:
    """``{name: [N, H]}`` forecasts of each baseline for each window record (its ``history`` before
    its ``origin``); ``ets``: ``{series id: ETS}`` adds ``"ets"``."""
    out = {k: np.stack([f(r.history[:r.origin], H, m) for r in records]) for k, f in SIMPLE.items()}
    if ets:
        out["ets"] = np.stack([ets[r.label].forecast(r.history[:r.origin], H) for r in records])
    return out


def fit_smoothing(z, m: int) -> tuple[float, float, float, float]:
    """The smoothing parameters ``(alpha, beta, gamma, phi)`` of ETS(A,Ad,A) (additive errors,
    additive damped trend, additive season of period ``m``; no season when ``m <= 1``: ``gamma =
    0``) fitted by maximum likelihood on one series' training values ``z [n]`` with statsmodels'
    :class:`~statsmodels.tsa.exponential_smoothing.ets.ETSModel` (its default bounds and
    admissible region; initial states estimated with them), as ETS estimation is described in
    Hyndman & Athanasopoulos, *Forecasting: Principles and Practice*, 3rd ed., sections 8.5-8.6.
    ETSModel's recursion is the error-correction form of
    :func:`seqkit_forecast.window.smooth_window` (``l += phi b + alpha e``, ``b = phi b + beta
    e``, ``s_t = s_{t-m} + gamma e``), so the values carry over unchanged.

    Raises:
        ValueError: fewer than ``2 m + 2`` values (or 4 without a season), or values that are
            not finite.
    """
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    z = np.asarray(z, float)
    seasonal = m > 1
    need = 2 * m + 2 if seasonal else 4
    if len(z) < need or not np.isfinite(z).all():
        raise ValueError(f"{len(z)} values ({'some not finite' if len(z) >= need else f'at least {need} needed'})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ETSModel(z, error="add", trend="add", damped_trend=True, seasonal="add" if seasonal else None,
                       seasonal_periods=m if seasonal else None).fit(disp=False)
    p = dict(zip(res.model.param_names, np.asarray(res.params, float)))
    return (p["smoothing_level"], p["smoothing_trend"], p.get("smoothing_seasonal", 0.0), p["damping_trend"])
