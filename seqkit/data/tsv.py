"""TSV text-label files: one example per line, ``text<TAB>label`` (or
``label<TAB>text`` with ``data.label_first: true``). The text is split into
tokens by ``data.tokenizer`` (``char`` or ``whitespace``). A line without a tab,
with an empty text or an empty label is refused naming the line.
"""

from __future__ import annotations

from seqkit.data.base import FileSource, FileSplitsOptions, read_text
from seqkit.data.records import Record
from seqkit.data.table import csv_rows
from seqkit.data.vocab import tokenize
from seqkit.errors import DataError
from seqkit.registry import register_data


class TsvOptions(FileSplitsOptions):
    """Recipe keys of ``tsv_text_label`` (under ``data``)."""

    label_first: bool = False
    header: bool = False


def parse_tsv(text: str, path: str, *, tokenizer: str = "whitespace", label_first: bool = False,
              header: bool = False) -> list[Record]:
    """Parse ``text<TAB>label`` lines into ``Record(tokens, label)``.

    Rows are read by :func:`seqkit.data.table.csv_rows` (the :mod:`csv` module, tab-delimited,
    ``csv.QUOTE_NONE``: a ``"`` is an ordinary character, one row per line). The label is after
    the *last* tab (with ``label_first``, before the first), so the text may hold tabs.

    Raises:
        DataError: a line without a tab, or with an empty text or label (``path:line``).
    """
    out = []
    for n, row in csv_rows(text, path, delimiter="\t", quotes=False):
        if (header and n == 1) or not "".join(row).strip():
            continue
        if len(row) < 2:
            raise DataError(f"{path}:{n}: no tab; a line is text<TAB>label.")
        label, txt = (row[0], "\t".join(row[1:])) if label_first else (row[-1], "\t".join(row[:-1]))
        label = label.strip()
        toks = tokenize(txt.strip(), tokenizer)
        if not label:
            raise DataError(f"{path}:{n}: empty label; every line needs text<TAB>label.")
        if not toks:
            raise DataError(f"{path}:{n}: empty text (an empty sequence); remove the line.")
        out.append(Record(tokens=toks, label=label, where=f"{path}:{n}"))
    return out


@register_data("tsv_text_label")
class TsvTextLabel(FileSource):
    """Tab-separated text and label, one example per line."""

    Options = TsvOptions
    tokenizes_text = True

    def read_file(self, path):
        d = self.recipe.data if self.recipe is not None else None
        return parse_tsv(read_text(path), path, tokenizer=d.tokenizer if d else "whitespace",
                         label_first=self.options.label_first, header=self.options.header)
