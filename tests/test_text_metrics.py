"""BLEU / chrF through sacrebleu, with one BLEU value worked by hand."""

import math

import pytest

pytest.importorskip("sacrebleu", reason="pip install 'seqkit[text]'")


def test_bleu_by_hand_and_perfect_scores():
    """hyp "the cat the cat on the mat" vs ref "the cat is on the mat": brevity penalty 1 (7 > 6);
    clipped n-gram precisions 5/7, 3/6, 1/5 and 0/4, the last smoothed to 1/(2*4) (sacrebleu's
    ``exp`` smoothing), so BLEU = 100 * (5/7 * 1/2 * 1/5 * 1/8) ** (1/4) = 30.739."""
    from seqkit.metrics.text import bleu_chrf

    got = bleu_chrf([["the cat is on the mat"]], ["the cat the cat on the mat"])
    assert got["bleu"] == pytest.approx(100 * (5 / 7 * 1 / 2 * 1 / 5 * 1 / 8) ** 0.25, abs=1e-6)
    assert math.isclose(got["bleu"], 30.7394, abs_tol=1e-4)
    perfect = bleu_chrf([["a b c d e"], ["f g h i j", "x y"]], ["a b c d e", "f g h i j"])
    assert perfect["bleu"] == pytest.approx(100.0) and perfect["chrf"] == pytest.approx(100.0)


def test_a_repeated_reference_changes_nothing():
    from seqkit.metrics.text import bleu_chrf

    refs = [["the cat is on the mat", "a cat sat on a mat"], ["there is a dog"]]
    hyps = ["the cat sat on the mat", "there is one dog"]
    one = bleu_chrf(refs, hyps)
    two = bleu_chrf([refs[0], ["there is a dog", "there is a dog"]], hyps)
    assert one == two


def test_mismatched_counts_are_refused():
    from seqkit.errors import SeqkitError
    from seqkit.metrics.text import bleu_chrf

    with pytest.raises(SeqkitError, match="2 reference entries for 1 hypotheses"):
        bleu_chrf([["a"], ["b"]], ["a"])
