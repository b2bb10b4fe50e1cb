"""McNemar's exact test (seqkit.metrics.significance), values worked by hand from the binomial
sum p = min(1, 2 * sum_{k <= min(b, c)} C(b + c, k) / 2^(b + c))."""

import pytest

from seqkit.metrics.significance import discordant_counts, mcnemar, mcnemar_exact


@pytest.mark.parametrize("b, c, p", [
    (1, 5, 2 * (1 + 6) / 64),            # n = 6: C(6,0) + C(6,1) = 7 -> 14/64 = 0.21875
    (5, 1, 2 * (1 + 6) / 64),            # symmetric
    (0, 6, 2 / 64),                      # 0.03125
    (2, 10, 2 * (1 + 12 + 66) / 4096),   # n = 12: 79 -> 158/4096 = 0.0385742...
    (3, 3, 1.0),                         # 2 * (1 + 6 + 15 + 20) / 64 > 1 -> 1
    (0, 0, 1.0),                         # no discordant item
    (0, 1, 1.0),                         # 2 * 1/2
])
def test_exact_mcnemar_by_hand(b, c, p):
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)


def test_many_discordant_items_stay_exact():
    """Big n in integer arithmetic: no overflow; 2 / 2^2000 rounds to the float 0.0."""
    assert mcnemar_exact(0, 2000) == 0.0
    assert mcnemar_exact(1000, 1000) == 1.0
    # b = 137, c = 105 (the previous pinyin recipe on its test split): p = 0.0461 (scipy's
    # binomtest(105, 242) gives the same to 1e-15)
    assert mcnemar_exact(137, 105) == pytest.approx(0.046064298015652, rel=1e-9)


def test_discordant_counts_and_the_dict():
    first = [True, True, False, False, True, True]
    second = [True, False, True, False, False, False]
    assert discordant_counts(first, second) == (3, 1)
    assert mcnemar(first, second) == {"first_only": 3, "second_only": 1, "p_value": 2 * (1 + 4) / 16}
    with pytest.raises(ValueError, match="unequal lengths"):
        discordant_counts([True], [True, False])
    with pytest.raises(ValueError, match=">= 0"):
        mcnemar_exact(-1, 2)
