"""SavedModel signatures of an encoder-decoder (``seq2seq``) run, built with ``keras.export.ExportArchive``.

The encoder reads the whole source at once (a bidirectional encoder is fine:
it never streams); the decoder runs one target token per call, as a device
loop does. ``B`` = batch (beam search: sources x beams), ``S`` = source
length, ``Hm`` = memory width (encoder units, doubled when bidirectional),
``A`` = key width, ``H`` = decoder units, ``V`` = target vocabulary.

- ``encode(source [B, S] int32) -> {memory [B, S, Hm] float32, memory_mask [B, S] float32,
  keys [B, S, A] float32, <states> [B, H] float32}``: the attention memory, its
  mask (1.0 at real source symbols, 0.0 at padding id 0), the attention keys
  computed once per source (:meth:`Seq2SeqDecoder.precompute`: ``U h`` for
  Bahdanau, ``W_a^T h`` for Luong ``general``, the memory itself for
  ``luong_dot`` and ``none``) and the decoder's start states.
- ``decode_step(token [B] int32, memory, memory_mask, keys, <states>) -> {logits [B, V],
  <states>}``: one decoder step (:meth:`Seq2SeqDecoder.step`); feed ``<s>`` (id 2)
  first, then the previous output, and carry the states.
- ``generate(source [B, S] int32, max_length [] int32) -> {tokens [B, L] int32,
  lengths [B] int32}``: greedy decoding in-graph (:func:`seqkit.inference.decoding.decode`;
  the end marker is kept in ``tokens``, ``lengths`` counts the symbols before it).
- ``beam_search(source, max_length) -> {tokens [B, N, L], lengths [B, N], scores [B, N]}``:
  :func:`seqkit.inference.decoding.beam_search` with the recipe's ``decoding.beam_width``,
  ``decoding.length_penalty`` (GNMT, Wu et al. 2016, eq. 14) and ``decoding.n_best``
  baked in (the beam width is a Python int: it shapes the graph).

- ``predict_text(text [B] string) -> {output [B], hypotheses [B, N], scores [B, N]}`` and
  ``generate_text(text) -> {output [B]}``: the same beam search and greedy decoding from raw
  source strings, tokenized in the graph, outputs as target symbols joined by spaces
  (:mod:`seqkit.inference.serving`).

``<states>`` are named ``dec_{layer}_{state}`` (LSTM: ``h``, ``c``; GRU and
SimpleRNN: ``h``), layer by layer, then ``feed`` (``h~_{t-1}``, zeros at the
start) for Luong attention's input feeding: :func:`state_names`.

The memory mask is float32 rather than bool so every LiteRT binding (Kotlin,
Swift, C) can hold it as a plain float array; inside the graph it is read as
``mask > 0.5``. The TFLite archive (:func:`build_seq2seq_archive` with
``source_length``) pins ``encode`` to ``[1, S_max]``: a recurrent encoder
converts to TFLite builtins only for a static shape (a WHILE loop that keeps the
padding mask); ``decode_step`` keeps a dynamic batch so beam search can step
``K`` rows at once.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

from seqkit.data.vocab import START_ID
from seqkit.export.id_lookups import id_mask
from seqkit.heads.seq2seq.decoding import Seq2SeqStepper
from seqkit.inference.decoding import beam_search, check_beam_args, decode
from seqkit.inference.serving import add_text_endpoints


def state_names(model) -> list[str]:
    """Decoder state names in :meth:`Seq2SeqDecoder.state_sizes` order (see the module docstring)."""
    dec = model.get_layer("decoder")
    names = [f"dec_{i}_{s}" for i in range(dec.num_layers) for s in dec.plugin.state_names]
    return names + (["feed"] if dec.feeds_attentional_vector else [])


def widths(model) -> dict:
    """``{"memory": Hm, "keys": A, "states": [H, ...], "target_vocab": V}`` of a seq2seq model."""
    import tensorflow as tf

    enc, dec = model.get_layer("encoder"), model.get_layer("decoder")
    hm = int(enc.outputs[0].shape[-1])
    keys = dec.precompute(tf.zeros([1, 1, hm], tf.float32))
    return {"memory": hm, "keys": int(keys.shape[-1]), "states": [int(s) for s in dec.state_sizes()],
            "target_vocab": int(dec.vocab_size)}


def build_seq2seq_archive(prep, model, *, source_length: int | None = None, lookups: bool = False):
    """Return an ``ExportArchive`` tracking ``model`` with the signatures above.

    Args:
        prep: the loaded run (its recipe's ``decoding`` section is baked into ``beam_search``).
        model: the trained seq2seq Keras model.
        source_length: ``None`` for the SavedModel (``encode`` takes any ``[B, S]``; all
            four signatures); an int ``S_max`` for the TFLite conversion (``encode`` pinned
            to ``[1, S_max]``, ``decode_step`` alone besides it, memory ``[B, S_max, *]``; no
            text signatures).
        lookups: the pinned archive of an int16x8 export (traced inside
            :func:`seqkit.export.id_lookups.gathered_ids` and
            :func:`~seqkit.export.id_lookups.shifted_attention`): the source's padding mask
            is a float table lookup (``gather(keep, source)``,
            :func:`seqkit.export.id_lookups.id_mask`) instead of ``source != 0``, and
            ``decode_step`` reads ``memory_mask`` as that float, not ``> 0.5`` (no int32 op
            but GATHER, no CAST / GREATER).

    Raises:
        SeqkitError: bad decoding settings in the recipe (:func:`seqkit.inference.decoding.check_beam_args`).
    """
    import keras
    import tensorflow as tf

    st = Seq2SeqStepper(model)
    names, w = state_names(model), widths(model)
    f32 = lambda name, shape: tf.TensorSpec(shape, tf.float32, name=name)  # noqa: E731
    i32 = lambda name, shape=(): tf.TensorSpec(shape, tf.int32, name=name)  # noqa: E731
    pinned = source_length is not None
    S = source_length if pinned else None

    source_vocab = next(lay.input_dim for lay in model._flatten_layers(recursive=True)
                        if lay.name == "source_embedding")

    def start(source):
        states, (memory, mask, keys) = st.start(source)
        if lookups:
            mask = id_mask(source, source_vocab, "float32")
        return states, [memory, mask, keys]

    def encode(source):
        states, (memory, mask, keys) = start(source)
        return {"memory": memory, "memory_mask": tf.cast(mask, tf.float32), "keys": keys,
                **dict(zip(names, states))}

    def decode_step(token, memory, memory_mask, keys, *states):
        logits, new = st.step(token, list(states),
                              [memory, memory_mask if lookups else memory_mask > 0.5, keys])
        return {"logits": logits, **dict(zip(names, new))}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("encode", encode, input_signature=[i32("source", [1 if pinned else None, S])])
    archive.add_endpoint("decode_step", decode_step, input_signature=[
        i32("token", [None]), f32("memory", [None, S, w["memory"]]), f32("memory_mask", [None, S]),
        f32("keys", [None, S, w["keys"]]), *[f32(n, [None, h]) for n, h in zip(names, w["states"])]])
    if pinned:
        return archive
    dec = prep.recipe.decoding
    check_beam_args(dec.beam_width, dec.n_best, dec.length_penalty, 0, dec.max_length)

    def generate(source, max_length):
        states, extras = start(source)
        prompt = tf.fill([tf.shape(source)[0], 1], START_ID)
        toks, lens = decode(st.step, states, prompt, max_length=max_length, greedy=True, extras=extras)
        return {"tokens": toks, "lengths": lens}

    def beam(source, max_length):
        states, extras = start(source)
        prompt = tf.fill([tf.shape(source)[0], 1], START_ID)
        res = beam_search(st.step, states, prompt, beam_width=dec.beam_width, n_best=dec.n_best,
                          max_length=max_length, length_penalty=dec.length_penalty, extras=extras)
        return {"tokens": res.tokens, "lengths": res.lengths, "scores": res.scores}

    archive.add_endpoint("generate", generate, input_signature=[i32("source", [None, None]), i32("max_length")])
    archive.add_endpoint("beam_search", beam, input_signature=[i32("source", [None, None]), i32("max_length")])

    add_text_endpoints(archive, prep, model)
    return archive
