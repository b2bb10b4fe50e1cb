"""Perplexity from a cross-entropy: the one rule every report uses.

``perplexity = exp(H)`` with ``H`` the mean cross-entropy in nats per token (Jelinek et al. 1977;
Jurafsky & Martin, *Speech and Language Processing*, 3rd ed., Section 3.3). It is computed in
float64 from ``H``, so it stays a number for every ``H`` up to ``ln(DBL_MAX)``
(:data:`MAX_CROSS_ENTROPY`, about 709.78 nats): e.g. ``H = 100`` gives ``2.688e43``, where a
float32 ``exp`` (a Keras metric's) would already overflow at 88.72 nats. Above that, ``exp(H)``
is beyond every double and the perplexity is ``math.inf``: neither capped (a finite number that is
wrong) nor an ``OverflowError``. Strict JSON (:func:`seqkit.runs.rundir.strict_json`) writes a
number that is not finite as ``null``, so a report's ``"perplexity": null`` means exactly this:
``H`` above 709.78 nats; the ``cross_entropy`` beside it, its logarithm, stays exact.
"""

from __future__ import annotations

import math
import sys

#: ``ln(DBL_MAX)`` (709.782712893384): the largest cross-entropy whose perplexity is a float64.
MAX_CROSS_ENTROPY = math.log(sys.float_info.max)


def perplexity(cross_entropy: float) -> float:
    """``exp(cross_entropy)`` as a Python float, ``math.inf`` beyond float64 range.

    Args:
        cross_entropy: mean nats per token (a float, NumPy or 0-d array scalar).

    Returns:
        ``math.exp(cross_entropy)``; ``math.inf`` when ``cross_entropy > MAX_CROSS_ENTROPY``
        (including ``+inf``); ``nan`` for ``nan``.
    """
    h = float(cross_entropy)
    if math.isnan(h):
        return math.nan
    if h > MAX_CROSS_ENTROPY:
        return math.inf
    return math.exp(h)
