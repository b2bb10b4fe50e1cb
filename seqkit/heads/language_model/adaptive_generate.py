"""Generation from a stream language model mixed with the adaptive models of its evaluation.

``seqkit generate RUN --cache / --mix`` and ``Run.generate(cache=True, mix=True)``: the next
token is drawn from the same mixture that ``seqkit evaluate RUN --cache / --mix`` scores
(:mod:`seqkit.heads.language_model.adaptive`):

1. the settings (the cache's ``theta`` and window, the n-gram's discount, the mixture weights
   and their online step) are chosen on the valid split exactly as evaluation chooses them
   (:func:`seqkit.heads.language_model.adaptive_eval.split_outputs`,
   :func:`seqkit.heads.language_model.adaptive.choose_settings`);
2. the n-gram and match models read the training text's stream, then the prompt; the cache
   holds the network's top-layer outputs over the prompt (:class:`~seqkit.heads.language_model.adaptive.AdaptiveStream`);
3. a Python loop calls the head's step function one token at a time: the network's distribution
   is mixed (:meth:`~seqkit.heads.language_model.adaptive.AdaptiveStream.distribution`), a
   token is chosen, read by the adaptive models
   (:meth:`~seqkit.heads.language_model.adaptive.AdaptiveStream.update`, the cache storing the
   state that predicted it) and fed back (a generated ``</s>`` read as ``<s>``, as in
   :func:`seqkit.heads.language_model.generate.generate_text`).

Where the sampling options apply (:func:`sampling_distribution`): ``temperature`` scales the
*network's* logits before they are mixed (``softmax(logits / T)``; its confidence bin is taken
from that tempered distribution); the cache, n-gram and match distributions are not tempered.
``top_k`` and ``top_p`` then cut the *mixture* (its ``k`` most likely tokens, then its nucleus),
renormalised, and the token is drawn from that with a NumPy generator seeded by ``seed`` (taken
modulo ``2**64``: negative seeds too; the same seed gives the same text).
``greedy`` takes the arg-max of the mixture with the network at temperature 1 (the mixture
evaluation scores) and ignores ``temperature``, ``top_k`` and ``top_p``, as plain greedy
decoding does.

TensorFlow is imported inside the functions that use it.
"""

from __future__ import annotations

import copy
import time

import numpy as np

from seqkit import log
from seqkit.data.vocab import END_ID, START_ID
from seqkit.heads.language_model import adaptive


def softmax(logits, temperature: float = 1.0) -> np.ndarray:
    """``softmax(logits / temperature)`` in float64 over the last axis (logits ``[..., V]``)."""
    z = np.asarray(logits, np.float64) / float(temperature)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def sampling_distribution(mixed, top_k: int = 0, top_p: float = 1.0) -> np.ndarray:
    """The distribution a token is drawn from: the mixture cut to its ``top_k`` most likely tokens
    (ties at the k-th value kept; 0: all), then to its nucleus (a token is kept when the mass of
    the tokens ranked above it is below ``top_p``; 1: all), renormalised -- the rules of
    :func:`seqkit.inference.decoding.filter_logits`, applied to probabilities.

    Args:
        mixed: float ``[V]``, summing to 1.
        top_k: >= 0.
        top_p: in ``(0, 1]``.

    Returns:
        float64 ``[V]`` summing to 1 (zero outside the kept tokens; the most likely token is
        always kept).
    """
    p = np.asarray(mixed, np.float64).copy()
    if top_k and 0 < top_k < len(p):
        kth = np.sort(p)[::-1][top_k - 1]
        p[p < kth] = 0.0
    if top_p < 1.0:
        q = p / p.sum()
        ordered = np.sort(q)[::-1]
        above = np.cumsum(ordered) - ordered
        threshold = ordered[above < top_p].min()
        p[q < threshold] = 0.0
    return p / p.sum()


def choose_generation_settings(prep, model, *, cache: bool, mix: bool, history) -> adaptive.Settings:
    """The mixture's settings chosen on the run's valid split, as ``seqkit evaluate --cache / --mix``
    chooses them (the network over the valid stream from zero states, then
    :func:`seqkit.heads.language_model.adaptive.choose_settings`).

    Args:
        prep, model: the run (``prep.splits`` read: :meth:`seqkit.Run.generate` loads the data).
        cache, mix: mix in the continuous cache / the n-gram and match models.
        history: int ``[M]``: the training stream
            (:func:`seqkit.heads.language_model.adaptive_eval.training_stream`).

    Raises:
        SeqkitError: the valid split is empty.
    """
    from seqkit.heads.language_model.adaptive_eval import require_valid, split_outputs

    valid_records = prep.splits.get("valid")
    require_valid(valid_records, "--cache / --mix")
    valid = split_outputs(prep.head, [(model, None)], valid_records, "valid", history, keep_hidden=cache)
    t0 = time.time()
    settings = adaptive.choose_settings(valid, cache=cache, ngram=mix)
    log.info(f"adaptive models: settings chosen on valid in {time.time() - t0:.1f} s "
             f"({settings.valid_bits:.4f} bits/token there, in-sample).")
    return settings


def generate_adaptive(prep, model, prompt: str = "", *, cache: bool = False, mix: bool = False,
                      num: int = 1, max_length: int = 200, greedy: bool = False,
                      temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                      settings: adaptive.Settings | None = None, history=None,
                      trace: list | None = None) -> list[str]:
    """Continue ``prompt`` ``num`` times from the network mixed with its adaptive models (module docstring).

    Args:
        prep, model: a stream-layout language-model run (``prep.splits`` read unless both
            ``settings`` and ``history`` are given).
        prompt: text; its lines prime the state (:func:`seqkit.data.stream.prompt_ids`).
        cache, mix: the components chosen on valid (ignored when ``settings`` is given).
        num: continuations; each has its own adaptive models, copied after the prompt (memory
            and copying time grow with ``num`` times the training text's n-gram tables).
        max_length: new tokens per continuation (generation goes on past line ends).
        greedy, temperature, top_k, top_p, seed: see the module docstring.
        settings: use these instead of choosing them on valid.
        history: int ``[M]`` ids read first (default: the training split's stream).
        trace: a list that gets, at every generated position, ``{"mixed": float64 [num, V],
            "tokens": int64 [num]}``: the mixed distributions the tokens were chosen from (before
            ``top_k`` / ``top_p``) and the tokens chosen.

    Returns:
        ``num`` strings: the prompt followed by its continuation (``</s>`` printed as a line break).

    Raises:
        SeqkitError: the valid split is empty (settings to choose).
    """
    import tensorflow as tf

    from seqkit.heads.language_model.adaptive_eval import training_stream
    from seqkit.heads.language_model.generate import _encode_stream_prompt, _join_stream, _traced
    from seqkit.heads.language_model.stream import StreamRunner

    head = prep.head
    vocab = len(prep.vocab)
    if history is None:
        history = training_stream(head, prep.splits.get("train"))
    if settings is None:
        settings = choose_generation_settings(prep, model, cache=cache, mix=mix, history=history)
    temp = 1.0 if greedy else float(temperature)
    ids = _encode_stream_prompt(prep, prompt)
    as_target = lambda i: END_ID if i == START_ID else int(i)  # noqa: E731  (input <s> = target </s>)

    t0 = time.time()
    readers = [n for n, on in (("n-gram", settings.orders), ("match", settings.min_length)) if on]
    if readers:  # a Python loop over the training text: seconds to minutes on a real corpus
        log.info(f"adaptive models: reading {len(history):,} training tokens into the "
                 f"{' and '.join(readers)} model(s).")
    stream = adaptive.AdaptiveStream(settings, vocab, history=history)
    log.info(f"adaptive models: ready in {time.time() - t0:.1f} s; generating {num} x {max_length} tokens.")

    # the prompt but its last id in one pass (as generate_text primes the state), read by the
    # adaptive models position by position; its last id is the first input of the loop
    runner = StreamRunner(model)
    states = runner.zero_states(1)
    if len(ids) > 1:
        h, logits, states = runner.forward_hidden(tf.constant([ids[:-1]], tf.int32), states, truncate=False)
        h, p = h.numpy()[0].astype(np.float64), softmax(logits.numpy()[0], temp)
        for t in range(len(ids) - 1):
            stream.distribution(p[t], h[t])
            stream.update(h[t], as_target(ids[t + 1]))
    streams = [stream] + [copy.deepcopy(stream) for _ in range(num - 1)]
    states = [tf.tile(s, [num, 1]) for s in states]

    def build():
        stepper = head.stepper(model)

        @tf.function(reduce_retracing=True)
        def step(token, st):  # a generated </s> is read back as <s>, as training read line ends
            return stepper.step_hidden(tf.where(token == END_ID, START_ID, token), st)

        return step

    step = _traced(model, ("adaptive_step",), build)  # traced once per model, as generate_text's loops

    rng = np.random.default_rng(int(seed) % 2**64)  # any int seed, as plain sampling takes
    token = np.full(num, ids[-1], np.int32)
    rows = np.zeros((num, max_length), np.int64)
    for t in range(max_length):
        h, logits, states = step(tf.constant(token), states)
        h, p = h.numpy().astype(np.float64), softmax(logits.numpy(), temp)
        mixed = np.stack([s.distribution(p[r], h[r]) for r, s in enumerate(streams)])
        for r, s in enumerate(streams):
            tok = int(np.argmax(mixed[r])) if greedy else \
                int(rng.choice(vocab, p=sampling_distribution(mixed[r], top_k, top_p)))
            s.update(h[r], tok)
            rows[r, t] = token[r] = tok
        if trace is not None:
            trace.append({"mixed": mixed, "tokens": rows[:, t].copy()})
    return [_join_stream(prep, prompt, row) for row in rows]
