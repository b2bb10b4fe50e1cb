"""The JapaneseVowels measurement helpers: DTW_D worked by hand and stratified CV folds."""

import numpy as np

from bench.jv_cv import fold_files
from bench.jv_dtw import dtw_to_all


def test_dtw_d_worked_by_hand_with_padded_bank():
    # a = 0, 1, 2 against b = 0, 2: costs (a_i - b_j)^2 = [[0, 4], [1, 1], [4, 0]];
    # D(1,1) = 1 + min(4, 1, 0) = 1, D(2,0) = 5, D(2,1) = 0 + min(1, 5, 1) = 1.
    # Against c = 1 (one frame, padded): every a_i aligns to it, 1 + 0 + 1 = 2.
    a = np.array([[0.0], [1.0], [2.0]])
    bank = np.array([[[0.0], [2.0]], [[1.0], [0.0]], [[0.0], [1.0]]])
    d = dtw_to_all(a, bank, np.array([2, 1, 2]))
    np.testing.assert_allclose(d, [1.0, 2.0, 1.0])  # third, 0, 1: 0 + 0 + (2 - 1)^2


def test_folds_are_stratified_disjoint_and_cover_the_file(tmp_path):
    cases = [f"{i}.0,{i}.5:{i}.25,{i}.75:{c}" for c in ("a", "b") for i in range(5)]
    src = tmp_path / "X_TRAIN.ts"
    src.write_text("@problemName X\n@univariate false\n@dimensions 2\n@classLabel true a b\n@data\n"
                   + "\n".join(cases) + "\n")
    paths = fold_files(str(src), 5, 0, str(tmp_path / "folds"))
    held = []
    for tr, te in paths:
        test = open(te).read().split("@data\n")[1].split()
        train = open(tr).read().split("@data\n")[1].split()
        assert sorted(x[-1] for x in test) == ["a", "b"]  # one case of each class per fold
        assert not set(test) & set(train) and len(test) + len(train) == 10
        held += test
    assert sorted(held) == sorted(cases)
