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
    from seqkit.layers import fused_rnn
    from seqkit.layers.fused_rnn import XLA_ENV, use_xla

    real_isa = fused_rnn.onednn_isa
    monkeypatch.setattr(fused_rnn, "onednn_isa", real_isa)  # restored whatever happens

    static = tf.zeros([4, 2, 8])
    dynamic = tf.TensorSpec([None, 2, 8])
    seen = {}

    @tf.function(input_signature=[dynamic])
    def probe(z):
        seen["dynamic"] = use_xla(z, True)
        seen["by isa"] = {}
        for isa in ("avx512", "avx2", "other"):
            fused_rnn.onednn_isa = lambda isa=isa: isa
            seen["by isa"][isa] = (use_xla(z, True, 128), use_xla(z, True, 64), use_xla(z, False, 512))
        fused_rnn.onednn_isa = real_isa
        return z

    monkeypatch.delenv(XLA_ENV, raising=False)
    probe.get_concrete_function()
    assert (use_xla(static, True), use_xla(static, False), use_xla(static, None), seen["dynamic"]) == \
        (True, False, False, False)
    # variable lengths: compiled (padded to a few lengths) in training, for layers of
    # XLA_MIN_UNITS or more, where oneDNN runs AVX2 kernels
    assert seen["by isa"] == {"avx512": (False, False, False), "avx2": (True, False, False),
                              "other": (False, False, False)}
    monkeypatch.setenv(XLA_ENV, "0")
    assert not use_xla(static, True)
    monkeypatch.setenv(XLA_ENV, "1")
    assert use_xla(static, False)


def test_onednn_isa(monkeypatch):
    from seqkit.layers import fused_rnn

    for var in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(fused_rnn, "_cpu_kind", lambda: "avx512")
    assert fused_rnn.onednn_isa() == "avx512"
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # bench --isa avx2
    assert fused_rnn.onednn_isa() == "avx2"
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx512_core_bf16")
    assert fused_rnn.onednn_isa() == "avx512"
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "SSE41")
    assert fused_rnn.onednn_isa() == "other"
    monkeypatch.setattr(fused_rnn, "_cpu_kind", lambda: "avx2")  # a cap cannot raise the CPU's own
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "ALL")
    assert fused_rnn.onednn_isa() == "avx2"


def test_bucket_lengths():
    from seqkit.layers.fused_rnn import BUCKETS

    assert BUCKETS[:16] == [8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256]
    # a length is padded by less than a quarter of itself beyond the first bucket
    assert all(b / a <= 1.25 for a, b in zip(BUCKETS[7:], BUCKETS[8:]))


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_padded_lengths_give_the_unpadded_results(tf, kind):
    """Variable-length batches padded to a bucket (T 9 -> 16, B 3 -> 8) for the compiled loops:
    outputs, final state and every gradient equal the graph loops' on the unpadded batch."""
    from seqkit.layers.fused_gru import gru_scan
    from seqkit.layers.fused_lstm import lstm_scan
    from seqkit.layers.fused_rnn import xla_lengths

    rng = np.random.RandomState(5)
    T, B, H = 9, 3, 5
    g = 4 if kind == "lstm" else 3
    zx = tf.constant(rng.randn(T, B, g * H).astype("float32"))
    lengths = np.array([9, 4, 1])
    m = tf.constant((np.arange(T)[:, None] < lengths[None, :]).astype("float32"))
    h0 = tf.constant(rng.randn(B, H).astype("float32") * 0.5)
    c0 = tf.constant(rng.randn(B, H).astype("float32") * 0.5)
    u = tf.constant(rng.randn(H, g * H).astype("float32") * 0.4)
    b = tf.constant(rng.randn(g * H).astype("float32") * 0.1)
    w = tf.constant(rng.randn(T, B, H).astype("float32"))
    spec = [tf.TensorSpec([None, None, g * H]), tf.TensorSpec([None, None]), tf.TensorSpec([None, H]),
            tf.TensorSpec([None, H])]
    shapes = {}

    def run(bucketed):
        @tf.function(input_signature=spec)
        def f(zx, m, h0, c0):
            with tf.GradientTape() as tape:
                tape.watch([zx, h0, c0, u, b])
                zk, mk, states, trim = (xla_lengths(zx, m, [h0, c0]) if bucketed
                                        else (zx, m, [h0, c0], None))
                if bucketed:
                    shapes["padded"] = tf.shape(zk)
                if kind == "lstm":
                    h_seq, c_last = lstm_scan(zk, mk[:, :, None], *states, u, xla=bucketed)
                    if trim is not None:
                        h_seq, (c_last,) = trim(h_seq, [c_last])
                    loss = tf.reduce_sum(h_seq * w) + tf.reduce_sum(c_last * c_last)
                    wrt = [zx, h0, c0, u]
                else:
                    h_seq = gru_scan(zk, mk[:, :, None], states[0], u, b, xla=bucketed)
                    if trim is not None:
                        h_seq, _ = trim(h_seq)
                    loss = tf.reduce_sum(h_seq * w)
                    wrt = [zx, h0, u, b]
            return [h_seq] + tape.gradient(loss, wrt) + ([tf.shape(zk)] if bucketed else [])

        return [t.numpy() for t in f(zx, m, h0, c0)]

    plain, padded = run(False), run(True)
    assert list(padded.pop()) == [16, 8, g * H]
    assert padded[0].shape == (T, B, H)
    for a, c in zip(plain, padded):
        np.testing.assert_allclose(c, a, atol=2e-5, rtol=1e-5)
    assert np.abs(plain[2]).max() > 0.1  # the state gradient is not trivially zero


@pytest.mark.parametrize("layer_name", ["FusedLSTM", "FusedGRU"])
def test_layer_trains_on_compiled_loops_with_variable_lengths(tf, monkeypatch, layer_name):
    """With ``SEQKIT_RNN_XLA=1`` a fused layer in training on a batch of unknown length runs the
    compiled loops (padded to a bucket) and gives the graph loops' outputs and gradients."""
    from seqkit.layers import fused_gru, fused_lstm, fused_rnn

    cls = getattr(fused_lstm, layer_name, None) or getattr(fused_gru, layer_name)
    layer = cls(6, return_sequences=True)
    rng = np.random.RandomState(2)
    x = rng.randn(3, 7, 4).astype("float32")
    mask = np.arange(7)[None, :] < np.array([7, 5, 2])[:, None]
    layer(x[:, :1], mask=mask[:, :1])
    seen = []
    real = fused_rnn.use_xla
    monkeypatch.setattr(fused_rnn, "use_xla", lambda *a: seen.append(real(*a)) or seen[-1])

    def run():
        @tf.function(input_signature=[tf.TensorSpec([None, None, 4]), tf.TensorSpec([None, None], tf.bool)])
        def f(x, mask):
            with tf.GradientTape() as tape:
                y = layer(x, mask=mask, training=True)
                loss = tf.reduce_sum(y * y)
            return [y] + tape.gradient(loss, layer.trainable_weights)

        return [t.numpy() for t in f(x, mask)]

    monkeypatch.delenv(fused_rnn.XLA_ENV, raising=False)
    graph = run()
    monkeypatch.setenv(fused_rnn.XLA_ENV, "1")
    compiled = run()
    assert seen == [False, True]  # auto: graph loops for unknown lengths; 1: compiled
    for a, c in zip(graph, compiled):
        np.testing.assert_allclose(c, a, atol=2e-5, rtol=1e-5)
    assert compiled[0].shape == (3, 7, 6)
