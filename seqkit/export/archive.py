"""A SavedModel of a run with named signatures, built with ``keras.export.ExportArchive``.

Acceptor / tagger exports have ``step`` and ``initial_state`` (forward encoders;
step input ``token [B] int32`` or raw ``frame [B, D] float32``, logits ``[B, C]``;
``model.char_embedding``: ``token [B, 1 + W]`` and ``tokens [B, T, 1 + W]``, the word id
then its character ids, :mod:`seqkit.data.word_chars`;
see :mod:`seqkit.heads.sequence.stepper`) and ``predict(tokens [B, T] int32 |
frames [B, T, D] float32) -> {logits [B, C] | [B, T, C]}`` where frames are raw
(the run's normaliser is applied inside) and padding is id 0 / NaN frames; a CRF
tagger's ``predict`` adds ``tags [B, T] int32`` (Viterbi in the graph) and its
``step`` gives the emissions of one step (the path needs the whole sequence: the
runtime decodes at its end, :mod:`seqkit.heads.sequence.stream`).
A full-sequence archive (:func:`build_full_sequence_archive`) holds ``predict``
alone for a pinned ``[B, T]``: the shape TFLite needs to convert a recurrent
layer to builtins (a WHILE loop; the mask survives).

Signatures of a language-model export (B = batch, T = time, V = vocabulary,
one ``[B, H]`` float32 tensor per state per layer, named ``rnn_{layer}_{state}``):

- ``step(token [B] int32, states...) -> {logits [B, V], states...}``
- ``initial_state(batch_size [] int32) -> {states...}`` (zeros)
- ``predict(tokens [B, T] int32) -> {logits [B, T, V]}`` (id 0 = padding, masked)
- ``generate(prompt [B, P] int32, max_length [] int32) -> {tokens [B, L], lengths [B]}`` (greedy)
- ``sample(prompt, max_length, temperature [] float32, seed [] int32) -> {tokens, lengths}``

With ``text`` (the SavedModel of ``seqkit export``, not the TFLite source), a run that reads
text also has ``predict_text(text [B] string)`` (acceptor: ``label``, ``probability``,
``probabilities``; tagger: ``tokens``, ``tags``, ``lengths``, ``probabilities``) or
``generate_text(text [B] string) -> {text [B]}`` (language model, greedy): see
:mod:`seqkit.inference.serving`.

``ExportArchive`` freezes Keras 3 variables correctly for the TFLite converter
(a bare ``tf.Module`` leaves them as resource variables that TFLite reads as NaN).

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

from seqkit.errors import SeqkitError
from seqkit.export.frame_lengths import lengths_predict_fn, lengths_spec
from seqkit.inference.decoding import decode
from seqkit.inference.serving import add_text_endpoints


def stepper_for(prep, model):
    """The head's step view of ``model``; refuses heads that cannot stream.

    Raises:
        SeqkitError: the head has no step model (e.g. a bidirectional encoder).
    """
    return prep.head.stepper(model)  # the head's own refusal when it has none


def predict_input_spec(prep, batch: int | None = None, length: int | None = None):
    """``tokens [B, T] int32`` (``model.char_embedding``: ``[B, T, 1 + W]``, word id then
    character ids) or ``frames [B, T, D] float32`` (``None`` = any size)."""
    import tensorflow as tf

    inputs = getattr(prep.head, "inputs", None)
    if inputs is not None and inputs.chars is not None:
        return tf.TensorSpec([batch, length, 1 + inputs.chars.max_chars], tf.int32, name="tokens")
    if inputs is not None and inputs.kind == "frames":
        return tf.TensorSpec([batch, length, inputs.width], tf.float32, name="frames")
    return tf.TensorSpec([batch, length], tf.int32, name="tokens")


def predict_fn(prep, model, unroll: bool = False):
    """``predict`` of the export: raw inputs in (frames normalised in-graph, NaN kept as padding),
    ``{"logits": ...}`` out; a CRF tagger adds ``"tags" [B, T] int32``, its Viterbi paths
    (0 at padding), decoded in the graph by a ``tf.scan`` loop, or with ``unroll`` (a pinned
    length) as straight-line ops (:func:`seqkit.layers.crf.crf_viterbi`). With the shape pinned
    the loop converts to TFLite builtins (a WHILE), so the full-sequence export keeps it: the
    model's size does not grow with ``--length``."""
    import tensorflow as tf

    inputs = getattr(prep.head, "inputs", None)
    from seqkit.layers.crf import crf_layer

    crf = crf_layer(model)

    def answer(z, mask):  # mask: a thunk, traced only for a CRF (a full-integer graph has no int32 op)
        if crf is None:
            return {"logits": z}
        return {"logits": z, "tags": crf.decode(z, mask(), unroll=unroll)}

    if inputs is None or inputs.kind != "frames":
        words = (lambda t: t[..., 0]) if inputs is not None and inputs.chars is not None else (lambda t: t)
        return lambda tokens: answer(model(tokens, training=False), lambda: tf.not_equal(words(tokens), 0))
    mean = tf.constant(inputs.normalizer.mean, tf.float32)
    std = tf.constant(inputs.normalizer.std, tf.float32)
    return lambda frames: answer(model((frames - mean) / std, training=False),
                                 lambda: tf.logical_not(tf.reduce_any(tf.math.is_nan(frames), axis=-1)))


def build_full_sequence_archive(prep, model, batch: int, length: int, lengths: bool = False,
                                mask_dtype="bool"):
    """An ``ExportArchive`` with ``predict`` alone, its input pinned to ``[batch, length(, D)]``;
    with ``lengths`` (frames, full-integer exports) a second input ``lengths [batch] int32``
    marks the padding instead of NaN (:mod:`seqkit.export.frame_lengths`), a ``mask_dtype`` mask
    (float32 for int16x8's arithmetic masking, :func:`seqkit.export.unrolled.arithmetic_unroll`)."""
    import keras

    archive = keras.export.ExportArchive()
    archive.track(model)
    if lengths:
        archive.add_endpoint("predict", lengths_predict_fn(prep, model, length, mask_dtype),
                             input_signature=[predict_input_spec(prep, batch, length), lengths_spec(batch)])
        return archive
    archive.add_endpoint("predict", predict_fn(prep, model),
                         input_signature=[predict_input_spec(prep, batch, length)])
    return archive


def build_archive(prep, model, *, with_step: bool = True, text: bool = False,
                  step_only: bool = False, stepper=None):
    """Return ``(archive, stepper)``: an ``ExportArchive`` tracking ``model`` with the signatures above.

    With ``with_step=False`` (a bidirectional encoder exported full-sequence) the
    archive has ``predict`` only (and the text signatures) and ``stepper`` is None. With
    ``text``, a run that reads text also gets ``predict_text`` (acceptor, tagger) or
    ``generate_text`` (language model): raw strings in, tokenized in the graph
    (:mod:`seqkit.inference.serving`). With ``step_only`` (the TFLite converter's source) it has
    ``step`` and ``initial_state`` alone: the converter and the calibration read nothing
    else, and tracing ``predict`` / ``generate`` / ``sample`` (while loops) and writing them
    was most of an export's time. ``stepper`` replaces the head's step view of ``model`` (a
    full-integer export's cell-state scaling, :mod:`seqkit.export.cell_scaling`).

    Raises:
        SeqkitError: ``with_step`` and the head cannot stream.
    """
    import keras
    import tensorflow as tf

    archive = keras.export.ExportArchive()
    archive.track(model)
    if not step_only:
        archive.add_endpoint("predict", predict_fn(prep, model), input_signature=[predict_input_spec(prep)])
    if text and not step_only:
        add_text_endpoints(archive, prep, model)
    if not with_step:
        return archive, None
    st = stepper or stepper_for(prep, model)
    names, sizes = st.state_names(), st.state_sizes()
    state_specs = [tf.TensorSpec([None, n], tf.float32, name=nm) for nm, n in zip(names, sizes)]

    def step(x, *states):
        logits, new = st.step(x, list(states))
        return {"logits": logits, **dict(zip(names, new))}

    def initial_state(batch_size):
        return dict(zip(names, st.initial_state(batch_size)))

    def generate(prompt, max_length):
        toks, lens = decode(st.step, st.initial_state(tf.shape(prompt)[0]), prompt,
                            max_length=max_length, greedy=True)
        return {"tokens": toks, "lengths": lens}

    def sample(prompt, max_length, temperature, seed):
        toks, lens = decode(st.step, st.initial_state(tf.shape(prompt)[0]), prompt,
                            max_length=max_length, greedy=False, temperature=temperature, seed=seed)
        return {"tokens": toks, "lengths": lens}

    i32 = lambda name, shape=(): tf.TensorSpec(shape, tf.int32, name=name)  # noqa: E731
    archive.add_endpoint("step", step, input_signature=[st.input_spec(), *state_specs])
    archive.add_endpoint("initial_state", initial_state, input_signature=[i32("batch_size")])
    if step_only or prep.head.answers != "generate":  # generation signatures for generating heads
        return archive, st
    archive.add_endpoint("generate", generate,
                         input_signature=[i32("prompt", [None, None]), i32("max_length")])
    archive.add_endpoint("sample", sample,
                         input_signature=[i32("prompt", [None, None]), i32("max_length"),
                                          tf.TensorSpec([], tf.float32, name="temperature"), i32("seed")])
    return archive, st
