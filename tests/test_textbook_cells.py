"""Worked numbers from ../shared/cases/textbook.md, through seqkit's own cells and heads."""

import math

import numpy as np
import pytest

from seqkit.cells.base import CellSpec
from seqkit.registry import CELLS


def plugin(name, units, **opts):
    cls = CELLS.get(name)
    return cls(CellSpec(units=units, options=cls.Options(**opts)))


def scalar_simple_rnn(keras, activation, w_in, w_rec, bias=0.0, sequences=False):
    layer = plugin("simple_rnn", 1, activation=activation).make_layer(return_sequences=sequences)
    layer.build((None, None, 1))
    layer.set_weights([np.array([[w_in]], "float32"), np.array([[w_rec]], "float32"),
                       np.array([bias], "float32")])
    return layer


def test_item2_scalar_cell_identity_and_tanh(keras):
    layer = scalar_simple_rnn(keras, "linear", 2.0, 0.5)
    h = layer(np.array([[[3.0]]], "float32"), initial_state=[np.array([[4.0]], "float32")])
    assert float(h[0, 0]) == 8.0
    layer = scalar_simple_rnn(keras, "tanh", 1.0, 1.0)
    h = layer(np.array([[[2.0]]], "float32"), initial_state=[np.array([[1.0]], "float32")])
    assert round(float(h[0, 0]), 3) == 0.995


def test_item3_three_step_tanh_rnn(keras):
    layer = scalar_simple_rnn(keras, "tanh", 1.0, 0.5, sequences=True)
    h = np.asarray(layer(np.array([[[1.0], [0.5], [-1.0]]], "float32")))[0, :, 0]
    assert [round(float(v), 4) for v in h] == [0.7616, 0.7068, -0.5694]


def test_item4_lstm_cell_update_from_gate_values(keras):
    """Gates set through the biases (zero weights): i=0.3, f=0.8, g=0.4, o=0.6, c_prev=0.5."""
    cell = plugin("lstm", 1).make_cell()
    cell.build((None, 1))
    logit = lambda p: math.log(p / (1 - p))  # noqa: E731
    bias = np.array([logit(0.3), logit(0.8), math.atanh(0.4), logit(0.6)], "float32")  # Keras order i, f, c, o
    cell.set_weights([np.zeros((1, 4), "float32"), np.zeros((1, 4), "float32"), bias])
    h, (h2, c) = cell(np.zeros((1, 1), "float32"), [np.zeros((1, 1), "float32"), np.full((1, 1), 0.5, "float32")])
    assert round(float(c[0, 0]), 6) == 0.52
    assert round(float(h[0, 0]), 6) == 0.286620 == round(0.6 * math.tanh(0.52), 6)


@pytest.mark.parametrize("cell,expected", [("lstm", 365_568), ("gru", 274_944)])
def test_item6_parameter_counts(keras, cell, expected):
    layer = plugin(cell, 256).make_layer()
    layer.build((None, None, 100))
    assert layer.count_params() == expected


def test_item6_counts_reported_in_summary(keras, recipe_dict):
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import count_parameters, prepare

    r = recipe_from_dict(recipe_dict(model={"units": 256, "embedding_dim": 100}))
    prep = prepare(r)
    params = count_parameters(prep.head.build_model())
    assert params["rnn_0"] == 365_568
    assert params["total"] == params["embedding"] + params["rnn_0"] + params["logits"]


def test_item7_deep_bidirectional_lstm_shape(keras):
    from seqkit.layers.stack import apply_stack
    from seqkit.recipe import ModelConfig

    cfg = ModelConfig(cell="lstm", units=4, layers=2, bidirectional=True)
    x = keras.Input((5, 3))
    y = apply_stack(x, plugin("lstm", 4), cfg, causal=False)
    out = keras.Model(x, y)(np.zeros((2, 5, 3), "float32"))
    assert tuple(out.shape) == (2, 5, 8)


def test_bidirectional_refused_for_causal_head(keras):
    from seqkit.errors import RecipeError
    from seqkit.layers.stack import apply_stack
    from seqkit.recipe import ModelConfig

    with pytest.raises(RecipeError, match="reads the future"):
        apply_stack(keras.Input((5, 3)), plugin("lstm", 4), ModelConfig(bidirectional=True), causal=True)


def test_item10_repeated_derivative_factors(tf, keras):
    """d h_10 / d h_0 of a linear scalar RNN with recurrent weight w over ten steps is w^10."""
    for w, expected in ((0.5, 0.0009765625), (1.5, 57.6650390625)):
        layer = scalar_simple_rnn(keras, "linear", 0.0, w)
        h0 = tf.Variable([[1.0]])
        with tf.GradientTape() as tape:
            h = layer(tf.zeros((1, 10, 1)), initial_state=[h0])
        assert float(tape.gradient(h, h0)[0, 0]) == expected


def test_fast_path_warning_once(recipe_dict):
    import warnings

    from seqkit.cells.base import CellPlugin

    CellPlugin._warned.clear()
    p = plugin("lstm", 8)
    p.spec = CellSpec(units=8, recurrent_dropout=0.2, options=p.options)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        p.warn_fast_path("lstm")
        p.warn_fast_path("lstm")
    msgs = [str(w.message) for w in rec]
    assert len(msgs) == 1 and "recurrent_dropout is 0.2" in msgs[0] and "cuDNN" in msgs[0]
    assert plugin("gru", 8).fast_path_issues() == []
    assert "activation is 'relu'" in plugin("gru", 8, activation="relu").fast_path_issues()[0]
