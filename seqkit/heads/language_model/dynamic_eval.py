"""Dynamic evaluation of a stream language model: the SGD rule and Krause et al.'s RMS rule with decay.

Source: B. Krause, E. Kahembwe, I. Murray, S. Renals, "Dynamic Evaluation of Neural Sequence
Models", ICML 2018, Section 5 (update rule, global decay prior), and the authors' reference code
(github.com/benkrause/dynamic-evaluation, ``dynamiceval.py``), whose details are followed where
the paper leaves them open (how the RMS is normalised, the clipping of the decay rates).

The test split is read as one stream (one column), ``chunk`` tokens at a time, the state carried.
Each chunk ``s_i`` is scored with the current weights ``theta``, then ``theta`` takes one step on
``L(s_i)``, the mean cross-entropy of that chunk (no dropout), computed from the weights as they were:

* ``sgd``:  ``theta <- theta - lr * g + decay * (theta_g - theta)``
* ``rms``:  ``theta <- theta - lr * g / (sqrt(MS) + epsilon) + decay * r * (theta_g - theta)``

where ``g = dL(s_i)/dtheta``, ``theta_g`` are the trained weights, ``MS`` is the elementwise mean
of squared gradients over training chunks (:func:`gradient_stats`, computed once) and ``r`` the
decay rates of :func:`decay_rates`: ``RMS = sqrt(MS)`` divided by its mean, clipped at
``1 / decay`` so that no weight moves past ``theta_g``. ``decay = 0`` in the ``sgd`` rule is plain
SGD, today's rule (Mikolov et al. 2010's dynamic evaluation).

Keras comes in with :mod:`seqkit.layers.fused_rnn`; TensorFlow, pydantic's ``ValidationError`` and
:mod:`seqkit.heads.language_model.stream` are imported only in the functions that use them (a
top-level ``from ... import name`` of a seqkit Keras module can meet a half-imported module when
:mod:`seqkit._keras_hook` runs).
"""

from __future__ import annotations

import numpy as np

from seqkit.errors import SeqkitError
from seqkit.layers import fused_rnn
from seqkit.recipe import EvaluationConfig

RULES = ("sgd", "rms")


def gradient_stats(model, data, max_chunks: int | None = None) -> list:
    """``MS``: the elementwise mean of squared gradients of each chunk's mean cross-entropy.

    The chunks of ``data`` are read in order with the state carried (gradient cut at chunk
    boundaries), no dropout and no weight change, as the reference code's ``gradstat``.

    Args:
        model: the language model (:class:`~seqkit.heads.language_model.stream.StreamRunner`'s layers).
        data: a :class:`~seqkit.data.stream.StreamData` (or lazy one) over training text; its
            ``bptt`` should be the evaluation chunk, its columns the gradient's batch.
        max_chunks: read at most this many chunks (None: all of them).

    Returns:
        One float64 array per ``model.trainable_variables`` entry, of its shape: ``mean_k g_k**2``
        (zeros for a weight with no gradient).

    Raises:
        ValueError: ``data`` yields no chunk.
    """
    import tensorflow as tf

    from seqkit.heads.language_model.stream import StreamRunner, chunk_gradients

    runner = StreamRunner(model)
    weights = model.trainable_variables

    @tf.function(reduce_retracing=True)
    def step(x, y, states):
        with fused_rnn.compiled_loops():  # chunks of at most two lengths: XLA compiles each once
            _, grads, new = chunk_gradients(runner, weights, x, y, states, training=False)
        return [tf.zeros_like(w) if g is None else tf.square(tf.convert_to_tensor(g))
                for w, g in zip(weights, grads)], new

    ms = [np.zeros(w.shape, np.float64) for w in weights]
    states = runner.zero_states(data.batch_size)
    n = 0
    for x, y in data:
        if max_chunks is not None and n >= max_chunks:
            break
        sq, states = step(tf.constant(x), tf.constant(y), states)
        for acc, s in zip(ms, sq):
            acc += s.numpy()
        n += 1
    if n == 0:
        raise ValueError("dynamic evaluation: no training chunk to compute the gradient statistics on.")
    return [m / n for m in ms]


def decay_rates(ms, decay: float) -> list:
    """Krause et al.'s per-weight decay rates ``r = RMS / mean(RMS)``, clipped at ``1 / decay``.

    ``RMS = sqrt(MS)``; the mean is that of the reference code: the mean over weight tensors of
    each tensor's mean RMS (each tensor counts once, whatever its size). The clip keeps
    ``decay * r <= 1``: a decay step never overshoots ``theta_g``.

    Args:
        ms: the arrays of :func:`gradient_stats`.
        decay: ``lambda`` (>= 0); 0 gives unclipped rates.

    Returns:
        float64 arrays shaped as ``ms``.
    """
    rms = [np.sqrt(m) for m in ms]
    mean = float(np.mean([r.mean() for r in rms]))
    rates = [r / mean if mean > 0 else np.ones_like(r) for r in rms]
    return [np.minimum(r, 1.0 / decay) for r in rates] if decay > 0 else rates


class DynamicUpdate:
    """One rule's update of a model's weights from one chunk's gradients (module docstring).

    All updates take the form ``w <- w - lr * k * g + p * (theta_g - w)`` with ``k = 1`` and
    ``p = decay`` (``sgd``) or ``k = 1 / (sqrt(MS) + epsilon)`` and ``p = decay * r`` (``rms``,
    ``r`` from :func:`decay_rates`); both terms are computed from ``w`` before the step.

    Args:
        weights: the ``tf.Variable`` list to update (a model's ``trainable_variables``).
        lr: ``eta`` (> 0).
        rule: ``"sgd"`` or ``"rms"``.
        decay: ``lambda`` (>= 0).
        epsilon: ``rms`` only (> 0).
        stats: ``rms`` only: ``MS``, one array per weight (:func:`gradient_stats`; required).
        anchor: ``theta_g``, one array per weight [default: the weights' values now].

    Raises:
        ValueError: an unknown rule, ``lr <= 0``, ``decay < 0``, ``epsilon <= 0``, or ``rms``
            without ``stats``.
    """

    def __init__(self, weights, *, lr: float, rule: str = "sgd", decay: float = 0.0,
                 epsilon: float = 1e-5, stats=None, anchor=None):
        import tensorflow as tf

        if rule not in RULES:
            raise ValueError(f"dynamic evaluation: rule {rule!r} is not one of {', '.join(RULES)}.")
        if not lr > 0:
            raise ValueError(f"dynamic evaluation: the learning rate must be positive, got {lr}.")
        if not decay >= 0:
            raise ValueError(f"dynamic evaluation: the decay must be 0 or positive, got {decay}.")
        if rule == "rms" and not epsilon > 0:
            raise ValueError(f"dynamic evaluation: epsilon must be positive, got {epsilon}.")
        if rule == "rms" and stats is None:
            raise ValueError("dynamic evaluation: the rms rule needs the gradient statistics (stats).")
        self.weights = list(weights)
        if rule == "rms":
            self.scale = [tf.constant(1.0 / (np.sqrt(m) + epsilon), tf.float32) for m in stats]
            self.pull = [tf.constant(decay * r, tf.float32) for r in decay_rates(stats, decay)]
        else:
            self.scale = [tf.constant(1.0, tf.float32)] * len(self.weights)
            self.pull = [tf.constant(decay, tf.float32)] * len(self.weights)
        anchor = [w.numpy() for w in self.weights] if anchor is None else anchor
        self.anchor = [tf.constant(np.asarray(v, np.float32)) for v in anchor]
        self.rate = tf.constant(lr, tf.float32)

    def __call__(self, grads) -> None:
        """Apply one step; ``grads``: one tensor (or IndexedSlices, or None) per weight."""
        import tensorflow as tf

        for w, g, k, p, w0 in zip(self.weights, grads, self.scale, self.pull, self.anchor):
            delta = p * (w0 - w)
            if g is not None:
                delta -= self.rate * k * tf.convert_to_tensor(g)
            w.assign_add(delta)


def dynamic_score(model, data, *, lr: float, rule: str = "sgd", decay: float = 0.0,
                  epsilon: float = 1e-5, stats=None) -> dict:
    """Score ``data`` with dynamic evaluation (module docstring: the two rules).

    Args:
        model: the language model; its weights are restored before returning (no file is written).
        data: :class:`~seqkit.data.stream.StreamData` of the split, one column; its ``bptt`` is
            the adaptation chunk.
        lr, rule, decay, epsilon, stats: as :class:`DynamicUpdate` (``theta_g``: the model's
            weights on entry).

    Returns:
        :func:`seqkit.heads.language_model.stream.figures` of the scores given *before* each chunk's update.

    Raises:
        ValueError: as :class:`DynamicUpdate`.
    """
    import tensorflow as tf

    from seqkit.heads.language_model.stream import StreamRunner, chunk_gradients, figures

    runner = StreamRunner(model)
    weights = model.trainable_variables
    saved = [w.numpy().copy() for w in weights]
    update = DynamicUpdate(weights, lr=lr, rule=rule, decay=decay, epsilon=epsilon, stats=stats,
                           anchor=saved)

    @tf.function(reduce_retracing=True)
    def step(x, y, states):
        with fused_rnn.compiled_loops():  # chunks of at most two lengths: XLA compiles each once
            (s, n, c), grads, new = chunk_gradients(runner, weights, x, y, states, training=False)
        update(grads)
        return s, n, c, new

    states = runner.zero_states(data.batch_size)
    tot = np.zeros(3)
    try:
        for x, y in data:
            s, n, c, states = step(tf.constant(x), tf.constant(y), states)
            tot += [float(s), float(n), float(c)]
    finally:
        for w, v in zip(weights, saved):
            w.assign(v)
    return figures(*tot)


# the Python keyword of Run.evaluate / the CLI flag of each recipe key that may be overridden
OVERRIDES = {"dynamic_rule": "--dynamic-rule", "dynamic_lr": "--dynamic-lr",
             "dynamic_decay": "--dynamic-decay", "dynamic_chunk": "--dynamic-chunk"}


def resolve_options(evaluation, **overrides):
    """The recipe's ``evaluation`` with the given ``Run.evaluate`` / ``seqkit evaluate`` overrides.

    Args:
        evaluation: the recipe's :class:`~seqkit.recipe.EvaluationConfig`.
        overrides: ``dynamic_rule``, ``dynamic_lr``, ``dynamic_decay``, ``dynamic_chunk``; None
            keeps the recipe's value.

    Returns:
        A validated :class:`~seqkit.recipe.EvaluationConfig`.

    Raises:
        SeqkitError: a value the recipe key would refuse, naming the keyword, the flag and the
            accepted values (the same message from the Python API and the CLI).
    """
    from pydantic import ValidationError

    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - set(OVERRIDES))
    if unknown:
        raise SeqkitError(f"dynamic evaluation: unknown option(s) {', '.join(unknown)}; "
                          f"expected {', '.join(OVERRIDES)}.")
    try:
        return EvaluationConfig(**{**evaluation.model_dump(), **given})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = str(err["loc"][0]) if err.get("loc") else "?"
        raise SeqkitError(
            f"dynamic evaluation: {key}={given.get(key)!r} (Run.evaluate {key}=..., seqkit evaluate "
            f"{OVERRIDES.get(key, key)}): {err['msg']}. Expected: dynamic_rule sgd or rms, dynamic_lr "
            f"> 0, dynamic_decay >= 0, dynamic_chunk a whole number > 0.") from None
