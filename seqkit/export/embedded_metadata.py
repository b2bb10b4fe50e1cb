"""The export's metadata inside the ``.tflite`` file itself: one self-describing model.

Every ``model.tflite`` that ``seqkit export`` writes carries its ``metadata.json``
(vocabulary, labels, special ids, state layout, input kind, normaliser, CRF weights,
decoding defaults, recipe, versions) in the TFLite flatbuffer's own metadata table
(``schema.fbs``: ``Model.metadata: [Metadata]``, each ``{name: string, buffer: uint}``
naming an entry of ``Model.buffers``), under the key :data:`KEY`:

- ``"seqkit_metadata"``: the UTF-8 JSON of ``metadata.json`` (compact, the same object);
- ``"seqkit_file:NAME"``: an associated file's bytes (:data:`FILE_PREFIX`; e.g. a
  tokenizer model). seqkit's built-in tokenizers (``char``, ``whitespace``) need none:
  the vocabulary in the JSON is the whole tokenizer, so exports write no such entry today.

These sit beside the converter's own entries (``min_runtime_version``,
``CONVERSION_METADATA``); the interpreter ignores metadata, so the model runs exactly
as without it (its other bytes are unchanged: the entries and their buffers are
appended to the two vectors and the flatbuffer re-packed with the converter's own
packer, ``flatbuffer_utils.convert_object_to_bytearray``).

The standard TFLite Metadata (``TFLITE_METADATA`` + a zip of associated files, written
by the ``tflite-support`` metadata writers) is not used: that library is unmaintained
and does not install with TF 2.21 / Python 3.11, and its schema has no place for a
state layout or a recurrent step loop anyway.

Reading needs no TensorFlow: the flatbuffer is parsed with the schema bindings that ship
with ``ai-edge-litert`` (its interpreter exposes no metadata).

LiteRT is imported inside the functions that use it, so importing this module does not load it.
"""

from __future__ import annotations

import json
import os

from seqkit.errors import SeqkitError
from seqkit.export import metadata_schema, model_check
from seqkit.runs.rundir import strict_json

KEY = "seqkit_metadata"
FILE_PREFIX = "seqkit_file:"
#: the version of the metadata fields written (docs/export-metadata.md); raised when a field's
#: meaning changes. Files without ``schema_version`` predate it (``tokenizer`` / ``token_mode``).
SCHEMA_VERSION = 1
TOKENIZATIONS = ("char", "whitespace", "sentencepiece")


def versioned(meta: dict, *, tokenization: str, target_tokenization: str | None = None) -> dict:
    """The metadata an export writes, in the shape of :data:`SCHEMA_VERSION` (in place; returned).

    Sets ``schema_version``; sets ``tokenization`` (how a line of raw text becomes the model's
    input tokens: ``char``, ``whitespace`` or ``sentencepiece``; one field, so a reader cannot
    pick the wrong one of two) and, for an encoder-decoder, ``target_tokenization``; drops the
    older ``tokenizer`` / ``token_mode`` / ``target_tokenizer`` fields; and replaces every
    absolute path in the embedded ``recipe`` with its file name (a shipped model does not carry
    the developer's directories).

    Raises:
        SeqkitError: an unknown tokenization.
    """
    for name, mode in (("tokenization", tokenization), ("target_tokenization", target_tokenization)):
        if mode is not None and mode not in TOKENIZATIONS:
            raise SeqkitError(f"export metadata: {name} '{mode}' is not one of {', '.join(TOKENIZATIONS)}.")
    for old in ("tokenizer", "token_mode", "target_tokenizer"):
        meta.pop(old, None)
    meta["schema_version"] = SCHEMA_VERSION
    meta["tokenization"] = tokenization
    if target_tokenization is not None:
        meta["target_tokenization"] = target_tokenization
    if "recipe" in meta:
        meta["recipe"] = without_paths(meta["recipe"])
    return meta


def without_paths(obj):
    """``obj`` (JSON-like) with every string that is an absolute path replaced by its file name."""
    if isinstance(obj, dict):
        return {k: without_paths(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [without_paths(v) for v in obj]
    if isinstance(obj, str) and (os.path.isabs(obj) or obj.startswith("~")):
        return os.path.basename(obj.rstrip("/\\")) or obj
    return obj


def tokenization(meta: dict, side: str = "source") -> str:
    """How an export's raw text becomes tokens (``side`` ``"source"``: the input; ``"target"``: a
    seq2seq output): ``tokenization`` / ``target_tokenization``, or in files that predate
    :data:`SCHEMA_VERSION` the older ``token_mode`` (acceptor / tagger), ``tokenizer`` and
    ``target_tokenizer`` fields."""
    if side == "target":
        return meta.get("target_tokenization") or meta.get("target_tokenizer") or "whitespace"
    return meta.get("tokenization") or meta.get("token_mode") or meta.get("tokenizer") or "char"


def _bytes_of(model) -> bytes:
    """Model bytes from bytes or a path (``str`` / ``os.PathLike``), read bounded
    (:func:`seqkit.export.model_check.read_model`)."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    return model_check.read_model(model)


def embed(model: bytes, meta: dict, files: dict[str, bytes] | None = None) -> bytes:
    """Return ``model`` with ``meta`` (and ``files``) in its flatbuffer metadata table.

    Args:
        model: ``.tflite`` bytes (as the converter returns them).
        meta: the export's metadata (what ``metadata.json`` holds); stored as strict UTF-8
            JSON under :data:`KEY`.
        files: associated files, ``name -> bytes``, each stored under ``FILE_PREFIX + name``.

    Entries of an earlier :func:`embed` are replaced (their buffers reused, a file no
    longer given left empty); every other part of the model is kept as it is.

    Raises:
        SeqkitError: bytes that are not a TFLite model, or a model too large for one
            flatbuffer (over 2 GiB: its buffers live after the flatbuffer, by offset).
    """
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    try:
        if bytes(model[4:8]) != b"TFL3":
            raise ValueError("no TFL3 file identifier")
        m = flatbuffer_utils.convert_bytearray_to_object(bytearray(model))  # no compaction: a plain unpack
    except Exception as exc:  # flatbuffers raises struct / index errors on garbage
        raise SeqkitError(f"cannot embed metadata: these bytes are not a TFLite model ({exc}).") from exc
    if any(b.offset for b in m.buffers or []):
        raise SeqkitError("cannot embed metadata into a TFLite model whose buffers live outside the "
                          "flatbuffer (a model over 2 GiB); metadata.json beside it still describes it.")
    entries = {KEY: strict_json(meta, ensure_ascii=False, separators=(",", ":")).encode("utf-8")}
    entries.update({FILE_PREFIX + name: bytes(data) for name, data in (files or {}).items()})
    m.buffers = m.buffers or []
    m.metadata = m.metadata or []
    known = {md.name.decode("utf-8") if isinstance(md.name, bytes) else md.name: md for md in m.metadata}
    for name, md in known.items():  # a stale associated file of an earlier embed: left empty
        if name.startswith(FILE_PREFIX) and name not in entries:
            m.buffers[md.buffer] = schema.BufferT()
    for name, data in entries.items():
        buf = schema.BufferT()
        buf.data = data
        if name in known:
            m.buffers[known[name].buffer] = buf
            continue
        m.buffers.append(buf)
        md = schema.MetadataT()
        md.name, md.buffer = name, len(m.buffers) - 1
        m.metadata.append(md)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


def entries(model) -> dict[str, bytes]:
    """Every metadata entry of a TFLite model, ``name -> bytes`` (the converter's too).

    Args:
        model: ``.tflite`` bytes or a path.

    Raises:
        SeqkitError: an unreadable file or bytes that are not a TFLite model.
    """
    from ai_edge_litert import schema_py_generated as schema

    data = _bytes_of(model)
    where = model if isinstance(model, (str, os.PathLike)) else "these bytes"
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise SeqkitError(f"{where}: not a TFLite model (no TFL3 file identifier).")
    try:
        m = schema.Model.GetRootAs(data, 0)
        out = {}
        for i in range(m.MetadataLength()):
            md = m.Metadata(i)
            buf = m.Buffers(md.Buffer())
            if buf.Offset():  # a >2 GiB model keeps its buffers after the flatbuffer
                out[md.Name().decode("utf-8")] = data[buf.Offset(): buf.Offset() + buf.Size()]
            else:
                out[md.Name().decode("utf-8")] = buf.DataAsNumpy().tobytes() if buf.DataLength() else b""
        return out
    except Exception as exc:  # a truncated or corrupt flatbuffer
        raise SeqkitError(f"{where}: a corrupt TFLite model, its metadata table cannot be read "
                          f"({type(exc).__name__}: {exc}).") from exc


def read(model, validate: bool = False) -> dict | None:
    """The metadata embedded by :func:`embed` (the export's ``metadata.json`` object), or None
    when the model has none (not written by seqkit, or by a seqkit before embedding).

    Args:
        model: ``.tflite`` bytes or a path.
        validate: also check it against :mod:`seqkit.export.metadata_schema` (types, bounds, ids
            in range, embedded file names), as every runtime does before using it
            (:func:`seqkit.runtime.streaming.read_export_metadata`, ``check_model``); False only
            parses it (with the size and nesting bounds), e.g. for ``seqkit inspect``.

    Raises:
        SeqkitError: an unreadable or corrupt model, an entry that is not a JSON object, larger
            than :data:`~seqkit.export.metadata_schema.MAX_JSON_BYTES` or nested too deep;
            ``MetadataError`` (a SeqkitError): metadata that fails the schema (names the field).
    """
    raw = entries(model).get(KEY)
    if raw is None:
        return None
    where = model if isinstance(model, (str, os.PathLike)) else "this model"
    if len(raw) > metadata_schema.MAX_JSON_BYTES:
        raise metadata_schema.MetadataError(
            f"{where}: its '{KEY}' metadata entry holds {len(raw):,} bytes, more than seqkit reads "
            f"({metadata_schema.MAX_JSON_BYTES:,}); it was not written by `seqkit export`. Export the run again.")
    try:
        meta = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise metadata_schema.MetadataError(
            f"{where}: its '{KEY}' metadata entry nests deeper than Python can read; it was not "
            f"written by `seqkit export`. Export the run again.") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise SeqkitError(f"{where}: its '{KEY}' metadata entry is not UTF-8 JSON ({exc}); the file "
                          f"was damaged or edited. Export the run again.") from exc
    if not isinstance(meta, dict):
        raise SeqkitError(f"{where}: its '{KEY}' metadata entry is not a JSON object; export the run again.")
    return metadata_schema.validate(meta, str(where)) if validate else meta


def read_files(model) -> dict[str, bytes]:
    """The associated files embedded by :func:`embed`, ``name -> bytes`` (empty entries left out).

    Raises:
        SeqkitError: as :func:`entries`.
    """
    return {k[len(FILE_PREFIX):]: v for k, v in entries(model).items() if k.startswith(FILE_PREFIX) and v}
