"""Training throughput (tokens/s) of one LM shape: seqkit's recipe path beside plain Keras and PyTorch.

Shape: vocabulary 5000, embedding 128, one LSTM layer of 256,
batch 32, length 64, Adam (lr 1e-3), global clip norm 1.0, cross-entropy over
every position. One measurement = ``--steps`` training steps (default 8) after
the warm-up, timed end to end; tokens/s = ``steps * 32 * 64 / seconds``.

Roofline: the float32 GFLOP/s of the shape's largest product, the
output projection ``[B*T, H] @ [H, V]``, is measured before and after the
contenders (:func:`bench.machine.matmul_gflops`); each row's
``roofline_fraction`` is its tokens/s over ``GFLOP/s * 1e9 /
lm_flops_per_token`` (10,039,296 matmul FLOPs per token for the LSTM,
9,449,472 for the GRU, forward + backward: :func:`bench.machine.lm_flops_per_token`).

Contenders (one process, interleaved repeat by repeat):

* ``seqkit``: the recipe path -- a recipe (``text_lines`` source over a
  generated corpus of 63-word lines over 4,996 word types, so ``T = 64`` with
  the start marker and ``V = 5000`` with the four specials) through
  ``seqkit.training.train.prepare``, ``compile_model`` (masked loss, exact
  cross-entropy / accuracy / perplexity metrics, replica-exact clipping) and
  ``make_split_dataset`` (tf.data, bucketed), stepping Keras's own
  ``train_function`` as ``fit`` does, with ``seed_everything`` as ``seqkit
  train`` calls it (TensorFlow op determinism on, for every contender of the process). The LSTM is
  :class:`seqkit.layers.fused_lstm.FusedLSTM`.
* ``seqkit (keras LSTM)``: the same with the plugin's layer swapped back to
  ``keras.layers.LSTM`` (what the fused kernel gains).
* ``keras``: the model written by hand in plain Keras as seqkit's is
  (``Embedding(mask_zero=True)``, ``LSTM``, ``Dense``, Adam with
  ``global_clipnorm``, ``SparseCategoricalCrossentropy(from_logits=True)``), fed
  by ``tf.data`` from the same token arrays.
* ``keras (no mask)``: the same without ``mask_zero``.
* ``keras (XLA)``, ``seqkit (XLA)``: ``jit_compile=True`` (the recipe key ``training.jit_compile``).
* ``seqkit (XLA loops)``: only the fused LSTM's forward and BPTT loops compiled by XLA
  (``SEQKIT_RNN_XLA=1``, each batch padded to one of a few lengths:
  :func:`seqkit.layers.fused_rnn.use_xla`, :func:`~seqkit.layers.fused_rnn.xla_lengths`).
* ``seqkit GRU``, ``keras GRU``, ``torch GRU``: the same three with a GRU of 256
  (``reset_after``, Keras's default) instead of the LSTM; seqkit's is
  :class:`seqkit.layers.fused_gru.FusedGRU`. Their ratio is to ``keras GRU``.
* ``torch``: ``nn.Embedding``, ``nn.LSTM(batch_first)``, ``nn.Linear``,
  ``cross_entropy``, ``clip_grad_norm_``, ``Adam`` (if torch is installed), in a
  child process driven step block by step block: in one process with
  TensorFlow the two libraries' spinning thread pools slow PyTorch about 8x.

Precision rows (``ratio_to_float32`` in each row's notes and ``bf16_vs_float32`` in the report):

* ``seqkit bf16``, ``seqkit GRU bf16``: the recipe path with ``training.precision:
  mixed_bfloat16`` (:mod:`seqkit.training.precision`: bfloat16 input and output projections,
  float32 recurrence, state, softmax cross-entropy and weights).
* ``torch bf16``: the ``torch`` contender with its forward and loss under
  ``torch.autocast("cpu", dtype=torch.bfloat16)`` (PyTorch's own mixed precision; skipped
  without torch).
"""

from __future__ import annotations

import os
import tempfile
import time

V, E, H, B, T = 5000, 128, 256, 32, 64


def corpus(path: str, lines: int, seed: int = 0) -> list[list[int]]:
    """Write ``lines`` lines of 63 words over 4,996 word types (every type used); return word ids."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ids = rng.integers(0, V - 4, size=(lines, T - 1))
    ids.flat[: V - 4] = np.arange(V - 4)  # every word type occurs, so the vocabulary is exactly V
    with open(path, "w", encoding="utf-8") as f:
        for row in ids:
            f.write(" ".join(f"w{i}" for i in row) + "\n")
    return ids.tolist()


def recipe(path: str, cell: str = "lstm"):
    """The LM-shape recipe over the generated corpus (``cell``: ``lstm`` or ``gru``)."""
    from seqkit.recipe import recipe_from_dict

    return recipe_from_dict({
        "name": "bench-lm", "seed": 1,
        "data": {"source": "text_lines", "path": path, "tokenizer": "whitespace", "max_length": T,
                 "split": {"valid": 0.0, "test": 0.0}},
        "model": {"cell": cell, "units": H, "embedding_dim": E, "layers": 1},
        "head": {"type": "language_model"},
        "training": {"batch_size": B, "learning_rate": 1e-3, "clipnorm": 1.0, "epochs": 1},
    })


def keras_stepper(model, dataset):
    """A function running one training step of ``model`` as ``fit`` does (its ``train_function``)."""
    it = iter(dataset.repeat())
    model.make_train_function()
    fn = model.train_function

    def step():
        logs = fn(it)
        return logs

    return step


def loops_mode(make, mode: str):
    """``make()``'s step with the fused layers' loops under ``SEQKIT_RNN_XLA=mode`` (set while
    the step is built and traced: :func:`seqkit.layers.fused_rnn.use_xla`)."""
    from seqkit.layers.fused_rnn import XLA_ENV

    before = os.environ.get(XLA_ENV)
    os.environ[XLA_ENV] = mode
    try:
        step = make()
        step()  # traced now, with the variable set
    finally:
        if before is None:
            os.environ.pop(XLA_ENV, None)
        else:
            os.environ[XLA_ENV] = before
    return step


def seqkit_contender(path: str, fused: bool = True, jit: bool = False, cell: str = "lstm",
                     precision: str = "float32"):
    from seqkit.training.train import compile_model, make_split_dataset, prepare, seed_everything

    r = recipe(path, cell)
    if jit:
        r.training.jit_compile = True
    r.training.precision = precision
    seed_everything(r.seed, r.training.deterministic)  # as `seqkit train` does (op determinism on)
    prep = prepare(r)
    assert len(prep.vocab) == V, len(prep.vocab)
    if fused:
        model = compile_model(prep)
    else:
        import keras

        from seqkit.cells import lstm

        orig = lstm.LSTMPlugin.layer_class
        lstm.LSTMPlugin.layer_class = lambda self: keras.layers.LSTM
        try:
            model = compile_model(prep)
        finally:
            lstm.LSTMPlugin.layer_class = orig
    return keras_stepper(model, make_split_dataset(prep, "train", training=True))


def keras_contender(ids, mask: bool = True, jit: bool = False, cell: str = "LSTM"):
    import keras
    import numpy as np
    import tensorflow as tf

    arr = np.asarray(ids, np.int32) + 4
    x = np.concatenate([np.full((len(arr), 1), 2, np.int32), arr], axis=1)  # <s> w_1..w_63
    y = np.concatenate([arr, np.full((len(arr), 1), 3, np.int32)], axis=1)  # w_1..w_63 </s>
    model = keras.Sequential([
        keras.Input((None,), dtype="int32"),
        keras.layers.Embedding(V, E, mask_zero=mask),
        getattr(keras.layers, cell)(H, return_sequences=True),
        keras.layers.Dense(V)])
    model.compile(keras.optimizers.Adam(1e-3, global_clipnorm=1.0),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=jit)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=1).batch(B, drop_remainder=True)
    return keras_stepper(model, ds.prefetch(tf.data.AUTOTUNE))


def torch_contender(ids, cell: str = "LSTM", bf16: bool = False):
    import contextlib

    import numpy as np
    import torch

    torch.manual_seed(1)
    arr = np.asarray(ids, np.int64) + 4
    x = torch.from_numpy(np.concatenate([np.full((len(arr), 1), 2), arr], axis=1))
    y = torch.from_numpy(np.concatenate([arr, np.full((len(arr), 1), 3)], axis=1))

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, E)
            self.rnn = getattr(torch.nn, cell)(E, H, batch_first=True)
            self.out = torch.nn.Linear(H, V)

        def forward(self, tokens):
            return self.out(self.rnn(self.emb(tokens))[0])

    model = LM()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    state = {"i": 0}
    n = len(x) // B

    def step():
        i = state["i"] % n
        state["i"] += 1
        xb, yb = x[i * B:(i + 1) * B], y[i * B:(i + 1) * B]
        opt.zero_grad(set_to_none=True)
        with (torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()):
            logits = model(xb)
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, V), yb.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return float(loss)

    return step


def _torch_worker(conn, ids, steps, threads, cell, bf16=False):
    """Child process: build the PyTorch contender, answer each request with one measurement."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    one = torch_contender(ids, cell, bf16)
    t0 = time.perf_counter()
    one()
    conn.send(time.perf_counter() - t0)
    while conn.recv() == "measure":
        t0 = time.perf_counter()
        for _ in range(steps):
            one()
        conn.send(steps * B * T / (time.perf_counter() - t0))


class TorchInChild:
    """The ``torch`` contender in a spawned child process (see the module docstring)."""

    def __init__(self, ids, steps, threads, cell: str = "LSTM", bf16: bool = False):
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_torch_worker, args=(child, ids, steps, threads, cell, bf16), daemon=True)
        self.proc.start()
        self.first_step = self.conn.recv()

    def __call__(self) -> float:
        self.conn.send("measure")
        return self.conn.recv()

    def close(self):
        self.conn.send("stop")
        self.proc.join(10)


def _ratio(base: dict, a: str, b: str):
    return base[a] / base[b] if a in base and b in base else None


def run(args):
    import keras
    import tensorflow as tf

    from bench.common import interleaved, summarize
    from bench.machine import lm_flops_per_token, matmul_gflops, roofline_fraction

    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    steps = 3 if args.quick else 8
    repeats = 2 if args.quick else args.repeats
    tmp = tempfile.mkdtemp(prefix="seqkit-bench-")
    path = os.path.join(tmp, "corpus.txt")
    ids = corpus(path, lines=B * 40)
    keras.utils.set_random_seed(1)
    makers = {"seqkit": lambda: seqkit_contender(path),
              "seqkit (keras LSTM)": lambda: seqkit_contender(path, fused=False),
              "keras": lambda: keras_contender(ids),
              "keras (no mask)": lambda: keras_contender(ids, mask=False),
              "keras (XLA)": lambda: keras_contender(ids, jit=True),
              "seqkit (XLA)": lambda: seqkit_contender(path, jit=True),
              "seqkit (XLA loops)": lambda: loops_mode(lambda: seqkit_contender(path), "1"),
              "seqkit GRU": lambda: seqkit_contender(path, cell="gru"),
              "keras GRU": lambda: keras_contender(ids, cell="GRU"),
              "seqkit bf16": lambda: seqkit_contender(path, precision="mixed_bfloat16"),
              "seqkit GRU bf16": lambda: seqkit_contender(path, cell="gru", precision="mixed_bfloat16")}
    if getattr(args, "only", None):
        makers = {k: v for k, v in makers.items() if k in args.only}
    import importlib.util

    has_torch = importlib.util.find_spec("torch") is not None
    contenders, build_s = {}, {}
    children = []
    if has_torch:
        for name, cell, bf16 in (("torch", "LSTM", False), ("torch GRU", "GRU", False),
                                 ("torch bf16", "LSTM", True)):
            if getattr(args, "only", None) and name not in args.only:
                continue
            child = TorchInChild(ids, steps, args.threads, cell, bf16)
            contenders[name], build_s[name] = child, child.first_step
            children.append(child)
    for name, make in makers.items():
        t0 = time.perf_counter()
        one = make()
        one()  # first step: tracing / graph build
        build_s[name] = time.perf_counter() - t0

        def measure(one=one):
            t0 = time.perf_counter()
            for _ in range(steps):
                one()
            return steps * B * T / (time.perf_counter() - t0)

        contenders[name] = measure
    roof_before = matmul_gflops(B * T, H, V)
    res = interleaved(contenders, repeats=repeats, warmup=1)
    for child in children:
        child.close()
    roof_after = matmul_gflops(B * T, H, V)
    gflops = (roof_before["gflops"] + roof_after["gflops"]) / 2
    base = {k: summarize(v)["median"] for k, v in res.items()}
    rows = []
    for name, vals in res.items():
        per_token = lm_flops_per_token("gru" if "GRU" in name else "lstm", V, E, H)
        frac = roofline_fraction(base[name], gflops, per_token)
        ref = "keras GRU" if "GRU" in name else "keras"
        f32 = name[:-len(" bf16")] if name.endswith(" bf16") else None
        row = {"contender": name, "metric": "tokens/s", **summarize(vals),
               "ratio": base[name] / base[ref] if ref in base else None,
               "roofline_fraction": frac,
               "notes": f"first step {build_s[name]:.1f} s; {frac:.0%} of roofline"
                        + (f"; {base[name] / base[f32]:.2f}x its float32" if f32 in base else "")}
        rows.append(row)
    pairs = [(n, n[:-len(" bf16")]) for n in base if n.endswith(" bf16") and n[:-len(" bf16")] in base]
    extra = {"shape": f"V {V}, E {E}, LSTM {H}, B {B}, T {T}, Adam, global clipnorm 1.0",
             "bf16_vs_float32": {n: base[n] / base[f] for n, f in pairs},
             "bfloat16": "; ".join(f"{n} {base[n] / base[f]:.2f}x {f}" for n, f in pairs) or "no bf16 rows",
             "steps_per_measurement": steps, "repeats": repeats,
             "ratio": "median tokens/s over the hand-written Keras model's (with mask_zero); GRU rows "
                      "over the hand-written Keras GRU model's",
             "seqkit_gru_vs_keras_gru": _ratio(base, "seqkit GRU", "keras GRU"),
             "seqkit_gru_vs_torch_gru": _ratio(base, "seqkit GRU", "torch GRU"),
             "seqkit_vs_torch": _ratio(base, "seqkit", "torch"),
             "seqkit_vs_keras": _ratio(base, "seqkit", "keras"),
             "seqkit_bf16_vs_torch_best": (base["seqkit bf16"] / max(base[k] for k in ("torch", "torch bf16") if k in base))
             if "seqkit bf16" in base and ("torch" in base or "torch bf16" in base) else None,
             "roofline": f"{gflops:.1f} GFLOP/s float32 for {roof_before['shape']} in TensorFlow (mean of "
                         f"{roof_before['gflops']:.1f} before and {roof_after['gflops']:.1f} after the contenders); "
                         f"{lm_flops_per_token('lstm', V, E, H):,} FLOPs/token (LSTM), "
                         f"{lm_flops_per_token('gru', V, E, H):,} (GRU), see bench/machine.py",
             "roofline_gflops": gflops}
    return rows, extra
