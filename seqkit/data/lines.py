"""The one rule by which seqkit splits a user's text file into lines.

A line ends at ``\\n`` only; a ``\\r`` before it (``\\r\\n`` files) and a byte-order
mark at the start of the text are dropped. Python's :meth:`str.splitlines` is not
used: it also breaks at ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``, U+0085, U+2028 and
U+2029, characters that occur inside lines of text taken from JSON or the web, so
one line of a user's file would become two records and the outputs of ``seqkit
predict`` / ``decode`` / the streaming runtimes would no longer line up one-to-one
with the input's lines (nor the ``file:line`` in messages). Training data
(``text_lines``, ``parallel_text``, ``table`` JSON lines, ``word/TAG``, CoNLL, CMUdict,
``.ts``) and prediction input are split by this same rule.
"""

from __future__ import annotations


def split_lines(text: str) -> list[str]:
    """The lines of ``text``: split at ``\\n`` only, a trailing ``\\r`` of each line and a
    leading byte-order mark (U+FEFF) dropped, no empty last line after a final ``\\n``.

    Args:
        text: the whole file (str).

    Returns:
        The lines (list of str, without their line ends); line ``n`` of the file is
        element ``n - 1``, empty lines included.
    """
    lines = [ln.removesuffix("\r") for ln in text.removeprefix("\ufeff").split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines
