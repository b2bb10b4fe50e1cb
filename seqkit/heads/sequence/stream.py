"""Streaming an acceptor or tagger export: raw input -> one step per token/frame -> answers.

The loop a device runs, over :class:`~seqkit.runtime.streaming.StreamingModel`:
``reset()`` before each sequence, then one ``step`` per token id / raw frame
(the normaliser is inside the model). An acceptor yields its *running* answer
after every step (the last one is its answer for the whole sequence); a
tagger yields each step's tag as it comes. A full-sequence export (a
bidirectional encoder cannot step) answers each whole sequence at once
(:func:`full_sequence_answers`): every tag, or the acceptor's final answer.

A CRF tagger (``head.crf: true``; ``metadata["crf"]`` holds its transition, start
and end scores) is different: the best tag *path* depends on the whole sequence,
so the tag a step would get can change until the sequence ends. Its step model
gives emissions per step; :func:`stream_answers` collects them and runs Viterbi
(:func:`seqkit.runtime.viterbi.viterbi`, numpy) when the sequence ends, then
yields every step's tag (probability: the CRF marginal of that tag). A
full-sequence CRF export decodes inside the model (its ``tags`` output).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqkit import log
from seqkit.data.lines import split_lines
from seqkit.data.subword import TextTokenizer
from seqkit.data.ts_file import parse_ts
from seqkit.data.vocab import UNK_ID, Vocabulary
from seqkit.data.word_chars import WordChars, pack
from seqkit.errors import SeqkitError
from seqkit.export.embedded_metadata import tokenization
from seqkit.runtime.viterbi import marginals, viterbi


@dataclass
class StreamInput:
    """One sequence to stream: ``where`` (file:line), ``tokens`` (words, or None for frames)
    and ``steps`` (``[T]`` ids, ``[T, 1 + W]`` word and character ids, or ``[T, D]`` raw frames)."""

    where: str
    tokens: list | None
    steps: np.ndarray


@dataclass
class StepAnswer:
    """The answer after step ``t`` (0-based) of sequence ``index``: class name and probability."""

    index: int
    t: int
    name: str
    probability: float


def read_stream_input(text: str, name: str, metadata: dict, folder: str | None = None) -> list[StreamInput]:
    """Parse ``text`` for an export: a ``.ts`` file for frame inputs, else one sequence per
    non-empty line, split as in training (``metadata['tokenization']``; ``sentencepiece``: the
    pieces of the model file ``metadata['subword_model']`` in the export ``folder``).

    Raises:
        SeqkitError: malformed input, or a frame width other than the export's.
        RunDirError: the export's sentencepiece model file is missing or unreadable.
    """
    inp = metadata.get("input") or metadata["full_sequence"]["input"]
    if inp["kind"] == "frame":
        width = int(inp["shape"][-1])
        out = []
        for r in parse_ts(text, name, need_labels=False):
            if r.frames.shape[1] != width:
                raise SeqkitError(f"{r.where}: {r.frames.shape[1]} channels; this export reads {width}.")
            out.append(StreamInput(r.where, None, np.asarray(r.frames, np.float32)))
    else:
        vocab = Vocabulary(metadata["vocab"])
        if metadata.get("subword_model"):  # sentencepiece: lower-cases before it splits
            if folder is None:
                raise SeqkitError(f"{name}: this export splits text with a sentencepiece model "
                                  f"({metadata['subword_model']}); pass the export folder.")
            tok, lower = TextTokenizer.from_export(folder, metadata), False
        else:
            tok, lower = TextTokenizer(tokenization(metadata)), metadata["lowercase"]
        out, unknown, first = [], 0, None
        for n, line in enumerate(split_lines(text), start=1):
            words = tok.split(line)
            if words:
                ids = vocab.encode([w.lower() for w in words] if lower else words)
                miss = [w for w, i in zip(words, ids) if i == UNK_ID]
                if miss and first is None:
                    first = f"{name}:{n} {miss[0]!r}"
                unknown += len(miss)
                steps = np.asarray(ids, np.int32)
                if metadata.get("char_vocab"):  # model.char_embedding: the words' characters too
                    steps = pack(steps, WordChars(Vocabulary(metadata["char_vocab"]),
                                                  metadata["max_chars"]).encode(words))
                out.append(StreamInput(f"{name}:{n}", words, steps))
        if unknown:
            total = sum(len(x.steps) for x in out)
            log.warn(f"{unknown} of {total} input tokens are not in the export's vocabulary and were "
                     f"read as [UNK] (first: {first})"
                     + ("; their characters are still read." if metadata.get("char_vocab") else "."))
    if not out:
        raise SeqkitError(f"{name}: no input sequences (empty input).")
    return out


def crf_weights(metadata: dict):
    """``(transitions [C, C], start [C], end [C])`` float64 of a CRF tagger export, else None."""
    crf = metadata.get("crf")
    if not crf:
        return None
    return tuple(np.asarray(crf[k], np.float64) for k in ("transitions", "start", "end"))


def _crf_answers(i: int, emissions, labels, crf, tags=None):
    """Every step's answer of one CRF-tagged sequence: the Viterbi path (``tags`` when the
    model decoded it already) and each chosen tag's marginal probability."""
    emissions = np.asarray(emissions, np.float64)
    tags = viterbi(emissions, *crf) if tags is None else np.asarray(tags)
    p = marginals(emissions, *crf)
    return [StepAnswer(i, t, labels[int(k)], float(p[t, int(k)])) for t, k in enumerate(tags)]


def _answer(i: int, t: int, z, labels) -> StepAnswer:
    z = np.asarray(z, np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    k = int(np.argmax(p))
    return StepAnswer(i, t, labels[k], float(p[k]))


def full_sequence_answers(model, inputs: list[StreamInput]):
    """Yield the answers of a full-sequence export
    (:class:`~seqkit.runtime.full_sequence.FullSequenceModel`): a tagger's tag at every step,
    an acceptor's answer at the last step only."""
    labels = model.metadata["labels"]
    long = next((seq for seq in inputs if len(seq.steps) > model.length), None)
    if long is not None:
        raise SeqkitError(f"{long.where}: a sequence of {len(long.steps)} steps is longer than this "
                          f"export's pinned length {model.length}; cut it, or export again with a "
                          f"larger --length.")
    crf = crf_weights(model.metadata)
    if crf is not None:  # the model decoded the Viterbi paths itself
        for i, o in enumerate(model.outputs([seq.steps for seq in inputs])):
            yield from _crf_answers(i, o["logits"], labels, crf, o["tags"])
        return
    outs = model.predict([seq.steps for seq in inputs])
    for i, (seq, z) in enumerate(zip(inputs, outs)):
        if z.ndim == 1:
            yield _answer(i, len(seq.steps) - 1, z, labels)
        else:
            for t in range(len(seq.steps)):
                yield _answer(i, t, z[t], labels)


def stream_answers(rt, inputs: list[StreamInput]):
    """Yield a :class:`StepAnswer` after every step of every input, resetting between inputs.

    A CRF tagger's answers for a sequence all come after its last step (Viterbi over the
    collected emissions): until the sequence ends, any step's tag may still change.
    """
    labels = rt.metadata["labels"]
    crf = crf_weights(rt.metadata)
    for i, seq in enumerate(inputs):
        rt.reset(1)
        if crf is not None:
            z = [rt.step(seq.steps[t:t + 1])[0] for t in range(len(seq.steps))]
            yield from _crf_answers(i, np.stack(z), labels, crf)
            continue
        for t in range(len(seq.steps)):
            yield _answer(i, t, rt.step(seq.steps[t:t + 1])[0], labels)
