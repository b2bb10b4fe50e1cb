"""Encoder-decoder head (Sutskever et al. 2014; with attention, Bahdanau et al. 2014 / Luong et al. 2015).

Model: ``(source [B, S] int32, decoder_inputs [B, T] int32) -> logits [B, T, V_target]``.

* Encoder: source embedding (``mask_zero``) and the recipe's cell stack
  (``model.cell``, ``model.layers``, ``model.bidirectional``), built by
  :func:`seqkit.layers.stack.apply_stack`; its outputs are the attention memory.
* Bridge: the decoder starts from the encoder's final states. When the
  encoder and decoder have the same cell, width and layer count and the
  encoder is unidirectional, the states pass unchanged; otherwise each
  decoder state (every layer; LSTM both ``h`` and ``c``) is
  ``tanh(W [encoder layer j's final states] + b)`` (Bahdanau et al. 2014,
  appendix A.2.2, ``s_0 = tanh(W_s h_1)``), with ``j`` the encoder layer at the
  same depth from the top (decoder layers beyond the encoder's depth use its
  top layer).
* Decoder: :class:`seqkit.layers.decoder.Seq2SeqDecoder` (attention ``none |
  bahdanau | luong | luong_dot``, context fed to the decoder input).
* Training: teacher forcing, ``decoder_inputs = [<s>] + target``,
  ``targets = target + [</s>]``, padding 0 excluded from the loss.

The G2P recipe and the data source that feeds ``(source, target)`` pairs are
not wired yet (they follow the data-pipeline refactor), so this head is not in
the built-in head list; importing this module registers it as ``seq2seq``.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from seqkit.data.vocab import END_ID, START_ID
from seqkit.errors import RecipeError
from seqkit.heads.base import Head
from seqkit.layers.stack import apply_stack, make_plugin
from seqkit.registry import register_head


class Seq2SeqOptions(BaseModel):
    """Recipe keys of the ``seq2seq`` head (under ``head``); decoder defaults follow ``model``."""

    model_config = ConfigDict(extra="forbid")
    attention: Literal["none", "bahdanau", "luong", "luong_dot"] = "bahdanau"
    attention_units: Optional[int] = Field(None, gt=0)
    decoder_cell: Optional[str] = None
    decoder_units: Optional[int] = Field(None, gt=0)
    decoder_layers: Optional[int] = Field(None, gt=0)
    target_embedding_dim: Optional[int] = Field(None, gt=0)


def seq2seq_pair(source_ids, target_ids):
    """Teacher forcing for one pair: ``(source [S], target [T])`` int32 ->
    ``((source, [<s>] + target), target + [</s>])``."""
    import tensorflow as tf

    target_ids = tf.cast(target_ids, tf.int32)
    return ((tf.cast(source_ids, tf.int32), tf.concat([[START_ID], target_ids], 0)),
            tf.concat([target_ids, [END_ID]], 0))


@register_head("seq2seq")
class Seq2SeqHead(Head):
    """Encoder-decoder over separate source and target vocabularies.

    Args:
        recipe: the validated recipe (``model`` = encoder, ``head`` = :class:`Seq2SeqOptions`).
        vocab: source :class:`~seqkit.data.vocab.Vocabulary` (may be ``None`` when
            :meth:`build_model` is given the sizes).
        target_vocab: target vocabulary (likewise).
    """

    Options = Seq2SeqOptions

    def __init__(self, recipe, vocab=None, target_vocab=None):
        super().__init__(recipe, vocab)
        self.target_vocab = target_vocab

    def to_pair(self, source_ids, target_ids):
        return seq2seq_pair(source_ids, target_ids)

    def decoder_config(self) -> dict:
        """The decoder's cell, width and depth (head keys, else the encoder's)."""
        m, o = self.recipe.model, self.options
        same_cell = o.decoder_cell in (None, m.cell)
        return dict(cell=o.decoder_cell or m.cell, units=o.decoder_units or m.units,
                    layers=o.decoder_layers or m.layers,
                    cell_options=self.recipe.cell_options.model_dump() if same_cell else {})

    def build_model(self, source_vocab_size: int | None = None, target_vocab_size: int | None = None):
        """Build the training model.

        Args:
            source_vocab_size / target_vocab_size: vocabulary sizes (default: the
                sizes of the vocabularies given to the head).

        Returns:
            ``keras.Model`` named ``seq2seq`` with inputs ``source [B, S]`` and
            ``decoder_inputs [B, T]`` (int32, 0 = padding) and output logits
            ``[B, T, V_target]``; its sub-model ``encoder`` maps a source to
            ``[memory [B, S, Hm], *decoder start states [B, H]]``.

        Raises:
            RecipeError: no vocabulary size, or a Luong ``dot`` score with an
                encoder output width different from the decoder width.
        """
        import keras
        from keras import ops

        from seqkit.layers.decoder import Seq2SeqDecoder
        from seqkit.registry import CELLS

        vs = source_vocab_size or (len(self.vocab) if self.vocab is not None else None)
        vt = target_vocab_size or (len(self.target_vocab) if self.target_vocab is not None else None)
        if not vs or not vt:
            raise RecipeError("seq2seq head: source and target vocabulary sizes are needed "
                              "(build_model(source_vocab_size, target_vocab_size)).")
        m, o = self.recipe.model, self.options
        dec = self.decoder_config()
        enc_width = m.units * (2 if m.bidirectional else 1)
        if o.attention == "luong_dot" and enc_width != dec["units"]:
            raise RecipeError(
                f"head.attention: luong_dot needs the encoder output width ({enc_width}"
                f"{', bidirectional' if m.bidirectional else ''}) to equal head.decoder_units "
                f"({dec['units']}); set head.decoder_units: {enc_width} or use attention: luong.")
        plugin = make_plugin(m, self.recipe.cell_options)
        source = keras.Input(shape=(None,), dtype="int32", name="source")
        x = keras.layers.Embedding(vs, m.embedding_dim, mask_zero=True, name="source_embedding")(source)
        memory, enc_states = apply_stack(x, plugin, m, causal=False, name="encoder_rnn", return_state=True)
        dec_names = CELLS.get(dec["cell"]).state_names
        start = bridge(enc_states, enc_names=plugin.state_names, enc_units=m.units,
                       bidirectional=m.bidirectional, dec_names=dec_names, dec_units=dec["units"],
                       dec_layers=dec["layers"])
        encoder = keras.Model(source, [memory, *start], name="encoder")

        src = keras.Input(shape=(None,), dtype="int32", name="source")
        dec_in = keras.Input(shape=(None,), dtype="int32", name="decoder_inputs")
        enc_out = encoder(src)
        decoder = Seq2SeqDecoder(vt, o.target_embedding_dim or m.embedding_dim, dec["cell"],
                                 dec["units"], dec["layers"], attention=o.attention,
                                 attention_units=o.attention_units, cell_options=dec["cell_options"],
                                 name="decoder")
        logits = decoder(dec_in, enc_out[0], ops.not_equal(src, 0), list(enc_out[1:]))
        return keras.Model([src, dec_in], logits, name="seq2seq")

    def stepper(self, model) -> "Seq2SeqStepper":
        """The encoder pass plus one-step decoder of ``model``, for :mod:`seqkit.decoding`."""
        return Seq2SeqStepper(model)


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
    """Encoder pass plus one-step decoder for :mod:`seqkit.decoding` (shares the model's weights).

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
        model: the training model of :class:`Seq2SeqHead`.
        sources: list of source id lists (may be empty lists; 0 = padding is not allowed inside).
        beam_width / n_best / length_penalty / max_length: see
            :func:`seqkit.decoding.beam_search` (GNMT length penalty, Wu et al. 2016, eq. 14).
        batch_size: sources decoded together (results do not depend on it).

    Returns:
        Per source, ``n_best`` ``(target ids without </s>, score)`` pairs, best first.

    Raises:
        SeqkitError: bad beam arguments (e.g. ``n_best > beam_width``).
    """
    import numpy as np
    import tensorflow as tf

    from seqkit.decoding import beam_search, check_beam_args

    check_beam_args(beam_width, n_best, length_penalty, 0, max_length)
    st = Seq2SeqStepper(model)

    @tf.function(reduce_retracing=True)
    def run(src, alpha):
        states, extras = st.start(src)
        start = tf.fill([tf.shape(src)[0], 1], START_ID)
        return beam_search(st.step, states, start, beam_width=beam_width, n_best=n_best,
                           max_length=max_length, length_penalty=alpha, extras=extras)

    out = []
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
    return out
