"""Parity of an exported step model with the Keras full-sequence model, measured before writing."""

from __future__ import annotations

import numpy as np


def padded_pairs(prep, examples: list):
    """``(inputs [N, T] int32, valid [N, T] bool)``: the head's training inputs for ``examples``
    (records with ``.text``, or strings)."""
    from seqkit.data.vocab import tokenize

    d = prep.recipe.data
    rows = []
    for ex in examples:
        ids = prep.vocab.encode(tokenize(getattr(ex, "text", ex), d.tokenizer, d.lowercase))
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
    return np.stack([np.asarray(step_fn(x[:, t])) for t in range(x.shape[1])], axis=1)


def compare(reference: np.ndarray, other: np.ndarray, valid: np.ndarray) -> dict:
    """Max absolute logit difference and arg-max agreement over valid positions.

    Returns:
        ``{"max_abs_diff": float, "argmax_agreement": float in [0, 1], "positions": int}``.
    """
    ref, oth = reference[valid], other[valid]
    return {"max_abs_diff": float(np.max(np.abs(ref - oth))) if ref.size else 0.0,
            "argmax_agreement": float(np.mean(ref.argmax(-1) == oth.argmax(-1))) if ref.size else 1.0,
            "positions": int(valid.sum())}
