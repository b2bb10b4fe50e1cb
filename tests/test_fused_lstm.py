"""FusedLSTM (seqkit's CPU kernel) equals keras.layers.LSTM: outputs, states and every gradient."""

import numpy as np
import pytest

from tests.fusedhelp import assert_equal_to_keras, pair


def _pair(keras, rng, units=4, width=5, **kw):
    from seqkit.layers.fused_lstm import FusedLSTM

    return pair(keras.layers.LSTM, FusedLSTM, rng, units, width, **kw)


@pytest.mark.parametrize("go_backwards", [False, True])
@pytest.mark.parametrize("return_sequences", [True, False])
def test_outputs_states_and_gradients_equal_keras_lstm_with_padding(tf, keras, go_backwards, return_sequences):
    from seqkit.layers.fused_lstm import FusedLSTM

    out, state = assert_equal_to_keras(tf, keras.layers.LSTM, FusedLSTM, 2, go_backwards=go_backwards,
                                       return_sequences=return_sequences)
    np.testing.assert_array_equal(out[-2][3], state[0][3])  # all-padding row: h is h0


def test_no_mask_and_zero_initial_state_inside_a_compiled_function(tf, keras):
    rng = np.random.default_rng(1)
    ref, fused = _pair(keras, rng, units=8, width=3, return_sequences=True)
    x = rng.normal(size=(2, 30, 3)).astype("float32")
    run = lambda L: tf.function(lambda v: L(v))(tf.constant(x)).numpy()  # noqa: E731
    np.testing.assert_allclose(run(fused), run(ref), atol=1e-6)


def test_bidirectional_wrapper_keeps_the_fused_class_and_equals_keras(tf, keras):
    from seqkit.layers.fused_lstm import FusedLSTM

    rng = np.random.default_rng(2)
    ref, fused = _pair(keras, rng, return_sequences=True)
    bi_ref = keras.layers.Bidirectional(ref)
    bi_fused = keras.layers.Bidirectional(fused)
    x = rng.normal(size=(3, 6, 5)).astype("float32")
    mask = np.array([[1] * 6, [1] * 4 + [0] * 2, [1] * 1 + [0] * 5], bool)
    bi_ref(x, mask=mask)
    bi_fused(x, mask=mask)
    bi_fused.set_weights(bi_ref.get_weights())
    assert isinstance(bi_fused.backward_layer, FusedLSTM)
    np.testing.assert_allclose(bi_fused(x, mask=mask).numpy(), bi_ref(x, mask=mask).numpy(), atol=1e-6)


def test_configurations_off_the_fast_path_fall_back_to_keras(tf, keras):
    from seqkit.layers.fused_lstm import FusedLSTM
    from seqkit.layers.fused_rnn import fast_path_ok

    assert fast_path_ok(FusedLSTM(4))
    for kw in ({"recurrent_dropout": 0.1}, {"activation": "relu"}, {"use_bias": False},
               {"recurrent_activation": "hard_sigmoid"}):
        layer = FusedLSTM(4, **kw)
        layer.build((None, None, 3))
        assert not fast_path_ok(layer), kw
    rng = np.random.default_rng(3)
    ref, fused = _pair(keras, rng, activation="relu", return_sequences=True)
    x = rng.normal(size=(2, 5, 5)).astype("float32")
    np.testing.assert_allclose(fused(x).numpy(), ref(x).numpy(), atol=1e-6)


def test_a_run_with_the_fused_layer_saves_and_reloads(tmp_path, tf, keras):
    from seqkit.layers.fused_lstm import FusedLSTM
    from seqkit.training.train import load_model

    rng = np.random.default_rng(4)
    inp = keras.Input((None,), dtype="int32")
    h = keras.layers.Embedding(20, 6, mask_zero=True)(inp)
    h = FusedLSTM(5, return_sequences=True, name="rnn_0")(h)
    model = keras.Model(inp, keras.layers.Dense(20)(h))
    x = rng.integers(1, 20, size=(3, 9)).astype("int32")
    x[1, 6:] = 0
    path = str(tmp_path / "m.keras")
    model.save(path)
    again = load_model(path)
    assert isinstance(again.get_layer("rnn_0"), FusedLSTM)
    np.testing.assert_array_equal(again(x).numpy(), model(x).numpy())
