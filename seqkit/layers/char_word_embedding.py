"""Character-aware word embedding (``model.char_embedding``).

``packed [..., 1 + W] int32 -> [..., E + C] float32`` where column 0 of the last axis is
the word id and columns ``1..W`` its character ids (:mod:`seqkit.data.word_chars`):

* the word id through an embedding table ``[V, E]``;
* the characters through an embedding ``[K, dim]`` and a recurrent encoder of ``units``
  (any cell plugin) over the word's characters, masked at padding characters; its final
  state ``[units]``, or with ``bidirectional`` the forward final state and the backward
  final state concatenated ``[2 units]`` (= ``C``): the character BiLSTM of Lample et al.
  2016, "Neural Architectures for Named Entity Recognition", sec. 4.1;
* the two concatenated.

Each word is encoded on its own, so one step (``[B, 1 + W]``) gives exactly the vector the
full sequence (``[B, T, 1 + W]``) gives at that position: the step model calls this layer.
The Keras mask is ``word id != 0`` (``[...]`` bool). A padding word (all zeros) still reads
its first character slot, so no character sequence is empty; its vector is masked downstream.

Keras is imported at the top (this module defines Keras classes); TensorFlow only in the functions
that call it.
"""

from __future__ import annotations

import keras
from keras import ops

from seqkit.cells.base import CellSpec
from seqkit.export.id_lookups import id_mask
from seqkit.registry import CELLS


@keras.saving.register_keras_serializable(package="seqkit")
class CharWordEmbedding(keras.layers.Layer):
    """Word embedding concatenated with a recurrent encoding of the word's characters.

    Args:
        vocab_size: word vocabulary size ``V``.
        embedding_dim: word embedding width ``E``.
        char_vocab_size: character vocabulary size ``K``.
        char_dim: character embedding width.
        units: the character encoder's hidden width.
        cell: the character encoder's cell plugin (``lstm``, ``gru``, ``simple_rnn``, ...; its
            default options).
        bidirectional: forward and backward final states (width ``2 units``), else forward only.
        max_chars: ``W``, characters per word.
    """

    def __init__(self, vocab_size: int, embedding_dim: int, char_vocab_size: int, char_dim: int,
                 units: int, cell: str = "lstm", bidirectional: bool = True, max_chars: int = 20,
                 **kwargs):
        super().__init__(**kwargs)

        self.vocab_size, self.embedding_dim = int(vocab_size), int(embedding_dim)
        self.char_vocab_size, self.char_dim = int(char_vocab_size), int(char_dim)
        self.units, self.cell, self.bidirectional = int(units), cell, bool(bidirectional)
        self.max_chars = int(max_chars)
        self.word_embedding = keras.layers.Embedding(vocab_size, embedding_dim, name="word_embedding")
        self.char_embedding = keras.layers.Embedding(char_vocab_size, char_dim, name="char_embedding")
        plugin_cls = CELLS.get(cell)
        plugin = plugin_cls(CellSpec(units=self.units, options=plugin_cls.Options()))
        rnn = plugin.make_layer(return_sequences=False, name="char_rnn")
        self.char_rnn = keras.layers.Bidirectional(rnn, name="char_rnn_bi") if bidirectional else rnn
        self.supports_masking = True

    @property
    def char_width(self) -> int:
        """``C``: the character encoding's width."""
        return self.units * (2 if self.bidirectional else 1)

    def build(self, input_shape):
        self.word_embedding.build((None,))
        self.char_embedding.build((None, self.max_chars))
        self.char_rnn.build((None, self.max_chars, self.char_dim))
        self.built = True

    def call(self, inputs):
        inputs = ops.cast(inputs, "int32")
        words = inputs[..., 0]
        chars = ops.reshape(inputs[..., 1:], (-1, self.max_chars))  # [N, W]
        valid = ops.not_equal(chars, 0)
        first = ops.ones_like(valid[:, :1])  # every sequence reads at least one slot
        mask = ops.concatenate([first, valid[:, 1:]], axis=1)
        enc = self.char_rnn(self.char_embedding(chars), mask=mask)  # [N, C]
        lead = ops.shape(inputs)[:-1]
        enc = ops.reshape(enc, (*lead, self.char_width))
        return ops.concatenate([self.word_embedding(words), ops.cast(enc, self.compute_dtype)], axis=-1)

    def step_call(self, inputs):
        """The same function with the character loop written out: ``W`` cell steps per direction
        (``layer.cell``, a padded character keeps the state), no WHILE loop. The step export uses
        it: a TFLite WHILE over a tensor list needs a static batch, which a step model has not.

        Args:
            inputs: ``[B, 1 + W] int32``.

        Returns:
            ``[B, E + C]`` float32, equal to :meth:`call` on the same rows.
        """
        inputs = ops.cast(inputs, "int32")
        chars = inputs[:, 1:]
        valid = ops.not_equal(chars, 0)
        mask = ops.concatenate([ops.ones_like(valid[:, :1]), valid[:, 1:]], axis=1)
        x = self.char_embedding(chars)  # [B, W, dim]
        if self.bidirectional:
            layers = [(self.char_rnn.forward_layer, range(self.max_chars)),
                      (self.char_rnn.backward_layer, range(self.max_chars - 1, -1, -1))]
        else:
            layers = [(self.char_rnn, range(self.max_chars))]
        finals = []
        for layer, order in layers:
            cell = layer.cell
            sizes = cell.state_size if isinstance(cell.state_size, (list, tuple)) else [cell.state_size]
            zeros = ops.zeros_like(x[:, 0, :1], dtype=x.dtype)  # [B, 1]
            states = [ops.repeat(zeros, int(n), axis=1) for n in sizes]
            out = states[0]
            for t in order:
                y, new = cell(x[:, t], states if len(states) > 1 else states[0], training=False)
                new = list(new) if isinstance(new, (list, tuple)) else [new]
                m = mask[:, t:t + 1]
                states = [ops.where(m, a, b) for a, b in zip(new, states)]
                out = ops.where(m, y, out)
            finals.append(out)
        enc = finals[0] if len(finals) == 1 else ops.concatenate(finals, axis=-1)
        return ops.concatenate([self.word_embedding(inputs[:, 0]), enc], axis=-1)

    def lookup_call(self, inputs, mask_dtype="bool"):
        """:meth:`call` with the packed ids read by table lookups alone, for full-integer pinned
        exports (:func:`seqkit.export.id_lookups.gathered_ids`): TF 2.21's int16x8 quantizer asks
        a calibrated range of any int32 tensor that feeds an op other than ``GATHER`` (here the
        slices and reshape of the packed ids, and ``chars != 0``), and records none. So the
        whole packed tensor indexes each table (both padded to ``max(V, K)`` rows) and the float
        results are sliced: ``gather(words, packed)[..., 0, :]``, ``gather(chars, packed)[...,
        1:, :]``, and the character mask ``gather(keep, packed)[..., 1:]`` with ``keep = [0, 1,
        ..., 1]``, in ``mask_dtype`` (float32 1 / 0 for
        :func:`seqkit.export.unrolled.arithmetic_unroll`). Same values as :meth:`call`.

        Args:
            inputs: ``[..., 1 + W] int32``.
            mask_dtype: the character mask's dtype, ``"bool"`` or ``"float32"``.

        Returns:
            ``[..., E + C]`` float32.
        """
        import tensorflow as tf

        ids = tf.cast(inputs, tf.int32) if inputs.dtype != tf.int32 else inputs
        rows = max(self.vocab_size, self.char_vocab_size)

        def table(emb):
            t = tf.convert_to_tensor(emb.embeddings)
            return tf.pad(t, [[0, rows - int(t.shape[0])], [0, 0]])

        words = tf.gather(table(self.word_embedding), ids)[..., 0, :]  # [..., E]
        x = tf.gather(table(self.char_embedding), ids)[..., 1:, :]  # [..., W, dim]
        valid = id_mask(ids, rows, mask_dtype)[..., 1:]  # [..., W]
        first = tf.ones_like(valid[..., :1])
        mask = tf.concat([first, valid[..., 1:]], axis=-1)
        lead = tf.shape(ids)[:-1]
        x = tf.reshape(x, (-1, self.max_chars, self.char_dim))
        mask = tf.reshape(mask, (-1, self.max_chars))
        enc = tf.reshape(self.char_rnn(x, mask=mask), tf.concat([lead, [self.char_width]], 0))
        return tf.concat([words, tf.cast(enc, words.dtype)], axis=-1)

    def lookup_mask(self, inputs, mask_dtype="bool"):
        """:meth:`compute_mask` as ``gather(keep, packed)[..., 0]`` (see :meth:`lookup_call`)."""
        return id_mask(inputs, max(self.vocab_size, self.char_vocab_size), mask_dtype)[..., 0]

    def compute_mask(self, inputs, mask=None):
        return ops.not_equal(inputs[..., 0], 0)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.embedding_dim + self.char_width)

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "embedding_dim": self.embedding_dim,
                "char_vocab_size": self.char_vocab_size, "char_dim": self.char_dim, "units": self.units,
                "cell": self.cell, "bidirectional": self.bidirectional, "max_chars": self.max_chars}
