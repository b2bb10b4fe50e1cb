"""Text generation from a trained language-model run.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

from seqkit import log
from seqkit.data.stream import decode_lines, prompt_ids
from seqkit.data.vocab import END_ID, START_ID, UNK_ID, tokenize
from seqkit.errors import SeqkitError
from seqkit.inference.decoding import beam_search, check_beam_args, decode, int32_seed


#: The attribute of a Keras model that holds its traced generation loops (see :func:`_traced`).
TRACED_ATTR = "_seqkit_generation_fns"


def _traced(model, key: tuple, build):
    """The traced generation loop of ``model`` for ``key``, made by ``build()`` on first use.

    A ``tf.function`` made anew on each call is traced anew on each call (about 0.45 s for a
    tiny LM on this project's CPU, more than the decoding itself); keeping it, one per
    ``(model, key)``, lets repeated calls reuse the traced graph. ``key`` holds every Python
    value the loop bakes in (the batch size and the sampling configuration); values passed as
    tensors (prompt, lengths, temperature, seed) do not retrace. The dict lives on the model
    (set past Keras' attribute tracking, so it is neither saved nor exported): it goes when the
    model goes.
    """
    cache = model.__dict__.get(TRACED_ATTR)
    if cache is None:
        cache = {}
        object.__setattr__(model, TRACED_ATTR, cache)
    fn = cache.get(key)
    if fn is None:
        fn = cache[key] = build()
    return fn


def _encode_prompt(prep, prompt: str):
    """``(ids [<s>] + prompt ids, tokens)``; unknown tokens become ``[UNK]`` (warned, counted)."""
    toks = prep.head.tokenizer.split(prompt)
    ids = [START_ID] + prep.vocab.encode(toks)
    unknown = sum(1 for i in ids if i == UNK_ID)
    if unknown:
        log.warn(f"{unknown} prompt token(s) are not in the vocabulary and were read as [UNK].")
    return ids, toks


def _is_stream(prep) -> bool:
    """A run trained with ``data.layout: stream`` (generation continues past line ends)."""
    return prep.recipe.data.layout == "stream"


def check_adaptive_generation(recipe) -> None:
    """Refuse ``--cache`` / ``--mix`` generation for a run that is not stream-layout (from the
    recipe alone, before the model loads).

    Raises:
        SeqkitError: ``recipe.data.layout`` is not ``stream``.
    """
    if recipe.data.layout != "stream":
        raise SeqkitError(f"--cache / --mix need a language model trained with data.layout: stream "
                          f"(this run's layout is {recipe.data.layout!r}): the cache and the n-gram "
                          f"read one stream of text; generate without them, or train the recipe with "
                          f"data.layout: stream.")


def _encode_stream_prompt(prep, prompt: str) -> list[int]:
    """A stream run's prompt ids: its lines joined by ``<s>`` (:func:`seqkit.data.stream.prompt_ids`)."""
    d = prep.recipe.data
    ids = prompt_ids(prompt, lambda line: prep.vocab.encode(tokenize(line, d.tokenizer, d.lowercase)))
    unknown = sum(1 for i in ids if i == UNK_ID)
    if unknown:
        log.warn(f"{unknown} prompt token(s) are not in the vocabulary and were read as [UNK].")
    return ids


def _join_stream(prep, prompt: str, row) -> str:
    """A stream run's prompt (as typed) followed by its continuation, ``</s>`` printed as a line break."""
    join = "" if prep.recipe.data.tokenizer == "char" else " "
    cont = decode_lines(prep.vocab, row, join=join)
    sep = join if prompt and cont and join and not prompt.endswith(("\n", " ")) and not cont.startswith("\n") else ""
    return prompt + sep + cont


def _join(prep, prompt: str, toks, row) -> str:
    """The prompt followed by the decoded continuation ``row`` (ids, stops at ``</s>``)."""
    d = prep.recipe.data
    if d.tokenizer == "sentencepiece":  # decoded together: a piece's "▁" is the space before it
        tok = prep.head.tokenizer
        full, pre = tok.join(list(toks) + prep.vocab.decode_tokens(row)), tok.join(list(toks))
        return prompt + full[len(pre):] if full.startswith(pre) else full
    join = "" if d.tokenizer == "char" else " "
    prefix = (prompt if d.tokenizer == "char" else " ".join(toks))
    cont = prep.vocab.decode(row, join=join)
    return prefix + (join if prefix and cont and join else "") + cont


def generate_text(prep, model, prompt: str = "", *, num: int = 1, max_length: int = 200,
                  greedy: bool = False, temperature: float = 1.0, top_k: int = 0,
                  top_p: float = 1.0, seed: int = 0) -> list[str]:
    """Continue ``prompt`` ``num`` times with a trained language model.

    Args:
        prep, model: from :func:`seqkit.training.train.load_run`.
        prompt: text tokenized like the training data; unknown tokens become
            ``[UNK]`` (counted in a warning).
        num: number of continuations (a batch of ``num`` rows).
        max_length: most new tokens.
        greedy / temperature / top_k / top_p / seed: see :func:`seqkit.inference.decoding.decode`.

    A run trained with ``data.layout: stream`` does not stop at the end of a line: ``</s>`` is
    printed as a line break, read back as ``<s>`` (as in training), and generation goes on to
    ``max_length`` tokens; a prompt of several lines primes the state across its line breaks
    (:func:`seqkit.data.stream.prompt_ids`, :func:`seqkit.heads.language_model.stream.prime_states`).

    Returns:
        ``num`` strings: the prompt followed by its continuation.

    Generation mixed with the adaptive models of ``seqkit evaluate --cache / --mix`` is
    :func:`seqkit.heads.language_model.adaptive_generate.generate_adaptive`.
    """
    import tensorflow as tf

    if _is_stream(prep):  # past line ends, the prompt's lines priming the state
        return _generate_stream(prep, model, prompt, num=num, max_length=max_length,
                                greedy=greedy, temperature=temperature, top_k=top_k, top_p=top_p,
                                seed=seed)
    ids, toks = _encode_prompt(prep, prompt)
    prompt_t = tf.constant([ids] * num, tf.int32)

    def build():
        stepper = prep.head.stepper(model)

        @tf.function(reduce_retracing=True)
        def run(prompt_t, max_length, temperature, seed):
            return decode(stepper.step, stepper.initial_state(num), prompt_t, max_length=max_length,
                          greedy=greedy, temperature=temperature, top_k=top_k, top_p=top_p,
                          seed=seed)

        return run

    run = _traced(model, ("sample", num, greedy, top_k, top_p), build)
    tokens, lengths = run(prompt_t, tf.constant(max_length), tf.constant(temperature, tf.float32),
                          tf.constant(int32_seed(seed)))
    return [_join(prep, prompt, toks, row) for row in tokens.numpy()]


def generate_beam(prep, model, prompt: str = "", *, beam_width: int = 4, n_best: int = 1,
                  length_penalty: float = 0.0, max_length: int = 200,
                  min_length: int = 0) -> list[tuple[str, float]]:
    """The ``n_best`` best continuations of ``prompt`` by beam search.

    Args:
        prep, model: from :func:`seqkit.training.train.load_run`.
        prompt: as :func:`generate_text`.
        beam_width / n_best / length_penalty / max_length / min_length: see
            :func:`seqkit.inference.decoding.beam_search` (GNMT length penalty, Wu et al. 2016, eq. 14).

    Returns:
        ``n_best`` ``(text, score)`` pairs, best first; ``score`` is
        ``log P(continuation) / lp(|Y|)`` (nats; the prompt itself is not scored).

    Raises:
        SeqkitError: ``n_best > beam_width`` and the other argument errors of
            :func:`seqkit.inference.decoding.beam_search`.
    """
    import tensorflow as tf

    check_beam_args(beam_width, n_best, length_penalty, min_length, max_length)
    stream = _is_stream(prep)  # the prompt's lines prime the state; the beam still ends at </s>
    ids, toks = (_encode_stream_prompt(prep, prompt), None) if stream else _encode_prompt(prep, prompt)

    def build():
        stepper = prep.head.stepper(model)

        @tf.function(reduce_retracing=True)
        def run(prompt_t, max_length, min_length, alpha):
            return beam_search(stepper.step, stepper.initial_state(1), prompt_t, beam_width=beam_width,
                               n_best=n_best, max_length=max_length, min_length=min_length,
                               length_penalty=alpha)

        return run

    run = _traced(model, ("beam", beam_width, n_best), build)
    res = run(tf.constant([ids], tf.int32), tf.constant(max_length), tf.constant(min_length),
              tf.constant(length_penalty, tf.float32))

    def join(row):
        if not stream:
            return _join(prep, prompt, toks, row)
        row = list(row)
        return _join_stream(prep, prompt, row[: row.index(END_ID)] if END_ID in row else row)

    return [(join(row), float(score))
            for row, score in zip(res.tokens.numpy()[0], res.scores.numpy()[0])]


def _generate_stream(prep, model, prompt: str, *, num, max_length, greedy, temperature,
                     top_k, top_p, seed) -> list[str]:
    """:func:`generate_text` for a stream-trained run (see there)."""
    import tensorflow as tf

    from seqkit.heads.language_model.stream import prime_states

    ids = _encode_stream_prompt(prep, prompt)
    states = prime_states(model, ids[:-1], num)  # the prompt read in one pass

    def build():
        stepper = prep.head.stepper(model)

        def step(token, st):  # a generated </s> is read back as <s>, as training read line ends
            return stepper.step(tf.where(token == END_ID, START_ID, token), st)

        @tf.function(reduce_retracing=True)
        def run(prompt_t, states, max_length, temperature, seed):
            return decode(step, states, prompt_t, max_length=max_length, greedy=greedy,
                          temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, stop_id=-1)

        return run

    run = _traced(model, ("stream", num, greedy, top_k, top_p), build)
    tokens, _ = run(tf.constant([ids[-1:]] * num, tf.int32), states, tf.constant(max_length),
                    tf.constant(temperature, tf.float32), tf.constant(int32_seed(seed)))
    return [_join_stream(prep, prompt, row) for row in tokens.numpy()]
