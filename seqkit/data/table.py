"""Tables: CSV, TSV, JSON lines (and Parquet when pandas + pyarrow are installed), read
with the standard :mod:`csv` and :mod:`json` modules, as the ``table`` data source of
every head.

Which columns a row must have depends on ``head.type`` (the defaults in brackets are the
column names with ``data.header: true``, the column numbers with ``header: false``):

* ``acceptor``: ``text_column`` [text / 0] and ``label_column`` [label / 1] ->
  ``Record(tokens, label)``;
* ``tagger``: ``tokens_column`` [tokens / 0] and ``tags_column`` [tags / 1] ->
  ``Record(tokens, tags)``;
* ``language_model``: ``text_column`` [text / 0] -> ``Record(text)``;
* ``seq2seq``: ``source_column`` [source / 0] and ``target_column`` [target / 1] ->
  ``Record(text, target)``.

Acceptor text is split by ``data.tokenizer`` (as ``tsv_text_label`` does); tagger tokens
and tags are a space-separated string or a JSON list (``["New", "York"]``; in JSON lines
also a real list), one tag per token; a seq2seq source is split later by the head
(``data.tokenizer``), the target here by ``data.target_tokenizer`` (default:
``data.tokenizer``); see :mod:`seqkit.data.parallel`.

File format (``data.format: auto`` reads it from the extension: ``.csv``; ``.tsv``/``.tab``;
``.jsonl``/``.ndjson``; ``.parquet``/``.pq``): CSV and TSV follow :mod:`csv`'s ``excel`` /
``excel-tab`` dialects -- fields may be quoted with ``"`` (then they may hold the delimiter and
newlines; a quote inside is doubled), ``data.quotes: false`` makes ``"`` an ordinary
character (``csv.QUOTE_NONE``), ``data.delimiter`` replaces ``,`` / tab. A UTF-8 byte-order
mark is dropped. The first non-blank row is the header unless ``data.header: false``; blank
rows are skipped. JSON lines: one object per non-blank line, its keys the columns.

Errors (:class:`~seqkit.errors.DataError`) name ``file:line`` (the line a row starts on):
malformed CSV or JSON, a row with another number of fields than the header, an empty cell, a
tagger row with more tokens than tags; a column the recipe names but the file lacks is named
with the file and the columns it has.

The optional package pandas is imported where used, so seqkit works without it.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
from dataclasses import dataclass, field
from typing import Iterator, Literal, Optional, Union

from pydantic import Field

from seqkit.data.base import FileSource, FileSplitsOptions, read_text
from seqkit.data.records import Record
from seqkit.data.typed import column_index, label_cell, text_cell
from seqkit.data.vocab import first_duplicate, tokenize
from seqkit.errors import DataError, shown_value
from seqkit.recipe import DataConfig
from seqkit.registry import HEADS, head_class, register_data

Column = Union[str, int]
EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
              ".parquet": "parquet", ".pq": "parquet"}

COLUMN_KEYS = ("text_column", "label_column", "tokens_column", "tags_column", "source_column",
               "target_column")
#: keys of the source that a pair-reading head takes besides its columns (``Head.table_keys``)
PAIR_KEYS = ("target_tokenizer", "target_lowercase", "too_long")


# ---------------------------------------------------------------- reading


@contextlib.contextmanager
def no_field_limit():
    """Lift :mod:`csv`'s 128 KiB field limit while reading (a long text is no error)."""
    old = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)
    try:
        yield
    finally:
        csv.field_size_limit(old)


def csv_rows(text: str, path: str, *, delimiter: str, quotes: bool = True) -> Iterator[tuple[int, list]]:
    """Rows of delimited text with the line each starts on, blank lines included (``[]``).

    Args:
        text: the file's contents (a leading UTF-8 byte-order mark is dropped).
        path: its name, for messages.
        delimiter: one character.
        quotes: ``"`` quotes fields (:data:`csv.QUOTE_MINIMAL`, strict); False: an
            ordinary character (:data:`csv.QUOTE_NONE`, one row per line).

    Yields:
        ``(line number from 1, [field strings])``.

    Raises:
        DataError: malformed quoting (``path:line``).
    """
    text = text.removeprefix("\ufeff")
    kw = dict(quotechar='"', doublequote=True, strict=True) if quotes else dict(quoting=csv.QUOTE_NONE)
    with no_field_limit():
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, **kw)
        start = 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise DataError(f"{path}:{start}: malformed {'CSV' if delimiter != chr(9) else 'TSV'} "
                                f"({exc}). A field holding the delimiter, a quote or a line break "
                                f"must be quoted (\"a, b\"), with quotes inside doubled (\"\"); if "
                                f"'\"' is an ordinary character in this file, set data.quotes: "
                                f"false.") from None
            yield start, row
            start = reader.line_num + 1


@dataclass
class Table:
    """A table read from a file.

    Attributes:
        path: the file.
        columns: column names (header names, JSON keys) or numbers (``header: false``).
        rows: ``(where, {column: value})`` per row; ``where`` is ``"path:line"``.
    """

    path: str
    columns: list = field(default_factory=list)
    rows: list = field(default_factory=list)

    def column(self, spec: Column, key: str) -> Column:
        """The column a recipe key names (a name, or a number counted from 0).

        Raises:
            DataError: no such column (naming the key, the file and the columns it has).
        """
        names = self.columns
        spec = column_index(spec, key)  # a negative number is refused, not counted from the end
        if isinstance(spec, int) and not isinstance(spec, bool) and not all(isinstance(c, int) for c in names):
            if not 0 <= spec < len(names):
                raise DataError(f"data.{key}: column number {spec} does not exist; {self.path} has "
                                f"{len(names)} columns ({', '.join(map(str, names))}).")
            return names[spec]
        if spec not in names:
            listed = ", ".join(repr(c) if isinstance(c, str) else str(c) for c in names) or "(none)"
            hint = (" (columns are numbered from 0: data.header is false)" if names and
                    all(isinstance(c, int) for c in names) else "")
            shown = shown_value(spec)
            raise DataError(f"data.{key}: no column {shown} in {self.path}; its columns are "
                            f"{listed}{hint}{delimiter_hint(names)}. Fix data.{key} or the file's header.")
        return spec


#: File-name endings that prediction input is read from as a table (``--input-format auto``).
TABLE_SUFFIXES = (".csv", ".tsv", ".tab", ".jsonl", ".ndjson")


def is_table_input(name: str, input_format: str) -> bool:
    """Whether prediction input named ``name`` is a table: ``--input-format table``, or ``auto``
    and a name ending in one of :data:`TABLE_SUFFIXES`."""
    return input_format == "table" or (input_format == "auto" and name.lower().endswith(TABLE_SUFFIXES))


def input_rows(text: str, name: str, data, columns: dict) -> tuple[str, list]:
    """The rows of a prediction table, over the head's input column -- the first of its
    ``table_columns`` (``text_column``, ``tokens_column``, ``source_column``). A run trained from
    a table (its data options hold that key) names the column and, for an input of the training
    table's format, how it is read (``data.delimiter`` / ``header`` / ``quotes``); any other
    input, and every input of a run trained from another source, is read with a header row that
    names the column by its default (``text``, ``tokens``, ``source``). Other columns are
    ignored.

    Args:
        text: the table's text; name: how messages name it (its extension picks the format;
            else the run's ``data.format``, else CSV); data: the run's data options; columns: the
            head's ``table_columns``.

    Returns:
        ``(key, rows)``: the recipe key of the input column and a :class:`TableRow` per row
        (``row.text(key)`` / ``row.tokens(key)``, ``row.where``).

    Raises:
        DataError: a malformed table, one without the input column (its columns named), or
            Parquet (not readable from text).
    """
    key = next(iter(columns))
    default = columns[key]
    tabled = hasattr(data, key)  # trained from a table that names its input column (the table source)
    own = getattr(data, "format", "auto") if tabled else None  # the training table's format
    if own == "auto":
        own = EXTENSIONS.get(os.path.splitext(str(getattr(data, "path", None) or ""))[1].lower())
    ext = "." + name.lower().rpartition(".")[2]
    fmt = EXTENSIONS.get(ext) or own or "csv"  # the input's own name first
    if fmt == "parquet":
        raise DataError(f"{name}: a Parquet table cannot be read as prediction input; give the rows as "
                        f"CSV, TSV or JSON lines.")
    # the training table's reading rules apply to an input of its format; any other table (and
    # every table given to a run not trained from one) is read with a header row, quotes as CSV's
    header = getattr(data, "header", True) if tabled else True
    delimiter = getattr(data, "delimiter", None) if tabled and fmt == own else None
    quotes = getattr(data, "quotes", True) if tabled and fmt == own else True
    table = parse_table(text, name, fmt, delimiter=delimiter, header=header, quotes=quotes)
    spec = getattr(data, key, None) if tabled else None
    spec = spec if spec is not None else (default[0] if header else default[1])
    try:
        col = table.column(spec, key)
    except DataError:  # the input's fault, not the run's recipe: say what the input needs
        listed = ", ".join(repr(c) if isinstance(c, str) else str(c) for c in table.columns) or "(none)"
        shown = shown_value(spec)
        used = delimiter or ("\t" if fmt == "tsv" else ",")
        why = f"its recipe's data.{key}" if tabled else "the run was not trained from a table"
        raise DataError(f"{name}: the run reads a table's input from the column {shown} ({why}), and "
                        f"this input, read as {fmt.upper()}"
                        + (f" with the delimiter {used!r}" if fmt != "jsonl" else "")
                        + f", has {listed}. Name the input's column {shown} in its header row"
                        + (" (or give the input without a header, the column numbered as the "
                           "run's)" if not header else "")
                        + ("" if tabled else ", or give one sequence a line (--input-format text)")
                        + ".") from None
    return key, [TableRow(row, {key: col}, where) for where, row in table.rows]


def delimiter_hint(columns: list) -> str:
    """``" (... set data.delimiter: ';')"`` when a table read as one column has a name that
    another delimiter would split (``;``, ``|`` or a tab: a spreadsheet's export); else ``""``."""
    if len(columns) != 1 or not isinstance(columns[0], str):
        return ""
    found = next((d for d in ";|\t" if d in columns[0]), None)
    if found is None:
        return ""
    shown = "'\\t'" if found == "\t" else repr(found)
    return (f" (the header reads as one column, {columns[0][:80]!r}: if the file's fields are "
            f"separated by {shown}, set data.delimiter: {shown})")


def table_format(path: str, fmt: str) -> str:
    """``fmt``, or (``auto``) the format named by the file's extension.

    Raises:
        DataError: ``auto`` and an extension that names no table format.
    """
    if fmt != "auto":
        return fmt
    ext = os.path.splitext(path)[1].lower()
    if ext not in EXTENSIONS:
        raise DataError(f"{path}: cannot tell the table format from the extension '{ext}'; set "
                        f"data.format to csv, tsv, jsonl or parquet.")
    return EXTENSIONS[ext]


def read_table(path: str, fmt: str = "auto", *, delimiter: Optional[str] = None, header: bool = True,
               quotes: bool = True, key: str = "data.path") -> Table:
    """Read a CSV / TSV / JSON lines / Parquet file (see the module docstring).

    Args:
        path: the file.
        fmt: ``auto``, ``csv``, ``tsv``, ``jsonl`` or ``parquet``.
        delimiter: CSV/TSV field delimiter (default ``,`` / tab).
        header: CSV/TSV: the first non-blank row names the columns; False: numbered from 0.
        quotes: CSV/TSV: ``"`` quotes fields (False: ``csv.QUOTE_NONE``).
        key: the recipe key naming the file, for a missing-file message.

    Returns:
        A :class:`Table` (cells: strings for CSV/TSV, JSON values for JSON lines).

    Raises:
        DataError: missing or non-UTF-8 file, malformed rows (``path:line``), Parquet without
            pandas/pyarrow.
    """
    fmt = table_format(path, fmt)
    if fmt == "parquet":
        return _read_parquet(path, key)
    return parse_table(read_text(path, key), path, fmt, delimiter=delimiter, header=header, quotes=quotes)


def parse_table(text: str, path: str, fmt: str, *, delimiter: Optional[str] = None, header: bool = True,
                quotes: bool = True) -> Table:
    """A CSV / TSV / JSON lines table from its text (what :func:`read_table` does once the file is
    read; e.g. prediction input). ``path`` names the input in messages; ``fmt`` is ``csv``,
    ``tsv`` or ``jsonl``; the other arguments as :func:`read_table`'s.

    Raises:
        DataError: as :func:`read_table` (malformed rows, ``path:line``).
    """
    if fmt == "jsonl":
        return _read_jsonl(text, path)
    sep = delimiter or ("\t" if fmt == "tsv" else ",")
    table, header_line = Table(path), None
    for line, row in csv_rows(text, path, delimiter=sep, quotes=quotes):
        if not any(c.strip() for c in row):
            continue
        if header_line is None:
            header_line = line
            if header:
                names = [c.strip() for c in row]
                if len(names) > MAX_COLUMNS:
                    raise DataError(f"{path}:{line}: {len(names):,} columns, more than a table seqkit "
                                    f"reads ({MAX_COLUMNS:,}); keep the text and label columns (e.g. "
                                    f"`cut -d, -f1,2`).")
                dup = first_duplicate(names)
                if dup is not None:
                    raise DataError(f"{path}:{line}: the header names the column {dup!r} twice; "
                                    f"give every column its own name.")
                table.columns = names
                continue
            table.columns = list(range(len(row)))
        if len(row) != len(table.columns):
            what = "the header" if header else "the first row"
            raise DataError(f"{path}:{line}: {len(row)} fields, but {what} ({path}:{header_line}) has "
                            f"{len(table.columns)}{delimiter_hint(table.columns)}. A field holding the "
                            f"delimiter ({'tab' if sep == chr(9) else repr(sep)}) must be quoted.")
        table.rows.append((f"{path}:{line}", dict(zip(table.columns, row))))
    return table


class _DuplicateKey(ValueError):
    def __init__(self, key):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs):
    """``json.loads``'s ``object_pairs_hook``: a dict, refusing a key given twice."""
    out = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def _read_jsonl(text: str, path: str) -> Table:
    table, seen = Table(path), {}
    # split at "\n" only: a JSON string may hold U+2028 and other characters str.splitlines breaks at
    for n, line in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, object_pairs_hook=_unique_keys)
        except _DuplicateKey as exc:
            raise DataError(f"{path}:{n}: the key {exc.key!r} appears twice in this object (JSON keeps "
                            f"the last silently); a JSON lines row names each column once.") from None
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{n}: not JSON ({exc.msg} at column {exc.colno}); a JSON lines "
                            f"file has one object per line, e.g. {{\"text\": \"...\", \"label\": "
                            f"\"...\"}}.") from None
        except RecursionError:
            raise DataError(f"{path}:{n}: JSON nested too deep to read; a JSON lines table holds one "
                            f"flat object a line, e.g. {{\"text\": \"...\", \"label\": \"...\"}}.") from None
        except ValueError as exc:  # e.g. an integer of more than 4,300 digits (Python's limit)
            raise DataError(f"{path}:{n}: a value JSON cannot be read as Python's ({exc}); fix or drop "
                            f"the row.") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{n}: a JSON {type(obj).__name__}, not an object; each line of a "
                            f"JSON lines table is one {{\"column\": value, ...}} object.")
        for k in obj:
            seen.setdefault(k, None)
        table.rows.append((f"{path}:{n}", obj))
    table.columns = list(seen)
    return table


#: Most columns a CSV / TSV header may name.
MAX_COLUMNS = 100_000
#: Memory a table's text takes once read, per byte of its decoded strings (Python strings, the
#: tokens made of them; measured: 4.16 GB for 40 cells of 25 MiB).
PARQUET_EXPANSION = 4


def _parquet_table(path: str):
    """The Parquet file as a ``pyarrow.Table``, refused before its strings are expanded when they
    would not fit in this machine's memory: they are read dictionary-encoded (a 1.5 KB file of
    one 25 MiB string repeated 40 times stays 25 MiB), their decoded length summed, and only then
    expanded."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from seqkit.guards import memory_bytes

    schema = pq.ParquetFile(path).schema_arrow
    text = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
            or pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)]
    table = pq.read_table(path, read_dictionary=text)
    decoded = 0
    for name in text:
        for chunk in table.column(name).chunks:
            if pa.types.is_dictionary(chunk.type):
                lengths = pc.take(pc.binary_length(chunk.dictionary), chunk.indices)
            else:
                lengths = pc.binary_length(chunk)
            decoded += pc.sum(lengths).as_py() or 0
    memory = memory_bytes()
    if memory is not None and decoded * PARQUET_EXPANSION > memory:
        raise DataError(f"{path}: its text columns hold {decoded:,} bytes once decoded (the file is "
                        f"{os.path.getsize(path):,}), and reading them takes about {PARQUET_EXPANSION}x "
                        f"that, more than this machine's {memory:,} bytes of memory. Check the file (a "
                        f"few rows of huge cells?), or split it into smaller files given as data.path, "
                        f"data.valid_path and data.test_path.")
    return table.cast(schema)


def _read_parquet(path: str, key: str) -> Table:
    if not os.path.isfile(path):
        read_text(path, key)  # the missing-file message
    try:
        import pandas  # noqa: F401  (the frame below)

        frame = _parquet_table(path).to_pandas()
    except ImportError as exc:
        raise DataError(f"{path}: reading Parquet needs pandas and pyarrow (`pip install "
                        f"\"seqkit[parquet]\"`), or convert the file to CSV or JSON lines ({exc}).") from exc
    except DataError:
        raise
    except Exception as exc:  # pyarrow's errors are many; name the file and the cause
        raise DataError(f"{path}: cannot read it as Parquet ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:300] if str(exc) else ''}).") from exc
    table = Table(path, [str(c) for c in frame.columns])
    for i, row in enumerate(frame.to_dict("records"), start=1):
        table.rows.append((f"{path} row {i}", {str(k): v for k, v in row.items()}))
    return table


# ---------------------------------------------------------------- cells


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def cell_text(row: dict, col: Column, where: str, key: str) -> str:
    """A cell as a stripped string (JSON numbers and booleans as written: ``5`` -> ``"5"``).

    Raises:
        DataError: the row lacks the column, or the cell is empty or a list/object.
    """
    if col not in row:
        raise DataError(f"{where}: this row has no {col!r} (data.{key}); its columns are "
                        f"{', '.join(map(repr, row))}.")

    v = row[col]
    if hasattr(v, "tolist") and getattr(v, "ndim", 1):  # numpy arrays from Parquet
        v = v.tolist()
    v = text_cell(v, where, f"column {col!r} (data.{key})")  # bytes as UTF-8; NaT, NaN, None: missing
    if isinstance(v, (list, dict)):
        raise DataError(f"{where}: column {col!r} (data.{key}) holds a {type(v).__name__}; it needs "
                        f"a string.")
    if isinstance(v, bool):
        v = "true" if v else "false"
    text = "" if _missing(v) else str(v).strip()
    if not text:
        what = "empty (null or NaN)" if _missing(v) else "empty"
        raise DataError(f"{where}: column {col!r} (data.{key}) is {what}; every example needs it. "
                        f"Fill it or remove the row.")
    return text


def cell_label(row: dict, col: Column, where: str, key: str) -> str:
    """A label cell as its class name (:func:`seqkit.data.typed.label_cell`: ``1`` and ``1.0`` are
    the class ``"1"``; no tab, CR, LF, U+2028 ...).

    Raises:
        DataError: as :func:`cell_text`, and a label :func:`~seqkit.data.typed.label_cell` refuses.
    """
    if col in row and not isinstance(row[col], (list, dict)):
        name = label_cell(row[col], where, f"column {col!r} (data.{key})")
        if name:
            return name
    return cell_text(row, col, where, key)  # its messages: a missing column, an empty cell, a list


def cell_list(row: dict, col: Column, where: str, key: str) -> list[str]:
    """A cell holding a sequence: a list (JSON), a JSON list in a string, or space-separated.

    Raises:
        DataError: the row lacks the column, the cell is empty, or a ``[`` string is bad JSON.
    """
    v = row.get(col) if col in row else None
    if hasattr(v, "tolist"):  # numpy arrays from Parquet
        v = v.tolist()
    if isinstance(v, str) and v.strip().startswith("["):
        try:
            v = json.loads(v)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: column {col!r} (data.{key}) starts with '[' but is not a JSON "
                            f"list ({exc.msg}); write [\"a\", \"b\"] or space-separated a b.") from None
    if isinstance(v, list):
        items = [label_cell(x, where, f"column {col!r} (data.{key})") or "" for x in v]
        bad = next((x for x in items if x.split() != [x]), None)  # empty, or white space inside
        if bad is not None:
            raise DataError(f"{where}: column {col!r} (data.{key}) has the item {bad!r}; a token or "
                            f"tag is non-empty and holds no white space.")
        if not items:
            raise DataError(f"{where}: column {col!r} (data.{key}) is an empty list; remove the row.")
        return items
    return cell_text(row, col, where, key).split()


# ---------------------------------------------------------------- records


def pair_record(source: str, target: str, where: str, *, data, target_tokenizer: Optional[str],
                target_lowercase: bool, too_long: str, source_where: Optional[str] = None,
                target_where: Optional[str] = None) -> Record:
    """One seq2seq example ``Record(text=source, target=[U target tokens])``.

    Args:
        source, target: the two sides (stripped here).
        where: the record's ``where`` (``file:line``).
        data: the recipe's ``data`` section (``tokenizer``, ``lowercase``, ``max_length``).
        target_tokenizer: how the target is split (``None``: ``data.tokenizer``), through
            :func:`seqkit.data.vocab.tokenize`.
        target_lowercase: lowercase the target.
        too_long: ``refuse`` (an error) or ``skip`` (return the record; the seq2seq head leaves
            it out with a counted warning).
        source_where / target_where: where each side is (aligned files: two files), default ``where``.

    Returns:
        The record.

    Raises:
        DataError: an empty side, or (``refuse``) a source of more than ``data.max_length``
            symbols or a target of more than ``data.max_length - 1`` (room for ``</s>``).
    """
    source_where, target_where = source_where or where, target_where or where
    source, target = source.strip(), target.strip()
    for side, text, at in (("source", source, source_where), ("target", target, target_where)):
        if not text:
            raise DataError(f"{at}: empty {side}; every example needs a source and a target. Fill it "
                            f"or remove the pair (from both files when they are aligned).")
    src_len = len(tokenize(source, data.tokenizer, data.lowercase))
    tgt = tokenize(target, target_tokenizer or data.tokenizer, target_lowercase)
    if not tgt:
        raise DataError(f"{target_where}: the target has no tokens; fill it or remove the pair.")
    if too_long == "refuse":
        limit = data.max_length
        if src_len > limit:
            raise DataError(f"{source_where}: the source has {src_len} symbols, more than "
                            f"data.max_length = {limit}. Raise data.max_length, shorten or remove the "
                            f"pair, or set data.too_long: skip to leave such pairs out (counted).")
        if len(tgt) + 1 > limit:
            raise DataError(f"{target_where}: the target has {len(tgt)} symbols, more than "
                            f"data.max_length - 1 = {limit - 1} (one step is the end marker). Raise "
                            f"data.max_length, shorten or remove the pair, or set data.too_long: skip "
                            f"to leave such pairs out (counted).")
    return Record(text=source, target=tgt, where=where)


class TableRow:
    """One row of a table as a head reads it (:meth:`seqkit.heads.base.Head.table_record`).

    Attributes:
        where: ``file:line`` (or ``file:row N``) for messages.
    """

    def __init__(self, row: dict, cols: dict, where: str):
        self._row, self._cols, self.where = row, cols, where

    def text(self, key: str) -> str:
        """The cell of the column recipe key ``key`` names, as a stripped string (:func:`cell_text`)."""
        return cell_text(self._row, self._cols[key], self.where, key)

    def label(self, key: str) -> str:
        """The cell of the column ``key`` names as a class label (:func:`cell_label`: typed, one
        line, numbers normalised once)."""
        return cell_label(self._row, self._cols[key], self.where, key)

    def tokens(self, key: str) -> list[str]:
        """The list cell of the column ``key`` names (:func:`cell_list`)."""
        return cell_list(self._row, self._cols[key], self.where, key)


def records_from_table(table: Table, head, options, data) -> list[Record]:
    """The records of ``head`` from a table (see the module docstring).

    Args:
        table: a read :class:`Table`.
        head: the head class (``seqkit.registry.HEADS.get(recipe.head.type)``) or its name: its
            ``table_columns`` say which columns it reads, its ``table_record`` makes a record.
        options: the source's options (``*_column``, and the head's ``table_keys``).
        data: the recipe's ``data`` section.

    Raises:
        DataError: a missing column (naming it, the file and the columns present) or a bad row.
    """
    if isinstance(head, str):  # a registered head's name
        head = HEADS.get(head)
    header = getattr(options, "header", True)
    cols = {}
    for key, (name, number) in (head.table_columns or {}).items():
        spec = getattr(options, key, None)
        cols[key] = table.column(spec if spec is not None else (name if header else number), key)
    return [head.table_record(TableRow(row, cols, where), data, options) for where, row in table.rows]


# ---------------------------------------------------------------- recipe keys and checks


def _tokenizer_type():
    """The type of ``data.tokenizer`` (so a tokenizer added there is accepted per side too)."""
    return DataConfig.model_fields["tokenizer"].annotation


class TableReadOptions(FileSplitsOptions):
    """How a table file is read (under ``data``): ``format``, ``delimiter``, ``header``, ``quotes``."""

    format: Literal["auto", "csv", "tsv", "jsonl", "parquet"] = "auto"
    delimiter: Optional[str] = Field(None, min_length=1, max_length=1)
    header: bool = True
    quotes: bool = True


class PairOptions(TableReadOptions):
    """Keys of (source, target) pairs: the target side's tokenizer, and over-long pairs."""

    target_tokenizer: Optional[_tokenizer_type()] = None  # None: data.tokenizer
    target_lowercase: bool = False
    too_long: Literal["refuse", "skip"] = "refuse"


class TableOptions(PairOptions):
    """Recipe keys of the ``table`` source (under ``data``); see :mod:`seqkit.data.table`."""

    text_column: Optional[Column] = None
    label_column: Optional[Column] = None
    tokens_column: Optional[Column] = None
    tags_column: Optional[Column] = None
    source_column: Optional[Column] = None
    target_column: Optional[Column] = None


def non_default(options, key: str) -> bool:
    """True when ``options.key`` differs from its default (a run's resolved ``recipe.yaml`` lists
    every key, so "given" means "not the default")."""
    return getattr(options, key) != type(options).model_fields[key].default


def check_table_keys(options) -> list:
    """Recipe-level checks of the table-reading keys: ``[(key, message)]`` (column names with
    ``header: false``; a delimiter for a format that has none)."""
    out = []
    if not options.header:
        for key in COLUMN_KEYS:
            if isinstance(getattr(options, key, None), str):
                out.append((key, f"data.header is false, so columns are numbered from 0; give the "
                                 f"column's number (e.g. {key}: 0), or set data.header: true."))
    if options.delimiter is not None and options.format in ("jsonl", "parquet"):
        out.append(("delimiter", f"{options.format} files have no delimiter; remove data.delimiter."))
    return out


def check_split_paths(options) -> list:
    """``path`` xor ``train_path``; ``valid_path``/``test_path`` only with ``train_path``."""
    if options.path and options.train_path:
        return [("train_path", "give either data.path (one file, divided by data.split) or "
                               "data.train_path (plus optional valid_path and test_path), not both.")]
    if not options.path and not options.train_path:
        extra = [k for k in ("valid_path", "test_path") if getattr(options, k)]
        if extra:
            return [(extra[0], "needs data.train_path (the training file) beside it.")]
        return [("path", "missing; give data.path (one file, divided by data.split) or "
                         "data.train_path (plus optional valid_path and test_path).")]
    return []


@register_data("table")
class TableSource(FileSource):
    """Rows of a CSV / TSV / JSON lines / Parquet file as the examples of any head."""

    Options = TableOptions
    tokenizes_text = True  # acceptor text, LM lines and seq2seq sources; tagger: see text_tokenizer

    @classmethod
    def check_recipe(cls, options, config) -> list:
        """The columns fit ``head.type``; keys of other heads are refused (``[(key, message)]``)."""
        head = config.head.type
        out = check_split_paths(options) + check_table_keys(options)
        cls_ = head_class(head)
        if cls_ is None:  # an unknown head: reported by the recipe's own check
            return out
        if not cls_.table_columns:
            return out + [("source", f"a table feeds the heads {', '.join(_table_heads())}; head.type "
                                     f"is '{head}'. Use a data source made for that head.")]
        wanted = cls_.table_columns
        for key in COLUMN_KEYS + PAIR_KEYS:
            if non_default(options, key) and key not in wanted and key not in getattr(cls_, "table_keys", ()):
                reads = " and ".join(f"data.{k}" for k in wanted)
                article = "an" if head[0] in "aeiou" else "a"
                out.append((key, f"{article} {head} head reads {reads} from a table; {key} is for "
                                 f"{_heads_of(key)}. Remove data.{key}."))
        return out

    @classmethod
    def text_tokenizer(cls, recipe) -> str:
        """The head's ``table_tokenizer`` (a tagger's tables hold pre-split tokens: white space);
        otherwise ``data.tokenizer``."""
        return getattr(head_class(recipe.head.type), "table_tokenizer", None) or recipe.data.tokenizer

    def describe(self) -> str:
        return "table " + ", ".join(f"{k}={v}" for k, v in self.files().items())

    def read_file(self, path):
        o, r = self.options, self.recipe
        key = next((f"data.{k}" for k in ("path", "train_path", "valid_path", "test_path")
                    if getattr(o, k) == path), "data.path")
        table = read_table(path, o.format, delimiter=o.delimiter, header=o.header, quotes=o.quotes,
                           key=key)

        return records_from_table(table, HEADS.get(r.head.type), o, r.data)


def _table_heads() -> list[str]:
    """The registered heads a table can feed (those with ``table_columns``)."""
    return [n for n in HEADS.names() if HEADS.get(n).table_columns]


def _heads_of(key: str) -> str:
    heads = [n for n in _table_heads() if key in HEADS.get(n).table_columns
             or key in getattr(HEADS.get(n), "table_keys", ())]
    return "the " + " and ".join(heads) + " head" + ("s" if len(heads) > 1 else "")
