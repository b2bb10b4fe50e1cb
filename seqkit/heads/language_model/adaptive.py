"""Adaptive models over the history that a language model's probabilities are mixed with.

Three online models, each giving, at every position ``t`` of a token stream, a probability
distribution over the vocabulary that depends only on the tokens (and, for the cache, the
network's hidden states) *before* ``t``:

* **Neural continuous cache** (E. Grave, A. Joulin, N. Usunier, "Improving Neural Language
  Models with a Continuous Cache", ICLR 2017, eq. 2-4): the stored pairs ``(h_i, x_{i+1})`` of
  the last ``window`` positions vote for their next token with weight ``exp(theta * h_t . h_i)``:
  ``p_cache(w) = sum_{i: x_{i+1} = w} exp(theta h_t.h_i) / sum_i exp(theta h_t.h_i)``
  (uniform over the vocabulary while the cache is empty).
* **Interpolated n-gram** with absolute discounting (Ney, Essen & Kneser 1994), updated as the
  text is read, recursively from the uniform distribution over the ``V`` ids:
  ``p_k(w) = (max(c(ctx_k, w) - D, 0) + D * u(ctx_k) * p_{k-1}(w)) / c(ctx_k)`` where ``c`` counts
  the earlier occurrences, ``u`` the distinct tokens that followed ``ctx_k`` (the last ``k``
  tokens) so far; ``p_k = p_{k-1}`` for an unseen context. Each ``p_k`` sums to 1 over the ids.
* **Longest match** (as the match models of context-mixing compressors, e.g. lpaq): the most
  recent earlier occurrence of the last ``min_length`` tokens is followed while it keeps
  predicting correctly; its next token gets probability ``(hits + 1) / (tries + 2)`` counted so
  far for the current match-length bucket, the rest shared evenly.

The components are mixed linearly, ``p = sum_k w_{b,k} p_k`` with weights per bucket ``b`` of the
match length (:data:`MATCH_BUCKETS`) and the network's confidence (:data:`CONFIDENCE_BINS`),
fitted by EM (:func:`fit_weights`) on the valid split only, and (``rate > 0``, chosen on valid)
moved on by online EM steps as the scored split is read (:func:`online_mixed_probs`).

Each model has two implementations that are checked against each other: a *whole-stream* one
that computes the probability of each actual next token at once (vectorised with NumPy; used to
score a split) and a *streaming* one that reads one token at a time and gives the full
distribution (:class:`OnlineNGram`, :class:`StreamingCache`, :class:`AdaptiveStream`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

# a match of length L falls in bucket searchsorted(MATCH_BUCKETS, L, "right"); no match: bucket 0
MATCH_BUCKETS = (1, 12, 16, 20, 24, 32, 48, 64, 128)
N_MATCH = len(MATCH_BUCKETS) + 1
# the network's largest next-token probability, binned the same way (known before the token is)
CONFIDENCE_BINS = (0.5, 0.8, 0.95)
N_CONFIDENCE = len(CONFIDENCE_BINS) + 1
N_BUCKETS = N_MATCH * N_CONFIDENCE


def mixing_bucket(match_bucket, model_probs):
    """The mixture's bucket: ``match_bucket * N_CONFIDENCE + confidence bin`` of ``max(model_probs)``.

    Args:
        match_bucket: int or int array ``[N]`` (:meth:`MatchModel.bucket`; 0 without a match model).
        model_probs: the network's distribution(s), ``[V]`` or ``[N, V]``.

    Returns:
        int (array) in ``[0, N_BUCKETS)``.
    """
    conf = np.searchsorted(CONFIDENCE_BINS, np.max(np.asarray(model_probs), axis=-1), "right")
    return np.asarray(match_bucket) * N_CONFIDENCE + conf


# ------------------------------------------------------------------------------- n-gram, whole
def context_ranks(seq, order: int, pad: int) -> list:
    """Dense ids of each position's context of length ``0..order``.

    Args:
        seq: int ``[N]`` token ids, each ``< pad``.
        order: the longest context.
        pad: the id standing for a position before the stream's start.

    Returns:
        ``order + 1`` int64 arrays ``[N]``: entry ``k`` at ``t`` identifies ``seq[t-k:t]`` (two
        positions get the same id exactly when their last ``k`` tokens are equal).
    """
    seq = np.asarray(seq, np.int64)
    n = len(seq)
    r = np.zeros(n, np.int64)
    out = [r]
    for k in range(1, order + 1):
        prev = np.full(n, pad, np.int64)
        prev[k:] = seq[:-k] if k < n else prev[k:]
        _, r = np.unique(r * (pad + 1) + prev, return_inverse=True)
        r = r.reshape(-1).astype(np.int64)
        out.append(r)
    return out


def _groups(keys):
    """``(order, group start index per sorted position)`` of a stable sort of ``keys``."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    idx = np.arange(len(keys))
    start = np.ones(len(keys), bool)
    start[1:] = sk[1:] != sk[:-1]
    return order, np.maximum.accumulate(np.where(start, idx, 0))


def prior_counts(keys):
    """How many earlier positions have the same key: int64 ``[N]`` (0 at a key's first use)."""
    keys = np.asarray(keys)
    order, gstart = _groups(keys)
    out = np.empty(len(keys), np.int64)
    out[order] = np.arange(len(keys)) - gstart
    return out


def prior_sums(keys, flags):
    """Sum of ``flags`` over the earlier positions with the same key: int64 ``[N]``."""
    keys = np.asarray(keys)
    order, gstart = _groups(keys)
    f = np.asarray(flags, np.int64)[order]
    cs = np.cumsum(f) - f  # exclusive
    out = np.empty(len(keys), np.int64)
    out[order] = cs - cs[gstart]
    return out


def ngram_counts(seq, order: int, pad: int) -> list:
    """The online counts behind each order's prediction of ``seq[t]``, for every ``t``.

    Returns:
        ``order + 1`` tuples ``(c, cw, u)`` of int64 ``[N]``: at ``t``, ``c`` = earlier
        occurrences of the context ``seq[t-k:t]`` (followed by something), ``cw`` = those
        followed by ``seq[t]``, ``u`` = distinct tokens that followed it.
    """
    seq = np.asarray(seq, np.int64)
    out = []
    for r in context_ranks(seq, order, pad):
        pair = r * (pad + 1) + seq
        cw = prior_counts(pair)
        out.append((prior_counts(r), cw, prior_sums(r, cw == 0)))
    return out


def ngram_target_probs(seq, start: int, orders, vocab_size: int, discount: float = 0.75,
                       counts=None) -> np.ndarray:
    """Probability the interpolated n-gram gives each actual token ``seq[t]``, ``t >= start``.

    The model reads ``seq`` from its beginning (``seq[:start]``: the history, e.g. the training
    text) and is updated after every token.

    Args:
        seq: int ``[N]`` ids in ``[0, vocab_size)``.
        start: the first scored position.
        orders: the context lengths wanted (e.g. ``(2, 4, 8)``).
        vocab_size: ``V``; the recursion starts from ``1 / V``.
        discount: ``D`` in ``(0, 1]``.
        counts: :func:`ngram_counts` of ``seq`` for ``max(orders)`` (computed when None).

    Returns:
        float64 ``[N - start, len(orders)]``.
    """
    orders = list(orders)
    counts = counts if counts is not None else ngram_counts(seq, max(orders), vocab_size)
    p = np.full(len(seq) - start, 1.0 / vocab_size)
    cols = {}
    for k, (c, cw, u) in enumerate(counts[:max(orders) + 1]):
        c, cw, u = c[start:], cw[start:], u[start:]
        seen = c > 0
        p = np.where(seen, (np.maximum(cw - discount, 0.0) + discount * u * p) / np.maximum(c, 1), p)
        cols[k] = p
    return np.stack([cols[k] for k in orders], axis=1)


# ---------------------------------------------------------------------------- n-gram, streaming
class OnlineNGram:
    """The interpolated n-gram of :func:`ngram_target_probs`, one token at a time, full distributions.

    Args:
        orders: the context lengths whose distributions :meth:`distributions` returns.
        vocab_size: ``V``.
        discount: ``D``.
    """

    def __init__(self, orders, vocab_size: int, discount: float = 0.75):
        self.orders = list(orders)
        self.top = max(self.orders)
        self.V = int(vocab_size)
        self.D = float(discount)
        self.follow = [dict() for _ in range(self.top + 1)]  # ctx tuple -> {token: count}
        self.history: list[int] = []

    def _ctx(self, k: int) -> tuple:
        h = self.history
        return tuple(h[len(h) - j] if len(h) - j >= 0 else self.V for j in range(1, k + 1))

    def distributions(self) -> np.ndarray:
        """float64 ``[len(orders), V]``: each order's distribution of the next token (sums to 1)."""
        p = np.full(self.V, 1.0 / self.V)
        out = {}
        for k in range(self.top + 1):
            f = self.follow[k].get(self._ctx(k))
            if f:
                vec = np.zeros(self.V)
                ids = np.fromiter(f.keys(), np.int64, len(f))
                cnt = np.fromiter(f.values(), np.float64, len(f))
                vec[ids] = np.maximum(cnt - self.D, 0.0)
                p = (vec + self.D * len(f) * p) / cnt.sum()
            out[k] = p
        return np.stack([out[k] for k in self.orders])

    def update(self, token: int) -> None:
        """Count ``token`` after each of its contexts, then append it to the history."""
        for k in range(self.top + 1):
            f = self.follow[k].setdefault(self._ctx(k), {})
            f[int(token)] = f.get(int(token), 0) + 1
        self.history.append(int(token))


# --------------------------------------------------------------------------------- match model
class MatchModel:
    """Longest-match predictor over the history (module docstring), one token at a time.

    Args:
        vocab_size: ``V``.
        min_length: tokens a context must repeat before its continuation is predicted.
        max_verify: a new match's length is measured backwards up to this many tokens.
    """

    def __init__(self, vocab_size: int, min_length: int = 6, max_verify: int = 64):
        self.V, self.m, self.max_verify = int(vocab_size), int(min_length), int(max_verify)
        self.history: list[int] = []
        self.table: dict = {}
        self.ptr, self.length = 0, 0
        self.hits = np.zeros(N_MATCH)
        self.tries = np.zeros(N_MATCH)

    def bucket(self) -> int:
        """The current match-length bucket (0: no match)."""
        return int(np.searchsorted(MATCH_BUCKETS, self.length, "right")) if self.length else 0

    def predicted(self) -> int:
        """The token the match predicts next, or -1."""
        return self.history[self.ptr] if self.length else -1

    def prob_of_hit(self) -> float:
        """``(hits + 1) / (tries + 2)`` of the current bucket, counted so far."""
        b = self.bucket()
        return (self.hits[b] + 1.0) / (self.tries[b] + 2.0)

    def distribution(self) -> np.ndarray:
        """float64 ``[V]`` summing to 1: ``P(hit)`` on the predicted token; uniform without a match."""
        if not self.length:
            return np.full(self.V, 1.0 / self.V)
        q = self.prob_of_hit()
        p = np.full(self.V, (1.0 - q) / (self.V - 1))
        p[self.predicted()] = q
        return p

    def target_prob(self, token: int) -> float:
        """:meth:`distribution` at ``token``."""
        if not self.length:
            return 1.0 / self.V
        q = self.prob_of_hit()
        return q if token == self.predicted() else (1.0 - q) / (self.V - 1)

    def update(self, token: int) -> None:
        """Score the match on ``token`` (its hit counts), append it, follow or look up a match."""
        token = int(token)
        h = self.history
        if self.length:
            b = self.bucket()
            hit = h[self.ptr] == token
            self.tries[b] += 1
            self.hits[b] += hit
            if hit:
                self.length += 1
                self.ptr += 1
            else:
                self.length = 0
        h.append(token)
        n = len(h)
        if n >= self.m:
            key = tuple(h[n - self.m:])
            if not self.length:
                cand = self.table.get(key)
                if cand is not None:  # h[cand - m: cand] == key: measure how far back it goes
                    length = self.m
                    while length < self.max_verify and cand - length - 1 >= 0 \
                            and h[cand - length - 1] == h[n - length - 1]:
                        length += 1
                    self.ptr, self.length = cand, length
            self.table[key] = n


def match_target_probs(seq, start: int, vocab_size: int, min_length: int = 6):
    """:class:`MatchModel` read over ``seq``: ``(probs [N - start] float64, buckets [N - start] int)``,
    the probability of each actual token ``seq[t]`` and the bucket it was predicted in, ``t >= start``."""
    mm = MatchModel(vocab_size, min_length)
    probs = np.empty(len(seq) - start)
    buckets = np.empty(len(seq) - start, np.int64)
    for t, tok in enumerate(np.asarray(seq, np.int64).tolist()):
        if t >= start:
            probs[t - start] = mm.target_prob(tok)
            buckets[t - start] = mm.bucket()
        mm.update(tok)
    return probs, buckets


# ------------------------------------------------------------------------------------ the cache
def cache_target_probs(hidden, targets, thetas, windows, vocab_size: int, block: int = 256) -> dict:
    """Grave et al.'s cache probability of each actual next token, for several settings at once.

    Args:
        hidden: float ``[N, H]``: ``hidden[t]`` is the state that predicts ``targets[t]``.
        targets: int ``[N]``.
        thetas: the ``theta`` values (> 0).
        windows: the window sizes (> 0): the pairs ``i`` with ``t - window <= i < t``.
        vocab_size: ``V`` (the empty cache's uniform ``1 / V``).

    Returns:
        ``{(theta, window): float64 [N]}``.
    """
    h = np.asarray(hidden, np.float64)
    y = np.asarray(targets, np.int64)
    n = len(h)
    wmax = max(windows)
    out = {(th, w): np.empty(n) for th in thetas for w in windows}
    for a in range(0, n, block):
        b = min(n, a + block)
        lo = max(0, a - wmax)
        s = h[a:b] @ h[lo:b].T                                    # [bk, b - lo]
        back = np.arange(a, b)[:, None] - np.arange(lo, b)[None, :]  # t - i
        same = y[lo:b][None, :] == y[a:b][:, None]
        for th in thetas:
            z = np.where((back > 0) & (back <= wmax), th * s, -np.inf)
            m = z.max(axis=1, keepdims=True)
            e = np.exp(z - np.where(np.isfinite(m), m, 0.0))
            for w in windows:
                ew = np.where(back <= w, e, 0.0)
                den, num = ew.sum(axis=1), (ew * same).sum(axis=1)
                ok = den > 0
                out[(th, w)][a:b] = np.where(ok, num / np.where(ok, den, 1.0), 1.0 / vocab_size)
    return out


class StreamingCache:
    """:func:`cache_target_probs`' cache, one position at a time, full distributions.

    Args:
        theta, window, vocab_size: as :func:`cache_target_probs`.
    """

    def __init__(self, theta: float, window: int, vocab_size: int):
        self.theta, self.window, self.V = float(theta), int(window), int(vocab_size)
        self.h: list = []
        self.y: list = []

    def distribution(self, hidden) -> np.ndarray:
        """float64 ``[V]`` (sums to 1) for the state ``hidden [H]``."""
        if not self.h:
            return np.full(self.V, 1.0 / self.V)
        z = self.theta * (np.asarray(self.h) @ np.asarray(hidden, np.float64))
        e = np.exp(z - z.max())
        if not e.sum() > 0:
            return np.full(self.V, 1.0 / self.V)
        return np.bincount(np.asarray(self.y), weights=e, minlength=self.V) / e.sum()

    def update(self, hidden, target: int) -> None:
        """Store the pair ``(hidden, target)``; the oldest leaves past ``window``."""
        self.h.append(np.asarray(hidden, np.float64))
        self.y.append(int(target))
        if len(self.h) > self.window:
            del self.h[0], self.y[0]


# ------------------------------------------------------------------------------------- mixture
def fit_weights(probs, buckets, iterations: int = 60) -> np.ndarray:
    """Mixture weights per bucket maximising ``sum_t log sum_k w[b_t, k] probs[t, k]`` (EM).

    Args:
        probs: float ``[N, K]``: each component's probability of the actual token.
        buckets: int ``[N]`` in ``[0, N_BUCKETS)``; a bucket with fewer than 50 positions takes
            the weights fitted on all positions.
        iterations: EM steps (each never lowers the likelihood).

    Returns:
        float64 ``[N_BUCKETS, K]``, rows summing to 1.
    """
    p = np.maximum(np.asarray(probs, np.float64), 1e-300)
    buckets = np.asarray(buckets)

    def em(q):
        w = np.full(q.shape[1], 1.0 / q.shape[1])
        for _ in range(iterations):
            r = q * w
            r /= r.sum(axis=1, keepdims=True)
            w = r.mean(axis=0)
        return w

    glob = em(p)
    return np.stack([em(p[buckets == b]) if (buckets == b).sum() >= 50 else glob
                     for b in range(N_BUCKETS)])


def mixed_probs(probs, buckets, weights) -> np.ndarray:
    """``sum_k weights[b_t, k] probs[t, k]``: float64 ``[N]``."""
    return (np.asarray(probs, np.float64) * np.asarray(weights)[np.asarray(buckets)]).sum(axis=1)


def online_mixed_probs(probs, buckets, weights, rate: float) -> np.ndarray:
    """:func:`mixed_probs` with weights that keep learning as the split is read (online EM).

    After position ``t`` is scored, its bucket's weights move towards the components'
    posterior responsibilities: ``w_b <- (1 - rate) w_b + rate * w_b p_t / (w_b . p_t)``
    (a convex step: the rows stay distributions). ``rate = 0`` is :func:`mixed_probs`.

    Args:
        probs, buckets, weights: as :func:`mixed_probs` (``weights`` is not changed).
        rate: the step, in ``[0, 1)``.

    Returns:
        float64 ``[N]``: each position's mixed probability, with the weights before its update.
    """
    p = np.asarray(probs, np.float64)
    bk = np.asarray(buckets)
    if rate == 0:
        return mixed_probs(p, bk, weights)
    w = np.array(weights, np.float64)
    out = np.empty(len(p))
    for t in range(len(p)):
        b, row = bk[t], p[t]
        m = w[b] @ row
        out[t] = m
        if m > 0:
            w[b] = (1.0 - rate) * w[b] + rate * (w[b] * row / m)
    return out


def bits(p) -> float:
    """Mean ``-log2 p`` (bits per token)."""
    return float(-np.log2(np.maximum(np.asarray(p, np.float64), 1e-300)).mean())


# ------------------------------------------------------------------------ settings, valid only
@dataclasses.dataclass(frozen=True)
class SplitOutputs:
    """What the network gave on one split and what the adaptive models need of it.

    Attributes:
        split: ``"valid"`` or ``"test"``.
        probs: float32 ``[N, V]``: the network's next-token distribution at each position.
        hidden: float32 ``[N, H]`` or None: the top layer's output (the cache's keys).
        targets: int ``[N]``: the actual next tokens.
        history: int ``[M]``: the tokens read before the split (the training text's stream).
    """

    split: str
    probs: np.ndarray
    hidden: np.ndarray | None
    targets: np.ndarray
    history: np.ndarray


@dataclasses.dataclass(frozen=True)
class Settings:
    """Adaptive settings chosen on the valid split (:func:`choose_settings`).

    Attributes:
        components: names of the mixed components, in order (``model`` first).
        weights: ``[N_BUCKETS][K]`` mixture weights.
        theta, window: the cache's (None without it).
        orders, discount: the n-gram's (empty without it).
        min_length: the match model's (None without it).
        rate: the online step of the weights as a split is read (:func:`online_mixed_probs`).
        valid_bits: bits/token of this mixture on valid (in-sample).
    """

    components: tuple
    weights: tuple
    theta: float | None = None
    window: int | None = None
    orders: tuple = ()
    discount: float | None = None
    min_length: int | None = None
    rate: float = 0.0
    valid_bits: float | None = None

    def as_dict(self) -> dict:
        """The settings as JSON-ready plain values (``weights`` as a list of lists)."""
        return {k: (list(map(list, v)) if k == "weights" else v)
                for k, v in dataclasses.asdict(self).items()}


THETAS = (0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2)
WINDOWS = (500, 2000, 8000)
ORDERS = (1, 2, 3, 4, 6, 8, 12, 16)
DISCOUNTS = (0.6, 0.8, 0.95)
MIN_LENGTH = 7
RATES = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1)


def _model_target(out: SplitOutputs) -> np.ndarray:
    return np.asarray(out.probs, np.float64)[np.arange(len(out.targets)), out.targets]


def _history_seq(out: SplitOutputs) -> tuple[np.ndarray, int]:
    h = np.asarray(out.history, np.int64)
    return np.concatenate([h, np.asarray(out.targets, np.int64)]), len(h)


def component_probs(out: SplitOutputs, *, cache=None, ngram=None, match=None, counts=None,
                    cache_probs=None, match_out=None) -> tuple:
    """The components' probabilities of each actual token on one split and the mixing buckets.

    Args:
        out: the split.
        cache: ``(theta, window)`` or None.
        ngram: ``(orders, discount)`` or None.
        match: ``min_length`` or None.
        counts: :func:`ngram_counts` of the split's history and tokens (reused across settings).
        cache_probs: the cache's column for ``cache``, when already computed.
        match_out: :func:`match_target_probs` for ``match``, when already computed.

    Returns:
        ``(names, probs [N, K] float64, buckets [N] int)`` (:func:`mixing_bucket`; its match part
        is 0 throughout without ``match``).
    """
    names, cols = ["model"], [_model_target(out)]
    vocab = out.probs.shape[1]
    if cache is not None:
        th, w = cache
        names.append("cache")
        cols.append(cache_probs if cache_probs is not None else
                    cache_target_probs(out.hidden, out.targets, [th], [w], vocab)[(th, w)])
    seq, start = _history_seq(out)
    match_buckets = np.zeros(len(out.targets), np.int64)
    if ngram is not None:
        orders, d = ngram
        names += [f"ngram{k}" for k in orders]
        p = ngram_target_probs(seq, start, orders, vocab, d, counts)
        cols += list(p.T)
    if match is not None:
        p, match_buckets = match_out if match_out is not None else match_target_probs(seq, start, vocab, match)
        names.append("match")
        cols.append(p)
    return tuple(names), np.stack(cols, axis=1), mixing_bucket(match_buckets, out.probs)


def choose_settings(valid: SplitOutputs, *, cache: bool, ngram: bool, memo: dict | None = None) -> Settings:
    """Choose the cache's ``theta`` / window, the n-gram's discount and the mixture weights on
    ``valid`` alone (by its bits/token); nothing of any other split is passed in.

    Args:
        valid: the valid split's outputs (``valid.split == "valid"``).
        cache: mix in the cache (needs ``valid.hidden``).
        ngram: mix in the n-gram (orders :data:`ORDERS`) and the match model.
        memo: a dict kept between calls on the same ``valid`` (the cache grid, the n-gram counts).

    Returns:
        The frozen :class:`Settings`.

    Raises:
        ValueError: ``valid`` is not the valid split.
    """
    if valid.split != "valid":
        raise ValueError(f"adaptive settings are chosen on the valid split, not {valid.split!r}.")
    vocab = valid.probs.shape[1]
    model = _model_target(valid)
    kw: dict = {}
    if cache:
        memo = {} if memo is None else memo
        if "grid" not in memo:
            memo["grid"] = cache_target_probs(valid.hidden, valid.targets, THETAS, WINDOWS, vocab)
        grid = memo["grid"]
        best = None
        for key, pc in grid.items():
            q = np.stack([model, pc], axis=1)
            b = bits(mixed_probs(q, np.zeros(len(q), np.int64), fit_weights(q, np.zeros(len(q), int))))
            if best is None or b < best[0]:
                best = (b, key)
        kw["cache"] = best[1]
        kw["cache_probs"] = grid[best[1]]
    if ngram:
        seq, _ = _history_seq(valid)
        memo = {} if memo is None else memo
        if "counts" not in memo:
            memo["counts"] = ngram_counts(seq, max(ORDERS), vocab)
            memo["match_out"] = match_target_probs(seq, len(valid.history), vocab, MIN_LENGTH)
        kw.update(match=MIN_LENGTH, counts=memo["counts"], match_out=memo["match_out"])
        best = None
        for d in DISCOUNTS:
            names, q, bk = component_probs(valid, **{**kw, "ngram": (ORDERS, d)})
            b = bits(mixed_probs(q, bk, fit_weights(q, bk)))
            if best is None or b < best[0]:
                best = (b, d)
        kw["ngram"] = (ORDERS, best[1])
    names, q, bk = component_probs(valid, **kw)
    w = fit_weights(q, bk)
    th, win = kw.get("cache", (None, None))
    orders, d = kw.get("ngram", ((), None))
    rate = choose_rate(q, bk)
    return Settings(components=names, weights=tuple(map(tuple, w.tolist())), theta=th, window=win,
                    orders=tuple(orders), discount=d, min_length=kw.get("match"), rate=rate,
                    valid_bits=bits(online_mixed_probs(q, bk, w, rate)))


def choose_rate(probs, buckets) -> float:
    """The online step (:data:`RATES`) that scores best out of sample on valid: weights fitted on
    one half, read online over the other, both ways round (bits summed)."""
    n = len(probs) // 2
    halves = [(slice(0, n), slice(n, None)), (slice(n, None), slice(0, n))]
    fitted = [fit_weights(probs[a], buckets[a]) for a, _ in halves]

    def cost(rate):
        return sum(bits(online_mixed_probs(probs[b], buckets[b], w, rate))
                   for (_, b), w in zip(halves, fitted))

    return min(RATES, key=cost)


def score(out: SplitOutputs, settings: Settings) -> dict:
    """Score a split with settings chosen before (:func:`choose_settings`).

    Returns:
        ``{"bits_per_token", "cross_entropy" (nats/token), "perplexity", "tokens"}``.
    """
    names, q, bk = component_probs(
        out, cache=(settings.theta, settings.window) if settings.theta is not None else None,
        ngram=(settings.orders, settings.discount) if settings.orders else None,
        match=settings.min_length)
    assert names == settings.components, (names, settings.components)
    b = bits(online_mixed_probs(q, bk, settings.weights, settings.rate))
    ce = b * math.log(2.0)
    return {"bits_per_token": b, "cross_entropy": ce,
            "perplexity": math.exp(ce) if ce < 709.78 else float("inf"), "tokens": int(len(q))}


# ----------------------------------------------------------------------------------- streaming
class AdaptiveStream:
    """The mixture of :func:`score` one token at a time, with full distributions.

    Args:
        settings: from :func:`choose_settings`.
        vocab_size: ``V``.
        history: int ``[M]`` tokens read first (e.g. the training text's stream).

    Use: ``p = s.distribution(model_probs [V], hidden [H])`` then ``s.update(hidden, token)``.
    """

    def __init__(self, settings: Settings, vocab_size: int, history=()):
        self.s, self.V = settings, int(vocab_size)
        self.cache = StreamingCache(settings.theta, settings.window, vocab_size) \
            if settings.theta is not None else None
        self.ngram = OnlineNGram(settings.orders, vocab_size, settings.discount) if settings.orders else None
        self.match = MatchModel(vocab_size, settings.min_length) if settings.min_length else None
        self.weights = np.array(settings.weights, np.float64)
        self._last = None
        for t in np.asarray(history, np.int64).tolist():
            self._read(t)

    def _read(self, token: int) -> None:
        if self.ngram is not None:
            self.ngram.update(token)
        if self.match is not None:
            self.match.update(token)

    def distribution(self, model_probs, hidden=None) -> np.ndarray:
        """float64 ``[V]``, summing to 1: the mixture of the next token's distributions."""
        rows = [np.asarray(model_probs, np.float64)]
        if self.cache is not None:
            rows.append(self.cache.distribution(hidden))
        if self.ngram is not None:
            rows.extend(self.ngram.distributions())
        b = 0
        if self.match is not None:
            rows.append(self.match.distribution())
            b = self.match.bucket()
        self._last = (int(mixing_bucket(b, rows[0])), np.stack(rows))
        return self.weights[self._last[0]] @ self._last[1]

    def update(self, hidden, token: int) -> None:
        """Read the actual ``token`` (and store ``hidden`` in the cache; move the weights of the
        last :meth:`distribution`'s bucket, :func:`online_mixed_probs`)."""
        if self.s.rate and getattr(self, "_last", None) is not None:
            b, rows = self._last
            row = rows[:, int(token)]
            w = self.weights[b]
            m = w @ row
            if m > 0:
                self.weights[b] = (1.0 - self.s.rate) * w + self.s.rate * (w * row / m)
            self._last = None
        if self.cache is not None:
            self.cache.update(hidden, token)
        self._read(token)
