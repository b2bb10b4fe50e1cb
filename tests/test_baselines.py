"""n-gram baseline: hand-worked probabilities and normalisation."""

import math

import pytest

from seqkit.metrics.baselines import NGramLM
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


def test_compressor_marginal_bits_are_the_size_difference():
    import bz2
    import lzma

    from seqkit.metrics.baselines import COMPRESSORS, marginal_compressed_bits

    train = "def f(x):\n    return x + 1\n" * 50 + "class A:\n    pass\n" * 30
    test = "def g(y):\n    return y * 2\n" * 5
    want = 8 * (len(lzma.compress((train + test).encode(), preset=9 | lzma.PRESET_EXTREME))
                - len(lzma.compress(train.encode(), preset=9 | lzma.PRESET_EXTREME)))
    assert marginal_compressed_bits(train, test, COMPRESSORS["xz -9e"]) == want
    want_bz = 8 * (len(bz2.compress((train + test).encode(), 9)) - len(bz2.compress(train.encode(), 9)))
    assert marginal_compressed_bits(train, test, COMPRESSORS["bzip2 -9"]) == want_bz
    # a text that repeats what was read costs far less than the same text read cold
    cold = 8 * len(lzma.compress(test.encode(), preset=9 | lzma.PRESET_EXTREME))
    assert marginal_compressed_bits(train, train[:len(test)], COMPRESSORS["xz -9e"]) < cold / 4


def test_compression_perplexity_by_hand(monkeypatch):
    import seqkit.metrics.baselines as b

    # the identity "compressor" spends 8 bits a byte: 2 ** 8 = 256 per character of "ab\n"
    monkeypatch.setattr(b, "COMPRESSORS", {"none": lambda data: data})
    got = b.compression_perplexities(["xyz"], {"test": ["ab"]}, {"test": 3})
    assert got == {"none": {"test": 256.0}}
    # the same 24 bits over 2 tokens: 2 ** 12
    assert b.compression_perplexities(["xyz"], {"test": ["ab"]}, {"test": 2})["none"]["test"] == 4096.0
