"""The schema of an export's metadata (``metadata.json``, and its copy embedded in ``model.tflite``).

A ``.tflite`` file is whatever a user hands seqkit: its metadata is read as untrusted input.
:func:`validate` checks it strictly (pydantic, strict mode) before any runtime uses it:

* **types** -- ids and sizes are JSON integers (not ``true``, not ``1.0``), names are strings,
  vocabularies are lists of strings;
* **bounds** -- at most :data:`MAX_JSON_BYTES` of JSON nested at most :data:`MAX_DEPTH` deep;
  vocabularies of at most :data:`MAX_VOCAB` entries of at most :data:`MAX_TOKEN` characters;
  at most :data:`MAX_STATES` states of 1 to :data:`MAX_STATE_SIZE` units; a pinned batch or
  length of at most :data:`MAX_PINNED`;
* **ids in range** -- every special id indexes the vocabulary;
* **embedded files only** -- ``subword_model`` / ``target_subword_model`` name a file inside the
  export (a plain file name: no folder, no ``..``, no absolute path), never a path on disk.

:func:`check_against_model` then compares it with the model itself: the step signature's inputs
and outputs are the metadata's input and state layout (names and sizes), and the logits have
one column per vocabulary entry (language model) or label (acceptor, tagger).

Every failure is a :class:`MetadataError`: one paragraph naming the file and the field.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from seqkit.errors import SeqkitError

MAX_JSON_BYTES = 256 << 20  # a 10^6-token vocabulary with a recipe is ~20 MiB
MAX_DEPTH = 64  # metadata.json nests 6 deep; a recipe a few more
MAX_VOCAB = 10_000_000
MAX_TOKEN = 4096
MAX_STATES = 256
MAX_STATE_SIZE = 1 << 20
MAX_PINNED = 1 << 24
MAX_NAME = 256
FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")


class MetadataError(SeqkitError, ValueError):
    """An export's metadata that does not describe a model seqkit can run (names the field)."""


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


Name = Field(min_length=1, max_length=MAX_NAME)
Id = Field(ge=0, lt=MAX_VOCAB)


class SpecialIds(_Strict):
    pad: int = Id
    unk: int = Id
    start: int = Id
    end: int = Id


class TensorInfo(_Strict):
    name: str = Name
    dtype: Literal["int32", "int64", "float32", "float16", "int8", "int16", "uint8"]
    shape: list[Optional[int]] = Field(max_length=8)
    kind: Literal["token", "frame"]

    @field_validator("shape")
    @classmethod
    def _dims(cls, v):
        if any(d is not None and not 0 <= d <= MAX_PINNED for d in v):
            raise ValueError(f"each size must be null or 0..{MAX_PINNED}")
        return v


class StateInfo(_Strict):
    name: str = Name
    size: int = Field(ge=1, le=MAX_STATE_SIZE)


Tokens = Field(default=None, max_length=MAX_VOCAB)


class FullSequenceInfo(_Strict):
    batch: int = Field(ge=1, le=MAX_PINNED)
    length: int = Field(ge=1, le=MAX_PINNED)
    input: TensorInfo


class EncoderInfo(_Strict):
    pinned_length: int = Field(ge=1, le=MAX_PINNED)
    memory_width: int = Field(ge=1, le=MAX_STATE_SIZE)
    keys_width: int = Field(ge=0, le=MAX_STATE_SIZE)


class ExportMetadata(_Strict):
    """The fields a runtime reads (other fields are kept as they are, within the size and depth
    bounds of :func:`validate`)."""

    seqkit_version: str = Field(max_length=MAX_NAME)
    head: str = Name
    artefact: Literal["step", "predict", "full_sequence", "encoder_decoder"] = "step"
    input: Optional[TensorInfo] = None
    special_ids: SpecialIds
    state_layout: list[StateInfo] = Field(max_length=MAX_STATES)
    vocab: Optional[list[str]] = Tokens
    target_vocab: Optional[list[str]] = Tokens
    labels: Optional[list[str]] = Tokens
    logits_index: Optional[Literal["vocab", "target_vocab", "labels"]] = None
    char_vocab: Optional[list[str]] = Tokens
    max_chars: Optional[int] = Field(default=None, ge=1, le=MAX_PINNED)
    tokenizer: Optional[str] = Field(default=None, max_length=MAX_NAME)
    token_mode: Optional[str] = Field(default=None, max_length=MAX_NAME)
    target_tokenizer: Optional[str] = Field(default=None, max_length=MAX_NAME)
    lowercase: Optional[bool] = None
    layout: Optional[str] = Field(default=None, max_length=MAX_NAME)
    quantize: str = Field(max_length=MAX_NAME)
    subword_model: Optional[str] = None
    target_subword_model: Optional[str] = None
    state: Optional[Literal["explicit", "internal"]] = None
    batch: Optional[int] = Field(default=None, ge=1, le=MAX_PINNED)
    io_type: Optional[Literal["float", "int"]] = None
    recipe: Optional[dict] = None
    full_sequence: Optional[FullSequenceInfo] = None
    encoder: Optional[EncoderInfo] = None

    @field_validator("vocab", "target_vocab", "labels", "char_vocab")
    @classmethod
    def _tokens(cls, v):
        if v is not None:
            long = next((i for i, t in enumerate(v) if len(t) > MAX_TOKEN), None)
            if long is not None:
                raise ValueError(f"entry {long} is longer than {MAX_TOKEN} characters")
        return v

    @field_validator("subword_model", "target_subword_model")
    @classmethod
    def _embedded_file(cls, v):
        if v is not None and (not FILE_NAME.match(v) or ".." in v):
            raise ValueError(f"{v!r} is not a file name inside the export: seqkit reads the tokenizer "
                             f"only from the export itself (a plain name such as subword.model, no "
                             f"folder, no '..', no absolute path)")
        return v

    @model_validator(mode="after")
    def _ids_in_range(self):
        vocab = self.target_vocab if self.target_vocab is not None else self.vocab
        if vocab is not None:
            for key in ("pad", "unk", "start", "end"):
                i = getattr(self.special_ids, key)
                if i >= len(vocab):
                    raise ValueError(f"special_ids.{key} = {i} is outside the vocabulary of "
                                     f"{len(vocab)} entries")
        names = [s.name for s in self.state_layout]
        if len(set(names)) != len(names):
            raise ValueError(f"state_layout names a state twice ({names})")
        return self


def _depth(obj: Any, limit: int) -> int:
    """The nesting depth of a JSON value (iterative: no recursion on hostile input); stops past ``limit``."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        value, d = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, d)
            if deepest > limit:
                return deepest
            stack.extend((v, d + 1) for v in (value.values() if isinstance(value, dict) else value))
    return deepest


def _field(loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def validate(meta: Any, where: str) -> dict:
    """Check an export's metadata (the parsed JSON) against :class:`ExportMetadata`.

    Args:
        meta: the parsed metadata (a dict, or anything a hostile file holds).
        where: the file, for messages (``model.tflite``, ``metadata.json``).

    Returns:
        ``meta`` itself (unchanged) when it passes.

    Raises:
        MetadataError: one paragraph naming ``where``, the first failing field and the fix.
    """
    if not isinstance(meta, dict):
        raise MetadataError(f"{where}: the export's metadata is not a JSON object; export the run again.")
    if _depth(meta, MAX_DEPTH) > MAX_DEPTH:
        raise MetadataError(f"{where}: the export's metadata nests deeper than {MAX_DEPTH} levels; "
                            f"it was not written by `seqkit export`. Export the run again.")
    try:
        ExportMetadata.model_validate(meta)
    except ValidationError as exc:
        e = exc.errors()[0]
        got = repr(e.get("input"))
        got = got if len(got) <= 80 else got[:77] + "..."
        raise MetadataError(
            f"{where}: the export's metadata field '{_field(e['loc'])}' is not valid ({e['msg']}; "
            f"found {got}). The file was not written by this seqkit, or was edited or damaged; "
            f"seqkit does not run a model its metadata does not describe. Export the run again "
            f"(`seqkit export RUN --out DIR`).") from None
    return meta


def _size(shape) -> int | None:
    return int(shape[-1]) if len(shape) and int(shape[-1]) > 0 else None


def check_against_model(meta: dict, interpreter, where: str) -> None:
    """Compare validated metadata with the model's signatures.

    An explicit-state step model (signature ``step``) must take exactly the metadata's input and
    states and return ``logits`` and the same states, each state ``[B, size]``; ``decode_step``
    (seq2seq) must carry the states too; the logits' last size must equal the vocabulary
    (language model), the labels (acceptor, tagger) or the target vocabulary (seq2seq).

    Raises:
        MetadataError: naming ``where``, the signature, and the field that disagrees.
    """
    sigs = interpreter.get_signature_list()

    def fail(what: str) -> MetadataError:
        return MetadataError(f"{where}: the metadata does not describe this model: {what}. The "
                             f"metadata was copied from another export or edited; export the run "
                             f"again.")

    name = "decode_step" if meta.get("artefact") == "encoder_decoder" else "step"
    if meta.get("artefact") == "full_sequence":
        name = "predict"
    if name not in sigs:
        raise fail(f"it has the signatures {sorted(sigs)}, not '{name}'")
    runner = interpreter.get_signature_runner(name)
    ins, outs = runner.get_input_details(), runner.get_output_details()
    if "logits" not in outs:
        raise fail(f"signature '{name}' returns {sorted(outs)}, no 'logits'")
    columns = _size(outs["logits"]["shape_signature"])
    # what the logits index: an encoder-decoder's target vocabulary, else class labels, else the vocabulary
    if "logits_index" in meta:  # the head says which list the logits' columns index (None: none)
        key = meta["logits_index"]
    else:  # an export from before the field
        key = next((k for k in ("target_vocab", "labels", "vocab") if meta.get(k) is not None), None)
    names = meta.get(key) if key else None
    if names is not None and columns is not None and columns != len(names):
        raise fail(f"its logits have {columns} columns and the metadata's {key} has {len(names)} "
                   f"entries")
    if name == "predict" or meta.get("state") == "internal":
        return
    states = {s["name"]: int(s["size"]) for s in meta["state_layout"]}
    if name == "step":
        expected_in = set(states) | {meta["input"]["name"]}
        if set(ins) != expected_in:
            raise fail(f"signature 'step' takes {sorted(ins)}; the metadata's input and "
                       f"state_layout say {sorted(expected_in)}")
        if set(outs) != set(states) | {"logits"}:
            raise fail(f"signature 'step' returns {sorted(outs)}; the metadata's state_layout says "
                       f"{sorted(set(states) | {'logits'})}")
    for s, size in states.items():
        for side, details in (("takes", ins), ("returns", outs)):
            if s not in details:
                raise fail(f"signature '{name}' {side} no state '{s}' (state_layout)")
            got = _size(details[s]["shape_signature"])
            if got is not None and got != size:
                raise fail(f"signature '{name}' {side} state '{s}' of size {got}; state_layout says {size}")


def check_model(meta: Any, interpreter, where: str) -> dict:
    """:func:`validate` then :func:`check_against_model`; returns ``meta``.

    Raises:
        MetadataError: as those two.
    """
    validate(meta, where)
    check_against_model(meta, interpreter, where)
    return meta
