"""1-nearest-neighbour DTW baseline on a UCR/UEA ``.ts`` split pair (a measurement, not a test).

    python -m bench.jv_dtw                    # JapaneseVowels from sktime: TRAIN -> TEST
    python -m bench.jv_dtw --train A.ts --test B.ts

Multivariate "dependent" DTW (DTW_D; Shokoohi-Yekta et al. 2017): the local cost of aligning
frame ``a_i`` with ``b_j`` is the squared Euclidean distance over all channels, ``sum_d (a_id -
b_jd)^2``; the cumulative cost ``D(i, j) = c(i, j) + min(D(i-1, j), D(i, j-1), D(i-1, j-1))``
(Sakoe & Chiba 1978), full window, raw (unnormalised) frames. Each test case gets the label of
the training case with the smallest ``D(T_a, T_b)``; ties go to the first such case. Prints the
accuracy and the seconds taken.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def dtw_to_all(a: np.ndarray, bank: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """DTW_D distances from ``a [Ta, D]`` to every padded ``bank [N, Tmax, D]`` row of
    ``lengths [N]`` valid frames; returns ``[N] float64``."""
    n, tmax, _ = bank.shape
    cost = ((a[None, :, None, :] - bank[:, None, :, :]) ** 2).sum(-1)  # [N, Ta, Tmax]
    inf = np.full(n, np.inf)
    prev = np.full((n, tmax + 1), np.inf)
    prev[:, 0] = 0.0
    for i in range(a.shape[0]):
        cur = np.full((n, tmax + 1), np.inf)
        for j in range(1, tmax + 1):
            best = np.minimum(np.minimum(prev[:, j], cur[:, j - 1]), prev[:, j - 1])
            cur[:, j] = cost[:, i, j - 1] + best
        prev = cur
        prev[:, 0] = inf  # only (0, 0) starts a path
    return prev[np.arange(n), lengths]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train")
    ap.add_argument("--test")
    args = ap.parse_args()

    from seqkit.data.base import read_text
    from seqkit.data.packaged import UcrSktime
    from seqkit.data.ts_file import parse_ts

    if not args.train:
        src = UcrSktime.__new__(UcrSktime)
        src.options = UcrSktime.Options(name="JapaneseVowels")
        args.train = os.path.join(src.folder(), "JapaneseVowels_TRAIN.ts")
        args.test = os.path.join(src.folder(), "JapaneseVowels_TEST.ts")
    train = parse_ts(read_text(args.train), args.train)
    test = parse_ts(read_text(args.test), args.test)
    t0 = time.time()
    lengths = np.array([len(r.frames) for r in train])
    bank = np.zeros((len(train), lengths.max(), train[0].frames.shape[1]))
    for k, r in enumerate(train):
        bank[k, :len(r.frames)] = r.frames
    correct = 0
    for r in test:
        nearest = int(np.argmin(dtw_to_all(r.frames.astype(np.float64), bank, lengths)))
        correct += train[nearest].label == r.label
    print(f"1-NN DTW_D (full window, raw frames): accuracy {correct / len(test):.4f} "
          f"({correct}/{len(test)}; {len(train)} training cases; {time.time() - t0:.1f} s)")


if __name__ == "__main__":
    main()
