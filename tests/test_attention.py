"""Attention: textbook item 8, padding gets zero weight, empty sources give no NaN."""

import numpy as np
import pytest

MEMORY = np.array([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]], "float32")  # textbook item 8
WEIGHTS = [0.659, 0.242, 0.099]
CONTEXT = [0.758, 0.341]


def _same_3dp(got, printed):
    """``got`` rounded to 3 decimals equals the printed numbers (float32 rounding aside)."""
    np.testing.assert_allclose(np.round(np.asarray(got, "float64"), 3), printed, rtol=0, atol=1e-9)


def test_item8_weights_and_context_from_given_scores(tf):
    from seqkit.layers.attention import attend

    ctx, w = attend(tf.constant([[2.0, 1.0, 0.1]]), MEMORY, tf.constant([[True] * 3]))
    _same_3dp(w.numpy(), [WEIGHTS])
    _same_3dp(ctx.numpy(), [CONTEXT])


def test_item8_padding_positions_get_exactly_zero_weight(tf):
    from seqkit.layers.attention import attend

    memory = np.concatenate([MEMORY, [[[5.0, -7.0], [3.0, 3.0]]]], axis=1)  # two padding rows
    ctx, w = attend(tf.constant([[2.0, 1.0, 0.1, 9.0, 50.0]]), memory,
                    tf.constant([[True, True, True, False, False]]))
    assert w.numpy()[0, 3] == 0.0 and w.numpy()[0, 4] == 0.0
    _same_3dp(w.numpy()[0, :3], WEIGHTS)
    _same_3dp(ctx.numpy(), [CONTEXT])
    # padding scores below every valid one (the row's minimum fills them for the max): same answer
    ctx, w = attend(tf.constant([[2.0, 1.0, 0.1, -80.0, -9.0]]), memory,
                    tf.constant([[True, True, True, False, False]]))
    assert w.numpy()[0, 3] == 0.0 and w.numpy()[0, 4] == 0.0
    _same_3dp(w.numpy()[0, :3], WEIGHTS)


def _bahdanau_item8(keras):
    """A Bahdanau layer whose scores for the item-8 memory and query s = [1] are (2.0, 1.0, 0.1).

    Each of the 3 hidden units saturates tanh at +-1 (pre-activations +-20) with the sign
    pattern of one row of S = 2I - J, so e = S v and v = S^-1 e = (e - sum(e)) / 2.
    """
    from seqkit.layers.attention import BahdanauAttention

    layer = BahdanauAttention(3)
    layer.build((1, 1), (1, 3, 2))
    e = np.array([2.0, 1.0, 0.1])
    layer.query_dense.kernel.assign(np.array([[20.0, 20.0, -60.0]], "float32"))
    layer.memory_dense.kernel.assign(np.array([[0.0, -40.0, 40.0], [-40.0, 0.0, 40.0]], "float32"))
    layer.v.assign(((e - e.sum()) / 2).astype("float32"))  # (-0.55, -1.05, -1.5)
    return layer


def test_item8_through_a_bahdanau_layer_with_hand_set_weights(tf, keras):
    layer = _bahdanau_item8(keras)
    query = tf.constant([[1.0]])
    keys = layer.project_memory(MEMORY)
    np.testing.assert_allclose(layer.score(query, keys).numpy(), [[2.0, 1.0, 0.1]], atol=1e-6)
    ctx, w = layer(query, MEMORY, tf.constant([[True] * 3]))
    _same_3dp(w.numpy(), [WEIGHTS])
    _same_3dp(ctx.numpy(), [CONTEXT])
    # the same with a padding position appended: zero weight, same context
    mem = np.concatenate([MEMORY, [[[4.0, 4.0]]]], axis=1)
    ctx2, w2 = layer(query, mem, tf.constant([[True, True, True, False]]))
    assert w2.numpy()[0, 3] == 0.0
    np.testing.assert_allclose(ctx2.numpy(), ctx.numpy(), atol=1e-7)


def test_bahdanau_matches_the_formula_with_random_weights(tf):
    from seqkit.layers.attention import BahdanauAttention

    rng = np.random.default_rng(1)
    q = rng.normal(size=(2, 3)).astype("float32")
    h = rng.normal(size=(2, 4, 5)).astype("float32")
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool)
    layer = BahdanauAttention(6)
    ctx, w = layer(q, h, mask)
    W, U, v = layer.query_dense.kernel.numpy(), layer.memory_dense.kernel.numpy(), layer.v.numpy()
    e = np.tanh((q @ W)[:, None, :] + h @ U) @ v
    e = np.where(mask, e, -np.inf)
    a = np.exp(e - e.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    np.testing.assert_allclose(w.numpy(), a, atol=1e-6)
    np.testing.assert_allclose(ctx.numpy(), np.einsum("bs,bsh->bh", a, h), atol=1e-6)


def test_luong_dot_and_general_by_hand(tf):
    from seqkit.layers.attention import LuongAttention

    q = np.array([[2.0, 1.0]], "float32")
    mask = np.array([[True] * 3])
    # dot: scores h_i . q = (2, 1, 3)
    ctx, w = LuongAttention("dot")(q, MEMORY, mask)
    a = np.exp([2.0, 1.0, 3.0]) / np.exp([2.0, 1.0, 3.0]).sum()  # (0.2447, 0.0900, 0.6652)
    np.testing.assert_allclose(w.numpy(), [a], atol=1e-6)
    np.testing.assert_allclose(ctx.numpy(), [[a[0] + a[2], a[1] + a[2]]], atol=1e-6)
    # general with W_a = [[0, 1], [1, 0]] swaps the query: scores (1, 2, 3)
    g = LuongAttention("general")
    g.build(q.shape, MEMORY.shape)
    g.w_a.assign(np.array([[0.0, 1.0], [1.0, 0.0]], "float32"))
    _, w = g(q, MEMORY, mask)
    a = np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()
    np.testing.assert_allclose(w.numpy(), [a], atol=1e-6)


def test_luong_dot_refuses_different_widths(tf):
    from seqkit.errors import SeqkitError
    from seqkit.layers.attention import LuongAttention

    with pytest.raises(SeqkitError, match="general"):
        LuongAttention("dot")(np.zeros((1, 3), "float32"), MEMORY, np.ones((1, 3), bool))


@pytest.mark.parametrize("kind", ["bahdanau", "luong", "luong_dot"])
def test_zero_length_source_gives_zeros_and_finite_gradients(tf, kind):
    from seqkit.layers.attention import make_attention

    layer = make_attention(kind, 4)
    rng = np.random.default_rng(2)
    q = tf.constant(rng.normal(size=(2, 2)).astype("float32"))
    h = tf.constant(rng.normal(size=(2, 3, 2)).astype("float32"))
    mask = tf.constant([[True, True, False], [False, False, False]])  # row 1: empty source
    with tf.GradientTape() as tape:
        tape.watch([q, h])
        ctx, w = layer(q, h, mask)
        loss = tf.reduce_sum(ctx ** 2) + tf.reduce_sum(w)
    grads = tape.gradient(loss, [q, h] + layer.trainable_weights)
    assert w.numpy()[1].tolist() == [0.0, 0.0, 0.0] and ctx.numpy()[1].tolist() == [0.0, 0.0]
    assert w.numpy()[0, 2] == 0.0 and w.numpy()[0].sum() == pytest.approx(1.0, abs=1e-6)
    assert all(np.isfinite(g.numpy()).all() for g in grads if g is not None)


def test_layers_round_trip_through_keras_serialization(keras):
    from seqkit.layers.attention import BahdanauAttention, LuongAttention

    for layer in (BahdanauAttention(7, name="a"), LuongAttention("dot", name="b")):
        clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
        assert type(clone) is type(layer) and clone.get_config() == layer.get_config()
