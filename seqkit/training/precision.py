"""Mixed-precision training: ``training.precision`` and what runs in which dtype.

``training.precision`` is ``float32`` (the default), ``mixed_bfloat16``, ``mixed_float16`` or
``auto``. :func:`resolve` turns ``auto`` into ``mixed_bfloat16`` where the hardware multiplies
bfloat16 natively (a CPU with ``amx_bf16`` or ``avx512_bf16`` in ``/proc/cpuinfo``, or a GPU of
compute capability 8.0 or later) and ``float32`` elsewhere.

Under a mixed policy (see docs/precision.md for the table):

* every variable stays float32 (the optimizer updates float32 weights);
* the big products run in the low dtype: the output projection (a top-level ``Dense``) and the
  recurrent layers' input projection ``X W`` for all steps
  (:class:`~seqkit.layers.fused_lstm.FusedLSTM`, :class:`~seqkit.layers.fused_gru.FusedGRU`: their
  ``product_dtype``); the matmuls accumulate in float32 inside oneDNN / cuBLAS and round their
  result once;
* the seq2seq decoder's cell products ``x W`` and ``h U`` (:class:`~seqkit.layers.decoder.Seq2SeqDecoder`,
  its ``product_dtype``, through the cell plugin's ``product_step``);
* the fused layers' recurrence (``h U``, the gates, the cell state), the decoder's states,
  attention and logits, the softmax cross-entropy, metrics, CRFs, pooling and every
  other layer run in float32 (:data:`MIXED_LAYERS` names the layer classes that take the low
  dtype at the model's top level; every other layer is set back to float32, with its sublayers);
* ``mixed_float16`` wraps the optimizer in Keras's ``LossScaleOptimizer`` (dynamic loss scaling:
  float16's range is too narrow for small gradients); bfloat16 has float32's range and needs none.

A saved ``last.keras`` / ``model.keras`` keeps its layers' policies, so ``--resume`` trains on in
the same precision; :func:`to_float32` turns a loaded model back to all-float32 computation (the
same weights), which is what evaluation, export and the portable ``.keras`` use.

Keras is imported inside the functions that use it, so importing this module does not load
TensorFlow.
"""

from __future__ import annotations

import contextlib

from seqkit.runs.provenance import cpu_flags

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16", "auto")

#: Layer class names whose products take the mixed policy's low dtype; every other layer of a
#: model built under a mixed policy computes in float32. The fused recurrent layers keep a float32
#: policy themselves and run only their input projection in the low dtype (``product_dtype``).
MIXED_LAYERS = ("Dense", "EinsumDense", "Embedding", "Dropout", "SpatialDropout1D")


def gpu_bf16() -> bool | None:
    """Whether a visible GPU multiplies bfloat16 natively (compute capability >= 8.0); None when no
    GPU is visible. Imports TensorFlow."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    try:
        cc = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability") or (0, 0)
    except Exception:  # noqa: BLE001  (details unavailable: assume an older GPU)
        cc = (0, 0)
    return tuple(cc) >= (8, 0)


def resolve(precision: str, flags: dict | None = None, gpu: bool | None = None) -> tuple[str, str]:
    """The policy ``training.precision`` stands for, and why.

    Args:
        precision: one of :data:`PRECISIONS`.
        flags: ``{cpu flag: bool}`` (:func:`seqkit.runs.provenance.cpu_flags`; read here when None).
        gpu: :func:`gpu_bf16`'s answer: True (a GPU that multiplies bfloat16), False (a GPU
            that does not: training runs there, in float32), None (no GPU: the CPU decides).

    Returns:
        ``(policy, reason)``: ``policy`` is ``"float32"``, ``"mixed_bfloat16"`` or
        ``"mixed_float16"``; ``reason`` a short phrase for the log and provenance.

    Raises:
        ValueError: an unknown ``precision``.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"training.precision {precision!r}: expected one of {', '.join(PRECISIONS)}.")
    if precision != "auto":
        return precision, "set in the recipe"
    if gpu is not None:
        return (("mixed_bfloat16", "auto: the GPU multiplies bfloat16 natively") if gpu else
                ("float32", "auto: the GPU predates bfloat16 (compute capability below 8.0)"))
    flags = cpu_flags() if flags is None else flags
    have = [f for f in ("amx_bf16", "avx512_bf16") if flags.get(f)]
    if have:
        return "mixed_bfloat16", f"auto: the CPU has {' and '.join(have)}"
    return "float32", "auto: the CPU has neither amx_bf16 nor avx512_bf16"


def is_mixed(policy: str) -> bool:
    """True for ``mixed_bfloat16`` / ``mixed_float16``."""
    return policy.startswith("mixed_")


@contextlib.contextmanager
def policy_scope(policy: str):
    """Within the block, new Keras layers take ``policy`` (Keras's global dtype policy); restored on
    exit. ``float32`` changes nothing."""
    import keras

    if not is_mixed(policy):
        yield
        return
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(before)


def pin_float32(layer) -> None:
    """Set ``layer`` and every layer inside it to the float32 policy (quantized layers as they are)."""
    for sub in layer._flatten_layers(include_self=True, recursive=True):
        if sub.dtype_policy.name != "float32" and sub.dtype_policy.quantization_mode is None:
            sub.dtype_policy = "float32"


def restrict(model, policy: str):
    """Keep the low dtype of ``policy`` only where it pays: layers named in :data:`MIXED_LAYERS`
    keep it, the fused recurrent layers and the seq2seq decoder keep their ``product_dtype``, every other layer (and the
    model itself) computes in float32. Returns ``model``. Called on a freshly built model."""
    if not is_mixed(policy):
        return model
    for layer in model._flatten_layers(include_self=False, recursive=False):
        if hasattr(layer, "product_dtype"):
            continue
        if type(layer).__name__ not in MIXED_LAYERS:
            pin_float32(layer)
    model.dtype_policy = "float32"
    return model


def model_precision(model) -> str:
    """``"mixed_bfloat16"``, ``"mixed_float16"`` or ``"float32"``: the lowest dtype any layer of
    ``model`` computes in (its policy or a fused layer's ``product_dtype``)."""
    found = set()
    for layer in model._flatten_layers(include_self=True, recursive=True):
        found.add(str(getattr(layer, "product_dtype", None) or layer.compute_dtype))
    for low in ("bfloat16", "float16"):
        if low in found:
            return f"mixed_{low}"
    return "float32"


def to_float32(model):
    """Make every layer of ``model`` compute in float32 (same weights; the variables are float32
    under every policy). Returns ``model``; a float32 model is returned unchanged. Call it before
    the model is first run or traced (right after loading)."""
    if model_precision(model) == "float32":
        return model
    for layer in model._flatten_layers(include_self=True, recursive=True):
        if getattr(layer, "product_dtype", None):
            layer.product_dtype = None
        if layer.dtype_policy.name != "float32" and layer.dtype_policy.quantization_mode is None:
            layer.dtype_policy = "float32"
    return model


def wrap_optimizer(optimizer, policy: str):
    """``optimizer`` in a ``keras.optimizers.LossScaleOptimizer`` (dynamic loss scaling) for
    ``mixed_float16``; as given otherwise."""
    import keras

    if policy != "mixed_float16" or isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return optimizer
    return keras.optimizers.LossScaleOptimizer(optimizer)
