"""Running a full-sequence TFLite export (pinned ``[B, T]``) on inputs of any count and length.

A full-sequence export (``seqkit export --full-sequence``; the only TFLite
artefact of a bidirectional encoder) has one signature, ``predict``, whose
input is pinned to ``[B, T]`` token ids (0 = padding) or ``[B, T, D]`` raw
frames (NaN = padding; the normaliser is inside the model; a full-integer frame export
takes ``lengths [B] int32`` instead, see :mod:`seqkit.export.frame_lengths`). This runner pads
the rows to ``T`` and the row count to a multiple of ``B`` (with all-padding
rows), runs each block, and returns the logits of the real rows (a CRF tagger's export
also answers its Viterbi paths, decoded inside the model: :meth:`FullSequenceModel.predict_tags`).
"""

from __future__ import annotations

import numpy as np

from seqkit.errors import SeqkitError
from seqkit.export.metadata_schema import check_model
from seqkit.export.tflite import interpreter
from seqkit.runtime.quantization import codecs
from seqkit.runtime.streaming import load_export


class FullSequenceModel:
    """The ``predict`` signature of a pinned-shape TFLite export.

    Args:
        export_dir: a directory written by ``seqkit export --full-sequence``, or its
            ``model.tflite`` alone (the metadata is embedded in it).
        model_bytes, metadata: use these instead of the files (the exporter checks a model
            before writing it).

    Raises:
        SeqkitError: missing files, or an export that is a step model.
    """

    def __init__(self, export_dir: str | None = None, *, model_bytes: bytes | None = None,
                 metadata: dict | None = None):
        model, metadata = load_export(export_dir, model_bytes, metadata)
        fs = metadata.get("full_sequence")
        if not fs:
            raise SeqkitError(f"{export_dir}: this export is a step model (signature 'step'); use "
                              f"seqkit.runtime.StreamingModel, or export with --full-sequence.")
        self.metadata = metadata
        self.batch, self.length = int(fs["batch"]), int(fs["length"])
        self.input_name = fs["input"]["name"]
        self.frames = fs["input"]["dtype"] == "float32"
        # full-integer frame exports: padding marked by a lengths input, not NaN
        self.lengths_name = (fs.get("lengths") or {}).get("name")
        self.interpreter = interpreter(model)

        check_model(metadata, self.interpreter, str(export_dir or "this export"))  # untrusted: checked
        self.runner = self.interpreter.get_signature_runner("predict")

        self._codec_in = codecs(self.runner.get_input_details())  # int I/O: scale / zero point
        self._codec_out = codecs(self.runner.get_output_details())

    def predict(self, rows: list) -> list[np.ndarray]:
        """Logits per row: ``[C]`` (acceptor) or ``[T_i, C]`` (tagger).

        Args:
            rows: ``[T_i]`` token ids, ``[T_i, 1 + W]`` word and character ids
                (``model.char_embedding``) or ``[T_i, D]`` raw frames, each ``T_i <= T``.

        Raises:
            SeqkitError: a row longer than the pinned length.
        """
        return [o["logits"] for o in self.outputs(rows)]

    def predict_tags(self, rows: list) -> list[np.ndarray]:
        """A CRF tagger's Viterbi paths, decoded inside the model: ``[T_i]`` int32 tag ids per row.

        Raises:
            SeqkitError: the export has no ``tags`` output (not a CRF tagger), or a row longer
                than the pinned length.
        """
        if "tags" not in self.runner.get_output_details():
            raise SeqkitError("this export has no 'tags' output: it is not a CRF tagger "
                              "(head.crf: true); use predict() and take the arg-max.")
        return [o["tags"] for o in self.outputs(rows)]

    def outputs(self, rows: list) -> list[dict]:
        """Every output per row, trimmed to its length: ``{"logits": [T_i, C] or [C]}`` and, for a
        CRF tagger, ``"tags": [T_i]`` int32 (one run of the model for both).

        Raises:
            SeqkitError: a row longer than the pinned length.
        """
        long = [len(r) for r in rows if len(r) > self.length]
        if long:
            raise SeqkitError(f"a sequence of {long[0]} steps is longer than this export's pinned "
                              f"length {self.length}; cut it, or export again with a larger --length.")
        out = []
        for i in range(0, len(rows), self.batch):
            block = rows[i:i + self.batch]
            if self.frames:
                width = int(self.metadata["full_sequence"]["input"]["shape"][-1])
                x = np.full((self.batch, self.length, width), 0.0 if self.lengths_name else np.nan,
                            np.float32)
            else:
                shape = self.metadata["full_sequence"]["input"]["shape"]  # [B, T(, 1 + W)]
                x = np.zeros((self.batch, self.length, *shape[2:]), np.int32)
            for j, r in enumerate(block):
                x[j, : len(r)] = r
            feed = {self.input_name: self._codec_in[self.input_name].encode(x)}
            if self.lengths_name:
                feed[self.lengths_name] = np.asarray([len(r) for r in block] + [0] * (self.batch - len(block)),
                                                     np.int32)
            res = self.runner(**feed)
            res = {k: self._codec_out[k].decode(v) for k, v in res.items()}
            for j, r in enumerate(block):
                out.append({k: v[j] if v.ndim == 2 and k == "logits" else v[j, : len(r)]
                            for k, v in res.items()})
        return out
