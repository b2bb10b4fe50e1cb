"""Language models over continuous text (data.layout: stream): layout, carried state,
truncated gradients, training, static and dynamic evaluation."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from conftest import make_recipe
from seqkit.data.stream import StreamData, batchify, chunk_spans, stream_chunks, token_stream
from seqkit.data.vocab import END_ID, START_ID


# ---------------------------------------------------------------- layout (no TensorFlow)

def test_batchify_and_chunks_by_hand():
    stream = np.arange(26) + 10  # 26 tokens, none of them a marker
    cols = batchify(stream, 2)
    assert cols.tolist() == [list(range(10, 23)), list(range(23, 36))]  # [B, N/B] = [2, 13]
    chunks = list(stream_chunks(cols, 4))
    # L - 1 = 12 targets per column: chunks start at 0, 4, 8, all 4 steps long
    assert [x.tolist() for x, _ in chunks] == [
        [[10, 11, 12, 13], [23, 24, 25, 26]],
        [[14, 15, 16, 17], [27, 28, 29, 30]],
        [[18, 19, 20, 21], [31, 32, 33, 34]]]
    assert [y.tolist() for _, y in chunks] == [
        [[11, 12, 13, 14], [24, 25, 26, 27]],
        [[15, 16, 17, 18], [28, 29, 30, 31]],
        [[19, 20, 21, 22], [32, 33, 34, 35]]]
    # targets are the inputs shifted by one across chunk boundaries: no token lost or repeated
    xs = np.concatenate([x for x, _ in chunks], axis=1)
    ys = np.concatenate([y for _, y in chunks], axis=1)
    assert (xs == cols[:, :-1]).all() and (ys == cols[:, 1:]).all()
    assert StreamData(cols, 4).tokens == 24 and len(StreamData(cols, 4)) == 3


def test_remainders_short_last_chunk_and_dropped_tail():
    cols = batchify(np.arange(27) + 10, 2)  # 27 mod 2 = 1: the last token (36) is dropped
    assert cols.shape == (2, 13) and cols[-1, -1] == 35
    assert chunk_spans(13, 5) == [(0, 5), (5, 5), (10, 2)]  # the last chunk is shorter
    ys = np.concatenate([y for _, y in stream_chunks(cols, 5)], axis=1)
    assert (ys == cols[:, 1:]).all()
    with pytest.raises(ValueError):
        batchify(np.arange(5), 3)


def test_token_stream_marks_lines_and_inputs_read_start():
    s = token_stream([[5, 6], [7]])
    assert s.tolist() == [END_ID, 5, 6, END_ID, 7, END_ID]  # 5 targets = (2 + 1) + (1 + 1)
    (x, y), = list(stream_chunks(batchify(s, 1), 10))
    assert x.tolist() == [[START_ID, 5, 6, START_ID, 7]] and y.tolist() == [[5, 6, END_ID, 7, END_ID]]


# ---------------------------------------------------------------- model

def _stream_model(cell, layers=1):
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import prepare

    r = recipe_from_dict(make_recipe(data={"layout": "stream", "limit": 40},
                                     model={"cell": cell, "units": 8, "embedding_dim": 6, "layers": layers}))
    prep = prepare(r)
    return prep, prep.head.build_model()


@pytest.mark.parametrize("cell,layers", [("lstm", 2), ("gru", 1), ("simple_rnn", 1)])
def test_carried_state_equals_one_pass(tf, keras, cell, layers):
    from seqkit.heads.language_model.stream import StreamRunner

    prep, model = _stream_model(cell, layers)
    runner = StreamRunner(model)
    assert len(runner.zero_states(1)) == layers * (2 if cell == "lstm" else 1)
    rng = np.random.default_rng(0)
    tokens = rng.integers(4, len(prep.vocab), size=(3, 23)).astype(np.int32)
    whole = model(tokens).numpy()  # the saved model's own forward pass, from zero states
    states, parts = runner.zero_states(3), []
    for i in range(0, 23, 5):
        logits, states = runner.forward(tf.constant(tokens[:, i:i + 5]), states)
        parts.append(logits.numpy())
    np.testing.assert_allclose(np.concatenate(parts, axis=1), whole, atol=1e-5)


def test_gradient_stops_at_chunk_boundary(tf, keras):
    from seqkit.heads.language_model.stream import StreamRunner

    prep, model = _stream_model("lstm", 2)
    runner = StreamRunner(model)
    rng = np.random.default_rng(1)
    a, b = (tf.constant(rng.integers(4, len(prep.vocab), size=(2, 6)).astype(np.int32)) for _ in range(2))

    def grad(truncate):
        with tf.GradientTape() as tape:
            emb = runner.embedding(a)
            tape.watch(emb)
            _, states = runner.forward_embedded(emb, runner.zero_states(2))
            logits, _ = runner.forward(b, states, truncate=truncate)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=b, logits=logits))
        g = tape.gradient(loss, emb)
        return np.zeros(emb.shape) if g is None else tf.convert_to_tensor(g).numpy()

    assert np.all(grad(True) == 0.0)  # chunk n+1's loss does not reach chunk n's inputs
    assert np.abs(grad(False)).max() > 0  # (control: without the cut it does)


# ---------------------------------------------------------------- train, evaluate, --dynamic

def _hashes(run):
    out = {}
    for root, _, files in os.walk(run):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[p] = hashlib.sha256(fh.read()).hexdigest()
    return out


def test_train_evaluate_and_dynamic(tmp_path, keras, monkeypatch):
    from seqkit.cli import main

    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "gamma", "delta", "tau", "sigma", "omega", "kappa"]
    lines = [" ".join(rng.choice(words, 5)) for _ in range(160)]
    repeated = "the quick brown fox jumps over the lazy dog"
    lines += [repeated] * 20  # the test block (last 10%): one line over and over
    (tmp_path / "text.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    raw = make_recipe(data={"source": "text_lines", "path": str(tmp_path / "text.txt"), "limit": None,
                            "layout": "stream", "split": {"valid": 0.1, "test": 0.1}},
                      training={"epochs": 3, "batch_size": 8, "bptt": 16, "learning_rate": 0.02},
                      evaluation={"dynamic_lr": 0.5, "dynamic_chunk": 10})
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(raw), encoding="utf-8")
    run = str(tmp_path / "run")
    cli = CliRunner()
    res = cli.invoke(main, ["train", str(recipe), "--run-dir", run, "--quiet"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    history = json.load(open(os.path.join(run, "history.json")))
    assert history[-1]["cross_entropy"] < history[0]["cross_entropy"]  # the loss falls
    metrics = json.load(open(os.path.join(run, "metrics.json")))
    # every token of the test block is scored: its 18 lines of 43 characters plus their line ends
    assert metrics["examples"]["test"] == 18
    assert metrics["test"]["tokens"] == 18 * (len(repeated) + 1)

    before = _hashes(run)
    res = cli.invoke(main, ["evaluate", run, "--json"], catch_exceptions=False)
    static = json.loads(res.output[res.output.index("{"):])
    assert static["bits_per_token"] == pytest.approx(metrics["test"]["bits_per_token"], rel=1e-6)
    res = cli.invoke(main, ["evaluate", run, "--dynamic"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "test static" in res.output and "test dynamic" in res.output
    res = cli.invoke(main, ["evaluate", run, "--dynamic", "--json"], catch_exceptions=False)
    both = json.loads(res.output[res.output.index("{"):])
    assert both["static"]["bits_per_token"] == pytest.approx(static["bits_per_token"], rel=1e-6)
    assert both["dynamic"]["bits_per_token"] < both["static"]["bits_per_token"]  # it adapts to the repeats
    assert _hashes(run) == before  # --dynamic changed no file of the run

    # Krause et al.'s RMS rule with decay: also adapts to the repeats, and changes no file either
    res = cli.invoke(main, ["evaluate", run, "--json", "--dynamic-rule", "rms", "--dynamic-lr", "0.0001",
                            "--dynamic-decay", "0.02"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rms = json.loads(res.output[res.output.index("{"):])
    assert rms["dynamic"]["rule"] == "rms" and rms["dynamic"]["decay"] == 0.02
    assert rms["dynamic"]["chunk"] == 10 and rms["dynamic"]["learning_rate"] == 0.0001
    assert rms["dynamic"]["bits_per_token"] < rms["static"]["bits_per_token"]
    cache = os.path.join(run, "dynamic_stats.npz")  # the rms statistics, kept for the next call
    after = _hashes(run)
    assert after.pop(cache) and after == before  # no other file changed or added

    # the second call reads them (seqkit.heads.language_model.dynamic_stats_cache): same figures, no recomputation
    from seqkit.heads.language_model import dynamic_eval

    calls = []
    real = dynamic_eval.gradient_stats
    monkeypatch.setattr(dynamic_eval, "gradient_stats", lambda *a, **k: calls.append(1) or real(*a, **k))
    res = cli.invoke(main, ["evaluate", run, "--json", "--dynamic-rule", "rms", "--dynamic-lr", "0.0001",
                            "--dynamic-decay", "0.02"], catch_exceptions=False)
    assert json.loads(res.output[res.output.index("{"):]) == rms and calls == []

    # a bad value: the same SeqkitError from the Python API and the CLI (exit 2, no traceback)
    from seqkit.errors import SeqkitError
    from seqkit.runs.run import Run

    for kwargs, flags in (({"dynamic_lr": 0.0}, ["--dynamic-lr", "0"]),
                          ({"dynamic_rule": "adam"}, ["--dynamic-rule", "adam"]),
                          ({"dynamic_decay": -1.0}, ["--dynamic-decay=-1"])):
        with pytest.raises(SeqkitError) as exc:
            Run(run).evaluate(**kwargs)
        res = cli.invoke(main, ["evaluate", run, *flags])
        assert res.exit_code == 2 and str(exc.value) in res.output and "Traceback" not in res.output
        assert flags[0].split("=")[0] in str(exc.value) and next(iter(kwargs)) in str(exc.value)


# ---------------------------------------------------------------- dynamic evaluation: the update rules

def test_decay_rates_and_rms_update_by_hand(tf):
    """Krause et al. 2018, Section 5: theta <- theta - eta g / (sqrt(MS) + eps) + lambda r (theta_g - theta),
    r = RMS / mean(RMS) clipped at 1 / lambda (mean: over tensors of each tensor's mean, as their code)."""
    from seqkit.heads.language_model.dynamic_eval import DynamicUpdate, decay_rates

    ms = [np.array([[1.0, 4.0], [9.0, 16.0]]), np.array([0.25])]  # RMS 1, 2, 3, 4 (mean 2.5) and 0.5
    # mean RMS (2.5 + 0.5) / 2 = 1.5; rates 2/3, 4/3, 2, 8/3 and 1/3; lambda 0.5 clips 8/3 to 2
    rates = decay_rates(ms, 0.5)
    np.testing.assert_allclose(rates[0], [[2 / 3, 4 / 3], [2.0, 2.0]])
    np.testing.assert_allclose(rates[1], [1 / 3])
    np.testing.assert_allclose(decay_rates(ms, 0.0)[0], [[2 / 3, 4 / 3], [2.0, 8 / 3]])

    rng = np.random.default_rng(0)
    theta_g = [rng.normal(size=(2, 2)), rng.normal(size=(1,))]
    theta = [t + rng.normal(size=t.shape) for t in theta_g]
    grads = [rng.normal(size=t.shape) for t in theta_g]
    eta, lam, eps = 0.01, 0.3, 1e-3
    weights = [tf.Variable(t, dtype=tf.float32) for t in theta]
    DynamicUpdate(weights, lr=eta, rule="rms", decay=lam, epsilon=eps, stats=ms, anchor=theta_g)(
        [tf.constant(g, tf.float32) for g in grads])
    for w, t, t0, g, m in zip(weights, theta, theta_g, grads, ms):
        r = np.minimum(np.sqrt(m) / 1.5, 1 / lam)
        want = t - eta * g / (np.sqrt(m) + eps) + lam * r * (t0 - t)
        np.testing.assert_allclose(w.numpy(), want, rtol=1e-5, atol=1e-6)

    # no gradient: only the decay acts, theta moves lambda * r of the way to theta_g ...
    weights = [tf.Variable(t, dtype=tf.float32) for t in theta]
    DynamicUpdate(weights, lr=eta, rule="rms", decay=lam, stats=ms, anchor=theta_g)([None, None])
    for w, t, t0, r in zip(weights, theta, theta_g, decay_rates(ms, lam)):
        np.testing.assert_allclose(w.numpy() - t, lam * r * (t0 - t), rtol=1e-5, atol=1e-6)
        assert np.all(np.abs(w.numpy() - t0) <= np.abs(t - t0) + 1e-6)  # towards theta_g, never past it
    # ... with the sgd rule, lambda of the way for every weight
    weights = [tf.Variable(t, dtype=tf.float32) for t in theta]
    DynamicUpdate(weights, lr=eta, rule="sgd", decay=lam, anchor=theta_g)([tf.zeros(t.shape) for t in theta])
    for w, t, t0 in zip(weights, theta, theta_g):
        np.testing.assert_allclose(w.numpy(), t + lam * (t0 - t), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="gradient statistics"):
        DynamicUpdate(weights, lr=eta, rule="rms")


def test_gradient_stats_and_dynamic_score_by_hand(tf, keras):
    """MS is the mean of squared chunk gradients (state carried); dynamic_score's total is chunk 1
    scored with theta_g plus chunk 2 scored with the hand-updated weights."""
    from seqkit.heads.language_model.dynamic_eval import dynamic_score, gradient_stats
    from seqkit.heads.language_model.stream import StreamRunner

    prep, model = _stream_model("lstm")
    runner = StreamRunner(model)
    weights = model.trainable_variables
    rng = np.random.default_rng(2)
    text = rng.integers(4, len(prep.vocab), size=13).astype(np.int64)  # 2 chunks of 6 inputs, one column
    data = StreamData(batchify(text, 1), 6)
    chunks = list(data)
    assert len(chunks) == 2

    def chunk_grads(x, y, states):
        with tf.GradientTape() as tape:
            logits, new = runner.forward(tf.constant(x), states)
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.constant(y), logits=logits)
            loss = tf.reduce_mean(ce)
        return [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, weights)], float(tf.reduce_sum(ce)), new

    g1, ce1, s1 = chunk_grads(*chunks[0], runner.zero_states(1))
    g2, _, _ = chunk_grads(*chunks[1], s1)
    ms = gradient_stats(model, data)
    for m, a, b in zip(ms, g1, g2):
        np.testing.assert_allclose(m, (a ** 2 + b ** 2) / 2, rtol=1e-4, atol=1e-12)

    theta_g = [w.numpy().copy() for w in weights]
    eta, lam, eps = 0.02, 0.1, 1e-4
    got = dynamic_score(model, data, lr=eta, rule="rms", decay=lam, epsilon=eps, stats=ms)
    for w, t in zip(weights, theta_g):
        assert np.array_equal(w.numpy(), t)  # restored
    # by hand: chunk 2 is scored after one step from theta_g (no decay term yet: theta = theta_g)
    for w, t, g, m in zip(weights, theta_g, g1, ms):
        w.assign(t - eta * g / (np.sqrt(m) + eps))
    _, ce2, _ = chunk_grads(*chunks[1], s1)
    for w, t in zip(weights, theta_g):
        w.assign(t)
    assert got["tokens"] == 12
    assert got["cross_entropy"] == pytest.approx((ce1 + ce2) / 12, rel=1e-5)


@pytest.mark.parametrize("model", [{}, pytest.param({"dropout": 0.2, "weight_drop": 0.3},
                                                    marks=pytest.mark.slow)])  # -m slow (suite time)
def test_resume_at_epoch_boundary_equals_straight_through(tmp_path, keras, model):
    """The carried state resets every epoch and the chunk order is fixed, so a run resumed
    after epoch 1 ends where the uninterrupted run ends; with dropout and weight dropping too
    (their masks come from seed generators reseeded from (seed, epoch) every epoch)."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    raw = make_recipe(data={"layout": "stream", "limit": 120}, training={"batch_size": 4, "bptt": 16})
    raw["model"].update(model)
    straight = train(recipe_from_dict(raw), str(tmp_path / "a"), verbose=0)
    raw["training"]["epochs"] = 1
    train(recipe_from_dict(raw), str(tmp_path / "b"), verbose=0)
    raw["training"]["epochs"] = 2
    resumed = train(recipe_from_dict(raw), str(tmp_path / "b"), resume=True, verbose=0)
    assert resumed["valid"]["cross_entropy"] == pytest.approx(straight["valid"]["cross_entropy"], abs=1e-5)


def test_steps_per_epoch_walks_on_through_the_stream():
    data = StreamData(batchify(np.arange(26) + 10, 2), 4)  # 3 chunks
    firsts = [[int(x[0, 0]) for x, _ in data.epoch_chunks(e, 2)] for e in range(3)]
    assert firsts == [[10, 14], [18, 10], [14, 18]]
    assert len(data.epoch_chunks(0, None)) == len(data.epoch_chunks(5, 9)) == 3
