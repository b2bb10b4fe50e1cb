"""Checks of what a head's hooks return, where the generic machinery reads it (a plugin head's
mistake is named at once, with the head's class, not found later as a dropped figure).

Imports only :mod:`seqkit.log`, so the machinery (training, runs) can use it without importing
the heads.
"""

from __future__ import annotations

import numbers

from seqkit import log

#: the split names a head's figures are keyed by
SPLITS = ("train", "valid", "test")


def checked_baselines(prep) -> dict:
    """``prep.head.baselines(prep)`` if it is ``{name: {split: number or {figure: number}}}`` (what
    ``metrics.json``, ``seqkit evaluate`` and the training summary read), else ``{}`` with a warning
    naming the head's class and the first entry that is wrong: a plugin head's author sees the
    mistake, and a finished training is not lost to it."""
    out = prep.head.baselines(prep)
    head = type(prep.head)
    where = f"{head.__module__}.{head.__qualname__}.baselines()"

    def number(v):
        return v is None or (isinstance(v, numbers.Real) and not isinstance(v, bool))  # NumPy scalars too

    def wrong(problem):
        return ValueError(f"{where} returned {problem}; a head's baselines are {{baseline name: {{split: "
                          f"figures}}}} with split one of {', '.join(SPLITS)} and figures a number or "
                          f"{{figure name: number}}, e.g. {{'training-mean': {{'test': {{'mae': 1.2}}}}}}.")

    try:
        if not isinstance(out, dict):
            raise wrong(f"a {type(out).__name__}")
        for name, per_split in out.items():
            if not isinstance(name, str) or not isinstance(per_split, dict):
                raise wrong(f"the entry {name!r}: {type(per_split).__name__}")
            for split, figures in per_split.items():
                if split not in SPLITS:
                    raise wrong(f"the entry {name!r} with the key {split!r} where a split name belongs")
                if not (number(figures) or (isinstance(figures, dict) and all(
                        isinstance(k, str) and number(v) for k, v in figures.items()))):
                    raise wrong(f"the entry {name!r}, split {split!r}: {str(figures)[:200]}")
    except ValueError as exc:
        log.warn(f"{exc} The baselines are left out of metrics.json.")
        return {}
    return out
