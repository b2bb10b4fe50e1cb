"""The reference streaming loop over a TFLite step model, on the ``ai-edge-litert`` interpreter.

This is the loop a mobile developer ports: keep one array per recurrent state
(``[B, H]`` float32, names and sizes from ``metadata.json``), call the
``step`` signature with the current input and the states, keep the returned
states, and read the logits. ``reset()`` starts an independent sequence.

Each step goes straight to the interpreter: the tensor indices of the ``step``
signature's inputs and outputs are looked up once, and a step is
``set_tensor`` (input and states), ``invoke``, ``get_tensor`` (logits and
states); a full-integer export with integer I/O (``--io-type int``) has its float
tensors stored as int8 / int16, converted at this boundary with each tensor's scale
and zero point (:mod:`seqkit.runtime.quantization`; integer states whose input and output
share scale and zero point are carried as stored, not converted); tensors are resized and reallocated only when the input shape (the
batch) changes. The signature runner resizes every input and reallocates on
every call: 25-35 us a step on one 2-core machine, ~5 us on another, against
a float32 step of the reference LM of 80-230 us and an int8 one of ~25-35 us
(``python -m bench --suite stream`` measures both paths).
"""

from __future__ import annotations

import json
import os

import numpy as np

from seqkit.errors import SeqkitError

MODEL, METADATA = "model.tflite", "metadata.json"


def read_export_metadata(export_dir: str | None) -> dict:
    """The ``metadata.json`` of an export directory that also holds a ``model.tflite``.

    Raises:
        SeqkitError: no ``model.tflite`` there, or an unreadable ``metadata.json``.
    """
    if export_dir is None or not os.path.isfile(os.path.join(export_dir, MODEL)):
        if export_dir and os.path.isfile(os.path.join(export_dir, "recipe.yaml")):
            name = os.path.basename(os.path.realpath(export_dir))
            raise SeqkitError(f"{export_dir}: a run directory, not an export. Export it first: "
                              f"`seqkit export {export_dir} --out exports/{name}`, then use "
                              f"exports/{name}.")
        if export_dir and os.path.isdir(os.path.join(export_dir, "saved_model")):
            raise SeqkitError(f"{export_dir}: a SavedModel-only export (--format saved_model) has "
                              f"no {MODEL} to run here; export the run again with --format tflite "
                              f"or --format all.")
        raise SeqkitError(f"{export_dir}: no {MODEL} here. Export a run with `seqkit export "
                          f"RUN_DIR --format tflite --out EXPORT_DIR` and pass EXPORT_DIR.")
    try:
        with open(os.path.join(export_dir, METADATA), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise SeqkitError(f"{export_dir}: cannot read {METADATA} ({exc}); export again.") from exc


class StreamingModel:
    """A step model with its state carried between calls.

    Args:
        export_dir: a directory written by ``seqkit export --format tflite``
            (``model.tflite`` + ``metadata.json``).
        model_bytes: optional model bytes to use instead of ``model.tflite``
            (the exporter checks a model before writing it).
        metadata: optional metadata dict instead of ``metadata.json``.

    An export whose metadata says ``"state": "internal"`` (``seqkit export --state internal``)
    opens as a :class:`~seqkit.runtime.stateful.StatefulStreamingModel`: same ``step`` /
    ``reset`` / ``generate``, the state kept inside the model, the batch fixed at export.

    Raises:
        SeqkitError: missing or unreadable files, or a full-sequence or encoder-decoder export.
    """

    def __new__(cls, export_dir: str | None = None, *, model_bytes: bytes | None = None,
                metadata: dict | None = None):
        if cls is StreamingModel:
            meta = metadata if metadata is not None and model_bytes is not None \
                else read_export_metadata(export_dir)
            if isinstance(meta, dict) and meta.get("state") == "internal":
                from seqkit.runtime.stateful import StatefulStreamingModel

                cls = StatefulStreamingModel
        return super().__new__(cls)

    def __init__(self, export_dir: str | None = None, *, model_bytes: bytes | None = None,
                 metadata: dict | None = None):
        from seqkit.export.tflite import interpreter

        if metadata is None or model_bytes is None:
            metadata = read_export_metadata(export_dir)
        self.metadata = metadata
        if metadata.get("head") == "seq2seq":
            raise SeqkitError(f"{export_dir or 'this export'}: an encoder-decoder export (signatures "
                              f"'encode' and 'decode_step'), not a step model; run it with "
                              f"seqkit.runtime.Seq2SeqModel or `seqkit stream EXPORT --input FILE`.")
        if metadata.get("artefact") == "full_sequence":
            raise SeqkitError(f"{export_dir or 'this export'}: a full-sequence model (signature "
                              f"'predict', pinned shape), not a step model; run it with "
                              f"seqkit.runtime.full_sequence.FullSequenceModel, or export the run "
                              f"without --full-sequence (forward encoders only) to stream it.")
        try:
            self.interpreter = interpreter(model_bytes if model_bytes is not None
                                           else os.path.join(export_dir, MODEL))
        except ValueError as exc:
            raise SeqkitError(f"{export_dir}: {MODEL} is not a valid TFLite model ({exc}).") from exc
        try:
            self.input_name = metadata["input"]["name"]
            self.input_dtype = np.dtype(metadata["input"]["dtype"])
            self.states_layout = [(s["name"], int(s["size"])) for s in metadata["state_layout"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise SeqkitError(f"{export_dir or 'this export'}: {METADATA} lacks or garbles "
                              f"{exc} (input / state_layout); it was not written by this seqkit "
                              f"or was edited. Export the run again.") from exc
        self._bind_step()
        self.reset()

    def _bind_step(self) -> None:
        """Look up the ``step`` signature's tensor indices once (see the module docstring).

        The signature runner is used only to read the indices and then dropped: while one
        is alive the interpreter refuses ``invoke`` (it holds a reference to its buffers).
        The direct path needs the step to be the model's primary subgraph (what
        ``seqkit export`` writes: one signature); otherwise each step goes through a
        signature runner, with the same results.
        """
        it = self.interpreter
        from seqkit.runtime.quantization import codecs

        runner = it.get_signature_runner("step")
        ins, outs = runner.get_input_details(), runner.get_output_details()
        self._codec_in, self._codec_out = codecs(ins), codecs(outs)  # int I/O: scale / zero point
        # integer states whose input and output share dtype, scale and zero point (what the
        # converter writes) are carried as stored: no dequantize / quantize between steps
        self._raw_states = bool(self.states_layout) and all(
            self._codec_in[n].quantized and (self._codec_in[n].dtype, self._codec_in[n].scale,
                                             self._codec_in[n].zero_point)
            == (self._codec_out[n].dtype, self._codec_out[n].scale, self._codec_out[n].zero_point)
            for n, _ in self.states_layout)
        self._in_x = int(ins[self.input_name]["index"])
        self._in_states = [(name, int(ins[name]["index"])) for name, _ in self.states_layout]
        self._out_logits = int(outs["logits"]["index"])
        self._out_states = [(name, int(outs[name]["index"])) for name, _ in self.states_layout]
        primary = {int(d["index"]) for d in it.get_input_details()}
        if len(it.get_signature_list()) == 1 and primary == {int(d["index"]) for d in ins.values()}:
            self._runner = None
            del runner
            self._x_shape = tuple(int(v) for v in ins[self.input_name]["shape"])
            self._set, self._invoke, self._get = it.set_tensor, it.invoke, it.get_tensor
        else:  # pragma: no cover - seqkit exports have the one signature
            self._runner = runner

    def _resize(self, shape: tuple) -> None:
        """Resize the input to ``shape`` and the states to ``[shape[0], H]``; reallocate."""
        it = self.interpreter
        it.resize_tensor_input(self._in_x, list(shape))
        for (_, index), (_, size) in zip(self._in_states, self.states_layout):
            it.resize_tensor_input(index, [shape[0], size])
        it.allocate_tensors()
        self._x_shape = shape

    def reset(self, batch_size: int = 1) -> None:
        """Zero every state: the next :meth:`step` starts a new, independent sequence.

        ``states`` holds float32 arrays, or for an integer-I/O export (``--io-type int``) the
        states as stored (int8 / int16; :class:`seqkit.runtime.quantization.TensorCodec`
        ``decode`` gives their values)."""
        zeros = {name: np.zeros((batch_size, size), np.float32) for name, size in self.states_layout}
        if getattr(self, "_raw_states", False):
            zeros = {name: self._codec_in[name].encode(v) for name, v in zeros.items()}
        self.states = zeros

    def step(self, x) -> np.ndarray:
        """Feed one input per row (``[B]`` ids or ``[B, D]`` frames); return logits ``[B, C]``."""
        x = np.asarray(x, self.input_dtype)
        cin, cout = self._codec_in, self._codec_out
        if self._runner is not None:  # pragma: no cover - see _bind_step
            out = self._runner(**{self.input_name: cin[self.input_name].encode(x)},
                               **{n: v if self._raw_states else cin[n].encode(v) for n, v in self.states.items()})
            self.states = {name: out[name] if self._raw_states else cout[name].decode(out[name])
                           for name, _ in self.states_layout}
            return cout["logits"].decode(out["logits"])
        if x.shape != self._x_shape:
            self._resize(x.shape)
        set_tensor, get_tensor, states = self._set, self._get, self.states
        set_tensor(self._in_x, cin[self.input_name].encode(x))
        if self._raw_states:  # stored int8 / int16 states go back in as they came out
            for name, index in self._in_states:
                set_tensor(index, states[name])
            self._invoke()
            self.states = {name: get_tensor(index) for name, index in self._out_states}
        else:
            for name, index in self._in_states:
                set_tensor(index, cin[name].encode(states[name]))
            self._invoke()
            self.states = {name: cout[name].decode(get_tensor(index)) for name, index in self._out_states}
        return cout["logits"].decode(get_tensor(self._out_logits))

    def generate(self, prompt_ids: list[int], *, max_length: int, greedy: bool = False,
                 temperature: float = 1.0, top_k: int = 0, seed: int = 0) -> list[int]:
        """Continue ``prompt_ids`` (start marker included) one token at a time.

        Sampling draws from ``softmax(logits / temperature)`` restricted to the
        ``top_k`` best ids (0 = all) with ``numpy.random.default_rng(seed)``.

        Returns:
            The new ids, without the prompt, ending before the end id.
        """
        end_id = int(self.metadata["special_ids"]["end"])
        rng = np.random.default_rng(seed)
        self.reset(1)
        for t in prompt_ids[:-1]:
            self.step([t])
        last, out = prompt_ids[-1], []
        for _ in range(max_length):
            z = self.step([last])[0].astype(np.float64)
            if greedy:
                nxt = int(np.argmax(z))
            else:
                z = z / temperature
                if 0 < top_k < len(z):
                    z[z < np.sort(z)[-top_k]] = -np.inf
                p = np.exp(z - z.max())
                nxt = int(rng.choice(len(p), p=p / p.sum()))
            if nxt == end_id:
                break
            out.append(nxt)
            last = nxt
        return out
