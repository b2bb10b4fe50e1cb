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

from seqkit import arguments as a
from seqkit.errors import SeqkitError
from seqkit.export import embedded_metadata
from seqkit.export.metadata_schema import check_model, validate
from seqkit.export.tflite import interpreter
from seqkit.runtime.quantization import codecs

MODEL, METADATA = "model.tflite", "metadata.json"
#: Most rows a runtime steps at once (states of B x H float32 each; 10^9 rows asked for 30 GiB).
MAX_BATCH = 1 << 20


def export_model_path(path: str | None) -> str:
    """The ``.tflite`` file of ``path``: ``path`` itself when it is a file, else ``path/model.tflite``.

    Raises:
        SeqkitError: a directory without ``model.tflite`` (a run directory, a SavedModel-only
            export, or something else: the message says which and what to pass instead).
    """
    if path is not None and os.path.isfile(path):
        return path
    if path is None or not os.path.isfile(os.path.join(path, MODEL)):
        if path and os.path.isfile(os.path.join(path, "recipe.yaml")):
            name = os.path.basename(os.path.realpath(path))
            raise SeqkitError(f"{path}: a run directory, not an export. Export it first: "
                              f"`seqkit export {path} --out exports/{name}`, then use "
                              f"exports/{name}.")
        if path and os.path.isdir(os.path.join(path, "saved_model")):
            raise SeqkitError(f"{path}: a SavedModel-only export (--format saved_model) has "
                              f"no {MODEL} to run here; export the run again with --format tflite "
                              f"or --format all.")
        raise SeqkitError(f"{path}: no {MODEL} here. Export a run with `seqkit export "
                          f"RUN_DIR --format tflite --out EXPORT_DIR` and pass EXPORT_DIR (or its "
                          f"{MODEL} alone).")
    return os.path.join(path, MODEL)


def read_export_metadata(path: str | None) -> dict:
    """The metadata of an export: an export directory or a lone ``.tflite`` file.

    The model's own copy comes first: the JSON that ``seqkit export`` embeds in the
    ``.tflite`` (:mod:`seqkit.export.embedded_metadata`), so the file alone is enough and
    ``metadata.json`` may be deleted. When ``metadata.json`` lies beside it as well, the two
    must agree. An export written before embedding (no entry in the model) is read from
    ``metadata.json``.

    Raises:
        SeqkitError: no model (see :func:`export_model_path`), a ``.tflite`` without seqkit
            metadata and no ``metadata.json``, an unreadable ``metadata.json``, or a
            ``metadata.json`` that differs from the embedded metadata.
    """
    model = export_model_path(path)
    embedded = embedded_metadata.read(model, validate=True)  # untrusted: checked
    beside = os.path.join(os.path.dirname(model), METADATA)
    if os.path.basename(model) != MODEL or not os.path.isfile(beside):  # the file alone
        if embedded is None:
            raise SeqkitError(f"{model}: a TFLite model without seqkit's embedded metadata (metadata "
                              f"entry '{embedded_metadata.KEY}'): not written by `seqkit export`, or by "
                              f"an older seqkit. Pass its export directory (with {METADATA}), or "
                              f"export the run again.")
        return embedded
    try:
        with open(beside, encoding="utf-8") as f:
            meta = json.load(f)
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError, RecursionError) as exc:
        raise SeqkitError(f"{beside}: cannot read {METADATA} ({exc}). "
                          + ("The model carries its own copy: delete the broken file (`seqkit inspect "
                             f"--metadata {model}` prints the embedded one), or export again."
                             if embedded is not None else "Export again.")) from exc
    if embedded is not None and meta != embedded:
        keys = sorted(k for k in set(meta) | set(embedded) if meta.get(k) != embedded.get(k))
        raise SeqkitError(f"{beside} differs from the metadata embedded in {model} (key "
                          f"'{keys[0]}'{f' and {len(keys) - 1} more' if len(keys) > 1 else ''}): one of "
                          f"the two was edited or replaced, and seqkit will not guess which describes "
                          f"the model. Delete {METADATA} to use the model's own copy (`seqkit inspect "
                          f"--metadata {model}` prints it), or export the run again.")

    return embedded if embedded is not None else validate(meta, beside)  # untrusted: checked


def load_export(export_dir: str | None, model_bytes: bytes | None, metadata: dict | None) -> tuple:
    """``(model, metadata)`` for a runtime: ``model`` is ``model_bytes`` or the ``.tflite`` path of
    ``export_dir`` (a directory or the file); ``metadata`` the given dict, else the one embedded
    in ``model_bytes``, else :func:`read_export_metadata` of ``export_dir``.

    Raises:
        SeqkitError: as :func:`read_export_metadata`; model bytes without embedded metadata
            and no ``metadata`` given.
    """
    if model_bytes is not None:
        if metadata is None:
            metadata = embedded_metadata.read(model_bytes)
            if metadata is None:
                raise SeqkitError("these model bytes carry no seqkit metadata; pass metadata= (the "
                                  "export's metadata.json) as well.")
        return model_bytes, metadata
    model = export_model_path(export_dir)
    return model, metadata if metadata is not None else read_export_metadata(export_dir)


class StreamingModel:
    """A step model with its state carried between calls.

    Args:
        export_dir: a directory written by ``seqkit export --format tflite``
            (``model.tflite``, its metadata embedded, + ``metadata.json``), or the
            ``.tflite`` file alone (see :func:`read_export_metadata`).
        model_bytes: optional model bytes to use instead of ``model.tflite``
            (the exporter checks a model before writing it).
        metadata: optional metadata dict instead of the embedded one / ``metadata.json``.

    An export whose metadata says ``"state": "internal"`` (``seqkit export --state internal``)
    opens as a :class:`~seqkit.runtime.stateful.StatefulStreamingModel`: same ``step`` /
    ``reset`` / ``generate``, the state kept inside the model, the batch fixed at export.

    Raises:
        SeqkitError: missing or unreadable files, or a full-sequence or encoder-decoder export.
    """

    #: subclasses by the metadata's ``state`` (``"internal"``: :mod:`seqkit.runtime.stateful`, which
    #: registers itself when imported; ``seqkit.runtime``'s package import does so first)
    variants: dict = {}

    def __new__(cls, export_dir: str | None = None, *, model_bytes: bytes | None = None,
                metadata: dict | None = None):
        loaded = load_export(export_dir, model_bytes, metadata)
        if cls is StreamingModel and isinstance(loaded[1], dict) and loaded[1].get("state") == "internal":
            cls = StreamingModel.variants["internal"]  # registered by seqkit.runtime.stateful
        obj = super().__new__(cls)
        obj._loaded = loaded  # read once: __init__ takes it from here
        return obj

    def __init__(self, export_dir: str | None = None, *, model_bytes: bytes | None = None,
                 metadata: dict | None = None):
        model, metadata = self.__dict__.pop("_loaded", None) or load_export(export_dir, model_bytes, metadata)
        self.metadata = metadata
        if metadata.get("artefact") == "encoder_decoder":
            raise SeqkitError(f"{export_dir or 'this export'}: an encoder-decoder export (signatures "
                              f"'encode' and 'decode_step'), not a step model; run it with "
                              f"seqkit.runtime.Seq2SeqModel or `seqkit stream EXPORT --input FILE`.")
        if metadata.get("artefact") == "full_sequence":
            raise SeqkitError(f"{export_dir or 'this export'}: a full-sequence model (signature "
                              f"'predict', pinned shape), not a step model; run it with "
                              f"seqkit.runtime.full_sequence.FullSequenceModel, or export the run "
                              f"without --full-sequence (forward encoders only) to stream it.")
        self.interpreter = interpreter(model)

        check_model(metadata, self.interpreter, str(export_dir or "this export"))  # untrusted: checked
        try:
            self.input_name = metadata["input"]["name"]
            self.input_dtype = np.dtype(metadata["input"]["dtype"])
            self.states_layout = [(s["name"], int(s["size"])) for s in metadata["state_layout"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise SeqkitError(f"{export_dir or 'this export'}: its metadata lacks or garbles "
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
        self._x_shape = tuple(int(v) for v in ins[self.input_name]["shape"])
        if len(it.get_signature_list()) == 1 and primary == {int(d["index"]) for d in ins.values()}:
            self._runner = None
            del runner
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
        batch_size = a.whole("batch_size", batch_size, 1, MAX_BATCH)
        zeros = {name: np.zeros((batch_size, size), np.float32) for name, size in self.states_layout}
        if getattr(self, "_raw_states", False):
            zeros = {name: self._codec_in[name].encode(v) for name, v in zeros.items()}
        self.states = zeros

    def step(self, x) -> np.ndarray:
        """Feed one input per row (``[B]`` ids or ``[B, D]`` frames); return logits ``[B, C]``.

        Raises:
            SeqkitError: ``x`` of another shape or kind, or ids outside the vocabulary (LiteRT's
                reason).
        """
        x = self._as_input(x)
        try:
            return self._step(x)
        except RuntimeError as exc:  # LiteRT's error (e.g. an id outside the vocabulary): no crash, named
            raise self._refused(exc) from exc

    def _as_input(self, x) -> np.ndarray:
        try:
            return np.asarray(x, self.input_dtype)
        except (TypeError, ValueError) as exc:
            raise SeqkitError(f"step: the input must be {self._expected()}; got {str(x)[:60]!r} ({exc}).") from None

    def _refused(self, exc: RuntimeError) -> SeqkitError:
        return SeqkitError(f"step: LiteRT refused the input ({str(exc).splitlines()[0][:200]}); it must "
                           f"be {self._expected()}.")

    def _expected(self) -> str:
        if self.input_dtype.kind in "iu" and len(self._x_shape) == 1:
            return f"one token id per row, [B] integers in [0, {len(self.metadata.get('vocab') or ())})"
        kind = "integers" if self.input_dtype.kind in "iu" else "numbers"
        return f"one input per row, [B, {', '.join(str(d) for d in self._x_shape[1:])}] {kind}"

    def _step(self, x) -> np.ndarray:
        cin, cout = self._codec_in, self._codec_out
        if self._runner is not None:  # pragma: no cover - see _bind_step
            out = self._runner(**{self.input_name: cin[self.input_name].encode(x)},
                               **{n: v if self._raw_states else cin[n].encode(v) for n, v in self.states.items()})
            self.states = {name: out[name] if self._raw_states else cout[name].decode(out[name])
                           for name, _ in self.states_layout}
            return cout["logits"].decode(out["logits"])
        if x.shape != self._x_shape:
            if (x.ndim != len(self._x_shape) or not 1 <= x.shape[0] <= MAX_BATCH
                    or x.shape[1:] != tuple(self._x_shape[1:])):  # rows may change, nothing else
                raise SeqkitError(f"step: the input must be {self._expected()}, at most {MAX_BATCH:,} rows; "
                                  f"got shape {list(x.shape)}.")
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

        An export of a model trained with ``data.layout: stream`` (metadata ``"layout":
        "stream"``) does not stop at the end id: it is kept in the output (a line break) and
        read back as the start id, as in training, up to ``max_length`` new ids.

        Returns:
            The new ids, without the prompt; for a line model they end before the end id.
        """
        max_length, top_k = a.whole("max_length", max_length, 0), a.whole("top_k", top_k, 0)
        temperature = a.real("temperature", temperature, 0, low_open=True)
        end_id = int(self.metadata["special_ids"]["end"])
        start_id = int(self.metadata["special_ids"]["start"])
        across = self.metadata.get("layout") == "stream"
        rng = np.random.default_rng(a.whole("seed", seed) % 2**64)  # any int seed, as the other samplers take
        if isinstance(prompt_ids, (str, bytes)) or not len(prompt_ids):
            raise SeqkitError(f"generate: prompt_ids must be a non-empty list of token ids (at least the start "
                              f"id, {start_id}); got {str(prompt_ids)[:60]!r}.")
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
            if nxt == end_id and not across:
                break
            out.append(nxt)
            last = start_id if nxt == end_id else nxt
        return out
