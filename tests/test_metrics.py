"""Figures by hand: per-class precision/recall/F1, macro-F1, confusion, tag schemes,
label vocabularies and the frame normaliser."""

import numpy as np
import pytest

from seqkit.metrics import classification as M


def test_per_class_and_macro_f1_by_hand():
    true = ["a", "a", "a", "b", "b", "c"]
    pred = ["a", "a", "b", "b", "c", "c"]
    pc = M.per_class(true, pred, ["a", "b", "c"])
    assert pc["a"] == {"precision": 1.0, "recall": pytest.approx(2 / 3, abs=1e-6), "f1": 0.8, "support": 3}
    assert pc["b"]["precision"] == 0.5 and pc["b"]["recall"] == 0.5 and pc["b"]["f1"] == 0.5
    assert pc["c"]["precision"] == 0.5 and pc["c"]["recall"] == 1.0
    assert M.accuracy(true, pred) == pytest.approx(4 / 6)
    assert M.macro_f1(true, pred, ["a", "b", "c", "never"]) == pytest.approx((0.8 + 0.5 + 2 / 3) / 3, abs=1e-6)


def test_confusion_matrix_rows_true_columns_predicted():
    cm = M.confusion_matrix(["a", "b", "b"], ["b", "b", "a"], ["a", "b"])
    assert cm["matrix"] == [[0, 1], [1, 1]]


@pytest.mark.parametrize("tags,scheme", [
    (["O", "B-PER", "I-PER"], "BIO"), (["O", "S-LOC", "B-PER", "E-PER"], "BIOES"),
    (["n", "v", "nr"], None), (["O"], None), (["B_X", "I_X"], "BIO")])
def test_tag_scheme_detection(tags, scheme):
    assert M.tag_scheme(tags) == scheme


def test_bioes_entities_are_strict():
    true = [["S-LOC", "O", "B-PER", "E-PER"]]
    pred = [["S-LOC", "O", "B-PER", "I-PER"]]  # the PER entity never ends: not an entity
    assert M.entity_scores(true, pred, "BIOES")["f1"] == pytest.approx(2 * 1.0 * 0.5 / 1.5)


def test_no_predicted_entity_scores_zero_without_a_warning():
    """An untrained tagger that answers O everywhere: precision, recall and F1 are 0 (nothing
    found), and seqeval's UndefinedMetricWarning is not passed on to the user."""
    import warnings

    cases = {"BIO": [["B-PER", "I-PER", "O"], ["O", "B-LOC"]],
             "BIOES": [["B-PER", "E-PER", "O"], ["O", "S-LOC"]]}
    for scheme, true in cases.items():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = M.entity_scores(true, [["O"] * len(t) for t in true], scheme)
        assert got == {"precision": 0.0, "recall": 0.0, "f1": 0.0}


def test_label_vocabulary_orders_by_frequency_and_round_trips(tmp_path):
    from seqkit.data.labels import LabelVocabulary

    v = LabelVocabulary.build(["b", "a", "a", "c", "b", "a"])
    assert v.names == ["a", "b", "c"] and v.id("zzz") == -1
    v.save(str(tmp_path / "l.json"))
    assert LabelVocabulary.load(str(tmp_path / "l.json")).names == v.names


def test_normaliser_by_hand_and_constant_channel(tmp_path):
    from seqkit.data.normalize import FrameNormalizer

    n = FrameNormalizer.fit([np.array([[1.0, 5.0], [3.0, 5.0]]), np.array([[5.0, 5.0]])])
    assert n.mean.tolist() == [3.0, 5.0]
    assert n.std[0] == pytest.approx(np.sqrt(8 / 3)) and n.std[1] == 1.0  # constant -> 1
    assert n(np.array([[3.0, 7.0]])).tolist() == [[0.0, 2.0]]
    n.save(str(tmp_path / "n.json"))
    assert FrameNormalizer.load(str(tmp_path / "n.json")).std.tolist() == n.std.tolist()
