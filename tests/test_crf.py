"""Linear-chain CRF (``head.crf: true``): log-partition and Viterbi against brute force by hand,
gradients against finite differences, masking (padded == unpadded, all-padding rows add 0),
batched == one-by-one decoding, and a tiny CRF tagger trained, reloaded and predicted."""

import itertools
import os

import numpy as np
import pytest

# 3 steps, 2 tags: emissions E [T, C], transitions A [C, C] (A[i, j]: i then j), start, end [C]
E = np.array([[1.0, 0.2], [0.1, 0.8], [0.5, 0.4]])
A = np.array([[0.3, -1.0], [0.6, 0.2]])
S0 = np.array([0.5, -0.3])
S1 = np.array([-0.2, 0.7])


def _score(e, y, a=A, s0=S0, s1=S1):
    return s0[y[0]] + sum(e[t, y[t]] for t in range(len(y))) + \
        sum(a[y[t - 1], y[t]] for t in range(1, len(y))) + s1[y[-1]]


def _brute(e, a=A, s0=S0, s1=S1):
    paths = list(itertools.product(range(e.shape[1]), repeat=len(e)))
    scores = np.array([_score(e, p, a, s0, s1) for p in paths])
    m = scores.max()
    return m + np.log(np.exp(scores - m).sum()), paths[int(np.argmax(scores))], dict(zip(paths, scores))


def _crf_args(tf, dt=None):
    dt = dt or tf.float64
    return [tf.constant(v, dt) for v in (A, S0, S1)]


def test_log_partition_and_viterbi_equal_brute_force_by_hand(tf):
    from seqkit.layers.crf import crf_log_likelihood, crf_log_norm, crf_viterbi
    from seqkit.runtime.viterbi import viterbi

    log_z, best, scores = _brute(E)
    assert len(scores) == 8
    e, m = tf.constant(E[None]), tf.ones([1, 3], tf.bool)
    assert float(crf_log_norm(e, m, *_crf_args(tf))[0]) == pytest.approx(log_z, abs=1e-6)
    for unroll in (False, True):
        tags, score = crf_viterbi(e, m, *_crf_args(tf), unroll=unroll)
        assert tuple(tags.numpy()[0]) == best and float(score[0]) == pytest.approx(scores[best], abs=1e-9)
    assert tuple(viterbi(E, A, S0, S1)) == best
    for y in scores:  # every path: log p = s - log Z
        ll = crf_log_likelihood(e, tf.constant([y]), m, *_crf_args(tf))
        assert float(ll[0]) == pytest.approx(scores[y] - log_z, abs=1e-9)


def test_nll_gradient_equals_finite_differences_float64(tf):
    from seqkit.layers.crf import crf_log_likelihood

    y = tf.constant([[0, 1, 1]])
    m = tf.ones([1, 3], tf.bool)
    params = [tf.Variable(v, dtype=tf.float64) for v in (E[None], A, S0, S1)]

    def nll(e, a, s0, s1):
        return -crf_log_likelihood(e, y, m, a, s0, s1)[0]

    with tf.GradientTape() as tape:
        loss = nll(*params)
    grads = tape.gradient(loss, params)
    h = 1e-6
    for k, p in enumerate(params):
        base = p.numpy()
        num = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            vals = []
            for sign in (1, -1):
                v = base.copy()
                v[idx] += sign * h
                args = [q.numpy() if j != k else v for j, q in enumerate(params)]
                vals.append(float(nll(*[tf.constant(a) for a in args])))
            num[idx] = (vals[0] - vals[1]) / (2 * h)
        np.testing.assert_allclose(grads[k].numpy(), num, atol=1e-7)


def test_padded_row_equals_unpadded_and_all_padding_row_adds_nothing(tf):
    from seqkit.layers.crf import crf_log_likelihood, crf_viterbi

    rng = np.random.default_rng(0)
    pad = np.concatenate([E, rng.normal(size=(4, 2)) * 50], 0)  # junk emissions at padding
    ep = tf.constant(np.stack([pad, pad, np.zeros_like(pad)]))
    mp = tf.constant(np.array([[1] * 3 + [0] * 4, [1] * 3 + [0] * 4, [0] * 7], bool))
    y = tf.constant([[0, 1, 0, 1, 1, 0, 1]] * 3)
    ll_alone = crf_log_likelihood(tf.constant(E[None]), y[:1, :3], tf.ones([1, 3], tf.bool), *_crf_args(tf))
    with tf.GradientTape() as tape:
        tape.watch(ep)
        ll = crf_log_likelihood(ep, y, mp, *_crf_args(tf))
        total = tf.reduce_sum(ll)
    g = tape.gradient(total, ep).numpy()
    assert float(ll[0]) == pytest.approx(float(ll_alone[0]), abs=1e-12)
    assert float(ll[2]) == 0.0 and np.isfinite(ll.numpy()).all()
    assert np.isfinite(g).all() and not g[:, 3:].any() and not g[2].any()  # padding gets no gradient
    tags, score = crf_viterbi(ep, mp, *_crf_args(tf))
    assert tuple(tags.numpy()[0]) == _brute(E)[1] + (0, 0, 0, 0)
    assert not tags.numpy()[2].any() and float(score[2]) == 0.0


def test_batched_viterbi_equals_one_by_one_on_random_lengths(tf):
    from seqkit.layers.crf import crf_viterbi
    from seqkit.runtime.viterbi import viterbi

    rng = np.random.default_rng(3)
    B, T, C = 12, 9, 5
    e = rng.normal(size=(B, T, C)).astype("float32")
    a, s0, s1 = (rng.normal(size=s).astype("float32") for s in ((C, C), (C,), (C,)))
    lengths = rng.integers(1, T + 1, size=B)
    mask = np.arange(T)[None, :] < lengths[:, None]
    for unroll in (False, True):
        tags = crf_viterbi(tf.constant(e), tf.constant(mask), a, s0, s1, unroll=unroll)[0].numpy()
        for i, n in enumerate(lengths):
            alone = crf_viterbi(tf.constant(e[i:i + 1, :n]), tf.ones([1, n], tf.bool), a, s0, s1)[0]
            np.testing.assert_array_equal(tags[i, :n], alone.numpy()[0])
            np.testing.assert_array_equal(tags[i, :n], viterbi(e[i, :n], a, s0, s1))
            assert not tags[i, n:].any()


def test_marginals_sum_to_one_and_match_brute_force(tf):
    from seqkit.layers.crf import crf_marginals

    log_z, _, scores = _brute(E)
    p = crf_marginals(tf.constant(E[None]), tf.ones([1, 3], tf.bool), *_crf_args(tf)).numpy()[0]
    want = np.zeros((3, 2))
    for y, s in scores.items():
        for t, k in enumerate(y):
            want[t, k] += np.exp(s - log_z)
    np.testing.assert_allclose(p, want, atol=1e-9)


def test_recipe_key_validated(keras):
    from seqkit.errors import SeqkitError

    from tests.seqhelp import seq_recipe

    assert seq_recipe("tagger").head_options.crf is False
    assert seq_recipe("tagger", head_opts={"crf": True}).head_options.crf is True
    with pytest.raises((SeqkitError, ValueError)):
        seq_recipe("tagger", head_opts={"crf": "maybe"})


TAG_TRAIN = "".join(["the/D dog/N runs/V\n", "a/D cat/N sleeps/V fast/R\n", "the/D cat/N runs/V\n",
                     "dog/N runs/V\n"] * 6)


@pytest.fixture(scope="module")
def crf_run(tmp_path_factory, keras):
    import yaml

    from seqkit.recipe import load_recipe
    from seqkit.training.train import train

    d = tmp_path_factory.mktemp("crf")
    (d / "train.txt").write_text(TAG_TRAIN, encoding="utf-8")
    recipe = {"name": "crf", "seed": 1,
              "data": {"source": "word_tag", "path": str(d / "train.txt"), "max_length": 8,
                       "split": {"valid": 0.2, "test": 0.2, "shuffle": True}},
              "model": {"cell": "gru", "units": 8, "embedding_dim": 6, "layers": 1},
              "head": {"type": "tagger", "crf": True},
              "training": {"epochs": 2, "batch_size": 4, "learning_rate": 0.05, "early_stopping": None}}
    (d / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    metrics = train(load_recipe(str(d / "r.yaml")), str(d / "run"), verbose=0)
    return str(d / "run"), metrics


def test_crf_tagger_trains_reloads_and_predicts_viterbi(crf_run, tf):
    from seqkit.layers.crf import CRF, CRFTaggerModel, crf_viterbi
    from seqkit.heads.sequence.predict import predict
    from seqkit.training.train import load_run

    run, metrics = crf_run
    assert np.isfinite(metrics["test"]["accuracy"]) and "per_tag" in metrics["test"]
    prep, model = load_run(run, with_data=True)
    assert isinstance(model, CRFTaggerModel) and isinstance(model.get_layer("crf"), CRF)
    assert np.abs(model.get_layer("crf").transitions.numpy()).sum() > 0  # trained, then reloaded
    recs = prep.splits["test"] + prep.splits["train"][:3]
    res = predict(prep, model, recs)
    x = np.zeros((len(recs), 8), "int32")
    for i, r in enumerate(recs):
        x[i, :len(r)] = prep.head.inputs.encode(r)
    crf = model.get_layer("crf")
    want = crf_viterbi(model(x), x != 0, crf.transitions, crf.start_transitions, crf.end_transitions)[0].numpy()
    for i, (r, out) in enumerate(zip(recs, res)):
        assert out["tags"] == [prep.head.labels.names[k] for k in want[i, :len(r)]]
        assert all(0.0 <= p <= 1.0 for p in out["probability"])
    # evaluation scores the same Viterbi paths
    ev = prep.head.evaluate(model, recs)
    hits = sum(t == p for r, o in zip(recs, res) for t, p in zip(r.tags, o["tags"]))
    assert ev["accuracy"] == pytest.approx(hits / sum(len(r) for r in recs))


def _keras_tags(model, x):
    crf = model.get_layer("crf")
    return crf.decode(model(x, training=False), x != 0).numpy()


def test_full_sequence_export_decodes_viterbi_in_graph_same_as_keras(crf_run, tmp_path, tf):
    """Keras vs SavedModel predict vs pinned-shape TFLite: the same Viterbi paths on held-out data."""
    from seqkit.export.parity import sequence_inputs
    from seqkit.export.tflite import op_names
    from seqkit.export.writer import export_run
    from seqkit.runtime.full_sequence import FullSequenceModel
    from seqkit.heads.sequence.stream import full_sequence_answers, read_stream_input
    from seqkit.training.train import load_run

    run, _ = crf_run
    out = str(tmp_path / "fs")
    report = export_run(run, out, fmt="all", full_sequence=True, batch=2, length=8, parity_examples=16)
    assert report["saved_model_predict"]["viterbi_agreement"] == 1.0
    assert report["tflite"]["viterbi_paths_equal"] == 1.0
    ops = op_names(os.path.join(out, "model.tflite"))
    assert not any(o.startswith("Flex") or o in ("CUSTOM", "DELEGATE") for o in ops)
    prep, model = load_run(run, with_data=True)
    held = prep.splits["test"] + prep.splits["valid"]
    x, lengths = sequence_inputs(prep, held, 8)
    want = _keras_tags(model, x)
    sm = tf.saved_model.load(os.path.join(out, "saved_model"))
    got_sm = sm.signatures["predict"](tokens=tf.constant(x))["tags"].numpy()
    got_tfl = FullSequenceModel(out).predict_tags([x[i, :n] for i, n in enumerate(lengths)])
    for i, n in enumerate(lengths):
        np.testing.assert_array_equal(got_sm[i, :n], want[i, :n])
        np.testing.assert_array_equal(got_tfl[i], want[i, :n])
    text = "\n".join(" ".join(r.tokens) for r in held[:3]) + "\n"
    rt = FullSequenceModel(out)
    ans = list(full_sequence_answers(rt, read_stream_input(text, "in", rt.metadata)))
    assert [a.name for a in ans[:lengths[0]]] == [prep.head.labels.names[k] for k in want[0, :lengths[0]]]


def test_step_export_streams_emissions_and_decodes_at_the_end(crf_run, tmp_path):
    from seqkit.export.parity import sequence_inputs
    from seqkit.export.writer import export_run
    from seqkit.heads.sequence.stream import read_stream_input, stream_answers
    from seqkit.runtime.streaming import StreamingModel
    from seqkit.training.train import load_run

    run, _ = crf_run
    out = str(tmp_path / "step")
    report = export_run(run, out, fmt="all", parity_examples=16)
    assert report["tflite"]["viterbi_agreement"] == 1.0 and report["saved_model"]["viterbi_agreement"] == 1.0
    prep, model = load_run(run, with_data=True)
    held = prep.splits["test"][:3]
    x, lengths = sequence_inputs(prep, held)
    want = _keras_tags(model, x)
    rt = StreamingModel(out)
    assert "crf" in rt.metadata
    ans = list(stream_answers(rt, read_stream_input("\n".join(" ".join(r.tokens) for r in held), "in",
                                                    rt.metadata)))
    for i, n in enumerate(lengths):
        assert [a.name for a in ans if a.index == i] == [prep.head.labels.names[k] for k in want[i, :n]]


@pytest.mark.parametrize("cell,bi", [("lstm", False), ("gru", True), ("simple_rnn", False)])
def test_crf_tagger_loss_and_gradients_unchanged_by_padding_for_every_cell(tf, keras, cell, bi):
    """CRF on top of any encoder: extra padding and an all-padding row change neither the
    per-token NLL nor its gradients (transitions included)."""
    from tests.seqhelp import fitted_head, seq_recipe, token_records

    keras.utils.set_random_seed(2)
    rows, tags = [list("abcde"), list("edcba"), list("aabb")], [list("NVDPN"), list("NPDVN"), list("NNVV")]
    head = fitted_head(seq_recipe("tagger", cell=cell, bi=bi, head_opts={"crf": True}),
                       token_records(rows, tags=tags))
    model = head.build_model()
    model.get_layer("crf").transitions.assign(np.random.default_rng(0).normal(size=(4, 4)))
    x = np.array([[4, 5, 6, 7], [5, 6, 0, 0]], "int32")
    y = np.array([[1, 2, 3, 4], [2, 1, 0, 0]], "int32")

    def run(x, y):
        with tf.GradientTape() as tape:
            loss = model.compute_loss(x, y, model(x))
        grads = tape.gradient(loss, model.trainable_weights)
        return float(loss), [tf.convert_to_tensor(g).numpy() for g in grads]

    l1, g1 = run(x, y)
    x2 = np.concatenate([np.pad(x, ((0, 0), (0, 5))), np.zeros((1, 9), "int32")])
    y2 = np.concatenate([np.pad(y, ((0, 0), (0, 5))), np.zeros((1, 9), "int32")])
    l2, g2 = run(x2, y2)
    assert np.isfinite(l1) and l1 == pytest.approx(l2, abs=1e-6)
    assert any(n.endswith("transitions") for n in [w.path for w in model.trainable_weights])
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_crf_frame_tagger_decodes_padded_like_alone(keras):
    from seqkit.data.records import Record

    from tests.seqhelp import fitted_head, seq_recipe

    keras.utils.set_random_seed(4)
    rng = np.random.default_rng(1)
    recs = [Record(frames=rng.normal(size=(n, 3)).astype("float32"),
                   tags=(["s", "v"] * n)[:n], where=f"row {i}") for i, n in enumerate((4, 7, 2))]
    head = fitted_head(seq_recipe("tagger", head_opts={"crf": True}), recs)
    model = head.build_model()
    model.get_layer("crf").transitions.assign([[2.0, -1.0], [0.5, 0.3]])
    together = head.decode(model, recs)
    for r, (ids, p) in zip(recs, together):
        alone_ids, alone_p = head.decode(model, [r])[0]
        np.testing.assert_array_equal(ids, alone_ids)
        np.testing.assert_allclose(p, alone_p, atol=1e-5)
        np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-5)


def test_cli_stream_of_a_crf_step_export_prints_viterbi_paths_with_a_note(crf_run, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.heads.sequence.predict import predict, read_records
    from seqkit.training.train import load_run

    run, _ = crf_run
    out = str(tmp_path / "e")
    r = CliRunner()
    res = r.invoke(main, ["export", run, "--out", out, "--parity-examples", "4"])
    assert res.exit_code == 0, res.output
    text = "the dog runs\na cat sleeps fast\ndog runs\n"
    res = r.invoke(main, ["stream", out], input=text)
    assert res.exit_code == 0, res.output
    assert "can change until its sequence ends" in res.stderr
    prep, model = load_run(run)
    want = [" ".join(f"{w}/{t}" for w, t in zip(p["tokens"], p["tags"]))
            for p in predict(prep, model, read_records(text, "-", "text", prep))]
    assert res.stdout.splitlines() == want
