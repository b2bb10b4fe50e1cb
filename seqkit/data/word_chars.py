"""Character ids of words, for character-aware word inputs (``model.char_embedding``).

A character vocabulary is built from the characters of the training split's words
(:class:`~seqkit.data.vocab.Vocabulary`: ``0`` padding, ``1`` unknown, ids 2-3 reserved,
then characters by falling frequency). A word becomes its first ``max_chars``
characters' ids, padded with 0 to ``max_chars``. Words are read as the data gives them
(``data.lowercase`` lowercases the word ids only: capitals are evidence for a tagger).

The acceptor and tagger pack a word's id and its characters into one row
``[1 + max_chars] int32`` (:func:`pack`): ``[word id, char ids...]``. A sequence is then
``[T, 1 + max_chars]`` and a batch ``[B, T, 1 + max_chars]``, padding rows all 0 -- one
input tensor, as for plain token ids, through batching, the model, the step model and
predictions.
"""

from __future__ import annotations

import os
from typing import Iterable

import numpy as np

from seqkit.data.vocab import Vocabulary

#: The character vocabulary's file in a run directory (beside ``vocab.json``).
CHAR_VOCAB = "char_vocab.json"


class WordChars:
    """Words -> character ids ``[T, max_chars] int32``.

    Args:
        vocab: the character vocabulary.
        max_chars: characters kept per word (longer words are cut; ``W`` below).
    """

    def __init__(self, vocab: Vocabulary, max_chars: int):
        self.vocab, self.max_chars = vocab, int(max_chars)

    @classmethod
    def build(cls, words: Iterable[str], max_chars: int) -> "WordChars":
        """The character vocabulary of ``words`` (every character seen in training; a word's
        characters past ``max_chars`` count too, they are simply never fed)."""
        return cls(Vocabulary.build(list(w) for w in words), max_chars)

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, words: list[str]) -> np.ndarray:
        """``[T, W] int32`` character ids (unknown characters ``1``, padding ``0``)."""
        out = np.zeros((len(words), self.max_chars), np.int32)
        index, W = self.vocab.index, self.max_chars
        for i, w in enumerate(words):
            ids = [index.get(c, 1) for c in w[:W]]
            out[i, : len(ids)] = ids
        return out

    def unknown_count(self, words: list[str]) -> int:
        """Characters of ``words`` (the first ``W`` of each) outside the vocabulary."""
        return sum(1 for w in words for c in w[: self.max_chars] if c not in self.vocab.index)

    def save(self, run_dir: str) -> None:
        self.vocab.save(os.path.join(run_dir, CHAR_VOCAB))

    @classmethod
    def load(cls, run_dir: str, max_chars: int) -> "WordChars":
        """Raises RunDirError: a missing or malformed ``char_vocab.json``."""
        return cls(Vocabulary.load(os.path.join(run_dir, CHAR_VOCAB)), max_chars)


def pack(word_ids, char_ids) -> np.ndarray:
    """``word ids [T]`` + ``char ids [T, W]`` -> ``[T, 1 + W] int32`` (column 0: the word id)."""
    return np.concatenate([np.asarray(word_ids, np.int32)[:, None], np.asarray(char_ids, np.int32)], axis=1)
