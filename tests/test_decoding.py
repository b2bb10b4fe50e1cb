"""Greedy and sampling decoding on step functions with known logits."""

import numpy as np

from seqkit.data.vocab import END_ID, PAD_ID


def counting_step(tf, V=8, stop_after=5):
    """A step function whose best next token is (token + 1), and </s> (3) after ``stop_after``."""

    def step(token, states):
        nxt = tf.where(token >= stop_after, END_ID, token + 1)
        logits = tf.one_hot(nxt, V) * 5.0
        return logits, [s + 1.0 for s in states]

    return step


def test_filter_logits_temperature_and_top_k(tf):
    from seqkit.inference.decoding import filter_logits

    z = tf.constant([[1.0, 3.0, 2.0, -1.0]])
    # (z - max z) / T: the softmax of z / T, by hand: (1-3)/2, 0, (2-3)/2, (-1-3)/2
    np.testing.assert_allclose(filter_logits(z, temperature=2.0).numpy(), [[-1.0, 0.0, -0.5, -2.0]])
    out = filter_logits(z, top_k=2).numpy()
    assert out[0, 1] == 0.0 and out[0, 2] == -1.0 and np.isneginf(out[0, [0, 3]]).all()


def test_tiny_temperature_and_top_p_keep_the_most_likely_token(tf):
    """A temperature of 1e-40 (every z / T overflowed to +-inf: NaN probabilities, an id outside the
    vocabulary sampled) and a top_p that rounds to 0 in float32 both leave the arg-max alone."""
    from seqkit.inference.decoding import filter_logits

    z = tf.constant([[1.0, 3.0, 2.0, -1.0], [-5.0, -4.0, -9.0, -4.5]])
    for kwargs in ({"temperature": 1e-40}, {"top_p": 1e-300}, {"temperature": 1e-40, "top_p": 1e-300}):
        probs = tf.nn.softmax(filter_logits(z, **kwargs)).numpy()
        np.testing.assert_array_equal(probs, [[0, 1, 0, 0], [0, 1, 0, 0]])
        ids = tf.random.stateless_categorical(filter_logits(z, **kwargs), 50, seed=[1, 2]).numpy()
        assert (ids == 1).all()


def test_greedy_stops_at_end_and_pads_finished_rows(tf):
    from seqkit.inference.decoding import decode

    step = counting_step(tf, V=12, stop_after=8)
    prompt = tf.constant([[2, 5], [2, 6]], tf.int32)  # last prompt tokens 5 and 6
    toks, lens = decode(step, [tf.zeros([2, 3])], prompt, max_length=10, greedy=True)
    assert toks.numpy().tolist() == [[6, 7, 8, END_ID], [7, 8, END_ID, PAD_ID]]
    assert lens.numpy().tolist() == [3, 2]


def test_max_length_bounds_output(tf):
    from seqkit.inference.decoding import decode

    toks, lens = decode(counting_step(tf, V=40, stop_after=100), [tf.zeros([1, 1])],
                        tf.constant([[4]]), max_length=3, greedy=True)
    assert toks.numpy().tolist() == [[5, 6, 7]] and lens.numpy().tolist() == [3]


def test_prompt_is_read_before_generation(tf):
    """States pass through every prompt token: 3 prompt tokens -> 2 prefill steps."""
    from seqkit.inference.decoding import decode

    def probe(token, states):
        # the state counts steps taken; END is the best token only once two steps were taken
        end = tf.one_hot(tf.fill(tf.shape(token), END_ID), 5)
        return tf.where(states[0][:, :1] == 2.0, end, -end), [states[0] + 1.0]

    toks, _ = decode(probe, [tf.zeros([1, 1])], tf.constant([[2, 6, 7]]), max_length=4, greedy=True)
    assert toks.numpy().tolist() == [[END_ID]]


def test_sampling_is_seeded_and_top_k_1_equals_greedy(tf):
    from seqkit.inference.decoding import decode

    rng = np.random.default_rng(0)
    table = tf.constant(rng.normal(size=(12, 12)).astype("float32"))

    def step(token, states):
        return tf.gather(table, token), states

    prompt = tf.constant([[4], [7]])
    st = [tf.zeros([2, 1])]
    a, _ = decode(step, st, prompt, max_length=20, greedy=False, temperature=1.5, seed=11, stop_id=99)
    b, _ = decode(step, st, prompt, max_length=20, greedy=False, temperature=1.5, seed=11, stop_id=99)
    c, _ = decode(step, st, prompt, max_length=20, greedy=False, temperature=1.5, seed=12, stop_id=99)
    assert a.numpy().tolist() == b.numpy().tolist() != c.numpy().tolist()
    g, _ = decode(step, st, prompt, max_length=20, greedy=True, stop_id=99)
    k1, _ = decode(step, st, prompt, max_length=20, greedy=False, top_k=1, seed=5, stop_id=99)
    assert g.numpy().tolist() == k1.numpy().tolist()


def test_sampling_frequencies_follow_temperature_softmax(tf):
    """Empirical first-token frequencies match softmax(z / T) (4000 draws, 3 sigma)."""
    from seqkit.inference.decoding import decode

    z = tf.constant([[0.0, 1.0, 2.0]])

    def step(token, states):
        return tf.tile(z, [tf.shape(token)[0], 1]), states

    n = 4000
    toks, _ = decode(step, [tf.zeros([n, 1])], tf.zeros([n, 1], tf.int32), max_length=1,
                     greedy=False, temperature=2.0, seed=3, stop_id=99)
    freq = np.bincount(toks.numpy()[:, 0], minlength=3) / n
    p = np.exp(np.array([0.0, 0.5, 1.0]))
    p /= p.sum()
    assert np.all(np.abs(freq - p) < 3 * np.sqrt(p * (1 - p) / n))


def test_any_integer_seed_and_top_k(tf):
    """Seeds past int64 (a ValueError) wrap into int32 as the cast of those that fitted did; a top_k
    past int32 (an autograph ValueError) keeps every token, as any k >= V."""
    from seqkit.inference.decoding import filter_logits, int32_seed

    assert [int32_seed(s) for s in (0, 7, -5, 2**31 - 1)] == [0, 7, -5, 2**31 - 1]
    for big in (2**31, 2**40 + 3, -(2**40) - 3, 99999999999999999999999):
        assert int32_seed(big) == int(tf.cast(tf.constant(big % 2**64 - (2**64 if big % 2**64 >= 2**63 else 0),
                                                          tf.int64), tf.int32))
    z = tf.constant([[1.0, 3.0, 2.0]])
    np.testing.assert_array_equal(filter_logits(z, top_k=10**12).numpy(), filter_logits(z).numpy())


def test_the_recipe_and_the_decoder_bound_the_beam_alike():
    """decoding.beam_width is refused by the recipe schema at the width the decoder refuses
    (one number kept in two modules that cannot import each other)."""
    from seqkit.inference.decoding import MAX_BEAM_WIDTH
    from seqkit.recipe import DecodingConfig

    bound = [m.le for m in DecodingConfig.model_fields["beam_width"].metadata if hasattr(m, "le")]
    assert bound == [MAX_BEAM_WIDTH]
