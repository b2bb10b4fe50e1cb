"""The fused LSTM/GRU loops compiled by XLA (seqkit/layers/fused_rnn.py ``use_xla``) give the
graph loops' outputs and gradients, with padding, and the policy picks them only in training
with static shapes."""

from __future__ import annotations

import numpy as np
import pytest


def _run(tf, kind, xla):
    from seqkit.layers.fused_gru import gru_scan
    from seqkit.layers.fused_lstm import lstm_scan

    rng = np.random.RandomState(3)
    T, B, H = 9, 3, 5
    g = 4 if kind == "lstm" else 3
    zx = tf.constant(rng.randn(T, B, g * H).astype("float32"))
    lengths = np.array([9, 4, 1])
    mask = tf.constant((np.arange(T)[:, None] < lengths[None, :]).astype("float32")[:, :, None])
    h0 = tf.constant(rng.randn(B, H).astype("float32") * 0.5)
    c0 = tf.constant(rng.randn(B, H).astype("float32") * 0.5)
    u = tf.constant(rng.randn(H, g * H).astype("float32") * 0.4)
    b = tf.constant(rng.randn(g * H).astype("float32") * 0.1)
    w = tf.constant(rng.randn(T, B, H).astype("float32"))

    @tf.function
    def f():
        with tf.GradientTape() as tape:
            tape.watch([zx, h0, c0, u, b])
            if kind == "lstm":
                h_seq, c_last = lstm_scan(zx, mask, h0, c0, u, xla=xla)
                loss = tf.reduce_sum(h_seq * w) + tf.reduce_sum(c_last * c_last)
                wrt = [zx, h0, c0, u]
            else:
                h_seq = gru_scan(zx, mask, h0, u, b, xla=xla)
                loss = tf.reduce_sum(h_seq * w)
                wrt = [zx, h0, u, b]
        return [h_seq] + tape.gradient(loss, wrt)

    return [t.numpy() for t in f()]


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_compiled_loops_equal_graph_loops(tf, kind):
    graph, compiled = _run(tf, kind, False), _run(tf, kind, True)
    for a, c in zip(graph, compiled):
        np.testing.assert_allclose(c, a, atol=2e-5, rtol=1e-5)
    assert np.abs(graph[1]).max() > 0.1  # the gradients are not trivially zero


def test_policy(tf, monkeypatch):
    from seqkit.layers.fused_rnn import XLA_ENV, use_xla

    static = tf.zeros([4, 2, 8])
    dynamic = tf.TensorSpec([None, 2, 8])
    seen = {}

    @tf.function(input_signature=[dynamic])
    def probe(z):
        seen["dynamic"] = use_xla(z, True)
        return z

    monkeypatch.delenv(XLA_ENV, raising=False)
    probe.get_concrete_function()
    assert (use_xla(static, True), use_xla(static, False), use_xla(static, None), seen["dynamic"]) == \
        (True, False, False, False)
    monkeypatch.setenv(XLA_ENV, "0")
    assert not use_xla(static, True)
    monkeypatch.setenv(XLA_ENV, "1")
    assert use_xla(static, False)
