"""A SavedModel of a run with named signatures, built with ``keras.export.ExportArchive``.

Signatures of a language-model export (B = batch, T = time, V = vocabulary,
one ``[B, H]`` float32 tensor per state per layer, named ``rnn_{layer}_{state}``):

- ``step(token [B] int32, states...) -> {logits [B, V], states...}``
- ``initial_state(batch_size [] int32) -> {states...}`` (zeros)
- ``predict(tokens [B, T] int32) -> {logits [B, T, V]}`` (id 0 = padding, masked)
- ``generate(prompt [B, P] int32, max_length [] int32) -> {tokens [B, L], lengths [B]}`` (greedy)
- ``sample(prompt, max_length, temperature [] float32, seed [] int32) -> {tokens, lengths}``

``ExportArchive`` freezes Keras 3 variables correctly for the TFLite converter
(a bare ``tf.Module`` leaves them as resource variables that TFLite reads as NaN).
"""

from __future__ import annotations

from seqkit.errors import SeqkitError


def stepper_for(prep, model):
    """The head's step view of ``model``; refuses heads that cannot stream.

    Raises:
        SeqkitError: the head has no step model (e.g. a bidirectional encoder).
    """
    make = getattr(prep.head, "stepper", None)
    if make is None:
        raise SeqkitError(f"head '{prep.recipe.head.type}' has no step model to export; "
                          f"export it as a full-sequence model instead.")
    return make(model)


def build_archive(prep, model):
    """Return ``(archive, stepper)``: an ``ExportArchive`` tracking ``model`` with the signatures above."""
    import keras
    import tensorflow as tf

    from seqkit.decoding import decode

    st = stepper_for(prep, model)
    names, sizes = st.state_names(), st.state_sizes()
    state_specs = [tf.TensorSpec([None, n], tf.float32, name=nm) for nm, n in zip(names, sizes)]

    def step(x, *states):
        logits, new = st.step(x, list(states))
        return {"logits": logits, **dict(zip(names, new))}

    def initial_state(batch_size):
        return dict(zip(names, st.initial_state(batch_size)))

    def predict(tokens):
        return {"logits": model(tokens, training=False)}

    def generate(prompt, max_length):
        toks, lens = decode(st.step, st.initial_state(tf.shape(prompt)[0]), prompt,
                            max_length=max_length, greedy=True)
        return {"tokens": toks, "lengths": lens}

    def sample(prompt, max_length, temperature, seed):
        toks, lens = decode(st.step, st.initial_state(tf.shape(prompt)[0]), prompt,
                            max_length=max_length, greedy=False, temperature=temperature, seed=seed)
        return {"tokens": toks, "lengths": lens}

    archive = keras.export.ExportArchive()
    archive.track(model)
    i32 = lambda name, shape=(): tf.TensorSpec(shape, tf.int32, name=name)  # noqa: E731
    archive.add_endpoint("step", step, input_signature=[st.input_spec(), *state_specs])
    archive.add_endpoint("initial_state", initial_state, input_signature=[i32("batch_size")])
    archive.add_endpoint("predict", predict, input_signature=[i32("tokens", [None, None])])
    archive.add_endpoint("generate", generate,
                         input_signature=[i32("prompt", [None, None]), i32("max_length")])
    archive.add_endpoint("sample", sample,
                         input_signature=[i32("prompt", [None, None]), i32("max_length"),
                                          tf.TensorSpec([], tf.float32, name="temperature"), i32("seed")])
    return archive, st
