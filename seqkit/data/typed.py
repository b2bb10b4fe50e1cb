"""What a text, a label and a number may be, at the boundary where a data source hands over a cell.

Every table-like source (``table``: CSV, TSV, JSON lines, Parquet; the column sources of
:mod:`seqkit.data.columns`) reads its cells through these functions, so a cell means the same
thing whatever file it came from:

* **text** (:func:`text_cell`): ``str``; ``bytes`` (Parquet ``binary``, TFDS strings) decoded as
  UTF-8 or refused with the row; NumPy scalars as their Python value; ``None``, NaN, ``NaT`` and
  ``pd.NA`` are missing (the caller refuses an empty cell with the row).
* **label or tag** (:func:`label_cell`): a text as above, or a number written once and for all
  as its shortest form (``1``, ``1.0`` and ``np.int64(1)`` are the class ``"1"``; ``2.5`` is
  ``"2.5"``; other scalars such as dates as ``str`` writes them; never a list); never a character that breaks line-oriented output (``predict`` prints one line
  per input, a tab between fields): tab, CR, LF, VT, FF, the file/group/record separators
  U+001C-U+001E, U+0085, U+2028, U+2029 (:data:`LINE_BREAKING`).
* **column index** (:func:`column_index`): a whole number >= 0 (``-1`` does not count from the end).

NumPy is imported inside the functions that use it, so importing this module does not load it.
"""

from __future__ import annotations

import math

from seqkit.errors import DataError

#: characters that end a line or a field for ``str.splitlines``, ``csv`` or a reader of
#: ``predict``'s tab-separated output; never in a label or a tag
LINE_BREAKING = "\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def is_missing(v) -> bool:
    """True for ``None``, NaN, NumPy's / pandas' ``NaT`` and ``pd.NA`` (an empty cell)."""
    if v is None:
        return True
    if isinstance(v, float):
        return math.isnan(v)
    name = type(v).__name__
    if name in ("NaTType", "NAType"):
        return True
    if name in ("datetime64", "timedelta64"):
        import numpy as np

        return bool(np.isnat(v))
    return False


def _plain(v):
    """NumPy scalars as their Python value (``np.int64(1)`` -> ``1``)."""
    if type(v).__module__ == "numpy" and hasattr(v, "item") and getattr(v, "ndim", 0) == 0:
        return v.item()
    return v


def text_cell(v, where: str, what: str):
    """A cell as text: ``str`` as it is, ``bytes`` decoded as UTF-8; ``None`` when missing;
    any other value (numbers, booleans, dates) returned as it is for the caller to format.

    Args:
        where: the row (``file:line``), for messages. what: the column and its recipe key.

    Raises:
        DataError: bytes that are not UTF-8 (names the row, the column and the byte offset).
    """
    if is_missing(v):
        return None
    v = _plain(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        try:
            return bytes(v).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(f"{where}: {what} holds bytes that are not UTF-8 (byte {exc.start}: "
                            f"{exc.reason}); seqkit reads text as UTF-8. Convert the column to "
                            f"UTF-8 strings, or drop the row.") from None
    if is_missing(v):
        return None
    return v


def label_cell(v, where: str, what: str) -> str | None:
    """A label or tag as its class name (``None`` when missing; the caller refuses the row).

    Raises:
        DataError: bytes that are not UTF-8, a non-finite number, a list or object, or a name
            holding a character of :data:`LINE_BREAKING` (each naming the row and the column).
    """
    v = text_cell(v, where, what)
    if v is None:
        return None
    if isinstance(v, bool):
        name = "true" if v else "false"
    elif isinstance(v, int):
        name = str(v)
    elif isinstance(v, float):
        if not math.isfinite(v):
            raise DataError(f"{where}: {what} is {v}, not a class; a label is a string or a finite "
                            f"number. Fix or drop the row.")
        name = str(int(v)) if v.is_integer() and abs(v) < 2**53 else repr(v)
    elif isinstance(v, str):
        name = v.strip()
    elif not isinstance(v, (list, tuple, dict, set)) and not hasattr(v, "__len__"):
        name = str(v).strip()  # a date, a decimal: as written
    else:
        raise DataError(f"{where}: {what} holds a {type(v).__name__} ({str(v)[:60]!r}); a label is "
                        f"a string or a number. Fix or drop the row.")
    check_label(name, where, what)
    return name or None


def check_label(name: str, where: str, what: str) -> str:
    """Refuse a label / tag holding a character of :data:`LINE_BREAKING`; returns ``name``.

    Raises:
        DataError: naming the row, the column and the character (as ``\\t``, ``U+2028`` ...).
    """
    bad = next((c for c in name if c in LINE_BREAKING), None)
    if bad is not None:
        raise DataError(f"{where}: {what} {name[:60]!r} holds the character {_show(bad)}, which "
                        f"breaks seqkit's line-per-input output (predict, stream, labels.json "
                        f"readers); a label or tag is one line without tabs. Fix or drop the row.")
    return name


def _show(c: str) -> str:
    return {"\t": "TAB (\\t)", "\n": "LF (\\n)", "\r": "CR (\\r)"}.get(c, f"U+{ord(c):04X}")


def column_index(spec, key: str):
    """A recipe's column: a name (``str``) or a number counted from 0.

    Raises:
        DataError: a negative number (``-1`` would silently read another column) or a bool.
    """
    if isinstance(spec, bool) or (isinstance(spec, int) and spec < 0):
        raise DataError(f"data.{key}: {spec!r} is not a column; columns are numbered from 0 (the "
                        f"first is 0), and a negative number does not count from the end. Give "
                        f"the column's name or its number from 0.")
    return spec
