"""Parity of an encoder-decoder export with the Keras model, measured before writing.

Two checks on held-out (source, target) pairs:

* teacher-forced logits: the Keras model on ``(source, [<s>] + target)``
  against ``encode`` once plus ``decode_step`` fed the same decoder inputs one at
  a time (max |logit diff| and arg-max agreement over the real target
  positions, :func:`seqkit.export.parity.compare`);
* decoded outputs: greedy and beam-search token ids of the export against
  :func:`seqkit.heads.seq2seq.transduce` on the same sources (the fraction of
  identical outputs; reported, not a gate: a near tie may flip under rounding).

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import numpy as np

from seqkit.data.vocab import START_ID
from seqkit.export.parity import compare
from seqkit.heads.seq2seq.decoding import transduce
from seqkit.metrics.edit_distance import g2p_error_rates
from seqkit.progress import progress


class Seq2SeqParityCase:
    """Held-out pairs, the Keras reference on them, and how exported answers compare.

    Args:
        prep, model: the loaded seq2seq run.
        examples: held-out records (``text``, ``target``); sources longer than
            ``source_length`` are left out.
        source_length: the export's pinned encoder length ``S_max``.

    Attributes:
        sources: list of source id lists; ``src`` the same as ``[N, S]`` int32 (0 padding).
        dec_in: ``[N, T]`` int32 teacher-forced decoder inputs (``<s>`` + target, 0 padding).
        reference: Keras logits ``[N, T, V]``; ``valid``: ``[N, T]`` bool, the real positions.
    """

    def __init__(self, prep, model, examples: list, source_length: int):
        head = prep.head
        pairs = [(s, head.target_vocab.encode(r.target))
                 for s, r in zip(head.encode_sources([r.text for r in examples])[0], examples)]
        pairs = [(s, t) for s, t in pairs if len(s) <= source_length]
        self.sources = [s for s, _ in pairs]
        self.targets = [list(t) for _, t in pairs]
        self.src = _pad(self.sources)
        self.dec_in = _pad([[START_ID] + t for _, t in pairs])
        self.valid = self.dec_in != 0
        self.reference = np.asarray(model([self.src, self.dec_in], training=False))

    def check_teacher_forced(self, runner) -> dict:
        """Stream the decoder inputs through ``runner`` (``start(ids)``, ``step(tokens [1]) ->
        logits [1, V]``) one source at a time and compare with the Keras logits."""
        got = np.zeros_like(self.reference)
        with progress(len(self.sources), "parity check (teacher forced)", "sources") as bar:
            for i, src in enumerate(self.sources):
                runner.start(src)
                for t in range(int(self.valid[i].sum())):
                    got[i, t] = runner.step(self.dec_in[i, t:t + 1])[0]
                bar.update()
        return compare(self.reference, got, self.valid)

    def wer(self, outputs: list) -> float:
        """Word error rate of greedy ``outputs`` (id lists, one per source) against the targets:
        the fraction whose output differs from the target (:func:`seqkit.metrics.edit_distance.g2p_error_rates`,
        one reference each)."""
        if not self.targets:
            return float("nan")
        return g2p_error_rates([[t] for t in self.targets], [list(o) for o in outputs])["wer"]

    def references(self, model, *, beam_width: int, length_penalty: float, max_length: int) -> dict:
        """``{"greedy": [ids], "beam": [ids]}`` per source from :func:`transduce` (best hypothesis)."""
        n = max(len(self.sources), 1)
        greedy = transduce(model, self.sources, beam_width=1, max_length=max_length, batch_size=n)
        beam = transduce(model, self.sources, beam_width=beam_width, length_penalty=length_penalty,
                         max_length=max_length, batch_size=n)
        return {"greedy": [h[0][0] for h in greedy], "beam": [h[0][0] for h in beam]}


def identical(reference: list, got: list) -> dict:
    """``{"identical": fraction of equal id lists, "sequences": N}``."""
    same = [list(a) == list(b) for a, b in zip(reference, got)]
    return {"identical": float(np.mean(same)) if same else 1.0, "sequences": len(same)}


class SavedModelSeq2Seq:
    """``start`` / ``step`` over a loaded seq2seq SavedModel's ``encode`` and ``decode_step``
    (the same interface as :class:`seqkit.heads.seq2seq.runtime.Seq2SeqModel`, one row)."""

    def __init__(self, loaded, state_names: list[str]):
        self.encode_fn = loaded.signatures["encode"]
        self.step_fn = loaded.signatures["decode_step"]
        self.names = list(state_names)

    def start(self, source_ids) -> None:
        import tensorflow as tf

        enc = self.encode_fn(source=tf.constant([list(source_ids)], tf.int32))
        self.fixed = {k: enc[k] for k in ("memory", "memory_mask", "keys")}
        self.states = {n: enc[n] for n in self.names}

    def step(self, tokens) -> np.ndarray:
        import tensorflow as tf

        out = self.step_fn(token=tf.constant(np.asarray(tokens, np.int32)), **self.fixed, **self.states)
        self.states = {n: out[n] for n in self.names}
        return out["logits"].numpy()


def saved_model_decodes(loaded, src: np.ndarray, max_length: int) -> dict:
    """``{"greedy": [ids], "beam": [ids]}`` from the SavedModel's ``generate`` and ``beam_search``
    on the padded sources ``src [N, S]`` (best hypothesis, without ``</s>``)."""
    import tensorflow as tf

    x, m = tf.constant(src, tf.int32), tf.constant(max_length, tf.int32)
    g = loaded.signatures["generate"](source=x, max_length=m)
    b = loaded.signatures["beam_search"](source=x, max_length=m)
    gt, gl = g["tokens"].numpy(), g["lengths"].numpy()
    bt, bl = b["tokens"].numpy(), b["lengths"].numpy()
    return {"greedy": [gt[i, : gl[i]].tolist() for i in range(len(src))],
            "beam": [bt[i, 0, : bl[i, 0]].tolist() for i in range(len(src))]}


def _pad(rows: list) -> np.ndarray:
    x = np.zeros((len(rows), max([len(r) for r in rows] + [1])), np.int32)
    for i, r in enumerate(rows):
        x[i, : len(r)] = r
    return x
