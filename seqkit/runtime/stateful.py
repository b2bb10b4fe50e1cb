"""Streaming a ``--state internal`` export: the model keeps its recurrent state itself.

The loop a device runs is shorter than the explicit-state one
(:mod:`seqkit.runtime.streaming`): call ``reset`` before a sequence, then
``step`` with the input alone and read the logits; no state tensor crosses the
interpreter boundary. The batch ``B`` is fixed at export (``metadata["batch"]``);
every ``step`` takes ``[B]`` token ids or ``[B, D]`` raw frames.

:class:`~seqkit.runtime.streaming.StreamingModel` returns a
:class:`StatefulStreamingModel` for such an export (``metadata["state"] ==
"internal"``), so ``seqkit stream``, :func:`seqkit.heads.sequence.stream.stream_answers`
and :meth:`~seqkit.runtime.streaming.StreamingModel.generate` drive it unchanged.

Each step goes straight to the interpreter, as the explicit runtime does: the
``step`` signature's subgraph and tensor indices are looked up once, and a step
is one ``SetTensor`` (the input), ``Invoke`` of that subgraph and one
``GetTensor`` (the logits) -- through the binding's interpreter wrapper with the
subgraph index, as ``SignatureRunner.__call__`` does, without its per-call resize
and reallocation (the step is not the primary subgraph: signatures are ordered by
name, ``reset`` first). The state lives in the interpreter: two instances (two
interpreters) of one file keep separate states.
"""

from __future__ import annotations

import numpy as np

from seqkit.errors import SeqkitError
from seqkit.runtime.quantization import TensorCodec
from seqkit.runtime.streaming import StreamingModel


class StatefulStreamingModel(StreamingModel):
    """A ``--state internal`` step model (see the module docstring); same constructor as
    :class:`~seqkit.runtime.streaming.StreamingModel`.

    Attributes:
        batch: the rows every step takes (fixed at export).
        states: always None (the state is inside the model).

    Raises:
        SeqkitError: metadata without ``batch``, or a model without ``step`` / ``reset`` signatures.
    """

    def _bind_step(self) -> None:
        it = self.interpreter
        sigs = it.get_signature_list()
        if "step" not in sigs or "reset" not in sigs:
            raise SeqkitError(f"this export's metadata says state internal but its model has the "
                              f"signatures {sorted(sigs)}, not step + reset; export the run again.")
        try:
            self.batch = int(self.metadata["batch"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SeqkitError("metadata.json of a --state internal export lacks 'batch'; export the "
                              "run again.") from exc

        step, reset = it.get_signature_runner("step"), it.get_signature_runner("reset")
        ins, outs = step.get_input_details(), step.get_output_details()
        self._codec_x = TensorCodec(ins[self.input_name])  # int I/O: scale / zero point
        self._codec_logits = TensorCodec(outs["logits"])
        self._in_rows = int(reset.get_input_details()["rows"]["index"])
        del step, reset
        w = self._wrapper = it._interpreter
        self._sg_step = w.GetSubgraphIndexFromSignature("step")
        self._sg_reset = w.GetSubgraphIndexFromSignature("reset")
        self._in_x = int(ins[self.input_name]["index"])
        self._out_logits = int(outs["logits"]["index"])
        self._x_shape = tuple(int(v) for v in ins[self.input_name]["shape"])
        w.AllocateTensors(self._sg_step)
        w.AllocateTensors(self._sg_reset)
        self.states = None

    def reset(self, batch_size: int | None = None) -> None:
        """Zero the state of every row (the ``reset`` signature, ``rows`` all ones): the next
        :meth:`step` starts new sequences.

        Raises:
            SeqkitError: ``batch_size`` other than the export's batch.
        """
        if batch_size is not None and int(batch_size) != self.batch:
            raise SeqkitError(f"this export keeps its state inside for a batch of {self.batch} "
                              f"row(s), fixed at export; {batch_size} asked. Export the run again with "
                              f"--state internal --batch {batch_size}, or without --state internal "
                              f"(explicit states take any batch).")
        self.reset_rows(np.ones(self.batch, np.int32))

    def reset_rows(self, rows) -> None:
        """Zero the state of the rows where ``rows [B]`` is not 0; the other rows carry on (a
        batch of streams where one sequence ends and the next begins while the others go on).

        Raises:
            SeqkitError: ``rows`` not of shape ``[B]``.
        """
        rows = np.asarray(rows, np.int32)
        if rows.shape != (self.batch,):
            raise SeqkitError(f"reset_rows: one flag per row of the batch ({self.batch}) expected; "
                              f"got shape {list(rows.shape)}.")
        self._wrapper.SetTensor(self._in_rows, rows, self._sg_reset)
        self._wrapper.Invoke(self._sg_reset)

    def step(self, x) -> np.ndarray:
        """Feed one input per row (``[B]`` ids or ``[B, D]`` raw frames); return logits ``[B, C]``.

        Raises:
            SeqkitError: an input of another shape than the export's ``[B(, D)]``.
        """
        x = self._as_input(x)
        if x.shape != self._x_shape:
            raise SeqkitError(f"this export keeps its state inside for input shape {list(self._x_shape)} "
                              f"(batch {self.batch}, fixed at export); got {list(x.shape)}.")
        w, sg = self._wrapper, self._sg_step
        w.SetTensor(self._in_x, self._codec_x.encode(x), sg)
        try:
            w.Invoke(sg)
        except RuntimeError as exc:  # LiteRT's error (e.g. an id outside the vocabulary), named
            raise self._refused(exc) from exc
        return self._codec_logits.decode(w.GetTensor(self._out_logits, sg))


StreamingModel.variants["internal"] = StatefulStreamingModel
