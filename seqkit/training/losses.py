"""Masked losses and metrics: padding positions (target id 0) never count.

Cross-entropy is averaged over valid positions only::

    L = sum_{b,t} m_bt * CE(y_bt, z_bt) / max(1, sum_{b,t} m_bt),   m_bt = [y_bt != 0]

so extra padding changes neither the loss nor its gradients.

``offset``: heads whose classes have no padding entry (acceptor labels, tagger
tags) feed targets ``class + offset`` with ``offset = 1``, so ``0`` still means
"no target" and logits index the classes ``0..C-1`` directly; the language
model uses ``offset = 0`` (its vocabulary holds the padding id itself).

Cost: the per-token cross-entropy over ``[B, T, V]`` logits is one of the
dearest parts of a training step (a softmax over ``V`` per position).
:func:`share_cross_entropy` lets the :class:`MaskedCrossEntropy` metric reuse
the tensor the loss computed in the same step, and
:class:`MaskedPerplexity` can read another metric's sums, so the exact epoch
metrics add no second or third softmax.

Keras is imported at the top (this module defines Keras classes); TensorFlow only in the functions
that call it.
"""

from __future__ import annotations

import keras
from keras import ops


def _mask(y_true, sample_weight=None):
    m = ops.cast(ops.not_equal(y_true, 0), "float32")
    if sample_weight is not None:
        m = m * ops.cast(sample_weight, "float32")
    return m


def sparse_softmax_cross_entropy(labels, logits):
    """Per-position ``-log softmax(logits)[label]`` (nats) with a fused gradient.

    Args:
        labels: int32 ``[...]`` class ids in ``[0, C)``.
        logits: float32 ``[..., C]``.

    Returns:
        float32 ``[...]``: ``logsumexp(z) - z_y`` with ``logsumexp(z) = m + log sum exp(z - m)``,
        ``m = max z`` (the stable form). Gradient: ``softmax(z) - onehot(y)`` times the
        upstream gradient, from the forward pass's ``exp(z - m)`` and one scatter.

    The same values as ``tf.nn.sparse_softmax_cross_entropy_with_logits`` (to float32
    rounding), about twice as fast forward plus backward on a CPU for ``C`` in the
    thousands (``bench/``): that op's kernel makes several scalar passes over ``[N, C]``.
    """
    import tensorflow as tf

    @tf.custom_gradient
    def xent(z):
        m = tf.stop_gradient(tf.reduce_max(z, -1, keepdims=True))
        e = tf.exp(z - m)
        s = tf.reduce_sum(e, -1, keepdims=True)
        zy = tf.gather(z, labels[..., None], batch_dims=len(labels.shape))
        ce = tf.squeeze(m + tf.math.log(s) - zy, -1)

        def grad(g):
            shape = tf.shape(z)
            p = tf.reshape(e * (g[..., None] / s), [-1, shape[-1]])
            rows = tf.range(tf.shape(p)[0])
            p = tf.tensor_scatter_nd_sub(p, tf.stack([rows, tf.reshape(labels, [-1])], 1),
                                         tf.reshape(g, [-1]))
            return tf.reshape(p, shape)

        return ce, grad

    return xent(logits)


def smoothed_sparse_softmax_cross_entropy(labels, logits, epsilon: float):
    """Per-position label-smoothed cross-entropy and the plain one (nats), fused gradient.

    Label smoothing (Szegedy et al. 2016, "Rethinking the Inception Architecture", sec. 7):
    the target is ``q = (1 - eps) * onehot(y) + eps / C`` instead of ``onehot(y)``, and::

        H(q, softmax(z)) = (1 - eps) * (lse(z) - z_y) + eps * (lse(z) - mean_k z_k)

    with ``lse(z) = logsumexp(z)``. Gradient with respect to ``z``: ``softmax(z) - q`` times
    the upstream gradient (no autodiff through the softmax).

    Args:
        labels: int32 ``[...]`` class ids in ``[0, C)``.
        logits: float32 ``[..., C]``.
        epsilon: ``eps`` in ``[0, 1)``.

    Returns:
        ``(smoothed, plain)``: float32 ``[...]`` each; ``plain`` is
        :func:`sparse_softmax_cross_entropy`'s value (what metrics report), and gradients
        flowing into it are ``softmax(z) - onehot(y)``.
    """
    import tensorflow as tf

    eps = float(epsilon)

    @tf.custom_gradient
    def xent(z):
        m = tf.stop_gradient(tf.reduce_max(z, -1, keepdims=True))
        e = tf.exp(z - m)
        s = tf.reduce_sum(e, -1, keepdims=True)
        lse = tf.squeeze(m + tf.math.log(s), -1)
        zy = tf.squeeze(tf.gather(z, labels[..., None], batch_dims=len(labels.shape)), -1)
        plain = lse - zy
        smoothed = (1.0 - eps) * plain + eps * (lse - tf.reduce_mean(z, -1))

        def grad(g_smoothed, g_plain):
            shape = tf.shape(z)
            c = tf.cast(shape[-1], z.dtype)
            g = g_smoothed + g_plain
            p = e * (g[..., None] / s) - (eps * g_smoothed / c)[..., None]  # softmax - eps/C
            p = tf.reshape(p, [-1, shape[-1]])
            rows = tf.range(tf.shape(p)[0])
            p = tf.tensor_scatter_nd_sub(p, tf.stack([rows, tf.reshape(labels, [-1])], 1),
                                         tf.reshape((1.0 - eps) * g_smoothed + g_plain, [-1]))
            return tf.reshape(p, shape)

        return (smoothed, plain), grad

    return xent(logits)


def _token_cross_entropy(y_true, y_pred, sample_weight, offset):
    """``(ce, m)``: per-position cross-entropy (nats) and the 0/1 float mask, both ``y_true``'s shape."""
    y_true = ops.cast(y_true, "int32")
    m = _mask(y_true, sample_weight)
    cls = ops.maximum(y_true - offset, 0)
    if keras.backend.backend() == "tensorflow":
        return sparse_softmax_cross_entropy(cls, ops.cast(y_pred, "float32")), m
    return ops.sparse_categorical_crossentropy(cls, ops.cast(y_pred, "float32"), from_logits=True), m


def share_cross_entropy(loss, metrics) -> None:
    """Let the :class:`MaskedCrossEntropy` metrics in ``metrics`` reuse ``loss``'s per-token values.

    When Keras hands a metric the very ``(y_true, y_pred)`` tensors it gave the
    loss in the same step, the metric takes the loss's cross-entropy instead of
    computing another softmax; any other call (evaluation without the loss, a
    different output) computes its own. The result is the same number either way.
    """
    if isinstance(loss, MaskedSparseCrossEntropy):
        for m in metrics:
            if isinstance(m, MaskedCrossEntropy) and m.offset == loss.offset:
                m._loss = loss


def _global_sum(x):
    """Sum ``x`` over all replicas when training under a ``tf.distribute`` strategy.

    Keras sums the replicas' gradients, so dividing each replica's summed loss by
    the *global* token count makes the update that of the global token mean,
    exactly as on one device, however the padding falls across replicas.
    """
    import tensorflow as tf

    ctx = tf.distribute.get_replica_context()
    if ctx is not None and ctx.num_replicas_in_sync > 1:
        return ctx.all_reduce(tf.distribute.ReduceOp.SUM, x)
    return x


@keras.saving.register_keras_serializable(package="seqkit")
class MaskedSparseCrossEntropy(keras.losses.Loss):
    """Mean token cross-entropy (nats) over non-padding targets, optionally label-smoothed and
    class-weighted::

        L = sum_{b,t} m_bt * w_{y_bt} * H(q_bt, softmax(z_bt)) / max(1, sum_{b,t} m_bt)

    ``q`` the (smoothed) target of :func:`smoothed_sparse_softmax_cross_entropy`, ``w`` the
    class weights (1 without them). The denominator counts targets, unweighted (as Keras's
    ``class_weight`` with ``sum_over_batch_size``): a weight ``w`` on every class scales the
    loss by ``w``.

    Args:
        offset: see the module docstring.
        label_smoothing: ``eps`` in ``[0, 1)`` (``training.label_smoothing``).
        class_weights: ``C`` positive floats, one per class (``training.class_weight``), or None.

    Call args:
        y_true: int ``[B, T]`` (or ``[B]``) class ids, 0 = padding.
        y_pred: float ``[B, T, C]`` (or ``[B, C]``) logits.

    Returns:
        float32 scalar. The :class:`MaskedCrossEntropy` metric that shares this loss's tensors
        (:func:`share_cross_entropy`) still gets the plain, unweighted cross-entropy.
    """

    def __init__(self, name="masked_cross_entropy", offset: int = 0, label_smoothing: float = 0.0,
                 class_weights=None, **kwargs):
        kwargs.pop("reduction", None)
        super().__init__(name=name, reduction="sum", **kwargs)
        self.offset = int(offset)
        self.label_smoothing = float(label_smoothing)
        self.class_weights = [float(w) for w in class_weights] if class_weights is not None else None

    def get_config(self):
        return {**super().get_config(), "offset": self.offset, "label_smoothing": self.label_smoothing,
                "class_weights": self.class_weights}

    def __call__(self, y_true, y_pred, sample_weight=None):
        if self.label_smoothing > 0 and keras.backend.backend() == "tensorflow":
            y = ops.cast(y_true, "int32")
            m = _mask(y, sample_weight)
            loss_tok, ce = smoothed_sparse_softmax_cross_entropy(
                ops.maximum(y - self.offset, 0), ops.cast(y_pred, "float32"), self.label_smoothing)
        else:
            ce, m = _token_cross_entropy(y_true, y_pred, sample_weight, self.offset)
            loss_tok = ce
            if self.label_smoothing > 0:  # other backends: the same value by autodiff
                z = ops.cast(y_pred, "float32")
                eps = self.label_smoothing
                loss_tok = (1 - eps) * ce + eps * (ops.logsumexp(z, axis=-1) - ops.mean(z, axis=-1))
        # the metric of share_cross_entropy() reuses these tensors for the same (y_true, y_pred)
        self._last = (y_true, y_pred, sample_weight, ce, m)
        weighted = m
        if self.class_weights is not None:
            cls = ops.maximum(ops.cast(y_true, "int32") - self.offset, 0)
            weighted = m * ops.take(ops.convert_to_tensor(self.class_weights, "float32"), cls)
        return ops.divide(ops.sum(loss_tok * weighted), ops.maximum(_global_sum(ops.sum(m)), 1.0))

    def call(self, y_true, y_pred):  # pragma: no cover - __call__ is overridden
        return self.__call__(y_true, y_pred)


@keras.saving.register_keras_serializable(package="seqkit")
class MaskedAccuracy(keras.metrics.Metric):
    """Fraction of non-padding positions whose arg-max logit is the target.

    The arg-max is ``tf.argmax`` (ties and ``-0.0 == 0.0`` go to the lowest class id, as
    ``np.argmax`` breaks them), not ``keras.ops.argmax``, whose TensorFlow version first rewrites
    every ``-0.0`` logit to ``-tiny`` (for flush-to-zero backends): five extra element-wise passes
    over the ``[B, T, C]`` logits: 7% of a float32 language-model training step at ``V = 5000``
    and 11% under ``mixed_bfloat16`` (docs/precision.md).
    """

    def __init__(self, name="accuracy", offset: int = 0, **kwargs):
        super().__init__(name=name, **kwargs)
        self.offset = int(offset)
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct")
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        m = _mask(y_true, sample_weight)
        import tensorflow as tf

        # float32 logits: the arg-max of widened bfloat16 runs at twice the speed of bfloat16's own
        pred = tf.argmax(tf.cast(y_pred, tf.float32), axis=-1, output_type=tf.int32)
        hit = ops.cast(ops.equal(pred, y_true - self.offset), "float32")
        self.correct.assign_add(ops.sum(hit * m))
        self.total.assign_add(ops.sum(m))

    def get_config(self):
        return {**super().get_config(), "offset": self.offset}

    def result(self):
        return ops.divide_no_nan(self.correct, self.total)

    def reset_state(self):
        self.correct.assign(0.0)
        self.total.assign(0.0)


@keras.saving.register_keras_serializable(package="seqkit")
class MaskedCrossEntropy(keras.metrics.Metric):
    """Mean cross-entropy (nats) over all non-padding positions of the epoch: exact sums.

    Unlike Keras's running ``loss`` (a mean of per-batch means, weighted by
    per-replica batch sizes under ``tf.distribute``), this is the same number
    on one device and on many, so it is what checkpoints and early stopping watch.
    """

    def __init__(self, name="cross_entropy", offset: int = 0, **kwargs):
        super().__init__(name=name, **kwargs)
        self.offset = int(offset)
        self.nll = self.add_variable(shape=(), initializer="zeros", name="nll")
        self.total = self.add_variable(shape=(), initializer="zeros", name="total")

    def get_config(self):
        return {**super().get_config(), "offset": self.offset}

    def update_state(self, y_true, y_pred, sample_weight=None):
        last = getattr(getattr(self, "_loss", None), "_last", None)
        if last is not None and last[0] is y_true and last[1] is y_pred and last[2] is sample_weight:
            ce, m = last[3], last[4]
            self.shared_steps = getattr(self, "shared_steps", 0) + 1  # traces that reused the loss's
        else:
            ce, m = _token_cross_entropy(y_true, y_pred, sample_weight, self.offset)
        self.nll.assign_add(ops.sum(ce * m))
        self.total.assign_add(ops.sum(m))

    def result(self):
        return ops.divide_no_nan(self.nll, self.total)

    def reset_state(self):
        self.nll.assign(0.0)
        self.total.assign(0.0)


@keras.saving.register_keras_serializable(package="seqkit")
class MaskedPerplexity(MaskedCrossEntropy):
    """``exp(total NLL / total tokens)`` over non-padding positions of the whole epoch.

    Args:
        of: a :class:`MaskedCrossEntropy` metric of the same model whose sums this
            one reads (no computation of its own); ``None`` = compute its own.
    """

    def __init__(self, name="perplexity", offset: int = 0, of: MaskedCrossEntropy | None = None, **kwargs):
        super().__init__(name=name, offset=offset, **kwargs)
        self._of = of

    def update_state(self, y_true, y_pred, sample_weight=None):
        if self._of is None:
            super().update_state(y_true, y_pred, sample_weight)

    def result(self):
        if self._of is not None:
            return ops.exp(self._of.result())
        return ops.exp(super().result())
