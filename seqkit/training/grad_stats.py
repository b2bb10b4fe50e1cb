"""``training.diagnostics: true``: the global gradient norm before clipping, per epoch, in history.json.

Each training step's global norm ``||g||_2 = sqrt(sum_v ||g_v||^2)`` over all
trainable variables is taken *before* clipping (Pascanu, Mikolov & Bengio 2013,
alg. 1 clips ``g <- g * tau / ||g||`` when ``||g|| > tau``, ``tau`` =
``training.clipnorm``), inside the optimizer
(:class:`seqkit.training.optimizers._SummedGradientClipping`), so it is the gradient of the
whole batch (under ``tf.distribute``: of the all-reduced sum when clipping is on).
Per epoch the history gains ``grad_norm_mean``, ``grad_norm_max`` and
``clip_fraction`` (the fraction of steps where ``||g|| > tau``; 0 without
``clipnorm``). Accumulators are plain ``tf.Variable``s kept outside the
optimizer's tracked state, so checkpoints and ``--resume`` are unchanged.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

from seqkit import log


class GradientStats:
    """Running sums of one epoch's gradient norms (``tf.Variable`` scalars, float32)."""

    def __init__(self):
        import tensorflow as tf

        def var(name):
            return tf.Variable(0.0, trainable=False, name=name, dtype=tf.float32,
                               aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

        self.norm_sum, self.norm_max = var("grad_norm_sum"), var("grad_norm_max")
        self.steps, self.clipped = var("grad_steps"), var("grad_clipped")

    def record(self, grads, clipnorm) -> None:
        """Add one step: ``grads`` the per-variable gradients (``None`` skipped), ``clipnorm`` tau or None."""
        import tensorflow as tf

        norm = tf.linalg.global_norm([g for g in grads if g is not None])
        # the count waits for the norm: Keras's train function starts one more step after the
        # last batch, which stops at the exhausted iterator; an independent +1 would still run
        with tf.control_dependencies([norm]):
            self.norm_sum.assign_add(norm)
            self.norm_max.assign(tf.maximum(self.norm_max, norm))
            self.steps.assign_add(1.0)
            if clipnorm:
                self.clipped.assign_add(tf.cast(norm > clipnorm, tf.float32))

    def reset(self) -> None:
        for v in (self.norm_sum, self.norm_max, self.steps, self.clipped):
            v.assign(0.0)

    def result(self) -> dict:
        """``{"grad_norm_mean", "grad_norm_max", "clip_fraction"}`` of the steps since :meth:`reset`."""
        n = float(self.steps.numpy())
        if n == 0:
            return {}
        return {"grad_norm_mean": float(self.norm_sum.numpy()) / n,
                "grad_norm_max": float(self.norm_max.numpy()),
                "clip_fraction": float(self.clipped.numpy()) / n}


def attach(optimizer) -> GradientStats:
    """Make ``optimizer`` (a seqkit optimizer) record its gradient norms; returns the accumulators.

    Must be called before the first ``fit`` traces the train step.

    Raises:
        TypeError: ``optimizer`` is not one of :data:`seqkit.training.optimizers.OPTIMIZERS`.
    """
    from seqkit.training.optimizers import _SummedGradientClipping

    if not isinstance(optimizer, _SummedGradientClipping):
        raise TypeError(f"training.diagnostics needs a seqkit optimizer, not {type(optimizer).__name__}")
    holder = _Holder(GradientStats())
    optimizer._seqkit_stats = holder  # a plain object: not tracked, not saved
    return holder.stats


class _Holder:
    def __init__(self, stats):
        self.stats = stats


#: ``clip_fraction`` at or above this is reported: clipping is then the rule, not a safety net.
CLIP_WARN_FRACTION = 0.9
#: An epoch's largest gradient norm this many times its mean is reported as an explosion.
SPIKE_WARN_RATIO = 100.0


def explosion_warning(epoch: int, result: dict) -> str | None:
    """The warning for an epoch whose gradients exploded or were nearly always clipped, else ``None``.

    Args:
        epoch: the epoch, counted from 1.
        result: :meth:`GradientStats.result` of that epoch (may be empty).

    Returns:
        One sentence naming the epoch, the figure and the usual fixes, or ``None``.
    """
    frac, mean, top = result.get("clip_fraction"), result.get("grad_norm_mean"), result.get("grad_norm_max")
    if frac is not None and frac >= CLIP_WARN_FRACTION:
        return (f"epoch {epoch}: clipping changed {frac:.0%} of the steps (gradient norm mean {mean:.3g}, "
                f"max {top:.3g}): the gradients are exploding or training.clipnorm is far below their "
                f"usual size; lower training.learning_rate or raise training.clipnorm.")
    if mean and top is not None and top >= SPIKE_WARN_RATIO * mean:
        return (f"epoch {epoch}: the gradient norm spiked to {top:.3g}, {top / mean:.0f}x its mean "
                f"{mean:.3g} (an exploding gradient); keep training.clipnorm set and consider a lower "
                f"training.learning_rate.")
    return None


def callback(stats: GradientStats):
    """A Keras callback that resets ``stats`` each epoch and adds its :meth:`~GradientStats.result`
    to the epoch's logs (put it *before* the callback that writes history.json)."""
    import keras

    class GradientStatsCallback(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            stats.reset()

        def on_epoch_end(self, epoch, logs=None):
            result = stats.result()
            if logs is not None:
                logs.update(result)
            warning = explosion_warning(epoch + 1, result)
            if warning:
                log.warn(warning)

    return GradientStatsCallback()
