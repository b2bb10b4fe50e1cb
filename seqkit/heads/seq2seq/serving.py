"""The text signatures of an encoder-decoder run (:mod:`seqkit.inference.serving`):
``predict_text(text [B] string)`` beam-searches with the recipe's ``decoding`` (beam width, n-best,
length penalty): ``output [B]`` (the best hypothesis, symbols joined by spaces), ``hypotheses [B, N]``,
``scores [B, N]`` float32, as ``run.transduce``; ``generate_text``: greedy ``output [B]``. An empty
source gives ``""`` (score 0); a source longer than ``data.max_length`` fails the call.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow."""

from __future__ import annotations

from seqkit.data.vocab import START_ID
from seqkit.heads.seq2seq.decoding import Seq2SeqStepper
from seqkit.inference.decoding import beam_search, decode
from seqkit.inference.serving import TextFunctions, _dense, _names


class Seq2SeqTextFunctions(TextFunctions):
    """:class:`~seqkit.inference.serving.TextFunctions` with the role ``"transduce"``."""

    roles = {**TextFunctions.roles,
             "transduce": {"predict_text": "transduce_beam", "generate_text": "transduce_greedy"}}

    def _source(self, text):
        import tensorflow as tf

        _, ids = self.encoder.encode(text)
        limit = self.prep.recipe.data.max_length
        check = tf.debugging.assert_less_equal(
            ids.row_lengths(), tf.cast(limit, tf.int64),
            message=f"a source has more symbols than the run's data.max_length = {limit}; shorten it")
        with tf.control_dependencies([check]):
            src = tf.identity(_dense(ids))
        st = Seq2SeqStepper(self.model)
        states, extras = st.start(src)
        prompt = tf.fill([tf.shape(src)[0], 1], START_ID)
        return st, states, extras, prompt, ids.row_lengths() > 0

    def _symbols(self, toks, lengths):
        """``[..., L]`` target ids + lengths -> ``[...]`` strings, symbols joined by spaces."""
        import tensorflow as tf

        names = tf.gather(_names(self.prep.head.target_vocab.tokens), toks)
        width = tf.shape(toks)[-1]
        # a space after every symbol but the last (reduce_join of a ragged tensor drops "" symbols)
        parts = tf.where(tf.sequence_mask(lengths - 1, width), tf.strings.join([names, " "]),
                         tf.where(tf.sequence_mask(lengths, width), names, ""))
        return tf.strings.reduce_join(parts, axis=-1)

    def _decode_length(self) -> int:
        r = self.prep.recipe
        return min(r.decoding.max_length, r.data.max_length)

    def transduce_beam(self, text):
        """``predict_text`` of a seq2seq run: ``{output [B], hypotheses [B, N], scores [B, N]}``."""
        import tensorflow as tf

        dec = self.prep.recipe.decoding
        st, states, extras, prompt, some = self._source(text)
        res = beam_search(st.step, states, prompt, beam_width=dec.beam_width, n_best=dec.n_best,
                          max_length=self._decode_length(), length_penalty=dec.length_penalty, extras=extras)
        hyps = tf.where(some[:, None], self._symbols(res.tokens, res.lengths), "")
        scores = tf.where(some[:, None], res.scores, 0.0)
        return {"output": hyps[:, 0], "hypotheses": hyps, "scores": scores}

    def transduce_greedy(self, text):
        """``generate_text`` of a seq2seq run: ``{output [B]}``, greedy."""
        import tensorflow as tf

        st, states, extras, prompt, some = self._source(text)
        toks, lens = decode(st.step, states, prompt, max_length=self._decode_length(), greedy=True,
                            extras=extras)
        return {"output": tf.where(some, self._symbols(toks, lens), "")}


