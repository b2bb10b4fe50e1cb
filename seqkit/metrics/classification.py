"""Classification and tagging figures computed from predicted and true class names.

Precision, recall and F1 per class ``c`` (Manning, Raghavan & Schuetze 2008, sec. 8.3)::

    P_c = TP_c / (TP_c + FP_c),  R_c = TP_c / (TP_c + FN_c),  F1_c = 2 P_c R_c / (P_c + R_c)

(0 when a denominator is 0). Macro-F1 is the unweighted mean of ``F1_c`` over the
classes of the training label set (a class never predicted and never true is
left out). Entity-level F1 for BIO/BIOES tags is ``seqeval``'s (Ramshaw & Marcus
1995 chunks; strict mode for BIOES).

The seqeval package is imported inside the functions that use it, so importing this module does not
load it.
"""

from __future__ import annotations

import collections

import numpy as np

from seqkit.errors import SeqkitError


def accuracy(true: list, pred: list) -> float:
    """Fraction of positions where ``pred[i] == true[i]`` (lists of class names)."""
    return float(np.mean([t == p for t, p in zip(true, pred)])) if true else 0.0


def per_class(true: list, pred: list, classes: list) -> dict:
    """``{class: {"precision", "recall", "f1", "support"}}`` for each of ``classes``."""
    tp, fp, fn = collections.Counter(), collections.Counter(), collections.Counter()
    for t, p in zip(true, pred):
        if t == p:
            tp[t] += 1
        else:
            fp[p] += 1
            fn[t] += 1
    out = {}
    for c in classes:
        p = tp[c] / (tp[c] + fp[c]) if tp[c] + fp[c] else 0.0
        r = tp[c] / (tp[c] + fn[c]) if tp[c] + fn[c] else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        out[c] = {"precision": round(p, 6), "recall": round(r, 6), "f1": round(f, 6),
                  "support": tp[c] + fn[c]}
    return out


def macro_f1(true: list, pred: list, classes: list) -> float:
    """Mean F1 over ``classes`` that occur in ``true`` or ``pred``."""
    pc = per_class(true, pred, classes)
    seen = set(true) | set(pred)
    fs = [v["f1"] for c, v in pc.items() if c in seen]
    return float(np.mean(fs)) if fs else 0.0


def confusion_matrix(true: list, pred: list, classes: list) -> dict:
    """``{"classes": [...], "matrix": rows = true class, columns = predicted class}``.

    A true class outside ``classes`` (unseen in training) gets its own row(s) at the end.
    """
    extra = sorted({t for t in true if t not in classes})
    rows = list(classes) + extra
    ri = {c: i for i, c in enumerate(rows)}
    ci = {c: i for i, c in enumerate(classes)}
    m = np.zeros((len(rows), len(classes)), "int64")
    for t, p in zip(true, pred):
        m[ri[t], ci[p]] += 1
    return {"rows": rows, "columns": list(classes), "matrix": m.tolist()}


def tag_scheme(tags) -> str | None:
    """``"BIOES"``, ``"BIO"`` or ``None``: the scheme all ``tags`` follow (besides ``O``)."""
    tags = set(tags) - {"O"}
    if not tags or any(len(t) < 3 or t[1] not in "-_" for t in tags):
        return None
    prefixes = {t[0] for t in tags}
    if not prefixes <= set("BIOES"):
        return None
    return "BIOES" if prefixes & {"E", "S"} else "BIO"


def entity_scores(true_seqs: list, pred_seqs: list, scheme: str) -> dict:
    """Entity-level ``{"precision", "recall", "f1"}`` (micro) with ``seqeval``.

    Raises:
        seqkit.errors.SeqkitError: ``seqeval`` is not installed.
    """
    try:
        from seqeval.metrics import f1_score, precision_score, recall_score
        from seqeval.scheme import IOBES
    except ImportError as exc:
        raise SeqkitError("entity-level F1 needs the seqeval package: pip install seqeval") from exc
    norm = lambda seqs: [[t.replace("_", "-", 1) if t != "O" else t for t in s] for s in seqs]  # noqa: E731
    t, p = norm(true_seqs), norm(pred_seqs)
    # zero_division=0: no predicted (or no true) entity scores 0, seqeval's value, without its warning
    kw = {"mode": "strict", "scheme": IOBES, "zero_division": 0} if scheme == "BIOES" else {"zero_division": 0}
    return {"precision": float(precision_score(t, p, **kw)), "recall": float(recall_score(t, p, **kw)),
            "f1": float(f1_score(t, p, **kw))}
