"""Training knobs: label smoothing, class weights, AdamW's weight decay, decoder dropout, and the
recipe's checks of them (numbers worked by hand)."""

import math

import numpy as np
import pytest

from tests.conftest import make_recipe
from tests.seqhelp import fitted_head, seq_recipe, token_records

# softmax([1, 2, 3]) and the label-smoothed target of class 0 with eps = 0.3 over 3 classes
P = np.array([0.09003057, 0.24472847, 0.66524096])
Q = np.array([0.8, 0.1, 0.1])


def test_label_smoothing_loss_and_gradient_by_hand(tf):
    """-sum q log p = 0.8 * 2.40760596 + 0.1 * 1.40760596 + 0.1 * 0.40760596; gradient p - q."""
    from seqkit.training.losses import smoothed_sparse_softmax_cross_entropy

    z = tf.constant([[1.0, 2.0, 3.0]])
    with tf.GradientTape() as tape:
        tape.watch(z)
        smoothed, plain = smoothed_sparse_softmax_cross_entropy(tf.constant([0]), z, 0.3)
    assert float(smoothed[0]) == pytest.approx(2.10760596, abs=1e-6)
    assert float(plain[0]) == pytest.approx(2.40760596, abs=1e-6)
    np.testing.assert_allclose(tape.gradient(smoothed, z)[0].numpy(), P - Q, atol=1e-6)
    with tf.GradientTape() as tape:  # the plain output's gradient is softmax - onehot
        tape.watch(z)
        _, plain = smoothed_sparse_softmax_cross_entropy(tf.constant([0]), z, 0.3)
    np.testing.assert_allclose(tape.gradient(plain, z)[0].numpy(), P - [1, 0, 0], atol=1e-6)


def test_smoothed_loss_masks_padding_and_the_metric_stays_plain(tf):
    """The loss averages the smoothed values of real targets; the shared metric gets plain CE."""
    from seqkit.training.losses import MaskedCrossEntropy, MaskedSparseCrossEntropy, share_cross_entropy

    loss, metric = MaskedSparseCrossEntropy(offset=1, label_smoothing=0.3), MaskedCrossEntropy(offset=1)
    share_cross_entropy(loss, [metric])
    y = tf.constant([1, 0])  # class 0, then padding
    z = tf.constant([[1.0, 2.0, 3.0], [9.0, 0.0, 0.0]])
    assert float(loss(y, z)) == pytest.approx(2.10760596, abs=1e-6)
    metric.update_state(y, z)
    assert float(metric.result()) == pytest.approx(2.40760596, abs=1e-6)
    assert getattr(metric, "shared_steps", 0) == 1


def test_class_weights_scale_the_loss_by_the_hand_factor(tf):
    """Equal logits: every example's CE is log 3, so weights (2, 0.5, 1) on one example of each
    class make the loss (2 + 0.5 + 1) / 3 = 7/6 of the unweighted one; padding counts nowhere."""
    from seqkit.training.losses import MaskedSparseCrossEntropy

    y = tf.constant([1, 2, 3, 0])
    z = tf.zeros([4, 3])
    plain = float(MaskedSparseCrossEntropy(offset=1)(y, z))
    weighted = float(MaskedSparseCrossEntropy(offset=1, class_weights=[2.0, 0.5, 1.0])(y, z))
    assert plain == pytest.approx(math.log(3), rel=1e-6)
    assert weighted == pytest.approx(math.log(3) * 7 / 6, rel=1e-6)


def test_balanced_and_mapped_class_weights_of_the_acceptor(keras):
    """balanced: n / (C * n_c) = 4 / (2 * 3) for 'a' and 4 / (2 * 1) for 'b'; a mapping gives the
    other labels 1; the acceptor's loss carries them and survives serialisation."""
    recs = token_records(["xy", "xz", "yy", "zz"], labels=["a", "a", "a", "b"])
    head = fitted_head(seq_recipe("acceptor", training={"class_weight": "balanced"}), recs)
    assert head.labels.names == ["a", "b"] and head.class_weights == pytest.approx([2 / 3, 2.0])
    head = fitted_head(seq_recipe("acceptor", training={"class_weight": {"b": 3}}), recs)
    assert head.class_weights == [1.0, 3.0]
    loss = head.loss()
    assert type(loss).from_config(loss.get_config()).class_weights == [1.0, 3.0]
    from seqkit.errors import RecipeError

    with pytest.raises(RecipeError, match=r"training.class_weight: 'c' is not a label .*'a', 'b'"):
        fitted_head(seq_recipe("acceptor", training={"class_weight": {"c": 2}}), recs)


def test_adamw_decoupled_decay_one_step_by_hand(keras):
    """w <- w - lr * wd * w, then Adam's first step lr * g / |g| (Loshchilov & Hutter 2019):
    [1, -2] -> [0.99, -1.98] -> [0.89, -2.08] with lr 0.1, wd 0.1, g = [0.5, 0.5]."""
    from seqkit.recipe import Recipe
    from seqkit.training.train import make_optimizer

    t = Recipe.from_dict(make_recipe(training={"optimizer": "adamw", "learning_rate": 0.1,
                                               "weight_decay": 0.1, "clipnorm": None})).training
    opt = make_optimizer(t)
    w = keras.Variable(np.array([1.0, -2.0], "float32"))
    opt.apply([keras.ops.convert_to_tensor(np.array([0.5, 0.5], "float32"))], [w])
    np.testing.assert_allclose(w.numpy(), [0.89, -2.08], atol=1e-5)
    default = Recipe.from_dict(make_recipe(training={"optimizer": "adamw"})).training
    assert make_optimizer(default).weight_decay == pytest.approx(0.004)  # null: Keras's default


def test_decoder_dropout_only_in_training_and_saved(keras):
    from seqkit.data.vocab import Vocabulary
    from seqkit.layers.decoder import Seq2SeqDecoder
    from seqkit.recipe import recipe_from_dict
    from seqkit.registry import HEADS

    raw = {"name": "g", "seed": 1, "data": {"source": "cmudict", "path": "unused"},
           "model": {"units": 6, "embedding_dim": 4},
           "head": {"type": "seq2seq", "attention": "luong", "decoder_dropout": 0.5}}
    head = HEADS.get("seq2seq")(recipe_from_dict(raw), Vocabulary.build(["ab"]), Vocabulary.build(["xy"]))
    model = head.build_model()
    dec = model.get_layer("decoder")
    assert isinstance(dec, Seq2SeqDecoder) and dec.get_config()["dropout"] == 0.5
    src, tgt = np.array([[4, 5, 4]], "int32"), np.array([[1, 4, 5, 4]], "int32")
    a, b = model([src, tgt], training=False), model([src, tgt], training=False)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    c = model([src, tgt], training=True)
    assert not np.allclose(a.numpy(), c.numpy())
    ids = dec.step(keras.ops.convert_to_tensor(np.array([1], "int32")), *_step_args(dec, model, src))[0]
    np.testing.assert_allclose(ids.numpy(), a.numpy()[:, 0], atol=1e-5)  # decoding: no dropout


def _step_args(dec, model, src):
    enc = model.get_layer("encoder")(src)
    memory, mask = enc[0], keras_not_equal(src)
    return dec.full_initial_states(list(enc[1:])), [memory, mask, dec.precompute(memory)]


def keras_not_equal(src):
    import keras

    return keras.ops.not_equal(keras.ops.convert_to_tensor(src), 0)


@pytest.mark.parametrize("training, where, message", [
    ("  schedule:\n    type: cosine\n    patience: 3\n", 9,
     "training.schedule: patience: not used by type 'cosine'"),
    ("  schedule:\n    type: step\n", 9, "type 'step' needs step_size"),
    ("  schedule:\n    type: plateau\n    factor: 1.5\n", 11, "training.schedule.factor: expected a number in (0, 1)"),
    ("  label_smoothing: 1\n", 9, "training.label_smoothing: expected a number in [0, 1)"),
    ("  weight_decay: -0.1\n", 9, "training.weight_decay: expected a finite number >= 0"),
    ("  class_weight: {pos: 2}\n", 9, "class weights apply to head.type acceptor"),
    ("  class_weight: bal\n", 9, "expected 'balanced', a mapping"),
])
def test_recipe_refuses_bad_knobs_naming_the_line(write_recipe, training, where, message):
    from seqkit.errors import RecipeError
    from seqkit.recipe import load_recipe

    text = ("name: t\ndata:\n  source: pydoc_topics\nmodel:\n  units: 8\nhead:\n  type: language_model\n"
            "training:\n" + training)
    path = write_recipe({})
    open(path, "w").write(text)
    with pytest.raises(RecipeError) as exc:
        load_recipe(path)
    assert f"recipe.yaml:{where}:" in str(exc.value) and message in str(exc.value)


def test_label_smoothing_refused_for_the_stream_lm(write_recipe):
    from seqkit.errors import RecipeError
    from seqkit.recipe import Recipe

    raw = make_recipe(data={"layout": "stream"}, training={"label_smoothing": 0.1})
    with pytest.raises(RecipeError, match="training.label_smoothing: the stream language model"):
        Recipe.from_dict(raw)
