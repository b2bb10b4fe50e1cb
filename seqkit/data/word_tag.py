"""``word/TAG`` lines: one sentence per line, tokens separated by white space, each
token ``word/TAG`` (split at the *last* ``/``, so ``1/2/m`` is word ``1/2``, tag ``m``).

A line becomes ``Record(tokens=[...], tags=[...])``; empty lines are skipped.
A token without ``/``, or with an empty word or tag, is refused naming the line.
"""

from __future__ import annotations

from seqkit.data.base import FileSource, read_text
from seqkit.data.lines import split_lines
from seqkit.data.records import Record
from seqkit.errors import DataError
from seqkit.registry import register_data


def parse_word_tag(text: str, path: str) -> list[Record]:
    """Parse ``word/TAG`` lines (see the module docstring).

    Raises:
        DataError: a token without a word or tag, naming ``path:line``.
    """
    out = []
    for n, line in enumerate(split_lines(text), start=1):
        toks = line.split()
        if not toks:
            continue
        words, tags = [], []
        for tok in toks:
            w, sep, t = tok.rpartition("/")
            if not sep or not w or not t:
                raise DataError(f"{path}:{n}: token {tok!r} is not word/TAG (a word, a '/', a tag); "
                                f"fix the line or remove it.")
            words.append(w)
            tags.append(t)
        out.append(Record(tokens=words, tags=tags, where=f"{path}:{n}"))
    return out


@register_data("word_tag")
class WordTag(FileSource):
    """Sentences of ``word/TAG`` tokens, one per line."""

    def read_file(self, path):
        return parse_word_tag(read_text(path), path)
