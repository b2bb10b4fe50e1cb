"""Know the machine: CPU vector extensions, TensorFlow's oneDNN setting, and a measured roofline.

A tokens/s figure means little without the machine beside it: the same code ran
at 1.05x PyTorch on an AVX-512 EPYC and 0.81x on an AVX2-only one. Every bench
report therefore records

* :func:`cpu_flags`: which of ``avx2``, ``fma``, ``avx512f``, ``avx512bw``,
  ``avx512_vnni``, ``avx512_bf16``, ``amx_tile``, ``amx_bf16``, ``amx_int8`` the
  CPU reports in ``/proc/cpuinfo`` (``cpu_kind`` sums them up as ``"avx512"``,
  ``"avx2"`` or ``"other"``; :func:`machine_kind` adds ``+amx`` or ``+avx512_bf16``, the
  bfloat16 matrix units mixed-precision training uses);
* :func:`onednn`: whether TensorFlow runs its oneDNN kernels
  (``TF_ENABLE_ONEDNN_OPTS``, default on for x86 Linux) and any ISA cap set with
  ``ONEDNN_MAX_CPU_ISA`` (oneDNN's own switch, which ``python -m bench --isa
  avx2`` sets, together with ``MKL_ENABLE_INSTRUCTIONS`` and
  ``ATEN_CPU_CAPABILITY`` for PyTorch, to approximate an AVX2 machine on an
  AVX-512 one: the kernels are AVX2's, the cores and caches are not);
* a roofline for the train suite's LM shape: :func:`matmul_gflops` of the
  shape's largest product measured on this machine, and
  :func:`lm_flops_per_token`, so each contender's tokens/s is also given as a
  fraction of ``gflops * 1e9 / flops_per_token``, the rate at which the machine
  could run if every FLOP ran at the speed of the biggest matmul.
"""

from __future__ import annotations

import os
import statistics
import time

from seqkit.runs.provenance import FLAGS, cpu_flags, cpu_kind  # noqa: F401 (one reading of the CPU for runs and bench)

def machine_kind(flags: dict[str, bool]) -> str:
    """The CPU kind with its bfloat16 matrix units: :func:`cpu_kind` plus ``+amx`` (``amx_bf16``:
    Intel AMX tiles) or else ``+avx512_bf16`` (``vdpbf16ps``: Zen 4/5, Cooper Lake and later), e.g.
    ``"avx512+avx512_bf16"``, ``"avx512+amx"``, ``"avx2"``. What decides whether
    ``training.precision: mixed_bfloat16`` can pay (:mod:`seqkit.training.precision`)."""
    kind = cpu_kind(flags)
    if flags.get("amx_bf16"):
        return kind + "+amx"
    if flags.get("avx512_bf16"):
        return kind + "+avx512_bf16"
    return kind


ISA_ENV = ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS",
           "ATEN_CPU_CAPABILITY", "XLA_FLAGS")


def onednn() -> dict:
    """TensorFlow's oneDNN state: ``{"enabled": bool | None, **ISA_ENV values that are set}``.

    ``enabled`` is TensorFlow's own answer (``IsMklEnabled``), None when
    TensorFlow cannot be imported.
    """
    out = {k: os.environ[k] for k in ISA_ENV if k in os.environ}
    try:
        from tensorflow.python.util import _pywrap_util_port

        out["enabled"] = bool(_pywrap_util_port.IsMklEnabled())
    except Exception:  # pragma: no cover - TF missing or moved
        out["enabled"] = None
    return out


def cap_isa(isa: str) -> dict[str, str]:
    """Environment that caps oneDNN (TensorFlow), XLA's CPU code generator, MKL and ATen (PyTorch) to
    ``isa`` (``"avx2"``).

    XLA compiles for the host's own vector extensions unless ``--xla_cpu_max_isa`` says otherwise
    (the XLA-compiled recurrence loops would run AVX-512 code under a cap that only reached
    oneDNN); the flag is appended to any ``XLA_FLAGS`` already set.

    Must be applied before TensorFlow or PyTorch is imported (their kernels are
    chosen at load); the train suite's PyTorch child inherits it.

    Returns:
        The variables set.

    Raises:
        ValueError: an ISA other than ``"avx2"``.
    """
    if isa != "avx2":
        raise ValueError(f"--isa {isa}: only avx2 can be emulated")
    env = {"ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
           "ATEN_CPU_CAPABILITY": "avx2",
           "XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_max_isa=AVX2").strip()}
    os.environ.update(env)
    return env


def lm_flops_per_token(cell: str, vocab: int, embedding: int, units: int) -> int:
    """Matmul FLOPs per token of one training step of the one-layer LM shape (forward + backward).

    Counts the three matmuls per token, each ``2 * in * out`` FLOPs forward and
    twice that backward (the input gradient and the weight gradient), so ``3 *
    2 * in * out`` in all:

    * input projection ``E -> g*H`` (``g`` = 4 gates for ``"lstm"``, 3 for ``"gru"``),
    * recurrent projection ``H -> g*H``,
    * output projection ``H -> V`` (logits).

    The embedding lookup and its gradient (a gather and a scatter-add), the gate
    nonlinearities, softmax, clipping and the optimizer update are O(V + gH)
    per token or per parameter and are left out: at the benchmark's LM shape (V 5000,
    E 128, H 256) the count is 10,039,296 FLOPs per token for the LSTM and
    9,449,472 for the GRU.

    Raises:
        ValueError: a cell other than lstm / gru.
    """
    gates = {"lstm": 4, "gru": 3}.get(cell.lower())
    if gates is None:
        raise ValueError(f"cell {cell!r}: expected lstm or gru")
    forward = 2 * (embedding * gates * units + units * gates * units + units * vocab)
    return 3 * forward


def matmul_gflops(m: int, k: int, n: int, repeats: int = 15, calls: int = 5) -> dict:
    """Measured float32 GFLOP/s of ``[m, k] @ [k, n]`` in a TensorFlow ``tf.function``.

    One measurement times ``calls`` back-to-back products (``2*m*k*n`` FLOPs
    each); the median of
    ``repeats`` measurements after one warm-up is the roofline.

    Returns:
        ``{"shape": "MxK @ KxN", "gflops": median, "min", "max"}`` (GFLOP/s).
    """
    import tensorflow as tf

    a = tf.random.stateless_normal((m, k), seed=(1, 2))
    b = tf.random.stateless_normal((k, n), seed=(3, 4))

    mm = tf.function(tf.matmul)
    mm(a, b).numpy()
    vals = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            mm(a, b)  # on the CPU the call returns once the product is computed
        vals.append(2.0 * m * k * n * calls / (time.perf_counter() - t0) / 1e9)
    return {"shape": f"{m}x{k} @ {k}x{n}", "gflops": statistics.median(vals), "min": min(vals), "max": max(vals)}


def roofline_fraction(tokens_per_s: float, gflops: float, flops_per_token: int) -> float:
    """``tokens_per_s / (gflops * 1e9 / flops_per_token)``: the share of the matmul roofline reached."""
    return tokens_per_s * flops_per_token / (gflops * 1e9)
