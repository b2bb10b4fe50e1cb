"""Edit distance and G2P word/phoneme error rates, by hand."""

import pytest


def test_edit_distance_textbook_cases():
    from seqkit.metrics.edit_distance import edit_distance

    assert edit_distance("kitten", "sitting") == 3  # k->s, e->i, +g
    assert edit_distance("", "abc") == 3 and edit_distance("abc", "") == 3
    assert edit_distance("flaw", "lawn") == 2  # -f, +n
    assert edit_distance(["K", "AE1", "T"], ["K", "AE1", "T"]) == 0
    assert edit_distance(["K", "AE1", "T"], ["K", "AH0", "T", "S"]) == 2


def test_g2p_rates_use_the_closest_of_several_references():
    """Word 1: 'tomato' has two pronunciations; the hypothesis is the second: right, 0 edits.
    Word 2: CAT vs K AH T: 1 substitution of 3. Word 3: empty hypothesis vs D AO G: 3 deletions.
    WER = 2/3; PER = (0 + 1 + 3) / (6 + 3 + 3) = 4/12."""
    from seqkit.metrics.edit_distance import g2p_error_rates

    refs = [[["T", "AH", "M", "EY", "T", "OW"], ["T", "AH", "M", "AA", "T", "OW"]],
            [["K", "AE", "T"]],
            [["D", "AO", "G"]]]
    hyps = [["T", "AH", "M", "AA", "T", "OW"], ["K", "AH", "T"], []]
    got = g2p_error_rates(refs, hyps)
    assert got["wer"] == pytest.approx(2 / 3)
    assert got["per"] == pytest.approx(4 / 12)
    assert (got["words"], got["phonemes"], got["edits"]) == (3, 12, 4)


def test_g2p_rates_refuse_mismatched_or_empty_input():
    from seqkit.metrics.edit_distance import g2p_error_rates
    from seqkit.errors import SeqkitError

    with pytest.raises(SeqkitError, match="one hypothesis per word"):
        g2p_error_rates([[["A"]]], [])
    with pytest.raises(SeqkitError, match="no words"):
        g2p_error_rates([], [])
    with pytest.raises(SeqkitError, match="no reference"):
        g2p_error_rates([[]], [["A"]])
