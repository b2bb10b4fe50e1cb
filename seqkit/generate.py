"""Text generation from a trained language-model run."""

from __future__ import annotations

from seqkit import log
from seqkit.data.vocab import START_ID, UNK_ID, tokenize


def generate_text(prep, model, prompt: str = "", *, num: int = 1, max_length: int = 200,
                  greedy: bool = False, temperature: float = 1.0, top_k: int = 0,
                  seed: int = 0) -> list[str]:
    """Continue ``prompt`` ``num`` times with a trained language model.

    Args:
        prep, model: from :func:`seqkit.train.load_run`.
        prompt: text tokenized like the training data; unknown tokens become
            ``[UNK]`` (counted in a warning).
        num: number of continuations (a batch of ``num`` rows).
        max_length: most new tokens.
        greedy / temperature / top_k / seed: see :func:`seqkit.decoding.decode`.

    Returns:
        ``num`` strings: the prompt followed by its continuation.
    """
    import tensorflow as tf

    from seqkit.decoding import decode

    d = prep.recipe.data
    toks = tokenize(prompt, d.tokenizer, d.lowercase)
    ids = [START_ID] + prep.vocab.encode(toks)
    unknown = sum(1 for i in ids if i == UNK_ID)
    if unknown:
        log.warn(f"{unknown} prompt token(s) are not in the vocabulary and were read as [UNK].")
    stepper = prep.head.stepper(model)
    prompt_t = tf.constant([ids] * num, tf.int32)

    @tf.function(reduce_retracing=True)
    def run(prompt_t, max_length, temperature, seed):
        return decode(stepper.step, stepper.initial_state(num), prompt_t, max_length=max_length,
                      greedy=greedy, temperature=temperature, top_k=top_k, seed=seed)

    tokens, lengths = run(prompt_t, tf.constant(max_length), tf.constant(temperature, tf.float32),
                          tf.constant(seed))
    join = "" if d.tokenizer == "char" else " "
    prefix = (prompt if d.tokenizer == "char" else " ".join(toks))
    out = []
    for row in tokens.numpy():
        cont = prep.vocab.decode(row, join=join)
        out.append(prefix + (join if prefix and cont and join else "") + cont)
    return out
