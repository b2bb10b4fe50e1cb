"""Adaptive evaluation modes of stream language models: the continuous cache, the online n-gram and
match models, their mixture with the network (settings chosen on valid), ensembles."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from conftest import make_recipe
from seqkit.heads.language_model import adaptive as A

# ---------------------------------------------------------------- n-gram (no TensorFlow)


def _brute_counts(seq, k, t, pad):
    ctx = lambda j: tuple(seq[j - i] if j - i >= 0 else pad for i in range(1, k + 1))  # noqa: E731
    same = [j for j in range(t) if ctx(j) == ctx(t)]
    return len(same), sum(seq[j] == seq[t] for j in same), len({seq[j] for j in same})


def test_ngram_counts_equal_a_brute_force_count():
    rng = np.random.default_rng(0)
    seq = rng.integers(3, 7, size=120)  # a small alphabet: contexts repeat often
    counts = A.ngram_counts(seq, 4, pad=7)
    for k in range(5):
        c, cw, u = counts[k]
        for t in range(len(seq)):
            assert (c[t], cw[t], u[t]) == _brute_counts(list(seq), k, t, 7), (k, t)


def test_ngram_probability_by_hand():
    # a b a -> b, V = 4, D = 0.5: order 0 has c = 3, c(b) = 1, u = 2:
    # p0 = (0.5 + 0.5 * 2 * 1/4) / 3 = 0.25; order 1 (after "a"): c = 1, c(b) = 1, u = 1:
    # p1 = (0.5 + 0.5 * 1 * 0.25) / 1 = 0.625
    p = A.ngram_target_probs([1, 2, 1, 2], 3, (0, 1), vocab_size=4, discount=0.5)
    np.testing.assert_allclose(p, [[0.25, 0.625]])


def test_ngram_sums_to_one_everywhere_and_streaming_equals_whole():
    rng = np.random.default_rng(1)
    seq = np.concatenate([rng.integers(3, 12, size=80)] * 2)
    orders, V, start = (0, 1, 2, 5), 12, 30
    whole = A.ngram_target_probs(seq, start, orders, V, 0.8)
    ng = A.OnlineNGram(orders, V, 0.8)
    for t, tok in enumerate(seq):
        d = ng.distributions()
        np.testing.assert_allclose(d.sum(axis=1), 1.0, rtol=1e-12)  # every order, every position
        assert np.all(d > 0)
        if t >= start:
            np.testing.assert_allclose(d[:, tok], whole[t - start], rtol=1e-12)
        ng.update(tok)
    # the second copy is predictable from the first: order 5 is far better there than order 0
    assert A.bits(whole[-60:, 3]) < 0.5 * A.bits(whole[-60:, 0])


def test_match_model_follows_a_repeat():
    rng = np.random.default_rng(2)
    first = rng.integers(3, 40, size=200)
    seq = np.concatenate([first, first])
    p, buckets = A.match_target_probs(seq, 200, 40, min_length=5)
    # after min_length tokens of the copy, every token is predicted by the match and is a hit
    assert np.all(buckets[5:] > 0)
    assert np.all(p[5:] >= 0.5)  # a bucket's first try is 1/2, then (hits + 1) / (hits + 2)
    assert A.bits(p[5:]) < 0.3
    # the hit rate is counted online, per bucket: (hits + 1) / (tries + 2) never reaches 1
    assert np.all(p < 1.0)


# ---------------------------------------------------------------- the cache (no TensorFlow)


def _onehot_context_keys(seq, k, V):
    """Unit keys from the last k tokens (identical contexts -> identical keys, cos < 1 otherwise)."""
    h = np.zeros((len(seq), k * V))
    for t in range(len(seq)):
        for i in range(k):
            if t - i >= 0:
                h[t, i * V + seq[t - i]] = 1.0
    return h / np.sqrt(k)


def test_cache_over_an_exact_repeat_with_large_theta_drops_below_the_bound():
    rng = np.random.default_rng(3)
    V, L, k, theta, lam = 24, 150, 8, 200.0, 0.9
    first = rng.integers(3, V, size=L)
    targets = np.concatenate([first, first])
    # the key at t reads tokens up to t (the input before target t+1 in a real model): shift by one
    inputs = np.concatenate([[0], targets[:-1]])
    hidden = _onehot_context_keys(inputs, k, V)
    pc = A.cache_target_probs(hidden, targets, [theta], [2 * L], V)[(theta, 2 * L)]
    model = np.full(len(targets), 1.0 / V)  # a network that knows nothing
    # In the copy (t >= L + k), the key of t - L is identical (dot 1) and followed by the same token;
    # every other stored key differs in at least one of the k slots (8-grams of a random text over
    # 21 letters are distinct here, checked), dot <= (k - 1) / k. So the other <= 2L keys weigh at
    # most 2L * exp(-theta / k) in all against 1: p_cache >= 1 - eps, eps = 2L exp(-theta / k), and
    # p = (1 - lam) / V + lam p_cache >= lam (1 - eps): bits <= -log2(lam (1 - eps)).
    grams = {tuple(inputs[t - k + 1: t + 1]) for t in range(k, L)}
    assert len(grams) == L - k
    eps = 2 * L * math.exp(-theta / k)
    mixed = (1 - lam) * model + lam * pc
    bound = -math.log2(lam * (1 - eps))
    assert A.bits(mixed[L + k:]) <= bound
    assert A.bits(model[L + k:]) > 4.0  # (control: log2 24 = 4.58 bits without the cache)
    # and the streaming cache gives the same probabilities one position at a time
    sc = A.StreamingCache(theta, 2 * L, V)
    for t in range(len(targets)):
        d = sc.distribution(hidden[t])
        assert d.sum() == pytest.approx(1.0, rel=1e-12)
        assert d[targets[t]] == pytest.approx(pc[t], rel=1e-9, abs=1e-300)
        sc.update(hidden[t], targets[t])


def _split(name, n, V=10, H=6, seed=0, history=()):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(V), size=n)
    y = np.concatenate([rng.integers(3, V, size=n // 2)] * 2)[:n]
    y = np.concatenate([y, rng.integers(3, V, size=n - len(y))])
    return A.SplitOutputs(split=name, probs=probs, hidden=rng.normal(size=(n, H)), targets=y,
                          history=np.asarray(history, np.int64))


def test_cache_with_lambda_zero_equals_the_model():
    out = _split("test", 120)
    s = A.Settings(components=("model", "cache"), weights=((1.0, 0.0),) * A.N_BUCKETS, theta=0.5, window=50)
    model_bits = A.bits(out.probs[np.arange(120), out.targets])
    assert A.score(out, s)["bits_per_token"] == pytest.approx(model_bits, rel=1e-12)
    stream = A.AdaptiveStream(s, 10)
    for t in range(120):
        d = stream.distribution(out.probs[t], out.hidden[t])
        np.testing.assert_allclose(d, out.probs[t], rtol=1e-12)
        stream.update(out.hidden[t], out.targets[t])


@pytest.mark.parametrize("cache,ngram", [(True, False), (False, True), (True, True)])
def test_streaming_equals_whole_for_each_mode(cache, ngram):
    hist = np.random.default_rng(9).integers(3, 10, size=300)
    valid = _split("valid", 400, seed=4, history=hist)
    test = _split("test", 300, seed=5, history=hist)
    s = A.choose_settings(valid, cache=cache, ngram=ngram)
    whole = A.score(test, s)["bits_per_token"]
    stream = A.AdaptiveStream(s, 10, history=hist)
    p = np.empty(300)
    for t in range(300):
        d = stream.distribution(test.probs[t], test.hidden[t])
        assert d.sum() == pytest.approx(1.0, rel=1e-9)  # the mixture is a distribution everywhere
        p[t] = d[test.targets[t]]
        stream.update(test.hidden[t], test.targets[t])
    assert A.bits(p) == pytest.approx(whole, rel=1e-9)
    assert whole < A.bits(test.probs[np.arange(300), test.targets])  # the repeats are learned


def test_settings_are_chosen_on_valid_only():
    valid = _split("valid", 300, seed=6)
    with pytest.raises(ValueError, match="valid split"):
        A.choose_settings(_split("test", 300, seed=6), cache=True, ngram=True)
    s = A.choose_settings(valid, cache=True, ngram=True)
    assert s.theta in A.THETAS and s.window in A.WINDOWS and s.discount in A.DISCOUNTS
    w = np.asarray(s.weights)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    # EM's weights are a local optimum of valid's likelihood: the model alone does no better
    assert s.valid_bits <= A.bits(valid.probs[np.arange(300), valid.targets])


def test_em_weights_by_hand():
    # component 0 always gives 0.5; component 1 gives 1 on half the positions and 0 on the others.
    # With w1 = 1 - w0 the mean log-likelihood is 0.5 log(0.5 + 0.5 w1) + 0.5 log(0.5 - 0.5 w1)
    # = 0.5 log(0.25 (1 - w1^2)), largest at w1 = 0; EM's step w1 <- w1 / (1 + w1) gets within
    # 1/500 of it in 500 steps.
    probs = np.array([[0.5, 1.0], [0.5, 0.0]] * 100)
    w = A.fit_weights(probs, np.zeros(200, int), iterations=500)
    np.testing.assert_allclose(w[0], [1.0, 0.0], atol=2.5e-3)


# ---------------------------------------------------------------- the network's side (tiny models)


def _stream_model(layers=2):
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import prepare

    r = recipe_from_dict(make_recipe(data={"layout": "stream", "limit": 40},
                                     model={"units": 8, "embedding_dim": 6, "layers": layers}))
    prep = prepare(r)
    return prep, prep.head.build_model()


def test_network_outputs_whole_equal_one_token_at_a_time_and_the_scorers(tf, keras):
    from seqkit.heads.language_model.adaptive_eval import network_outputs
    from seqkit.heads.language_model.dynamic_eval import dynamic_score
    from seqkit.heads.language_model.stream import score_stream

    prep, model = _stream_model()
    recs = prep.splits["valid"]
    whole = network_outputs(model, prep.head.stream_data(recs, columns=1, bptt=32))
    single = network_outputs(model, prep.head.stream_data(recs, columns=1, bptt=1))
    for a, b in zip(whole, single):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    probs, hidden, y = whole
    assert hidden.shape == (len(y), 8) and probs.shape == (len(y), len(prep.vocab))
    static = score_stream(model, prep.head.stream_data(recs, columns=1, bptt=32))
    assert A.bits(probs[np.arange(len(y)), y]) == pytest.approx(static["bits_per_token"], rel=1e-5)
    before = [w.numpy().copy() for w in model.trainable_variables]
    dyn = dict(lr=0.5, rule="sgd", decay=0.0, epsilon=1e-5, stats=None)
    p_dyn, _, y_dyn = network_outputs(model, prep.head.stream_data(recs, columns=1, bptt=10), dynamic=dyn)
    for w, v in zip(model.trainable_variables, before):  # the weights are restored
        np.testing.assert_array_equal(w.numpy(), v)
    ref = dynamic_score(model, prep.head.stream_data(recs, columns=1, bptt=10), lr=0.5)
    assert A.bits(p_dyn[np.arange(len(y_dyn)), y_dyn]) == pytest.approx(ref["bits_per_token"], rel=1e-5)


def test_evaluate_adaptive_chooses_on_valid_without_seeing_test(tf, keras, monkeypatch):
    from seqkit.data.records import Record
    from seqkit.heads.language_model import adaptive_eval

    prep, model = _stream_model(layers=1)
    seen = []
    real = A.choose_settings
    monkeypatch.setattr(A, "choose_settings", lambda valid, **k: seen.append(valid) or real(valid, **k))
    kw = dict(valid_records=prep.splits["valid"], train_records=prep.splits["train"], split="test",
              cache=True, mix=True)
    test = prep.splits["test"]
    first = adaptive_eval.evaluate_adaptive(prep.head, [(model, None)], test, **kw)
    other = [Record(text=r.text[::-1]) for r in test]  # a different test block
    second = adaptive_eval.evaluate_adaptive(prep.head, [(model, None)], other, **kw)
    n_valid = len(prep.head.stream_data(prep.splits["valid"], columns=1).columns[0]) - 1
    assert seen and all(v.split == "valid" and len(v.targets) == n_valid for v in seen)
    for label in ("static+cache", "static+ngram", "static+cache+ngram"):
        assert first[label]["settings"] == second[label]["settings"]  # test text changed nothing
        assert first[label]["tokens"] == first["static"]["tokens"]
    assert first["static+cache+ngram"]["bits_per_token"] != second["static+cache+ngram"]["bits_per_token"]


def test_cli_and_api_modes_ensemble_and_errors(tmp_path, keras):
    from seqkit.cli import main
    from seqkit.errors import SeqkitError
    from seqkit.runs.run import Run

    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "gamma", "delta", "tau", "sigma", "omega", "kappa"]
    lines = [" ".join(rng.choice(words, 6)) for _ in range(120)]
    lines += lines[20:40] + lines[60:80]  # valid and test: lines of the training text again
    (tmp_path / "text.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    raw = make_recipe(data={"source": "text_lines", "path": str(tmp_path / "text.txt"), "limit": None,
                            "layout": "stream", "split": {"valid": 40 / 160, "test": 20 / 160}},
                      training={"epochs": 1, "batch_size": 8, "bptt": 16, "learning_rate": 0.02},
                      evaluation={"dynamic_lr": 0.5, "dynamic_chunk": 10})
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(raw), encoding="utf-8")
    cli = CliRunner()
    runs = [str(tmp_path / f"run{s}") for s in (1, 2)]
    for s, run in zip((1, 2), runs):
        res = cli.invoke(main, ["train", str(recipe), "--run-dir", run, "--set", f"seed={s}", "--quiet"],
                         catch_exceptions=False)
        assert res.exit_code == 0, res.output
    res = cli.invoke(main, ["evaluate", runs[0], "--cache", "--mix", "--dynamic", "--ensemble", runs[1],
                            "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output[res.output.index("{"):])
    labels = {"static+ensemble", "static+ensemble+cache", "static+ensemble+ngram",
              "static+ensemble+cache+ngram", "dynamic+ensemble", "dynamic+ensemble+cache+ngram"}
    assert labels <= set(rep)
    # the test lines repeat training lines word for word: the n-gram / match mixture copies them
    assert rep["static+ensemble+ngram"]["bits_per_token"] < 0.8 * rep["static+ensemble"]["bits_per_token"]
    # the API gives the same figures
    api = Run(runs[0]).evaluate(mix=True)
    assert api["static+ngram"]["settings"]["components"][0] == "model"
    res = cli.invoke(main, ["evaluate", runs[0], "--mix"], catch_exceptions=False)
    assert "test static+ngram" in res.output and "chosen on valid" in res.output
    line = [x for x in res.output.splitlines() if x.startswith("test static+ngram")][0]
    assert f"{api['static+ngram']['bits_per_token']:.4f}" in line
    # errors: the same one paragraph from the API and the CLI
    for kwargs, flags in (({"ensemble": [runs[0]]}, ["--ensemble", runs[0]]),):
        with pytest.raises(SeqkitError) as exc:
            Run(runs[0]).evaluate(**kwargs)
        res = cli.invoke(main, ["evaluate", runs[0], *flags])
        assert res.exit_code != 0 and str(exc.value) in res.output and "Traceback" not in res.output


def test_compressor_rows_mark_absent_binaries_and_run_present_ones(tmp_path, monkeypatch):
    from seqkit.metrics.baselines import compressor_bits

    monkeypatch.setenv("PATH", str(tmp_path))  # neither zpaq nor 7z
    rows = compressor_bits("abc abc abc\n" * 50, "abc abc\n", 8)
    assert rows["zpaq -m5"].startswith("absent") and rows["PPMd order 8"].startswith("absent")
    assert isinstance(rows["xz -9e"], float) and isinstance(rows["zlib -9"], float)
    # a stand-in zpaq that stores its input verbatim: the marginal size is the held-out text's bytes
    fake = tmp_path / "zpaq"
    fake.write_text('#!/bin/sh\n/bin/cp "$3" "$2"\n', encoding="utf-8")
    fake.chmod(0o755)
    rows = compressor_bits("abc abc abc\n" * 50, "abc abc\n", 8)
    assert rows["zpaq -m5"] == 8.0  # 8 bytes of 8 bits over 8 tokens


def test_online_weights_by_hand():
    # one bucket, weights (0.5, 0.5), rate 0.1; position 0: probs (0.2, 0.6) -> mixed 0.4, then
    # responsibilities (0.25, 0.75): w = 0.9 (0.5, 0.5) + 0.1 (0.25, 0.75) = (0.475, 0.525);
    # position 1: probs (1.0, 0.0) -> mixed 0.475
    probs = np.array([[0.2, 0.6], [1.0, 0.0]])
    w = np.full((A.N_BUCKETS, 2), 0.5)
    np.testing.assert_allclose(A.online_mixed_probs(probs, [0, 0], w, 0.1), [0.4, 0.475])
    np.testing.assert_allclose(A.online_mixed_probs(probs, [0, 0], w, 0.0), [0.4, 0.5])
    assert np.all(w == 0.5)  # the given weights are not changed


def test_streaming_equals_whole_with_online_weights():
    hist = np.random.default_rng(9).integers(3, 10, size=300)
    valid = _split("valid", 400, seed=4, history=hist)
    test = _split("test", 300, seed=5, history=hist)
    s = dataclasses.replace(A.choose_settings(valid, cache=True, ngram=True), rate=0.03)
    whole = A.score(test, s)["bits_per_token"]
    stream = A.AdaptiveStream(s, 10, history=hist)
    p = np.empty(300)
    for t in range(300):
        p[t] = stream.distribution(test.probs[t], test.hidden[t])[test.targets[t]]
        stream.update(test.hidden[t], test.targets[t])
    assert A.bits(p) == pytest.approx(whole, rel=1e-9)
    assert whole != A.score(test, dataclasses.replace(s, rate=0.0))["bits_per_token"]
