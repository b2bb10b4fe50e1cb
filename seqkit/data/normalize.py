"""Per-feature standardisation of real-valued frames, fitted on the training split.

``z[t, d] = (x[t, d] - mean[d]) / std[d]`` with ``mean`` and ``std`` (population
standard deviation) taken over every valid frame of every training sequence;
a feature with ``std < 1e-8`` (constant in training) gets ``std = 1``. Saved in
the run directory as ``normalizer.json`` so evaluation and prediction apply
the training statistics, never their own.
"""

from __future__ import annotations

import json
import os

import numpy as np

from seqkit.errors import DataError, RunDirError
from seqkit.runs.json_files import bounded_json


class FrameNormalizer:
    """Per-feature mean and standard deviation.

    Args:
        mean, std: ``[D]`` float arrays.
    """

    def __init__(self, mean, std):
        self.mean = np.asarray(mean, "float64")
        self.std = np.asarray(std, "float64")

    @property
    def width(self) -> int:
        return int(self.mean.shape[0])

    @classmethod
    def fit(cls, sequences: list) -> "FrameNormalizer":
        """Fit on a list of ``[T_i, D]`` arrays (all frames pooled).

        Raises:
            DataError: a frame value is NaN or infinite (training would only produce NaN).
        """
        allf = np.concatenate([np.asarray(s, "float64") for s in sequences], axis=0)
        bad = ~np.isfinite(allf)
        if bad.any():
            cols = np.flatnonzero(bad.any(axis=0))
            raise DataError(f"data: {int(bad.sum())} frame values of the training split are NaN or "
                            f"infinite (features {', '.join(map(str, cols[:10].tolist()))}"
                            f"{', ...' if len(cols) > 10 else ''}); clean or drop those frames.")
        mean, std = allf.mean(axis=0), allf.std(axis=0)
        return cls(mean, np.where(std < 1e-8, 1.0, std))

    def __call__(self, frames) -> np.ndarray:
        """``[T, D] -> [T, D]`` float32, standardised."""
        return ((np.asarray(frames, "float64") - self.mean) / self.std).astype("float32")

    def save(self, path: str) -> None:
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"mean": self.mean.tolist(), "std": self.std.tolist()}, f, allow_nan=False)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str) -> "FrameNormalizer":
        """Raises RunDirError: missing or malformed file."""
        try:
            d = bounded_json(path)
            return cls(d["mean"], d["std"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RunDirError(f"{path}: cannot read the frame normaliser ({exc}); the run "
                              f"directory is incomplete, train again.") from exc
