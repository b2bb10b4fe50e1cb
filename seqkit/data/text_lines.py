"""Text-line data sources: one example per non-empty line.

``text_lines`` reads a UTF-8 file; ``pydoc_topics`` reads the help texts that
ship with CPython (``pydoc_data.topics``, about 465k characters), so a real
corpus is available on any machine without a download.

``pydoc_data`` (absent from some Python builds) is imported where used.
"""

from __future__ import annotations

import sys

from pydantic import BaseModel, ConfigDict

from seqkit.data.base import DataSource, read_text
from seqkit.data.lines import split_lines as lines_of
from seqkit.errors import DataError
from seqkit.registry import register_data


def split_lines(text: str, keep_empty: bool = False) -> list[str]:
    """Split text into lines (``\\n``, ``\\r\\n``; :func:`seqkit.data.lines.split_lines`), dropping
    trailing whitespace and empty lines."""
    lines = [ln.rstrip() for ln in lines_of(text)]
    return lines if keep_empty else [ln for ln in lines if ln.strip()]


class TextLinesOptions(BaseModel):
    """Recipe keys of ``text_lines`` (under ``data``)."""

    model_config = ConfigDict(extra="forbid")
    path: str


@register_data("text_lines")
class TextLines(DataSource):
    """Lines of a UTF-8 text file; empty lines are skipped."""

    Options = TextLinesOptions

    def path(self) -> str:
        p = self.options.path
        return self.recipe.resolve_path(p) if self.recipe is not None else p

    def describe(self) -> str:
        return f"text_lines {self.path()}"

    def examples(self) -> list[str]:
        path = self.path()
        text = read_text(path)
        lines = split_lines(text)
        if not lines:
            raise DataError(f"{path}: the file has no non-empty lines; a text_lines source needs "
                            f"one example per line.")
        return lines


@register_data("pydoc_topics")
class PydocTopics(DataSource):
    """The non-empty lines of CPython's ``pydoc_data.topics`` help texts, in topic order."""

    def describe(self) -> str:
        return f"pydoc_topics (Python {sys.version.split()[0]} pydoc_data.topics)"

    def examples(self) -> list[str]:
        try:
            from pydoc_data.topics import topics
        except ImportError as exc:  # pragma: no cover - stripped-down Pythons
            raise DataError("pydoc_topics: this Python has no pydoc_data package; use a "
                            "text_lines source with a file instead.") from exc
        return split_lines("\n".join(topics[k] for k in topics))
