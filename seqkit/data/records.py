"""The record: one example as a data source hands it over.

A record carries one *input* -- raw ``text`` (tokenized later by the head),
pre-split ``tokens`` or real-valued ``frames`` -- and optionally one *target*:
a sequence ``label`` (acceptor), one ``tag`` per token/frame (tagger), or an
unaligned ``target`` symbol sequence (encoder-decoder). ``group`` keeps records
together when the data is split (e.g. a word's alternative pronunciations).
``where`` names the file and line it came from, for error messages.

Which fields a head needs is the head's business (:meth:`Head.check_records`);
data sources only promise the shapes below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass
class Record:
    """One example.

    Attributes:
        text: a raw string (language model, TSV text before tokenization).
        tokens: ``T`` token strings.
        frames: ``[T, D]`` float32 array of real-valued frames.
        label: the class of the whole sequence (acceptor target).
        tags: ``T`` tag strings, aligned with ``tokens``/``frames`` (tagger target).
        target: ``U`` target symbols of any length (encoder-decoder target).
        group: records with the same group go to the same split (``None``: on its own).
        where: ``"file:line"`` (or similar) of the example, for messages.
    """

    text: Optional[str] = None
    tokens: Optional[list] = None
    frames: Optional[np.ndarray] = None
    label: Optional[str] = None
    tags: Optional[list] = None
    target: Optional[list] = None
    group: Optional[str] = None
    where: str = ""

    @property
    def input_kind(self) -> str:
        """``"frames"``, ``"tokens"`` or ``"text"`` (the first one present)."""
        if self.frames is not None:
            return "frames"
        if self.tokens is not None:
            return "tokens"
        return "text"

    def __len__(self) -> int:
        """Number of time steps of the input (``T``; characters for raw text)."""
        if self.frames is not None:
            return int(self.frames.shape[0])
        if self.tokens is not None:
            return len(self.tokens)
        return len(self.text or "")


def records_fingerprint(records) -> str:
    """A SHA-256 hex digest of a split's records (input, target and group of each, in order;
    ``where`` left out), so two runs can tell whether they hold out the same examples.

    Args:
        records: a list of :class:`Record`, or the lines (strings) of a lazily read corpus.

    Returns:
        64 hex characters; equal lists give equal digests.
    """
    import hashlib

    h = hashlib.sha256()
    for r in records:
        if isinstance(r, str):  # a lazy corpus yields its lines
            h.update(repr(r).encode("utf-8"))
            continue
        frames = b"" if r.frames is None else np.ascontiguousarray(r.frames, "float32").tobytes()
        h.update(repr((r.text, r.tokens, r.label, r.tags, r.target, r.group)).encode("utf-8"))
        h.update(len(frames).to_bytes(8, "little") + frames)
    return h.hexdigest()
