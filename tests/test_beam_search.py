"""Beam search invariants on tiny fixed-weight step functions, and top-p by hand."""

import math

import numpy as np
import pytest

from seqkit.data.vocab import END_ID


def tiny_rnn(seed, V=6, H=4, scale=2.0):
    """Fixed random weights of a one-layer tanh RNN language model (numpy)."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(V, H)).astype("float32"), (0.5 * rng.normal(size=(H, H))).astype("float32"),
            (scale * rng.normal(size=(H, V))).astype("float32"))


def rnn_step(tf, weights):
    """``h' = tanh(E[token] + h W)``, ``logits = h' O``: the step contract of seqkit.inference.decoding."""
    E, W, O = (tf.constant(w) for w in weights)

    def step(token, states):
        h = tf.tanh(tf.gather(E, token) + states[0] @ W)
        return h @ O, [h]

    return step


def _log_softmax(z):
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


def exhaustive(weights, first, max_length, alpha=0.0, min_length=0, stop=END_ID):
    """Every output of at most ``max_length`` tokens (ending in ``stop`` or cut off at
    ``max_length``), scored ``log P / lp(|Y|)`` with |Y| = tokens before the stop; best first."""
    E, W, O = (w.astype("float64") for w in weights)
    V, out = E.shape[0], []

    def walk(token, h, prefix, logp):
        h = np.tanh(E[token] + h @ W)
        lp = _log_softmax(h @ O)
        if len(prefix) < min_length:
            lp[stop] = -np.inf
        for v in range(V):
            if not np.isfinite(lp[v]):
                continue
            seq, total = prefix + [v], logp + lp[v]
            if v == stop or len(seq) == max_length:
                n = len(prefix) if v == stop else len(seq)
                out.append((total / ((5 + n) / 6) ** alpha, seq, n))
            else:
                walk(v, h, seq, total)

    walk(first, np.zeros(W.shape[0]), [], 0.0)
    return sorted(out, key=lambda x: -x[0])


def test_beam_width_1_equals_greedy(tf):
    from seqkit.inference.decoding import beam_search, decode

    step = rnn_step(tf, tiny_rnn(17, V=6))
    prompt = tf.constant([[2, 4], [2, 5], [2, 1], [2, 0]])
    h0 = [tf.zeros([4, 4])]
    g_tok, g_len = decode(step, h0, prompt, max_length=15, greedy=True)
    res = beam_search(step, h0, prompt, beam_width=1, max_length=15)
    g_len = g_len.numpy()
    assert (g_len < 15).any() and (g_len == 15).any()  # some rows stop, some are cut off
    assert res.tokens.numpy()[:, 0, :].tolist() == g_tok.numpy().tolist()
    assert res.lengths.numpy()[:, 0].tolist() == g_len.tolist()


def _pad(a, width):
    return np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, width - a.shape[-1])])


def test_decoding_a_batch_equals_decoding_each_item_alone(tf):
    from seqkit.inference.decoding import beam_search

    step = rnn_step(tf, tiny_rnn(5, V=8))
    prompt = np.array([[2, 4, 5], [2, 7, 7], [2, 6, 4]], "int32")
    kw = dict(beam_width=3, n_best=3, max_length=10, length_penalty=0.6)
    run = tf.function(lambda p: beam_search(step, [tf.zeros([tf.shape(p)[0], 4])], p, **kw))
    batch = run(tf.constant(prompt))
    width = batch.tokens.shape[-1]
    for b in range(3):
        one = run(tf.constant(prompt[b:b + 1]))
        assert _pad(one.tokens.numpy()[0], width).tolist() == batch.tokens.numpy()[b].tolist()
        assert one.lengths.numpy()[0].tolist() == batch.lengths.numpy()[b].tolist()
        np.testing.assert_allclose(one.scores.numpy()[0], batch.scores.numpy()[b], atol=1e-5)


@pytest.mark.parametrize("alpha,min_length", [(0.0, 0), (1.0, 0), (0.6, 1)])
def test_beam_as_wide_as_the_vocabulary_finds_the_exhaustive_best(tf, alpha, min_length):
    """max_length 2: after one step all V prefixes fit in a beam of width V, so the search is exact."""
    from seqkit.inference.decoding import beam_search

    V = 5
    weights = tiny_rnn(7, V=V, scale=1.5)
    best = exhaustive(weights, first=2, max_length=2, alpha=alpha, min_length=min_length)
    res = beam_search(rnn_step(tf, weights), [tf.zeros([1, 4])], tf.constant([[2]]), beam_width=V,
                      n_best=V, max_length=2, length_penalty=alpha, min_length=min_length)
    for i in range(V):
        score, seq, n = best[i]
        assert res.tokens.numpy()[0, i, :len(seq)].tolist() == seq
        assert res.lengths.numpy()[0, i] == n
        assert res.scores.numpy()[0, i] == pytest.approx(score, abs=1e-5)


def test_beam_holding_every_prefix_is_exact_at_length_3(tf):
    """With V = 4 and beam 16 = V^2 every length-2 prefix survives: top 5 equal exhaustive search's."""
    from seqkit.inference.decoding import beam_search

    weights = tiny_rnn(11, V=4, scale=1.2)
    best = exhaustive(weights, first=2, max_length=3, alpha=0.6)
    res = beam_search(rnn_step(tf, weights), [tf.zeros([1, 4])], tf.constant([[2]]), beam_width=16,
                      n_best=5, max_length=3, length_penalty=0.6)
    assert [s for _, s, _ in best[:5]] == [list(r[:len(s)]) for r, (_, s, _) in
                                           zip(res.tokens.numpy()[0], best[:5])]
    np.testing.assert_allclose(res.scores.numpy()[0], [s for s, _, _ in best[:5]], atol=1e-5)


def two_path_step(tf, p_short=0.55):
    """From the start: token 4 with probability p, token 5 with 1 - p; then deterministically
    4 4 </s> (3 tokens) or 5 5 5 5 5 </s> (6 tokens). Only two hypotheses exist at all."""
    V = 6
    first = np.full(V, -np.inf, "float32")
    first[4], first[5] = math.log(p_short), math.log(1 - p_short)

    def onehot_logits(tok):
        return tf.where(tf.one_hot(tok, V) > 0, 0.0, -float("inf"))

    def step(token, states):
        n = states[0][:, 0]  # tokens read so far after the start marker
        nxt = tf.where(token == 4, tf.where(n >= 3, END_ID, 4), tf.where(n >= 6, END_ID, 5))
        logits = tf.where((token == 2)[:, None], tf.constant(first)[None], onehot_logits(nxt))
        return logits, [states[0] + 1.0]

    return step


def test_length_penalty_flips_the_order_of_lengths_3_and_6(tf):
    """log P: short = log .55 = -0.598, long = log .45 = -0.799. alpha 0: short first.
    alpha 1: lp(3) = 8/6, lp(6) = 11/6 -> -0.448 < -0.436: long first (GNMT eq. 14)."""
    from seqkit.inference.decoding import beam_search

    step = two_path_step(tf)
    kw = dict(beam_width=2, n_best=2, max_length=10)
    r0 = beam_search(step, [tf.zeros([1, 1])], tf.constant([[2]]), length_penalty=0.0, **kw)
    r1 = beam_search(step, [tf.zeros([1, 1])], tf.constant([[2]]), length_penalty=1.0, **kw)
    short, long_ = [4, 4, 4, END_ID], [5] * 6 + [END_ID]
    assert r0.lengths.numpy()[0].tolist() == [3, 6] and r1.lengths.numpy()[0].tolist() == [6, 3]
    assert r0.tokens.numpy()[0, 0, :4].tolist() == short and r0.tokens.numpy()[0, 1].tolist() == long_
    assert r1.tokens.numpy()[0, 0].tolist() == long_
    np.testing.assert_allclose(r0.scores.numpy()[0], [math.log(.55), math.log(.45)], atol=1e-6)
    np.testing.assert_allclose(r1.scores.numpy()[0], [math.log(.45) * 6 / 11, math.log(.55) * 6 / 8],
                               atol=1e-6)
    np.testing.assert_allclose(r1.log_probs.numpy()[0], [math.log(.45), math.log(.55)], atol=1e-6)


def test_early_stop_waits_for_a_longer_hypothesis_that_the_penalty_favours(tf):
    """n_best 1, alpha 1: when the short path finishes (-0.448) the long one is alive at log P
    -0.799, which could still reach -0.799 / lp(10) = -0.320 > -0.448, so the search goes on."""
    from seqkit.inference.decoding import beam_search

    res = beam_search(two_path_step(tf), [tf.zeros([1, 1])], tf.constant([[2]]), beam_width=2,
                      n_best=1, max_length=10, length_penalty=1.0)
    assert res.lengths.numpy().tolist() == [[6]]


def test_min_length_forbids_an_early_stop(tf):
    from seqkit.inference.decoding import beam_search

    step = two_path_step(tf, p_short=0.9)
    res = beam_search(step, [tf.zeros([1, 1])], tf.constant([[2]]), beam_width=2, max_length=10,
                      min_length=4)
    assert res.lengths.numpy()[0, 0] == 6  # the short path would stop after 3 tokens


def attention_step(tf, weights):
    """An RNN step that reads per-example extras ``[memory [B, S, H], mask [B, S]]`` by dot attention."""
    from seqkit.layers.attention import attend

    E, W, O = (tf.constant(w) for w in weights)

    def step(token, states, extras):
        memory, mask = extras
        h = tf.tanh(tf.gather(E, token) + states[0] @ W)
        ctx, _ = attend(tf.einsum("bsh,bh->bs", memory, h), memory, mask)
        return (h + ctx) @ O, [h]

    return step


def test_batch_of_2_with_beam_3_equals_each_alone_with_memory_per_example(tf):
    """Each row's memory is repeated per beam, not mixed across the batch; a padded memory gives
    the same result as the unpadded one."""
    from seqkit.inference.decoding import beam_search

    rng = np.random.default_rng(9)
    step = attention_step(tf, tiny_rnn(3, V=7, scale=3.0))
    mem = rng.normal(size=(2, 5, 4)).astype("float32")
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]], bool)  # item 1: source of length 2
    prompt = tf.constant([[2], [2]])
    kw = dict(beam_width=3, n_best=3, max_length=8, length_penalty=0.6)
    both = beam_search(step, [tf.zeros([2, 4])], prompt, extras=[mem, mask], **kw)
    width = both.tokens.shape[-1]
    for b, s_len in ((0, 5), (1, 2)):
        one = beam_search(step, [tf.zeros([1, 4])], prompt[:1],
                          extras=[mem[b:b + 1, :s_len], mask[b:b + 1, :s_len]], **kw)
        assert _pad(one.tokens.numpy()[0], width).tolist() == both.tokens.numpy()[b].tolist()
        np.testing.assert_allclose(one.scores.numpy()[0], both.scores.numpy()[b], atol=1e-5)
    assert both.tokens.numpy()[0].tolist() != both.tokens.numpy()[1].tolist()


def test_greedy_decode_passes_extras_too(tf):
    from seqkit.inference.decoding import beam_search, decode

    step = attention_step(tf, tiny_rnn(3, V=7, scale=3.0))
    mem = np.random.default_rng(1).normal(size=(2, 3, 4)).astype("float32")
    ex = [mem, np.ones((2, 3), bool)]
    g, _ = decode(step, [tf.zeros([2, 4])], tf.constant([[2], [2]]), max_length=6, greedy=True, extras=ex)
    b = beam_search(step, [tf.zeros([2, 4])], tf.constant([[2], [2]]), beam_width=1, max_length=6, extras=ex)
    assert b.tokens.numpy()[:, 0].tolist() == g.numpy().tolist()


@pytest.mark.parametrize("kw,needle", [
    (dict(beam_width=2, n_best=3), "--n-best 2 or less"),
    (dict(beam_width=0), "positive integer"),
    (dict(beam_width=2, length_penalty=-0.5), "length penalty must be >= 0"),
    (dict(beam_width=2, min_length=20), "min length"),
])
def test_bad_beam_arguments_are_clear_errors(tf, kw, needle):
    from seqkit.inference.decoding import beam_search
    from seqkit.errors import SeqkitError

    with pytest.raises(SeqkitError, match=needle):
        beam_search(lambda t, s: None, [tf.zeros([1, 1])], tf.constant([[2]]), max_length=5, **kw)


def test_top_p_keeps_the_nucleus_by_hand(tf):
    """P = (.5, .3, .15, .05). Mass ranked above each token: (0, .5, .8, .95).
    p = .5 keeps {0}; p = .6 keeps {0, 1}; p = .85 keeps {0, 1, 2}, renormalised by .95."""
    from seqkit.inference.decoding import filter_logits

    z = tf.math.log(tf.constant([[0.15, 0.5, 0.05, 0.3]]))  # shuffled order
    kept = lambda p: np.isfinite(filter_logits(z, top_p=p).numpy()[0])  # noqa: E731
    assert kept(0.5).tolist() == [False, True, False, False]
    assert kept(0.6).tolist() == [False, True, False, True]
    assert kept(0.85).tolist() == [True, True, False, True]
    assert kept(1.0).all()
    probs = tf.nn.softmax(filter_logits(z, top_p=0.85)).numpy()[0]
    np.testing.assert_allclose(probs, [0.15 / 0.95, 0.5 / 0.95, 0.0, 0.3 / 0.95], atol=1e-6)
    # after temperature 2: P ~ sqrt(.15, .5, .05, .3) / sum = (.204, .373, .118, .289) (mass above
    # the 3rd-ranked .204 is .662 < .7): p = .7 keeps three tokens, not two
    assert kept_t(tf, z, 2.0, 0.7).tolist() == [True, True, False, True]


def kept_t(tf, z, temperature, p):
    from seqkit.inference.decoding import filter_logits

    return np.isfinite(filter_logits(z, temperature=temperature, top_p=p).numpy()[0])


def test_top_p_sampling_draws_only_from_the_nucleus_with_renormalised_frequencies(tf):
    from seqkit.inference.decoding import decode

    z = tf.math.log(tf.constant([[0.5, 0.3, 0.15, 0.05]]))

    def step(token, states):
        return tf.tile(z, [tf.shape(token)[0], 1]), states

    n = 4000
    toks, _ = decode(step, [tf.zeros([n, 1])], tf.zeros([n, 1], tf.int32), max_length=1,
                     greedy=False, top_p=0.6, seed=5, stop_id=99)
    freq = np.bincount(toks.numpy()[:, 0], minlength=4) / n
    p = np.array([0.625, 0.375, 0.0, 0.0])
    assert freq[2] == 0 and freq[3] == 0
    assert np.all(np.abs(freq - p) <= 3 * np.sqrt(p * (1 - p) / n))


def test_top_p_out_of_range_is_a_clear_error(tf):
    from seqkit.inference.decoding import filter_logits
    from seqkit.errors import SeqkitError

    with pytest.raises(SeqkitError, match="top_p must be in"):
        filter_logits(tf.zeros([1, 3]), top_p=0.0)
