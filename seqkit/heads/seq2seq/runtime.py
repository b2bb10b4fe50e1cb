"""Running an encoder-decoder TFLite export: encode a source once, then decode one symbol per call.

The loop a device runs (``seqkit export`` of a ``seq2seq`` run writes
``model.tflite`` with two signatures, see :mod:`seqkit.heads.seq2seq.archive`):

1. ``encode(source [1, S_max] int32)``: the source ids padded with 0 to the
   pinned length ``S_max`` (``metadata.json`` ``encoder.pinned_length``) ->
   ``memory``, ``memory_mask``, ``keys`` and the decoder start states.
2. ``decode_step(token [K] int32, memory, memory_mask, keys, states)`` with
   ``K`` rows (1 for greedy decoding, the beam width for beam search; the
   encoder outputs repeated per row), starting from ``<s>`` and carrying the
   states, until ``</s>`` or ``max_length`` symbols.

:meth:`Seq2SeqModel.beam_search` is the algorithm of
:func:`seqkit.inference.decoding.beam_search` (same candidate selection, tie order,
finished-hypothesis rule and GNMT length penalty ``lp(Y) = ((5 + |Y|) / 6)^a``,
Wu et al. 2016, eq. 14) in numpy for one source, so its outputs equal
:func:`seqkit.heads.seq2seq.transduce` up to float rounding, and width 1 equals
:meth:`Seq2SeqModel.greedy`.

The step is called through the interpreter's tensors directly (indices
looked up once, inputs resized only when ``K`` changes, the encoder outputs set
once per source) rather than through the signature runner, which resizes and
re-allocates every input on every call.
"""

from __future__ import annotations

import numpy as np

from seqkit import log
from seqkit.data.lines import split_lines
from seqkit.data.subword import TextTokenizer
from seqkit.data.vocab import UNK_ID, Vocabulary
from seqkit.errors import SeqkitError
from seqkit.export.embedded_metadata import tokenization
from seqkit.export.metadata_schema import check_model
from seqkit.export.tflite import interpreter
from seqkit.inference.decoding import check_beam_args
from seqkit.runtime.quantization import codecs
from seqkit.runtime.streaming import load_export

MODEL = "model.tflite"
MEMORY_INPUTS = ("memory", "memory_mask", "keys")


class _Signature:
    """Fast calls of one signature of a LiteRT interpreter (tensor indices looked up once)."""

    def __init__(self, it, key: str):
        runner = it.get_signature_runner(key)
        self.runner = runner
        self.w = runner._interpreter_wrapper  # the same calls SignatureRunner.__call__ makes
        self.sub = runner._subgraph_index
        self.inputs = dict(runner._inputs)
        self.outputs = dict(runner._outputs)
        self.shapes: dict = {}

        self.codec_in = codecs(runner.get_input_details())  # int I/O: scale / zero point
        self.codec_out = codecs(runner.get_output_details())

    def resize(self, shapes: dict) -> None:
        """Resize inputs (``name -> shape``) and re-allocate, when a shape changed."""
        if all(self.shapes.get(n) == tuple(s) for n, s in shapes.items()):
            return
        for n, s in shapes.items():
            self.w.ResizeInputTensor(self.inputs[n], np.asarray(s, np.int32), False, self.sub)
        self.w.AllocateTensors(self.sub)
        self.shapes.update({n: tuple(s) for n, s in shapes.items()})

    def set(self, name: str, value: np.ndarray) -> None:
        """Set a float (or id) input; an integer-I/O model's is quantized with its scale."""
        self.w.SetTensor(self.inputs[name], self.codec_in[name].encode(value), self.sub)

    def invoke(self) -> None:
        self.w.Invoke(self.sub)

    def get(self, name: str) -> np.ndarray:
        """An output as float32 (dequantized) or ids."""
        return self.codec_out[name].decode(self.w.GetTensor(self.outputs[name], self.sub))


class Seq2SeqModel:
    """An encoder-decoder TFLite export with greedy and beam-search decoding in numpy.

    Args:
        export_dir: a directory written by ``seqkit export`` for a seq2seq run, or its
            ``model.tflite`` alone (the metadata is embedded in it).
        model_bytes, metadata: use these instead of the files (the exporter checks a
            model before writing it).

    Raises:
        SeqkitError: missing or unreadable files, or an export of another head.
    """

    def __init__(self, export_dir: str | None = None, *, model_bytes: bytes | None = None,
                 metadata: dict | None = None):
        model, metadata = load_export(export_dir, model_bytes, metadata)
        if metadata.get("artefact") != "encoder_decoder":
            raise SeqkitError(f"{export_dir or 'this export'}: a '{metadata.get('head')}' export, not "
                              f"an encoder-decoder; run it with seqkit.runtime.StreamingModel.")
        self.metadata = metadata
        self.export_dir = export_dir
        it = interpreter(model)
        self.interpreter = it

        check_model(metadata, it, str(export_dir or "this export"))  # untrusted: checked
        self.encoder = it.get_signature_runner("encode")

        self._enc_out = codecs(self.encoder.get_output_details())
        self.stepper = _Signature(it, "decode_step")
        enc = metadata["encoder"]
        self.length = int(enc["pinned_length"])
        self.widths = {"memory": int(enc["memory_width"]), "keys": int(enc["keys_width"])}
        self.state_layout = [(s["name"], int(s["size"])) for s in metadata["state_layout"]]
        ids = metadata["special_ids"]
        self.start_id, self.end_id = int(ids["start"]), int(ids["end"])
        self.rows = 0
        self.states: dict = {}

    # ---------------------------------------------------------------- the two signatures
    def encode(self, source_ids) -> dict:
        """Run ``encode`` on one source: ids ``[S]`` (``S <= S_max``; padded here) -> its outputs
        (``memory [1, S_max, Hm]``, ``memory_mask [1, S_max]``, ``keys``, start states ``[1, H]``).

        Raises:
            SeqkitError: a source longer than the pinned length, or an id 0 (padding) inside it.
        """
        ids = np.asarray(source_ids, np.int32).reshape(-1)
        if len(ids) > self.length:
            raise SeqkitError(f"a source of {len(ids)} symbols is longer than this export's pinned "
                              f"encoder length {self.length} (the run's data.max_length); shorten it, "
                              f"or export again with a larger --length.")
        if (ids == 0).any():
            raise SeqkitError("a source id is 0, the padding id; pass the real symbols only "
                              "(the runtime pads the source itself).")
        x = np.zeros((1, self.length), np.int32)
        x[0, : len(ids)] = ids
        return {k: self._enc_out[k].decode(v) for k, v in self.encoder(source=x).items()}

    def start(self, source_ids, rows: int = 1) -> None:
        """Encode ``source_ids`` and make ``rows`` identical decoder rows (beams) from it."""
        enc = self.encode(source_ids)
        S = self.length
        shapes = {"token": (rows,), "memory": (rows, S, self.widths["memory"]),
                  "memory_mask": (rows, S), "keys": (rows, S, self.widths["keys"]),
                  **{n: (rows, h) for n, h in self.state_layout}}
        self.stepper.resize({n: s for n, s in shapes.items() if n in self.stepper.inputs})
        for name in MEMORY_INPUTS:  # set once per source: inputs are never overwritten by invoke
            if name in self.stepper.inputs:
                self.stepper.set(name, np.ascontiguousarray(np.repeat(enc[name], rows, axis=0)))
        self.states = {n: np.repeat(enc[n], rows, axis=0) for n, _ in self.state_layout}
        self.rows = rows

    def step(self, tokens) -> np.ndarray:
        """One decoder step on every row: ``tokens [K]`` int -> ``logits [K, V]`` float32
        (the states advance; :meth:`start` first)."""
        s = self.stepper
        s.set("token", np.asarray(tokens, np.int32).reshape(self.rows))
        for n, _ in self.state_layout:
            s.set(n, self.states[n])
        s.invoke()
        self.states = {n: s.get(n) for n, _ in self.state_layout}
        return s.get("logits")

    def reorder(self, rows) -> None:
        """Keep the states of ``rows`` (``[K]`` int, parents of the surviving beams)."""
        self.states = {n: np.ascontiguousarray(v[rows]) for n, v in self.states.items()}

    # ---------------------------------------------------------------- decoding
    def _max_length(self, max_length):
        return int(max_length or self.metadata["decoding"]["max_length"])

    def greedy(self, source_ids, max_length: int | None = None) -> list[int]:
        """Arg-max decoding: the output ids, without ``</s>`` (at most ``max_length``, default
        ``metadata.json`` ``decoding.max_length``)."""
        self.start(source_ids, 1)
        last, out = self.start_id, []
        for _ in range(self._max_length(max_length)):
            nxt = int(np.argmax(self.step([last])[0]))
            if nxt == self.end_id:
                break
            out.append(nxt)
            last = nxt
        return out

    def beam_search(self, source_ids, beam_width: int | None = None, n_best: int = 1,
                    length_penalty: float | None = None, max_length: int | None = None) -> list:
        """Beam search over one source (see the module docstring; defaults from ``metadata.json``).

        Args:
            source_ids: ``[S]`` source ids, ``S <= S_max``.
            beam_width: ``K >= 1`` (1 = greedy).
            n_best: hypotheses returned, ``<= K``.
            length_penalty: GNMT ``alpha >= 0``.
            max_length: most output symbols.

        Returns:
            ``n_best`` ``(ids without </s>, score)`` pairs, best first; score ``log P(Y) / lp(|Y|)``
            (``-inf`` for a hypothesis that could not be formed).

        Raises:
            SeqkitError: bad beam arguments (:func:`seqkit.inference.decoding.check_beam_args`), or a bad source.
        """
        dec = self.metadata["decoding"]
        K = int(dec["beam_width"] if beam_width is None else beam_width)
        alpha = np.float32(dec["length_penalty"] if length_penalty is None else length_penalty)
        L = self._max_length(max_length)
        check_beam_args(K, n_best, float(alpha), 0, L)
        lp = lambda n: np.power((np.float32(5) + np.asarray(n, np.float32)) / np.float32(6), alpha)  # noqa: E731
        neg_inf = np.float32(-np.inf)
        self.start(source_ids, K)
        alive_logp = np.full(K, neg_inf, np.float32)
        alive_logp[0] = 0.0  # all beams start as the same empty hypothesis: beam 0 alone expands
        alive_seq = np.zeros((K, L), np.int32)
        fin_seq, fin_len = np.zeros((K, L), np.int32), np.zeros(K, np.int32)
        fin_score = np.full(K, neg_inf, np.float32)
        first_k = np.arange(2 * K) < K
        max_lp = lp(L)
        last = np.full(K, self.start_id, np.int32)
        for t in range(L):
            logits = self.step(last).astype(np.float32)
            V = logits.shape[-1]
            logp = _log_softmax(logits)
            cand = (alive_logp[:, None] + logp).reshape(-1)
            top_idx = _top_k(cand, 2 * K)
            top_logp = cand[top_idx]
            parent, token = top_idx // V, (top_idx % V).astype(np.int32)
            seqs = alive_seq[parent].copy()
            seqs[:, t] = token
            is_stop = token == self.end_id
            length = np.where(is_stop, t, t + 1).astype(np.int32)
            ends = (is_stop | (t == L - 1)) & first_k & (top_logp > neg_inf)
            score = np.where(ends, top_logp / lp(length), neg_inf).astype(np.float32)
            all_score = np.concatenate([fin_score, score])
            pick = _top_k(all_score, K)
            fin_score = all_score[pick]
            fin_seq = np.concatenate([fin_seq, seqs])[pick]
            fin_len = np.concatenate([fin_len, length])[pick]
            alive_all = np.where(is_stop, neg_inf, top_logp).astype(np.float32)
            keep = _top_k(alive_all, K)
            alive_logp, alive_seq = alive_all[keep], seqs[keep]
            self.reorder(parent[keep])
            last = token[keep]
            if fin_score[n_best - 1] >= alive_logp[0] / max_lp or alive_logp[0] == neg_inf:
                break
        return [(fin_seq[k, : fin_len[k]].tolist(), float(fin_score[k])) for k in range(n_best)]

    # ---------------------------------------------------------------- text
    def source_ids(self, text: str) -> tuple[list[int], int]:
        """A source string as ids, split as in training: ``(ids, unknown symbol count)``."""
        if not hasattr(self, "_vocab"):
            self._vocab = Vocabulary(self.metadata["vocab"])
        ids = self._vocab.encode(self.tokenizer("source").split(text))
        return ids, sum(i == UNK_ID for i in ids)

    def tokenizer(self, side: str = "source"):
        """The export's :class:`~seqkit.data.subword.TextTokenizer` of ``side`` (``source`` or
        ``target``; a sentencepiece one reads its model file from the export folder).

        Raises:
            SeqkitError: a sentencepiece side of a runtime made from bytes, without its folder.
        """
        cache = self.__dict__.setdefault("_tokenizers", {})
        if side not in cache:
            key = "subword_model" if side == "source" else "target_subword_model"
            if self.metadata.get(key) and self.export_dir is None:
                raise SeqkitError(f"this seq2seq runtime was made from model bytes; its {side} side is "
                                  f"a sentencepiece model ({self.metadata[key]}): load it from the "
                                  f"export folder, Seq2SeqModel(EXPORT_DIR).")
            if side == "source":
                cache[side] = TextTokenizer.load(self.export_dir or ".", tokenization(self.metadata),
                                                 bool(self.metadata["lowercase"]),
                                                 self.metadata.get("subword_model") or "subword.model",
                                                 vocab=self.metadata.get("vocab"))
            else:
                cache[side] = TextTokenizer.from_export(self.export_dir or ".", self.metadata, "target")
        return cache[side]

    def symbols(self, ids) -> list[str]:
        """Target ids -> target symbols."""
        names = self.metadata["target_vocab"]
        return [names[i] for i in ids]

    def text(self, ids) -> str:
        """Target ids -> the output as text: sentencepiece pieces decoded, else the symbols
        joined by spaces (as ``seqkit stream`` prints them)."""
        syms = self.symbols(ids)
        if self.metadata.get("target_subword_model"):
            return self.tokenizer("target").join(syms)
        return " ".join(syms)


def _log_softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise ``z - max - log(sum(exp(z - max)))`` in float32 (as ``tf.nn.log_softmax``)."""
    shifted = z - z.max(axis=-1, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))).astype(np.float32)


def _top_k(x: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest values, largest first, equal values by lower index first
    (the order of ``tf.math.top_k``)."""
    return np.argsort(-x, kind="stable")[:k]


def read_sources(text: str, name: str, rt: Seq2SeqModel) -> list[tuple[str, list[int]]]:
    """``(where, source ids)`` per non-empty line of ``text``, split as in training.

    Empty lines are skipped and counted, unknown symbols read as ``[UNK]`` and counted
    (warnings, as ``seqkit predict`` does).

    Raises:
        SeqkitError: no non-empty line, or a line longer than the export's pinned encoder length.
    """
    out, empty, unk, total = [], 0, 0, 0
    for n, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            empty += 1
            continue
        ids, u = rt.source_ids(line.strip())
        if len(ids) > rt.length:
            raise SeqkitError(f"{name}:{n}: the input has {len(ids)} symbols, more than this export's "
                              f"encoder length ({rt.length}, the run's data.max_length); shorten or "
                              f"split the line.")
        out.append((f"{name}:{n}", ids))
        unk, total = unk + u, total + len(ids)
    if empty:
        log.warn(f"{name}: {empty} empty line(s) skipped.")
    if not out:
        raise SeqkitError(f"{name}: no input (only empty lines); give one source per line.")
    if unk:
        log.warn(f"{unk} of {total} input symbols were never seen in training and were read as "
                 f"[UNK]; their outputs are guesses.")
    return out
