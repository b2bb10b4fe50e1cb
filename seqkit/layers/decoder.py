"""The recurrent decoder of an encoder-decoder, with optional attention and input feeding.

One step, from the previous target token ``y_{t-1}`` and the decoder states
``s_{t-1}`` (every layer's cell states, flattened, seqkit's layout), over the
encoder memory ``h [B, S, Hm]`` with mask ``[B, S]``:

* ``none``: ``s_t = cells(E y_{t-1}, s_{t-1})``; ``logits = W_o s_t``.
* ``bahdanau`` (Bahdanau, Cho & Bengio 2014, eq. 4-6): ``c_t = attn(s_{t-1}, h)``
  with the top layer's ``h`` state as query; ``s_t = cells([E y_{t-1}; c_t], s_{t-1})``;
  ``logits = W_o [s_t; c_t]``.
* ``luong`` / ``luong_dot`` (Luong, Pham & Manning 2015, eq. 5 and section 3.3
  input feeding): ``s_t = cells([E y_{t-1}; h~_{t-1}], s_{t-1})``;
  ``c_t = attn(s_t, h)``; ``h~_t = tanh(W_c [c_t; s_t])``; ``logits = W_o h~_t``.
  ``h~`` (``[B, units]``, zeros at the start) is carried as one extra state
  after the cells' states.

Training runs the same step over the teacher-forced inputs in a
``tf.while_loop``; generation calls :meth:`Seq2SeqDecoder.step` through
:mod:`seqkit.inference.decoding`, so the two paths share every weight and formula.

Keras is imported at the top (this module defines Keras classes); TensorFlow and ``keras.ops`` only
in the functions that call them.
"""

from __future__ import annotations

import keras

from seqkit.cells.base import CellSpec
from seqkit.layers import attention as _attention  # the module, not its names: see seqkit/_keras_hook.py
from seqkit.layers.fused_rnn import resolve_product_dtype
from seqkit.registry import CELLS
from seqkit.training.precision import pin_float32


@keras.saving.register_keras_serializable(package="seqkit")
class Seq2SeqDecoder(keras.layers.Layer):
    """Decoder layer: ``(inputs [B, T] int32, memory, memory_mask, initial_states) -> logits [B, T, V]``.

    Args:
        vocab_size: target vocabulary size ``V`` (ids as :mod:`seqkit.data.vocab`).
        embedding_dim: target embedding width.
        cell: registered cell name (``seqkit.registry.CELLS``).
        units: decoder width ``H`` (every layer).
        layers: number of stacked decoder cells.
        attention: ``none | bahdanau | luong | luong_dot``.
        attention_units: Bahdanau scoring width (default ``units``).
        cell_options: the cell plugin's options as a dict (default: its defaults).
        dropout: rate of dropout on the decoder's non-recurrent connections in training (Zaremba,
            Sutskever & Vinyals 2014, sec. 3): the target embeddings, each stacked cell's input
            from the layer below, and the readout before the output projection. 0: none.
        product_dtype: None (float32, the default) or ``"bfloat16"`` / ``"float16"``: the cells'
            per-step products ``x W`` and ``h U`` in that dtype, through the cell plugin's
            :meth:`~seqkit.cells.base.CellPlugin.product_step` (a plugin without it stays
            float32); states, attention and logits stay float32. A decoder made under a Keras
            mixed policy takes its compute dtype and sets its own layers to float32.

    Call args:
        inputs: ``[B, T]`` int32 teacher-forced inputs (start marker first; 0 = padding).
        memory: ``[B, S, Hm]`` float32 encoder outputs.
        memory_mask: ``[B, S]`` bool, true at real source positions.
        initial_states: list of ``[B, H]`` float32 decoder start states (the cells'
            states only; :meth:`full_initial_states` adds the input-feeding state).
        return_weights: also return the attention weights ``[B, T, S]``.
    """

    def __init__(self, vocab_size: int, embedding_dim: int, cell: str, units: int, layers: int = 1,
                 attention: str = "none", attention_units: int | None = None,
                 cell_options: dict | None = None, dropout: float = 0.0,
                 product_dtype: str | None = None, **kwargs):
        super().__init__(**kwargs)

        self.vocab_size, self.embedding_dim = int(vocab_size), int(embedding_dim)
        self.cell_name, self.units, self.num_layers = cell, int(units), int(layers)
        self.attention_kind = attention
        self.attention_units = int(attention_units or units)
        self.cell_options = dict(cell_options or {})
        plugin_cls = CELLS.get(cell)
        self.plugin = plugin_cls(CellSpec(units=self.units, options=plugin_cls.Options(**self.cell_options)))
        self.embedding = keras.layers.Embedding(self.vocab_size, self.embedding_dim, name="target_embedding")
        self.cells = [self.plugin.make_cell(name=f"decoder_cell_{i}") for i in range(self.num_layers)]
        self.attention = _attention.make_attention(attention, self.attention_units)
        self.combine = (keras.layers.Dense(self.units, activation="tanh", use_bias=False, name="W_c")
                        if attention in ("luong", "luong_dot") else None)
        self.logits = keras.layers.Dense(self.vocab_size, name="logits")
        self.dropout_rate = float(dropout)
        self.dropout = keras.layers.Dropout(self.dropout_rate, name="decoder_dropout") if dropout else None
        # made under a mixed policy: its products in the low dtype, every sublayer float32
        self.product_dtype, mixed = resolve_product_dtype(self.dtype_policy, product_dtype)
        if mixed:  # states, attention, logits and every sublayer compute in float32
            pin_float32(self)

    # ---------------------------------------------------------------- layout
    @property
    def feeds_attentional_vector(self) -> bool:
        return self.combine is not None

    def cell_state_count(self) -> int:
        return len(self.plugin.state_names) * self.num_layers

    def state_sizes(self) -> list[int]:
        """Widths of the step states: the cells' (layer by layer), then ``h~`` for Luong."""
        return [self.units] * self.cell_state_count() + ([self.units] if self.feeds_attentional_vector else [])

    def full_initial_states(self, cell_states):
        """Cells' start states plus a zero input-feeding vector (Luong)."""
        import tensorflow as tf

        states = list(cell_states)
        if self.feeds_attentional_vector:
            states.append(tf.zeros([tf.shape(states[0])[0], self.units], tf.float32))
        return states

    # ---------------------------------------------------------------- build
    def build(self, inputs_shape, memory_shape=None, memory_mask_shape=None, initial_states_shape=None):
        hm = int(memory_shape[-1])
        self.embedding.build((None,))
        in_dim = self.embedding_dim + (hm if self.attention_kind == "bahdanau" else 0) \
            + (self.units if self.feeds_attentional_vector else 0)
        for i, cell in enumerate(self.cells):
            cell.build((None, in_dim if i == 0 else self.units))
        if self.attention is not None:
            self.attention.build((None, self.units), (None, None, hm))
        if self.combine is not None:
            self.combine.build((None, hm + self.units))
        read = self.units + (hm if self.attention_kind == "bahdanau" else 0)
        self.logits.build((None, read))
        self.built = True

    # ---------------------------------------------------------------- one step
    def precompute(self, memory):
        """The attention keys of ``memory`` (computed once per source), or ``memory`` itself."""
        return self.attention.project_memory(memory) if self.attention is not None else memory

    def step(self, token, states, extras):
        """One decoding step for :mod:`seqkit.inference.decoding`.

        Args:
            token: ``[B]`` int32 previous target token.
            states: list (see :meth:`state_sizes`) of ``[B, H]`` float32.
            extras: ``[memory [B, S, Hm], memory_mask [B, S] bool, keys [B, S, *]]``
                (keys from :meth:`precompute`).

        Returns:
            ``(logits [B, V] float32, new_states)``.
        """
        logits, new, _ = self._step(self.embedding(token), states, *extras)
        return logits, new

    def _drop(self, x, training):
        return self.dropout(x, training=training) if self.dropout is not None and training else x

    def _step(self, x, states, memory, memory_mask, keys, training=False):
        from keras import ops

        n = self.cell_state_count()
        cell_states, feed = list(states[:n]), list(states[n:])
        per = len(self.plugin.state_names)
        weights = None
        if self.attention_kind == "bahdanau":
            query = cell_states[(self.num_layers - 1) * per]  # top layer's h: s_{t-1}
            ctx, weights = self.attention(query, memory, memory_mask, keys=keys)
            x = ops.concatenate([x, ctx], axis=-1)
        elif self.feeds_attentional_vector:
            x = ops.concatenate([x, feed[0]], axis=-1)
        new_states = []
        for i, cell in enumerate(self.cells):
            if i:
                x = self._drop(x, training)
            st = cell_states[i * per:(i + 1) * per]
            low = self.plugin.product_step(cell, x, st, self.product_dtype) if self.product_dtype else None
            x, new = low if low is not None else cell(x, st, training=False)
            new_states.extend(list(new) if isinstance(new, (list, tuple)) else [new])
        if self.attention_kind == "bahdanau":
            readout = ops.concatenate([x, ctx], axis=-1)
        elif self.feeds_attentional_vector:
            ctx, weights = self.attention(x, memory, memory_mask, keys=keys)
            readout = self.combine(ops.concatenate([ctx, x], axis=-1))
            new_states.append(readout)
        else:
            readout = x
        if weights is None:
            weights = ops.zeros_like(ops.cast(memory_mask, "float32"))
        return self.logits(self._drop(readout, training)), new_states, weights

    # ---------------------------------------------------------------- full sequence
    def call(self, inputs, memory, memory_mask, initial_states, return_weights=False, training=None):
        import tensorflow as tf

        memory = tf.cast(memory, tf.float32)
        memory_mask = tf.cast(memory_mask, tf.bool)
        keys = self.precompute(memory)
        emb = self._drop(self.embedding(inputs), training)  # [B, T, E]
        steps = tf.shape(inputs)[1]
        states = self.full_initial_states(initial_states)
        ta_logits = tf.TensorArray(tf.float32, size=steps)
        ta_w = tf.TensorArray(tf.float32, size=steps)

        def body(t, ta_logits, ta_w, *st):
            logits, new, w = self._step(emb[:, t], list(st), memory, memory_mask, keys, training=training)
            new = [tf.ensure_shape(a, b.shape) for a, b in zip(new, st)]
            return (t + 1, ta_logits.write(t, logits), ta_w.write(t, w), *new)

        out = tf.while_loop(lambda t, *_: t < steps, body, (tf.constant(0), ta_logits, ta_w, *states))
        logits = tf.transpose(out[1].stack(), [1, 0, 2])
        if return_weights:
            return logits, tf.transpose(out[2].stack(), [1, 0, 2])
        return logits

    def compute_output_spec(self, inputs, memory, memory_mask, initial_states, return_weights=False,
                            training=None):
        shape = tuple(inputs.shape) + (self.vocab_size,)
        spec = keras.KerasTensor(shape, dtype="float32")
        if return_weights:
            return spec, keras.KerasTensor(tuple(inputs.shape) + (memory.shape[1],), dtype="float32")
        return spec

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size,
                "embedding_dim": self.embedding_dim, "cell": self.cell_name, "units": self.units,
                "layers": self.num_layers, "attention": self.attention_kind,
                "attention_units": self.attention_units, "cell_options": self.cell_options,
                "dropout": self.dropout_rate,
                **({"product_dtype": self.product_dtype} if self.product_dtype else {})}
