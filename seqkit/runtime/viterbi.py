"""Viterbi decoding of one linear-chain CRF sequence in numpy (no TensorFlow needed).

Used by the streaming runtime (a CRF tagger's step export gives emissions per
step; the best tag path is known only when the sequence ends) and as the
reference of the in-graph decoder (:func:`seqkit.layers.crf.crf_viterbi`).
"""

from __future__ import annotations

import numpy as np


def viterbi(emissions, transitions, start, end) -> np.ndarray:
    """The highest-scoring tag path of one sequence.

    Args:
        emissions: ``[T, C]`` float tag scores per step (``T >= 1``).
        transitions: ``[C, C]`` float, ``transitions[i, j]`` = score of tag ``i`` followed by ``j``.
        start, end: ``[C]`` float scores of the first and of the last tag.

    Returns:
        ``[T]`` int32: ``argmax_y start[y_0] + sum_t emissions[t, y_t]
        + sum_{t>0} transitions[y_{t-1}, y_t] + end[y_{T-1}]`` by dynamic programming
        (Viterbi 1967; the max-product recursion of Lafferty et al. 2001, sec. 3:
        ``delta_t(j) = max_i delta_{t-1}(i) + transitions[i, j] + emissions[t, j]``).
        Ties go to the lowest tag id, as ``np.argmax`` / ``tf.argmax`` break them.

    Raises:
        ValueError: an empty sequence or mismatched shapes.
    """
    e = np.asarray(emissions, np.float64)
    a = np.asarray(transitions, np.float64)
    if e.ndim != 2 or e.shape[0] == 0 or a.shape != (e.shape[1], e.shape[1]):
        raise ValueError(f"viterbi: emissions [T>=1, C] and transitions [C, C] expected, got "
                         f"{e.shape} and {a.shape}.")
    delta = np.asarray(start, np.float64) + e[0]
    back = []
    for t in range(1, len(e)):
        scores = delta[:, None] + a  # [from, to]
        back.append(np.argmax(scores, axis=0))
        delta = scores.max(axis=0) + e[t]
    best = [int(np.argmax(delta + np.asarray(end, np.float64)))]
    for bp in reversed(back):
        best.append(int(bp[best[-1]]))
    return np.asarray(best[::-1], np.int32)


def marginals(emissions, transitions, start, end) -> np.ndarray:
    """Per-step tag marginals ``p(y_t = j | x)`` ``[T, C]`` float64 of one sequence.

    Forward-backward in log space (Rabiner 1989, eqs. 20, 24-27; Sutton & McCallum 2012,
    sec. 4.1): ``p(y_t = j | x) = exp(alpha_t(j) + beta_t(j) - log Z)``; arguments as
    :func:`viterbi`.
    """
    e = np.asarray(emissions, np.float64)
    a = np.asarray(transitions, np.float64)
    T = len(e)

    def lse(x, axis):
        m = x.max(axis=axis, keepdims=True)
        return np.squeeze(m, axis) + np.log(np.exp(x - m).sum(axis=axis))

    alpha = np.zeros_like(e)
    beta = np.zeros_like(e)
    alpha[0] = np.asarray(start, np.float64) + e[0]
    for t in range(1, T):
        alpha[t] = lse(alpha[t - 1][:, None] + a, 0) + e[t]
    beta[-1] = np.asarray(end, np.float64)
    for t in range(T - 2, -1, -1):
        beta[t] = lse(a + (e[t + 1] + beta[t + 1])[None, :], 1)
    log_z = lse(alpha[-1] + beta[-1], 0)
    return np.exp(alpha + beta - log_z)
