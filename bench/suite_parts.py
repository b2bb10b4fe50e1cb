"""Where the LM-shape training step's time goes: each part timed alone, TensorFlow beside PyTorch.

The train suite's shape (V 5000, E 128, LSTM 256, B 32, T 64, Adam, global
clip norm 1.0). Each *part* is timed forward + backward on its own, as seqkit
computes it (TensorFlow, ``tf.function``) and as PyTorch does (a spawned child,
eager, as the train suite's contender):

* ``embedding``: the ``[B, T]`` lookup in ``[V, E]`` and its gradient;
* ``input projection``: ``[B*T, E] @ [E, 4H] + b`` and its gradients;
* ``recurrence``: the 64 LSTM steps over precomputed input projections and
  their BPTT (seqkit: :func:`seqkit.layers.fused_lstm.lstm_scan`; PyTorch:
  ``nn.LSTM`` minus its input projection is not separable, so its row is the
  whole ``nn.LSTM`` minus the ``input projection`` row);
* ``recurrence, XLA loops`` (TensorFlow only): the same with the forward and BPTT loops
  compiled by XLA, as seqkit runs them in training on fixed shapes (``fused_rnn.use_xla``);
* ``loop matmul``: just the recurrence's 64 ``[B, H] @ [H, 4H]`` products in a
  loop (TensorFlow ``tf.while_loop`` / PyTorch eager loop), the floor of the recurrence;
* ``output + softmax CE``: ``[B*T, H] @ [H, V] + b``, the cross-entropy and
  their gradients (seqkit: :func:`seqkit.training.losses.sparse_softmax_cross_entropy`);
* ``clip``: the global-norm clip of every gradient;
* ``optimizer``: one Adam update of every weight;
* ``whole step``: one training step of the whole model (seqkit: the recipe
  path of the train suite; PyTorch: the train suite's contender).
* ``... bf16`` (TensorFlow only): the input projection, the output projection with the softmax CE,
  and the whole step as ``training.precision: mixed_bfloat16`` computes them (bfloat16 operands,
  the bias, softmax and cross-entropy in float32: :mod:`seqkit.training.precision`).

``whole step - sum of parts`` is the rest: the loop's and framework's
per-op overhead, masks and metrics. Times are medians in milliseconds per
step; nothing here asserts.
"""

from __future__ import annotations

import statistics
import time

from bench.suite_train import B, E, H, T, V

PARTS = ("embedding", "input projection", "recurrence", "loop matmul", "output + softmax CE", "clip",
         "optimizer", "whole step")


def _median_ms(fn, repeats: int, calls: int) -> float:
    fn()
    vals = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        vals.append((time.perf_counter() - t0) / calls * 1e3)
    return statistics.median(vals)


def tf_parts(repeats: int, calls: int, corpus_path: str) -> dict[str, float]:
    """Milliseconds per call of each part in TensorFlow as seqkit computes it (see the module docstring)."""
    import keras
    import tensorflow as tf

    from bench.suite_train import seqkit_contender
    from seqkit.layers.fused_lstm import lstm_scan
    from seqkit.training.losses import sparse_softmax_cross_entropy

    g = tf.random.Generator.from_seed(1)
    ids = g.uniform((B, T), 4, V, tf.int32)
    table = tf.Variable(g.normal((V, E)) * 0.05)
    w_in, b_in = tf.Variable(g.normal((E, 4 * H)) * 0.05), tf.Variable(tf.zeros(4 * H))
    u = tf.Variable(g.normal((H, 4 * H)) * 0.05)
    w_out, b_out = tf.Variable(g.normal((H, V)) * 0.05), tf.Variable(tf.zeros(V))
    x = g.normal((B * T, E))
    zx = g.normal((T, B, 4 * H))
    mask = tf.ones((T, B, 1))
    h0 = tf.zeros((B, H))
    hs = g.normal((B * T, H))
    labels = tf.reshape(ids, [-1])
    weights = [table, w_in, b_in, u, w_out, b_out]

    @tf.function
    def embedding():
        with tf.GradientTape() as tape:
            y = tf.gather(table, ids)
        return tape.gradient(y, table, output_gradients=tf.ones_like(y))

    @tf.function
    def input_projection():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.matmul(x, w_in) + b_in
        return tape.gradient(y, [x, w_in, b_in], output_gradients=tf.ones_like(y))

    @tf.function
    def recurrence():
        with tf.GradientTape() as tape:
            tape.watch(zx)
            h_seq, _ = lstm_scan(zx, mask, h0, h0, u)
        return tape.gradient(h_seq, [zx, u], output_gradients=tf.ones_like(h_seq))

    @tf.function
    def recurrence_xla():
        with tf.GradientTape() as tape:
            tape.watch(zx)
            h_seq, _ = lstm_scan(zx, mask, h0, h0, u, xla=True)
        return tape.gradient(h_seq, [zx, u], output_gradients=tf.ones_like(h_seq))

    @tf.function
    def loop_matmul():
        def body(t, h):
            return t + 1, zx[t, :, :H] + tf.matmul(h, u)[:, :H]
        return tf.while_loop(lambda t, h: t < T, body, (tf.constant(0), h0))[1]

    @tf.function
    def output_ce():
        with tf.GradientTape() as tape:
            tape.watch(hs)
            ce = tf.reduce_mean(sparse_softmax_cross_entropy(labels, tf.matmul(hs, w_out) + b_out))
        return tape.gradient(ce, [hs, w_out, b_out])

    grads = [tf.convert_to_tensor(w) * 1e-3 for w in weights]

    @tf.function
    def clip():
        return tf.clip_by_global_norm(grads, 1.0)[0]

    opt = keras.optimizers.Adam(1e-3)
    opt.build(weights)

    @tf.function
    def optimizer():
        opt.apply_gradients(zip(grads, weights))

    lo = tf.bfloat16

    @tf.function
    def input_projection_bf16():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.cast(tf.matmul(tf.cast(x, lo), tf.cast(w_in, lo)), tf.float32) + b_in
        return tape.gradient(y, [x, w_in, b_in], output_gradients=tf.ones_like(y))

    @tf.function
    def output_ce_bf16():
        with tf.GradientTape() as tape:
            tape.watch(hs)
            z = tf.matmul(tf.cast(hs, lo), tf.cast(w_out, lo)) + tf.cast(b_out, lo)
            ce = tf.reduce_mean(sparse_softmax_cross_entropy(labels, tf.cast(z, tf.float32)))
        return tape.gradient(ce, [hs, w_out, b_out])

    step = seqkit_contender(corpus_path)
    bf16 = {"input projection bf16": input_projection_bf16, "output + softmax CE bf16": output_ce_bf16,
            "whole step bf16": seqkit_contender(corpus_path, precision="mixed_bfloat16")}
    fns = {**bf16, "embedding": embedding, "input projection": input_projection, "recurrence": recurrence,
           "recurrence, XLA loops": recurrence_xla,
           "loop matmul": loop_matmul, "output + softmax CE": output_ce, "clip": clip, "optimizer": optimizer,
           "whole step": step}
    return {name: _median_ms(fn, repeats, calls) for name, fn in fns.items()}


def torch_parts(repeats: int, calls: int, ids_rows: list[list[int]]) -> dict[str, float]:
    """Milliseconds per call of each part in PyTorch (eager, as the train suite's contender)."""
    import torch

    from bench.suite_train import torch_contender

    torch.manual_seed(1)
    ids = torch.randint(4, V, (B, T))
    emb = torch.nn.Embedding(V, E)
    lin_in = torch.nn.Linear(E, 4 * H)
    lstm = torch.nn.LSTM(E, H, batch_first=True)
    out = torch.nn.Linear(H, V)
    x = torch.randn(B * T, E, requires_grad=True)
    xs = torch.randn(B, T, E, requires_grad=True)
    zx = torch.randn(T, B, 4 * H)
    u = torch.randn(H, 4 * H) * 0.05
    hs = torch.randn(B * T, H, requires_grad=True)
    labels = ids.reshape(-1)
    params = list(emb.parameters()) + list(lstm.parameters()) + list(out.parameters())
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opt = torch.optim.Adam(params, lr=1e-3)

    def embedding():
        emb.zero_grad(set_to_none=True)
        y = emb(ids)
        y.backward(torch.ones_like(y))

    def input_projection():
        y = lin_in(x)
        y.backward(torch.ones_like(y))

    def whole_lstm():
        y = lstm(xs)[0]
        y.backward(torch.ones_like(y))

    def loop_matmul():
        with torch.no_grad():
            h = torch.zeros(B, H)
            for t in range(T):
                h = zx[t, :, :H] + (h @ u)[:, :H]
        return h

    def output_ce():
        ce = torch.nn.functional.cross_entropy(out(hs), labels)
        ce.backward()

    def clip():
        torch.nn.utils.clip_grad_norm_(params, 1.0)

    def optimizer():
        opt.step()

    step = torch_contender(ids_rows)
    res = {"embedding": _median_ms(embedding, repeats, calls),
           "input projection": _median_ms(input_projection, repeats, calls),
           "loop matmul": _median_ms(loop_matmul, repeats, calls),
           "output + softmax CE": _median_ms(output_ce, repeats, calls),
           "clip": _median_ms(clip, repeats, calls), "optimizer": _median_ms(optimizer, repeats, calls),
           "whole step": _median_ms(step, repeats, calls)}
    lstm_ms = _median_ms(whole_lstm, repeats, calls)
    res["recurrence"] = lstm_ms - res["input projection"]
    return {name: res[name] for name in PARTS}


def _torch_child(conn, repeats, calls, ids_rows, threads):
    import torch

    if threads:
        torch.set_num_threads(threads)
    conn.send(torch_parts(repeats, calls, ids_rows))


def run(args):
    import importlib.util
    import multiprocessing as mp
    import os
    import tempfile

    import tensorflow as tf

    from bench.suite_train import corpus

    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    repeats = 2 if args.quick else args.repeats
    calls = 2 if args.quick else 5
    tmp = tempfile.mkdtemp(prefix="seqkit-bench-")
    path = os.path.join(tmp, "corpus.txt")
    ids_rows = corpus(path, lines=B * 40)
    torch_ms = None
    if importlib.util.find_spec("torch") is not None:
        ctx = mp.get_context("spawn")  # before TensorFlow spins its pools (see suite_train)
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_torch_child, args=(child, repeats, calls, ids_rows, args.threads), daemon=True)
        proc.start()
        torch_ms = parent.recv()
        proc.join(10)
    tf_ms = tf_parts(repeats, calls, path)
    rows = []
    for name in PARTS:
        row = {"contender": name, "metric": "ms/step (TF)", "median": tf_ms[name], "min": tf_ms[name],
               "max": tf_ms[name], "samples": [round(tf_ms[name], 3)],
               "ratio": (tf_ms[name] / torch_ms[name]) if torch_ms and torch_ms[name] > 0 else None,
               "notes": f"PyTorch {torch_ms[name]:.2f} ms" if torch_ms else "PyTorch not installed"}
        rows.append(row)
    for name in ("input projection bf16", "output + softmax CE bf16", "whole step bf16"):
        f32 = name[:-len(" bf16")]
        rows.append({"contender": name, "metric": "ms/step (TF)", "median": tf_ms[name], "min": tf_ms[name],
                     "max": tf_ms[name], "samples": [round(tf_ms[name], 3)], "ratio": None,
                     "notes": f"{tf_ms[f32] / tf_ms[name]:.2f}x faster than float32 ({tf_ms[f32]:.2f} ms)"})
    xla = tf_ms["recurrence, XLA loops"]  # TensorFlow only: the loops seqkit compiles when it can
    rows.insert(PARTS.index("recurrence") + 1, {
        "contender": "recurrence, XLA loops", "metric": "ms/step (TF)", "median": xla, "min": xla, "max": xla,
        "samples": [round(xla, 3)], "ratio": (xla / torch_ms["recurrence"]) if torch_ms and torch_ms["recurrence"] > 0 else None,
        "notes": "lstm_scan(xla=True): forward and BPTT loops each compiled by XLA (seqkit/layers/fused_rnn.use_xla)"})
    parts_tf = sum(tf_ms[p] for p in PARTS if p not in ("whole step", "loop matmul"))
    extra = {"shape": f"V {V}, E {E}, LSTM {H}, B {B}, T {T}, Adam, global clipnorm 1.0",
             "ratio": "TensorFlow (seqkit's computation) ms over PyTorch ms; below 1 is faster",
             "rest_tf_ms": tf_ms["whole step"] - parts_tf,
             "rest_torch_ms": (torch_ms["whole step"] - sum(torch_ms[p] for p in PARTS
                                                           if p not in ("whole step", "loop matmul")))
             if torch_ms else None,
             "note": "the rest = whole step - (embedding + input projection + recurrence + output/CE + clip + "
                     "optimizer): per-op and loop overhead, masks, metrics; 'loop matmul' is inside 'recurrence'"}
    return rows, extra
