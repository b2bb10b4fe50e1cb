"""TSV text-label files: one example per line, ``text<TAB>label`` (or
``label<TAB>text`` with ``data.label_first: true``). The text is split into
tokens by ``data.tokenizer`` (``char`` or ``whitespace``). A line without a tab,
with an empty text or an empty label, or with a label holding a character that breaks
line-oriented output (:data:`seqkit.data.typed.LINE_BREAKING`) is refused naming the
file, the line and the fix.
"""

from __future__ import annotations

from seqkit.data.base import FileSource, FileSplitsOptions, read_text
from seqkit.data.lines import split_lines
from seqkit.data.records import Record
from seqkit.data.typed import check_label
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

    Lines are split by :func:`seqkit.data.lines.split_lines` (at ``\n`` only, as every
    line-oriented reader: a ``\r`` or U+2028 inside a line stays in it), fields at tabs; a
    ``"`` is an ordinary character. The label is after the *last* tab (with ``label_first``,
    before the first), so the text may hold tabs. Blank lines are skipped.

    Args:
        text: the file's contents. path: its name, for messages.
        tokenizer: ``data.tokenizer``. label_first: the label is the first field.
        header: the first line names the columns (skipped).

    Returns:
        ``[Record(tokens, label, where="path:line")]``, in file order.

    Raises:
        DataError: a line without a tab, with an empty text or label, or with a label holding a
            character of :data:`~seqkit.data.typed.LINE_BREAKING` (``path:line`` and the fix).
    """
    side = "before the first tab" if label_first else "after the last tab"
    layout = "label<TAB>text (data.label_first: true)" if label_first else "text<TAB>label"
    out = []
    for n, line in enumerate(split_lines(text), start=1):
        if (header and n == 1) or not line.strip():
            continue
        row = line.split("\t")
        if len(row) < 2:
            raise DataError(f"{path}:{n}: no tab in this line; tsv_text_label reads one example a line "
                            f"as {layout}. Separate the label from the text with a tab (a file "
                            f"separated by commas is read by source: table), or remove the line.")
        label, txt = (row[0], "\t".join(row[1:])) if label_first else (row[-1], "\t".join(row[:-1]))
        label = check_label(label.strip(), f"{path}:{n}", f"the label ({side})")
        toks = tokenize(txt.strip(), tokenizer)
        if not label:
            raise DataError(f"{path}:{n}: empty label ({side}); every line is {layout}. Write the "
                            f"line's class {side}, or remove the line.")
        if not toks:
            raise DataError(f"{path}:{n}: empty text (an empty sequence); every line is {layout}. "
                            f"Write the line's text, or remove the line.")
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
