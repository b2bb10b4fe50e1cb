"""What seqkit's fused CPU recurrent layers share: when the fast path applies, the input
projection of all steps in one matmul, and Keras's outputs at padded steps.

Used by :class:`seqkit.layers.fused_lstm.FusedLSTM` and
:class:`seqkit.layers.fused_gru.FusedGRU`; each adds its own recurrence and BPTT.

Keras is imported at the top (this module defines Keras classes); TensorFlow only in the functions
that call it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading

import keras

from seqkit.runs.provenance import cpu_flags, cpu_kind

#: ``SEQKIT_RNN_XLA``: ``auto`` (default), ``1`` or ``0``; see :func:`use_xla`.
XLA_ENV = "SEQKIT_RNN_XLA"
_COMPILED: dict = {}
_FORCED = threading.local()


@contextlib.contextmanager
def compiled_loops():
    """Within the block, :func:`use_xla` answers yes under ``auto`` whatever the shapes and the
    training flag: for callers that trace a step over chunks of a few fixed shapes (the stream
    LM's scoring, dynamic evaluation and its gradient statistics). Enter it inside the traced
    function (it is read when the layer is traced)."""
    depth = getattr(_FORCED, "depth", 0)
    _FORCED.depth = depth + 1
    try:
        yield
    finally:
        _FORCED.depth = depth


def fast_path_ok(layer) -> bool:
    """Whether a fused layer can run its CPU kernel for ``layer``'s configuration: TensorFlow
    on a CPU (a GPU takes cuDNN), no recurrent dropout, biases, ``tanh`` / ``sigmoid``, not
    unrolled or stateful, float32."""
    import tensorflow as tf

    cell = layer.cell
    return (keras.backend.backend() == "tensorflow" and not tf.config.list_logical_devices("GPU")
            and not cell.recurrent_dropout and cell.use_bias and not layer.unroll
            and not layer.stateful and cell.activation is keras.activations.tanh
            and cell.recurrent_activation is keras.activations.sigmoid
            and layer.compute_dtype == "float32")


def project_inputs(layer, sequences, mask, input_bias, training):
    """Every step's input projection, time-major, and the mask.

    Args:
        layer: the recurrent layer (its ``cell.kernel`` ``[D, G]``, dropout, ``go_backwards``,
            ``product_dtype``).
        sequences: ``[B, T, D]`` float32.
        mask: ``[B, T]`` bool, a list holding it, or None.
        input_bias: ``[G]`` added to every projection.
        training: apply the cell's input dropout, one mask per sequence (as Keras's cuDNN path).

    Returns:
        ``(zx [T, B, G], m [T, B])`` float32, both reversed in time with ``go_backwards``. With
        the layer's ``product_dtype`` (``"bfloat16"`` / ``"float16"``: :class:`ProductDtype`), ``X W``
        is one product of ``X`` and ``W`` rounded to that dtype (accumulated in float32 by the
        matmul kernel) whose result is widened to float32 before the bias is added; its gradients
        ``dX = dZ W^T`` and ``dW = X^T dZ`` are products in that dtype too.
    """
    import tensorflow as tf

    if isinstance(mask, (list, tuple)):
        mask = mask[0]
    cell, x = layer.cell, sequences
    if training and cell.dropout:
        x = x * tf.expand_dims(cell.get_dropout_mask(sequences[:, 0, :]), 1)
    low = getattr(layer, "product_dtype", None)
    if low:
        xw = tf.cast(tf.tensordot(tf.cast(x, low), tf.cast(cell.kernel, low), axes=[[2], [0]]), tf.float32)
    else:
        xw = tf.tensordot(x, cell.kernel, axes=[[2], [0]])
    zx = tf.transpose(xw + input_bias, [1, 0, 2])
    if mask is None:
        m = tf.ones(tf.shape(zx)[:2], tf.float32)
    else:
        m = tf.transpose(tf.cast(mask, tf.float32), [1, 0])
    if layer.go_backwards:
        zx, m = tf.reverse(zx, [0]), tf.reverse(m, [0])
    return zx, m


def resolve_product_dtype(policy, product_dtype: str | None) -> tuple[str | None, bool]:
    """``(product_dtype, mixed)`` of a layer with Keras dtype policy ``policy``: ``mixed`` when the
    policy computes in bfloat16 / float16 over float32 variables, and then ``product_dtype``
    defaults to that compute dtype.

    Raises:
        ValueError: a ``product_dtype`` other than None, ``"bfloat16"``, ``"float16"``.
    """
    mixed = policy.compute_dtype != policy.variable_dtype and policy.compute_dtype in ("bfloat16", "float16")
    if product_dtype is None and mixed:
        product_dtype = policy.compute_dtype
    if product_dtype not in (None, "bfloat16", "float16"):
        raise ValueError(f"product_dtype must be None, 'bfloat16' or 'float16', got {product_dtype!r}.")
    return product_dtype, mixed


class ProductDtype:
    """Mixin for a fused recurrent layer: the ``product_dtype`` constructor argument.

    ``product_dtype``: ``None`` (everything float32, the default) or ``"bfloat16"`` /
    ``"float16"``: the dtype of the input projection ``X W`` (:func:`project_inputs`) on the fused
    CPU path. The recurrence ``h U``, the gates and the cell state stay float32.

    A layer made under a Keras mixed policy (``mixed_bfloat16``: its compute dtype differs from its
    variable dtype) takes that compute dtype as its ``product_dtype`` and sets its own policy (and
    its cell's) to ``float32``: so its outputs, its states (returned and carried across stream
    chunks) and its step cell (generation, export) stay float32. ``get_config`` names
    ``product_dtype`` only when it is set (configs of float32 layers are as they were).

    Raises:
        ValueError: a ``product_dtype`` other than None, ``"bfloat16"``, ``"float16"``.
    """

    def __init__(self, *args, product_dtype: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.product_dtype, mixed = resolve_product_dtype(self.dtype_policy, product_dtype)
        if mixed:
            self.dtype_policy = "float32"
            self.cell.dtype_policy = "float32"

    def get_config(self):
        config = super().get_config()
        if self.product_dtype:
            config["product_dtype"] = self.product_dtype
        return config


def recurrent_weight_gradient(h0, h_seq, dz, product_dtype: str | None = None):
    """``dU = H_prev^T dZ``: the recurrent kernel's gradient, one product over all steps (BPTT).

    Args:
        h0: ``[B, H]`` float32 initial hidden state.
        h_seq: ``[T, B, H]`` float32 hidden state after every step (``H_prev`` is ``h0`` then
            ``h_seq[:-1]``).
        dz: ``[T, B, G]`` float32 gradient of the recurrent pre-activations ``h_{t-1} U``.
        product_dtype: None (float32) or ``"bfloat16"`` / ``"float16"``: the product's operands
            are rounded to that dtype, accumulated in float32 by the matmul kernel, and the
            result is widened to float32 (as :func:`project_inputs`'s ``dW``).

    Returns:
        ``[H, G]`` float32.

    Run as a TensorFlow op after the BPTT loop, outside the loops that XLA compiles: XLA's CPU
    products are slower than oneDNN's and gain nothing from bfloat16 (docs/precision.md).
    """
    import tensorflow as tf

    width, gates = tf.shape(h0)[-1], tf.shape(dz)[-1]
    h_prev = tf.reshape(tf.concat([h0[None], h_seq[:-1]], axis=0), [-1, width])
    dz = tf.reshape(dz, [-1, gates])
    if product_dtype:
        return tf.cast(tf.matmul(tf.cast(h_prev, product_dtype), tf.cast(dz, product_dtype), transpose_a=True),
                       tf.float32)
    return tf.matmul(h_prev, dz, transpose_a=True)


def keras_outputs(layer, h_seq, m):
    """``(last_output [B, H], outputs [B, T, H])`` as Keras's RNN gives them from the hidden
    states ``h_seq [T, B, H]`` (a padded step repeats the previous one) and ``m [T, B]``.

    Keras's output at a padded step repeats the previous output, which is zero before the
    first valid step even when ``h0`` is not; with ``zero_output_for_mask`` (which
    ``Bidirectional`` sets) it is zero.
    """
    import tensorflow as tf

    seen = m if layer.zero_output_for_mask else tf.cast(tf.cumsum(m, axis=0) > 0, tf.float32)
    seen = seen[:, :, None]
    return h_seq[-1] * seen[-1], tf.transpose(h_seq * seen, [1, 0, 2])


#: Under ``auto``, variable-length training batches get the compiled loops only in layers at
#: least this wide (units): each new padded shape costs about half a second of compiling, which a
#: small layer's per-step saving repays only over a long run.
XLA_MIN_UNITS = 128
#: oneDNN ISA names (``ONEDNN_MAX_CPU_ISA``) below AVX-512.
_BELOW_AVX512 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2")


@functools.lru_cache(maxsize=1)
def _cpu_kind() -> str:
    return cpu_kind(cpu_flags())


def onednn_isa() -> str:
    """``"avx512"``, ``"avx2"`` or ``"other"``: the vector extensions oneDNN's kernels (TensorFlow's
    CPU matmuls) use here, the CPU's (``/proc/cpuinfo``) unless ``ONEDNN_MAX_CPU_ISA`` (or
    ``DNNL_MAX_CPU_ISA``) caps them below AVX-512."""
    cap = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "").strip().upper()
    kind = _cpu_kind()
    if kind == "avx512" and cap in _BELOW_AVX512:
        return "avx2" if cap.startswith("AVX2") else "other"
    return kind


def use_xla(zx, training, units: int | None = None) -> bool:
    """Whether the fused recurrence runs its forward and BPTT loops compiled by XLA.

    ``SEQKIT_RNN_XLA=auto`` (the default), in training only:

    * when the batch and time sizes of ``zx [T, B, G]`` are known when the step is traced (stream
      chunks, fixed-length batches): XLA compiles once per traced shape;
    * on variable-length batches when oneDNN runs AVX2 kernels (:func:`onednn_isa`; an AVX2-only
      x86 CPU) and the layer has at least :data:`XLA_MIN_UNITS` ``units``: the layer pads each
      batch to one of a few :func:`xla_lengths`, so XLA compiles a bounded set of shapes;

    and inside :func:`compiled_loops`. Inference and export keep the graph loops. ``1``: always
    (variable lengths padded as above); ``0``: never.

    Why: the loop's per-step work is a small ``[B, H] @ [H, G]`` product and a few element-wise
    gates. In a ``tf.while_loop`` each is one TensorFlow op (oneDNN's small-matrix path on x86),
    with the executor's overhead per op and step; compiled, the body becomes one fused function.
    Measured (``bench/``, docs/benchmarks.md "Per CPU kind", AVX-512 EPYC, with and without oneDNN and XLA
    capped to AVX2): the LSTM recurrence of the train suite's shape, forward + BPTT, 24 ms a call
    compiled against 25 with graph loops on AVX-512, 29 against 44 under the AVX2 cap; an epoch of
    ``lm-pydoc-chars`` (LSTM 256, batch 64, 126 variable-length batches) 7.9 s against 7.7 on
    AVX-512 (so graph loops there) and 9.5 against 12.4 under the cap, the first epoch paying 2-6 s
    of compiling.
    """
    mode = os.environ.get(XLA_ENV, "auto").strip().lower()
    if mode in ("0", "false", "off", "no"):
        return False
    if mode in ("1", "true", "on", "yes"):
        return True
    if getattr(_FORCED, "depth", 0):
        return True
    if training is not True:
        return False
    if zx.shape[0] is not None and zx.shape[1] is not None:
        return True
    return units is not None and units >= XLA_MIN_UNITS and onednn_isa() == "avx2"


def _bucket_table(limit: int = 1 << 16) -> list[int]:
    """The padded lengths of :func:`xla_lengths`: multiples of 8 up to 64, then four per doubling
    (80, 96, 112, 128, 160, ...), so a length is padded by less than a quarter of itself."""
    out, n = list(range(8, 65, 8)), 64
    while n < limit:
        out += [n + k * n // 4 for k in range(1, 5)]
        n *= 2
    return out


BUCKETS = _bucket_table()


def xla_lengths(zx, m, states):
    """Pad a batch whose sizes are unknown at tracing to a few shapes, for the compiled loops.

    The time axis grows to the next of :data:`BUCKETS` (8, 16, ..., 64, 80, 96, ...), the batch
    axis to a multiple of 8; only axes unknown at tracing are padded. Padded steps and rows have
    mask 0, so the recurrence holds its state through them (Keras's masking) and their BPTT
    terms are zero: the trimmed results and their gradients are exactly the unpadded ones.

    Args:
        zx: ``[T, B, G]`` float32 input projections (time-major).
        m: ``[T, B]`` float32 mask.
        states: list of ``[B, H]`` initial states.

    Returns:
        ``(zx [T', B', G], m [T', B'], states [B', H] each, trim)`` where ``trim(seq=None,
        rows=())`` cuts a ``[T', B', H]`` sequence back to ``[T, B, H]`` and ``[B', H]`` states to
        ``[B, H]``, returning ``(seq, [rows...])``; with both sizes static, the arguments as
        given and ``trim`` None.
    """
    import tensorflow as tf

    if zx.shape[0] is not None and zx.shape[1] is not None:
        return zx, m, states, None
    t, b = tf.shape(zx)[0], tf.shape(zx)[1]
    t_pad, b_pad = tf.constant(0), tf.constant(0)
    if zx.shape[0] is None:
        table = tf.constant(BUCKETS, tf.int32)
        i = tf.minimum(tf.searchsorted(table, t[None], side="left")[0], len(BUCKETS) - 1)
        t_pad = tf.maximum(table[i], t) - t
    if zx.shape[1] is None:
        b_pad = (-b) % 8
    zx = tf.pad(zx, [[0, t_pad], [0, b_pad], [0, 0]])
    m = tf.pad(m, [[0, t_pad], [0, b_pad]])
    states = [tf.pad(s, [[0, b_pad], [0, 0]]) for s in states]

    def trim(seq=None, rows=()):
        return (None if seq is None else seq[:t, :b]), [r[:b] for r in rows]

    return zx, m, states, trim


def loops(name: str, forward, backward, xla: bool):
    """``(forward, backward)`` as given, or each wrapped once per process in its own
    ``tf.function(jit_compile=True)`` (looked up by ``name``)."""
    if not xla:
        return forward, backward
    if name not in _COMPILED:
        import tensorflow as tf

        _COMPILED[name] = (tf.function(forward, jit_compile=True, reduce_retracing=True),
                           tf.function(backward, jit_compile=True, reduce_retracing=True))
    return _COMPILED[name]
