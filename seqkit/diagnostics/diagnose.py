"""Seeing inside a trained recurrent model: gradient flow through time and gate statistics.

Everything here runs through the *step cells* of the run's recurrent layers
(``layer.cell``, the same objects the generation/export steppers call), unrolled
one step at a time with explicit states, so it works for every cell plugin.

Gradient flow through time
    For a loss ``L_t`` read at step ``t`` and a state ``s`` of layer ``l``
    (``h``; for the LSTM also the cell ``c``), the norm
    ``g(k) = E_{t, batch} ||dL_t / ds_{t-k}||_2`` for lags ``k = 0..K``
    (Bengio, Simard & Frasconi 1994; Pascanu, Mikolov & Bengio 2013, eq. 3-5:
    ``dL_t/ds_{t-k} = dL_t/ds_t * prod_{j} ds_j/ds_{j-1}``, whose product of
    Jacobians vanishes or explodes geometrically in ``k``). The derivative is the
    tape's total derivative through the state tensor the cell returned at step
    ``t-k`` (for the LSTM ``c`` that includes the path ``c -> h`` of the same
    step). The *gradient horizon* is the smallest ``k`` with
    ``g(k) < 1e-3 * g(0)`` (``None`` when that does not happen within ``K``).

    Losses per head: language model and tagger -- the cross-entropy of step
    ``t``; acceptor -- the one loss at the end of the sequence, with lags counted
    back from the last step. seq2seq -- the encoder: ``L`` is the decoder's
    teacher-forced cross-entropy summed over target steps (the model's own bridge and
    decoder, attention included, run on the unrolled encoder's memory and final states),
    and ``norm[k]`` is the mean ``||dL/ds^enc_{S-1-k}||`` (lag from the source end; a
    backward direction from the source start). Gate statistics are not read for seq2seq.

    Bidirectional encoders: one curve per layer *and direction* (``rnn_0/forward``,
    ``rnn_0/backward``). The forward direction as above. The backward direction reads
    each row's valid part reversed, so its lag ``k`` is ``dL_t/ds^b_{t+k}``: the state
    ``k`` positions *later* in the sequence, which the backward cell computed ``k`` of its
    own steps before ``s^b_t``. For the acceptor each direction's lags count from where
    it ends (forward: the last valid step; backward: the first step). The unrolled path
    (both directions, concatenated per step into the next layer and the head's own
    pooling/logits layers) is checked against the model's logits on every batch.

Gate statistics
    For cells whose plugin implements :meth:`seqkit.cells.base.CellPlugin.gates`
    (the built-in ``lstm``: input/forget/output; ``gru``: update/reset): a
    histogram on ``[0, 1]``, the mean, and the fraction saturated (``< 0.1`` or
    ``> 0.9``) of each gate over the valid steps of held-out data, per layer.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import warnings

import numpy as np

from seqkit.cells.base import CellPlugin
from seqkit.errors import SeqkitError
from seqkit.layers.stack import make_plugin, recurrent_layers
from seqkit.registry import CELLS, HEADS
from seqkit.training.train import load_run

HORIZON_RATIO = 1e-3
SATURATION = (0.1, 0.9)


# ---------------------------------------------------------------------- unrolling
def _state_sizes(cell) -> list[int]:
    s = cell.state_size
    return list(s) if isinstance(s, (list, tuple)) else [int(s)]


def unroll(cells, inputs, initial_states, valid, *, on_step=None):
    """Run a stack of step cells over a batch, one step at a time.

    Args:
        cells: the Keras step cells, bottom layer first.
        inputs: ``[R, W, D]`` float32, the inputs of the bottom layer.
        initial_states: per layer, the list of its states ``[R, H]`` float32.
        valid: ``[R, W]`` bool; at an invalid step every layer keeps its state
            (as ``keras.layers.RNN`` does at masked steps).
        on_step: optional ``f(layer, j, x [R, D_l], states, valid [R, 1])`` called
            before each cell call (``states``: the layer's states before step ``j``).

    Returns:
        ``(outputs, raw)``: ``outputs[j]`` is the top layer's output ``[R, H]`` at
        step ``j``; ``raw[j][l]`` the list of state tensors the cell of layer ``l``
        returned at step ``j`` (before masking: the tensors gradients are taken
        with respect to).
    """
    import tensorflow as tf

    inputs = tf.convert_to_tensor(inputs, tf.float32)
    valid = tf.convert_to_tensor(valid, tf.bool)
    cur = [list(s) for s in initial_states]
    outputs, raw = [], []
    for j in range(int(inputs.shape[1])):
        y, v = inputs[:, j], valid[:, j:j + 1]
        step_raw = []
        for i, cell in enumerate(cells):
            if on_step is not None:
                on_step(i, j, y, cur[i], v)
            y, new = cell(y, list(cur[i]), training=False)
            new = list(new) if isinstance(new, (list, tuple)) else [new]
            step_raw.append(new)
            cur[i] = [tf.where(v, n, o) for n, o in zip(new, cur[i])]
        outputs.append(y)
        raw.append(step_raw)
    return outputs, raw


def _zeros(cells, rows: int):
    import tensorflow as tf

    return [[tf.zeros([rows, n], tf.float32) for n in _state_sizes(c)] for c in cells]


def state_jacobian_norms(cell, inputs, initial_states=None, *, state: int = 0,
                         max_lag: int | None = None) -> np.ndarray:
    """Norms of the state-to-state Jacobians of one step cell, by step and lag.

    Args:
        cell: a Keras step cell (``call(x [B, D], states) -> (y, new_states)``).
        inputs: ``[B, T, D]`` float32 (or array-like).
        initial_states: the cell's states before the first step, ``[B, H]`` each
            (default zeros).
        state: which state (index in the cell's state list: 0 = ``h``, 1 = LSTM ``c``).
        max_lag: largest lag ``K`` (default ``T - 1``).

    Returns:
        ``J [T, K + 1]`` float64: ``J[t, k]`` is the batch mean of the Frobenius norm
        ``||d s_t / d s_{t-k}||_F`` (``s_t``: the state after input ``t``, 0-based;
        ``k = 0`` gives ``sqrt(H)``); NaN where ``k > t``. For a scalar cell it is
        the absolute derivative, e.g. ``|w|^k`` for a linear RNN ``s_t = w s_{t-1} + u x_t``.
    """
    import tensorflow as tf

    x = tf.convert_to_tensor(inputs, tf.float32)
    b, t_len = int(x.shape[0]), int(x.shape[1])
    k_max = t_len - 1 if max_lag is None else int(max_lag)
    init = [list(initial_states)] if initial_states is not None else _zeros([cell], b)
    init = [[tf.convert_to_tensor(s, tf.float32) for s in init[0]]]
    with tf.GradientTape(persistent=True) as tape:
        _, raw = unroll([cell], x, init, tf.ones([b, t_len], tf.bool))
    s = [r[0][state] for r in raw]
    out = np.full((t_len, k_max + 1), np.nan)
    for t in range(t_len):
        for k in range(min(t, k_max) + 1):
            jac = tape.batch_jacobian(s[t], s[t - k], unconnected_gradients="zero",
                                       experimental_use_pfor=False)  # [B, H, H]
            out[t, k] = float(tf.reduce_mean(tf.sqrt(tf.reduce_sum(tf.square(jac), axis=[1, 2]))))
    del tape
    return out


def average_by_lag(per_step: np.ndarray) -> np.ndarray:
    """``[T, K + 1] -> [K + 1]``: the mean over steps of the defined (non-NaN) entries."""
    with np.errstate(invalid="ignore"):
        return np.nanmean(per_step, axis=0)


def horizon(norms, ratio: float = HORIZON_RATIO) -> int | None:
    """The smallest lag ``k`` with ``norms[k] < ratio * norms[0]``; ``None`` if none (or ``norms[0]`` is 0)."""
    n = np.asarray(norms, dtype=float)
    if n.size == 0 or not np.isfinite(n[0]) or n[0] <= 0:
        return None
    hit = np.nonzero(np.isfinite(n) & (n < ratio * n[0]))[0]
    return int(hit[0]) if hit.size else None


# ---------------------------------------------------------------------- run plumbing
def _check_run(prep, model):
    """The head's kind of reading (:attr:`seqkit.heads.base.Head.diagnostics`: ``per_step``,
    ``per_sequence`` or ``encoder_decoder``) and the recurrent layers, or a clear refusal."""
    head = prep.head
    kind = getattr(head, "diagnostics", None)
    if kind == "encoder_decoder":
        return kind, []
    if kind not in ("per_step", "per_sequence"):
        readable = ", ".join(n for n in HEADS.names() if HEADS.get(n).diagnostics)
        raise SeqkitError(
            f"seqkit diagnose reads the heads that declare their loss path ({readable}); this run's "
            f"head is '{prep.recipe.head.type}', which declares none (Head.diagnostics), so it is "
            f"refused rather than given a misleading curve.")
    if getattr(prep.recipe.model, "bidirectional", False):
        layers = recurrent_layers(model, "rnn_bi")
        if not layers:
            raise SeqkitError("this run's model is bidirectional but has no layers named rnn_bi_0, "
                              "rnn_bi_1, ...; it was not built by a seqkit head.")
        return kind, layers
    layers = recurrent_layers(model)
    if not layers:
        raise SeqkitError("this run's model has no recurrent layers named rnn_0, rnn_1, ...; it was "
                          "not built by a seqkit head.")
    return kind, layers


def _held_out(prep, split: str, examples: int) -> list:
    recs = prep.splits.get(split) or []
    if not recs:
        raise SeqkitError(f"the run's {split} split is empty (data.split.{split} is 0); pass "
                          f"--split with a split that has examples.")
    return list(recs[:examples])


def _batches(prep, model, records, *, with_x: bool = False):
    """Yield ``(emb [B, T, D] np.float32, valid [B, T] bool, targets)`` for the held-out records
    (with ``with_x``, also the model's input batch ``x`` last)."""
    import keras
    import tensorflow as tf

    x_in = model.get_layer("rnn_bi_0" if getattr(prep.recipe.model, "bidirectional", False)
                           else "rnn_0").input
    if isinstance(x_in, (list, tuple)):  # (x, mask) when the layer was called with a mask
        x_in = x_in[0]
    feed = keras.Model(model.inputs, x_in)
    for x, y in prep.head.dataset(records, training=False):
        x = np.asarray(x)
        valid = (x != 0) if x.dtype.kind in "iu" else ~np.isnan(x).any(axis=-1)
        emb = np.asarray(feed(tf.convert_to_tensor(x), training=False), np.float32)
        yield (emb, valid, np.asarray(y), x) if with_x else (emb, valid, np.asarray(y))


def _targets(prep, y: np.ndarray) -> np.ndarray:
    """Class index per target, ``y - Head.diagnostic_offset`` (``-1``: padding, id 0, no target)."""
    y = y.astype(np.int64)
    return np.where(y > 0, y - prep.head.diagnostic_offset, -1)


def _row_norms(g) -> np.ndarray:
    import tensorflow as tf

    return np.asarray(tf.sqrt(tf.reduce_sum(tf.square(g), axis=-1)), np.float64)


def gradient_flow(prep, model, *, max_lag: int = 50, examples: int = 32, positions: int = 8,
                  split: str = "test") -> dict:
    """The gradient norm through time, per layer and state, of a trained run.

    Args:
        prep, model: from :func:`seqkit.training.train.load_run` with ``with_data=True``.
        max_lag: largest lag ``K`` (>= 1).
        examples: held-out sequences read (the first of ``split``).
        positions: loss steps ``t`` per sequence (LM, tagger), evenly spread over its
            valid steps; each is one row ``(sequence, t)``.
        split: ``test``, ``valid`` or ``train``.

    Returns:
        ``{"head", "cell", "max_lag", "sequences", "curves": [{"layer", "state",
        "lags": [K + 1], "norm": [K + 1] float (NaN where no row reaches that lag),
        "rows": [K + 1] int, "horizon": int | None}]}``; ``norm[k]`` is the mean over
        rows of ``||dL_t / ds_{t-k}||_2`` (see the module docstring).

    Raises:
        SeqkitError: unsupported head (plugin heads), an empty split, or (internal) an
            unrolled path whose logits differ from the model's.
    """
    import tensorflow as tf

    kind, layers = _check_run(prep, model)
    if kind == "encoder_decoder":
        return _seq2seq_flow(prep, model, max_lag=max_lag, examples=examples, split=split)
    if getattr(prep.recipe.model, "bidirectional", False):
        return _bidirectional_flow(prep, model, kind, layers, max_lag=max_lag, examples=examples,
                                   positions=positions, split=split)
    cells = [layer.cell for layer in layers]
    names = _state_names(prep, cells)
    logits_layer = model.get_layer("logits")
    pooling = getattr(prep.head.options, "pooling", None)
    recs = _held_out(prep, split, examples)
    k_max = int(max_lag)
    sums = [[np.zeros(k_max + 1) for _ in _state_sizes(c)] for c in cells]
    rows = np.zeros(k_max + 1, np.int64)
    seen = 0
    for emb, valid, y in _batches(prep, model, recs):
        seen += emb.shape[0]
        tgt = _targets(prep, y)
        if kind == "per_sequence":
            xs, vw, init, lens, tw = _acceptor_rows(emb, valid, tgt, cells)
        else:
            xs, vw, init, lens, tw = _window_rows(emb, valid, tgt, cells, k_max, positions)
        if len(tw) == 0:
            continue
        with tf.GradientTape() as tape:
            outs, raw = unroll(cells, xs, init, vw)
            if kind != "per_sequence":
                pooled = outs[-1]
            elif pooling == "mean":
                m = tf.cast(tf.convert_to_tensor(vw)[:, :, None], tf.float32)
                st = tf.stack(outs, axis=1)
                pooled = tf.reduce_sum(st * m, axis=1) / tf.maximum(tf.reduce_sum(m, axis=1), 1.0)
            elif pooling == "max":
                st = tf.stack(outs, axis=1)
                pooled = tf.reduce_max(tf.where(tf.convert_to_tensor(vw)[:, :, None], st, -np.inf), axis=1)
            else:
                pooled = outs[-1]
            logits = logits_layer(pooled, training=False)
            loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
                tf.convert_to_tensor(tw, tf.int32), logits))
        w = len(raw)
        lags = list(range(min(k_max, w - 1) + 1))
        wrt = [raw[w - 1 - k][i][s] for k in lags for i in range(len(cells)) for s in range(len(raw[0][i]))]
        grads = tape.gradient(loss, wrt, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        ok = np.asarray(lens)[:, None] > np.asarray(lags)[None, :]  # [R, lags]: lag k needs k < steps
        it = iter(grads)
        for k in lags:
            for i in range(len(cells)):
                for s in range(len(raw[0][i])):
                    n = _row_norms(next(it))
                    sums[i][s][k] += float(n[ok[:, k]].sum())
            rows[k] += int(ok[:, k].sum())
    curves = []
    for i in range(len(cells)):
        for s, nm in enumerate(names[: len(sums[i])]):
            with np.errstate(invalid="ignore", divide="ignore"):
                norm = np.where(rows > 0, sums[i][s] / np.maximum(rows, 1), np.nan)
            curves.append({"layer": i, "state": nm, "lags": list(range(k_max + 1)),
                           "norm": [float(v) for v in norm], "rows": [int(r) for r in rows],
                           "horizon": horizon(norm)})
    return {"head": prep.recipe.head.type, "cell": prep.recipe.model.cell, "max_lag": k_max,
            "sequences": seen, "horizon_ratio": HORIZON_RATIO, "curves": curves}


def _state_names(prep, cells) -> list[str]:
    try:
        names = tuple(CELLS.get(prep.recipe.model.cell).state_names)
    except Exception:  # pragma: no cover - the run loaded, so the cell is registered
        names = ()
    n = len(_state_sizes(cells[0]))
    return list(names) if len(names) == n else [f"s{j}" for j in range(n)]


def _forward_states(cells, emb, valid):
    """States after every step, per layer and state: ``[T + 1, B, H]`` np arrays (index 0: zeros)."""
    _, raw = unroll(cells, emb, _zeros(cells, emb.shape[0]), valid)
    out = []
    for i, c in enumerate(cells):
        per = []
        for s, n in enumerate(_state_sizes(c)):
            cur = np.zeros((emb.shape[0], n), np.float32)
            seq = [cur]
            for j in range(emb.shape[1]):
                cur = np.where(valid[:, j:j + 1], np.asarray(raw[j][i][s]), cur)
                seq.append(cur)
            per.append(np.stack(seq))
        out.append(per)
    return out


def _window_rows(emb, valid, tgt, cells, k_max, positions):
    """LM/tagger rows: for sampled loss steps ``t``, the window of steps ``t-K..t``, right-aligned.

    Returns ``(xs [R, K+1, D], valid [R, K+1], init per layer/state [R, H], steps [R], targets [R])``:
    ``steps`` counts the window's real steps (lags ``k < steps`` exist).
    """
    import tensorflow as tf

    states = _forward_states(cells, emb, valid)
    w = k_max + 1
    rows = []
    for b in range(emb.shape[0]):
        ts = np.nonzero(valid[b] & (tgt[b] >= 0))[0]
        if ts.size == 0:
            continue
        pick = np.unique(np.round(np.linspace(0, ts.size - 1, min(positions, ts.size))).astype(int))
        rows.extend((b, int(ts[p])) for p in pick)
    if not rows:
        return None, None, None, [], []
    d = emb.shape[2]
    xs = np.zeros((len(rows), w, d), np.float32)
    vw = np.zeros((len(rows), w), bool)
    init = [[np.zeros((len(rows), st.shape[2]), np.float32) for st in per] for per in states]
    lens, tw = [], []
    for r, (b, t) in enumerate(rows):
        start = t - k_max  # first step of the window (may be < 0: left padding)
        lo = max(start, 0)
        xs[r, lo - start:] = emb[b, lo:t + 1]
        vw[r, lo - start:] = valid[b, lo:t + 1]
        for i, per in enumerate(states):
            for s, st in enumerate(per):
                init[i][s][r] = st[lo, b]  # the state before step lo (index lo of [T + 1])
        lens.append(t - lo + 1)
        tw.append(int(tgt[b, t]))
    init = [[tf.constant(a) for a in per] for per in init]
    return xs, vw, init, lens, np.asarray(tw)


def _acceptor_rows(emb, valid, tgt, cells):
    """Acceptor rows: each whole sequence right-aligned (left padding), the loss at its end."""
    keep = [b for b in range(emb.shape[0]) if tgt[b] >= 0 and valid[b].any()]
    if not keep:
        return None, None, None, [], []
    t_len = emb.shape[1]
    xs = np.zeros((len(keep), t_len, emb.shape[2]), np.float32)
    vw = np.zeros((len(keep), t_len), bool)
    lens = []
    for r, b in enumerate(keep):
        n = int(valid[b].sum())  # padding is at the end of a batch row
        xs[r, t_len - n:] = emb[b, :n]
        vw[r, t_len - n:] = True
        lens.append(n)
    return xs, vw, _zeros(cells, len(keep)), lens, np.asarray([int(tgt[b]) for b in keep])


# ---------------------------------------------------------------------- bidirectional
def _reverse_index(valid) -> np.ndarray:
    """``[R, W]`` int32: per row, the valid prefix's positions reversed, padding left in place.

    Gathering with it twice is the identity. seqkit batches are right-padded (the valid
    steps of a row come first), which is what ``keras.layers.Bidirectional`` sees too: its
    backward layer reads the reversed row, whose leading padding steps are masked, so it
    starts at the last valid step.
    """
    v = np.asarray(valid, bool)
    n = v.sum(axis=1)[:, None]
    j = np.arange(v.shape[1])[None, :]
    return np.where(j < n, n - 1 - j, j).astype(np.int32)


def unroll_bidirectional(pairs, inputs, valid):
    """Run a stack of bidirectional layers, each a ``(forward cell, backward cell)`` pair.

    Args:
        pairs: per layer, bottom first, the step cells of the forward and backward layers.
        inputs: ``[R, W, D]`` float32 inputs of the bottom layer.
        valid: ``[R, W]`` bool, a prefix of each row (right padding).

    Returns:
        ``(outputs [R, W, 2H], raw)``: ``outputs`` the top layer's ``concat(forward,
        backward)`` per position (as ``Bidirectional(merge_mode="concat")``); ``raw[l] =
        (fwd, bwd)`` with ``fwd[j]`` the state tensors the forward cell returned at position
        ``j`` and ``bwd[i]`` those the backward cell returned at *its own* step ``i``, that
        is at position ``n_r - 1 - i`` of row ``r`` (``n_r`` valid steps; ``i < n_r``).
        Padding never enters a state.
    """
    import tensorflow as tf

    x = tf.convert_to_tensor(inputs, tf.float32)
    v = np.asarray(valid, bool)
    rev = tf.constant(_reverse_index(v))
    rows = int(x.shape[0])
    raw = []
    for fcell, bcell in pairs:
        fo, fr = unroll([fcell], x, _zeros([fcell], rows), v)
        bo, br = unroll([bcell], tf.gather(x, rev, batch_dims=1), _zeros([bcell], rows), v)
        bo = tf.gather(tf.stack(bo, axis=1), rev, batch_dims=1)
        x = tf.concat([tf.stack(fo, axis=1), bo], axis=-1)
        raw.append(([r[0] for r in fr], [r[0] for r in br]))
    return x, raw


BIDI_LAGS = ("bidirectional: forward lag k = dL_t/ds^f_(t-k); backward lag k = dL_t/ds^b_(t+k) "
             "(the backward state k positions later in the sequence, k steps earlier in the "
             "backward cell's own time). Acceptor: t = the last valid step for the forward "
             "direction, t = the first step for the backward one (where each direction ends).")


def _bidirectional_flow(prep, model, kind, layers, *, max_lag, examples, positions, split) -> dict:
    """:func:`gradient_flow` of a bidirectional encoder: one curve per layer, direction and state.

    Whole (right-padded) held-out rows are unrolled through both directions of every
    layer, the layer outputs concatenated per step into the next layer and the model's own
    head layers (``pooling``, ``logits``); the logits are checked against the model's.
    """
    import keras
    import tensorflow as tf

    pairs = [(layer.forward_layer.cell, layer.backward_layer.cell) for layer in layers]
    names = _state_names(prep, [pairs[0][0]])
    nstate = len(_state_sizes(pairs[0][0]))
    logits_layer = model.get_layer("logits")
    pool = model.get_layer("pooling") if kind == "per_sequence" else None
    ref_model = keras.Model(model.inputs, logits_layer.output)
    k_max = int(max_lag)
    keys = [(i, d, s) for i in range(len(pairs)) for d in (0, 1) for s in range(nstate)]
    sums = {key: np.zeros(k_max + 1) for key in keys}
    rows = {d: np.zeros(k_max + 1, np.int64) for d in (0, 1)}
    seen = 0
    for emb, valid, y, x in _batches(prep, model, _held_out(prep, split, examples), with_x=True):
        seen += emb.shape[0]
        tgt = _targets(prep, y)
        picked = []  # (batch row, loss step t or -1 for the acceptor)
        for b in range(emb.shape[0]):
            if kind == "per_sequence":
                if tgt[b] >= 0 and valid[b].any():
                    picked.append((b, -1))
                continue
            ts = np.nonzero(valid[b] & (tgt[b] >= 0))[0]
            if ts.size:
                pick = np.unique(np.round(np.linspace(0, ts.size - 1, min(positions, ts.size))).astype(int))
                picked.extend((b, int(ts[p])) for p in pick)
        if not picked:
            continue
        idx = np.asarray([b for b, _ in picked])
        xs, vs = emb[idx], valid[idx]
        n = vs.sum(axis=1)
        t_f = np.asarray([t if t >= 0 else n[r] - 1 for r, (_, t) in enumerate(picked)])  # forward end
        t_b = np.asarray([t if t >= 0 else 0 for _, t in picked])  # backward end
        labels = np.asarray([tgt[b, t] if t >= 0 else tgt[b] for b, t in picked], np.int32)
        with tf.GradientTape() as tape:
            out, raw = unroll_bidirectional(pairs, xs, vs)
            if kind == "per_sequence":
                feat = pool(out, mask=tf.constant(vs), training=False)
            else:
                feat = tf.gather_nd(out, np.stack([np.arange(len(picked)), t_f], axis=1))
            logits = logits_layer(feat, training=False)
            loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        ref = np.asarray(ref_model(tf.convert_to_tensor(x), training=False))
        ref = ref[idx] if kind == "per_sequence" else ref[idx, t_f]
        if not np.allclose(np.asarray(logits), ref, atol=1e-4, rtol=1e-4):
            raise SeqkitError(
                f"internal error in seqkit diagnose: the unrolled bidirectional path's logits differ "
                f"from the model's by up to {np.abs(np.asarray(logits) - ref).max():.3g}; the gradient "
                f"flow would be wrong, so none is reported. Please report this with the run.")
        w = len(raw[0][0])
        wrt = [raw[i][d][j][s] for (i, d, s) in keys for j in range(w)]
        grads = tape.gradient(loss, wrt, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        r_all = np.arange(len(picked))
        for q, key in enumerate(keys):
            g = np.stack([_row_norms(gj) for gj in grads[q * w:(q + 1) * w]])  # [W, R]
            d = key[1]
            for k in range(k_max + 1):
                if d == 0:  # forward: position t - k
                    pos = t_f - k
                    ok = pos >= 0
                    step = pos
                else:  # backward: position t + k, its own step n - 1 - (t + k)
                    pos = t_b + k
                    ok = pos <= n - 1
                    step = n - 1 - pos
                if not ok.any():
                    continue
                sums[key][k] += float(g[step[ok], r_all[ok]].sum())
                if key[0] == 0 and key[2] == 0:
                    rows[d][k] += int(ok.sum())
    curves = []
    for (i, d, s) in keys:
        with np.errstate(invalid="ignore", divide="ignore"):
            norm = np.where(rows[d] > 0, sums[(i, d, s)] / np.maximum(rows[d], 1), np.nan)
        direction = ("forward", "backward")[d]
        curves.append({"layer": f"rnn_{i}/{direction}", "direction": direction,
                       "state": names[s] if s < len(names) else f"s{s}",
                       "lags": list(range(k_max + 1)), "norm": [float(v) for v in norm],
                       "rows": [int(r) for r in rows[d]], "horizon": horizon(norm)})
    return {"head": prep.recipe.head.type, "cell": prep.recipe.model.cell, "max_lag": k_max,
            "sequences": seen, "horizon_ratio": HORIZON_RATIO, "bidirectional": True,
            "lag_definition": BIDI_LAGS, "curves": curves}


def _bidirectional_gates(plugin, layers, embs, valids, bins) -> dict | None:
    """Gate statistics per layer and direction (``layers``: forward 0, backward 0, forward 1, ...)."""
    import tensorflow as tf

    pairs = [(layer.forward_layer.cell, layer.backward_layer.cell) for layer in layers]
    parts = []
    for emb, v in zip(embs, valids):
        x = tf.convert_to_tensor(emb, tf.float32)
        rev = tf.constant(_reverse_index(v))
        per = []
        for pair in pairs:
            for cell, xin in ((pair[0], x), (pair[1], tf.gather(x, rev, batch_dims=1))):
                st = cell_gate_statistics(plugin, [cell], np.asarray(xin), v, bins=bins)
                if st is None:
                    return None
                per.append(st)
            x = unroll_bidirectional([pair], x, v)[0]
        parts.append({"bins": per[0]["bins"], "saturation": per[0]["saturation"],
                      "layers": [p["layers"][0] for p in per]})
    if not parts:
        return None
    out = _merge_gate_stats(parts)
    out["names"] = [f"rnn_{i}/{d}" for i in range(len(pairs)) for d in ("forward", "backward")]
    return out


# ---------------------------------------------------------------------- seq2seq
SEQ2SEQ_LAGS = ("seq2seq: whole target loss w.r.t. encoder states, lag from the source end: "
                "norm[k] = mean ||dL/ds^enc_(S-1-k)|| with L the decoder's teacher-forced "
                "cross-entropy summed over target steps and S the source length; a backward "
                "direction counts from where it ends, the source start: ||dL/ds^b_k||.")


def _final(raw_steps, n):
    """The state each row holds after its last valid step: ``raw_steps[j]`` ``[R, H]``, ``n [R]``."""
    import tensorflow as tf

    st = tf.stack(raw_steps, axis=1)  # [R, W, H]
    return tf.gather(st, tf.constant(np.maximum(n - 1, 0), tf.int32), batch_dims=1)


def _seq2seq_flow(prep, model, *, max_lag, examples, split) -> dict:
    """:func:`gradient_flow` of an encoder-decoder: the encoder's cells unrolled, the model's
    own bridge and decoder (attention included) run on the unrolled memory and final states."""
    import tensorflow as tf

    m = prep.recipe.model
    bidi = bool(m.bidirectional)
    encoder, decoder = model.get_layer("encoder"), model.get_layer("decoder")
    enc_layers = recurrent_layers(encoder, "encoder_rnn_bi" if bidi else "encoder_rnn")
    if not enc_layers:
        raise SeqkitError("this run's encoder has no layers named encoder_rnn_0, ...; it was not "
                          "built by the seqkit seq2seq head.")
    if bidi:
        pairs = [(layer.forward_layer.cell, layer.backward_layer.cell) for layer in enc_layers]
        first = pairs[0][0]
    else:
        cells = [layer.cell for layer in enc_layers]
        first = cells[0]
    names = _state_names(prep, [first])
    nstate = len(_state_sizes(first))
    embed = encoder.get_layer("source_embedding")
    dec = prep.head.decoder_config()
    dec_names = CELLS.get(dec["cell"]).state_names
    same = (not bidi and m.layers == dec["layers"] and tuple(names) == tuple(dec_names)
            and m.units == dec["units"])
    dirs = (0, 1) if bidi else (0,)
    k_max = int(max_lag)
    keys = [(i, d, s) for i in range(m.layers) for d in dirs for s in range(nstate)]
    sums = {key: np.zeros(k_max + 1) for key in keys}
    rows = np.zeros(k_max + 1, np.int64)
    seen = 0
    for (src, dec_in), tgt in prep.head.dataset(_held_out(prep, split, examples), training=False):
        src, dec_in, tgt = np.asarray(src), np.asarray(dec_in), np.asarray(tgt)
        keep = (src != 0).any(axis=1) & (tgt != 0).any(axis=1)
        seen += src.shape[0]
        if not keep.any():
            continue
        src, dec_in, tgt = src[keep], dec_in[keep], tgt[keep]
        valid = src != 0
        n = valid.sum(axis=1)
        emb = embed(tf.convert_to_tensor(src), training=False)
        with tf.GradientTape() as tape:
            if bidi:
                memory, raw = unroll_bidirectional(pairs, emb, valid)
                finals = []
                for fwd, bwd in raw:  # forward: after its last valid step; backward: after position 0
                    finals.append([_final([st[s] for st in fwd], n) for s in range(nstate)]
                                  + [_final([st[s] for st in bwd], n) for s in range(nstate)])
                wrt_raw = {(i, d): raw[i][d] for i in range(m.layers) for d in dirs}
            else:
                outs, raw1 = unroll(cells, emb, _zeros(cells, len(n)), valid)
                memory = tf.stack(outs, axis=1)
                finals = [[_final([r[i][s] for r in raw1], n) for s in range(nstate)]
                          for i in range(m.layers)]
                wrt_raw = {(i, 0): [r[i] for r in raw1] for i in range(m.layers)}
            if same:  # seqkit.heads.seq2seq.bridge, with the model's own bridge layers
                start = [st for layer in finals for st in layer]
            else:
                start, joined = [], {}
                for i in range(dec["layers"]):
                    j = m.layers - dec["layers"] + i if m.layers >= dec["layers"] else min(i, m.layers - 1)
                    if j not in joined:
                        st = finals[j]
                        joined[j] = st[0] if len(st) == 1 else tf.concat(st, axis=-1)
                    for nm in dec_names:
                        start.append(encoder.get_layer(f"bridge_{i}_{nm}")(joined[j], training=False))
            logits = decoder(tf.convert_to_tensor(dec_in), memory, tf.constant(valid), start, training=False)
            tmask = tf.cast(tf.constant(tgt != 0), tf.float32)
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.constant(tgt.astype(np.int32)), logits)
            loss = tf.reduce_sum(ce * tmask)
        ref = np.asarray(model([tf.convert_to_tensor(src), tf.convert_to_tensor(dec_in)], training=False))
        tv = tgt != 0
        if not np.allclose(np.asarray(logits)[tv], ref[tv], atol=1e-4, rtol=1e-4):
            raise SeqkitError(
                f"internal error in seqkit diagnose: the unrolled encoder + the model's decoder give "
                f"logits that differ from the model's by up to "
                f"{np.abs(np.asarray(logits)[tv] - ref[tv]).max():.3g}; no gradient flow is reported. "
                f"Please report this with the run.")
        w = src.shape[1]
        wrt = [wrt_raw[(i, d)][j][s] for (i, d, s) in keys for j in range(w)]
        grads = tape.gradient(loss, wrt, unconnected_gradients=tf.UnconnectedGradients.ZERO)
        r_all = np.arange(len(n))
        for q, key in enumerate(keys):
            g = np.stack([_row_norms(gj) for gj in grads[q * w:(q + 1) * w]])  # [W, R]
            for k in range(k_max + 1):
                ok = n - 1 - k >= 0  # forward: position n-1-k; backward: position k, its own step n-1-k
                if not ok.any():
                    continue
                sums[key][k] += float(g[(n - 1 - k)[ok], r_all[ok]].sum())
                if q == 0:
                    rows[k] += int(ok.sum())
    curves = []
    for (i, d, s) in keys:
        with np.errstate(invalid="ignore", divide="ignore"):
            norm = np.where(rows > 0, sums[(i, d, s)] / np.maximum(rows, 1), np.nan)
        c = {"layer": f"encoder_rnn_{i}/{('forward', 'backward')[d]}" if bidi else f"encoder_rnn_{i}",
             "state": names[s] if s < len(names) else f"s{s}", "lags": list(range(k_max + 1)),
             "norm": [float(v) for v in norm], "rows": [int(r) for r in rows], "horizon": horizon(norm)}
        if bidi:
            c["direction"] = ("forward", "backward")[d]
        curves.append(c)
    return {"head": prep.recipe.head.type, "cell": m.cell, "max_lag": k_max, "sequences": seen,
            "horizon_ratio": HORIZON_RATIO, "bidirectional": bidi, "encoder_decoder": True,
            "lag_definition": SEQ2SEQ_LAGS, "curves": curves}


# ---------------------------------------------------------------------- gates
def cell_gate_statistics(plugin, cells, inputs, valid=None, *, bins: int = 20) -> dict | None:
    """Gate statistics of a stack of step cells over a batch.

    Args:
        plugin: the cell plugin instance (its :meth:`~seqkit.cells.base.CellPlugin.gates`
            computes the gates from a cell's weights).
        cells: the step cells, bottom layer first.
        inputs: ``[B, T, D]`` float32 inputs of the bottom layer.
        valid: ``[B, T]`` bool (default all valid); only valid steps are counted.
        bins: histogram bins on ``[0, 1]``.

    Returns:
        ``None`` when the plugin exposes no gates, else ``{"bins": [bins + 1] edges,
        "layers": [{gate: {"mean", "saturated", "below", "above", "histogram": [bins]
        (fractions), "unit_mean": [H], "unit_above": [H], "unit_below": [H], "count"}}]}``
        where ``below``/``above`` are the fractions ``< 0.1`` / ``> 0.9`` and
        ``saturated`` their sum.
    """
    if type(plugin).gates is CellPlugin.gates:
        return None
    x = np.asarray(inputs, np.float32)
    v = np.ones(x.shape[:2], bool) if valid is None else np.asarray(valid, bool)
    acc: list[dict] = [dict() for _ in cells]

    def hook(i, j, xt, states, vcol):
        g = plugin.gates(cells[i], xt, list(states))
        if not g:
            return
        m = v[:, j]
        for name, val in g.items():
            acc[i].setdefault(name, []).append(np.asarray(val, np.float64)[m])

    unroll(cells, x, _zeros(cells, x.shape[0]), v, on_step=hook)
    if not any(acc):
        return None
    edges = np.linspace(0.0, 1.0, bins + 1)
    lo, hi = SATURATION
    out = []
    for per in acc:
        stats = {}
        for name, chunks in per.items():
            a = np.concatenate(chunks, axis=0)  # [N, H]
            hist, _ = np.histogram(np.clip(a, 0.0, 1.0), bins=edges)
            below, above = float((a < lo).mean()), float((a > hi).mean())
            stats[name] = {"mean": float(a.mean()), "below": below, "above": above,
                           "saturated": below + above, "count": int(a.size),
                           "histogram": [float(c) / max(a.size, 1) for c in hist],
                           "unit_mean": [float(u) for u in a.mean(axis=0)],
                           "unit_below": [float(u) for u in (a < lo).mean(axis=0)],
                           "unit_above": [float(u) for u in (a > hi).mean(axis=0)]}
        out.append(stats)
    return {"bins": [float(e) for e in edges], "saturation": list(SATURATION), "layers": out}


def gate_statistics(prep, model, *, examples: int = 32, split: str = "test", bins: int = 20) -> dict | None:
    """:func:`cell_gate_statistics` of a run's recurrent stack over held-out sequences.

    Returns ``None`` for a cell whose plugin exposes no gates (``simple_rnn``, most plugins).

    Raises:
        SeqkitError: as :func:`gradient_flow`.
    """
    kind, layers = _check_run(prep, model)
    if kind == "encoder_decoder":  # the gradient flow only (its encoder gates are not read)
        return None
    bidi = bool(getattr(prep.recipe.model, "bidirectional", False))
    cells = [layer.cell for layer in layers] if not bidi else None
    with warnings.catch_warnings():  # the fast-path warning was given at training time
        warnings.simplefilter("ignore")
        plugin = make_plugin(prep.recipe.model, prep.recipe.cell_options)
    embs, valids = [], []
    for emb, valid, _ in _batches(prep, model, _held_out(prep, split, examples)):
        embs.append(emb)
        valids.append(valid)
    if bidi:
        return _bidirectional_gates(plugin, layers, embs, valids, bins)
    parts = [cell_gate_statistics(plugin, cells, e, v, bins=bins) for e, v in zip(embs, valids)]
    if not parts or parts[0] is None:
        return None
    return _merge_gate_stats(parts)


def _merge_gate_stats(parts: list) -> dict:
    """Count-weighted merge of per-batch :func:`cell_gate_statistics` results."""
    if len(parts) == 1:
        return parts[0]
    out = {"bins": parts[0]["bins"], "saturation": parts[0]["saturation"], "layers": []}
    for i in range(len(parts[0]["layers"])):
        merged = {}
        for name in parts[0]["layers"][i]:
            items = [p["layers"][i][name] for p in parts if name in p["layers"][i]]
            n = np.asarray([it["count"] for it in items], np.float64)
            wts = n / n.sum()
            h = len(items[0]["unit_mean"])
            unit_w = (n / h) / (n / h).sum()

            def mix(key, w=wts):
                return float(sum(wi * it[key] for wi, it in zip(w, items)))

            def mix_list(key, w=wts):
                return [float(v) for v in np.sum([wi * np.asarray(it[key]) for wi, it in zip(w, items)], axis=0)]

            merged[name] = {"mean": mix("mean"), "below": mix("below"), "above": mix("above"),
                            "saturated": mix("saturated"), "count": int(n.sum()),
                            "histogram": mix_list("histogram"), "unit_mean": mix_list("unit_mean", unit_w),
                            "unit_below": mix_list("unit_below", unit_w),
                            "unit_above": mix_list("unit_above", unit_w)}
        out["layers"].append(merged)
    return out


def diagnose_run(run_dir: str, *, max_lag: int = 50, examples: int = 32, positions: int = 8,
                 split: str = "test") -> dict:
    """Load a run and return ``{"run", "gradient_flow", "gates"}`` (see :func:`gradient_flow`,
    :func:`gate_statistics`; ``gates`` is ``None`` for a cell without a gate hook).

    Raises:
        RunDirError: not a run directory. SeqkitError: as :func:`gradient_flow`.
    """
    prep, model = load_run(run_dir, with_data=True)
    flow = gradient_flow(prep, model, max_lag=max_lag, examples=examples, positions=positions, split=split)
    gates = gate_statistics(prep, model, examples=examples, split=split)
    return {"run": run_dir, "gradient_flow": flow, "gates": gates}
