"""Tagger head: textbook shapes, padding excluded from loss and metrics, baseline and
scores by hand (per-tag P/R/F1, seqeval entity F1)."""

from types import SimpleNamespace

import numpy as np
import pytest

from tests.seqhelp import fitted_head, seq_recipe, token_records

ROWS = [list("abcde"), list("edcba"), list("aabb")]
TAGS = [["N", "V", "D", "P", "N"], ["N", "P", "D", "V", "N"], ["N", "N", "V", "V"]]


def _head(keras, **kw):
    keras.utils.set_random_seed(2)
    head = fitted_head(seq_recipe("tagger", **kw), token_records(ROWS, tags=TAGS))
    return head, head.build_model()


def test_item1_tagger_shape_four_classes(keras):
    head, model = _head(keras)
    assert len(head.labels) == 4
    x = np.array([[4, 5, 6, 7, 8], [8, 7, 6, 5, 4]], "int32")
    assert tuple(model(x).shape) == (2, 5, 4)


def test_item7_deep_bidirectional_lstm_in_the_tagger(keras):
    head, model = _head(keras, units=4, layers=2, bi=True)
    enc = keras.Model(model.input, model.get_layer("rnn_bi_1").output)
    x = np.array([[4, 5, 6, 7, 8], [8, 7, 6, 5, 4]], "int32")
    assert tuple(enc(x).shape) == (2, 5, 8)
    assert tuple(model(x).shape) == (2, 5, 4)


@pytest.mark.parametrize("bi,layers", [(False, 1), (True, 2)])
def test_loss_and_gradients_unchanged_by_extra_padding(tf, keras, bi, layers):
    head, model = _head(keras, bi=bi, layers=layers)
    x = np.array([[4, 5, 6, 7], [5, 6, 0, 0]], "int32")
    y = np.array([[1, 2, 3, 4], [2, 1, 0, 0]], "int32")  # tag + 1, 0 = padding
    loss_fn = head.loss()

    def run(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x))
        grads = tape.gradient(loss, model.trainable_weights)
        return float(loss), [tf.convert_to_tensor(g).numpy() for g in grads]

    l1, g1 = run(x, y)
    l2, g2 = run(np.pad(x, ((0, 0), (0, 6))), np.pad(y, ((0, 0), (0, 6))))
    assert l1 == pytest.approx(l2, abs=1e-6)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_tags_at_padding_never_reach_metrics(keras):
    from seqkit.training.losses import MaskedAccuracy

    head, model = _head(keras)
    # keras metric: padding targets (0) are not counted whatever the logits say there
    z = np.zeros((1, 4, 4), "float32")
    z[0, :, 2] = 1.0  # predicts class 2 everywhere
    acc = MaskedAccuracy(offset=1)
    acc.update_state(np.array([[3, 1, 0, 0]]), z)
    assert float(acc.result()) == 0.5 and float(acc.total) == 2.0
    # head.evaluate: the same records, batched with a long one (more padding) or alone
    recs = token_records(ROWS, tags=TAGS)
    both = head.evaluate(model, recs)
    assert both["tokens"] == 14
    singles = [head.evaluate(model, [r]) for r in recs]
    correct = sum(round(s["accuracy"] * s["tokens"]) for s in singles)
    assert round(both["accuracy"] * 14) == correct


def test_scores_by_hand_with_bio_entities(keras):
    recs = token_records([["a", "b", "c", "d"]], tags=[["B-PER", "I-PER", "O", "B-LOC"]])
    head = fitted_head(seq_recipe("tagger"), recs)
    true = [["B-PER", "I-PER", "O", "B-LOC"]]
    pred = [["B-PER", "O", "O", "B-LOC"]]
    f = head.scores(true, pred)
    assert f["accuracy"] == 0.75
    assert f["entity_scheme"] == "BIO"
    # entities: true {PER(0-1), LOC(3)}, predicted {PER(0), LOC(3)}: 1 of 2 right each way
    assert f["entity_f1"] == pytest.approx(0.5)
    assert f["per_tag"]["I-PER"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert f["per_tag"]["O"]["precision"] == 0.5 and f["per_tag"]["O"]["recall"] == 1.0


def test_most_frequent_tag_baseline_by_hand(keras):
    from seqkit.heads.tagger.head import MostFrequentTag

    train = token_records([["the", "dog", "runs"], ["the", "runs"], ["dog", "dog"]],
                          tags=[["D", "N", "V"], ["D", "N"], ["N", "V"]])
    base = MostFrequentTag(train)
    # dog: N 2, V 1 -> N; runs: V 1, N 1 -> V (seen first); unknown -> N (4 of 7)
    assert base(["dog", "runs", "cat"]) == ["N", "V", "N"]
    head = fitted_head(seq_recipe("tagger"), train)
    prep = SimpleNamespace(splits={"train": train, "valid": [],
                                   "test": token_records([["dog", "cat"]], tags=[["V", "N"]])})
    assert head.baselines(prep)["most-frequent-tag-per-word"]["test"]["accuracy"] == 0.5


def test_tagger_refuses_misaligned_tags(keras):
    from seqkit.errors import DataError

    head = fitted_head(seq_recipe("tagger"), token_records(ROWS, tags=TAGS))
    bad = token_records([["a", "b"]], tags=[["N"]])
    with pytest.raises(DataError, match="row 0: 2 input steps but 1 tags"):
        head.check_records(bad, "train")


def test_frame_tagger_padded_equals_alone(keras):
    """The tagger reads frames too: NaN padding is masked, outputs at valid steps unchanged."""
    from seqkit.data.records import Record

    keras.utils.set_random_seed(4)
    rng = np.random.default_rng(1)
    recs = [Record(frames=rng.normal(size=(n, 3)).astype("float32"), tags=["s", "v"] * (n // 2) + ["s"] * (n % 2))
            for n in (4, 7)]
    head = fitted_head(seq_recipe("tagger", bi=True, layers=2), recs)
    model = head.build_model()
    a = head.inputs.encode(recs[0])
    alone = model(a[None]).numpy()[0]
    pad = np.full((2, 7, 3), np.nan, "float32")
    pad[0, :4] = a
    pad[1] = head.inputs.encode(recs[1])
    out = model(pad).numpy()
    assert out.shape == (2, 7, 2) and np.isfinite(out).all()
    np.testing.assert_allclose(out[0, :4], alone, atol=1e-5)
