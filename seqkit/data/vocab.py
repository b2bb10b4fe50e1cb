"""Token vocabularies with seqkit's fixed special ids.

Ids: ``0`` padding (``""``), ``1`` unknown (``[UNK]``), ``2`` start ``<s>``,
``3`` end ``</s>``, then tokens by falling frequency (ties by first
appearance). Mapping strings to ids in a pipeline uses
``keras.layers.StringLookup`` built from this list, so the two always agree.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import collections
from typing import Iterable

from seqkit.errors import RunDirError
from seqkit.runs.json_files import bounded_json
from seqkit.runs.rundir import atomic_write_json

PAD, UNK, START, END = "", "[UNK]", "<s>", "</s>"
PAD_ID, UNK_ID, START_ID, END_ID = 0, 1, 2, 3
SPECIALS = (PAD, UNK, START, END)


def tokenize(text: str, mode: str, lowercase: bool = False) -> list[str]:
    """Split a string into tokens: ``"char"`` (Unicode code points) or ``"whitespace"``.

    ``"sentencepiece"`` gives the code points too: that is how data sources hand raw text over
    before the subword model exists (it is trained on the training split afterwards); the
    heads join them and split the text into pieces (:class:`seqkit.data.subword.TextTokenizer`).
    """
    if lowercase:
        text = text.lower()
    return list(text) if mode in ("char", "sentencepiece") else text.split()


def first_duplicate(items):
    """The first item that occurs a second time in ``items`` (in one pass), or None."""
    seen: set = set()
    return next((t for t in items if t in seen or seen.add(t)), None)


class Vocabulary:
    """An ordered token list; ``tokens[i]`` is the token with id ``i``.

    Args:
        tokens: the full list including the four specials at ids 0-3.
    """

    def __init__(self, tokens: list[str]):
        if tuple(tokens[:4]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with {SPECIALS}, got {tokens[:4]}")
        self.tokens = list(tokens)
        self.index = {t: i for i, t in enumerate(self.tokens)}

    @classmethod
    def build(cls, sequences: Iterable[list[str]], min_count: int = 1,
              max_size: int | None = None) -> "Vocabulary":
        """Count tokens; keep those seen ``min_count`` times, at most ``max_size`` in all."""
        counts = collections.Counter()
        for seq in sequences:
            counts.update(seq)
        for s in SPECIALS:
            counts.pop(s, None)
        kept = [t for t, c in sorted(counts.items(), key=lambda kv: -kv[1]) if c >= min_count]
        if max_size is not None:
            kept = kept[: max(0, max_size - len(SPECIALS))]
        return cls(list(SPECIALS) + kept)

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: list[str]) -> list[int]:
        """Token strings -> ids (unknown tokens -> ``UNK_ID``)."""
        return [self.index.get(t, UNK_ID) for t in tokens]

    def decode(self, ids: Iterable[int], join: str = "") -> str:
        """Ids -> text, stopping at ``END_ID`` and skipping padding and start."""
        return join.join(self.decode_tokens(ids))

    def decode_tokens(self, ids: Iterable[int]) -> list[str]:
        """Ids -> token strings, stopping at ``END_ID`` and skipping padding and start
        (an id outside the vocabulary reads as ``[UNK]``)."""
        out = []
        for i in ids:
            i = int(i)
            if i == END_ID:
                break
            if i in (PAD_ID, START_ID):
                continue
            out.append(self.tokens[i] if 0 <= i < len(self.tokens) else UNK)
        return out

    def string_lookup(self):
        """A ``keras.layers.StringLookup`` mapping token strings to these ids."""
        import keras

        return keras.layers.StringLookup(vocabulary=self.tokens[2:], mask_token=PAD,
                                         oov_token=UNK, num_oov_indices=1)

    def save(self, path: str) -> None:
        """Write as a JSON list (any character, newline and space included, survives)."""
        atomic_write_json(path, self.tokens)

    @classmethod
    def load(cls, path: str) -> "Vocabulary":
        """Read a vocabulary written by :meth:`save`.

        Raises:
            RunDirError: missing or malformed file.
        """
        try:
            tokens = bounded_json(path)
            if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
                raise ValueError(f"expected a JSON list of token strings, found a {type(tokens).__name__}")
            dup = first_duplicate(tokens)
            if dup is not None:  # the model's ids would silently shift
                raise ValueError(f"the token {dup!r} is listed twice")
            return cls(tokens)
        except (OSError, ValueError) as exc:
            raise RunDirError(f"{path}: cannot read the vocabulary ({exc}); the file was damaged or "
                              f"edited, or the run directory is incomplete: restore it, or train again.") from exc
