"""Forecast accuracy figures, on arrays of windows: ``y`` and forecasts ``[N, H]`` (N windows, H
steps ahead), quantile forecasts ``[N, H, Q]``, in the series' own units.

* MAE and RMSE: mean absolute error and root mean squared error over every window and step.
* sMAPE (percent): ``100 / n * sum 2 |y - f| / (|y| + |f|)``, a term with ``y = f = 0`` counting 0;
  the definition of the M4 competition (Makridakis, Spiliotis & Assimakopoulos 2020, "The M4
  Competition: 100,000 time series and 61 forecasting methods", IJF 36(1), eq. 1).
* MASE: each window's MAE divided by its series' in-sample seasonal naive MAE on the *training
  period*, ``scale = 1 / (n - m) * sum_{t=m+1..n} |y_t - y_{t-m}|`` (Hyndman & Koehler 2006,
  "Another look at measures of forecast accuracy", IJF 22(4), sec. 3.4, with the seasonal
  period ``m``; as in M4, eq. 2), averaged over windows.
* Pinball (quantile) loss of quantile level ``q``: ``max(q (y - f), (q - 1) (y - f))`` (Koenker &
  Bassett 1978, "Regression quantiles", Econometrica 46(1), the check function), averaged over
  windows, steps and the Q levels.
* Coverage: the share of targets inside ``[lowest quantile, highest quantile]``; its nominal value
  is the difference of the two levels (e.g. 0.8 for 0.1 and 0.9).
"""

from __future__ import annotations

import numpy as np


def mae(y, f) -> float:
    """Mean absolute error of ``f`` against ``y`` (same shape)."""
    return float(np.mean(np.abs(np.asarray(y, float) - np.asarray(f, float))))


def rmse(y, f) -> float:
    """Root mean squared error of ``f`` against ``y`` (same shape)."""
    return float(np.sqrt(np.mean((np.asarray(y, float) - np.asarray(f, float)) ** 2)))


def smape(y, f) -> float:
    """Symmetric MAPE in percent (M4's definition; see the module docstring), in [0, 200]."""
    y, f = np.asarray(y, float), np.asarray(f, float)
    den = np.abs(y) + np.abs(f)
    terms = np.where(den > 0, 2.0 * np.abs(y - f) / np.where(den > 0, den, 1.0), 0.0)
    return float(100.0 * np.mean(terms))


def seasonal_scale(train, m: int) -> float:
    """``1 / (n - m) * sum |y_t - y_{t-m}|`` over the training values ``train [n]`` (MASE's
    denominator); 1.0 when the series is constant or shorter than ``m + 1``."""
    train = np.asarray(train, float)
    if len(train) <= m:
        return 1.0
    s = float(np.mean(np.abs(train[m:] - train[:-m])))
    return s if s > 0 else 1.0


def mase(y, f, scales) -> float:
    """Mean over windows of ``MAE(window) / scale(window's series)``.

    Args:
        y, f: ``[N, H]``; scales: ``[N]`` (each window's :func:`seasonal_scale`).
    """
    y, f = np.asarray(y, float), np.asarray(f, float)
    per = np.mean(np.abs(y - f), axis=1) / np.asarray(scales, float)
    return float(np.mean(per))


def pinball(y, fq, quantiles) -> float:
    """Mean pinball loss of quantile forecasts ``fq [N, H, Q]`` for levels ``quantiles [Q]``."""
    y, fq, q = np.asarray(y, float)[..., None], np.asarray(fq, float), np.asarray(quantiles, float)
    d = y - fq
    return float(np.mean(np.maximum(q * d, (q - 1.0) * d)))


def coverage(y, low, high) -> float:
    """Share of ``y`` inside ``[low, high]`` (all the same shape)."""
    y = np.asarray(y, float)
    return float(np.mean((y >= np.asarray(low, float)) & (y <= np.asarray(high, float))))


def figures(y, point, scales, fq=None, quantiles=None) -> dict:
    """``{"mae", "rmse", "smape", "mase"}`` of the point forecasts ``point [N, H]``, and with
    quantile forecasts ``fq [N, H, Q]`` also ``"pinball"``, ``"coverage"`` and ``"nominal"``
    (the interval between the lowest and the highest level)."""
    out = {"mae": mae(y, point), "rmse": rmse(y, point), "smape": smape(y, point),
           "mase": mase(y, point, scales)}
    if fq is not None and quantiles is not None and len(quantiles) > 1:
        out["pinball"] = pinball(y, fq, quantiles)
        out["coverage"] = coverage(y, fq[..., 0], fq[..., -1])
        out["nominal"] = round(float(quantiles[-1] - quantiles[0]), 6)
    return out
