"""BLEU (Papineni et al. 2002) and chrF (Popović 2015) of text outputs, through ``sacrebleu``
(Post 2018) with its defaults: BLEU-4 with the ``13a`` tokenizer, brevity penalty and ``exp``
smoothing; chrF with character 6-grams and beta = 2. ``sacrebleu`` is an optional dependency
(the ``text`` extra).

The optional package sacrebleu is imported where used, so seqkit works without it."""

from __future__ import annotations

from typing import Sequence

from seqkit.errors import SeqkitError


def bleu_chrf(references: Sequence[Sequence[str]], hypotheses: Sequence[str]) -> dict:
    """Corpus BLEU and chrF, on a 0-100 scale.

    Args:
        references: per item, one or more reference strings (at least one).
        hypotheses: per item, the output string.

    Returns:
        ``{"bleu": float, "chrf": float}``. Items with fewer references than the most any
        item has repeat their first one (a repeated reference changes neither BLEU's
        clipped counts nor its closest reference length, nor chrF's best reference).

    Raises:
        SeqkitError: sacrebleu is missing (with the pip command), counts differ, or an
            item has no reference.
    """
    try:
        import sacrebleu
    except ImportError as exc:
        raise SeqkitError("BLEU and chrF need the sacrebleu package: `pip install sacrebleu` "
                          "(or `pip install \"seqkit[text]\"`).") from exc
    if len(references) != len(hypotheses) or not hypotheses:
        raise SeqkitError(f"bleu_chrf: {len(references)} reference entries for {len(hypotheses)} "
                          f"hypotheses; give one entry (a list of references) per hypothesis.")
    if any(not r for r in references):
        raise SeqkitError("bleu_chrf: an item has no reference.")
    k = max(len(r) for r in references)
    streams = [[r[j] if j < len(r) else r[0] for r in references] for j in range(k)]
    return {"bleu": float(sacrebleu.corpus_bleu(list(hypotheses), streams).score),
            "chrf": float(sacrebleu.corpus_chrf(list(hypotheses), streams).score)}
