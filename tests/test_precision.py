"""``training.precision``: the choice of ``auto``, the fused layers' bfloat16 input projection
(gradients within a stated tolerance of float32's), float32 cross-entropy from bfloat16 logits, and
a mixed-precision run that resumes exactly, evaluates and exports in float32 (parity-checked) and
gives a portable ``.keras``."""

import json
import os

import numpy as np
import pytest

from tests.conftest import make_recipe
from tests.fusedhelp import outputs_and_grads, padded_batch

#: Relative error (Frobenius norm of the difference over the norm of the float32 value) allowed
#: between the bfloat16-product and the float32 fused layers' outputs and gradients: bfloat16 keeps
#: 8 significant bits (a rounding error of at most 2**-9 = 0.2% per operand); these layers round
#: the inputs and W once each; the errors measured here are 0.1-0.6%. docs/precision.md states it.
GRAD_RTOL = 2e-2


def rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


# ------------------------------------------------------------------ choosing the precision

def test_auto_is_bfloat16_where_the_cpu_or_gpu_multiplies_it_natively():
    from seqkit.training.precision import resolve

    none = {"avx512f": True}
    assert resolve("auto", flags={"avx512_bf16": True, "avx512f": True})[0] == "mixed_bfloat16"
    assert resolve("auto", flags={"amx_bf16": True})[0] == "mixed_bfloat16"
    assert "avx512_bf16" in resolve("auto", flags={"avx512_bf16": True})[1]
    assert resolve("auto", flags=none)[0] == "float32"
    assert resolve("auto", flags=none, gpu=True)[0] == "mixed_bfloat16"
    # a GPU without bfloat16 trains there, in float32, whatever the CPU has
    assert resolve("auto", flags={"amx_bf16": True}, gpu=False)[0] == "float32"
    assert resolve("mixed_float16", flags=none) == ("mixed_float16", "set in the recipe")
    with pytest.raises(ValueError, match="float32, mixed_bfloat16, mixed_float16, auto"):
        resolve("bfloat16")


def test_recipe_key_defaults_to_float32_and_takes_set(write_recipe):
    from seqkit.errors import SeqkitError
    from seqkit.recipe import Recipe

    path = write_recipe(make_recipe())
    assert Recipe.from_yaml(path).training.precision == "float32"
    r = Recipe.from_yaml(path, ["training.precision=mixed_bfloat16"])
    assert r.training.precision == "mixed_bfloat16"
    with pytest.raises(SeqkitError, match="training.precision"):
        Recipe.from_yaml(path, ["training.precision=bf16"])


# ------------------------------------------------------------------ the fused layers

@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_bfloat16_products_keep_outputs_and_gradients_within_tolerance_of_float32(tf, keras, kind):
    from seqkit.layers.fused_gru import FusedGRU
    from seqkit.layers.fused_lstm import FusedLSTM

    cls = FusedLSTM if kind == "lstm" else FusedGRU
    rng = np.random.default_rng(4)
    width, units = 24, 16
    ref = cls(units, return_sequences=True, return_state=True)
    low = cls(units, return_sequences=True, return_state=True, product_dtype="bfloat16")
    for layer in (ref, low):
        layer.build((None, None, width))
    low.set_weights([w + rng.normal(size=w.shape).astype("float32") * 0.3 for w in ref.get_weights()])
    ref.set_weights(low.get_weights())
    x, mask = padded_batch(rng, width)
    state = [rng.normal(size=(4, units)).astype("float32") for _ in range(2 if kind == "lstm" else 1)]
    (o32, g32), (o16, g16) = (outputs_and_grads(tf, L, x, mask, state) for L in (ref, low))
    assert all(o.dtype == np.float32 for o in o16)  # outputs and states stay float32
    errors = [rel(b, a) for a, b in zip(o32 + g32, o16 + g16)]
    assert max(errors) < GRAD_RTOL, errors
    assert min(errors[:1]) > 1e-5  # the products really ran in bfloat16 (float32 agrees to ~1e-7)
    # the padding rule holds exactly: the all-padding row keeps its initial state
    np.testing.assert_array_equal(o16[1][3], state[0][3])


def test_recurrent_weight_gradient_is_one_product_of_bfloat16_rounded_operands(tf):
    from seqkit.layers.fused_rnn import recurrent_weight_gradient

    rng = np.random.default_rng(7)
    h0, h_seq, dz = (rng.normal(size=s).astype("float32") for s in ((3, 5), (4, 3, 5), (4, 3, 8)))
    h_prev = np.concatenate([h0[None], h_seq[:-1]]).reshape(-1, 5).astype("float64")
    want32 = h_prev.T @ dz.reshape(-1, 8)
    got32 = recurrent_weight_gradient(tf.constant(h0), tf.constant(h_seq), tf.constant(dz)).numpy()
    np.testing.assert_allclose(got32, want32, rtol=1e-5, atol=1e-5)

    def bf16(a):  # round to the nearest bfloat16, as tf.cast does
        return tf.cast(tf.cast(tf.constant(a, tf.float32), tf.bfloat16), tf.float64).numpy()

    want16 = bf16(h_prev).T @ bf16(dz.reshape(-1, 8))  # exact products, float32-like sums
    got16 = recurrent_weight_gradient(tf.constant(h0), tf.constant(h_seq), tf.constant(dz), "bfloat16")
    assert got16.dtype == tf.float32
    # the float32 sum of exact products, rounded once to bfloat16 (8 significant bits)
    np.testing.assert_allclose(got16.numpy(), want16, rtol=2 ** -8, atol=1e-2)
    assert rel(got16.numpy(), want32) > 1e-4  # it really ran in bfloat16


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_scan_product_dtype_rounds_only_the_recurrent_kernel_gradient(tf, kind):
    from seqkit.layers.fused_gru import gru_scan
    from seqkit.layers.fused_lstm import lstm_scan

    rng = np.random.default_rng(8)
    steps, batch, units = 6, 3, 4
    gates = 4 * units if kind == "lstm" else 3 * units
    zx = tf.constant(rng.normal(size=(steps, batch, gates)).astype("float32"))
    mask = np.ones((steps, batch, 1), "float32")
    mask[4:, 1] = 0.0
    mask = tf.constant(mask)
    h0 = tf.constant(rng.normal(size=(batch, units)).astype("float32"))
    u = tf.constant(rng.normal(size=(units, gates)).astype("float32") * 0.5)
    b = tf.constant(rng.normal(size=(gates,)).astype("float32"))
    weights = tf.constant(np.cos(np.arange(steps * batch * units)).reshape(steps, batch, units).astype("float32"))
    grads = {}
    for dtype in (None, "bfloat16"):
        with tf.GradientTape() as tape:
            tape.watch([zx, h0, u, b])
            if kind == "lstm":
                h_seq, _ = lstm_scan(zx, mask, h0, h0, u, product_dtype=dtype)
            else:
                h_seq = gru_scan(zx, mask, h0, u, b, product_dtype=dtype)
            loss = tf.reduce_sum(h_seq * weights)
        grads[dtype] = [g.numpy() for g in tape.gradient(loss, [zx, h0, u, b], unconnected_gradients="zero")]
    (dzx, dh0, du, db), (dzx16, dh016, du16, db16) = grads[None], grads["bfloat16"]
    for a, c in ((dzx, dzx16), (dh0, dh016), (db, db16)):  # the loops themselves stay float32
        np.testing.assert_array_equal(a, c)
    assert 1e-5 < rel(du16, du) < GRAD_RTOL


def test_a_layer_made_under_a_mixed_policy_keeps_float32_state_and_saves_its_product_dtype(tf, keras):
    from seqkit.layers.fused_lstm import FusedLSTM
    from seqkit.training.precision import policy_scope

    with policy_scope("mixed_bfloat16"):
        layer = FusedLSTM(4, return_state=True)
    assert keras.config.dtype_policy().name == "float32"  # the scope restores the global policy
    assert (layer.product_dtype, layer.dtype_policy.name, layer.cell.dtype_policy.name) == \
        ("bfloat16", "float32", "float32")
    out, h, c = layer(np.ones((2, 3, 5), "float32"))
    assert {out.dtype, h.dtype, c.dtype} == {tf.float32}
    again = FusedLSTM.from_config(layer.get_config())
    assert again.product_dtype == "bfloat16"
    assert "product_dtype" not in FusedLSTM(4).get_config()  # float32 configs are as they were
    with pytest.raises(ValueError, match="product_dtype"):
        FusedLSTM(4, product_dtype="int8")


def _decoder(keras, policy=None, cell="lstm", **kw):
    from seqkit.layers.decoder import Seq2SeqDecoder
    from seqkit.training.precision import policy_scope

    args = dict(vocab_size=11, embedding_dim=6, cell=cell, units=12, layers=2, attention="bahdanau")
    if policy is None:
        return Seq2SeqDecoder(**args, **kw)
    with policy_scope(policy):
        return Seq2SeqDecoder(**args, **kw)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_decoder_made_under_a_mixed_policy_multiplies_in_bfloat16_within_tolerance_of_float32(tf, keras, cell):
    from seqkit.training.precision import model_precision, to_float32

    rng = np.random.default_rng(7)
    ref, low = _decoder(keras, cell=cell), _decoder(keras, "mixed_bfloat16", cell=cell)
    assert low.product_dtype == "bfloat16" and ref.product_dtype is None
    assert {s.dtype_policy.name for s in low._flatten_layers(include_self=True, recursive=True)} == {"float32"}
    tokens = tf.constant([[1, 4, 5, 0], [1, 7, 2, 3]], tf.int32)
    memory = tf.constant(rng.normal(size=(2, 5, 8)).astype("float32"))
    mask = tf.constant([[True] * 5, [True, True, True, False, False]])
    starts = [tf.constant(rng.normal(size=(2, 12)).astype("float32")) for _ in range(4 if cell == "lstm" else 2)]
    for d in (ref, low):
        d(tokens, memory, mask, starts)
    low.set_weights([w + rng.normal(size=w.shape).astype("float32") * 0.3 for w in ref.get_weights()])
    ref.set_weights(low.get_weights())

    def run(d):
        with tf.GradientTape() as tape:
            tape.watch([memory, *starts])
            logits = d(tokens, memory, mask, starts)
            loss = tf.reduce_sum(logits * tf.sin(tf.range(11, dtype=tf.float32)))
        return logits, [tf.convert_to_tensor(g) for g in tape.gradient(loss, [memory, *starts, *d.trainable_weights])]

    (l32, g32), (l16, g16) = run(ref), run(low)
    assert l16.dtype == tf.float32
    errors = [rel(b.numpy(), a.numpy()) for a, b in zip([l32, *g32], [l16, *g16])]
    assert max(errors) < GRAD_RTOL, errors
    assert errors[0] > 1e-5  # the products really ran in bfloat16 (float32 agrees to ~1e-7)
    again = type(low).from_config(low.get_config())
    assert again.product_dtype == "bfloat16" and "product_dtype" not in ref.get_config()
    model = keras.Sequential([low])  # to_float32 (what loading a run for evaluation does) resets it
    assert model_precision(model) == "mixed_bfloat16"
    to_float32(model)
    assert low.product_dtype is None
    np.testing.assert_allclose(low(tokens, memory, mask, starts).numpy(), l32.numpy(), rtol=0, atol=1e-5)


def test_cross_entropy_of_bfloat16_logits_is_computed_in_float32(tf, keras):
    from seqkit.training.losses import MaskedSparseCrossEntropy

    rng = np.random.default_rng(5)
    z16 = tf.cast(tf.constant(rng.normal(size=(3, 4, 50)) * 4, tf.float32), tf.bfloat16)
    z32 = tf.cast(z16, tf.float32)  # the same numbers, held in float32
    y = tf.constant(rng.integers(0, 50, size=(3, 4)), tf.int32)
    loss = MaskedSparseCrossEntropy()
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([z16, z32])
        l16, l32 = loss(y, z16), loss(y, z32)
    assert l16.dtype == tf.float32
    assert float(l16) == float(l32)
    g16, g32 = tape.gradient(l16, z16), tape.gradient(l32, z32)
    assert g16.dtype == tf.bfloat16
    np.testing.assert_array_equal(g16.numpy(), tf.cast(g32, tf.bfloat16).numpy())


# ------------------------------------------------------------------ a mixed-precision run

def _recipe(tmp_path, precision, epochs, **training):
    from seqkit.recipe import recipe_from_dict

    raw = make_recipe(data={"limit": 120, "max_length": 80}, model={"units": 24, "dropout": 0.1},
                      training={"epochs": epochs, "precision": precision, **training})
    return recipe_from_dict(raw)


def _files(run):
    from tests.test_resume_exact import run_files

    return run_files(run)


@pytest.fixture(scope="module")
def bf16_runs(tmp_path_factory, keras):
    """A 2-epoch mixed_bfloat16 LM trained straight, the same cut after 1 epoch and resumed, and a
    float32 twin."""
    from seqkit.training.train import train

    d = tmp_path_factory.mktemp("bf16")
    runs = {k: str(d / k) for k in ("straight", "cut", "f32")}
    train(_recipe(d, "mixed_bfloat16", 2), runs["straight"], verbose=0)
    train(_recipe(d, "mixed_bfloat16", 1), runs["cut"], verbose=0)
    train(_recipe(d, "mixed_bfloat16", 2), runs["cut"], resume=True, verbose=0)
    train(_recipe(d, "float32", 2), runs["f32"], verbose=0)
    return runs


def test_mixed_run_records_its_precision_resumes_exactly_and_learns_as_float32(bf16_runs, keras):
    from seqkit.training.precision import model_precision
    from seqkit.training.train import load_model

    assert _files(bf16_runs["cut"]) == _files(bf16_runs["straight"])
    m = json.load(open(os.path.join(bf16_runs["straight"], "metrics.json"), encoding="utf-8"))
    assert m["precision"] == {"requested": "mixed_bfloat16", "policy": "mixed_bfloat16",
                              "why": "set in the recipe"}
    f = json.load(open(os.path.join(bf16_runs["f32"], "metrics.json"), encoding="utf-8"))
    assert f["precision"]["policy"] == "float32"
    # the saved model keeps its policy for --resume; loading it for use gives float32
    last = os.path.join(bf16_runs["straight"], "last.keras")
    assert model_precision(load_model(last, keep_precision=True)) == "mixed_bfloat16"
    assert model_precision(load_model(last)) == "float32"
    # same data, seed and schedule: bfloat16 products learn what float32 learns, to a few percent
    assert abs(m["test"]["cross_entropy"] - f["test"]["cross_entropy"]) < 0.05 * f["test"]["cross_entropy"]
    assert m["test"]["perplexity"] < 0.5 * m["vocabulary"]  # an untrained model's is about the vocabulary size


def test_mixed_run_evaluates_in_float32_on_the_same_weights(bf16_runs, tf, keras):
    from seqkit.training.precision import model_precision
    from seqkit.training.train import compile_model, evaluate_model, load_run

    prep, model = load_run(bf16_runs["straight"], with_data=True)
    assert model_precision(model) == "float32"
    fresh = compile_model(prep, precision="float32")  # a float32 model built from scratch
    fresh.set_weights(model.get_weights())
    got, want = evaluate_model(prep, model, "test"), evaluate_model(prep, fresh, "test")
    assert got["cross_entropy"] == pytest.approx(want["cross_entropy"], rel=1e-6)
    m = json.load(open(os.path.join(bf16_runs["straight"], "metrics.json"), encoding="utf-8"))
    assert m["test"]["cross_entropy"] == pytest.approx(got["cross_entropy"], rel=1e-6)


@pytest.mark.parametrize("quantize", ["none", "float16", "int8"])
def test_mixed_run_exports_pass_parity_against_float32_keras(bf16_runs, tmp_path, quantize):
    from seqkit.export.writer import export_run

    rep = export_run(bf16_runs["straight"], str(tmp_path / quantize), quantize=quantize,
                     parity_examples=6, calibration_examples=16)
    gate = {"none": 0.999, "float16": 0.99, "int8": 0.95}[quantize]
    assert rep["tflite"]["argmax_agreement"] >= gate
    if quantize == "none":
        assert rep["tflite"]["max_abs_diff"] < 1e-4  # float32 export = float32 Keras, same weights


def test_mixed_run_gives_a_portable_keras_file(bf16_runs, tmp_path, keras):
    from seqkit.export.portable import export_portable_keras
    from seqkit.training.precision import model_precision

    export_portable_keras(bf16_runs["straight"], str(tmp_path / "p"))
    stock = keras.saving.load_model(str(tmp_path / "p" / "model.keras"))
    assert model_precision(stock) == "float32"
    assert not any(getattr(layer, "product_dtype", None) for layer in stock._flatten_layers())


def test_float16_run_scales_its_loss_and_resumes(tmp_path, keras):
    from seqkit.training.train import load_model, train

    run = str(tmp_path / "f16")
    train(_recipe(tmp_path, "mixed_float16", 1), run, verbose=0)
    last = load_model(os.path.join(run, "last.keras"), keep_precision=True)
    assert isinstance(last.optimizer, keras.optimizers.LossScaleOptimizer)
    train(_recipe(tmp_path, "mixed_float16", 2), run, resume=True, verbose=0)
    hist = json.load(open(os.path.join(run, "history.json"), encoding="utf-8"))
    assert [h["epoch"] for h in hist] == [1, 2]
    assert hist[1]["val_cross_entropy"] < hist[0]["val_cross_entropy"]


@pytest.mark.slow  # the Keras path's loss scaling stays in the default run: -m slow (suite time)
def test_stream_lm_trains_in_bfloat16_and_float16_as_in_float32(tmp_path, keras):
    """The stream layout's own loop (truncated BPTT): float32 chunk cross-entropy from low-precision
    logits, and under mixed_float16 the loss scaled before the gradients (the loss-scale optimizer
    unscales them; unscaled, every update would be 32768 times too small)."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    got = {}
    for p in ("float32", "mixed_bfloat16", "mixed_float16"):
        raw = make_recipe(data={"layout": "stream", "limit": 60},
                          training={"epochs": 2, "batch_size": 4, "bptt": 16, "precision": p})
        got[p] = train(recipe_from_dict(raw), str(tmp_path / p), verbose=0)["valid"]["cross_entropy"]
    first = json.load(open(tmp_path / "float32" / "history.json", encoding="utf-8"))[0]["val_cross_entropy"]
    assert got["float32"] < first
    for p in ("mixed_bfloat16", "mixed_float16"):
        assert got[p] == pytest.approx(got["float32"], rel=0.03), got


def test_resume_of_a_run_older_than_the_key_is_no_change_unless_it_asks_for_another_precision(tmp_path):
    import yaml

    from seqkit.errors import RunDirError
    from seqkit.recipe import recipe_from_dict
    from seqkit.runs.rundir import RECIPE, RunDir
    from seqkit.training.train import _check_resume_changes

    recipe = recipe_from_dict(make_recipe())
    saved = yaml.safe_load(recipe.to_yaml())
    del saved["training"]["precision"]  # a recipe.yaml written before training.precision existed
    (tmp_path / RECIPE).write_text(yaml.safe_dump(saved), encoding="utf-8")
    _check_resume_changes(recipe, RunDir(str(tmp_path)))  # float32, the default: nothing changes
    bf16 = recipe_from_dict(make_recipe(training={"precision": "mixed_bfloat16"}))
    with pytest.raises(RunDirError, match="training.precision"):
        _check_resume_changes(bf16, RunDir(str(tmp_path)))


@pytest.mark.parametrize("head", ["tagger", "acceptor", pytest.param("seq2seq", marks=pytest.mark.slow)])
def test_every_head_trains_in_bfloat16_and_evaluates_in_float32(head, tmp_path, keras):
    """Tagger (bidirectional, emissions), acceptor (mean pooling, frame inputs) and seq2seq (attention
    decoder, pinned to float32) build, train and evaluate under mixed_bfloat16 on the fused path."""
    import math

    from seqkit.training.precision import model_precision
    from seqkit.training.train import load_model, load_run, train
    from tests.test_resume_exact import small

    recipe = small(head, 1, tmp_path)
    recipe.training.precision = "mixed_bfloat16"
    recipe.model.recurrent_dropout = 0.0  # keep the fused kernels (recurrent dropout leaves them)
    run = str(tmp_path / "run")
    metrics = train(recipe, run, verbose=0)
    assert metrics["precision"]["policy"] == "mixed_bfloat16"
    assert all(math.isfinite(v) for v in metrics["test"].values() if isinstance(v, float))
    saved = load_model(os.path.join(run, "last.keras"), keep_precision=True)
    assert model_precision(saved) == "mixed_bfloat16"
    assert any(getattr(layer, "product_dtype", None) == "bfloat16" for layer in saved._flatten_layers())
    prep, model = load_run(run, with_data=True)
    assert model_precision(model) == "float32"
    again = prep.head.evaluate(model, prep.splits["test"])
    floats = {k: v for k, v in metrics["test"].items() if isinstance(v, float)}
    assert floats and {k: again[k] for k in floats} == pytest.approx(floats, rel=1e-6)
