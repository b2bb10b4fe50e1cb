"""CoNLL-style column files: one token per line, columns separated by white space
(or ``data.separator``), sentences separated by blank lines, ``-DOCSTART-`` lines
ignored. ``data.token_column`` / ``data.tag_column`` pick the columns (default the
first and the last; negative numbers count from the end). A tag may not hold a character
that breaks line-oriented output (:data:`seqkit.data.typed.LINE_BREAKING`; only possible
with a ``data.separator``, since white space ends a column otherwise).

Parsing goes through ``tensorflow-datasets``' CoNLL builder logic
(``ConllDatasetBuilder._generate_examples``) after a normalisation pass, which
also gives file:line errors the builder lacks. Known with tfds 4.9.10: it splits
sentences only at lines that are exactly ``"\\n"`` (a line of spaces or a CRLF
line would be read as a token), and a trailing blank line makes it yield an
extra empty example. So separator lines are normalised to ``"\\n"`` first and
empty examples are dropped and counted (never trained on).

TensorFlow Datasets is imported inside the functions that use it, so importing this module does not
load it.
"""

from __future__ import annotations

import collections
import tempfile
from types import SimpleNamespace
from typing import Optional

from seqkit.data.base import FileSource, FileSplitsOptions, read_text
from seqkit.data.lines import split_lines
from seqkit.data.records import Record
from seqkit.data.typed import check_label
from seqkit.errors import DataError
from seqkit.registry import register_data


class ConllOptions(FileSplitsOptions):
    """Recipe keys of ``conll`` (under ``data``)."""

    token_column: int = 0
    tag_column: int = -1
    separator: Optional[str] = None  # None: any run of white space


def normalise_conll(text: str, path: str, separator: Optional[str], min_columns: int = 2) -> tuple[str, int, list]:
    """Normalise CoNLL text for the tfds parser; check every token line.

    Returns:
        ``(text with "\\t"-separated columns and exactly-empty separator lines,
        number of columns, [line number of each sentence's first token])``.

    Raises:
        DataError: a token line with fewer columns than the first (a missing tag), or a column
            holding a carriage return (the CoNLL parser would end the line there), naming
            ``path:line``.
    """
    out, ncols, starts, in_sent = [], None, [], False
    for n, raw in enumerate(split_lines(text), start=1):
        line = raw.rstrip("\r\n")
        if not line.strip() or line.startswith("-DOCSTART-"):
            if in_sent:
                out.append("")
            in_sent = False
            continue
        cols = line.split(separator) if separator else line.split()
        cols = [c.strip() for c in cols]
        if any("\r" in c for c in cols):  # white space splits at it; a separator leaves it in a column
            raise DataError(f"{path}:{n}: a carriage return (\\r) inside the line, in a column; seqkit "
                            f"ends a line at \\n only, and a CR is neither a token nor a tag. Remove it, "
                            f"e.g. `tr -d '\\r' < {path} > fixed.conll`.")
        if ncols is None:
            ncols = len(cols)
            if ncols < min_columns:
                raise DataError(f"{path}:{n}: one column only; a CoNLL file needs a token and a tag "
                                f"on every line (separated by white space).")
        if len(cols) != ncols or any(not c for c in cols):
            raise DataError(f"{path}:{n}: {len([c for c in cols if c])} columns, but the file's first "
                            f"token line has {ncols}: a missing tag or token? Every token line needs "
                            f"all columns.")
        if not in_sent:
            starts.append(n)
        in_sent = True
        out.append("\t".join(cols))
    return "\n".join(out) + "\n", ncols or 0, starts


def parse_conll(text: str, path: str, *, token_column: int = 0, tag_column: Optional[int] = -1,
                separator: Optional[str] = None) -> list[Record]:
    """Parse CoNLL text into ``Record(tokens, tags)`` via tfds's CoNLL builder logic.

    ``tag_column=None`` reads tokens only (prediction input; one column is enough).

    Raises:
        DataError: malformed lines (see :func:`normalise_conll`), a column number outside the
            file's columns, the token and tag columns being the same one, or (with a
            ``separator``) a tag holding a character of :data:`~seqkit.data.typed.LINE_BREAKING`,
            each naming the file (and line) and the fix.
    """
    from tensorflow_datasets.core.dataset_builders.conll.conll_dataset_builder import ConllDatasetBuilder

    norm, ncols, starts = normalise_conll(text, path, separator, 1 if tag_column is None else 2)
    if ncols == 0:
        return []
    for key, c in (("token_column", token_column), ("tag_column", tag_column)):
        if isinstance(c, bool) or (c is not None and not -ncols <= c < ncols):
            raise DataError(f"data.{key}: column {c} does not exist; {path} has {ncols} columns "
                            f"(0 to {ncols - 1}, or -1 for the last). Give a column of the file.")
    if tag_column is not None and token_column % ncols == tag_column % ncols:
        raise DataError(f"data.token_column ({token_column}) and data.tag_column ({tag_column}) are the "
                        f"same column ({token_column % ncols} of {path}'s {ncols}): the tags would be "
                        f"the tokens. Give two different columns: data.token_column for the words "
                        f"(default 0, the first) and data.tag_column for the tags (default -1, the last).")
    names = [f"c{i}" for i in range(ncols)]
    names[0] = "tokens"  # the tfds parser tests the 'tokens' feature for an empty sentence
    fake = SimpleNamespace(info=SimpleNamespace(features=names),
                           builder_config=SimpleNamespace(separator="\t",
                                                          ordered_features=collections.OrderedDict((n, None) for n in names)))
    with tempfile.NamedTemporaryFile("w", suffix=".conll", encoding="utf-8", delete=True) as tmp:
        tmp.write(norm)
        tmp.flush()
        examples = [ex for _, ex in ConllDatasetBuilder._generate_examples(fake, tmp.name)]
    examples = [ex for ex in examples if ex["tokens"]]  # tfds yields one after a final blank line
    if len(examples) != len(starts):
        raise DataError(f"{path}: the CoNLL parser found {len(examples)} sentences where "
                        f"{len(starts)} were expected; check the separator lines.")
    if tag_column is not None and separator:  # white space cannot be inside a column; a separator can
        for ex, n in zip(examples, starts):  # a sentence's token lines are consecutive from its first
            for j, tag in enumerate(ex[names[tag_column]]):
                check_label(tag, f"{path}:{n + j}", f"the tag (column {tag_column % ncols})")
    return [Record(tokens=ex[names[token_column]], where=f"{path}:{n}",
                   tags=None if tag_column is None else ex[names[tag_column]])
            for ex, n in zip(examples, starts)]


@register_data("conll")
class Conll(FileSource):
    """CoNLL-style token/tag columns, blank-line separated sentences."""

    Options = ConllOptions

    def read_file(self, path):
        o = self.options
        return parse_conll(read_text(path), path, token_column=o.token_column, tag_column=o.tag_column,
                           separator=o.separator)
