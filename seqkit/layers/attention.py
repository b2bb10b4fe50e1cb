"""Attention over a padded source memory: Bahdanau (additive) and Luong (dot / general).

Every layer maps ``(query [B, Hq], memory [B, S, Hm], memory_mask [B, S] bool)``
to ``(context [B, Hm], weights [B, S])``. The scores differ; the normalisation is
shared (:func:`masked_softmax`, :func:`attend`): a softmax over the *valid*
source positions only, so padding positions get exactly zero weight and a
zero-length source (an all-false mask row) gets all-zero weights and a zero
context, never NaN (forward or gradient).
"""

from __future__ import annotations

import keras
from keras import ops

from seqkit.errors import SeqkitError


def masked_softmax(scores, mask):
    """Softmax of ``scores`` over the positions where ``mask`` is true.

    ``a_i = exp(e_i) / sum_{j valid} exp(e_j)`` for valid ``i`` (Bahdanau et al.
    2014, eq. 6), ``a_i = 0`` exactly for invalid ``i``; a row with no valid
    position is all zeros.

    Args:
        scores: ``[B, S]`` float scores ``e``.
        mask: ``[B, S]`` bool (or 0/1), true at real source positions.

    Returns:
        ``[B, S]`` float32 weights; each row sums to 1 (or 0 when the row has
        no valid position).
    """
    scores = ops.cast(scores, "float32")
    mask = ops.cast(mask, "bool")
    any_valid = ops.any(mask, axis=-1, keepdims=True)
    # the max over valid positions only; 0 for empty rows (nothing to subtract). Invalid
    # positions are filled with the row's smallest score, not a huge negative constant: the
    # same max, and a tensor whose range stays the scores' own (a full-integer export
    # calibrates one scale per tensor; -3e38 in it left no resolution for the real scores)
    row_min = ops.min(scores, axis=-1, keepdims=True)
    row_max = ops.max(ops.where(mask, scores, row_min), axis=-1, keepdims=True)
    row_max = ops.where(any_valid, row_max, ops.zeros_like(row_max))
    # invalid positions are set to 0 *before* exp so neither value nor gradient can overflow
    shifted = ops.where(mask, scores - ops.stop_gradient(row_max), ops.zeros_like(scores))
    e = ops.where(mask, ops.exp(shifted), ops.zeros_like(scores))
    denom = ops.sum(e, axis=-1, keepdims=True)
    return e / ops.where(denom > 0, denom, ops.ones_like(denom))


def attend(scores, memory, mask):
    """Weights and context from scores: ``a = masked_softmax(e)``, ``c = sum_i a_i h_i``.

    Bahdanau et al. 2014, eq. 5-6 (the context vector ``c_t = sum_i a_ti h_i``).

    Args:
        scores: ``[B, S]`` float32.
        memory: ``[B, S, Hm]`` float32 encoder states ``h_i``.
        mask: ``[B, S]`` bool, true at real source positions.

    Returns:
        ``(context [B, Hm] float32, weights [B, S] float32)``.
    """
    weights = masked_softmax(scores, mask)
    context = ops.einsum("bs,bsh->bh", weights, ops.cast(memory, "float32"))
    return context, weights


@keras.saving.register_keras_serializable(package="seqkit")
class BahdanauAttention(keras.layers.Layer):
    """Additive attention (Bahdanau, Cho & Bengio 2014, eq. 6 and appendix A.1.2).

    ``e_i = v^T tanh(W s + U h_i)``, ``a = masked_softmax(e)``, ``c = sum_i a_i h_i``,
    where ``s`` is the query (the decoder's previous state ``s_{t-1}``) and ``h_i``
    the encoder states. ``W``, ``U`` and ``v`` have no bias, as in the paper.

    Args:
        units: width of the hidden scoring layer (``W``, ``U``: ``[*, units]``; ``v``: ``[units]``).

    Call args:
        query: ``[B, Hq]`` float32.
        memory: ``[B, S, Hm]`` float32.
        memory_mask: ``[B, S]`` bool; padding positions false.
        keys: optional precomputed ``U h`` (:meth:`project_memory`), ``[B, S, units]``,
            so a decoder loop projects the memory once, not at every step.

    Returns:
        ``(context [B, Hm] float32, weights [B, S] float32)``.
    """

    def __init__(self, units: int, **kwargs):
        super().__init__(**kwargs)
        if int(units) <= 0:
            raise SeqkitError(f"BahdanauAttention: units must be a positive integer, got {units}.")
        self.units = int(units)
        self.query_dense = keras.layers.Dense(self.units, use_bias=False, name="W")
        self.memory_dense = keras.layers.Dense(self.units, use_bias=False, name="U")

    def build(self, query_shape, memory_shape=None, memory_mask_shape=None, keys_shape=None):
        self.query_dense.build(query_shape)
        self.memory_dense.build(memory_shape)
        self.v = self.add_weight(name="v", shape=(self.units,), initializer="glorot_uniform")
        self.built = True

    def project_memory(self, memory):
        """``U h_i`` for every source position: ``[B, S, Hm] -> [B, S, units]``."""
        return self.memory_dense(memory)

    def score(self, query, keys):
        """``e_i = v^T tanh(W s + k_i)`` with ``keys k = U h``: ``-> [B, S]``."""
        w_s = self.query_dense(query)[:, None, :]
        return ops.einsum("bsu,u->bs", ops.tanh(w_s + keys), self.v)

    def call(self, query, memory, memory_mask, keys=None):
        if keys is None:
            keys = self.project_memory(memory)
        return attend(self.score(query, keys), memory, memory_mask)

    def get_config(self):
        return {**super().get_config(), "units": self.units}


@keras.saving.register_keras_serializable(package="seqkit")
class LuongAttention(keras.layers.Layer):
    """Multiplicative attention (Luong, Pham & Manning 2015, eq. 8).

    ``score="dot"``: ``e_i = h_i^T s`` (needs ``Hq == Hm``);
    ``score="general"``: ``e_i = h_i^T W_a s`` (``W_a``: ``[Hq, Hm]``, no bias).
    Then ``a = masked_softmax(e)`` and ``c = sum_i a_i h_i`` (eq. 7 and the text
    after it). The query is the decoder's current state ``h_t`` in Luong's
    formulation; the caller decides which state it passes.

    Args:
        score: ``"dot"`` or ``"general"``.

    Call args / returns: as :class:`BahdanauAttention` (``keys`` = ``W_a^T h_i``
    for ``general``, the memory itself for ``dot``).

    Raises:
        SeqkitError: an unknown ``score``, or ``dot`` with ``Hq != Hm``.
    """

    def __init__(self, score: str = "general", **kwargs):
        super().__init__(**kwargs)
        if score not in ("dot", "general"):
            raise SeqkitError(f"LuongAttention: score must be 'dot' or 'general', got {score!r}.")
        self.score_kind = score

    def build(self, query_shape, memory_shape=None, memory_mask_shape=None, keys_shape=None):
        hq, hm = int(query_shape[-1]), int(memory_shape[-1])
        if self.score_kind == "dot" and hq != hm:
            raise SeqkitError(
                f"Luong 'dot' attention needs the query width ({hq}) to equal the memory width "
                f"({hm}); use score 'general' (a learned [Hq, Hm] matrix), or make the decoder as "
                f"wide as the encoder output (twice the units when the encoder is bidirectional).")
        if self.score_kind == "general":
            self.w_a = self.add_weight(name="W_a", shape=(hm, hq), initializer="glorot_uniform")
        self.built = True

    def project_memory(self, memory):
        """``W_a^T h_i`` (``general``) or ``h_i`` (``dot``): ``[B, S, Hm] -> [B, S, Hq]``."""
        if self.score_kind == "dot":
            return ops.cast(memory, "float32")
        return ops.einsum("bsm,mq->bsq", memory, self.w_a)

    def score(self, query, keys):
        """``e_i = k_i^T s``: ``-> [B, S]``."""
        return ops.einsum("bsq,bq->bs", keys, query)

    def call(self, query, memory, memory_mask, keys=None):
        if keys is None:
            keys = self.project_memory(memory)
        return attend(self.score(query, keys), memory, memory_mask)

    def get_config(self):
        return {**super().get_config(), "score": self.score_kind}


def make_attention(kind: str, units: int):
    """The attention layer a recipe names: ``none`` -> ``None``, ``bahdanau``,
    ``luong`` (general score), ``luong_dot``.

    Raises:
        SeqkitError: an unknown name.
    """
    if kind == "none":
        return None
    if kind == "bahdanau":
        return BahdanauAttention(units, name="attention")
    if kind in ("luong", "luong_general"):
        return LuongAttention("general", name="attention")
    if kind == "luong_dot":
        return LuongAttention("dot", name="attention")
    raise SeqkitError(f"attention: unknown kind {kind!r}; choose one of none, bahdanau, luong, "
                      f"luong_dot.")
