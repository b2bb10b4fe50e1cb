"""Weight dropping (DropConnect on the recurrent kernel, AWD-LSTM): seqkit/layers/weight_drop.py."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import make_recipe


def _pair(keras, kind, weight_drop, **kw):
    """A fused layer with ``weight_drop`` and Keras's own layer, both built on ``[3, 7, 5]``."""
    from seqkit.layers.fused_gru import FusedGRU
    from seqkit.layers.fused_lstm import FusedLSTM

    cls, ref_cls = (FusedLSTM, keras.layers.LSTM) if kind == "lstm" else (FusedGRU, keras.layers.GRU)
    layer = cls(4, return_sequences=True, weight_drop=weight_drop, **kw)
    ref = ref_cls(4, return_sequences=True, **kw)
    layer.build((3, 7, 5))
    ref.build((3, 7, 5))
    return layer, ref


@pytest.mark.parametrize("kind,kw", [("lstm", {}), ("gru", {}), ("lstm", {"unroll": True})])
def test_training_uses_the_masked_kernel_and_its_gradient(tf, keras, monkeypatch, kind, kw):
    """In training the layer equals Keras's layer run with ``U M / (1 - p)`` (a known mask); the
    gradient reaching ``U`` is the reference's gradient at that kernel times ``M / (1 - p)``
    (chain rule). ``unroll`` takes Keras's own step loop instead of the fused one."""
    p = 0.25
    rng = np.random.RandomState(0)
    x = rng.randn(3, 7, 5).astype("float32")
    layer, ref = _pair(keras, kind, p, **kw)
    weights = [rng.randn(*w.shape).astype("float32") * 0.4 for w in layer.get_weights()]
    layer.set_weights(weights)
    mask = (rng.rand(*weights[1].shape) > p).astype("float32")
    monkeypatch.setattr(keras.random, "dropout",
                        lambda u, rate, seed=None: u * mask / (1.0 - rate))
    ref.set_weights([weights[0], weights[1] * mask / (1 - p), weights[2]])
    with tf.GradientTape(persistent=True) as tape:
        out = layer(x, training=True)
        want = ref(x, training=True)
        loss, ref_loss = tf.reduce_sum(out * out), tf.reduce_sum(want * want)
    np.testing.assert_allclose(out.numpy(), want.numpy(), atol=2e-6)
    g_u = tape.gradient(loss, layer.cell.recurrent_kernel).numpy()
    g_ref = tape.gradient(ref_loss, ref.cell.recurrent_kernel).numpy()
    np.testing.assert_allclose(g_u, g_ref * mask / (1 - p), atol=2e-5)
    assert np.all(g_u[mask == 0] == 0) and (mask == 0).any()
    # the variable is back after the call; inference uses U itself
    assert isinstance(layer.cell.recurrent_kernel, keras.Variable)
    ref.set_weights(weights)
    np.testing.assert_allclose(layer(x).numpy(), ref(x).numpy(), atol=2e-6)


def test_the_mask_is_bernoulli_scaled_and_new_each_call(tf, keras):
    """The dropped kernel holds 0 or ``U / (1 - p)``; the dropped fraction is near ``p``
    (4,096 entries: 5 standard deviations is 0.039); two calls in one ``tf.function`` draw two masks."""
    from seqkit.layers.fused_lstm import FusedLSTM
    from seqkit.layers.weight_drop import dropped_recurrent_kernel

    p = 0.4
    layer = FusedLSTM(32, return_sequences=True, weight_drop=p)
    layer.build((2, 3, 8))
    u = layer.cell.recurrent_kernel.numpy()

    @tf.function
    def two():
        with dropped_recurrent_kernel(layer, True):
            a = tf.identity(layer.cell.recurrent_kernel)
        with dropped_recurrent_kernel(layer, True):
            b = tf.identity(layer.cell.recurrent_kernel)
        return a, b

    a, b = (t.numpy() for t in two())
    for d in (a, b):
        kept = d != 0
        np.testing.assert_allclose(d[kept], u[kept] / (1 - p), rtol=1e-6)
        assert abs((~kept).mean() - p) < 0.039
    assert (a != 0).astype(int).tolist() != (b != 0).astype(int).tolist()
    with dropped_recurrent_kernel(layer, False):
        assert layer.cell.recurrent_kernel is not None and np.array_equal(layer.cell.recurrent_kernel.numpy(), u)


def test_config_round_trip_and_rate_checks(keras):
    from seqkit.layers.fused_lstm import FusedLSTM

    layer = FusedLSTM(4, weight_drop=0.3)
    assert layer.get_config()["weight_drop"] == 0.3
    assert FusedLSTM.from_config(layer.get_config()).weight_drop == 0.3
    assert "weight_drop" not in FusedLSTM(4).get_config()  # earlier runs' configs unchanged
    with pytest.raises(ValueError, match=r"weight_drop must be in \[0, 1\), got 1.0"):
        FusedLSTM(4, weight_drop=1.0)


def test_recipe_key_reaches_the_layers_and_is_refused_for_other_cells(keras):
    from seqkit.errors import RecipeError
    from seqkit.layers.stack import make_plugin
    from seqkit.recipe import recipe_from_dict

    recipe = recipe_from_dict(make_recipe(model={"cell": "gru", "units": 8, "weight_drop": 0.2}))
    plugin = make_plugin(recipe.model, recipe.cell_options)
    assert plugin.make_layer(name="rnn_0").weight_drop == 0.2
    with pytest.raises(RecipeError, match=r"model.weight_drop.*0.2 is not supported by cell 'simple_rnn'"):
        recipe_from_dict(make_recipe(model={"cell": "simple_rnn", "units": 8, "weight_drop": 0.2}))
    with pytest.raises(RecipeError, match="weight_drop"):
        recipe_from_dict(make_recipe(model={"weight_drop": 1.5}))
