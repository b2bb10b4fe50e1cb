"""One-step-at-a-time view of a trained acceptor or tagger (forward encoders only).

``(x_t, states) -> (logits [B, C] float32, new_states)`` where ``x_t`` is the
current token id ``token [B] int32`` (with ``model.char_embedding``: the packed word id
and character ids ``token [B, 1 + W] int32``, :mod:`seqkit.data.word_chars`) or the
current *raw* frame
``frame [B, D] float32``: the run's per-channel normaliser
(``(x - mean) / std``, fitted on the training split) is applied inside the
step, so a runtime feeds frames exactly as it reads them.

* tagger: the logits are the current step's tag scores;
* acceptor: the logits are the *running* class scores -- what the acceptor
  answers if the sequence ends now. ``final`` pooling reads the last layer's
  output; ``mean`` / ``max`` pooling carry accumulators as extra states
  (``pool_sum`` or ``pool_max`` ``[B, H]`` and ``pool_count`` ``[B, 1]``), so
  zero initial states stay a valid start for every pooling.

After the last valid step the logits equal the full-sequence Keras model's.
No padding is ever fed: a runtime streams only real inputs.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

from seqkit.errors import SeqkitError, refuse_bidirectional  # noqa: F401  (re-exported)
from seqkit.layers.stack import recurrent_layers


class SequenceStepper:
    """Step view of an acceptor/tagger model (shares its weights).

    Args:
        model: the training model built by the acceptor or tagger head.
        cell_state_names: the cell plugin's state names (LSTM ``("h", "c")``).
        kind: ``"tokens"`` or ``"frames"``.
        normalizer: the run's :class:`~seqkit.data.normalize.FrameNormalizer` (frames).
        pooling: ``None`` (tagger), ``"final"``, ``"mean"`` or ``"max"`` (acceptor).
        bidirectional: the recipe's ``model.bidirectional``.

    Raises:
        SeqkitError: a bidirectional encoder (see :func:`refuse_bidirectional`).

    State layout: ``rnn_{layer}_{state}`` for each layer in order, then the
    pooling accumulators (acceptor mean/max), each ``[B, size]`` float32.
    """

    def __init__(self, model, cell_state_names, *, kind: str, normalizer=None,
                 pooling: str | None = None, bidirectional: bool = False):
        if bidirectional:
            raise refuse_bidirectional()
        self.kind, self.pooling = kind, pooling
        self.embedding = model.get_layer("embedding") if kind == "tokens" else None
        #: model.char_embedding: W, the characters packed after the word id (else None)
        self.max_chars = getattr(self.embedding, "max_chars", None)
        self.normalizer = normalizer
        self.logits = model.get_layer("logits")
        self.cells = [layer.cell for layer in recurrent_layers(model)]
        self.cell_state_names = tuple(cell_state_names)
        self.width = normalizer.width if normalizer is not None else None

    # ---------------------------------------------------------------- layout
    def input_spec(self):
        """``token [B] int32`` (packed with characters: ``[B, 1 + W]``) or ``frame [B, D] float32``
        (raw, not normalised)."""
        import tensorflow as tf

        if self.max_chars is not None:
            return tf.TensorSpec([None, 1 + self.max_chars], tf.int32, name="token")
        if self.kind == "tokens":
            return tf.TensorSpec([None], tf.int32, name="token")
        return tf.TensorSpec([None, self.width], tf.float32, name="frame")

    def _cell_sizes(self, cell) -> list[int]:
        s = cell.state_size
        return list(s) if isinstance(s, (list, tuple)) else [s]

    def _pool_states(self) -> list[tuple[str, int]]:
        h = self._cell_sizes(self.cells[-1])[0]
        if self.pooling == "mean":
            return [("pool_sum", h), ("pool_count", 1)]
        if self.pooling == "max":
            return [("pool_max", h), ("pool_count", 1)]
        return []

    def state_names(self) -> list[str]:
        names = []
        for i, cell in enumerate(self.cells):
            n = len(self._cell_sizes(cell))
            own = self.cell_state_names if len(self.cell_state_names) == n else tuple(f"s{j}" for j in range(n))
            names.extend(f"rnn_{i}_{nm}" for nm in own)
        return names + [n for n, _ in self._pool_states()]

    def state_sizes(self) -> list[int]:
        return [s for cell in self.cells for s in self._cell_sizes(cell)] + [s for _, s in self._pool_states()]

    def initial_state(self, batch_size) -> list:
        """Zero states, ``[B, size]`` float32 each (a valid start for every pooling)."""
        import tensorflow as tf

        return [tf.zeros([batch_size, n], tf.float32) for n in self.state_sizes()]

    # ---------------------------------------------------------------- step
    def embed(self, x):
        """``token [B]`` -> ``[B, E]`` (a plain GATHER), packed ``token [B, 1 + W]`` -> ``[B, E + C]``
        (:meth:`~seqkit.layers.char_word_embedding.CharWordEmbedding.step_call`) or raw ``frame [B, D]`` -> normalised ``[B, D]``."""
        import tensorflow as tf

        if self.max_chars is not None:  # the character loop written out (no WHILE: any batch)
            return self.embedding.step_call(x)
        if self.kind == "tokens":
            return tf.gather(self.embedding.embeddings, x)
        mean = tf.constant(self.normalizer.mean, tf.float32)
        std = tf.constant(self.normalizer.std, tf.float32)
        return (tf.cast(x, tf.float32) - mean) / std

    def step(self, x, states):
        """``(x_t, states) -> (logits [B, C] float32, new_states)`` (see the module docstring)."""
        import tensorflow as tf

        y, out, k = self.embed(x), [], 0
        for cell in self.cells:
            n = len(self._cell_sizes(cell))
            y, new = cell(y, list(states[k:k + n]), training=False)
            out.extend(list(new) if isinstance(new, (list, tuple)) else [new])
            k += n
        if self.pooling in ("mean", "max"):
            acc, count = states[k], states[k + 1]
            count = count + 1.0
            if self.pooling == "mean":
                acc = acc + y
                y = acc / count
            else:  # zero-initialised: the first step takes y itself
                acc = tf.where(count > 1.0, tf.maximum(acc, y), y)
                y = acc
            out.extend([acc, count])
        return self.logits(y), out
