"""Named columns (features) of a table-like data set mapped onto records.

Shared by the sources that read a data set by column name (``hf_datasets``,
``tfds``). Which columns are named decides the record shape, one per head:

===================================  ==============================================  ===========
columns                              record                                          head
===================================  ==============================================  ===========
``text``                             ``Record(text=str)``                            LM
``text`` or ``tokens``, ``label``    ``Record(tokens=[T] str, label=str)``           acceptor
``tokens`` or ``text``, ``tags``     ``Record(tokens=[T] str, tags=[T] str)``        tagger
``source``, ``target``               ``Record(text=str, target=[U] str)``            seq2seq
===================================  ==============================================  ===========

Naming both ``label`` and ``tags`` gives records carrying both (each head reads
its own). ``text`` is split into tokens with ``data.tokenizer`` (acceptor, tagger); a
``target`` string with the source's ``target_tokenizer`` (default ``data.tokenizer``),
a target that is already a sequence of strings is taken as it is. Class ids are
turned into names with the data set's class-label names where it has them
(``ClassLabel`` features in both libraries), else written as strings.
"""

from __future__ import annotations

from typing import Optional

from seqkit import log
from seqkit.data.records import Record
from seqkit.data.typed import is_missing, label_cell, text_cell
from seqkit.data.vocab import tokenize
from seqkit.errors import DataError

#: the roles a column can play (recipe keys `data.<role>_column` / `data.<role>_key`)
ROLES = ("text", "tokens", "label", "tags", "source", "target")


def shape_error(cols: dict, key: str) -> Optional[str]:
    """Why the named columns make no record shape (``None``: they do).

    Args:
        cols: ``{role: column name or None}`` for the roles of :data:`ROLES`.
        key: the recipe keys' suffix (``"column"``: ``data.text_column``; ``"key"``: ``data.text_key``).
    """
    given = {r for r in ROLES if cols.get(r)}
    k = lambda r: f"data.{r}_{key}"  # noqa: E731
    shapes = (f"{k('text')} (language model); {k('text')} or {k('tokens')} with {k('label')} "
              f"(acceptor) or {k('tags')} (tagger); {k('source')} with {k('target')} (seq2seq)")
    if not given:
        return f"name the columns to read: {shapes}."
    if given & {"source", "target"}:
        if given != {"source", "target"}:
            extra = sorted(given - {"source", "target"})
            return (f"{k('source')} and {k('target')} (seq2seq) go together and with no other column "
                    f"(found {', '.join(k(r) for r in sorted(given))}); "
                    + ("remove " + ", ".join(k(r) for r in extra) if extra else
                       f"add {k('target' if 'source' in given else 'source')}") + ".")
        return None
    if {"text", "tokens"} <= given:
        return f"give {k('text')} (split by data.tokenizer) or {k('tokens')} (pre-split), not both."
    if not given & {"text", "tokens"}:
        return f"an input column is missing: {shapes}."
    if "tokens" in given and not given & {"label", "tags"}:
        return (f"{k('tokens')} needs {k('label')} (acceptor) or {k('tags')} (tagger); a language "
                f"model reads {k('text')}.")
    return None


def _text(x, where: str = "", what: str = "a value") -> str:
    """A cell as text (:func:`seqkit.data.typed.text_cell`: bytes decoded as UTF-8 or refused)."""
    v = text_cell(x, where, what)
    return "" if v is None else str(v)


def _seq(x) -> list:
    return [_text(t) for t in x]


def _class(v, names: Optional[list], where: str = "", what: str = "a label") -> str:
    if names is None:
        name = label_cell(v, where, what)
        if name is None:
            raise ValueError("a value is missing (null, NaN or NaT)")
        return name
    i = int(v)
    if not 0 <= i < len(names):  # -1: the ClassLabel "no label" value
        raise ValueError(f"class id {i} is outside the data set's {len(names)} class names")
    return names[i]


def row_to_record(row: dict, cols: dict, *, names: dict, tokenizer: str, target_tokenizer: str,
                  where: str, key: str = "column") -> Record:
    """One example (``{column: value}``, values as the libraries give them: ``str``/``bytes``,
    ints, lists or numpy arrays) as a :class:`Record` of the shape the columns name.

    Args:
        cols: ``{role: column name or None}`` (checked by :func:`shape_error`).
        names: ``{role: class names or None}`` for ``label`` / ``tags``.
        tokenizer / target_tokenizer: ``"char"`` or ``"whitespace"`` (see the module docstring).
        where: the example's place, for messages and ``Record.where``.
        key: the recipe keys' suffix, for messages.

    Raises:
        DataError: a missing (null) value, a string where a sequence is expected (or the other
            way round), or a class id outside the class names; naming ``where`` and the key.
    """
    def get(role, *, seq: Optional[bool] = None):
        col = cols[role]
        v = row[col]
        if is_missing(v):
            raise DataError(f"{where}: column '{col}' (data.{role}_{key}) is empty (null); every "
                            f"example needs a value. Drop or fill the row.")
        is_seq = not isinstance(v, (str, bytes)) and hasattr(v, "__len__")
        if seq is not None and is_seq != seq:
            want = "a sequence of strings" if seq else "a string"
            raise DataError(f"{where}: column '{col}' (data.{role}_{key}) holds "
                            f"{'a sequence' if is_seq else 'a single value'} ({_text(v)[:60]!r}); "
                            f"it must be {want}."
                            + (f" Name a string column with data.text_{key}, or a sequence column "
                               f"with data.tokens_{key}." if role in ("text", "tokens") else ""))
        return v

    if cols.get("source"):
        tgt = get("target")
        is_seq = not isinstance(tgt, (str, bytes)) and hasattr(tgt, "__len__")
        target = _seq(tgt) if is_seq else tokenize(_text(tgt, where, "the target"), target_tokenizer)
        return Record(text=_text(get("source", seq=False), where, "the source"), target=target, where=where)
    if not cols.get("label") and not cols.get("tags"):
        return Record(text=_text(get("text", seq=False), where, "the text"), where=where)
    toks = _seq(get("tokens", seq=True)) if cols.get("tokens") else tokenize(
        _text(get("text", seq=False), where, "the text"), tokenizer)
    rec = Record(tokens=toks, where=where)
    role = None
    try:  # both may be named: the tagger reads the tags, the acceptor the label
        if cols.get("tags"):
            role = "tags"
            what = f"column '{cols['tags']}' (data.tags_{key})"
            rec.tags = [_class(t, names.get("tags"), where, what) for t in get("tags", seq=True)]
        if cols.get("label"):
            role = "label"
            what = f"column '{cols['label']}' (data.label_{key})"
            rec.label = _class(get("label", seq=False), names.get("label"), where, what)
    except ValueError as exc:
        raise DataError(f"{where}: column '{cols[role]}' (data.{role}_{key}): {exc}. Drop unlabelled "
                        f"examples first.") from exc
    return rec


def drop_blank_texts(records: list, cols: dict, where: str) -> list:
    """Language-model lines (``text`` alone) that are empty or white space are dropped, as
    ``text_lines`` drops empty lines (counted in a logged line); other shapes are returned as
    they are (their heads refuse an empty sequence by name)."""
    if cols.get("source") or cols.get("label") or cols.get("tags"):
        return records
    keep = [r for r in records if r.text.strip()]
    if len(keep) < len(records):
        log.info(f"{where}: {len(records) - len(keep)} empty text value(s) skipped.")
    return keep
