"""Language-model head: teacher forcing, masking/padding invariance, step parity."""

import numpy as np
import pytest

from seqkit.data.vocab import END_ID, START_ID, Vocabulary


@pytest.fixture(scope="module")
def lm(keras):
    from seqkit.recipe import recipe_from_dict
    from seqkit.registry import HEADS
    from tests.conftest import make_recipe

    keras.utils.set_random_seed(3)
    vocab = Vocabulary(["", "[UNK]", "<s>", "</s>"] + list("abcdefghij"))  # V = 14
    def build(cell="lstm", layers=2):
        r = recipe_from_dict(make_recipe(model={"cell": cell, "units": 8, "embedding_dim": 6, "layers": layers}))
        head = HEADS.get("language_model")(r, vocab)
        return head, head.build_model()
    return build


def test_item5_teacher_forcing_alignment(tf):
    from seqkit.heads.language_model.head import teacher_forcing_pair

    x, y = teacher_forcing_pair(tf.constant([4, 8, 9]))
    assert x.numpy().tolist() == [START_ID, 4, 8]
    assert y.numpy().tolist() == [4, 8, 9]


def test_item1_lm_shape_and_loss_scores_logits_after_reading_against_next(tf, lm):
    head, model = lm()
    x = np.random.default_rng(0).integers(4, 10, size=(2, 5)).astype("int32")
    logits = model(x)
    assert tuple(logits.shape) == (2, 5, 14)  # textbook item 1: [2, 5, V]
    # pipeline view of a line [4, 8]: recorded [4, 8, </s>] -> inputs [<s>, 4, 8], targets [4, 8, </s>]
    inp, tgt = head.to_pair(tf.constant([4, 8]))
    assert inp.numpy().tolist() == [START_ID, 4, 8] and tgt.numpy().tolist() == [4, 8, END_ID]
    z = model(inp[None]).numpy()[0]
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    # the logits produced after reading 4 (position 1) are scored against 8
    expected = -(logp[0, 4] + logp[1, 8] + logp[2, END_ID]) / 3
    got = float(head.loss()(tgt[None], z[None]))
    assert got == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("cell", ["lstm", "gru", "simple_rnn"])
def test_extra_padding_changes_neither_loss_nor_gradients(tf, lm, cell):
    head, model = lm(cell)
    x = np.array([[2, 5, 6, 7], [2, 8, 0, 0]], "int32")
    y = np.array([[5, 6, 7, 3], [8, 3, 0, 0]], "int32")
    loss_fn = head.loss()

    def loss_and_grads(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=False))
        return float(loss), [g.numpy() if not isinstance(g, tf.IndexedSlices) else tf.convert_to_tensor(g).numpy()
                             for g in tape.gradient(loss, model.trainable_weights)]

    l1, g1 = loss_and_grads(x, y)
    pad = lambda a: np.pad(a, ((0, 0), (0, 5)))  # noqa: E731
    l2, g2 = loss_and_grads(pad(x), pad(y))
    assert l1 == pytest.approx(l2, abs=1e-6)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_all_padding_row_neither_crashes_nor_changes_other_rows(lm):
    head, model = lm()
    batch = np.array([[5, 6, 0, 0], [0, 0, 0, 0]], "int32")
    out = model(batch).numpy()
    alone = model(batch[:1]).numpy()
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[0], alone[0], atol=1e-6)
    loss = float(head.loss()(np.array([[6, 3, 0, 0], [0, 0, 0, 0]]), out))
    assert np.isfinite(loss)


@pytest.mark.parametrize("cell", ["lstm", "gru", "simple_rnn"])
def test_step_by_step_equals_full_sequence(tf, lm, cell):
    from seqkit.heads.language_model.head import LanguageModelStepper

    head, model = lm(cell)
    x = np.array([[2, 5, 6, 7, 9], [2, 8, 4, 4, 5]], "int32")
    full = model(x).numpy()
    st = LanguageModelStepper(model)
    states = st.initial_state(2)
    assert [s.shape.as_list() for s in states] == [[2, 8]] * (len(states))
    for t in range(x.shape[1]):
        logits, states = st.step(tf.constant(x[:, t]), states)
        np.testing.assert_allclose(logits.numpy(), full[:, t], atol=1e-5)


def test_masked_accuracy_and_perplexity_ignore_padding(tf):
    from seqkit.training.losses import MaskedAccuracy, MaskedPerplexity

    y = np.array([[1, 1, 0]])
    z = np.log(np.array([[[0.1, 0.9, 0.0 + 1e-9], [0.1, 0.2, 0.7], [0.9, 0.05, 0.05]]], "float32"))
    acc, ppl = MaskedAccuracy(), MaskedPerplexity()
    acc.update_state(y, z)
    ppl.update_state(y, z)
    assert float(acc.result()) == 0.5
    assert float(ppl.result()) == pytest.approx(np.exp(-(np.log(0.9) + np.log(0.2)) / 2), rel=1e-5)
