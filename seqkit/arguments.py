"""Argument checks shared by the Python API and the CLI: the same value gets the same message
whichever door it came through.

Each check returns the value (``int`` / ``float`` / ``str``) or raises :class:`ArgumentError`
(a :class:`~seqkit.errors.SeqkitError` and a ``ValueError``; :class:`ArgumentTypeError` is also a
``TypeError``) naming the argument, its CLI option, what was given and what is allowed:

* :func:`whole` -- an ``int`` (not ``True``, not ``"5"``, not ``5.7``; NumPy integers are fine);
* :func:`real` -- a finite number (not NaN, not infinite, not a string);
* :func:`text` -- a ``str`` (not ``None``, not ``123``);
* :func:`path` -- a file or folder path: a ``str`` or ``os.PathLike`` (not ``None``, not ``5``).
"""

from __future__ import annotations

import math
import numbers
import os

from seqkit.errors import SeqkitError


class ArgumentError(SeqkitError, ValueError):
    """An argument of a seqkit function or command that is out of range."""


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of a seqkit function or command of the wrong type."""


def _option(name: str) -> str:
    return f" (--{name.replace('_', '-')} in the CLI)"


def _bounds(low, high, low_open: bool = False) -> str:
    parts = []
    if low is not None:
        parts.append(f"> {low}" if low_open else f">= {low}")
    if high is not None:
        parts.append(f"<= {high:,}" if isinstance(high, int) else f"<= {high}")
    return " and ".join(parts)


def whole(name: str, value, low: int | None = None, high: int | None = None, *,
          optional: bool = False) -> int | None:
    """``value`` as an ``int`` in ``[low, high]`` (``None`` passes when ``optional``).

    Raises:
        ArgumentTypeError: not a whole number (a bool, a string, a float such as 5.7 or 5.0).
        ArgumentError: out of range.
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{name}={value!r}: must be a whole number (an int)"
                                + (f" {_bounds(low, high)}" if low is not None or high is not None else "")
                                + f"{_option(name)}; got a {type(value).__name__}.")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ArgumentError(f"{name}={value}: out of range; it must be {_bounds(low, high)}{_option(name)}.")
    return value


def real(name: str, value, low: float | None = None, high: float | None = None, *,
         low_open: bool = False, optional: bool = False) -> float | None:
    """``value`` as a finite ``float`` in its range (``low_open``: ``> low``; ``None`` passes when
    ``optional``).

    Raises:
        ArgumentTypeError: not a number (a bool, a string).
        ArgumentError: NaN, infinite or out of range.
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name}={value!r}: must be a number{_option(name)}; got a "
                                f"{type(value).__name__}.")
    value = float(value)
    if not math.isfinite(value):
        raise ArgumentError(f"{name}={value}: must be a finite number"
                            + (f" {_bounds(low, high, low_open)}" if low is not None or high is not None else "")
                            + f"{_option(name)}.")
    if (low is not None and (value <= low if low_open else value < low)) or (high is not None and value > high):
        raise ArgumentError(f"{name}={value:g}: out of range; it must be {_bounds(low, high, low_open)}"
                            f"{_option(name)}.")
    return value


def text(name: str, value, *, option: str | None = None) -> str:
    """``value`` when it is a ``str``.

    Raises:
        ArgumentTypeError: anything else (``None``, a number, bytes), naming the argument.
    """
    if not isinstance(value, str):
        where = f" ({option} in the CLI)" if option else ""
        raise ArgumentTypeError(f"{name}={value!r}: must be a string (text){where}; got a "
                                f"{type(value).__name__}. Pass the text itself, e.g. {name}=\"The \".")
    return value


def path(name: str, value, *, optional: bool = False, option: str | None = None) -> str | None:
    """``value`` as a path string (``os.fspath``) when it is a ``str`` or ``os.PathLike``
    (``None`` passes when ``optional``).

    Raises:
        ArgumentTypeError: anything else (``None``, a number, bytes), naming the argument.
    """
    if value is None and optional:
        return None
    if not isinstance(value, (str, os.PathLike)) or isinstance(value, bytes):
        where = f" ({option} in the CLI)" if option else ""
        raise ArgumentTypeError(f"{name}={value!r}: must be a path, a str or pathlib.Path{where}; got "
                                f"a {type(value).__name__}.")
    out = os.fspath(value)
    if not isinstance(out, str):  # a PathLike of bytes
        raise ArgumentTypeError(f"{name}={value!r}: must be a text path (str), not bytes{' (' + option + ' in the CLI)' if option else ''}.")
    return out
