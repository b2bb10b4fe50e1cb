"""Gradient flow through time, gate statistics, and the pictures (diagnose, plot,
evaluate --out), checked by hand on scalar cells and against direct computations."""

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from tests.conftest import make_recipe

TAGS = "".join(["the/D dog/N runs/V\n", "a/D cat/N sleeps/V\n", "the/D cat/N runs/V\n"] * 6)


def _scalar_rnn(keras, w, activation="tanh"):
    cell = keras.layers.SimpleRNNCell(1, activation=activation)
    cell.build((None, 1))
    cell.kernel.assign([[1.0]])
    cell.recurrent_kernel.assign([[w]])
    cell.bias.assign([0.0])
    return cell


def test_tanh_rnn_jacobians_by_hand(keras):
    from seqkit.diagnostics.diagnose import state_jacobian_norms

    # h1 = tanh(1), h2 = tanh(0.5 h1 + 0.5), h3 = tanh(0.5 h2 - 1); dh_t/dh_{t-1} = 0.5 (1 - h_t^2)
    j = state_jacobian_norms(_scalar_rnn(keras, 0.5), np.array([[[1.0], [0.5], [-1.0]]]))
    assert round(j[2, 1], 4) == 0.3379  # dh3/dh2
    assert round(j[1, 1], 4) == 0.2502  # dh2/dh1
    assert round(j[2, 2], 4) == 0.0845  # dh3/dh1
    assert np.allclose(j[:, 0], 1.0) and np.isnan(j[0, 1]) and np.isnan(j[1, 2])


def test_linear_rnn_gives_powers_of_w(keras):
    from seqkit.diagnostics.diagnose import average_by_lag, horizon, state_jacobian_norms

    x = np.random.default_rng(0).normal(size=(3, 6, 1))
    j = state_jacobian_norms(_scalar_rnn(keras, -0.3, activation="linear"), x)
    np.testing.assert_allclose(average_by_lag(j), 0.3 ** np.arange(6), rtol=1e-6)
    assert horizon(0.3 ** np.arange(10)) == 6  # 0.3^6 = 7.3e-4 < 1e-3 < 0.3^5
    assert horizon([1.0, 0.5]) is None


def _lstm_cell(keras, units=3, dim=2, forget_bias=0.0):
    cell = keras.layers.LSTMCell(units)
    cell.build((None, dim))
    rng = np.random.default_rng(1)
    cell.kernel.assign(rng.normal(size=cell.kernel.shape) * 0.5)
    cell.recurrent_kernel.assign(rng.normal(size=cell.recurrent_kernel.shape) * 0.5)
    b = rng.normal(size=4 * units) * 0.1
    b[units:2 * units] = forget_bias
    cell.bias.assign(b)
    return cell


def test_forget_bias_20_saturates_every_forget_unit(keras):
    from seqkit.cells.base import CellSpec
    from seqkit.cells.lstm import LSTMPlugin
    from seqkit.diagnostics.diagnose import cell_gate_statistics

    cell = _lstm_cell(keras, forget_bias=20.0)
    x = np.random.default_rng(2).normal(size=(4, 7, 2)).astype("float32")
    valid = np.ones((4, 7), bool)
    valid[0, 5:] = False
    st = cell_gate_statistics(LSTMPlugin(CellSpec(units=3)), [cell], x, valid)
    f = st["layers"][0]["forget"]
    assert f["above"] == 1.0 and f["unit_above"] == [1.0, 1.0, 1.0] and f["saturated"] == 1.0
    assert f["count"] == 3 * (4 * 7 - 2) and abs(sum(f["histogram"]) - 1.0) < 1e-9
    assert set(st["layers"][0]) == {"input", "forget", "output"}


def test_gate_hooks_reproduce_the_keras_cells(keras):
    """The gates the hooks return rebuild the cells' own outputs (LSTM c and h, GRU h)."""
    from seqkit.cells.base import CellSpec
    from seqkit.cells.gru import GRUPlugin
    from seqkit.cells.lstm import LSTMPlugin

    rng = np.random.default_rng(3)
    x = rng.normal(size=(5, 2)).astype("float32")
    h, c = (rng.normal(size=(5, 3)).astype("float32") for _ in range(2))
    cell = _lstm_cell(keras)
    g = LSTMPlugin(CellSpec(units=3)).gates(cell, x, [h, c])
    zc = (x @ np.asarray(cell.kernel) + h @ np.asarray(cell.recurrent_kernel) + np.asarray(cell.bias))[:, 6:9]
    c_new = np.asarray(g["forget"]) * c + np.asarray(g["input"]) * np.tanh(zc)
    out, (h1, c1) = cell(x, [h, c])
    np.testing.assert_allclose(np.asarray(c1), c_new, atol=1e-5)
    np.testing.assert_allclose(np.asarray(h1), np.asarray(g["output"]) * np.tanh(c_new), atol=1e-5)

    gru = keras.layers.GRUCell(3)
    gru.build((None, 2))
    gru.bias.assign(rng.normal(size=gru.bias.shape))
    g = GRUPlugin(CellSpec(units=3)).gates(gru, x, [h])
    k, u, b = (np.asarray(v) for v in (gru.kernel, gru.recurrent_kernel, gru.bias))
    hh = np.tanh(x @ k[:, 6:] + b[0, 6:] + np.asarray(g["reset"]) * (h @ u[:, 6:] + b[1, 6:]))
    z = np.asarray(g["update"])
    out, _ = gru(x, [h])
    np.testing.assert_allclose(np.asarray(out), z * h + (1 - z) * hh, atol=1e-5)


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory, keras):
    import yaml

    from seqkit.cli import main

    d = tmp_path_factory.mktemp("diag")
    recipe = d / "lm.yaml"
    recipe.write_text(yaml.safe_dump(make_recipe(data={"limit": 120}, model={"units": 8},
                                                 training={"epochs": 2})))
    res = CliRunner().invoke(main, ["train", str(recipe), "--run-dir", str(d / "run"), "--quiet"])
    assert res.exit_code == 0, res.output
    return d / "run"


def test_diagnose_writes_png_and_json_matching_a_direct_computation(lm_run, tmp_path, keras):
    import tensorflow as tf

    from seqkit.cli import main
    from seqkit.training.train import load_run

    out = tmp_path / "diag"
    res = CliRunner().invoke(main, ["diagnose", str(lm_run), "--out", str(out), "--max-lag", "6",
                                    "--examples", "4", "--positions", "1000"])
    assert res.exit_code == 0, res.output
    assert "gradient horizon" in res.output and "forget gate" in res.output
    assert os.path.getsize(out / "diagnose.png") > 1000
    data = json.load(open(out / "diagnose.json"))
    [run] = data["runs"]
    curves = {c["state"]: c for c in run["gradient_flow"]["curves"]}
    assert set(curves) == {"h", "c"} and len(curves["h"]["norm"]) == 7

    # k = 0 by hand: dL_t/dh_t = W_logits (softmax(logits_t) - onehot(y_t)), over every target step
    prep, model = load_run(str(lm_run), with_data=True)
    hid = keras.Model(model.inputs, model.get_layer("rnn_0").output)
    w = np.asarray(model.get_layer("logits").kernel)
    norms = []
    for x, y in prep.head.dataset(prep.splits["test"][:4], training=False):
        h = np.asarray(hid(x, training=False))
        p = np.asarray(tf.nn.softmax(model.get_layer("logits")(h), axis=-1))
        y = np.asarray(y)
        for b, t in zip(*np.nonzero(y > 0)):
            g = p[b, t].copy()
            g[y[b, t]] -= 1.0
            norms.append(np.linalg.norm(w @ g))
    assert curves["h"]["rows"][0] == len(norms)
    np.testing.assert_allclose(curves["h"]["norm"][0], np.mean(norms), rtol=1e-4)
    gates = run["gates"]["layers"][0]
    assert set(gates) == {"input", "forget", "output"} and 0 < gates["forget"]["mean"] < 1


def test_plot_draws_history_curves(lm_run, tmp_path):
    from seqkit.cli import main

    out = tmp_path / "curves.png"
    res = CliRunner().invoke(main, ["plot", str(lm_run), str(lm_run), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert os.path.getsize(out) > 1000
    data = json.load(open(tmp_path / "curves.json"))
    hist = json.load(open(lm_run / "history.json"))
    series = data["runs"][str(lm_run)]["series"]
    assert data["runs"][str(lm_run)]["epoch"] == [1, 2]
    assert series["val_loss"] == [row["val_loss"] for row in hist]
    res = CliRunner().invoke(main, ["plot", str(tmp_path), "--out", str(out)])
    assert res.exit_code == 2 and "history.json: no such file" in res.output


def test_confusion_matrix_png_for_a_tagger(tmp_path, keras):
    import yaml

    from seqkit.cli import main

    (tmp_path / "train.txt").write_text(TAGS, encoding="utf-8")
    recipe = {"name": "tiny-tagger", "seed": 1,
              "data": {"source": "word_tag", "path": "train.txt", "max_length": 4,
                       "split": {"valid": 0.2, "test": 0.2, "shuffle": True}},
              "model": {"units": 8, "embedding_dim": 8},
              "head": {"type": "tagger"},
              "training": {"epochs": 1, "batch_size": 4, "learning_rate": 0.05, "early_stopping": None}}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    run = tmp_path / "run"
    res = CliRunner().invoke(main, ["train", str(tmp_path / "r.yaml"), "--run-dir", str(run), "--quiet"])
    assert res.exit_code == 0, res.output
    cm = tmp_path / "cm.png"
    res = CliRunner().invoke(main, ["evaluate", str(run), "--confusion-matrix", "--out", str(cm)])
    assert res.exit_code == 0, res.output
    assert "confusion matrix (rows true, columns predicted)" in res.output  # the text stays
    assert os.path.getsize(cm) > 1000
    data = json.load(open(tmp_path / "cm.json"))
    js = json.loads(CliRunner().invoke(main, ["evaluate", str(run), "--json",
                                              "--confusion-matrix"]).output)
    assert data["counts"] == js["confusion_matrix"]["matrix"]
    for row, counts in zip(data["normalized"], data["counts"]):
        assert abs(sum(row) - (1.0 if sum(counts) else 0.0)) < 1e-9

    from seqkit.diagnostics.diagnose import gradient_flow  # the tagger's per-step loss path
    from seqkit.training.train import load_run

    prep, model = load_run(str(run), with_data=True)
    [h, c] = gradient_flow(prep, model, max_lag=3)["curves"]
    assert (h["state"], c["state"]) == ("h", "c") and h["rows"][0] > h["rows"][3] >= 0
    assert h["norm"][0] > 0


def test_plugin_heads_and_unnamed_bidirectional_layers_are_refused():
    from types import SimpleNamespace

    from seqkit.diagnostics.diagnose import gradient_flow
    from seqkit.errors import SeqkitError
    from seqkit.heads.tagger.head import TaggerHead

    prep = SimpleNamespace(head=object(), recipe=SimpleNamespace(head=SimpleNamespace(type="plugin")))
    with pytest.raises(SeqkitError, match="this run's head is 'plugin'"):
        gradient_flow(prep, None)
    tagger = TaggerHead.__new__(TaggerHead)
    prep = SimpleNamespace(head=tagger, recipe=SimpleNamespace(head=SimpleNamespace(type="tagger"),
                                                               model=SimpleNamespace(bidirectional=True)))
    import keras

    inp = keras.Input((None, 2))
    with pytest.raises(SeqkitError, match="no layers named rnn_bi_0"):
        gradient_flow(prep, keras.Model(inp, keras.layers.Dense(1)(inp)))


def test_backward_direction_lag_k_is_w_to_the_k_and_ignores_padding(keras):
    """Bidirectional linear SimpleRNN(1), backward recurrent weight w: the backward state at
    position t depends on the one at t + k (computed k backward steps earlier) by w^k; the
    unrolled path equals the Keras layer on a right-padded batch."""
    import tensorflow as tf

    from seqkit.diagnostics.diagnose import unroll_bidirectional

    w_f, w_b = 0.9, -0.5
    inp = keras.Input((None, 1))
    masked = keras.layers.Masking(0.0)(inp)
    bi = keras.layers.Bidirectional(keras.layers.SimpleRNN(1, activation="linear", return_sequences=True))
    model = keras.Model(inp, bi(masked))
    for cell, w in ((bi.forward_layer.cell, w_f), (bi.backward_layer.cell, w_b)):
        cell.kernel.assign([[1.0]])
        cell.recurrent_kernel.assign([[w]])
        cell.bias.assign([0.0])
    x = np.zeros((2, 6, 1), np.float32)
    x[0, :6, 0] = [1.0, 2.0, -1.0, 0.5, 3.0, 1.5]
    x[1, :4, 0] = [0.3, -2.0, 1.0, 2.5]  # 2 padding steps
    valid = x[:, :, 0] != 0
    with tf.GradientTape(persistent=True) as tape:
        out, [(fwd, bwd)] = unroll_bidirectional([(bi.forward_layer.cell, bi.backward_layer.cell)], x, valid)
    ref = np.asarray(model(x))
    np.testing.assert_allclose(np.asarray(out)[valid], ref[valid], atol=1e-6)
    n = valid.sum(axis=1)
    for r in range(2):
        t = 1
        own = n[r] - 1 - t  # the backward cell's own step at position t
        for k in range(n[r] - t):
            g = tape.gradient(bwd[own][0], bwd[own - k][0])  # state at position t + k (rows independent)
            np.testing.assert_allclose(np.asarray(g)[r, 0], w_b ** k, rtol=1e-6)
        for k in range(t + 1):
            g = tape.gradient(fwd[t][0], fwd[t - k][0])
            np.testing.assert_allclose(np.asarray(g)[r, 0], w_f ** k, rtol=1e-6)
    # the backward state at the last valid position of the padded row read its input first
    np.testing.assert_allclose(np.asarray(bwd[0][0])[1, 0], 2.5, rtol=1e-6)
    del tape


def _bidi_run(tmp_path, head):
    import yaml

    from seqkit.cli import main

    if head == "tagger":
        (tmp_path / "train.txt").write_text(TAGS, encoding="utf-8")
        data = {"source": "word_tag", "path": "train.txt", "max_length": 4}
        head_cfg = {"type": "tagger"}
    else:
        lines = ["ab ab ab\tx", "ba ba\ty", "ab ba ab ba\tx", "ba\ty", "ab ab\tx", "ba ab ba\ty"] * 4
        (tmp_path / "d.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        data = {"source": "tsv_text_label", "path": "d.tsv", "tokenizer": "whitespace", "max_length": 8}
        head_cfg = {"type": "acceptor"}
    data["split"] = {"valid": 0.25, "test": 0.25, "shuffle": True}
    recipe = {"name": f"bi-{head}", "seed": 1, "data": data, "head": head_cfg,
              "model": {"cell": "lstm", "units": 4, "embedding_dim": 4, "bidirectional": True},
              "training": {"epochs": 1, "batch_size": 4, "learning_rate": 0.05, "early_stopping": None}}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    run = tmp_path / "run"
    res = CliRunner().invoke(main, ["train", str(tmp_path / "r.yaml"), "--run-dir", str(run), "--quiet"])
    assert res.exit_code == 0, res.output
    return run


@pytest.mark.parametrize("head", ["tagger", "acceptor"])
def test_bidirectional_runs_are_diagnosed_per_direction(tmp_path, keras, head):
    """One curve per direction; k = 0 equals W_half (p - onehot) read off the model itself
    (forward: the loss step / last step; backward: the loss step / first step); the CLI writes them."""
    import tensorflow as tf

    from seqkit.cli import main
    from seqkit.diagnostics.diagnose import gradient_flow
    from seqkit.training.train import load_run

    run = _bidi_run(tmp_path, head)
    prep, model = load_run(str(run), with_data=True)
    flow = gradient_flow(prep, model, max_lag=4, examples=6, positions=1000)
    curves = {(c["layer"], c["state"]): c for c in flow["curves"]}
    assert set(curves) == {(f"rnn_0/{d}", s) for d in ("forward", "backward") for s in ("h", "c")}
    w = np.asarray(model.get_layer("logits").kernel)
    hu = w.shape[0] // 2
    fw, bw = [], []
    for x, y in prep.head.dataset(prep.splits["test"][:6], training=False):
        p = np.asarray(tf.nn.softmax(model(x, training=False), axis=-1))  # the model's own output
        y = np.asarray(y)
        cells = zip(*np.nonzero(y > 0)) if head == "tagger" else [(b,) for b in range(len(y))]
        for ix in cells:
            g = p[ix].copy()
            g[int(y[ix]) - 1] -= 1.0
            fw.append(np.linalg.norm(w[:hu] @ g))
            bw.append(np.linalg.norm(w[hu:] @ g))
    f, b = curves[("rnn_0/forward", "h")], curves[("rnn_0/backward", "h")]
    assert f["rows"][0] == b["rows"][0] == len(fw)
    np.testing.assert_allclose(f["norm"][0], np.mean(fw), rtol=1e-4)
    np.testing.assert_allclose(b["norm"][0], np.mean(bw), rtol=1e-4)
    if head == "tagger":  # the forward lag k needs t >= k, the backward t + k < n
        assert f["rows"][1] < f["rows"][0] and b["rows"][1] < b["rows"][0]
    assert all(np.isfinite(c["norm"][1]) and c["norm"][1] > 0 for c in flow["curves"])

    out = tmp_path / "diag"
    res = CliRunner().invoke(main, ["diagnose", str(run), "--out", str(out), "--max-lag", "3",
                                    "--examples", "4"])
    assert res.exit_code == 0, res.output
    assert "layer rnn_0/backward h: gradient horizon" in res.output
    assert "layer rnn_0/backward forget gate" in res.output
    data = json.load(open(out / "diagnose.json"))
    assert "backward lag k" in data["runs"][0]["gradient_flow"]["lag_definition"]
    assert os.path.getsize(out / "diagnose.png") > 1000


@pytest.mark.slow  # heavy; the default run stays under 15 min on 2 cores (run with -m slow)
def test_bidirectional_padded_row_equals_unpadded_and_mismatch_is_refused(tmp_path, keras, monkeypatch):
    import tensorflow as tf

    from seqkit.diagnostics import diagnose
    from seqkit.errors import SeqkitError
    from seqkit.training.train import load_run

    run = _bidi_run(tmp_path, "tagger")
    prep, model = load_run(str(run), with_data=True)
    bi = model.get_layer("rnn_bi_0")
    pairs = [(bi.forward_layer.cell, bi.backward_layer.cell)]
    emb = np.random.default_rng(0).normal(size=(2, 7, 4)).astype("float32")
    valid = np.ones((2, 7), bool)
    valid[0, 4:] = False  # row 0: 4 steps + 3 padding (garbage embeddings there)

    def grads(xs, vs, t):
        with tf.GradientTape() as tape:
            out, [(fwd, bwd)] = diagnose.unroll_bidirectional(pairs, xs, vs)
            loss = tf.reduce_sum(out[0, t] ** 2)
        n = int(vs[0].sum())
        g = tape.gradient(loss, [fwd[j][0] for j in range(n)] + [bwd[i][0] for i in range(n)])
        return np.asarray(out)[0, :n], [np.asarray(v)[0] for v in g]

    o1, g1 = grads(emb, valid, 2)
    o2, g2 = grads(emb[:1, :4], valid[:1, :4], 2)
    np.testing.assert_allclose(o1, o2, atol=1e-6)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, atol=1e-6)

    real = diagnose.unroll_bidirectional  # a path that disagrees with the model is refused
    monkeypatch.setattr(diagnose, "unroll_bidirectional", lambda p, x, v: (
        lambda o: (o[0] * 1.01, o[1]))(real(p, x, v)))
    with pytest.raises(SeqkitError, match="internal error"):
        diagnose.gradient_flow(prep, model, max_lag=2, examples=4)


def test_confusion_picture_at_44_tags_and_missing_matplotlib(tmp_path, monkeypatch):
    import sys

    from seqkit.diagnostics.plots import draw_confusion, normalize_rows
    from seqkit.errors import SeqkitError

    tags = [f"TAG-{i}" for i in range(44)]
    m = np.random.default_rng(0).integers(0, 5, size=(44, 44)) + 20 * np.eye(44, dtype=int)
    draw_confusion({"rows": tags, "columns": tags, "matrix": m.tolist()}, str(tmp_path / "cm.png"))
    assert os.path.getsize(tmp_path / "cm.png") > 1000
    np.testing.assert_allclose(normalize_rows([[1, 3], [0, 0]]), [[0.25, 0.75], [0.0, 0.0]])
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(SeqkitError, match=r'pip install "seqkit\[plot\]"'):
        draw_confusion({"rows": ["a"], "columns": ["a"], "matrix": [[1]]}, str(tmp_path / "x.png"))


def test_acceptor_mean_pooling_flow_by_hand(tmp_path, keras):
    """Acceptor, mean pooling: at k = 0 (the last step) dL/dh_T = W (p - onehot) / n."""
    import tensorflow as tf
    import yaml

    from seqkit.cli import main
    from seqkit.diagnostics.diagnose import gradient_flow
    from seqkit.training.train import load_run

    lines = ["ab ab ab\tx", "ba ba\ty", "ab ba ab ba\tx", "ba\ty", "ab ab\tx", "ba ab ba\ty"] * 4
    (tmp_path / "d.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    recipe = {"name": "tiny-acc", "seed": 1,
              "data": {"source": "tsv_text_label", "path": "d.tsv", "tokenizer": "whitespace",
                       "max_length": 8, "split": {"valid": 0.25, "test": 0.25, "shuffle": True}},
              "model": {"cell": "gru", "units": 6, "embedding_dim": 4},
              "head": {"type": "acceptor", "pooling": "mean"},
              "training": {"epochs": 1, "batch_size": 4, "early_stopping": None}}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    run = tmp_path / "run"
    res = CliRunner().invoke(main, ["train", str(tmp_path / "r.yaml"), "--run-dir", str(run), "--quiet"])
    assert res.exit_code == 0, res.output
    prep, model = load_run(str(run), with_data=True)
    flow = gradient_flow(prep, model, max_lag=5, examples=6)
    [c] = flow["curves"]
    w = np.asarray(model.get_layer("logits").kernel)
    norms = []
    for x, y in prep.head.dataset(prep.splits["test"][:6], training=False):
        p = np.asarray(tf.nn.softmax(model(x, training=False), axis=-1))
        n = (np.asarray(x) != 0).sum(axis=1)
        for b in range(len(p)):
            g = p[b].copy()
            g[int(y[b]) - 1] -= 1.0
            norms.append(np.linalg.norm(w @ g) / n[b])
    assert c["rows"][0] == len(norms) and c["rows"][3] < c["rows"][0]  # short sequences drop out
    np.testing.assert_allclose(c["norm"][0], np.mean(norms), rtol=1e-4)


@pytest.mark.parametrize("clipnorm,fraction", [(1e-6, 1.0), (1e6, 0.0)])
def test_training_diagnostics_clip_fraction(tmp_path, keras, clipnorm, fraction):
    import yaml

    from seqkit.cli import main

    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(make_recipe(
        data={"limit": 60}, model={"units": 4, "embedding_dim": 4},
        training={"epochs": 1, "clipnorm": clipnorm, "diagnostics": True})))
    res = CliRunner().invoke(main, ["train", str(recipe), "--run-dir", str(tmp_path / "run"), "--quiet"])
    assert res.exit_code == 0, res.output
    hist = json.load(open(tmp_path / "run" / "history.json"))
    assert [h["clip_fraction"] for h in hist] == [fraction]
    # clipping on every step is reported; none is not
    assert ("clipping changed 100% of the steps" in res.output) == (fraction == 1.0), res.output
    for h in hist:
        assert 0 < h["grad_norm_mean"] <= h["grad_norm_max"] and np.isfinite(h["grad_norm_max"])


S2S_WORDS = {"ab": "AE B", "ba": "B AA", "abba": "AE B B AA", "baba": "B AA B AA", "aab": "AE AE B",
             "bab": "B AA B", "aba": "AE B AA", "bba": "B B AA", "abab": "AE B AE B", "bbaa": "B B AA AA",
             "a": "AE", "b": "B", "aa": "AE AE", "bb": "B B", "abb": "AE B B", "baa": "B AA AA"}


def _s2s_run(d, bidirectional):
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    (d / "tiny.dict").write_text("\n".join(f"{w} {p}" for w, p in S2S_WORDS.items()) + "\n", encoding="utf-8")
    recipe = {"name": "tiny-g2p", "seed": 1,
              "data": {"source": "cmudict", "path": str(d / "tiny.dict"), "max_length": 6,
                       "split": {"valid": 0.0, "test": 0.4, "shuffle": True}},
              "model": {"units": 6, "embedding_dim": 4, "bidirectional": bidirectional},
              "head": {"type": "seq2seq", "attention": "bahdanau"},
              "training": {"epochs": 1, "batch_size": 4, "learning_rate": 0.02, "early_stopping": None}}
    run = d / ("bi" if bidirectional else "uni")
    train(recipe_from_dict(recipe), str(run), verbose=0)
    return run


@pytest.mark.slow  # heavy; the default run stays under 15 min on 2 cores (run with -m slow)
def test_seq2seq_encoder_flow_matches_the_model(tmp_path, keras):
    """Unidirectional encoder whose final states start the decoder as they are: dL/dh_{S-1}
    is the tape gradient through the model's own encoder outputs (memory at the last source
    step plus the start state h). A bidirectional one runs (its logits are checked inside)."""
    import tensorflow as tf

    from seqkit.cli import main
    from seqkit.diagnostics.diagnose import gradient_flow
    from seqkit.training.train import load_run

    run = _s2s_run(tmp_path, False)
    prep, model = load_run(str(run), with_data=True)
    flow = gradient_flow(prep, model, max_lag=3, examples=8)
    assert flow["encoder_decoder"] and "lag from the source end" in flow["lag_definition"]
    curves = {(c["layer"], c["state"]): c for c in flow["curves"]}
    assert set(curves) == {("encoder_rnn_0", "h"), ("encoder_rnn_0", "c")}
    encoder, decoder = model.get_layer("encoder"), model.get_layer("decoder")
    norms = []
    for (src, dec_in), tgt in prep.head.dataset(prep.splits["test"][:8], training=False):
        memory, h, c = encoder(src, training=False)
        with tf.GradientTape() as tape:
            tape.watch([memory, h, c])
            logits = decoder(dec_in, memory, tf.not_equal(src, 0), [h, c], training=False)
            loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(tgt, logits)
                                 * tf.cast(tgt != 0, tf.float32))
        g_mem, g_h = tape.gradient(loss, [memory, h])
        n = np.asarray(src != 0).sum(axis=1)
        for r in range(len(n)):
            norms.append(np.linalg.norm(np.asarray(g_mem)[r, n[r] - 1] + np.asarray(g_h)[r]))
    h0 = curves[("encoder_rnn_0", "h")]
    assert h0["rows"][0] == len(norms) and h0["rows"][3] < h0["rows"][0]
    np.testing.assert_allclose(h0["norm"][0], np.mean(norms), rtol=1e-4)

    bi = _s2s_run(tmp_path, True)
    out = tmp_path / "diag"
    res = CliRunner().invoke(main, ["diagnose", str(bi), "--out", str(out), "--max-lag", "3"])
    assert res.exit_code == 0, res.output
    assert "encoder_rnn_0/backward h: gradient horizon" in res.output
    assert "seq2seq: whole target loss w.r.t. encoder states" in res.output
    assert os.path.getsize(out / "diagnose.png") > 1000


def test_explosion_warning_thresholds():
    from seqkit.training.grad_stats import explosion_warning

    assert explosion_warning(2, {}) is None
    calm = {"clip_fraction": 0.5, "grad_norm_mean": 1.0, "grad_norm_max": 99.0}
    assert explosion_warning(2, calm) is None
    assert "epoch 3: clipping changed 90%" in explosion_warning(3, {**calm, "clip_fraction": 0.9})
    assert "100x its mean" in explosion_warning(1, {**calm, "grad_norm_max": 100.0})
