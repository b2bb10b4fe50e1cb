"""Helpers for the fused-layer tests: a Keras layer and its fused twin with the same random
weights, and outputs plus every gradient under a loss that weighs each element differently."""

from __future__ import annotations


def pair(keras_cls, fused_cls, rng, units=4, width=5, **kw):
    ref, fused = keras_cls(units, **kw), fused_cls(units, **kw)
    ref.build((None, None, width))
    fused.build((None, None, width))
    fused.set_weights([w + rng.normal(size=w.shape).astype("float32") * 0.5 for w in ref.get_weights()])
    ref.set_weights(fused.get_weights())
    return ref, fused


def outputs_and_grads(tf, layer, x, mask, state):
    xt, s0 = tf.constant(x), [tf.constant(s) for s in state] if state is not None else None
    with tf.GradientTape() as tape:
        tape.watch(xt)
        if s0 is not None:
            tape.watch(s0)
        out = layer(xt, mask=None if mask is None else tf.constant(mask), initial_state=s0)
        out = out if isinstance(out, (list, tuple)) else [out]
        # a loss that weighs every output element differently, so no gradient hides behind a sum
        loss = sum(tf.reduce_sum(o * tf.reshape(tf.cos(tf.range(tf.size(o), dtype=tf.float32)), o.shape))
                   for o in out)
    grads = tape.gradient(loss, [xt] + (s0 or []) + layer.trainable_weights)
    return [o.numpy() for o in out], [g.numpy() for g in grads]


def padded_batch(rng, width=5):
    """``(x [4, 7, width], mask [4, 7])``: trailing, leading, inner and all-padding rows."""
    x = rng.normal(size=(4, 7, width)).astype("float32")
    mask = __import__("numpy").ones((4, 7), bool)
    mask[1, 5:] = False          # trailing padding
    mask[2, :2] = False          # leading padding (outputs are zeros there, states stay h0)
    mask[2, 6] = False
    mask[3, :] = False           # an all-padding row keeps its initial state
    return x, mask


def assert_equal_to_keras(tf, keras_cls, fused_cls, n_states, **kw):
    """On :func:`padded_batch` with random initial states, ``fused_cls`` gives ``keras_cls``'s
    outputs (to 1e-6) and every gradient (to 2e-6). Returns ``(fused outputs, initial states)``."""
    import numpy as np

    rng = np.random.default_rng(0)
    ref, fused = pair(keras_cls, fused_cls, rng, return_state=True, **kw)
    x, mask = padded_batch(rng)
    state = [rng.normal(size=(4, 4)).astype("float32") for _ in range(n_states)]
    (o1, g1), (o2, g2) = (outputs_and_grads(tf, L, x, mask, state) for L in (ref, fused))
    assert len(g2) == len(g1) == 1 + n_states + len(fused.trainable_weights)
    for a, b in zip(o1, o2):
        np.testing.assert_allclose(b, a, atol=1e-6)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(b, a, atol=2e-6)
    return o2, state
