"""The fused sparse softmax cross-entropy and the metrics that share it with the loss."""

import numpy as np
import pytest


def test_cross_entropy_and_gradient_equal_tensorflow_op_including_extreme_logits(tf):
    from seqkit.training.losses import sparse_softmax_cross_entropy

    rng = np.random.default_rng(0)
    z = rng.normal(size=(3, 4, 7)).astype("float32") * 5
    z[0, 0] = [1e4, -1e4, 0, 3, 1e4, 2, 1]   # huge logits: the max is subtracted first
    z[1, 2] = 0.0                            # uniform row: log 7
    y = rng.integers(0, 7, size=(3, 4)).astype("int32")
    w = rng.normal(size=(3, 4)).astype("float32")
    zt = tf.constant(z)
    grads = []
    for f in (sparse_softmax_cross_entropy, lambda yy, zz: tf.nn.sparse_softmax_cross_entropy_with_logits(yy, zz)):
        with tf.GradientTape() as tape:
            tape.watch(zt)
            ce = f(tf.constant(y), zt)
            loss = tf.reduce_sum(ce * w)
        grads.append((ce.numpy(), tape.gradient(loss, zt).numpy()))
    (ce, g), (ce_ref, g_ref) = grads
    np.testing.assert_allclose(ce, ce_ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(g, g_ref, atol=1e-6)
    assert ce[1, 2] == pytest.approx(np.log(7), rel=1e-6)


def test_cross_entropy_metric_reuses_the_loss_and_perplexity_reads_it(tf, keras):
    from seqkit.training.losses import (MaskedAccuracy, MaskedCrossEntropy, MaskedPerplexity,
                               MaskedSparseCrossEntropy, share_cross_entropy)

    rng = np.random.default_rng(1)
    inp = keras.Input((None,), dtype="int32")
    out = keras.layers.Dense(6)(keras.layers.Embedding(6, 4)(inp))
    model = keras.Model(inp, out)
    loss, ce = MaskedSparseCrossEntropy(), MaskedCrossEntropy()
    metrics = [ce, MaskedAccuracy(), MaskedPerplexity(of=ce)]
    share_cross_entropy(loss, metrics)
    model.compile(optimizer="sgd", loss=loss, metrics=metrics)
    x = rng.integers(1, 6, size=(8, 5)).astype("int32")
    y = rng.integers(0, 6, size=(8, 5)).astype("int32")  # zeros are padding
    logits = model(x).numpy()  # before the update: what evaluate sees after one epoch of lr 0 ...
    model.optimizer.learning_rate.assign(0.0)
    logs = model.fit(x, y, batch_size=8, epochs=1, verbose=0).history
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    valid = y != 0
    nll = -np.log(np.take_along_axis(p, y[..., None], -1)[..., 0])[valid].mean()
    assert logs["cross_entropy"][0] == pytest.approx(nll, rel=1e-5)
    assert logs["perplexity"][0] == pytest.approx(np.exp(nll), rel=1e-5)
    assert logs["accuracy"][0] == pytest.approx((logits.argmax(-1) == y)[valid].mean())
    assert getattr(ce, "shared_steps", 0) >= 1  # the metric took the loss's tensor, not its own softmax


def test_accuracy_breaks_ties_and_signed_zeros_as_numpy_and_reads_bfloat16_logits_exactly(tf):
    from seqkit.training.losses import MaskedAccuracy

    # rows: a tie between classes 1 and 3 (the first wins), -0.0 before 0.0 (equal: the first
    # wins), a clear maximum, and a padded position whose arg-max is ignored
    z = np.array([[[0.0, 2.0, 1.0, 2.0], [-0.0, 0.0, -1.0, -2.0], [0.5, 0.25, 3.0, 1.0],
                   [9.0, 0.0, 0.0, 0.0]]], "float32")
    # targets (offset 1): the later tied class 3, the +0.0 class 1, the maximum class 2
    y = np.array([[4, 2, 3, 0]])
    expected = (z.argmax(-1) == y - 1)[y != 0].mean()
    assert expected == pytest.approx(1 / 3)  # keras.ops.argmax would also count the +0.0 row
    for dtype in (tf.float32, tf.bfloat16):  # these values are exact in bfloat16
        acc = MaskedAccuracy(offset=1)
        acc.update_state(tf.constant(y), tf.cast(tf.constant(z), dtype))
        assert float(acc.result()) == pytest.approx(expected)
