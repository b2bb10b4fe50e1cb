"""Parity of an exported model with the Keras full-sequence model, measured before writing.

A model whose logits are ``[N, T, C]``: logits per valid position. One whose logits are
``[N, C]`` (one answer per sequence): the step model's running answer at each sequence's last
valid step (its full-sequence answer) against the Keras model's. The head gives the inputs
(:meth:`~seqkit.heads.base.Head.parity_inputs`), the gold targets and its task metric
(:meth:`~seqkit.heads.base.Head.parity_targets`, :meth:`~seqkit.heads.base.Head.task_metric`:
e.g. perplexity, accuracy), so each comparison also gives the task figure of both models on the
same held-out records, and a quantized export's cost is read in the task's own unit.
"""

from __future__ import annotations

import numpy as np

from seqkit.progress import progress


def padded_pairs(prep, examples: list):
    """``(inputs [N, T] int32, valid [N, T] bool)``: the head's training inputs for ``examples``
    (records with ``.text``, or strings)."""
    d = prep.recipe.data
    split = prep.head.tokenizer.split  # data.tokenizer (sentencepiece: the run's model)
    rows = []
    for ex in examples:
        ids = prep.vocab.encode(split(getattr(ex, "text", ex)))
        x, _ = prep.head.to_pair(np.asarray(ids, np.int32))
        rows.append(np.asarray(x)[: d.max_length])
    T = max(len(r) for r in rows)
    x = np.zeros((len(rows), T), np.int32)
    for i, r in enumerate(rows):
        x[i, : len(r)] = r
    valid = np.zeros_like(x, bool)
    for i, r in enumerate(rows):
        valid[i, : len(r)] = True
    return x, valid


def stream_logits(step_fn, reset_fn, x: np.ndarray) -> np.ndarray:
    """Run ``x [N, T]`` through a step model one position at a time: logits ``[N, T, C]``."""
    reset_fn(x.shape[0])
    out = []
    with progress(x.shape[1], "parity check", "steps") as bar:
        for t in range(x.shape[1]):
            out.append(np.asarray(step_fn(x[:, t])))
            bar.update()
    return np.stack(out, axis=1)


def compare(reference: np.ndarray, other: np.ndarray, valid: np.ndarray) -> dict:
    """Max absolute logit difference and arg-max agreement over valid positions.

    Returns:
        ``{"max_abs_diff": float, "argmax_agreement": float in [0, 1], "positions": int}``.
    """
    ref, oth = reference[valid], other[valid]
    return {"max_abs_diff": float(np.max(np.abs(ref - oth))) if ref.size else 0.0,
            "argmax_agreement": float(np.mean(ref.argmax(-1) == oth.argmax(-1))) if ref.size else 1.0,
            "positions": int(valid.sum())}


def sequence_inputs(prep, examples: list, length: int | None = None):
    """``(x, lengths [N] int)``: records of a head with ``inputs`` (token ids or frames,
    :class:`~seqkit.heads.sequence.inputs.SequenceInputs`) as the export's raw inputs.

    ``x`` is ``tokens [N, T] int32`` (0 padding; ``model.char_embedding``: ``[N, T, 1 + W]``) or
    *raw* (not normalised)
    ``frames [N, T, D] float32`` (NaN padding). ``T`` is ``length`` when given
    (longer records are cut to it), else the longest record.
    """
    inputs = prep.head.inputs
    if inputs.kind == "tokens":
        rows = [inputs.encode(r) for r in examples]
    else:
        rows = [np.asarray(r.frames, np.float32) for r in examples]
    T = length or max(len(r) for r in rows)
    rows = [r[:T] for r in rows]
    if inputs.kind == "tokens":  # [N, T], or [N, T, 1 + W] word and character ids
        x = np.zeros((len(rows), T, *rows[0].shape[1:]), np.int32)
    else:
        x = np.full((len(rows), T, inputs.width), np.nan, np.float32)
    for i, r in enumerate(rows):
        x[i, : len(r)] = r
    return x, np.asarray([len(r) for r in rows])


class ParityCase:
    """Held-out inputs, the Keras reference on them, and how exported answers compare.

    Args:
        prep, model: the loaded run.
        examples: held-out records.
        length: pin the time axis to this many steps (full-sequence exports).

    Attributes:
        x: the export's raw inputs (the head's :meth:`~seqkit.heads.base.Head.parity_inputs`).
        reference: Keras logits, ``[N, T, C]`` or ``[N, C]`` (one answer per sequence).
        valid: positions compared (``[N, T]`` bool, or ``[N]`` all True for ``[N, C]``).
    """

    def __init__(self, prep, model, examples: list, length: int | None = None):
        self.head = prep.head
        self.x, self.lengths = self.head.parity_inputs(examples, length)
        self.lengths = np.asarray(self.lengths)
        self.reference = np.asarray(model(self.head.keras_inputs(self.x), training=False))
        self.per_sequence = self.reference.ndim == 2
        T = self.x.shape[1]
        self.valid = (np.ones(len(self.x), bool) if self.per_sequence
                      else np.arange(T)[None, :] < self.lengths[:, None])
        self.targets = self.head.parity_targets(examples, T)
        self.keras_task = self.task(self.reference)

    def task(self, logits: np.ndarray) -> dict | None:
        """The head's task metric of ``logits`` (shaped as :attr:`reference`), None without targets."""
        if self.targets is None:
            return None
        return self.head.task_metric(logits, self.targets, self.valid)

    def _with_task(self, res: dict, logits: np.ndarray) -> dict:
        if self.targets is not None:
            got = self.task(logits)
            name = next(iter(got))
            res["task"] = {"metric": name, "keras": self.keras_task[name], "export": got[name],
                           "scored": got["scored"]}
        return res

    def stream_input(self) -> np.ndarray:
        """``x`` with NaN padding frames read as 0 (a stream never sees padding; the rows'
        later answers are not compared, and NaN would reach quantisation ranges)."""
        return np.nan_to_num(self.x, nan=0.0) if self.x.dtype.kind == "f" else self.x

    def check_stream(self, streamed: np.ndarray) -> dict:
        """Compare step-model logits ``[N, T, C]`` (see :func:`compare`)."""
        if self.per_sequence:
            streamed = streamed[np.arange(len(streamed)), np.maximum(self.lengths - 1, 0)]
        return self._with_task(compare(self.reference, streamed, self.valid), streamed)

    def check_full(self, logits: np.ndarray) -> dict:
        """Compare full-sequence logits (same shape as :attr:`reference`)."""
        return self._with_task(compare(self.reference, logits, self.valid), logits)
