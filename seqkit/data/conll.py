"""CoNLL-style column files: one token per line, columns separated by white space
(or ``data.separator``), sentences separated by blank lines, ``-DOCSTART-`` lines
ignored. ``data.token_column`` / ``data.tag_column`` pick the columns (default the
first and the last).

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

from seqkit import log
from seqkit.data.base import FileSource, FileSplitsOptions, read_text
from seqkit.data.lines import split_lines
from seqkit.data.records import Record
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
        DataError: a token line with fewer columns than the first (a missing tag), naming
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
        DataError: malformed lines (see :func:`normalise_conll`) or bad column numbers.
    """
    from tensorflow_datasets.core.dataset_builders.conll.conll_dataset_builder import ConllDatasetBuilder

    norm, ncols, starts = normalise_conll(text, path, separator, 1 if tag_column is None else 2)
    if ncols == 0:
        return []
    for key, c in (("token_column", token_column), ("tag_column", tag_column)):
        if c is not None and not -ncols <= c < ncols:
            raise DataError(f"data.{key}: column {c} does not exist; {path} has {ncols} columns.")
    names = [f"c{i}" for i in range(ncols)]
    names[0] = "tokens"  # the tfds parser tests the 'tokens' feature for an empty sentence
    fake = SimpleNamespace(info=SimpleNamespace(features=names),
                           builder_config=SimpleNamespace(separator="\t",
                                                          ordered_features=collections.OrderedDict((n, None) for n in names)))
    with tempfile.NamedTemporaryFile("w", suffix=".conll", encoding="utf-8", delete=True) as tmp:
        tmp.write(norm)
        tmp.flush()
        examples = [ex for _, ex in ConllDatasetBuilder._generate_examples(fake, tmp.name)]
    empty = sum(1 for ex in examples if not ex["tokens"])
    examples = [ex for ex in examples if ex["tokens"]]
    if empty:  # tfds yields an empty example after the final separator line
        log.info(f"{path}: dropped {empty} empty example(s) produced by the tfds CoNLL parser "
                 f"after the last sentence.")
    if len(examples) != len(starts):
        raise DataError(f"{path}: the tfds CoNLL parser found {len(examples)} sentences where "
                        f"{len(starts)} were expected; check the separator lines.")
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
