"""Language models over continuous text: truncated BPTT training, stateful scoring, dynamic evaluation.

Used by :class:`seqkit.heads.language_model.LanguageModelHead` when
``data.layout: stream`` (layout: :mod:`seqkit.data.stream`).

Design: the run's model stays the ordinary ``tokens [B, T] -> logits [B, T, V]``
Keras model (so ``generate``, ``export`` and the stepper work unchanged); its
recurrent layers are built with ``return_state=True``. :class:`StreamRunner`
calls the same layers with explicit initial states and returns the final
states; the carried states live in the training loop (:func:`fit_stream`) as
plain tensors and are fed back in as *new inputs* of the next chunk's
``tf.function`` call, so no gradient can flow across a chunk boundary
(truncated BPTT, Williams & Peng 1990) and nothing needs a fixed batch size.
Keras ``stateful=True`` layers were not used: they need a fixed batch size
for training and scoring alike, and seqkit's fused CPU layers
(:mod:`seqkit.layers.fused_lstm`) leave their fast kernel when stateful.
Any cell plugin works: the states are the layer's own, ``cell.state_size``
in the plugin's ``state_names`` order.

Keras comes in with :mod:`seqkit.layers.fused_rnn`; TensorFlow and Keras are imported by name only
in the functions that call them.
"""

from __future__ import annotations

import math
import time

import numpy as np

from seqkit import log
from seqkit.layers import fused_rnn
from seqkit.layers.stack import recurrent_layers
from seqkit.metrics.perplexity import perplexity


def _n_states(cell) -> int:
    s = cell.state_size
    return len(s) if isinstance(s, (list, tuple)) else 1


class StreamRunner:
    """Runs a language model's layers chunk by chunk with explicit states (shares its weights).

    Args:
        model: the ``tokens -> logits`` model built by the language_model head
            (layers ``embedding``, ``rnn_dropout_i``, ``rnn_i``, ``output_dropout``, ``logits``).
    """

    def __init__(self, model):
        names = {layer.name: layer for layer in model.layers}
        self.model = model
        self.embedding = names["embedding"]
        self.layers = recurrent_layers(model)
        self.dropouts = [names.get(f"rnn_dropout_{i}") for i in range(len(self.layers))]
        self.output_dropout = names.get("output_dropout")
        self.logits = names["logits"]
        self.counts = [_n_states(layer.cell) for layer in self.layers]

    def state_sizes(self) -> list[int]:
        """Width of every state, layer by layer in the cell's state order."""
        out = []
        for layer in self.layers:
            s = layer.cell.state_size
            out.extend(s if isinstance(s, (list, tuple)) else [s])
        return [int(n) for n in out]

    def zero_states(self, batch_size: int) -> list:
        """Zero states, float32 ``[B, H]`` each."""
        import tensorflow as tf

        return [tf.zeros([batch_size, n], tf.float32) for n in self.state_sizes()]

    def forward(self, tokens, states, training: bool = False, truncate: bool = True):
        """One chunk: ``(tokens [B, T] int32, states) -> (logits [B, T, V] float32, new states)``.

        ``states`` / new states: the flat list of :meth:`zero_states`' layout.
        ``truncate``: stop the gradient at the initial states (truncated BPTT), so that
        even under one enclosing tape no gradient reaches earlier chunks.
        """
        return self.forward_embedded(self.embedding(tokens), states, training, truncate)

    def forward_embedded(self, x, states, training: bool = False, truncate: bool = True):
        """:meth:`forward` from the embedded tokens ``x [B, T, E]`` float32 (no padding mask)."""
        _, logits, new = self.forward_hidden(x, states, training, truncate, embedded=True)
        return logits, new

    def forward_hidden(self, tokens, states, training: bool = False, truncate: bool = True, *,
                       embedded: bool = False):
        """:meth:`forward` that also returns the top layer's outputs (what the logits layer reads).

        Args:
            tokens: int32 ``[B, T]`` (or, with ``embedded``, the embedded float32 ``[B, T, E]``).

        Returns:
            ``(hidden [B, T, H] float32, logits [B, T, V] float32, new states)``; ``hidden`` is taken
            before the output dropout (the same values with ``training=False``).
        """
        import tensorflow as tf

        x = tokens if embedded else self.embedding(tokens)
        if truncate:
            states = [tf.stop_gradient(s) for s in states]
        new, k = [], 0
        for layer, drop, n in zip(self.layers, self.dropouts, self.counts):
            if drop is not None:
                x = drop(x, training=training)
            own = list(states[k:k + n])
            k += n
            flip = not layer.return_state
            if flip:  # a layer built without return_state (a line-layout model)
                layer.return_state = True
            try:
                out = layer(x, initial_state=own, training=training)
            finally:
                if flip:
                    layer.return_state = False
            x = out[0]
            new.extend(out[1:])
        hidden = x
        if self.output_dropout is not None:
            x = self.output_dropout(x, training=training)
        return hidden, self.logits(x), new


def _chunk_sums(logits, targets):
    """``(sum of cross-entropy nats, token count, correct count)`` of one chunk, in float32 (the
    logits of a mixed-precision model are bfloat16 / float16: widened first)."""
    import tensorflow as tf

    logits = tf.cast(logits, tf.float32)  # float32 logits: the same tensor
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
    correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), targets), tf.float32)
    return tf.reduce_sum(ce), tf.cast(tf.size(targets), tf.float32), tf.reduce_sum(correct), ce


def chunk_gradients(runner, weights, x, y, states, *, training: bool, optimizer=None):
    """One chunk forward under a tape: ``(sums, grads, new_states)``.

    ``sums`` is :func:`_chunk_sums`'s ``(ce nats, tokens, correct)``; ``grads`` are the
    gradients of the mean cross-entropy with respect to ``weights`` (None where a weight is
    unused). Call inside a ``tf.function`` (training, dynamic evaluation, its statistics).
    ``optimizer``: the optimizer the gradients go to; its ``scale_loss`` scales the loss first
    (a ``LossScaleOptimizer`` under ``mixed_float16``, which unscales them in ``apply``; any other
    optimizer leaves the loss as it is).
    """
    import tensorflow as tf

    with tf.GradientTape() as tape:
        logits, new = runner.forward(x, states, training=training)
        s, n, c, ce = _chunk_sums(logits, y)
        loss = tf.reduce_mean(ce)
        if optimizer is not None:
            loss = optimizer.scale_loss(loss)
    return (s, n, c), tape.gradient(loss, weights), new


def figures(ce_sum: float, count: float, correct: float) -> dict:
    """``cross_entropy`` (nats/token), ``perplexity`` (:func:`seqkit.metrics.perplexity.perplexity`:
    ``inf`` above 709.78 nats), ``accuracy``, ``bits_per_token``, ``tokens``."""
    ce = float(ce_sum) / max(float(count), 1.0)
    return {"cross_entropy": ce, "perplexity": perplexity(ce),
            "accuracy": float(correct) / max(float(count), 1.0),
            "bits_per_token": ce / math.log(2.0), "tokens": int(count)}


def score_stream(model, data) -> dict:
    """Exact static figures of ``model`` over a :class:`~seqkit.data.stream.StreamData`, state carried.

    Every target of every column is scored once (with ``B = 1``: every token of the
    split), starting from zero states; no weight changes.

    Returns:
        :func:`figures` of the whole split.
    """
    import tensorflow as tf

    runner = StreamRunner(model)

    @tf.function(reduce_retracing=True)
    def step(x, y, states):
        with fused_rnn.compiled_loops():  # chunks of at most two lengths: XLA compiles each once
            logits, new = runner.forward(x, states, training=False)
        s, n, c, _ = _chunk_sums(logits, y)
        return s, n, c, new

    states = runner.zero_states(data.batch_size)
    tot = np.zeros(3)
    for x, y in data:
        s, n, c, states = step(tf.constant(x), tf.constant(y), states)
        tot += [float(s), float(n), float(c)]
    return figures(*tot)


def fit_stream(model, train, *, validation_data=None, epochs: int, initial_epoch: int = 0,
               callbacks=(), verbose: int = 1, steps_per_epoch=None, **_):
    """Truncated-BPTT training of a compiled language model over a stream (``model.fit``'s role).

    Each epoch starts from zero states and reads ``train``'s chunks in order; the
    final states of chunk ``n`` are the initial states of chunk ``n + 1`` (gradient
    stopped: they enter the next step as new inputs). One optimizer step per chunk
    on the mean cross-entropy of its ``B * k`` targets (the compiled optimizer, with
    its gradient clipping). After each epoch the validation stream is scored with
    the state carried (:func:`score_stream`).

    Args:
        model: the compiled ``tokens -> logits`` model.
        train: :class:`~seqkit.data.stream.StreamData` ``[B, L]`` or a
            :class:`~seqkit.data.lazy_corpus.LazyStreamData` (read as it goes).
        validation_data: a :class:`~seqkit.data.stream.StreamData` or None.
        epochs, initial_epoch: as ``model.fit``; a resumed run restarts at an epoch
            boundary with zero states, which is exactly where an uninterrupted run
            is (the carried state resets every epoch; the chunk order is fixed).
        callbacks: Keras callbacks; they get ``loss``, ``cross_entropy``,
            ``perplexity``, ``accuracy`` and the same with ``val_`` each epoch, and
            ``model.stop_training`` is honoured (early stopping).
        steps_per_epoch: this many chunks per epoch, continuing through the stream from
            one epoch to the next (:meth:`~seqkit.data.stream.StreamData.epoch_chunks`;
            None: the whole stream every epoch).

    Returns:
        The list of epoch logs.
    """
    import keras
    import tensorflow as tf

    runner = StreamRunner(model)
    opt = model.optimizer
    weights = model.trainable_variables
    opt.build(weights) if not opt.built else None

    # one trace per chunk shape (the full [B, bptt] and the epoch's shorter last chunk), each with
    # static shapes, so the fused layers' loops are compiled by XLA (fused_rnn.use_xla)
    @tf.function
    def step(x, y, states):
        (s, n, c), grads, new = chunk_gradients(runner, weights, x, y, states, training=True, optimizer=opt)
        opt.apply(grads, weights)
        return s, n, c, new

    cbs = keras.callbacks.CallbackList(list(callbacks), model=model, add_history=False, add_progbar=False)
    model.stop_training = False
    cbs.on_train_begin()
    history, logs = [], {}
    for epoch in range(initial_epoch, epochs):
        t0 = time.time()
        cbs.on_epoch_begin(epoch)
        states = runner.zero_states(train.batch_size)
        tot = np.zeros(3)
        n_chunks = 0  # chunks may come from a generator (a lazy corpus: seqkit.data.lazy_corpus)
        for b, (x, y) in enumerate(train.epoch_chunks(epoch, steps_per_epoch)):
            n_chunks += 1
            cbs.on_train_batch_begin(b)
            s, n, c, states = step(tf.constant(x), tf.constant(y), states)
            tot += [float(s), float(n), float(c)]
            cbs.on_train_batch_end(b, {"loss": float(s) / float(n)})
        f = figures(*tot)
        logs = {"loss": f["cross_entropy"], "cross_entropy": f["cross_entropy"],
                "perplexity": f["perplexity"], "accuracy": f["accuracy"]}
        if validation_data is not None:
            v = score_stream(model, validation_data)
            logs.update({f"val_{k}": v[k] for k in ("cross_entropy", "perplexity", "accuracy")})
            logs["val_loss"] = v["cross_entropy"]
        if verbose:
            log.info(f"epoch {epoch + 1}/{epochs}: {n_chunks} chunks of {train.batch_size}x{train.bptt}, "
                     f"{time.time() - t0:.1f} s; " + ", ".join(f"{k} {v:.4f}" for k, v in logs.items()))
        cbs.on_epoch_end(epoch, logs)
        history.append(logs)
        if model.stop_training:
            break
    cbs.on_train_end(logs)
    return history


def prime_states(model, ids, batch_size: int = 1) -> list:
    """The states after reading ``ids`` from zero states, in one forward pass (a prompt's priming).

    Args:
        model: the language model.
        ids: int ``[P]`` input ids (e.g. :func:`seqkit.data.stream.prompt_ids` without its last id,
            which is the first input of generation).
        batch_size: rows to tile the states to.

    Returns:
        float32 ``[batch_size, H]`` states in :class:`StreamRunner`'s (= the stepper's) layout;
        equal to stepping through ``ids`` one token at a time (tested).
    """
    import tensorflow as tf

    runner = StreamRunner(model)
    states = runner.zero_states(1)
    if len(ids):
        _, states = runner.forward(tf.constant([list(ids)], tf.int32), states, truncate=False)
    return [tf.tile(s, [batch_size, 1]) for s in states]
