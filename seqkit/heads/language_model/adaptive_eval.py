"""Evaluation modes of a stream language model that add adaptive models to the network.

``seqkit evaluate RUN --cache --mix --ensemble RUN2 ... [--dynamic]`` and
``Run.evaluate(cache=True, mix=True, ensemble=[...], dynamic=True)``:

1. The network's next-token distributions (and its top layer's outputs, the cache's keys) are
   collected over the valid split and the scored split, each read as one stream from zero states
   (:func:`network_outputs`); with ``dynamic`` the weights adapt chunk by chunk as in
   :mod:`seqkit.heads.language_model.dynamic_eval` and are restored after; an ensemble averages
   the distributions of its runs (the cache keys are the first run's).
2. On valid alone the cache's ``theta`` and window, the n-gram's discount and the mixture
   weights are chosen (:func:`seqkit.heads.language_model.adaptive.choose_settings`);
3. the scored split is then scored once with those settings
   (:func:`seqkit.heads.language_model.adaptive.score`).

The n-gram and the match model read the training text's stream first, then the scored split
(the valid split when settings are chosen), the marginal rule of the compressor baselines.

TensorFlow is imported inside the functions that use it.
"""

from __future__ import annotations

import resource
import time

import numpy as np

from seqkit import log
from seqkit.data.stream import token_stream
from seqkit.errors import SeqkitError
from seqkit.heads.language_model import adaptive
from seqkit.layers import fused_rnn
from seqkit.metrics.baselines import compressor_bits


def network_outputs(model, data, *, dynamic: dict | None = None, keep_hidden: bool = True):
    """The network's distributions over one split read as one stream, state carried.

    Args:
        model: the language model.
        data: :class:`~seqkit.data.stream.StreamData` with one column; its ``bptt`` is the chunk
            (the adaptation chunk with ``dynamic``).
        dynamic: None (static weights), or the keyword arguments of
            :class:`~seqkit.heads.language_model.dynamic_eval.DynamicUpdate` but ``anchor``
            (``lr``, ``rule``, ``decay``, ``epsilon``, ``stats``): each chunk is scored, then one
            update is taken on it; the weights are restored before returning.
        keep_hidden: also return the top layer's outputs.

    Returns:
        ``(probs [N, V] float32, hidden [N, H] float32 or None, targets [N] int64)``, ``N`` the
        split's scored tokens; ``-log probs[t, targets[t]]`` summed is the static (or dynamic)
        cross-entropy of :func:`~seqkit.heads.language_model.stream.score_stream` (or
        :func:`~seqkit.heads.language_model.dynamic_eval.dynamic_score`).
    """
    import tensorflow as tf

    from seqkit.heads.language_model.dynamic_eval import DynamicUpdate
    from seqkit.heads.language_model.stream import StreamRunner

    if data.batch_size != 1:
        raise ValueError(f"network_outputs: one column expected, got {data.batch_size}.")
    runner = StreamRunner(model)
    weights = model.trainable_variables
    saved = [w.numpy().copy() for w in weights] if dynamic else None
    update = DynamicUpdate(weights, anchor=saved, **dynamic) if dynamic else None

    @tf.function(reduce_retracing=True)
    def step(x, y, states):
        with fused_rnn.compiled_loops():  # chunks of at most two lengths: XLA compiles each once
            if update is None:
                h, logits, new = runner.forward_hidden(x, states, training=False)
            else:
                with tf.GradientTape() as tape:
                    h, logits, new = runner.forward_hidden(x, states, training=False)
                    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                        labels=y, logits=logits))
                grads = tape.gradient(loss, weights)
        if update is not None:
            update(grads)
        return tf.nn.softmax(logits)[0], h[0], new

    states = runner.zero_states(1)
    probs, hidden, targets = [], [], []
    try:
        for x, y in data:
            p, h, states = step(tf.constant(x), tf.constant(y), states)
            probs.append(p.numpy())
            if keep_hidden:
                hidden.append(h.numpy())
            targets.append(y[0])
    finally:
        if saved is not None:
            for w, v in zip(weights, saved):
                w.assign(v)
    return (np.concatenate(probs), np.concatenate(hidden) if keep_hidden else None,
            np.concatenate(targets).astype(np.int64))


def _peak_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def _figures(p_target, seconds: float) -> dict:
    b = adaptive.bits(p_target)
    ce = b * np.log(2.0)
    return {"bits_per_token": b, "cross_entropy": float(ce),
            "perplexity": float(np.exp(ce)) if ce < 709.78 else float("inf"),
            "tokens": int(len(p_target)), "seconds": round(seconds, 1), "peak_memory_mb": _peak_mb()}


def require_valid(valid_records, flags: str) -> None:
    """Refuse adaptive modes without a valid split to choose their settings on.

    Args:
        valid_records: the recipe's valid split (a list of records; empty or None: refused).
        flags: the options asked, as the message names them (e.g. ``"--cache / --mix"``).

    Raises:
        SeqkitError: the valid split is empty.
    """
    if not valid_records:
        raise SeqkitError(f"{flags} choose their settings on the valid split, which is empty "
                          f"(data.split.valid is 0); give the recipe a valid split.")


def _text(record) -> str:
    """A record's text (a text_corpus's training split yields its lines as strings)."""
    return record if isinstance(record, str) else record.text


def training_stream(head, train_records) -> np.ndarray:
    """The training split as the one token stream the n-gram and match models read first.

    Args:
        head: the language-model head (its vocabulary and tokenizer).
        train_records: the training split: records, or a text_corpus's
            :class:`~seqkit.data.lazy_corpus.LazyCorpus` (read line by line).

    Returns:
        int64 ``[M]`` (:func:`seqkit.data.stream.token_stream` of the encoded lines; empty without
        a training split).
    """
    if not train_records:
        return np.zeros(0, np.int64)
    t0 = time.time()
    log.info(f"adaptive models: encoding the training text ({len(train_records):,} lines) as one stream.")
    if hasattr(train_records, "ids_from"):  # a text_corpus (LazyCorpus): its own encoding, line by line
        out = np.concatenate(list(train_records.ids_from(head.vocab, 0))).astype(np.int64)
    else:
        ids = [head.vocab.encode(head.tokenizer.split(r.text)) for r in train_records]
        out = token_stream(ids).astype(np.int64)
    log.info(f"adaptive models: {len(out):,} training tokens in {time.time() - t0:.1f} s.")
    return out


def split_outputs(head, members, records, name: str, history, *, keep_hidden: bool,
                  dynamic=None, train_records=None) -> adaptive.SplitOutputs:
    """The network's side of one split for the adaptive models (:func:`network_outputs` of each
    member, their distributions averaged).

    Args:
        head: the language-model head.
        members: ``[(model, run_dir)]``; the cache keys are the first member's.
        records: the split's records, read as one stream from zero states.
        name: the split's name (``"valid"`` for :func:`~seqkit.heads.language_model.adaptive.choose_settings`).
        history: int ``[M]``: :func:`training_stream`.
        keep_hidden: keep the first member's top-layer outputs (the cache's keys).
        dynamic: None or an :class:`~seqkit.recipe.EvaluationConfig` (dynamic evaluation).
        train_records: the training split (the ``rms`` rule's statistics, with ``dynamic``).

    Returns:
        :class:`~seqkit.heads.language_model.adaptive.SplitOutputs` (probabilities float64).
    """
    t0 = time.time()
    probs, hidden, y = None, None, None
    for i, (model, run_dir) in enumerate(members):
        chunk = dynamic.dynamic_chunk if dynamic is not None else (head.recipe.training.bptt or 128)
        data = head.stream_data(records, columns=1, bptt=chunk)
        dyn = head.dynamic_update_options(model, dynamic, train_records, run_dir) if dynamic is not None else None
        p, h, y = network_outputs(model, data, dynamic=dyn, keep_hidden=keep_hidden and i == 0)
        probs = p.astype(np.float64) if probs is None else probs + p
        hidden = h if i == 0 else hidden
    probs /= len(members)
    log.info(f"adaptive models: the network over the {name} split ({len(y):,} tokens"
             + (f", {len(members)} runs" if len(members) > 1 else "") + f") in {time.time() - t0:.1f} s.")
    return adaptive.SplitOutputs(split=name, probs=probs, hidden=hidden, targets=y, history=history)


def evaluate_adaptive(head, members, records, valid_records, train_records, *, split: str,
                      cache: bool, mix: bool, dynamic=None) -> dict:
    """Every asked mode's figures on ``records`` (module docstring).

    Args:
        head: the :class:`~seqkit.heads.language_model.head.LanguageModelHead` (vocabulary, tokenizer).
        members: ``[(model, run_dir)]``, the runs averaged (one: no ensemble); same vocabulary.
        records, valid_records, train_records: the scored split, the valid split, the training split.
        split: the scored split's name (``"valid"``: its adaptive figures are in-sample).
        cache, mix: add the continuous cache / the n-gram and match models.
        dynamic: None, or an :class:`~seqkit.recipe.EvaluationConfig`: also every mode over the
            dynamically evaluated network.

    Returns:
        ``{label: figures}``, labels such as ``"static"``, ``"static+cache"``,
        ``"dynamic+cache+ngram"`` (``+ensemble`` after the base with several members); each
        figures dict has ``bits_per_token``, ``cross_entropy``, ``perplexity``, ``tokens``,
        ``seconds`` (the network's pass over the split plus the mixing), ``peak_memory_mb`` (the
        process's peak resident memory so far) and, for a mixture, ``settings`` (:class:`~seqkit.heads.language_model.adaptive.Settings`).

        Also ``"compressors"``: :func:`seqkit.metrics.baselines.compressor_bits` of the split after
        the training text (bits per token; a string where a compressor's binary is absent).

    Raises:
        SeqkitError: the valid split is empty.
    """
    require_valid(valid_records, "--cache / --mix / --ensemble")
    history = training_stream(head, train_records)
    bases = [("static", None)] + ([("dynamic", dynamic)] if dynamic is not None else [])
    out: dict = {}
    for base, ev in bases:
        outs, secs = {}, {}
        for name, recs in (("valid", valid_records), (split, records)):
            if name in outs:
                continue
            t0 = time.time()
            outs[name] = split_outputs(head, members, recs, name, history, keep_hidden=cache,
                                       dynamic=ev, train_records=train_records)
            secs[name] = time.time() - t0
        label = base + ("+ensemble" if len(members) > 1 else "")
        test = outs[split]
        out[label] = _figures(test.probs[np.arange(len(test.targets)), test.targets], secs[split])
        wanted = [(c, m) for c, m in ((True, False), (False, True), (True, True)) if (c <= cache and m <= mix)]
        memo: dict = {}  # the valid split's cache grid and n-gram counts, shared by the modes
        for c, m in wanted:
            t0 = time.time()
            settings = adaptive.choose_settings(outs["valid"], cache=c, ngram=m, memo=memo)
            figs = adaptive.score(test, settings)
            figs.update({"seconds": round(time.time() - t0 + secs[split], 1),
                         "peak_memory_mb": _peak_mb(), "settings": settings.as_dict()})
            out[label + ("+cache" if c else "") + ("+ngram" if m else "")] = figs
    low = (lambda t: t.lower()) if head.recipe.data.lowercase else (lambda t: t)  # noqa: E731
    out["compressors"] = compressor_bits(low("\n".join(_text(r) for r in train_records or ()) + "\n"),
                                         low("\n".join(r.text for r in records) + "\n"),
                                         len(outs[split].targets))
    return out
