"""Edit-distance figures for sequence outputs: word and phoneme error rates (G2P).

``edit_distance`` is the Levenshtein distance (Levenshtein 1966), computed by the
Wagner-Fischer recurrence (Wagner & Fischer 1974)::

    D[i][0] = i,  D[0][j] = j,
    D[i][j] = min(D[i-1][j] + 1, D[i][j-1] + 1, D[i-1][j-1] + [a_i != b_j])

For grapheme-to-phoneme conversion a word may have several reference
pronunciations (CMUdict lists alternatives); as is usual for G2P (e.g. Yao &
Zweig 2015), a word is right when the hypothesis equals *any* reference, and its
phoneme errors are counted against the *closest* reference:

    WER = words not exactly right / words
    PER = sum_w min_r edit(hyp_w, ref_{w,r}) / sum_w len(that closest ref_{w,r})
"""

from __future__ import annotations

from typing import Sequence

from seqkit.errors import SeqkitError


def edit_distance(a: Sequence, b: Sequence) -> int:
    """Levenshtein distance between two sequences (insertions, deletions, substitutions cost 1).

    Args:
        a, b: sequences of hashable symbols (strings, lists of phoneme strings, ids).

    Returns:
        The fewest single-symbol edits turning ``a`` into ``b`` (an int >= 0).
    """
    a, b = list(a), list(b)
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, start=1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def g2p_error_rates(references: Sequence[Sequence[Sequence[str]]],
                    hypotheses: Sequence[Sequence[str]]) -> dict:
    """Word and phoneme error rates over a list of words (see the module docstring).

    Args:
        references: per word, its reference pronunciations (each a list of phonemes; at least one).
        hypotheses: per word, the predicted pronunciation (a list of phonemes, possibly empty).

    Returns:
        ``{"wer": float, "per": float, "words": int, "phonemes": int, "edits": int}`` where
        ``phonemes`` and ``edits`` are summed over the closest references.

    Raises:
        SeqkitError: different numbers of words, no words, or a word without references.
    """
    if len(references) != len(hypotheses):
        raise SeqkitError(f"g2p_error_rates: {len(references)} reference entries but "
                          f"{len(hypotheses)} hypotheses; give one hypothesis per word.")
    if not references:
        raise SeqkitError("g2p_error_rates: no words to score.")
    wrong = edits = phonemes = 0
    for n, (refs, hyp) in enumerate(zip(references, hypotheses)):
        if not refs:
            raise SeqkitError(f"g2p_error_rates: word {n} has no reference pronunciation.")
        best = min((edit_distance(hyp, r), len(r)) for r in refs)
        wrong += best[0] > 0
        edits += best[0]
        phonemes += best[1]
    return {"wer": wrong / len(references), "per": edits / max(phonemes, 1),
            "words": len(references), "phonemes": phonemes, "edits": edits}
