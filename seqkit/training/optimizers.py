"""Optimizers whose global-norm clipping is exact under ``tf.distribute``.

Clipping by global norm (Pascanu, Mikolov & Bengio 2013, alg. 1)::

    g <- g * tau / ||g||_2   when ||g||_2 > tau

must see the gradient of the whole batch. Keras 3.15 clips each replica's
*partial* gradient before summing the replicas, which is a different update
whenever clipping is active. These subclasses sum the replicas' gradients
first, clip the sum, and skip Keras's second all-reduce; on one device they
are exactly the Keras optimizers.

Keras is imported at the top (this module defines Keras classes); TensorFlow and Keras's clipping
helper only in the functions that call them.
"""

from __future__ import annotations

import keras


class _SummedGradientClipping:
    """Mixin: with >1 replicas and ``global_clipnorm``, clip the all-reduced gradient."""

    def _clip_gradients(self, grads):
        import tensorflow as tf

        ctx = tf.distribute.get_replica_context()
        self._seqkit_summed = bool(self.global_clipnorm and ctx is not None and ctx.num_replicas_in_sync > 1)
        holder = getattr(self, "_seqkit_stats", None)  # training.diagnostics (seqkit.training.grad_stats)
        if not self._seqkit_summed:
            if holder is not None:
                holder.stats.record(grads, self.global_clipnorm)
            return super()._clip_gradients(grads)
        idx = [i for i, g in enumerate(grads) if g is not None]
        reduced = ctx.all_reduce(tf.distribute.ReduceOp.SUM, [grads[i] for i in idx])
        full = list(grads)
        for i, r in zip(idx, reduced):
            full[i] = r
        if holder is not None:
            holder.stats.record(full, self.global_clipnorm)
        from keras.src.optimizers.base_optimizer import clip_by_global_norm

        return clip_by_global_norm(full, self.global_clipnorm)

    def apply(self, grads, trainable_variables=None):
        """Keras's ``apply``, with every op (the ``iterations`` increment included) after the
        gradients exist.

        Keras 3.15's ``fit`` over a dataset of unknown length makes one more step call per epoch,
        the one that finds the end of the data; its ``iterations.assign_add(1)`` does not depend
        on the data, so it ran anyway, counting an update that never happened (shifting Adam's
        bias correction and every learning-rate schedule by one step per epoch). Here
        ``iterations`` counts applied updates only.
        """
        import tensorflow as tf

        deps = [g for g in grads if g is not None] if not tf.executing_eagerly() else []
        with tf.control_dependencies(deps):
            return super().apply(grads, trainable_variables)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if getattr(self, "_seqkit_summed", False):
            return list(grads_and_vars)  # already summed in _clip_gradients
        return super()._all_reduce_sum_gradients(grads_and_vars)


@keras.saving.register_keras_serializable(package="seqkit")
class Adam(_SummedGradientClipping, keras.optimizers.Adam):
    """``keras.optimizers.Adam`` (Kingma & Ba 2015) with replica-exact global-norm clipping."""


@keras.saving.register_keras_serializable(package="seqkit")
class AdamW(_SummedGradientClipping, keras.optimizers.AdamW):
    """``keras.optimizers.AdamW`` (Loshchilov & Hutter 2019) with replica-exact global-norm clipping."""


@keras.saving.register_keras_serializable(package="seqkit")
class SGD(_SummedGradientClipping, keras.optimizers.SGD):
    """``keras.optimizers.SGD`` with replica-exact global-norm clipping."""


@keras.saving.register_keras_serializable(package="seqkit")
class RMSprop(_SummedGradientClipping, keras.optimizers.RMSprop):
    """``keras.optimizers.RMSprop`` (Hinton 2012) with replica-exact global-norm clipping."""


OPTIMIZERS = {"adam": Adam, "adamw": AdamW, "sgd": SGD, "rmsprop": RMSprop}
