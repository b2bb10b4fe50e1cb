"""n-gram baseline: hand-worked probabilities and normalisation."""

import math

import pytest

from seqkit.baselines import NGramLM
from seqkit.data.vocab import END_ID, START_ID


def test_unigram_hand_worked():
    # corpus: one sequence [4, 4, 5] -> tokens scored 4, 4, 5, </s>: c(4)=2, c(5)=1, c(</s>)=1, N=4, 3 types
    lm = NGramLM(1, vocab_size=5, discount=0.5).fit([[4, 4, 5]])
    # P(4) = (2 - .5)/4 + .5*3/4 * 1/5 = 0.375 + 0.075 = 0.45
    assert lm.prob([], 4) == pytest.approx(0.45)
    # an unseen id gets only the uniform share: .5*3/4/5 = 0.075
    assert lm.prob([], 6) == pytest.approx(0.075)


def test_bigram_hand_worked_and_backoff():
    lm = NGramLM(2, vocab_size=5, discount=0.5).fit([[4, 4, 5]])
    # history (4,): followed by 4 once and 5 once -> c(h)=2, N1+=2
    p_uni_5 = (1 - 0.5) / 4 + 0.5 * 3 / 4 / 5  # 0.2
    assert lm.prob([4], 5) == pytest.approx((1 - 0.5) / 2 + 0.5 * 2 / 2 * p_uni_5)
    # an unseen history falls through to the unigram
    assert lm.prob([7], 5) == pytest.approx(p_uni_5)


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_distribution_sums_to_one_over_vocabulary(order):
    seqs = [[4, 5, 6, 4, 5], [6, 6, 4], [5, 4, 7, 8]]
    V = 8  # predictable ids: 1 (unk), 3 (end), 4..9 -> use ids 1, 3..9
    ids = [1, 3, 4, 5, 6, 7, 8, 9]
    lm = NGramLM(order, vocab_size=V).fit(seqs)
    for hist in ([START_ID] * 4, [4, 5, 6, 4], [9, 9, 9, 9], [6, 6, 6, 4]):
        assert sum(lm.prob(hist, w) for w in ids) == pytest.approx(1.0, abs=1e-12)


def test_perplexity_counts_end_tokens():
    lm = NGramLM(1, vocab_size=4, discount=0.5).fit([[4]])
    total, count = lm.nll([[4, 4]])
    assert count == 3
    p4 = (1 - 0.5) / 2 + 0.5 * 2 / 2 / 4
    pe = p4  # </s> also seen once
    assert total == pytest.approx(-(2 * math.log(p4) + math.log(pe)))
    assert END_ID == 3
