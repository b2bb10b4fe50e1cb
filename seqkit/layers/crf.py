"""Linear-chain conditional random field (CRF) over per-step tag scores.

A tagger with ``head.crf: true`` scores a tag path ``y = (y_0, ..., y_{n-1})`` of a
sequence with ``n`` valid steps as (Lafferty et al. 2001, eq. 1 in log space;
Lample et al. 2016, "Neural Architectures for Named Entity Recognition", sec. 2.2)::

    s(x, y) = start[y_0] + sum_{t<n} E[t, y_t] + sum_{0<t<n} A[y_{t-1}, y_t] + end[y_{n-1}]

where ``E [T, C]`` are the encoder's emissions (the ``logits`` layer), ``A [C, C]``
the transition scores and ``start``, ``end [C]`` the scores of the first and last
tag. ``p(y | x) = exp s(x, y) / Z(x)``; ``log Z`` comes from the forward
algorithm's log-sum-exp recursion (Rabiner 1989, eq. 20; Sutton & McCallum 2012,
"An Introduction to Conditional Random Fields", sec. 4.1)::

    alpha_0(j) = start[j] + E[0, j]
    alpha_t(j) = logsumexp_i(alpha_{t-1}(i) + A[i, j]) + E[t, j]
    log Z      = logsumexp_j(alpha_{n-1}(j) + end[j])

and the best path from the Viterbi recursion (``max`` for ``logsumexp``, with back-pointers).

Masks: a ``[B, T]`` bool mask marks the valid steps. Masked steps are neither scored
nor decoded: the recursions carry their state across them, so a padded row scores and
decodes exactly as the unpadded row, and a masked step *inside* a row (a tag unseen in
training, left out of the loss) links its neighbours directly. A row with no valid
step has log-likelihood exactly 0 (no NaN, no gradient) and decodes to all zeros.
Decoded tags at masked steps are 0.

The layer itself passes the emissions through unchanged (so every consumer of the
``logits`` -- step exports, streaming -- keeps working) and holds ``A``, ``start`` and
``end``; :class:`CRFTaggerModel` trains them with the CRF negative log-likelihood.

Keras is imported at the top (this module defines Keras classes); TensorFlow and
:mod:`seqkit.training.losses` only in the functions that use them (a top-level ``from ... import
name`` of a seqkit Keras module can meet a half-imported module when :mod:`seqkit._keras_hook`
runs).
"""

from __future__ import annotations

import keras
from keras import ops


def _time_major(emissions, mask, tags=None):
    import tensorflow as tf

    e = tf.transpose(emissions, [1, 0, 2])
    m = tf.transpose(tf.cast(mask, tf.bool), [1, 0])
    if tags is None:
        return e, m
    return e, m, tf.transpose(tf.cast(tags, tf.int32), [1, 0])


def crf_log_norm(emissions, mask, transitions, start, end):
    """``log Z(x)`` by the forward algorithm (module docstring), per row.

    Args:
        emissions: ``[B, T, C]`` float32/float64.
        mask: ``[B, T]`` bool (or 0/1), True at valid steps.
        transitions: ``[C, C]``; start, end: ``[C]`` (cast to the emissions' dtype).

    Returns:
        ``[B]`` emissions' dtype; 0 for a row with no valid step.
    """
    import tensorflow as tf

    dt = emissions.dtype
    A, s0, s1 = (tf.cast(v, dt) for v in (transitions, start, end))
    e, m = _time_major(emissions, mask)
    B, C = tf.shape(emissions)[0], tf.shape(emissions)[2]

    def step(carry, inp):
        alpha, started = carry
        e_t, m_t = inp
        moved = tf.reduce_logsumexp(alpha[:, :, None] + A[None], axis=1) + e_t
        new = tf.where(started[:, None], moved, s0[None] + e_t)
        return tf.where(m_t[:, None], new, alpha), tf.logical_or(started, m_t)

    alpha, started = tf.foldl(step, (e, m), initializer=(tf.zeros([B, C], dt), tf.zeros([B], tf.bool)))
    return tf.where(started, tf.reduce_logsumexp(alpha + s1[None], axis=-1), tf.zeros([B], dt))


def crf_sequence_score(emissions, tags, mask, transitions, start, end):
    """``s(x, y)`` of the given tag paths (module docstring), per row.

    Args:
        emissions: ``[B, T, C]`` float; tags: ``[B, T]`` int in ``[0, C)`` (any value at
            masked steps, it is not read); mask: ``[B, T]`` bool; transitions ``[C, C]``;
            start, end ``[C]``.

    Returns:
        ``[B]`` emissions' dtype; 0 for a row with no valid step.
    """
    import tensorflow as tf

    dt = emissions.dtype
    A, s0, s1 = (tf.cast(v, dt) for v in (transitions, start, end))
    C = tf.shape(emissions)[2]
    m = tf.cast(mask, tf.bool)
    y = tf.clip_by_value(tf.cast(tags, tf.int32), 0, C - 1)
    emit = tf.gather(emissions, y[..., None], batch_dims=2)[..., 0]             # [B, T]
    # the previous *valid* step's tag: carry the last valid tag forward along T
    idx = tf.where(m, tf.range(tf.shape(m)[1])[None, :], -1)
    last_valid = tf.maximum(tf.scan(tf.maximum, tf.transpose(idx), reverse=False), -1)
    last_valid = tf.transpose(last_valid)                                     # [B, T] (-1: none yet)
    prev_pos = tf.concat([tf.fill([tf.shape(m)[0], 1], -1), last_valid[:, :-1]], axis=1)
    has_prev = prev_pos >= 0
    prev = tf.gather(y, tf.maximum(prev_pos, 0), batch_dims=1)
    trans = tf.where(has_prev, tf.gather_nd(A, tf.stack([prev, y], -1)), tf.gather(s0, y))
    score = tf.reduce_sum(tf.where(m, emit + trans, tf.zeros_like(emit)), axis=1)
    any_valid = tf.reduce_any(m, axis=1)
    last = tf.gather(y, tf.maximum(last_valid[:, -1], 0), batch_dims=1)
    return score + tf.where(any_valid, tf.gather(s1, last), tf.zeros_like(score))


def crf_log_likelihood(emissions, tags, mask, transitions, start, end):
    """``log p(y | x) = s(x, y) - log Z(x)`` per row (Lafferty et al. 2001, eq. 1; Lample et al. 2016, eq. 2).

    Args: as :func:`crf_sequence_score`.

    Returns:
        ``[B]`` emissions' dtype, ``<= 0``; exactly 0 for a row with no valid step.
    """
    return crf_sequence_score(emissions, tags, mask, transitions, start, end) - \
        crf_log_norm(emissions, mask, transitions, start, end)


def crf_marginals(emissions, mask, transitions, start, end):
    """Per-step tag marginals ``p(y_t = j | x)`` ``[B, T, C]`` (0 at masked steps).

    Computed as ``d log Z / d E[t, j]`` (the gradient of the log-partition is the
    expected feature count: Sutton & McCallum 2012, eq. 4.3), i.e. forward-backward.
    """
    import tensorflow as tf

    with tf.GradientTape() as tape:
        tape.watch(emissions)
        log_z = tf.reduce_sum(crf_log_norm(emissions, mask, transitions, start, end))
    return tape.gradient(log_z, emissions)


def crf_viterbi(emissions, mask, transitions, start, end, unroll: bool = False):
    """Best tag paths ``argmax_y s(x, y)``, batched and in-graph (Viterbi; module docstring).

    Args:
        emissions: ``[B, T, C]`` float; mask: ``[B, T]`` bool; transitions ``[C, C]``;
            start, end ``[C]``.
        unroll: loop over time in Python (needs a static ``T``): straight-line ops, ``T``
            copies of them. Otherwise ``tf.scan`` (any ``T``). Both convert to TFLite builtin
            ops when the shape is pinned (ADD, REDUCE_MAX, ARG_MAX, SELECT_V2, ONE_HOT, SUM,
            and WHILE for the scan; checked with TF 2.21); the scan with a dynamic batch or
            length does not (TensorList ops), like the recurrent layers.

    Returns:
        ``(tags [B, T] int32, best_score [B])``: tags are 0 at masked steps; a row with no
        valid step has all-zero tags and score 0. Ties go to the lowest tag id.

    Raises:
        ValueError: ``unroll`` with a dynamic ``T``.
    """
    import tensorflow as tf

    dt = emissions.dtype
    A, s0, s1 = (tf.cast(v, dt) for v in (transitions, start, end))
    e, m = _time_major(emissions, mask)
    B, C = tf.shape(emissions)[0], tf.shape(emissions)[2]
    ident = tf.broadcast_to(tf.range(C)[None, :], [B, C])

    def forward(carry, inp):
        delta, started = carry
        e_t, m_t = inp
        scores = delta[:, :, None] + A[None]                          # [B, from, to]
        best_prev = tf.cast(tf.argmax(scores, axis=1), tf.int32)      # [B, to]
        moved = tf.reduce_max(scores, axis=1) + e_t
        new = tf.where(started[:, None], moved, s0[None] + e_t)
        bp = tf.where(tf.logical_and(m_t, started)[:, None], best_prev, ident)
        return tf.where(m_t[:, None], new, delta), tf.logical_or(started, m_t), bp

    def backward(cur, bp_t):
        return tf.reduce_sum(bp_t * tf.one_hot(cur, C, dtype=tf.int32), axis=-1)

    init = (tf.zeros([B, C], dt), tf.zeros([B], tf.bool))
    if unroll:
        T = emissions.shape[1]
        if T is None:
            raise ValueError("crf_viterbi(unroll=True) needs a static time length.")
        carry, bps = init, []
        for t in range(T):
            delta, started, bp = forward(carry, (e[t], m[t]))
            carry = (delta, started)
            bps.append(bp)
        delta, started = carry
        final = delta + s1[None]
        cur = tf.cast(tf.argmax(final, axis=-1), tf.int32)
        path = [None] * T
        for t in range(T - 1, -1, -1):
            path[t] = cur
            cur = backward(cur, bps[t])
        tags = tf.stack(path, axis=1)
    else:
        deltas, starteds, bps = tf.scan(lambda c, i: forward(c[:2], i), (e, m),
                                        initializer=(*init, tf.zeros([B, C], tf.int32)))
        delta, started = deltas[-1], starteds[-1]
        final = delta + s1[None]
        cur = tf.cast(tf.argmax(final, axis=-1), tf.int32)
        # path[t] = cur_t; cur_{t-1} = bp_t[cur_t]: scan backwards, emitting the tag before moving
        after = tf.scan(backward, bps, initializer=cur, reverse=True)  # after[t] = bp_t[path[t]]
        path = tf.concat([after[1:], cur[None]], axis=0)               # path[t] = after[t+1]
        tags = tf.transpose(path, [1, 0])
    mb = tf.cast(mask, tf.bool)
    tags = tf.where(mb, tags, tf.zeros_like(tags))
    any_valid = tf.reduce_any(mb, axis=1)
    return tags, tf.where(any_valid, tf.reduce_max(final, axis=-1), tf.zeros([B], dt))


@keras.saving.register_keras_serializable(package="seqkit")
class CRF(keras.layers.Layer):
    """``emissions [B, T, C] float32 -> [B, T, C]`` unchanged (mask kept); holds the CRF weights.

    Weights: ``transitions [C, C]`` (``[i, j]``: tag ``i`` then tag ``j``),
    ``start_transitions [C]`` and ``end_transitions [C]``, float32, zero-initialised
    (a zero CRF decodes like the per-step arg-max). See the module docstring for the
    score, :meth:`log_likelihood` and :meth:`decode`.

    Args:
        num_tags: ``C``.
    """

    def __init__(self, num_tags: int, **kwargs):
        super().__init__(**kwargs)
        self.num_tags = int(num_tags)
        self.supports_masking = True

    def build(self, input_shape):
        if input_shape[-1] is not None and input_shape[-1] != self.num_tags:
            raise ValueError(f"CRF: {self.num_tags} tags but emissions of width {input_shape[-1]}.")
        C = self.num_tags
        self.transitions = self.add_weight(shape=(C, C), initializer="zeros", name="transitions")
        self.start_transitions = self.add_weight(shape=(C,), initializer="zeros", name="start_transitions")
        self.end_transitions = self.add_weight(shape=(C,), initializer="zeros", name="end_transitions")

    def call(self, emissions):
        return emissions

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "num_tags": self.num_tags}

    def weights_tuple(self):
        return self.transitions, self.start_transitions, self.end_transitions

    def log_likelihood(self, emissions, tags, mask):
        """``log p(tags | x)`` ``[B]`` (see :func:`crf_log_likelihood`)."""
        return crf_log_likelihood(emissions, tags, mask, *self.weights_tuple())

    def decode(self, emissions, mask, unroll: bool = False):
        """``tags [B, T] int32`` (Viterbi; see :func:`crf_viterbi`)."""
        return crf_viterbi(emissions, mask, *self.weights_tuple(), unroll=unroll)[0]

    def marginals(self, emissions, mask):
        """``p(y_t = j | x)`` ``[B, T, C]`` (see :func:`crf_marginals`)."""
        return crf_marginals(emissions, mask, *self.weights_tuple())


def _input_mask(x):
    """``[B, T]`` bool valid steps of the tagger's raw input: token id != 0 (packed word and
    character ids ``[B, T, 1 + W]``: the word id, column 0), or a frame without NaN."""
    if "int" in str(x.dtype):
        return ops.not_equal(x[..., 0] if len(x.shape) == 3 else x, 0)
    return ops.logical_not(ops.any(ops.isnan(x), axis=-1))


@keras.saving.register_keras_serializable(package="seqkit")
class CRFTaggerModel(keras.Model):
    """The training model of a CRF tagger: a functional model ``inputs -> emissions [B, T, C]``
    whose last layer is a :class:`CRF` named ``crf``.

    Loss (``compute_loss``): the CRF negative log-likelihood *per token*,
    ``L = -sum_b log p(y_b | x_b) / max(1, number of valid target steps)`` with targets
    ``y = tag + 1`` and ``0`` = padding (the mask comes from the targets, as the softmax
    tagger's); summed token counts over replicas under ``tf.distribute``, so the update
    is the global one. Rows with no valid step add 0. Regularisation losses are added.

    Metrics (``compute_metrics``): the compiled metrics see one-hot Viterbi paths instead
    of the emissions (masked by the input padding), so ``accuracy`` is the decoded
    token accuracy.
    """

    def __init__(self, *args, **kwargs):  # (inputs, outputs, name=...) as keras.Model
        super().__init__(*args, **kwargs)

    @property
    def crf(self) -> CRF:
        return self.get_layer("crf")

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        from seqkit.training.losses import _global_sum

        y = ops.cast(y, "int32")
        m = ops.not_equal(y, 0)
        if sample_weight is not None:
            m = ops.logical_and(m, ops.not_equal(ops.cast(sample_weight, "float32"), 0.0))
        ll = self.crf.log_likelihood(ops.cast(y_pred, "float32"), ops.maximum(y - 1, 0), m)
        loss = ops.divide(-ops.sum(ll), ops.maximum(_global_sum(ops.sum(ops.cast(m, "float32"))), 1.0))
        if self.losses:
            loss = loss + ops.sum(self.losses)
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        if self._compile_metrics is not None:
            tags = self.crf.decode(ops.cast(y_pred, "float32"), _input_mask(x))
            self._compile_metrics.update_state(y, ops.one_hot(tags, self.crf.num_tags), sample_weight)
        return self.get_metrics_result()


def crf_layer(model):
    """The :class:`~seqkit.layers.crf.CRF` layer of a CRF tagger's model, else None."""
    return next((layer for layer in model.layers if isinstance(layer, CRF)), None)
