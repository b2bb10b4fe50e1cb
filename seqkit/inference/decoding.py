"""Autoregressive decoding: greedy, sampling (temperature, top-k, top-p) and beam search.

All procedures take a *step function*
``step_fn(token [B] int32, states: list of [B, H]) -> (logits [B, V], new_states)``
and run inside ``tf.while_loop``, so they can be traced into a SavedModel.

A step function that needs per-example tensors besides its states (an
encoder-decoder's attention memory ``[B, S, H]`` and mask ``[B, S]``) receives
them as a third argument, ``step_fn(token, states, extras)``, when ``extras``
(a list of ``[B, ...]`` tensors) is passed to :func:`decode` or
:func:`beam_search`; beam search repeats each row once per beam (row ``b``
becomes rows ``b*K .. b*K+K-1``), so beams never see another example's memory.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import math

from typing import NamedTuple

from seqkit.data.vocab import END_ID, PAD_ID
from seqkit.errors import SeqkitError


def filter_logits(logits, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0):
    """Scale logits by ``1 / temperature``, then keep the ``top_k`` largest, then the nucleus.

    Top-p (nucleus) filtering, Holtzman et al. 2020, eq. 2-3: keep the smallest
    set of most likely tokens ``V(p)`` with ``sum_{x in V(p)} P(x) >= p`` (``P``
    the softmax of the temperature-scaled, top-k-filtered logits) and
    renormalise over it (sampling from the returned logits does that). A token
    is kept when the probability mass of the tokens ranked above it is below
    ``p``, so the most likely token is always kept.

    Args:
        logits: ``[B, V]`` float32.
        temperature: > 0; below 1 sharpens, above 1 flattens the distribution.
        top_k: keep the k best tokens per row (ties at the k-th value are kept); 0 = all.
        top_p: nucleus mass in ``(0, 1]``; 1 = no nucleus filtering.

    Returns:
        ``[B, V]`` float32 logits shifted so each row's largest is 0 (the same softmax), ``-inf``
        where filtered out.

    Raises:
        SeqkitError: ``top_p`` (a Python number) outside ``(0, 1]``.
    """
    import tensorflow as tf

    if isinstance(top_p, (int, float)) and not 0.0 < top_p <= 1.0:
        raise SeqkitError(f"top_p must be in (0, 1] (1 = off), got {top_p}: it is the probability "
                          f"mass of the most likely tokens that sampling keeps, e.g. 0.9.")
    neg_inf = tf.constant(-float("inf"), tf.float32)
    logits = tf.cast(logits, tf.float32)
    # shifted by the row's largest logit first (softmax is unchanged), so a tiny temperature (or one
    # flushed to 0 in float32) sends the others to -inf and keeps the largest at 0, instead of
    # overflowing every logit to +-inf (inf - inf, 0 / 0: NaN)
    shifted = logits - tf.reduce_max(logits, axis=-1, keepdims=True)
    logits = tf.where(shifted < 0, shifted / tf.cast(temperature, tf.float32), tf.zeros_like(shifted))
    if top_k and top_k > 0:
        if isinstance(top_k, int):  # a k past int32 keeps every token, as any k >= V does
            top_k = min(top_k, 2**31 - 1)
        k = tf.minimum(tf.cast(top_k, tf.int32), tf.shape(logits)[-1])
        kth = tf.math.top_k(logits, k=k).values[:, -1:]
        logits = tf.where(logits < kth, neg_inf, logits)
    if not (isinstance(top_p, (int, float)) and top_p >= 1.0):
        ordered = tf.sort(logits, axis=-1, direction="DESCENDING")
        probs = tf.nn.softmax(ordered, axis=-1)
        mass_above = tf.math.cumsum(probs, axis=-1, exclusive=True)
        # the most likely token is always kept (a top_p below float32's smallest number included)
        keep = (mass_above < tf.cast(top_p, tf.float32)) | (tf.range(tf.shape(ordered)[-1]) == 0)
        # the smallest kept logit per row; every logit at least as large is kept (ties kept)
        threshold = tf.reduce_min(tf.where(keep, ordered, tf.fill(tf.shape(ordered), float("inf"))),
                                  axis=-1, keepdims=True)
        logits = tf.where(logits < threshold, neg_inf, logits)
    return logits


def _call_step(step_fn, token, states, extras):
    if extras is None:
        return step_fn(token, states)
    return step_fn(token, states, extras)


def _prefill(step_fn, states, prompt, extras):
    """Read all prompt tokens but the last; return ``(states, last [B])``."""
    import tensorflow as tf

    def pre_body(i, *st):
        _, new = _call_step(step_fn, prompt[:, i], list(st), extras)
        return (i + 1, *[tf.ensure_shape(n, s.shape) for n, s in zip(new, st)])

    p_len = tf.shape(prompt)[1]
    out = tf.while_loop(lambda i, *st: i < p_len - 1, pre_body, (tf.constant(0), *states))
    return list(out[1:]), prompt[:, -1]


def decode(step_fn, states, prompt, *, max_length: int, greedy: bool, temperature: float = 1.0,
           top_k: int = 0, top_p: float = 1.0, stop_id: int = END_ID, seed: int = 0, extras=None):
    """Continue ``prompt`` token by token until ``stop_id`` or ``max_length`` new tokens.

    Args:
        step_fn: see the module docstring.
        states: initial recurrent states, list of ``[B, H]`` float32.
        prompt: ``[B, P]`` int32, ``P >= 1``, all rows the same length (the
            first id is normally the start marker); its last token is the
            first input of generation.
        max_length: most new tokens per row.
        greedy: arg-max at each step; otherwise sample from
            ``softmax(filter_logits(logits, temperature, top_k, top_p))``.
        stop_id: a row is finished once it emits this id; later positions are
            ``PAD_ID`` (0).
        seed: sampling seed (``tf.random.stateless_categorical``): equal seeds,
            equal samples.
        extras: optional list of ``[B, ...]`` tensors passed to every step as
            ``step_fn(token, states, extras)`` (see the module docstring).

    Returns:
        ``(tokens [B, L] int32, lengths [B] int32)``, ``L <= max_length``;
        ``lengths`` counts tokens before the stop token (the stop token itself
        is kept in ``tokens``).
    """
    import tensorflow as tf

    prompt = tf.convert_to_tensor(prompt, tf.int32)
    states = [tf.convert_to_tensor(s) for s in states]
    batch = tf.shape(prompt)[0]

    states, last = _prefill(step_fn, states, prompt, extras)

    ta = tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=tf.TensorShape([None]))
    finished = tf.zeros([batch], tf.bool)
    lengths = tf.zeros([batch], tf.int32)
    seed_t = tf.cast(seed, tf.int32)

    def body(t, last, finished, lengths, ta, *st):
        logits, new = _call_step(step_fn, last, list(st), extras)
        if greedy:
            nxt = tf.argmax(logits, axis=-1, output_type=tf.int32)
        else:
            filtered = filter_logits(logits, temperature, top_k, top_p)
            nxt = tf.random.stateless_categorical(filtered, 1, seed=tf.stack([seed_t, t]),
                                                  dtype=tf.int32)[:, 0]
        nxt = tf.ensure_shape(tf.where(finished, tf.zeros_like(nxt) + PAD_ID, nxt), last.shape)
        new = [tf.ensure_shape(n, s.shape) for n, s in zip(new, st)]
        lengths = lengths + tf.cast(tf.logical_and(~finished, nxt != stop_id), tf.int32)
        finished = tf.logical_or(finished, nxt == stop_id)
        return (t + 1, nxt, finished, lengths, ta.write(t, nxt), *new)

    def cond(t, last, finished, lengths, ta, *st):
        return tf.logical_and(t < max_length, tf.logical_not(tf.reduce_all(finished)))

    res = tf.while_loop(cond, body, (tf.constant(0), last, finished, lengths, ta, *states))
    tokens = tf.transpose(res[4].stack())  # [B, L]
    return tokens, res[3]


class BeamResult(NamedTuple):
    """What :func:`beam_search` returns (``N = n_best``, ``L`` = steps taken).

    Attributes:
        tokens: ``[B, N, L]`` int32, best first; the stop token is kept, later
            positions are ``PAD_ID`` (0).
        lengths: ``[B, N]`` int32, tokens before the stop token (``L`` for a
            hypothesis cut off at ``max_length``); the ``|Y|`` of the penalty.
        scores: ``[B, N]`` float32, ``log P(Y) / lp(|Y|)``, the ranking key.
        log_probs: ``[B, N]`` float32, ``log P(Y)`` (stop token included).
    """

    tokens: object
    lengths: object
    scores: object
    log_probs: object


def length_penalty_factor(length, alpha):
    """GNMT length penalty (Wu et al. 2016, eq. 14): ``lp(Y) = (5 + |Y|)^a / (5 + 1)^a``.

    Args:
        length: ``|Y|``, int or float tensor of any shape.
        alpha: ``a >= 0``; 0 gives ``lp = 1`` (plain log-probability ranking).

    Returns:
        float32 tensor shaped like ``length``.
    """
    import tensorflow as tf

    length = tf.cast(length, tf.float32)
    return tf.pow((5.0 + length) / 6.0, tf.cast(alpha, tf.float32))


def int32_seed(seed: int) -> int:
    """Any Python integer as the int32 sampling seed it stands for: itself inside int32's range, else
    wrapped (two's complement, as TensorFlow's int64 -> int32 cast does), so ``--seed`` takes any
    integer and every seed that fitted keeps its samples."""
    return ((int(seed) + 2**31) % 2**32) - 2**31


#: The widest beam seqkit searches (a wider one is refused before any work).
MAX_BEAM_WIDTH = 1000


def check_beam_args(beam_width, n_best, length_penalty, min_length, max_length):
    """Validate beam-search arguments given as Python numbers (tensors are not checked).

    Raises:
        SeqkitError: ``beam_width`` or ``n_best`` below 1, ``beam_width`` above
            :data:`MAX_BEAM_WIDTH`, ``n_best > beam_width``, ``length_penalty`` not a number or
            ``< 0``, ``max_length < 1`` or ``min_length`` outside ``[0, max_length]``; each
            message names the option and the fix.
    """
    if not isinstance(beam_width, int) or isinstance(beam_width, bool) or beam_width < 1:
        raise SeqkitError(f"beam width must be a positive integer, got {beam_width!r} "
                          f"(--beam-width / decoding.beam_width; 1 with length penalty 0 is greedy decoding).")
    if beam_width > MAX_BEAM_WIDTH:
        raise SeqkitError(f"beam width {beam_width:,} is more than seqkit searches ({MAX_BEAM_WIDTH:,}): "
                          f"every step scores beam width x vocabulary candidates per input, and the "
                          f"best outputs change little past a few dozen (--beam-width / "
                          f"decoding.beam_width).")
    if not isinstance(n_best, int) or n_best < 1:
        raise SeqkitError(f"n-best must be a positive integer, got {n_best!r} (--n-best / "
                          f"decoding.n_best).")
    if n_best > beam_width:
        raise SeqkitError(f"n-best ({n_best}) is larger than the beam width ({beam_width}): beam "
                          f"search keeps only beam-width finished hypotheses per input. Ask for "
                          f"--n-best {beam_width} or less, or widen the beam with --beam-width "
                          f"{n_best}.")
    if isinstance(length_penalty, (str, bool, bytes)) or (isinstance(length_penalty, float)
                                                         and not math.isfinite(length_penalty)):
        raise SeqkitError(f"length penalty must be a finite number >= 0, got {length_penalty!r} "
                          f"(--length-penalty / decoding.length_penalty).")
    if isinstance(length_penalty, (int, float)) and length_penalty < 0:
        raise SeqkitError(f"length penalty must be >= 0, got {length_penalty} (--length-penalty / "
                          f"decoding.length_penalty): 0 ranks by log-probability, larger values "
                          f"favour longer outputs (GNMT uses 0.6-0.7).")
    if isinstance(min_length, int) and isinstance(max_length, int):
        if min_length < 0 or min_length > max_length:
            raise SeqkitError(f"min length ({min_length}) must be between 0 and the max length "
                              f"({max_length}) (decoding.min_length / --min-length).")
    if isinstance(max_length, int) and max_length < 1:
        raise SeqkitError(f"max length must be a positive integer, got {max_length}.")


def beam_search(step_fn, states, prompt, *, beam_width: int, max_length, length_penalty=0.0,
                n_best: int = 1, min_length=0, stop_id: int = END_ID, extras=None) -> BeamResult:
    """Batched beam search in ``tf.while_loop`` with finished hypotheses kept aside.

    Each row keeps ``K = beam_width`` live hypotheses. At step ``t`` every live
    hypothesis is extended by every token; of the ``K * V`` candidates the best
    ``2K`` by ``log P`` are taken. Of those, candidates ranked in the first
    ``K`` that end in ``stop_id`` (or reach ``max_length``) are scored
    ``log P(Y) / lp(|Y|)`` (GNMT length penalty, Wu et al. 2016, eq. 14;
    :func:`length_penalty_factor`, each hypothesis with its own ``|Y|``) and
    merged into the row's ``K`` best finished hypotheses; the best ``K``
    candidates that did not stop live on. (Finishing only first-``K`` stop
    candidates, as fairseq does, makes ``beam_width=1`` with ``length_penalty=0`` exactly
    greedy; with a length penalty, width 1 may go on past greedy's stop and return a longer
    output the penalty ranks higher.) A row is
    done when its ``n_best``-th finished score is at least the best that any live
    hypothesis could still reach, ``log P_alive / lp(max_length)`` (``log P``
    only falls and ``lp`` only grows, for ``length_penalty >= 0``); the loop
    ends when every row is done or after ``max_length`` steps.

    Args:
        step_fn: see the module docstring (called on ``B * K`` rows).
        states: initial states, list of ``[B, H]`` float32.
        prompt: ``[B, P]`` int32, ``P >= 1``; all but the last token are read
            first (once per row, before the beams are formed).
        beam_width: ``K``, a Python int >= 1.
        max_length: most new tokens (int or int32 scalar tensor).
        length_penalty: GNMT ``alpha >= 0`` (0 = rank by log-probability).
        n_best: hypotheses returned per row, ``1 <= n_best <= beam_width``.
        min_length: the stop token is forbidden (``log P = -inf``) while fewer
            than ``min_length`` tokens have been generated.
        stop_id: the end marker.
        extras: optional list of ``[B, ...]`` tensors given to every step as
            ``step_fn(token, states, extras)``, repeated per beam.

    Returns:
        :class:`BeamResult`. A row with fewer than ``n_best`` possible
        hypotheses (tokens with ``-inf`` logits) has ``-inf`` scores in the rest.

    Raises:
        SeqkitError: ``n_best > beam_width``, a width or n-best below 1, a
            negative length penalty, or ``min_length`` outside ``[0, max_length]``.
    """
    import tensorflow as tf

    check_beam_args(beam_width, n_best, length_penalty, min_length, max_length)
    K = beam_width
    prompt = tf.convert_to_tensor(prompt, tf.int32)
    states = [tf.convert_to_tensor(s) for s in states]
    extras = None if extras is None else [tf.convert_to_tensor(e) for e in extras]
    batch = tf.shape(prompt)[0]
    max_len = tf.cast(max_length, tf.int32)
    min_len = tf.cast(min_length, tf.int32)
    alpha = tf.cast(length_penalty, tf.float32)
    neg_inf = tf.constant(-float("inf"), tf.float32)

    states, last = _prefill(step_fn, states, prompt, extras)
    tile = lambda x: tf.repeat(x, K, axis=0)  # noqa: E731  row b -> rows b*K .. b*K+K-1
    states = [tile(s) for s in states]
    beam_extras = None if extras is None else [tile(e) for e in extras]
    last = tile(last)

    # all K beams start as the same empty hypothesis: only beam 0 may expand at the first step
    alive_logp = tf.tile(tf.concat([[0.0], tf.fill([K - 1], -float("inf"))], 0)[None], [batch, 1])
    alive_seq = tf.zeros([batch, K, max_len], tf.int32)
    fin_seq = tf.zeros([batch, K, max_len], tf.int32)
    fin_score = tf.fill([batch, K], -float("inf"))
    fin_logp = tf.fill([batch, K], -float("inf"))
    fin_len = tf.zeros([batch, K], tf.int32)
    first_k = tf.range(2 * K) < K  # [2K]
    max_lp = length_penalty_factor(max_len, alpha)

    def body(t, done, last_in, alive_seq_in, alive_logp_in, fin_seq_in, fin_score_in, fin_logp_in,
             fin_len_in, *st):
        last, alive_seq, alive_logp, fin_seq = last_in, alive_seq_in, alive_logp_in, fin_seq_in
        fin_score, fin_logp, fin_len = fin_score_in, fin_logp_in, fin_len_in
        logits, new_states = _call_step(step_fn, last, list(st), beam_extras)
        vocab = tf.shape(logits)[-1]
        logp = tf.reshape(tf.nn.log_softmax(tf.cast(logits, tf.float32)), [batch, K, vocab])
        stop_banned = tf.logical_and(t < min_len, tf.range(vocab) == stop_id)
        logp = tf.where(stop_banned[None, None, :], neg_inf, logp)
        cand = tf.reshape(alive_logp[:, :, None] + logp, [batch, K * vocab])
        top_logp, top_idx = tf.math.top_k(cand, k=2 * K)  # [B, 2K], best first
        parent, token = top_idx // vocab, top_idx % vocab
        seqs = tf.gather(alive_seq, parent, batch_dims=1)  # [B, 2K, L]
        at_t = tf.equal(tf.range(max_len), t)[None, None, :]
        seqs = tf.where(at_t, token[:, :, None], seqs)
        is_stop = tf.equal(token, stop_id)
        length = tf.where(is_stop, t, t + 1)
        # finished: first-K candidates that stop (or reach max_length)
        ends = tf.logical_or(is_stop, tf.equal(t, max_len - 1))
        ends = tf.logical_and(tf.logical_and(ends, first_k[None]), top_logp > neg_inf)
        score = tf.where(ends, top_logp / length_penalty_factor(length, alpha), neg_inf)
        all_score = tf.concat([fin_score, score], 1)
        fin_score, pick = tf.math.top_k(all_score, k=K)
        fin_seq = tf.gather(tf.concat([fin_seq, seqs], 1), pick, batch_dims=1)
        fin_logp = tf.gather(tf.concat([fin_logp, top_logp], 1), pick, batch_dims=1)
        fin_len = tf.gather(tf.concat([fin_len, length], 1), pick, batch_dims=1)
        # alive: the best K candidates that did not stop
        alive_logp, keep = tf.math.top_k(tf.where(is_stop, neg_inf, top_logp), k=K)
        alive_seq = tf.gather(seqs, keep, batch_dims=1)
        rows = tf.reshape(tf.range(batch)[:, None] * K + tf.gather(parent, keep, batch_dims=1), [-1])
        new_states = [tf.gather(s, rows) for s in new_states]
        last = tf.reshape(tf.gather(token, keep, batch_dims=1), [-1])
        bound = alive_logp[:, 0] / max_lp
        row_done = tf.logical_or(fin_score[:, n_best - 1] >= bound, alive_logp[:, 0] == neg_inf)
        out = (last, alive_seq, alive_logp, fin_seq, fin_score, fin_logp, fin_len, *new_states)
        ins = (last_in, alive_seq_in, alive_logp_in, fin_seq_in, fin_score_in, fin_logp_in,
               fin_len_in, *st)
        for o, i in zip(out, ins):  # gathers lose static batch sizes; the loop needs them
            o.set_shape(i.shape)
        return (t + 1, tf.reduce_all(row_done), *out)

    def cond(t, done, *_):
        return tf.logical_and(t < max_len, tf.logical_not(done))

    res = tf.while_loop(cond, body, (tf.constant(0), tf.constant(False), last, alive_seq,
                                     alive_logp, fin_seq, fin_score, fin_logp, fin_len, *states))
    steps, fin_seq, fin_score, fin_logp, fin_len = res[0], res[5], res[6], res[7], res[8]
    return BeamResult(tokens=fin_seq[:, :n_best, :steps], lengths=fin_len[:, :n_best],
                      scores=fin_score[:, :n_best], log_probs=fin_logp[:, :n_best])
