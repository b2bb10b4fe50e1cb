"""Acceptor head: textbook shapes, final-valid-state parity (padded == alone, forward and
bidirectional), masked pooling by hand, the majority-class baseline."""

import numpy as np
import pytest

from tests.seqhelp import fitted_head, frame_records, seq_recipe, token_records

WORDS = list("abcdefgh")


def _token_head(keras, **kw):
    keras.utils.set_random_seed(11)
    recs = token_records([WORDS[:5], WORDS[3:8], WORDS[1:4]], labels=["x", "y", "z"])
    head = fitted_head(seq_recipe("acceptor", **kw), recs)
    return head, head.build_model()


def test_item1_acceptor_shape_two_five_token_sequences(keras):
    head, model = _token_head(keras)
    assert len(head.labels) == 3
    x = np.array([[4, 5, 6, 7, 8], [9, 10, 11, 4, 5]], "int32")
    emb = keras.Model(model.input, model.get_layer("embedding").output)(x)
    assert tuple(emb.shape) == (2, 5, 3)  # two five-token sequences embedded at width 3
    assert tuple(model(x).shape) == (2, 3)


@pytest.mark.parametrize("bi", [False, True])
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_padded_sequence_gets_the_same_answer_as_alone(keras, bi, cell):
    head, model = _token_head(keras, bi=bi, cell=cell)
    seq = np.array([[4, 5, 6]], "int32")
    alone = model(seq).numpy()
    padded = model(np.array([[4, 5, 6, 0, 0, 0, 0], [7, 8, 9, 10, 11, 4, 5]], "int32")).numpy()
    np.testing.assert_allclose(padded[0], alone[0], atol=1e-5)


def test_bidirectional_final_is_forward_last_valid_and_backward_first(keras):
    """The pooled vector equals [forward output at the last valid step, backward output at step 0]
    of the same sequence run alone -- the backward pass does not start on padding."""
    head, model = _token_head(keras, bi=True)
    enc = keras.Model(model.input, model.get_layer("rnn_bi_0").output)
    pool = keras.Model(model.input, model.get_layer("pooling").output)
    alone = enc(np.array([[4, 5, 6]], "int32")).numpy()[0]  # [3, 8]
    want = np.concatenate([alone[2, :4], alone[0, 4:]])
    got = pool(np.array([[4, 5, 6, 0, 0]], "int32")).numpy()[0]
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("bi", [False, True])
def test_frames_padded_equals_alone_and_zero_frames_stay_valid(keras, bi):
    keras.utils.set_random_seed(5)
    rng = np.random.default_rng(0)
    arrs = [rng.normal(size=(n, 2)) for n in (3, 6, 4)]
    head = fitted_head(seq_recipe("acceptor", bi=bi), frame_records(arrs, ["p", "q", "p"]))
    model = head.build_model()
    a = head.inputs.encode(frame_records([arrs[0]], ["p"])[0])
    alone = model(a[None]).numpy()
    pad = np.full((2, 6, 2), np.nan, "float32")
    pad[0, :3] = a
    pad[1] = head.inputs.encode(frame_records([arrs[1]], ["q"])[0])
    np.testing.assert_allclose(model(pad).numpy()[0], alone[0], atol=1e-5)
    # an all-zero frame is a real step (silence), not padding
    z = a.copy()
    z[1] = 0.0
    assert not np.allclose(model(z[None]).numpy(), model(a[[0, 2]][None]).numpy(), atol=1e-6)


def test_masked_mean_and_max_pooling_by_hand(keras):
    from seqkit.layers.pooling import SequencePooling

    x = np.array([[[1.0, -2.0], [3.0, 4.0], [100.0, 100.0]]], "float32")
    mask = np.array([[True, True, False]])
    assert SequencePooling("mean")(x, mask=mask).numpy().tolist() == [[2.0, 1.0]]
    assert SequencePooling("max")(x, mask=mask).numpy().tolist() == [[3.0, 4.0]]
    assert SequencePooling("final")(x, mask=mask).numpy().tolist() == [[3.0, 4.0]]
    # an all-padding row gives zeros, not the padding's values
    assert SequencePooling("final")(x, mask=np.zeros((1, 3), bool)).numpy().tolist() == [[0.0, 0.0]]
    # no mask: every step is valid (the last step is the final one); bidirectional final:
    # forward half at the last valid step, backward half at step 0
    assert SequencePooling("final")(x).numpy().tolist() == [[100.0, 100.0]]
    assert SequencePooling("mean")(x).numpy().tolist() == [[float(np.float32(104.0) / np.float32(3.0)), 34.0]]
    assert SequencePooling("final", bidirectional=True)(x, mask=mask).numpy().tolist() == [[3.0, -2.0]]
    assert SequencePooling("final", bidirectional=True)(x, mask=np.zeros((1, 3), bool)).numpy().tolist() == [[0.0, 0.0]]
    # max over valid steps when the padding holds smaller values than every valid one
    neg = np.array([[[-5.0, -6.0], [-7.0, -1.0], [-100.0, -100.0]]], "float32")
    assert SequencePooling("max")(neg, mask=mask).numpy().tolist() == [[-5.0, -1.0]]


def test_acceptor_loss_is_cross_entropy_of_hard_targets(keras):
    head, model = _token_head(keras)
    x = np.array([[4, 5, 6], [7, 8, 0]], "int32")
    z = model(x).numpy()
    y = np.array([1 + 2, 1 + 0])  # classes 2 and 0, fed as class + 1
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    assert float(head.loss()(y, z)) == pytest.approx(-(logp[0, 2] + logp[1, 0]) / 2, rel=1e-5)


def test_scores_and_majority_baseline_by_hand(keras):
    from types import SimpleNamespace

    recs = token_records([["a"], ["b"], ["c"], ["a"]], labels=["x", "x", "y", "x"])
    head = fitted_head(seq_recipe("acceptor", head_opts={"confusion_matrix": True}), recs)
    f = head.scores(["x", "x", "y", "z"], ["x", "y", "y", "x"])
    assert f["accuracy"] == 0.5
    # x: P 1/2, R 1/2 -> F1 .5 ; y: P 1/2, R 1 -> F1 2/3 ; z unseen in training: counted
    assert f["macro_f1"] == pytest.approx((0.5 + 2 / 3) / 2, abs=1e-6)
    assert f["unseen_label_examples"] == 1
    assert f["confusion_matrix"]["rows"] == ["x", "y", "z"]
    assert f["confusion_matrix"]["matrix"] == [[1, 1], [0, 1], [1, 0]]
    prep = SimpleNamespace(splits={"train": recs, "valid": [], "test": token_records([["a"]] * 4, labels=list("xxyy"))})
    assert head.baselines(prep)["majority-class"]["test"]["accuracy"] == 0.5
