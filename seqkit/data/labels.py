"""Label and tag vocabularies: class names <-> class ids ``0..C-1``.

Classes are ordered by falling frequency in the training split (ties by first
appearance), so class 0 is the most frequent. There is no padding entry: heads
feed targets ``id + 1`` with ``0`` meaning "no target" (see
:mod:`seqkit.training.losses`). Saved in the run directory as ``labels.json``.
"""

from __future__ import annotations

import collections
from typing import Iterable

from seqkit.errors import RunDirError
from seqkit.runs.json_files import bounded_json
from seqkit.runs.rundir import atomic_write_json


class LabelVocabulary:
    """An ordered list of class names; ``names[i]`` has id ``i``.

    Args:
        names: distinct class names.

    Raises:
        ValueError: duplicate names.
    """

    def __init__(self, names: list[str]):
        if len(set(names)) != len(names):
            raise ValueError("a label vocabulary has distinct names")
        self.names = list(names)
        self.index = {n: i for i, n in enumerate(self.names)}

    @classmethod
    def build(cls, labels: Iterable[str]) -> "LabelVocabulary":
        """Classes seen in ``labels``, most frequent first (ties: first seen first)."""
        counts = collections.Counter()
        first = {}
        for i, lab in enumerate(labels):
            counts[lab] += 1
            first.setdefault(lab, i)
        return cls(sorted(counts, key=lambda n: (-counts[n], first[n])))

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: str) -> bool:
        return name in self.index

    def id(self, name: str) -> int:
        """Class id of ``name``, or ``-1`` when it was never seen in training."""
        return self.index.get(name, -1)

    def save(self, path: str) -> None:
        """Write as a JSON list (atomic)."""
        atomic_write_json(path, self.names)

    @classmethod
    def load(cls, path: str) -> "LabelVocabulary":
        """Read a file written by :meth:`save`.

        Raises:
            RunDirError: missing or malformed file.
        """
        try:
            names = bounded_json(path)
            if not isinstance(names, list) or not all(isinstance(n, (str, int)) and not isinstance(n, bool)
                                                      for n in names):
                raise ValueError(f"expected a JSON list of class names, found {type(names).__name__} "
                                 f"{str(names)[:60]}")
            if not names:
                raise ValueError("the list names no class")
            return cls([str(n) for n in names])
        except (OSError, ValueError, TypeError) as exc:
            raise RunDirError(f"{path}: cannot read the label list ({exc}); the run directory is "
                              f"incomplete, train again.") from exc
