"""The input side shared by the acceptor and tagger heads: token ids or frames.

* **tokens**: ``[B, T] int32`` ids from a :class:`~seqkit.data.vocab.Vocabulary`
  built on the training split (0 padding, 1 unknown), embedded with
  ``Embedding(mask_zero=True)``.
* **frames**: ``[B, T, D] float32`` standardised by a
  :class:`~seqkit.data.normalize.FrameNormalizer` fitted on the training split;
  padding frames are NaN and masked by :class:`~seqkit.layers.frame_mask.FrameMask`.

With ``model.char_embedding`` (tokens only), each step is a word *and its characters*,
packed as ``[B, T, 1 + W] int32`` (column 0 the word id, then ``W = max_chars`` character
ids; :mod:`seqkit.data.word_chars`), embedded by
:class:`~seqkit.layers.char_word_embedding.CharWordEmbedding`.

The kind, the frame width and the longest training sequence are saved in
``inputs.json``; the vocabulary or normaliser beside it (and ``char_vocab.json``).

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from seqkit import log
from seqkit.data.normalize import FrameNormalizer
from seqkit.data.subword import TextTokenizer
from seqkit.data.vocab import Vocabulary
from seqkit.data.word_chars import WordChars, pack
from seqkit.errors import DataError, RunDirError
from seqkit.runs.rundir import INPUTS, NORMALIZER, VOCAB, atomic_write_json
from seqkit.runs.json_files import bounded_json


class SequenceHeadOptions(BaseModel):
    """Recipe keys shared by the acceptor and tagger heads (under ``head``).

    too_long: what to do with a sequence longer than ``data.max_length`` (in the
    training data, and in ``seqkit predict`` input): ``refuse``
    (a clear error), ``truncate`` (keep the first steps; counted warning) or, for
    the tagger only, ``split`` (tag it in consecutive pieces; counted warning).
    """

    model_config = ConfigDict(extra="forbid")
    too_long: Literal["refuse", "truncate", "split"] = "refuse"
    output_dropout: float = Field(0.0, ge=0.0, lt=1.0)


class SequenceInputs:
    """Encoder inputs of one kind, fitted on training records.

    Args:
        data_cfg: the recipe's ``data`` section (``lowercase``, ``min_count``, ``max_vocab``).
        char_cfg: the recipe's ``model.char_embedding`` (None: word ids alone).
    """

    def __init__(self, data_cfg, char_cfg=None):
        self.data_cfg = data_cfg
        self.char_cfg = char_cfg
        #: model.char_embedding: the words' characters (:class:`~seqkit.data.word_chars.WordChars`)
        self.chars = None
        self.kind: str | None = None
        self.vocab: Vocabulary | None = None
        self.normalizer: FrameNormalizer | None = None
        self.width = 0
        self.longest = 0
        #: data.tokenizer sentencepiece: the TextTokenizer whose pieces the tokens are re-split into
        self.subword = None

    # ---------------------------------------------------------------- checks
    @staticmethod
    def check_kind(records: list, source: str) -> str:
        """The common input kind of ``records`` (``tokens`` or ``frames``).

        Raises:
            DataError: raw text, a mix of kinds, an empty sequence or frames of
                different widths / holding NaN.
        """
        kinds = {r.input_kind for r in records}
        if kinds == {"text"}:
            raise DataError(f"data: the source '{source}' gives raw text lines; the acceptor and "
                            f"tagger heads read tokens or frames. Use table, tsv_text_label, "
                            f"conll, word_tag, ts or tfds.")
        if len(kinds) > 1:
            raise DataError(f"data: the source '{source}' mixes input kinds {sorted(kinds)}.")
        for r in records:
            if len(r) == 0:
                raise DataError(f"{r.where or source}: an empty sequence (no tokens/frames); "
                                f"remove it from the data.")
        kind = kinds.pop()
        if kind == "frames":
            widths = {int(r.frames.shape[1]) for r in records}
            if len(widths) > 1:
                bad = next(r for r in records if r.frames.shape[1] != records[0].frames.shape[1])
                raise DataError(f"{bad.where}: {bad.frames.shape[1]} channels, but "
                                f"{records[0].where} has {records[0].frames.shape[1]}; every "
                                f"sequence needs the same number of channels.")
            for r in records:
                if not np.isfinite(r.frames).all():
                    raise DataError(f"{r.where}: missing (NaN) or infinite values; seqkit does "
                                    f"not impute frames: fill or drop them first.")
        return kind

    # ---------------------------------------------------------------- fit / io
    def fit(self, train: list) -> None:
        """Fit the vocabulary (tokens) or normaliser (frames) on training records."""
        self.kind = self.check_kind(train, "train")
        self.longest = max(len(r) for r in train)
        if self.kind == "tokens" and self.data_cfg.tokenizer == "sentencepiece":
            d = self.data_cfg  # the source handed the text over as its characters
            self.subword = TextTokenizer.fit("sentencepiece", d.lowercase, ("".join(r.tokens) for r in train),
                                             d.subword)
            self.vocab = self.subword.vocabulary()
        elif self.kind == "tokens":
            d = self.data_cfg
            self.vocab = Vocabulary.build((self._toks(r.tokens) for r in train),
                                          min_count=d.min_count, max_size=d.max_vocab)
        if self.char_cfg is not None:
            if self.kind != "tokens":
                raise DataError("model.char_embedding: the data gives real-valued frames, which have "
                                "no characters; character-aware inputs read words. Remove "
                                "model.char_embedding.")
            self.chars = WordChars.build((w for r in train for w in r.tokens), self.char_cfg.max_chars)
        if self.kind == "frames":
            self.normalizer = FrameNormalizer.fit([r.frames for r in train])
            self.width = self.normalizer.width

    def save(self, run_dir: str) -> None:
        meta = {"kind": self.kind, "width": self.width, "longest": self.longest}
        if self.chars is not None:
            meta["max_chars"] = self.chars.max_chars
        atomic_write_json(os.path.join(run_dir, INPUTS), meta)
        if self.kind == "tokens":
            self.vocab.save(os.path.join(run_dir, VOCAB))
            if self.chars is not None:
                self.chars.save(run_dir)
            if self.subword is not None:
                self.subword.save(run_dir)
        else:
            self.normalizer.save(os.path.join(run_dir, NORMALIZER))

    def load(self, run_dir: str) -> None:
        """Raises RunDirError: a missing or malformed file."""
        path = os.path.join(run_dir, INPUTS)
        try:
            meta = bounded_json(path)
            self.kind, self.width, self.longest = meta["kind"], int(meta["width"]), int(meta["longest"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RunDirError(f"{path}: cannot read the input description ({exc}); the run "
                              f"directory is incomplete, train again.") from exc
        if self.kind == "tokens":
            self.vocab = Vocabulary.load(os.path.join(run_dir, VOCAB))
            if self.char_cfg is not None:
                self.chars = WordChars.load(run_dir, self.char_cfg.max_chars)
            if self.data_cfg.tokenizer == "sentencepiece":
                self.subword = TextTokenizer.load(run_dir, "sentencepiece", self.data_cfg.lowercase,
                                                  vocab=self.vocab.tokens)
        else:
            self.normalizer = FrameNormalizer.load(os.path.join(run_dir, NORMALIZER))

    def describe(self) -> str:
        if self.kind == "tokens":
            return (f"vocabulary {len(self.vocab)}" + (f" ({self.subword.describe()})" if self.subword else "")
                    + (f", {len(self.chars)} characters (up to {self.chars.max_chars} per word)"
                       if self.chars is not None else ""))
        return f"{self.width} channels (standardised)"

    # ---------------------------------------------------------------- encode
    def _toks(self, tokens):
        """The vocabulary's tokens of a record's tokens: lower-cased with ``data.lowercase``;
        with sentencepiece, the pieces of the text its (character) tokens spell."""
        if self.subword is not None:
            return self.subword.split("".join(tokens))
        return [t.lower() for t in tokens] if self.data_cfg.lowercase else list(tokens)

    def encode(self, record) -> np.ndarray:
        """``tokens -> [T] int32 ids`` (with ``model.char_embedding``: ``[T, 1 + W] int32``, the
        word id then its character ids) or ``frames -> [T, D] float32`` standardised.

        Raises:
            DataError: a record of the other kind, or frames of another width.
        """
        if self.kind == "tokens":
            if record.tokens is None:
                raise DataError(f"{record.where}: this run reads tokens, the input has frames.")
            ids = np.asarray(self.vocab.encode(self._toks(record.tokens)), "int32")
            if self.chars is not None:
                return pack(ids, self.chars.encode(list(record.tokens)))
            return ids
        if record.frames is None:
            raise DataError(f"{record.where}: this run reads {self.width}-channel frames, the input "
                            f"has tokens.")
        if record.frames.shape[1] != self.width:
            raise DataError(f"{record.where}: {record.frames.shape[1]} channels; this run was "
                            f"trained on {self.width}.")
        return self.normalizer(record.frames)

    def unknown_count(self, records: list) -> tuple[int, int]:
        """``(unknown tokens, all tokens)`` of ``records`` under the vocabulary."""
        if self.kind != "tokens":
            return 0, 0
        toks = [self._toks(r.tokens) for r in records]
        unk = sum(1 for ts in toks for t in ts if t not in self.vocab.index)
        return unk, sum(len(ts) for ts in toks)

    # ---------------------------------------------------------------- model
    def input_layer(self, model_cfg):
        """``(keras.Input, x [B, T, E] with mask)`` for this kind of input (``model.char_embedding``:
        input ``[B, T, 1 + W] int32``, ``x [B, T, E + C]``)."""
        import keras

        from seqkit.layers.frame_mask import FrameMask

        if self.chars is not None:
            from seqkit.layers.char_word_embedding import CharWordEmbedding

            c = self.char_cfg
            inp = keras.Input(shape=(None, 1 + c.max_chars), dtype="int32", name="tokens")
            x = CharWordEmbedding(len(self.vocab), model_cfg.embedding_dim, len(self.chars), c.dim,
                                  c.units, c.cell, c.bidirectional, c.max_chars, name="embedding")(inp)
        elif self.kind == "tokens":
            inp = keras.Input(shape=(None,), dtype="int32", name="tokens")
            x = keras.layers.Embedding(len(self.vocab), model_cfg.embedding_dim, mask_zero=True,
                                       name="embedding")(inp)
        else:
            inp = keras.Input(shape=(None, self.width), dtype="float32", name="frames")
            x = FrameMask(name="frame_mask")(inp)
        return inp, x


def apply_too_long(records: list, limit: int, policy: str, *, what: str, allow_split: bool,
                   with_owner: bool = False):
    """Apply the ``too_long`` policy to records longer than ``limit`` steps.

    Args:
        records: the records.
        limit: the most steps a record may have.
        policy: ``refuse``, ``truncate`` (keep the first ``limit`` steps) or ``split``
            (consecutive pieces of ``limit`` steps).
        what: the name of the limit, for messages (e.g. ``"data.max_length"``).
        allow_split: whether ``split`` is allowed (tagger) or not (acceptor).
        with_owner: also return, per output record, the index of the input record it
            came from (to re-join pieces).

    Returns:
        The records (cut or split, with a counted warning), and with ``with_owner`` the
        owner indices.

    Raises:
        DataError: ``refuse`` and some record is too long (naming the first), or
            ``split`` where it is not allowed.
    """
    long = [r for r in records if len(r) > limit]
    if long and policy == "split" and not allow_split:
        raise DataError("head.too_long: split is for the tagger; the acceptor answers once per "
                        "sequence. Use refuse or truncate.")
    if long and policy == "refuse":
        raise DataError(f"{long[0].where}: {len(long)} sequence(s) are longer than {what} = {limit} "
                        f"steps (this one has {len(long[0])}). Raise the limit, or set "
                        f"head.too_long: truncate{' or split' if allow_split else ''}.")
    out, owner = [], []
    for i, r in enumerate(records):
        starts = [0] if len(r) <= limit or policy == "truncate" else range(0, len(r), limit)
        for s in starts:
            sl = slice(s, s + limit)
            out.append(r if len(r) <= limit else
                       replace(r, tokens=None if r.tokens is None else r.tokens[sl],
                               frames=None if r.frames is None else r.frames[sl],
                               tags=None if r.tags is None else r.tags[sl]))
            owner.append(i)
    if long:
        verb = "split into pieces" if policy == "split" else "truncated"
        log.warn(f"{len(long)} sequence(s) longer than {what} = {limit} steps were {verb} "
                 f"(head.too_long: {policy}).")
    return (out, owner) if with_owner else out
