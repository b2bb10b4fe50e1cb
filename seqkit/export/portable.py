"""A portable inference ``.keras`` file: seqkit's layers saved as the stock Keras layers they compute.

A run's ``model.keras`` names seqkit's classes (``seqkit>FusedLSTM``, ``seqkit>SequencePooling``,
``seqkit>Adam``...), so loading it needs seqkit installed. :func:`export_portable_keras` rewrites
the model's configuration so that it names Keras classes only, copies the weights, saves it without
the training configuration (no optimizer, loss or metrics) and checks, in this process, that the
stock model gives the same outputs on padded batches. The file then loads with plain
``keras.saving.load_model`` where seqkit is not installed.

What is rewritten:

* ``FusedLSTM`` -> ``keras.layers.LSTM``, ``FusedGRU`` -> ``keras.layers.GRU`` (also inside
  ``Bidirectional``): subclasses with the same weights and maths and a faster CPU kernel.
* the acceptor's ``SequencePooling``: ``mean`` -> ``keras.layers.GlobalAveragePooling1D`` (a masked
  mean; a row with no valid step gives NaN where seqkit gives 0); ``final`` -> dropped, the
  recurrent layer before it returns its last output instead (Keras's masked RNN keeps the output
  of the last valid step; ``Bidirectional`` then concatenates the forward last valid output and
  the backward output at step 0, as seqkit's ``final`` does).

Anything else of seqkit's or a plugin's (``max`` pooling, ``FrameMask`` of frame inputs, the
seq2seq decoder, plugin cells) has no stock equivalent: the export refuses and names it.

TensorFlow, Keras and the seqkit modules that import them and NumPy are imported inside the
functions that use them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import copy
import os
import shutil

from seqkit.data.subword import SUBWORD_MODEL
from seqkit.errors import SeqkitError
from seqkit.outputs import json_mark, written_by_seqkit
from seqkit.runs.rundir import atomic_write_json
from seqkit.training.train import load_model

#: seqkit classes saved as the Keras class they subclass (same weights, same maths)
STOCK_RNN = {"seqkit>FusedLSTM": "LSTM", "seqkit>FusedGRU": "GRU"}
MODEL_FILE = "model.keras"
#: Beside it: what the model reads and writes (vocabulary, labels, special ids), as JSON.
INFO_FILE = "model.json"
#: Export metadata entries that describe a TFLite artefact, not the portable model.
_NOT_PORTABLE = ("artefact", "state_layout", "quantize", "input", "recipe")
#: default largest allowed relative output difference (see :func:`export_portable_keras`)
DEFAULT_TOLERANCE = 1e-5


def _stock_rnn(cfg: dict, *, last_only: bool = False) -> dict:
    """``cfg`` (a serialized layer) with fused RNNs renamed to Keras's; ``last_only``: return the
    last output instead of the sequence."""
    cfg = copy.deepcopy(cfg)
    if cfg.get("registered_name") in STOCK_RNN:
        cfg.update(module="keras.layers", class_name=STOCK_RNN[cfg["registered_name"]],
                   registered_name=None)
        cfg.get("config", {}).pop("product_dtype", None)  # mixed precision's: stock layers compute in float32
    if cfg.get("class_name") == "Bidirectional" and cfg.get("module") == "keras.layers":
        inner = cfg["config"]
        for key in ("layer", "backward_layer"):
            if inner.get(key):
                inner[key] = _stock_rnn(inner[key], last_only=last_only)
    elif last_only:
        if "return_sequences" not in cfg.get("config", {}):
            raise SeqkitError(f"portable export: layer '{cfg.get('name')}' before the 'final' pooling "
                              f"is not a recurrent layer ({cfg.get('class_name')}).")
        cfg["config"]["return_sequences"] = False
        cfg["config"]["zero_output_for_mask"] = False
    return cfg


def _history_names(obj, acc: list) -> list:
    """Names of the layers whose tensors ``obj`` (inbound nodes, nested) refers to."""
    if isinstance(obj, dict):
        hist = obj.get("config", {}).get("keras_history") if obj.get("class_name") == "__keras_tensor__" else None
        if hist:
            acc.append(hist[0])
        for v in obj.values():
            _history_names(v, acc)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _history_names(v, acc)
    return acc


def _rename_history(obj, old: str, new: str):
    if isinstance(obj, dict):
        if obj.get("class_name") == "__keras_tensor__" and obj["config"]["keras_history"][0] == old:
            obj["config"]["keras_history"] = [new, 0, 0]
        for v in obj.values():
            _rename_history(v, old, new)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _rename_history(v, old, new)


def _single(outs) -> bool:
    return bool(outs) and not isinstance(outs[0], (list, tuple))


def _output_names(cfg: dict) -> list:
    outs = cfg["output_layers"]
    return [outs[0]] if _single(outs) else [o[0] for o in outs]


def portable_config(serialized: dict) -> dict:
    """The serialized functional model ``serialized`` rewritten to name Keras classes only.

    Raises:
        SeqkitError: a layer has no stock Keras equivalent (the message names its class).
    """
    if serialized.get("class_name") != "Functional":
        raise SeqkitError(f"portable export: expected a functional model, got {serialized.get('class_name')}.")
    out = copy.deepcopy(serialized)
    out.pop("compile_config", None)
    cfg = out["config"]
    layers = cfg["layers"]
    by_name = {layer["name"]: layer for layer in layers}
    drop = []
    for i, layer in enumerate(layers):
        if layer.get("registered_name") != "seqkit>SequencePooling":
            layers[i] = _stock_rnn(layer)
            continue
        mode = layer["config"].get("mode")
        if mode == "mean":
            layer.update(module="keras.layers", class_name="GlobalAveragePooling1D", registered_name=None,
                         config={k: layer["config"][k] for k in ("name", "trainable", "dtype")
                                 if k in layer["config"]} | {"data_format": "channels_last",
                                                             "keepdims": False})
        elif mode == "final":
            src = _history_names(layer["inbound_nodes"][0]["args"], [])[0]
            users = [other["name"] for other in layers if other is not layer
                     and src in _history_names(other.get("inbound_nodes", []), [])]
            if users or src in _output_names(cfg):
                raise SeqkitError(f"portable export: the output of '{src}' is used by more than the "
                                  f"'final' pooling ({', '.join(users) or 'a model output'}).")
            j = next(k for k, other in enumerate(layers) if other["name"] == src)
            layers[j] = _stock_rnn(layers[j], last_only=True)
            drop.append(layer["name"])
        else:
            raise SeqkitError(f"portable export: '{mode}' pooling (layer '{layer['name']}') has no stock "
                              f"Keras layer that respects the padding mask; only 'final' and 'mean' do.")
    for name in drop:
        src = _history_names(by_name[name]["inbound_nodes"][0]["args"], [])[0]
        layers[:] = [layer for layer in layers if layer["name"] != name]
        _rename_history(layers, name, src)
        outs = cfg["output_layers"]
        cfg["output_layers"] = ([src, 0, 0] if outs[0] == name else outs) if _single(outs) else [
            [src, 0, 0] if o[0] == name else o for o in outs]
    foreign = sorted(_foreign_classes(out))
    if foreign:
        raise SeqkitError(f"portable export: the model uses {', '.join(foreign)}, which stock Keras "
                          f"does not have (seq2seq decoders, frame inputs and plugin cells need "
                          f"their package); use `seqkit export --format saved_model` instead.")
    return out


def _foreign_classes(obj, acc: set | None = None) -> set:
    """Names of the non-Keras classes a serialized object refers to (``seqkit>FusedLSTM``)."""
    acc = set() if acc is None else acc
    if isinstance(obj, dict):
        module = obj.get("module")
        if "class_name" in obj and module is not None and not (
                module == "keras" or module.startswith("keras.")):
            acc.add(obj.get("registered_name") or f"{module}.{obj['class_name']}")
        for v in obj.values():
            _foreign_classes(v, acc)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _foreign_classes(v, acc)
    return acc


def _sample_inputs(model, rng, rows: int = 8, steps: int = 9):
    """Token ids with right padding of varied lengths (a row with one valid step included)."""
    import numpy as np

    if len(model.inputs) != 1 or "int" not in str(model.inputs[0].dtype):
        raise SeqkitError("portable export: only token-input models (language model, tagger, acceptor) "
                          "are supported.")
    vocab = next((layer.input_dim for layer in model.layers if hasattr(layer, "input_dim")), 8)
    x = rng.integers(1, max(vocab, 2), size=(rows, steps)).astype(str(model.inputs[0].dtype))
    for r, n in enumerate(rng.integers(1, steps + 1, size=rows)):
        x[r, n if r else 1:] = 0
    return x


def export_portable_keras(run_dir: str, out: str, *, overwrite: bool = False,
                          tolerance: float | None = None, seed: int = 0) -> dict:
    """Write ``out/model.keras``: the run's best model with stock Keras layers only, for inference.

    Args:
        run_dir: a run directory.
        out: the export directory (created; must not hold a ``model.keras`` unless ``overwrite``).
        tolerance: largest allowed **relative** output difference between the run's model and the
            portable one on a padded batch of random token ids: ``max |a - b| / max(1, max |a|)``
            (``a``: the run's outputs). Relative, because the two compute the same maths with
            different kernels: float32 outputs near 10 are spaced 9.5e-7 apart, so an absolute
            bound below a few 1e-6 refuses a model whose logits are large. Default
            :data:`DEFAULT_TOLERANCE` (1e-5).

    Returns:
        ``{"path", "max_abs_diff", "max_rel_diff", "scale"`` (max ``|a|``, at least 1)``,
        "tolerance", "rewritten": [...]}``.

    Raises:
        SeqkitError: the model has a layer without a stock equivalent, or the outputs differ.
    """
    import keras
    import numpy as np

    path = os.path.join(out, MODEL_FILE)
    real_out, real_run = os.path.realpath(out), os.path.realpath(run_dir)
    if real_out == real_run or real_run.startswith(real_out + os.sep):
        raise SeqkitError(f"--out {out}: that is the run directory or a folder holding it; a "
                          f"portable model.keras there would replace the run's. Choose another "
                          f"--out, e.g. exports/{os.path.basename(real_run.rstrip(os.sep))}-keras.")
    if os.path.isfile(out):
        raise SeqkitError(f"--out {out}: a file, not a folder. Choose another --out.")
    others = sorted(set(os.listdir(out)) - {MODEL_FILE, INFO_FILE, SUBWORD_MODEL}) if os.path.isdir(out) else []
    if others:
        raise SeqkitError(f"--out {out}: holds other files ({', '.join(others[:3])}); a portable "
                          f"export writes {MODEL_FILE} and {INFO_FILE} into an empty folder or over "
                          f"an earlier portable export. Choose another --out.")
    info_path = os.path.join(out, INFO_FILE)
    if os.path.exists(info_path) and not written_by_seqkit(info_path):
        raise SeqkitError(f"{info_path}: exists and was not written by seqkit; a portable export "
                          f"replaces only its own files. Choose another --out.")
    if os.path.exists(path) and not overwrite:
        raise SeqkitError(f"{path} exists; pass --overwrite to replace it.")
    model = load_model(os.path.join(run_dir, "model.keras"))
    serialized = keras.saving.serialize_keras_object(model)
    portable = keras.saving.deserialize_keras_object(portable_config(serialized), safe_mode=True)
    portable.set_weights(model.get_weights())
    x = _sample_inputs(model, np.random.default_rng(seed))
    want = np.asarray(model.predict(x, verbose=0))
    got = np.asarray(portable.predict(x, verbose=0))
    tolerance = DEFAULT_TOLERANCE if tolerance is None else float(tolerance)
    if want.shape != got.shape:
        raise SeqkitError(f"portable export: outputs differ from the run's model (shapes {want.shape} "
                          f"vs {got.shape}); nothing written.")
    diff = float(np.max(np.abs(want - got))) if want.size else 0.0
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    rel = diff / scale
    if not rel <= tolerance:
        raise SeqkitError(f"portable export: outputs differ from the run's model by max |diff| "
                          f"{diff:.3g} (relative to the largest |output| {scale:.3g}: {rel:.3g} > "
                          f"--tolerance {tolerance:g}); nothing written. Raise --tolerance only if "
                          f"you accept the difference.")
    info = portable_info(run_dir, model)
    os.makedirs(out, exist_ok=True)
    tmp = path[: -len(".keras")] + ".tmp.keras"
    portable.save(tmp)
    if info.get("subword_model"):  # the run's sentencepiece model: what tokenizes the input
        sub = os.path.join(out, SUBWORD_MODEL)
        shutil.copyfile(os.path.join(run_dir, SUBWORD_MODEL), sub + ".tmp")
        os.replace(sub + ".tmp", sub)
        info["subword_model"] = SUBWORD_MODEL
    atomic_write_json(info_path, info)
    os.replace(tmp, path)
    rewritten = sorted(_foreign_classes(serialized["config"]))
    return {"path": path, "info": info_path, "max_abs_diff": diff, "max_rel_diff": rel, "scale": scale,
            "tolerance": tolerance, "rewritten": rewritten}


def portable_info(run_dir: str, model) -> dict:
    """What ``model.json`` holds beside a portable ``model.keras``: how to feed it and read it
    without seqkit -- ``input`` (the model's input tensors: name, dtype, shape, what the ids
    are), ``output``, ``vocab`` (id = position), ``labels`` (logit ``c`` names ``labels[c]``),
    ``special_ids`` (``pad`` 0 pads a row; a language model's rows start with ``start``),
    ``tokenization``, ``lowercase``, ``subword_model`` (a sentencepiece run's model, copied
    beside), ``head``, versions -- the export metadata's entries
    (:func:`seqkit.export.writer.metadata_for`) less those of a TFLite artefact."""
    from seqkit.export.writer import metadata_for
    from seqkit.training.train import load_run

    prep, _ = load_run(run_dir)
    meta = {k: v for k, v in metadata_for(prep, None, "none").items() if k not in _NOT_PORTABLE}
    inputs = [{"name": t.name, "dtype": str(t.dtype), "shape": [None if d is None else int(d) for d in t.shape]}
              for t in model.inputs]
    for t in inputs:
        t["holds"] = ("token ids (positions in vocab; special_ids.pad pads)" if "int" in t["dtype"]
                      else "frames (NaN pads a step)")
    return {**json_mark("export --format keras"), "model": MODEL_FILE, "input": inputs, **meta}
