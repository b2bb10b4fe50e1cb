"""What an encoder-decoder run decodes with, below the head: teacher-forced pairs, the bridge from
encoder to decoder states, the one-step decoder view and beam-search transduction. The export, its
parity check, the runtime and the text signatures import these (never the head module, which
imports them lazily).

TensorFlow, Keras and the seqkit modules that import them and NumPy are imported inside the
functions that use them, so importing this module does not load TensorFlow."""

from __future__ import annotations

from seqkit.data.markers import add_markers
from seqkit.data.pipeline import flat_column, padded_batches
from seqkit.data.vocab import END_ID, START_ID
from seqkit.errors import SeqkitError
from seqkit.inference.decoding import beam_search, check_beam_args
from seqkit.progress import progress


def seq2seq_pair(source_ids, target_ids):
    """Teacher forcing for a pair: ``(source, target)`` ->
    ``((source, [<s>] + target), target + [</s>])``, all int32.

    Args:
        source_ids, target_ids: one pair (``[S]``, ``[U]``) or ragged batches
            (``tf.RaggedTensor [N, (S)]``, ``[N, (U)]``); int.

    Returns:
        ``((source, decoder_inputs [U + 1]), targets [U + 1])`` (per row for batches).
    """
    import tensorflow as tf

    return ((tf.cast(source_ids, tf.int32), add_markers(target_ids, start=START_ID)),
            add_markers(target_ids, end=END_ID))


def make_pair_dataset(sources: list, targets: list, *, batch_size: int, shuffle: bool, seed: int,
                      bucket: bool, max_length: int, first_epoch: int = 0, steps_per_epoch: int | None = None):
    """Teacher-forced encoder-decoder batches from already-encoded ``(source, target)`` pairs.

    Args:
        sources: per example the source ids ``[S] int32`` (no padding inside; may be empty).
        targets: per example the target ids ``[U] int32`` without markers.
        batch_size, shuffle, seed, bucket, max_length, first_epoch, steps_per_epoch: as
            :func:`seqkit.data.pipeline.make_array_dataset` (buckets follow the source length).

    Returns:
        Batches ``((source [B, S], decoder_inputs [B, U+1]), targets [B, U+1])``, all int32,
        padded with 0; ``decoder_inputs = [<s>] + target``, ``targets = target + [</s>]``
        (:func:`seq2seq_pair`).
    """
    src, tgt = flat_column(sources, "int32"), flat_column(targets, "int32")
    (src, dec_in), tgt = seq2seq_pair(src, tgt)
    return padded_batches([src, dec_in, tgt], [0, 0, 0], [len(s) for s in sources], batch_size=batch_size,
                          shuffle=shuffle, seed=seed, bucket=bucket, max_length=max_length,
                          first_epoch=first_epoch, steps_per_epoch=steps_per_epoch,
                          pack=lambda c: ((c[0], c[1]), c[2]))


def bridge(enc_states, *, enc_names, enc_units, bidirectional, dec_names, dec_units, dec_layers):
    """Decoder start states from the encoder's final states (see the module docstring).

    Args:
        enc_states: per encoder layer, its final states (``[B, H]`` Keras tensors;
            bidirectional: forward then backward).
        enc_names / dec_names: the cells' ``state_names``.
        enc_units / dec_units: widths; dec_layers: decoder depth.

    Returns:
        Flat list of ``dec_layers * len(dec_names)`` ``[B, dec_units]`` tensors.
    """
    import keras

    enc_layers = len(enc_states)
    same = (not bidirectional and enc_layers == dec_layers and tuple(enc_names) == tuple(dec_names)
            and enc_units == dec_units)
    if same:
        return [s for layer in enc_states for s in layer]
    out, joined = [], {}
    for i in range(dec_layers):
        j = enc_layers - dec_layers + i if enc_layers >= dec_layers else min(i, enc_layers - 1)
        if j not in joined:
            st = enc_states[j]
            joined[j] = st[0] if len(st) == 1 else keras.layers.Concatenate(name=f"bridge_in_{j}")(st)
        src = joined[j]
        for name in dec_names:
            out.append(keras.layers.Dense(dec_units, activation="tanh", name=f"bridge_{i}_{name}")(src))
    return out


class Seq2SeqStepper:
    """Encoder pass plus one-step decoder for :mod:`seqkit.inference.decoding` (shares the model's weights).

    Args:
        model: the training model of :class:`Seq2SeqHead`.

    Use::

        states, extras = stepper.start(source)            # source [B, S] int32
        decode(stepper.step, states, prompt=[[<s>]] * B, extras=extras, ...)
        beam_search(stepper.step, states, [[<s>]] * B, extras=extras, beam_width=5, ...)
    """

    def __init__(self, model):
        self.encoder = model.get_layer("encoder")
        self.decoder = model.get_layer("decoder")

    def start(self, source):
        """``source [B, S] int32 -> (states, extras)``: the decoder's start states (list of
        ``[B, H]``, input-feeding state included) and ``[memory, mask, keys]``."""
        import tensorflow as tf

        source = tf.convert_to_tensor(source, tf.int32)
        out = self.encoder(source, training=False)
        memory = tf.cast(out[0], tf.float32)
        mask = tf.not_equal(source, 0)
        states = self.decoder.full_initial_states(list(out[1:]))
        return states, [memory, mask, self.decoder.precompute(memory)]

    def step(self, token, states, extras):
        """``(token [B] int32, states, extras) -> (logits [B, V], new_states)``."""
        return self.decoder.step(token, states, extras)

    def alignment(self, source, decoder_inputs):
        """Attention weights under teacher forcing: ``[B, T, S]`` float32 (zeros without attention)."""
        import tensorflow as tf

        source = tf.convert_to_tensor(source, tf.int32)
        out = self.encoder(source, training=False)
        _, w = self.decoder(tf.convert_to_tensor(decoder_inputs, tf.int32), out[0],
                            tf.not_equal(source, 0), list(out[1:]), return_weights=True)
        return w


def transduce(model, sources, *, beam_width: int = 1, n_best: int = 1, length_penalty: float = 0.0,
              max_length: int = 50, batch_size: int = 64) -> list:
    """Decode a list of sources with a trained encoder-decoder (beam search; width 1 = greedy).

    Args:
        model: the training model of :class:`Seq2SeqHead`, or a list of such models with the same
            source and target vocabularies, decoded together as an ensemble (one beam over their
            mean log-probabilities, :class:`seqkit.heads.seq2seq.ensemble.EnsembleStepper`).
        sources: list of source id lists (may be empty lists; 0 = padding is not allowed inside).
        beam_width / n_best / length_penalty / max_length: see
            :func:`seqkit.inference.decoding.beam_search` (GNMT length penalty, Wu et al. 2016, eq. 14).
        batch_size: sources decoded together (results do not depend on it).

    Returns:
        Per source, ``n_best`` ``(target ids without </s>, score)`` pairs, best first.

    Raises:
        SeqkitError: bad beam arguments (e.g. ``n_best > beam_width``).
    """
    import numpy as np
    import tensorflow as tf

    check_beam_args(beam_width, n_best, length_penalty, 0, max_length)
    models = list(model) if isinstance(model, (list, tuple)) else [model]
    sizes = sorted({int(m.outputs[0].shape[-1]) for m in models})
    if len(sizes) > 1:
        raise SeqkitError(f"an ensemble's models must share the target vocabulary; their output "
                          f"layers have {', '.join(map(str, sizes))} columns. Decode together only "
                          f"runs of one recipe and data (e.g. the seeds of seqkit train --seeds).")
    if len(models) == 1:
        st = Seq2SeqStepper(models[0])
    else:
        from seqkit.heads.seq2seq.ensemble import EnsembleStepper

        st = EnsembleStepper([Seq2SeqStepper(m) for m in models])

    # One trace per call: any batch size and source width ([B, S] unknown), so the last, smaller
    # batch and every new source width reuse the same graph.
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.float32)])
    def run(src, alpha):
        states, extras = st.start(src)
        start = tf.fill([tf.shape(src)[0], 1], START_ID)
        return beam_search(st.step, states, start, beam_width=beam_width, n_best=n_best,
                           max_length=max_length, length_penalty=alpha, extras=extras)

    out = []
    what = "greedy decoding" if beam_width == 1 else f"beam decoding (width {beam_width})"
    with progress(len(sources), what, "sources") as bar:  # drawn only on a terminal (seqkit.progress)
        for i in range(0, len(sources), batch_size):
            chunk = sources[i:i + batch_size]
            width = max([len(s) for s in chunk] + [1])
            src = np.zeros((len(chunk), width), "int32")
            for r, s in enumerate(chunk):
                src[r, :len(s)] = s
            res = run(tf.constant(src), tf.constant(length_penalty, tf.float32))
            toks, lens, scores = res.tokens.numpy(), res.lengths.numpy(), res.scores.numpy()
            for r in range(len(chunk)):
                out.append([(toks[r, k, :lens[r, k]].tolist(), float(scores[r, k])) for k in range(n_best)])
            bar.update(len(chunk))
    return out
