"""Chinese phrase -> tone-numbered pinyin, from the phrase dictionary shipped with ``pypinyin``
(MIT; ``pip install "seqkit[examples]"``): the file ``pypinyin/phrases_dict.json`` is read from
the installed package's folder (the package is never imported).

The file is one JSON object ``{phrase: [[reading, ...], ...]}``: per character of the phrase, its
reading(s) in tone-mark pinyin (``"重庆": [["chóng"], ["qìng"]]``). pypinyin 0.55 ships 47,111
phrases of 2-10 characters (5,195 distinct characters, 1,247 distinct tone-numbered syllables);
the readings are those *in the phrase* -- polyphones (``银行`` yin2 hang2 vs ``行走`` xing2
zou3) and the tone sandhi of 一 and 不 (``一不小心`` yi2 bu4 xiao3 xin1) -- which is what makes
the task a transduction rather than a per-character lookup.

Each phrase becomes ``Record(text=phrase, target=[syllables], group=phrase)``: one target
syllable per source character. A character with several listed readings (two phrases in 0.55:
``朝阳`` zhao1/chao2, ``那些`` na4/nei4) gives one record per combination, all in the phrase's
group, so they stay in one split and a hypothesis equal to any of them is right (as CMUdict's
alternative pronunciations, :mod:`seqkit.data.cmudict`).

Tone numbers (pypinyin's ``Style.TONE3`` written by :func:`tone3`): the tone mark becomes a digit
after the syllable -- 1 macron, 2 acute, 3 caron, 4 grave; a syllable without a mark (the neutral
tone, 轻声) gets ``5`` (pypinyin's ``neutral_tone_with_five=True``), so every syllable ends in a
digit (``一丁点儿`` -> yi1 ding1 dian3 er5); ``ü`` is written ``v`` (``绿`` lv4).
"""

from __future__ import annotations

import json
import os
import unicodedata
from functools import lru_cache
from typing import Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from seqkit.data.base import DataSource, read_text
from seqkit.data.packaged import package_dir
from seqkit.data.records import Record
from seqkit.errors import DataError
from seqkit.registry import register_data

#: combining tone marks (Unicode NFD) -> tone number
_TONES = {"\u0304": "1", "\u0301": "2", "\u030c": "3", "\u0300": "4"}
_DIAERESIS = "\u0308"


@lru_cache(maxsize=8192)  # ~1,250 distinct syllables in 150k positions
def tone3(syllable: str) -> str:
    """A tone-mark pinyin syllable in tone-number form (``"zhòng"`` -> ``"zhong4"``).

    The syllable is decomposed (Unicode NFD); its tone mark (U+0304/0301/030C/0300 for tones
    1-4) is dropped and its digit appended, ``5`` when there is none (neutral tone); ``ü``
    (u + U+0308) is written ``v``. Marks on ``m``/``n`` (``ḿ``, ``ňg``) are handled alike.

    Args:
        syllable: one syllable, e.g. ``"lǜ"``.

    Returns:
        e.g. ``"lv4"``.

    Raises:
        DataError: the syllable is empty or has two tone marks.
    """
    tone, out = None, []
    for ch in unicodedata.normalize("NFD", syllable.strip()):
        if ch in _TONES:
            if tone is not None:
                raise DataError(f"pinyin syllable '{syllable}' has two tone marks.")
            tone = _TONES[ch]
        elif ch == _DIAERESIS:
            if out and out[-1] in "uU":
                out[-1] = "v" if out[-1] == "u" else "V"
        else:
            out.append(ch)
    if not out:
        raise DataError(f"empty pinyin syllable '{syllable}'.")
    return "".join(out) + (tone or "5")


def parse_phrases(entries: dict, path: str) -> list[Record]:
    """Records from a pypinyin phrase dictionary (see the module docstring).

    Args:
        entries: ``{phrase: [[tone-mark reading, ...] per character]}`` in file order.
        path: the file's name, for messages and ``Record.where`` (``path: PHRASE``).

    Returns:
        One record per phrase (per reading combination when a character lists several), in
        file order; targets are tone-numbered syllables, one per character.

    Raises:
        DataError: a phrase whose reading list does not have one entry per character, or an
            entry without readings (naming the phrase).
    """
    out = []
    for phrase, readings in entries.items():
        where = f"{path}: {phrase}"
        if not isinstance(readings, list) or len(readings) != len(phrase) or not all(
                isinstance(r, list) and r for r in readings):
            raise DataError(f"{where}: a phrase needs one non-empty list of readings per character "
                            f"({len(phrase)}), got {readings!r}. Fix the entry or give another "
                            f"data.path.")
        combos = [[]]
        for alts in readings:
            combos = [c + [tone3(a)] for c in combos for a in dict.fromkeys(alts)]
        out += [Record(text=phrase, target=c, group=phrase, where=where) for c in combos]
    return out


class PinyinOptions(BaseModel):
    """Recipe keys of the ``pinyin_phrases`` source (under ``data``)."""

    model_config = ConfigDict(extra="forbid")
    #: read this JSON file (pypinyin's phrases_dict.json format) instead of the package's;
    #: relative to the recipe's folder
    path: Optional[str] = None
    #: keep only this many phrases (a seeded sample, every reading of each), for quick runs
    phrases: Optional[int] = Field(None, gt=0)
    #: keep only phrases of at most this many characters
    max_chars: Optional[int] = Field(None, gt=0)


@register_data("pinyin_phrases")
class PinyinPhrases(DataSource):
    """Chinese phrases and their tone-numbered pinyin from pypinyin's shipped phrase dictionary."""

    Options = PinyinOptions
    tokenizes_text = True

    def path(self) -> str:
        if self.options.path:  # made absolute by the recipe loader
            return self.options.path
        return os.path.join(package_dir("pypinyin", "pinyin_phrases"), "phrases_dict.json")

    def describe(self):
        o = self.options
        return (f"pinyin_phrases ({self.path()}{f', {o.phrases} phrases' if o.phrases else ''}"
                f"{f', at most {o.max_chars} characters' if o.max_chars else ''})")

    def load(self):
        path = self.path()
        if not self.options.path and not os.path.isfile(path):
            raise DataError(f"{path}: this pypinyin has no phrases_dict.json; install a current "
                            f"one with `pip install -U pypinyin`.")
        try:
            entries = json.loads(read_text(path))
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg}); a phrase dictionary is "
                            f"one object {{phrase: [[reading], ...]}}.") from None
        if not isinstance(entries, dict):
            raise DataError(f"{path}: expected one JSON object {{phrase: [[reading], ...]}}, got "
                            f"{type(entries).__name__}.")
        if self.options.max_chars:
            entries = {k: v for k, v in entries.items() if len(k) <= self.options.max_chars}
        if self.options.phrases:
            keys = list(entries)
            seed = self.recipe.split_seed if self.recipe is not None else 0
            keep = np.random.default_rng([seed, 11]).permutation(len(keys))[:self.options.phrases]
            keep = set(keep.tolist())
            entries = {k: v for i, (k, v) in enumerate(entries.items()) if i in keep}
        return {"all": parse_phrases(entries, path)}
