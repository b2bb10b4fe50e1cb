"""``parallel_text``: (source, target) pairs for the encoder-decoder (``seq2seq``) head.

Either two *aligned* UTF-8 files, line ``n`` of the target being the output for line ``n``
of the source::

    data:
      source: parallel_text
      source_path: train.src          # or train_source_path + train_target_path,
      target_path: train.tgt          #    valid_source_path + ..., test_source_path + ...

or one *table* with a source and a target column (CSV, TSV, JSON lines, Parquet; read as
the ``table`` source reads it, :mod:`seqkit.data.table`)::

    data:
      source: parallel_text
      path: pairs.tsv                 # or train_path / valid_path / test_path
      source_column: en               # default "source" (or column 0 with header: false)
      target_column: de               # default "target" (or column 1)

One file (pair) is divided by the seeded ``data.split``; per-split files are used as given
(a missing valid or test split is carved from train).

Each side has its own tokenizer and vocabulary: the source is split by ``data.tokenizer``
(and ``data.lowercase``) -- the seq2seq head does it, in training and in ``predict`` -- the
target by ``data.target_tokenizer`` (default: ``data.tokenizer``) and ``data.target_lowercase``,
both through :func:`seqkit.data.vocab.tokenize`. A pair becomes
``Record(text=source, target=[target tokens], where="file:line")``, the shape
:mod:`seqkit.data.cmudict` gives.

Refused with ``file:line`` (:class:`~seqkit.errors.DataError`): aligned files with different
numbers of lines (blank lines at the ends aside; the first line without a partner is named), a
pair with one side empty (a line blank in both files is skipped), a source longer than
``data.max_length`` symbols or a target longer than ``data.max_length - 1`` (with
``data.too_long: skip`` such pairs are left out instead, counted by the head).
"""

from __future__ import annotations

from typing import Optional

from seqkit.data.base import DataSource, read_text
from seqkit.data.lines import split_lines
from seqkit.data.table import (Column, PairOptions, check_split_paths, check_table_keys, non_default,
                               pair_record, read_table, records_from_table)
from seqkit.errors import DataError
from seqkit.registry import HEADS, head_class, register_data

SPLITS = ("train", "valid", "test")
_ALIGNED = ("source_path", "target_path") + tuple(f"{s}_{side}_path" for s in SPLITS
                                                  for side in ("source", "target"))
_TABLE = ("path", "train_path", "valid_path", "test_path")
_TABLE_ONLY = ("source_column", "target_column", "format", "delimiter", "header", "quotes")


class ParallelTextOptions(PairOptions):
    """Recipe keys of ``parallel_text`` (under ``data``); see :mod:`seqkit.data.parallel`."""

    source_path: Optional[str] = None
    target_path: Optional[str] = None
    train_source_path: Optional[str] = None
    train_target_path: Optional[str] = None
    valid_source_path: Optional[str] = None
    valid_target_path: Optional[str] = None
    test_source_path: Optional[str] = None
    test_target_path: Optional[str] = None
    source_column: Optional[Column] = None
    target_column: Optional[Column] = None


def _trim(lines: list[str]) -> list[str]:
    lines = list(lines)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def read_aligned(source_path: str, target_path: str, *, data, options, keys=("data.source_path",
                                                                               "data.target_path")) -> list:
    """Pair line ``n`` of ``source_path`` with line ``n`` of ``target_path``.

    Args:
        source_path, target_path: the two UTF-8 files.
        data: the recipe's ``data`` section; options: :class:`ParallelTextOptions`.
        keys: the recipe keys naming the files (for a missing-file message).

    Returns:
        ``Record(text, target, where="source_path:n")`` per non-blank line pair.

    Raises:
        DataError: a missing or non-UTF-8 file, different line counts (naming the first line
            without a partner), an empty side or an over-long pair (``file:line``).
    """
    # split at \n only (seqkit.data.lines): a form feed or U+2028 inside a sentence does not shift the alignment
    src = split_lines(read_text(source_path, keys[0]))
    tgt = split_lines(read_text(target_path, keys[1]))
    if len(src) != len(tgt):  # blank lines at the end of a file are no examples
        src, tgt = _trim(src), _trim(tgt)
    if len(src) != len(tgt):
        longer, n = (source_path, len(tgt) + 1) if len(src) > len(tgt) else (target_path, len(src) + 1)
        raise DataError(f"{longer}:{n}: {source_path} has {len(src)} lines but {target_path} has "
                        f"{len(tgt)}; aligned files pair line n of one with line n of the other, and "
                        f"this line has no partner. Make both files hold the same examples, one "
                        f"per line.")
    out = []
    for n, (s, t) in enumerate(zip(src, tgt), start=1):
        if not s.strip() and not t.strip():
            continue
        out.append(pair_record(s, t, f"{source_path}:{n}", data=data,
                               target_tokenizer=options.target_tokenizer,
                               target_lowercase=options.target_lowercase, too_long=options.too_long,
                               source_where=f"{source_path}:{n}", target_where=f"{target_path}:{n}"))
    return out


@register_data("parallel_text")
class ParallelText(DataSource):
    """(source, target) pairs from two aligned files or a two-column table."""

    Options = ParallelTextOptions
    tokenizes_text = True

    @classmethod
    def check_recipe(cls, options, config) -> list:
        """The head is seq2seq; exactly one way of giving the files (``[(key, message)]``)."""
        out = []

        head = head_class(config.head.type)
        if head is not None and not _reads_pairs(head):
            pairs = " or ".join(n for n in HEADS.names() if _reads_pairs(HEADS.get(n)))
            out.append(("source", f"parallel_text gives (source, target) pairs for head.type {pairs}; "
                                  f"head.type is '{config.head.type}'. Use the table source for it "
                                  f"(source: table, with the columns that head reads)."))
        aligned = [k for k in _ALIGNED if getattr(options, k)]
        table = [k for k in _TABLE if getattr(options, k)]
        if aligned and table:
            return out + [(table[0], f"give aligned files ({', '.join('data.' + k for k in aligned)}) "
                                     f"or a table (data.{table[0]}), not both.")]
        if not aligned and not table:
            return out + [("source_path", "missing; give data.source_path and data.target_path "
                                          "(aligned files, one example per line), or data.path (a "
                                          "table with source and target columns).")]
        if table:
            return out + check_split_paths(options) + check_table_keys(options)
        for prefix in ("",) + tuple(f"{s}_" for s in SPLITS):
            a, b = f"{prefix}source_path", f"{prefix}target_path"
            if bool(getattr(options, a)) != bool(getattr(options, b)):
                have, need = (a, b) if getattr(options, a) else (b, a)
                out.append((need, f"missing; data.{have} needs data.{need}, its aligned file."))
        if options.source_path and options.train_source_path:
            out.append(("train_source_path", "give either data.source_path + data.target_path (one "
                                             "pair of files, divided by data.split) or per-split "
                                             "files, not both."))
        if not options.source_path and not options.train_source_path and not options.train_target_path:
            first = next(k for k in _ALIGNED if getattr(options, k))
            out.append((first, "needs the training files data.train_source_path and "
                               "data.train_target_path beside it."))
        for key in _TABLE_ONLY:
            if non_default(options, key):
                out.append((key, "is for a table (data.path); aligned files hold one example per "
                                 "line. Remove it."))
        return out

    def files(self) -> dict:
        """``{split: (source file, target file)}`` or ``{split: table file}``; split ``all`` for one."""
        o = self.options
        if o.source_path:
            return {"all": (o.source_path, o.target_path)}
        if o.train_source_path:
            return {s: (getattr(o, f"{s}_source_path"), getattr(o, f"{s}_target_path"))
                    for s in SPLITS if getattr(o, f"{s}_source_path")}
        if o.path:
            return {"all": o.path}
        return {s: getattr(o, f"{s}_path") for s in SPLITS if getattr(o, f"{s}_path")}

    def describe(self) -> str:
        return "parallel_text " + ", ".join(
            f"{k}={' + '.join(v) if isinstance(v, tuple) else v}" for k, v in self.files().items())

    def load(self) -> dict:
        o, d = self.options, self.recipe.data
        out = {}
        for split, f in self.files().items():
            prefix = "" if split == "all" else f"{split}_"
            if isinstance(f, tuple):
                records = read_aligned(*f, data=d, options=o,
                                       keys=(f"data.{prefix}source_path", f"data.{prefix}target_path"))
            else:
                table = read_table(f, o.format, delimiter=o.delimiter, header=o.header, quotes=o.quotes,
                                   key=f"data.{prefix or ''}path")

                records = records_from_table(table, HEADS.get(self.recipe.head.type), o, d)
            if not records:
                raise DataError(f"{f[0] if isinstance(f, tuple) else f}: no (source, target) pairs in "
                                f"the file.")
            out[split] = records
        return out


def _reads_pairs(head) -> bool:
    """Whether ``head`` (a head class) reads (source, target) pairs: its table columns are a
    source and a target."""
    return {"source_column", "target_column"} <= set(head.table_columns or {})
