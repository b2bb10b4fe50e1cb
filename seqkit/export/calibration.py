"""Representative datasets for full-integer quantization (``--quantize int8 | int16x8``).

The TFLite converter fixes the scale and zero point of every activation tensor
from the ranges it observes while running the float model on a representative
dataset ("post-training integer quantization"; Jacob et al. 2018, *Quantization
and Training of Neural Networks for Efficient Integer-Arithmetic-Only
Inference*, eq. 1: ``real = scale * (q - zero_point)``). The export draws that
dataset itself from the run's **training** split (held-out data stays for the
parity check): ``n`` records picked with ``numpy.random.default_rng(seed)``
(the recipe's seed), in the shapes each signature takes:

- ``step`` (explicit states): the records streamed through the SavedModel's
  own ``initial_state`` and ``step`` signatures, all rows at once; the
  ``(input, states)`` pairs of the positions inside a record (not the padding
  after a shorter record's end) are pooled and cut into samples
  ``{input [N], state_i [N, H]}`` of ``N`` rows each (``N`` = records; the last
  block completed with the first pairs): the states the model meets
  mid-sequence, not zeros, and none that only padding leads to (fed after a
  line's end, the LM's padding id drove its cell state to 7 times the largest
  value of any real position).
- ``step`` + ``reset`` (``--state internal``): ``("reset", {"rows": ones [B]})``
  before each group of ``B`` records, then ``("step", {input [B]})`` per
  position up to the group's longest record; the calibrating interpreter keeps
  the state variables between calls, so they take realistic values as they do
  on a device.
- ``predict`` (``--full-sequence``): the records in blocks of the pinned ``[B, T]`` (frames
  of a full-integer export: 0 padding and ``lengths [B]``, :mod:`seqkit.export.frame_lengths`).
- ``encode`` + ``decode_step`` (seq2seq): ``("encode", {"source": [1, S]})``
  per source, then ``("decode_step", {...})`` teacher-forced on the target
  (``<s>`` + target, all sources as rows), the memory and states from the
  SavedModel's ``encode`` and ``decode_step``.

A multi-signature model's samples are ``(signature_key, {input_name: array})``
tuples, a single signature's plain ``{input_name: array}`` dicts (the
converter's convention). Frame inputs stream with padding read as 0 (a stream
never sees padding).

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import numpy as np

from seqkit.data.vocab import START_ID
from seqkit.export.frame_lengths import LENGTHS

DEFAULT_EXAMPLES = 128


def calibration_records(prep, n: int = DEFAULT_EXAMPLES) -> list:
    """``min(n, len(train))`` training records drawn without replacement with
    ``numpy.random.default_rng(recipe.seed)`` (the same records on every export of the run).

    A training split read lazily (``text_corpus``: :class:`~seqkit.data.lazy_corpus.LazyCorpus`)
    is counted, not held: the drawn lines are read in one pass."""
    train = prep.splits["train"]
    lazy = getattr(train, "lazy", False)
    if not lazy:
        train = list(train)
    rng = np.random.default_rng(int(prep.recipe.seed))
    pick = sorted(rng.choice(len(train), size=min(int(n), len(train)), replace=False))
    return train.records(pick) if lazy else [train[i] for i in pick]


def parity_split(prep) -> str:
    """The split :func:`parity_records` reads: ``test``, else ``valid``, else ``train``."""
    return next((k for k in ("test", "valid") if prep.splits.get(k)), "train")


def parity_words(split: str) -> str:
    """How a parity report names the figure of its records' ``split`` (:func:`parity_split`)."""
    return "held-out" if split != "train" else "training-split"


def parity_records(prep, n: int) -> list:
    """The first ``n`` held-out records an export checks its parity on: the test split, else
    valid, else train (a training split read lazily, ``text_corpus``: its first ``n`` lines)."""
    held_out = prep.splits.get(parity_split(prep)) or []
    if getattr(held_out, "lazy", False):
        return held_out.records(range(int(n)))
    return list(held_out[:int(n)])


def _inputs(prep, records, length: int | None = None) -> np.ndarray:
    """``[N, T]`` int32 ids or ``[N, T, D]`` raw frames (NaN padding) of ``records``: the head's
    :meth:`~seqkit.heads.base.Head.parity_inputs`, whichever head it is."""
    return prep.head.parity_inputs(records, length)[0]


def step_samples(prep, records, saved_model_dir: str, input_name: str) -> list[dict]:
    """Samples for an explicit-state ``step`` signature (see the module docstring)."""
    import tensorflow as tf

    loaded = tf.saved_model.load(saved_model_dir)
    step = loaded.signatures["step"]
    x, valid = step_positions(prep, records)
    n = len(x)
    state = {k: v for k, v in loaded.signatures["initial_state"](batch_size=tf.constant(n)).items()}
    pooled = []
    for t in range(x.shape[1]):
        feed = {input_name: tf.constant(x[:, t]), **state}
        if valid[:, t].any():
            pooled.append({k: np.asarray(v)[valid[:, t]] for k, v in feed.items()})
        res = step(**feed)
        state = {k: v for k, v in res.items() if k != "logits"}
    if not pooled:
        return []
    flat = {k: np.concatenate([p[k] for p in pooled]) for k in pooled[0]}
    total = len(flat[input_name])
    order = np.arange(-(-total // n) * n) % total  # whole blocks of n rows, wrapping around
    return [{k: np.ascontiguousarray(v[order[i:i + n]]) for k, v in flat.items()}
            for i in range(0, len(order), n)]


def step_positions(prep, records) -> tuple[np.ndarray, np.ndarray]:
    """``(x, valid [N, T] bool)`` of ``records`` as the step calibration streams them (padding 0,
    :func:`valid_positions`); also what :mod:`seqkit.export.cell_scaling` measures the cell state on."""
    return valid_positions(_inputs(prep, records))


def valid_positions(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(x with NaN frames as 0, valid [N, T] bool)``: the positions inside a record (a token id
    other than 0 -- the word id of ``[N, T, 1 + W]`` inputs -- or a frame without NaN)."""
    if x.dtype.kind == "f":
        return np.nan_to_num(x, nan=0.0), ~np.isnan(x).any(axis=-1)
    return x, (x[..., 0] if x.ndim == 3 else x) != 0


def stateful_samples(prep, records, batch: int, input_name: str) -> list[tuple]:
    """``("reset", ...)`` / ``("step", ...)`` samples for a ``--state internal`` model."""
    x, valid = step_positions(prep, records)
    samples = []
    for i in range(0, len(x), batch):
        group = x[i:i + batch]
        steps = int(valid[i:i + batch].any(axis=0).nonzero()[0].max(initial=-1)) + 1
        if len(group) < batch:
            group = np.concatenate([group, np.zeros((batch - len(group), *x.shape[1:]), x.dtype)])
        samples.append(("reset", {"rows": np.ones(batch, np.int32)}))
        samples += [("step", {input_name: np.ascontiguousarray(group[:, t])}) for t in range(steps)]
    return samples


def full_sequence_samples(prep, records, batch: int, length: int, input_name: str,
                          lengths: bool = False) -> list[dict]:
    """Pinned ``[batch, length(, D)]`` blocks for a ``--full-sequence`` ``predict`` model; with
    ``lengths`` (frames of a full-integer export, :mod:`seqkit.export.frame_lengths`) the padding
    frames are 0 and each block also gives ``lengths [batch] int32``."""
    x = _inputs(prep, records, length)
    n = (~np.isnan(x).any(axis=-1)).sum(axis=1).astype(np.int32) if lengths else None
    if x.shape[1] < length:
        pad = np.zeros if x.dtype.kind == "i" else (lambda s, d: np.full(s, np.nan, d))
        x = np.concatenate([x, pad((len(x), length - x.shape[1], *x.shape[2:]), x.dtype)], axis=1)
    if lengths:
        x = np.nan_to_num(x, nan=0.0)
    out = []
    for i in range(0, len(x), batch):
        block, nb = x[i:i + batch], None if n is None else n[i:i + batch]
        if len(block) < batch:
            block = np.concatenate([block, x[: batch - len(block)]])
            nb = None if n is None else np.concatenate([nb, n[: batch - len(nb)]])
        out.append({input_name: np.ascontiguousarray(block)} if n is None
                   else {input_name: np.ascontiguousarray(block), LENGTHS: nb})
    return out


def seq2seq_samples(prep, records, saved_model_dir: str, source_length: int) -> list[tuple]:
    """``("encode", ...)`` and teacher-forced ``("decode_step", ...)`` samples (pinned SavedModel)."""
    import tensorflow as tf

    head = prep.head
    loaded = tf.saved_model.load(saved_model_dir)
    enc, dec = loaded.signatures["encode"], loaded.signatures["decode_step"]
    pairs = [(s, head.target_vocab.encode(r.target))
             for s, r in zip(head.encode_sources([r.text for r in records])[0], records)
             if 0 < len(s) <= source_length]
    samples, outs = [], []
    for s, _ in pairs:
        src = np.zeros((1, source_length), np.int32)
        src[0, : len(s)] = s
        samples.append(("encode", {"source": src}))
        outs.append({k: np.asarray(v) for k, v in enc(source=tf.constant(src)).items()})
    if not pairs:
        return samples
    T = max(len(t) for _, t in pairs) + 1
    dec_in = np.zeros((len(pairs), T), np.int32)
    for i, (_, t) in enumerate(pairs):
        dec_in[i, : len(t) + 1] = [START_ID] + list(t)
    fixed = {k: np.concatenate([o[k] for o in outs]) for k in ("memory", "memory_mask", "keys")}
    names = [k for k in outs[0] if k not in fixed]
    state = {k: np.concatenate([o[k] for o in outs]) for k in names}
    for t in range(T):
        feed = {"token": dec_in[:, t], **fixed, **state}
        samples.append(("decode_step", feed))
        res = dec(**{k: tf.constant(v) for k, v in feed.items()})
        state = {k: np.asarray(res[k]) for k in names}
    return samples
