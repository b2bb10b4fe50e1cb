"""``text_corpus``: a training text larger than memory, read lazily (``data.layout: stream`` only).

Recipe keys (under ``data``)::

    source: text_corpus
    layout: stream
    train_path: [corpus/part-*.txt.gz, extra.txt]   # a path or glob, or a list of them
    valid_path: valid.txt                           # optional; held in memory (keep it small)
    test_path: test.txt                             # optional; held in memory
    vocab_file: vocab.txt                           # optional: one token per line, or a vocab.json

The training split is a :class:`~seqkit.data.lazy_corpus.LazyCorpus` (files, globs and
``.gz`` read a line at a time); its vocabulary is ``data.vocab_file`` or one bounded
counting pass honouring ``data.min_count`` / ``data.max_vocab``. Valid and test are not
carved from the training files (that would need the whole text): give them as files, or
leave them out (then the split is empty: training monitors the training loss). Lines
follow ``text_lines`` (trailing white space dropped, empty lines skipped).
"""

from __future__ import annotations

from typing import Optional, Union

from pydantic import BaseModel, ConfigDict

from seqkit.data.base import DataSource
from seqkit.data.lazy_corpus import LazyCorpus, expand_paths, read_lines
from seqkit.data.records import Record
from seqkit.errors import DataError
from seqkit.registry import register_data

Paths = Union[str, list[str]]


class TextCorpusOptions(BaseModel):
    """Recipe keys of ``text_corpus`` (under ``data``)."""

    model_config = ConfigDict(extra="forbid")
    train_path: Paths
    valid_path: Optional[Paths] = None
    test_path: Optional[Paths] = None
    vocab_file: Optional[str] = None


@register_data("text_corpus")
class TextCorpus(DataSource):
    """Text files read lazily as one token stream (see the module docstring)."""

    Options = TextCorpusOptions
    tokenizes_text = True

    @classmethod
    def check_recipe(cls, options, config) -> list:
        if config.data.layout != "stream":
            return [("source", "text_corpus reads a corpus lazily as one token stream; it needs "
                               "data.layout: stream (and head.type language_model). For one example "
                               "per line use source: text_lines.")]
        if config.data.limit:
            return [("limit", "text_corpus reads its files as they are; data.limit is for in-memory "
                              "sources. Remove it (cut the files instead).")]
        return []

    def _resolve(self, p: str) -> str:
        return self.recipe.resolve_path(p) if self.recipe is not None else p

    def paths(self, split: str) -> list[str]:
        return expand_paths(getattr(self.options, f"{split}_path"), f"data.{split}_path", self._resolve)

    def vocab_file(self) -> str | None:
        v = self.options.vocab_file
        return self._resolve(v) if v else None

    def describe(self) -> str:
        o = self.options
        return "text_corpus " + ", ".join(f"{k}={getattr(o, f'{k}_path')}" for k in ("train", "valid", "test")
                                          if getattr(o, f"{k}_path"))

    def load(self) -> dict:
        """``{"train": LazyCorpus, "valid": [Record], "test": [Record]}`` (absent files: empty lists).

        Raises:
            DataError: a path or glob names no file, or a held-out file has no line.
        """
        d = self.recipe.data if self.recipe is not None else None
        corpus = LazyCorpus(self.paths("train"), d.tokenizer if d else "char", d.lowercase if d else False)
        corpus.vocab_file = self.vocab_file()
        out = {"train": corpus}
        for split in ("valid", "test"):
            if getattr(self.options, f"{split}_path") is None:
                out[split] = []
                continue
            records = [Record(text=t, where=f"{split} line {i + 1}")
                       for i, t in enumerate(read_lines(self.paths(split)))]
            if not records:
                raise DataError(f"data.{split}_path: no non-empty line in "
                                f"{getattr(self.options, f'{split}_path')}.")
            out[split] = records
        return out
