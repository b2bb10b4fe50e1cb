"""Paired significance tests: is one system's advantage over another on the same examples more
than chance?

McNemar's test (McNemar 1947; for comparing classifiers, Dietterich 1998, sec. 3.4) looks only at
the discordant examples of two systems scored on the same items: ``b`` = right by the first and
wrong by the second, ``c`` = the reverse. Under the null hypothesis (both equally good) each
discordant example is a fair coin, ``b ~ Binomial(b + c, 1/2)``. The exact two-sided p-value
(the "exact McNemar" / sign test, Fagerland, Lydersen & Laake 2013, eq. 2) is::

    p = min(1, 2 * sum_{k=0}^{min(b, c)} C(b + c, k) / 2^(b + c))

computed here in exact integer arithmetic (no normal approximation, no continuity correction),
so it holds for few discordant pairs as for many.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Iterable


def discordant_counts(first_correct: Iterable[bool], second_correct: Iterable[bool]) -> tuple[int, int]:
    """``(b, c)``: items right by the first system only, and by the second only.

    Args:
        first_correct, second_correct: per item, whether each system got it right (same order
            and length).

    Raises:
        ValueError: the two sequences differ in length.
    """
    a, s = [bool(x) for x in first_correct], [bool(x) for x in second_correct]
    if len(a) != len(s):
        raise ValueError(f"paired outcomes of unequal lengths: {len(a)} and {len(s)} items")
    return sum(x and not y for x, y in zip(a, s)), sum(y and not x for x, y in zip(a, s))


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value of ``b`` against ``c`` discordant items (module docstring).

    Args:
        b, c: counts of items only the first / only the second system got right (``int >= 0``).

    Returns:
        ``p`` in ``(0, 1]``; 1.0 when there is no discordant item.

    Raises:
        ValueError: a negative count.
    """
    b, c = int(b), int(c)
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b} and {c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2 ** n)))


def mcnemar(first_correct: Iterable[bool], second_correct: Iterable[bool]) -> dict:
    """McNemar's exact test of two systems' per-item outcomes.

    Returns:
        ``{"first_only": b, "second_only": c, "p_value": p}`` (:func:`mcnemar_exact`).
    """
    b, c = discordant_counts(first_correct, second_correct)
    return {"first_only": b, "second_only": c, "p_value": mcnemar_exact(b, c)}
