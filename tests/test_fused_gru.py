"""FusedGRU (seqkit's CPU kernel) equals keras.layers.GRU: outputs, states and every gradient."""

import numpy as np
import pytest

from tests.fusedhelp import assert_equal_to_keras, pair


def _pair(keras, rng, units=4, width=5, **kw):
    from seqkit.layers.fused_gru import FusedGRU

    return pair(keras.layers.GRU, FusedGRU, rng, units, width, **kw)


@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("return_sequences", [True, False])
def test_outputs_states_and_gradients_equal_keras_gru_with_padding(tf, keras, go_backwards, return_sequences):
    from seqkit.layers.fused_gru import FusedGRU

    out, state = assert_equal_to_keras(tf, keras.layers.GRU, FusedGRU, 1, go_backwards=go_backwards,
                                       return_sequences=return_sequences)
    np.testing.assert_array_equal(out[-1][3], state[0][3])  # all-padding row: h is h0


def test_the_fused_kernel_runs_and_matches_inside_a_compiled_function(tf, keras, monkeypatch):
    import seqkit.layers.fused_gru as fg

    calls = []
    scan = fg.gru_scan
    monkeypatch.setattr(fg, "gru_scan", lambda *a, **kw: calls.append(1) or scan(*a, **kw))
    rng = np.random.default_rng(1)
    ref, fused = _pair(keras, rng, units=8, width=3, return_sequences=True)
    x = rng.normal(size=(2, 30, 3)).astype("float32")
    run = lambda L: tf.function(lambda v: L(v))(tf.constant(x)).numpy()  # noqa: E731
    np.testing.assert_allclose(run(fused), run(ref), atol=1e-6)
    assert calls  # the fast path, not Keras's loop, produced those outputs


def test_reset_before_and_other_configurations_fall_back_to_keras(tf, keras, monkeypatch):
    import seqkit.layers.fused_gru as fg

    monkeypatch.setattr(fg, "gru_scan", lambda *a, **kw: pytest.fail("fast path taken"))
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 5, 5)).astype("float32")
    for kw in ({"reset_after": False}, {"activation": "relu"}, {"recurrent_dropout": 0.1}):
        ref, fused = _pair(keras, rng, return_sequences=True, **kw)
        np.testing.assert_allclose(fused(x).numpy(), ref(x).numpy(), atol=1e-6)


def test_a_gru_run_trains_saves_and_reloads_with_the_fused_layer(tmp_path, keras):
    from seqkit.layers.fused_gru import FusedGRU
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import load_run, train
    from tests.conftest import make_recipe

    r = recipe_from_dict(make_recipe(model={"cell": "gru", "units": 16}, data={"limit": 120},
                                     training={"epochs": 1}))
    metrics = train(r, str(tmp_path / "run"), verbose=0)
    prep, model = load_run(str(tmp_path / "run"))
    assert any(isinstance(layer, FusedGRU) for layer in model.layers)
    assert 1 < metrics["test"]["perplexity"] < metrics["vocabulary"]
