"""Recipe files: YAML loading, schema validation, ``--set`` overrides.

A recipe has the sections ``data``, ``model``, ``head``, ``training`` and
``decoding``. Every key is validated; an error names the file, the line, the
key path, what was expected and what was found, e.g.::

    recipes/x.yaml:7: model.units: expected a positive integer, got 'abc'

Sections ``data``, ``model`` and ``head`` also take the keys declared by the
chosen data source, cell and head plugins (their ``Options`` models), checked
the same way.

The annotated_types package is imported inside the functions that use it, so importing this module
does not load it.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import os
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from seqkit._quiet import import_tensorflow_quietly
from seqkit.cells.base import NoOptions
from seqkit.data.base import text_tokenizer
from seqkit.errors import RecipeError, RegistryError, did_you_mean, shown_value
from seqkit.heads import DEFAULT_HEAD
from seqkit.registry import CELLS, DATA, HEADS, load_plugin
from seqkit.shipped import resolve

class SplitConfig(BaseModel):
    """How examples are divided into train / valid / test (fractions of examples)."""

    model_config = ConfigDict(extra="forbid")
    valid: float = Field(0.05, ge=0.0, lt=1.0)
    test: float = Field(0.05, ge=0.0, lt=1.0)
    # true: a seeded permutation first; false: contiguous blocks (train first, then valid, then test),
    # which keep related lines together; null (default): true when the examples carry a class label
    # (a file sorted by label would leave whole classes out of valid and test), false otherwise
    shuffle: Optional[bool] = None
    # the seed of the split (and of a source's seeded sample, e.g. cmudict's data.words); null
    # (default): the recipe's seed. Set, the seeds of --seeds share one split: their valid figures
    # compare, and a run distilled from the others keeps valid words none of its teachers trained on
    seed: Optional[int] = Field(None, ge=0, le=2**32 - 1)


class SubwordConfig(BaseModel):
    """``data.subword``: the SentencePiece model of ``data.tokenizer: sentencepiece``
    (:mod:`seqkit.data.subword`), trained on the training split.

    model_type: ``unigram`` (Kudo 2018) or ``bpe`` (Sennrich et al. 2016).
    vocab_size: pieces of the model, its ``<unk>`` included (seqkit adds padding, ``<s>``, ``</s>``).
    character_coverage: share of training characters kept as pieces (1.0: all of them).
    byte_fallback: characters outside the pieces become UTF-8 byte pieces, not ``[UNK]``
        (256 of the ``vocab_size`` pieces).
    """

    model_config = ConfigDict(extra="forbid")
    model_type: Literal["unigram", "bpe"] = "unigram"
    vocab_size: int = Field(1000, ge=8)
    character_coverage: float = Field(1.0, gt=0.0, le=1.0)
    byte_fallback: bool = False


class DataConfig(BaseModel):
    """``data``: where examples come from and how they become padded id batches."""

    model_config = ConfigDict(extra="allow")
    source: str
    tokenizer: Literal["char", "whitespace", "sentencepiece"] = "char"
    # data.tokenizer sentencepiece: its model (default SubwordConfig() when not given)
    subword: Optional[SubwordConfig] = None
    lowercase: bool = False
    max_length: int = Field(256, gt=1)
    min_count: int = Field(1, gt=0)
    max_vocab: Optional[int] = Field(None, gt=0)
    limit: Optional[int] = Field(None, gt=0)
    split: SplitConfig = SplitConfig()
    bucket: bool = True
    # language_model head: "line" trains on independent lines; "stream" on one token stream
    # read in training.bptt-step chunks with the state carried (truncated BPTT, seqkit.data.stream)
    layout: Literal["line", "stream"] = "line"


class CharEmbeddingConfig(BaseModel):
    """``model.char_embedding``: character-aware word inputs for the acceptor and tagger
    (:class:`seqkit.layers.char_word_embedding.CharWordEmbedding`; Lample et al. 2016, sec. 4.1).

    Each word's first ``max_chars`` characters are embedded (``dim``) and read by a recurrent
    encoder of ``units`` (cell plugin ``cell``; forward + backward final states with
    ``bidirectional``); the result is concatenated with the word embedding, so a word unseen
    in training still gets a representation of its spelling.
    """

    model_config = ConfigDict(extra="forbid")
    dim: int = Field(16, gt=0)
    units: int = Field(32, gt=0)
    cell: str = "lstm"
    bidirectional: bool = True
    max_chars: int = Field(20, gt=0)


MAX_DIM = 2**31 - 1  # a tensor dimension (int32): model.units, model.embedding_dim
MAX_LAYERS = 256  # deeper stacks reach Python's recursion limit in Keras (3,000 did)


class ModelConfig(BaseModel):
    """``model``: the embedding and the recurrent encoder stack."""

    model_config = ConfigDict(extra="allow")
    cell: str = "lstm"
    # sizes are bounded by what a tensor dimension can hold (int32); memory is checked later
    # (seqkit.guards.check_model_fits)
    units: int = Field(256, gt=0, le=MAX_DIM)
    layers: int = Field(1, gt=0, le=MAX_LAYERS)
    embedding_dim: int = Field(64, gt=0, le=MAX_DIM)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    recurrent_dropout: float = Field(0.0, ge=0.0, lt=1.0)
    # DropConnect on each recurrent layer's hidden-to-hidden kernel in training (AWD-LSTM);
    # lstm and gru cells only; keeps the fused CPU and cuDNN kernels (recurrent_dropout does not)
    weight_drop: float = Field(0.0, ge=0.0, lt=1.0)
    bidirectional: bool = False
    # acceptor / tagger: each word's characters through a small encoder, beside its embedding
    char_embedding: Optional[CharEmbeddingConfig] = None


class HeadConfig(BaseModel):
    """``head``: which task head, plus that head's own keys."""

    model_config = ConfigDict(extra="allow")
    type: str = DEFAULT_HEAD


class EarlyStoppingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    patience: int = Field(3, ge=0)
    min_delta: float = Field(0.0, ge=0.0)


class DistributeConfig(BaseModel):
    """``training.distribute``: which ``tf.distribute`` strategy trains the model."""

    model_config = ConfigDict(extra="forbid")
    strategy: Literal["none", "mirrored", "multi_worker"] = "none"
    cpu_devices: Optional[int] = Field(None, gt=0)  # split a GPU-less CPU into N logical devices
    timeout_seconds: int = Field(300, gt=0)  # collective ops fail (not hang) after this long
    backup: bool = False  # keras BackupAndRestore: a restarted job resumes mid-training


class ScheduleConfig(BaseModel):
    """``training.schedule``: the learning-rate schedule (formulas: :mod:`seqkit.training.schedules`).

    ``type``: ``constant`` | ``cosine`` (linear warm-up, then a cosine to ``min_learning_rate``)
    | ``step`` (warm-up, then times ``factor`` every ``step_size`` optimizer steps) |
    ``plateau`` (times ``factor`` after ``patience`` epochs without improvement). Only the keys
    of the chosen type may be given.
    """

    model_config = ConfigDict(extra="forbid")
    type: Literal["constant", "cosine", "step", "plateau"] = "constant"
    warmup_steps: int = Field(0, ge=0)                     # cosine, step
    decay_steps: Optional[int] = Field(None, gt=0)          # cosine (default: the rest of the run)
    min_learning_rate: float = Field(0.0, ge=0.0, allow_inf_nan=False)  # cosine, plateau
    step_size: Optional[int] = Field(None, gt=0)            # step (optimizer steps between drops)
    factor: float = Field(0.5, gt=0.0, lt=1.0)              # step, plateau
    patience: int = Field(2, ge=0)                          # plateau (epochs)
    min_delta: float = Field(0.0, ge=0.0)                   # plateau
    cooldown: int = Field(0, ge=0)                          # plateau (epochs)

    KEYS: typing.ClassVar[dict] = {
        "constant": (), "cosine": ("warmup_steps", "decay_steps", "min_learning_rate"),
        "step": ("warmup_steps", "step_size", "factor"),
        "plateau": ("factor", "patience", "min_delta", "cooldown", "min_learning_rate")}

    @model_validator(mode="after")
    def _keys_of_the_type(self):
        allowed = self.KEYS[self.type]
        # a key of another type is refused unless it holds its default (a run's resolved recipe.yaml)
        extra = sorted(k for k in self.model_fields_set if k != "type" and k not in allowed
                       and getattr(self, k) != type(self).model_fields[k].default)
        if extra:
            raise ValueError(f"{', '.join(extra)}: not used by type {self.type!r} (its keys: "
                             f"{', '.join(allowed) or 'none'}). Remove {'it' if len(extra) == 1 else 'them'} "
                             f"or choose another type.")
        if self.type == "step" and self.step_size is None:
            raise ValueError("type 'step' needs step_size: the optimizer steps between drops.")
        return self


class TrainingConfig(BaseModel):
    """``training``: optimiser, clipping, epochs, checkpoints, distribution."""

    model_config = ConfigDict(extra="forbid")
    epochs: int = Field(10, gt=0)
    batch_size: int = Field(64, gt=0)
    optimizer: Literal["adam", "adamw", "sgd", "rmsprop"] = "adam"
    learning_rate: float = Field(1e-3, gt=0.0, allow_inf_nan=False)
    clipnorm: Optional[float] = Field(1.0, gt=0.0)
    early_stopping: Optional[EarlyStoppingConfig] = EarlyStoppingConfig()
    # the validation figure that keeps the best epoch (model.keras) and drives early stopping and a
    # plateau schedule: null = the exact cross-entropy (val_cross_entropy); or val_<name> for a
    # figure the head decodes at each epoch's end (Head.selection_metrics, e.g. seq2seq val_wer)
    monitor: Optional[str] = None
    steps_per_epoch: Optional[int] = Field(None, gt=0)
    deterministic: bool = True
    jit_compile: bool = False
    # float32 | mixed_bfloat16 | mixed_float16 | auto: bfloat16 (or float16) products with float32
    # weights, state, loss and metrics; auto = mixed_bfloat16 where the CPU has amx_bf16 or
    # avx512_bf16 or the GPU is of compute capability 8+, else float32 (seqkit.training.precision)
    precision: Literal["float32", "mixed_bfloat16", "mixed_float16", "auto"] = "float32"
    diagnostics: bool = False  # per-epoch gradient norm / clipping fraction in history.json
    distribute: DistributeConfig = DistributeConfig()
    bptt: Optional[int] = Field(None, gt=1)  # data.layout stream: steps per chunk (default 128)
    schedule: ScheduleConfig = ScheduleConfig()
    # decoupled weight decay (Loshchilov & Hutter 2019): null = Keras's default (adamw 0.004, else 0)
    weight_decay: Optional[float] = Field(None, ge=0.0, allow_inf_nan=False)
    label_smoothing: float = Field(0.0, ge=0.0, lt=1.0)  # Szegedy et al. 2016, sec. 7
    # acceptor: 'balanced' (n / (C * n_c) from the training split) or {label: weight}
    class_weight: Any = None

    @field_validator("class_weight", mode="before")
    @classmethod
    def _class_weight(cls, v):
        if v is None or v == "balanced":
            return v
        if not isinstance(v, dict) or not v:
            raise ValueError(f"expected 'balanced', a mapping {{label: weight, ...}} or null, got {v!r}.")
        bad = {k: w for k, w in v.items() if isinstance(w, bool) or not isinstance(w, (int, float))
               or not math.isfinite(w) or w <= 0}
        if bad:
            raise ValueError(f"weights must be positive finite numbers; got "
                             f"{', '.join(f'{k}: {w!r}' for k, w in bad.items())}.")
        return {str(k): float(w) for k, w in v.items()}  # YAML reads a label 1 as an integer

    @model_validator(mode="after")
    def _schedule_fits(self):
        sc = self.schedule
        if sc.type in ("cosine", "plateau") and sc.min_learning_rate >= self.learning_rate:
            raise ValueError(f"schedule.min_learning_rate ({sc.min_learning_rate:g}) must be below "
                             f"learning_rate ({self.learning_rate:g}), the schedule's peak.")
        return self


class DecodingConfig(BaseModel):
    """``decoding``: defaults for ``seqkit generate``."""

    model_config = ConfigDict(extra="forbid")
    strategy: Literal["greedy", "sample", "beam"] = "sample"
    temperature: float = Field(1.0, gt=0.0)
    top_k: int = Field(0, ge=0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_length: int = Field(200, gt=0)
    min_length: int = Field(0, ge=0)
    beam_width: int = Field(4, gt=0, le=1000)  # = seqkit.inference.decoding.MAX_BEAM_WIDTH (a test holds them equal)
    length_penalty: float = Field(0.0, ge=0.0)
    n_best: int = Field(1, gt=0)


class EvaluationConfig(BaseModel):
    """``evaluation``: dynamic evaluation (``seqkit evaluate --dynamic``, data.layout stream)."""

    model_config = ConfigDict(extra="forbid")
    # update rule after each scored chunk (seqkit.heads.language_model.dynamic_eval): sgd, or Krause et al.'s
    # rms (step divided by the training gradients' RMS, decay scaled by it)
    dynamic_rule: Literal["sgd", "rms"] = "sgd"
    dynamic_lr: float = Field(0.1, gt=0.0, allow_inf_nan=False)  # eta, on each chunk's mean loss
    dynamic_decay: float = Field(0.0, ge=0.0, allow_inf_nan=False)  # lambda: pull to the trained weights
    dynamic_chunk: int = Field(20, gt=0)    # tokens per scored-then-adapted chunk
    dynamic_epsilon: float = Field(1e-5, gt=0.0, allow_inf_nan=False)  # rms: added to sqrt(MS)
    # rms: training chunks (training.batch_size columns x dynamic_chunk) for MS; null: all
    dynamic_stat_chunks: Optional[int] = Field(None, gt=0)


class RecipeModel(BaseModel):
    """The whole recipe; unknown top-level keys are refused."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", max_length=100)  # a folder name, with room for .staging-PID
    seed: int = Field(1234, ge=0, le=2**32 - 1)  # numpy's seed range
    plugins: list[str] = []
    data: DataConfig
    model: ModelConfig = ModelConfig()
    head: HeadConfig = HeadConfig()
    training: TrainingConfig = TrainingConfig()
    decoding: DecodingConfig = DecodingConfig()
    evaluation: EvaluationConfig = EvaluationConfig()

    @field_validator("name")
    @classmethod
    def _name_is_one_folder(cls, v: str) -> str:
        # the name is the folder runs/NAME and exports/NAME: it must stay inside its parent, and a
        # leading '.' is kept for seqkit's own staging and lock files (.NAME.staging-PID, .NAME.lock)
        if v.startswith("."):
            raise ValueError(f"{v!r} is not a usable folder name: a run's name may not be '.' or '..' "
                             f"or start with '.'; use letters, digits, '_', '-' (and '.' inside).")
        return v


@dataclass
class Recipe:
    """A validated recipe: typed sections plus the plugins' validated options.

    Attributes:
        config: the validated :class:`RecipeModel`.
        data_options / cell_options / head_options: instances of the data
            source's, cell's and head's ``Options`` models.
        path: the file it was read from (``None`` when built from a dict).
    """

    config: RecipeModel
    data_options: BaseModel
    cell_options: BaseModel
    head_options: BaseModel
    path: Optional[str] = None
    base_dir: str = "."

    def __getattr__(self, item):  # recipe.data, recipe.model, ...
        return getattr(self.config, item)

    @property
    def split_seed(self) -> int:
        """The seed that divides the data (``data.split.seed``, else the recipe's ``seed``)."""
        s = self.config.data.split.seed
        return self.config.seed if s is None else s

    def to_dict(self) -> dict:
        """The resolved recipe (defaults filled, plugin keys flat in their sections)."""
        d = self.config.model_dump(mode="json")
        for section in ("data", "model", "head"):
            for k in list(d[section]):
                if k in (getattr(self.config, section).model_extra or {}):
                    del d[section][k]
        d["data"].update(self.data_options.model_dump(mode="json"))
        d["model"].update(self.cell_options.model_dump(mode="json"))
        d["head"].update(self.head_options.model_dump(mode="json"))
        return d

    def to_yaml(self) -> str:
        """The resolved recipe as YAML text (what a run's ``recipe.yaml`` holds)."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)

    @classmethod
    def from_yaml(cls, path: str, overrides: "dict | list[str] | None" = None) -> "Recipe":
        """Load and validate a recipe file, as ``seqkit train PATH --set ...`` does.

        Args:
            path: the YAML file (its ``plugins:`` are imported, as on the command line).
            overrides: ``{"training.epochs": 2, "model.cell": "gru"}`` or ``["training.epochs=2"]``
                (``--set`` strings), applied before validation.

        Returns:
            A validated :class:`Recipe`.

        Raises:
            RecipeError: bad YAML, an unknown key, a wrong type or value (every problem listed, with
                file:line and key path: the CLI's message).
        """
        from seqkit import arguments as a

        path = a.path("path", path)
        _quiet_tf()  # validation may import the heads (Keras); without TF's start-up chatter
        return load_recipe(path, override_strings(overrides))

    @classmethod
    def from_dict(cls, raw: dict, overrides: "dict | list[str] | None" = None, *,
                  base_dir: str = ".") -> "Recipe":
        """Validate a recipe given as a dict (the YAML file's content), with the same checks and
        messages as :meth:`from_yaml`; relative data paths in ``raw`` are read from ``base_dir``,
        those given in ``overrides`` (and run directories such as ``head.distill.runs``) from the
        current directory.

        Raises:
            RecipeError: as :meth:`from_yaml` (``<recipe>`` names the source).
        """
        _quiet_tf()  # validation may import the heads (Keras); without TF's start-up chatter
        if not isinstance(raw, dict):
            raise RecipeError(f"<recipe>: a recipe is a mapping of sections (name, data, model, head, "
                              f"training, decoding); got a {type(raw).__name__}.")
        return recipe_from_dict(raw, overrides=override_strings(overrides),
                                base_dir=os.path.abspath(base_dir))  # kept absolute in a run's copy

    def resolve_path(self, p: str) -> str:
        """A path from the recipe, relative to the recipe file's folder."""
        p = os.path.expanduser(p)
        return p if os.path.isabs(p) else os.path.normpath(os.path.join(self.base_dir, p))


# ---------------------------------------------------------------- YAML


class RecipeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also reads ``1e-3`` (no decimal point) as a number, as YAML 1.2 does.

    YAML 1.1 (PyYAML) reads ``learning_rate: 1e-3`` as the *string* ``'1e-3'``, which strict
    recipe values would refuse; a quoted ``"1e-3"`` stays a string.
    """


RecipeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def _duplicate_keys(node, prefix=(), out=None) -> list:
    """``[(key path, first line, second line), ...]`` for keys given twice in one YAML mapping."""
    out = [] if out is None else out
    if isinstance(node, yaml.MappingNode):
        seen = {}
        for k, v in node.value:
            key = str(k.value)
            if key in seen:
                out.append((prefix + (key,), seen[key], k.start_mark.line + 1))
            else:
                seen[key] = k.start_mark.line + 1
            _duplicate_keys(v, prefix + (key,), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _duplicate_keys(v, prefix + (i,), out)
    return out


# ---------------------------------------------------------------- line numbers

def _key_lines(node, prefix=(), out=None) -> dict:
    """Map key paths (tuples) to 1-based line numbers from a composed YAML node."""
    out = {} if out is None else out
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            path = prefix + (str(k.value),)
            out[path] = k.start_mark.line + 1
            _key_lines(v, path, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            out[prefix + (i,)] = v.start_mark.line + 1
            _key_lines(v, prefix + (i,), out)
    return out


# ---------------------------------------------------------------- type descriptions

def _describe(annotation, info=None) -> str:
    import annotated_types as at

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        s = " or ".join(_describe(a, info) for a in inner)
        return s + " or null" if len(inner) < len(args) else s
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is dict:
        return "a mapping of label: positive number"
    if origin is list:
        return f"a list of {_describe(args[0]).removeprefix('a ').removeprefix('an ')}s" if args else "a list"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "a mapping of keys (" + ", ".join(annotation.model_fields) + ")"
    meta = list(getattr(info, "metadata", []) or [])
    bounds = {type(m).__name__: getattr(m, type(m).__name__.lower(), None) for m in meta
              if isinstance(m, (at.Gt, at.Ge, at.Lt, at.Le))}
    if annotation is bool:
        return "true or false"
    if annotation is int:
        if "Le" in bounds and "Ge" in bounds:
            return f"an integer in [{bounds['Ge']}, {bounds['Le']}]"
        if bounds.get("Gt") == 0 and "Le" in bounds and bounds["Le"] < 2**31 - 1:  # not a mere int32 limit
            return f"a positive integer <= {bounds['Le']}"
        if bounds.get("Gt") == 0:
            return "a positive integer"
        if bounds.get("Ge") == 0:
            return "an integer >= 0"
        if "Gt" in bounds:
            return f"an integer > {bounds['Gt']}"
        if "Ge" in bounds:
            return f"an integer >= {bounds['Ge']}"
        return "an integer"
    if annotation is float:
        if any(getattr(m, "allow_inf_nan", None) is False for m in meta):
            return "a finite " + _describe(annotation, _Bounds(meta)).removeprefix("a ")
        if bounds.get("Ge") == 0 and bounds.get("Lt") == 1:
            return "a number in [0, 1)"
        if bounds.get("Gt") == 0 and bounds.get("Lt") == 1:
            return "a number in (0, 1)"
        if bounds.get("Gt") == 0 and "Le" in bounds:
            return f"a number in (0, {bounds['Le']:g}]"
        if bounds.get("Gt") == 0:
            return "a positive number"
        if bounds.get("Ge") == 0:
            return "a number >= 0"
        return "a number"
    if annotation is str:
        pattern = [m.pattern for m in meta if hasattr(m, "pattern") and m.pattern]
        longest = [m.max_length for m in meta if getattr(m, "max_length", None)]
        what = "a string of letters, digits, '_', '-', '.'" if pattern else "a string"
        return what + (f" of at most {longest[0]} characters" if longest else "")
    return getattr(annotation, "__name__", str(annotation))


class _Bounds:
    """A FieldInfo stand-in: the same bounds, no ``allow_inf_nan``."""

    def __init__(self, meta):
        self.metadata = [m for m in meta if getattr(m, "allow_inf_nan", None) is None]


def _hint(ann, got) -> str:
    """Why a value of the right look has the wrong type (strict values), or ``""``."""
    inner = [a for a in typing.get_args(ann) if a is not type(None)] or [ann]
    numeric = [a for a in inner if a in (int, float)]
    if not numeric:
        return ""
    if isinstance(got, bool):
        return " true/false is not a number."
    if isinstance(got, str):
        try:
            float(got)
        except ValueError:
            return ""
        return " A quoted number is a string: write it without quotes."
    if isinstance(got, float) and int in numeric and float not in numeric:
        return " Write a whole number without a decimal point." if math.isfinite(got) and got == int(got) \
            else " This key takes a whole number."
    return ""


def _field_at(model_cls, loc):
    """Walk ``loc`` through nested pydantic models; return (annotation, FieldInfo, parent_cls)."""
    cls, ann, info = model_cls, None, None
    for part in loc:
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            return ann, info, None
        info = cls.model_fields.get(part)
        if info is None:
            return None, None, cls
        ann = info.annotation
        parent = cls
        inner = [a for a in typing.get_args(ann) if a is not type(None)] or [ann]
        cls = inner[0] if len(inner) == 1 else ann
    return ann, info, parent if loc else None


class _Errors:
    def __init__(self, source: str, lines: dict, overrides: dict):
        self.source, self.lines, self.overrides, self.items = source, lines, overrides, []

    def where(self, path: tuple) -> str:
        """``--set a.b`` when an override set the key (or a key below it: ``--set model.units.x=3``
        made ``model.units`` a dict), else ``file:line`` of the nearest key."""
        full = ".".join(str(p) for p in path)
        # a key's error (not a section's: its validator may concern keys the file set) is the
        # --set's that wrote below it (--set model.units.x=3 made model.units a dict)
        below = (next((k for k in self.overrides if k.startswith(full + ".")), None)
                 if len(path) >= 2 else None)
        if below is not None:
            return f"--set {below}"
        for n in range(len(path), 0, -1):
            sub = ".".join(str(p) for p in path[:n])
            if sub in self.overrides:
                return f"--set {sub}"
            if tuple(path[:n]) in self.lines:
                return f"{self.source}:{self.lines[tuple(path[:n])]}"
        return self.source

    def add(self, path: tuple, message: str) -> None:
        key = ".".join(str(p) for p in path) or "(recipe)"
        where = self.where(path)
        self.items.append(f"{where}: {message}" if where == f"--set {key}" else f"{where}: {key}: {message}")

    def from_pydantic(self, exc: ValidationError, model_cls, prefix: tuple, extra_allowed=()):
        for err in exc.errors():
            loc = tuple(err["loc"])
            path = prefix + loc
            if err["type"] == "extra_forbidden":
                _, _, parent = _field_at(model_cls, loc[:-1] + ("__x__",))
                known = list(extra_allowed) + (list(parent.model_fields) if parent else [])
                self.add(path, f"unknown key.{did_you_mean(loc[-1], known)} Known keys here: "
                               f"{', '.join(sorted(set(known)))}.")
                continue
            if err["type"] == "value_error":  # a field validator's own message
                self.add(path, str(err["msg"]).removeprefix("Value error, "))
                continue
            if err["type"] == "missing":
                ann, info, _ = _field_at(model_cls, loc)
                self.add(path, f"missing; expected {_describe(ann, info)}.")
                continue
            ann, info, _ = _field_at(model_cls, loc)
            got = err.get("input")
            expected = _describe(ann, info) if ann is not None else err["msg"]
            self.add(path, f"expected {expected}, got {shown_value(got)}.{_hint(ann, got)}")

    def raise_if_any(self):
        if self.items:
            head = "invalid recipe" if len(self.items) == 1 else f"invalid recipe ({len(self.items)} problems)"
            err = RecipeError(head + ":\n  " + "\n  ".join(self.items))
            err.problems = list(self.items)  # one line each (``seqkit validate --json``)
            raise err


def override_problems(exc: ValidationError, model_cls, section: str, keys) -> list[str]:
    """The problems of ``--set section.KEY=VALUE`` overrides that ``model_cls`` refused, worded as
    a recipe's are (an unknown key with "did you mean" and the known keys; a wrong value with the
    type expected).

    Args:
        exc: the error of ``model_cls.model_validate`` on the section with the overrides applied.
        model_cls: the section's pydantic model (e.g. :class:`DecodingConfig`).
        section: the section's name in the recipe (``"decoding"``).
        keys: the overridden keys of the section (their messages begin ``--set section.KEY``).

    Returns:
        One line per problem.
    """
    errors = _Errors("(recipe)", {}, {f"{section}.{k}": True for k in keys})
    errors.from_pydantic(exc, model_cls, (section,))
    return errors.items


# ---------------------------------------------------------------- overrides

def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse ``a.b.c=value`` (the value is read as YAML: ``1`` -> int, ``gru`` -> str).

    Raises:
        RecipeError: no ``=`` or an empty key.
    """
    if "=" not in text:
        raise RecipeError(f"--set {text}: expected KEY.PATH=VALUE, e.g. --set training.epochs=1.")
    key, value = text.split("=", 1)
    parts = [p for p in key.strip().split(".")]
    if not key.strip() or any(not p for p in parts):
        raise RecipeError(f"--set {text}: the key path is empty or has an empty part.")
    try:
        parsed = yaml.load(value, Loader=RecipeLoader) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return parts, parsed


def _quiet_tf() -> None:
    import_tensorflow_quietly()


def override_strings(overrides: "dict | list[str] | None") -> list[str]:
    """``{"a.b": value}`` -> ``["a.b=<value as JSON, which YAML reads back>"]``; a list of
    ``--set`` strings is returned as is."""
    if overrides is None:
        return []
    if isinstance(overrides, dict):
        out = []
        for k, v in overrides.items():
            if not isinstance(k, str):
                raise RecipeError(f"overrides: key {k!r} is a {type(k).__name__}; keys are recipe key "
                                  f"paths such as 'training.epochs'.")
            try:  # NumPy scalars and arrays (a parameter sweep's values) as the plain values they hold
                out.append(f"{k}={json.dumps(v, default=_plain)}")
            except (TypeError, ValueError) as exc:
                raise RecipeError(f"overrides: {k}={v!r} cannot be written as a recipe value ({exc}); "
                                  f"give a number, a string, a list or a dict.") from None
        return out
    if isinstance(overrides, str):
        return [overrides]
    try:
        out = list(overrides)
    except TypeError:
        raise RecipeError(f"overrides: expected a dict {{'a.b': value}} or a list of 'a.b=value' strings; "
                          f"got a {type(overrides).__name__}.") from None
    bad = next((o for o in out if not isinstance(o, str)), None)
    if bad is not None:
        raise RecipeError(f"overrides: {bad!r} is a {type(bad).__name__}; each override in a list is a "
                          f"'KEY.PATH=VALUE' string (or give a dict {{'KEY.PATH': value}}).")
    return out


def _plain(value):
    """``json.dumps``'s ``default``: a NumPy scalar or array as its Python value."""
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"a {type(value).__name__} is not a recipe value")


def apply_overrides(raw: dict, overrides: list[str]) -> dict[str, Any]:
    """Apply ``--set`` overrides to ``raw`` in place; return ``{"a.b": value}`` for messages."""
    applied = {}
    for text in overrides:
        parts, value = parse_override(text)
        node = raw
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        node[parts[-1]] = value
        applied[".".join(parts)] = value
    return applied


# ---------------------------------------------------------------- loading

MAX_YAML_NODES = 100_000  # a recipe has a few hundred; aliases may not expand past this
MAX_YAML_DEPTH = 64


def _check_size(node, path: str) -> None:
    """Refuse a YAML node graph whose alias-expanded size or depth is far beyond any recipe.

    Aliases make the graph a DAG whose expansion can be exponential in the file's size (the
    "billion laughs" attack); the expanded size is counted once per distinct node (memoised), so
    this check costs time linear in the file.

    Raises:
        RecipeError: more than :data:`MAX_YAML_NODES` values once aliases are expanded, or more
            than :data:`MAX_YAML_DEPTH` levels of nesting.
    """
    sizes: dict[int, int] = {}

    def size(n, depth: int) -> int:
        if depth > MAX_YAML_DEPTH:
            raise RecipeError(f"{path}: the YAML is nested more than {MAX_YAML_DEPTH} levels deep; a "
                              f"recipe is a few levels of mappings. Check the file.")
        if id(n) in sizes:
            return sizes[id(n)]
        if isinstance(n, yaml.MappingNode):
            total = 1 + sum(size(k, depth + 1) + size(v, depth + 1) for k, v in n.value)
        elif isinstance(n, yaml.SequenceNode):
            total = 1 + sum(size(v, depth + 1) for v in n.value)
        else:
            total = 1
        sizes[id(n)] = total
        if total > MAX_YAML_NODES:
            raise RecipeError(f"{path}: the YAML expands to more than {MAX_YAML_NODES:,} values "
                              f"(anchors and aliases repeated inside each other); a recipe has a few "
                              f"hundred. Write the values out, or check the file.")
        return total

    if node is not None:
        size(node, 0)


#: Largest recipe file read (bytes): the shipped recipes are 1-5 KB.
MAX_RECIPE_BYTES = 1 << 20


def read_yaml(path: str) -> tuple[dict, dict]:
    """Read a YAML mapping; return ``(data, key_lines)``.

    Raises:
        RecipeError: missing file (or not a regular file), larger than :data:`MAX_RECIPE_BYTES`,
            not UTF-8, malformed YAML, or not a mapping.
    """
    if not os.path.isfile(path):
        raise RecipeError(f"{path}: no such recipe file. Pass the path of a .yaml recipe, or the "
                          f"name of a shipped one (`seqkit recipes` lists them).")
    size = os.path.getsize(path)
    if size > MAX_RECIPE_BYTES:
        raise RecipeError(f"{path}: {size:,} bytes, more than a recipe may hold ({MAX_RECIPE_BYTES:,}; "
                          f"a recipe is a page of settings, its data lives in the files it names). "
                          f"Check that this is the recipe you meant.")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_RECIPE_BYTES + 1)
    except UnicodeDecodeError as exc:
        raise RecipeError(f"{path}: not UTF-8 text (byte {exc.start}): save the recipe as UTF-8.") from exc
    try:
        node = yaml.compose(text, Loader=RecipeLoader)
        _check_size(node, path)  # before anything expands aliases (a "billion laughs" file)
        data = yaml.load(text, Loader=RecipeLoader)
    except RecursionError as exc:
        raise RecipeError(f"{path}: the YAML is nested too deeply to be a recipe (a recipe is a "
                          f"few levels of mappings). Check the file.") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        problem = getattr(exc, "problem", None) or str(exc)
        raise RecipeError(f"{where}: malformed YAML: {problem}. Check indentation and that "
                          f"every 'key: value' pair has a space after the colon.") from exc
    dups = _duplicate_keys(node)
    if dups:
        items = [f"{path}:{second}: {'.'.join(str(p) for p in key)}: given twice (lines {first} and "
                 f"{second}); YAML would silently keep the second. Delete one of them."
                 for key, first, second in dups]
        head = "invalid recipe" if len(items) == 1 else f"invalid recipe ({len(items)} problems)"
        raise RecipeError(head + ":\n  " + "\n  ".join(items))
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe is a YAML mapping with sections data, model, head, "
                          f"training, decoding; found a {type(data).__name__}.")
    return data, _key_lines(node)


_RUN_MARKERS = ("model.keras", "last.keras", "state.json", "plugins.json", "history.json")


def in_run_dir(path: str) -> bool:
    """True when ``path`` is the ``recipe.yaml`` of a run directory (files training writes beside it)."""
    folder = os.path.dirname(os.path.abspath(path))
    return any(os.path.exists(os.path.join(folder, m)) for m in _RUN_MARKERS)


def load_recipe(path: str, overrides: list[str] | None = None, *,
                load_plugins: bool | None = None) -> Recipe:
    """Load, override and validate a recipe file.

    Args:
        path: the YAML file, or the name of a shipped recipe (:mod:`seqkit.shipped`) when no
            file of that path exists. A recipe without ``name:`` is named after the file's stem.
        overrides: ``["a.b=c", ...]`` applied before validation; a relative file path given in
            one is read from the current directory (those in the file, from the file's folder).
        load_plugins: import the recipe's ``plugins:`` entries (files, modules) first. ``None``
            (default): yes for a recipe the user wrote, no for the ``recipe.yaml`` of a run
            directory (:func:`in_run_dir`). A run directory is data, never code: its plugins come
            from installed entry points or ``--plugin`` / :func:`seqkit.load_plugin`.

    Returns:
        A :class:`Recipe`.

    Raises:
        RecipeError: any problem, all of them listed with file:line and key path.
    """
    path = resolve(path)  # a shipped recipe's name ("lm-pydoc-chars") when no such file exists
    raw, lines = read_yaml(path)
    if isinstance(raw, dict) and "name" not in raw:  # the run's name defaults to the file's stem
        raw["name"] = os.path.splitext(os.path.basename(path))[0]
    if load_plugins is None:
        load_plugins = not in_run_dir(path)
    return recipe_from_dict(raw, source=path, lines=lines, overrides=overrides,
                            base_dir=os.path.dirname(os.path.abspath(path)), load_plugins=load_plugins)


def recipe_from_dict(raw: dict, *, source: str = "<recipe>", lines: dict | None = None,
                     overrides: list[str] | None = None, base_dir: str = ".",
                     load_plugins: bool = True) -> Recipe:
    """Validate a recipe given as a dict (see :func:`load_recipe`; ``load_plugins=False`` keeps
    the ``plugins:`` entries as a record and imports none of them)."""
    raw = copy.deepcopy(raw)
    applied = apply_overrides(raw, overrides or [])
    errors = _Errors(source, lines or {}, applied)

    def base_of(dotted: str) -> str:
        """Where a relative path under ``dotted`` is read from: the current directory when the
        user typed it (``--set``), else the recipe's folder."""
        given = any(dotted == k or dotted.startswith(k + ".") for k in applied)
        return os.getcwd() if given else base_dir

    if isinstance(raw.get("plugins"), list):
        # a plugin file is read from the recipe's folder and kept absolute (the run's copy stays valid)
        raw["plugins"] = [os.path.normpath(os.path.join(base_of("plugins"), p))
                          if isinstance(p, str) and not os.path.isabs(p) and p.endswith(".py") else p
                          for p in raw["plugins"]]
        for spec in raw["plugins"] if load_plugins else ():
            if isinstance(spec, str):
                load_plugin(spec)
    plugin_keys = {}
    # plugin keys are validated by each plugin's Options model; find the plugins first
    lookups = (("data", "source", DATA, None), ("model", "cell", CELLS, "lstm"),
               ("head", "type", HEADS, DEFAULT_HEAD))
    plugins = {}
    for section, key, registry, default in lookups:
        sec = raw.get(section)
        name = sec.get(key, default) if isinstance(sec, dict) else default
        if name is None or not isinstance(name, str):
            continue
        try:
            plugins[section] = registry.get(name)
        except RegistryError as exc:
            errors.add((section, key), str(exc))
    bases = {"data": DataConfig, "model": ModelConfig, "head": HeadConfig}
    plugin_opts = {}
    for section, plugin in plugins.items():
        sec = raw.get(section) or {}
        if not isinstance(sec, dict):
            continue
        own = {k: v for k, v in sec.items() if k not in bases[section].model_fields}
        opts_cls = getattr(plugin, "Options", None)
        if opts_cls is None:
            continue
        try:
            plugin_opts[section] = opts_cls.model_validate(own, strict=True)
        except ValidationError as exc:
            errors.from_pydantic(exc, opts_cls, (section,), extra_allowed=bases[section].model_fields)
        plugin_keys[section] = set(opts_cls.model_fields)
    # base validation; plugin keys are removed so that 'extra=allow' sections see only unknowns
    base_raw = copy.deepcopy(raw)
    for section in bases:
        if isinstance(base_raw.get(section), dict) and section in plugins:
            for k in plugin_keys.get(section, set()):
                base_raw[section].pop(k, None)
    try:
        config = RecipeModel.model_validate(base_raw, strict=True)  # 'units: true' is no integer
    except ValidationError as exc:
        errors.from_pydantic(exc, RecipeModel, ())
        config = None
    head_cls = plugins.get("head")
    if config is not None and head_cls is not None:  # the keys the head cannot apply (its own rules)
        for key, message in head_cls.check_recipe(config, plugin_opts.get("head")) or ():
            errors.add(key, message)
    cell = plugins.get("model")
    if config is not None and config.model.weight_drop and cell is not None \
            and not getattr(cell, "supports_weight_drop", False):
        errors.add(("model", "weight_drop"), f"{config.model.weight_drop} is not supported by cell "
                                             f"'{config.model.cell}': weight dropping (DropConnect on "
                                             f"the recurrent kernel) is implemented by the built-in "
                                             f"'lstm' and 'gru' cells. Use one of them, or remove "
                                             f"model.weight_drop (model.dropout still applies).")
    if config is not None:
        _check_training_knobs(config, plugin_opts.get("head"), errors)
        _check_subword(config, plugins.get("data"), plugin_opts.get("data"), plugins.get("head"), errors)
        _check_char_embedding(config, plugins.get("data"), plugin_opts.get("data"), plugins.get("head"),
                              errors)
    check = getattr(plugins.get("data"), "check_recipe", None)
    if config is not None and "data" in plugin_opts and callable(check):
        for key, message in check(plugin_opts["data"], config) or ():  # e.g. table columns vs the head
            errors.add(("data", key), message)
    errors.raise_if_any()
    data_opts = plugin_opts.get("data")
    if data_opts is not None:  # file paths are kept absolute so a run's recipe copy stays valid
        for key in data_path_keys(data_opts):
            val = getattr(data_opts, key)
            if val and isinstance(val, (str, list, dict)):  # a file, a list, {split: file(s)}
                setattr(data_opts, key, _absolute(val, base_of, f"data.{key}"))
    head_opts = plugin_opts.get("head")
    # a head's file paths (``path_keys``) are read from the recipe's folder like data files; its run
    # directories (``run_keys``, e.g. seq2seq head.distill.runs) from the current directory, where
    # seqkit train wrote them
    keys = [(k, False) for k in getattr(type(head_opts), "path_keys", ())] + \
        [(k, True) for k in getattr(type(head_opts), "run_keys", ())]
    for dotted, is_run in keys:
        *parents, last = dotted.split(".")
        holder = head_opts
        for part in parents:
            holder = getattr(holder, part, None)
        if holder is not None and getattr(holder, last, None):
            setattr(holder, last, _absolute(getattr(holder, last), os.getcwd() if is_run else base_of,
                                            f"head.{dotted}"))
    return Recipe(config=config,
                  data_options=plugin_opts.get("data", _empty()),
                  cell_options=plugin_opts.get("model", _empty()),
                  head_options=plugin_opts.get("head", _empty()),
                  path=source, base_dir=base_dir)


def _check_training_knobs(config: RecipeModel, head_opts, errors: "_Errors") -> None:
    """Refuse ``training`` keys the chosen head cannot apply (named, with the fix)."""
    t = config.training
    if t.label_smoothing > 0 and config.data.layout == "stream":
        errors.add(("training", "label_smoothing"), "the stream language model (data.layout stream) "
                                                    "trains on its own truncated-BPTT loss, without "
                                                    "label smoothing. Remove training.label_smoothing.")
    if t.label_smoothing > 0 and getattr(head_opts, "crf", False):
        errors.add(("training", "label_smoothing"), "a CRF tagger (head.crf: true) trains on the CRF's "
                                                    "sequence likelihood, which has no per-token targets "
                                                    "to smooth. Remove training.label_smoothing or set "
                                                    "head.crf: false.")


def _check_char_embedding(config, source, options, head, errors) -> None:
    """``model.char_embedding`` where it applies: a head reading words (``Head.word_inputs``;
    not characters, not sentencepiece pieces), with a registered cell. A head without word inputs
    is refused by its :meth:`~seqkit.heads.base.Head.check_recipe`."""
    ce = config.model.char_embedding
    if ce is None or head is None or not head.word_inputs:
        return
    key = ("model", "char_embedding")
    try:
        CELLS.get(ce.cell)
    except RegistryError as exc:
        errors.add(key + ("cell",), str(exc))
    if config.data.tokenizer == "sentencepiece":
        errors.add(key, "data.tokenizer sentencepiece gives subword pieces, not words; character-"
                        "aware inputs read whole words. Use data.tokenizer: whitespace or remove "
                        "model.char_embedding.")
        return
    if source is None:  # an unknown source: reported already
        return

    mode = text_tokenizer(types.SimpleNamespace(data=config.data, head=config.head,
                                                data_options=options if options is not None else _empty()))
    if mode == "char":
        errors.add(key, f"the source '{config.data.source}' splits its text into characters "
                        f"(data.tokenizer: char), so every input is already one character and a "
                        f"character encoder per input adds nothing. Set data.tokenizer: whitespace "
                        f"(word inputs) or remove model.char_embedding.")


def _check_subword(config, source, options, head_cls, errors) -> None:
    """``data.tokenizer: sentencepiece`` where it applies: raw text the source splits for the
    language model, the acceptor or the seq2seq source, or a seq2seq ``data.target_tokenizer``;
    ``data.subword`` only with one of them."""
    d = config.data
    target_sp = getattr(options, "target_tokenizer", None) == "sentencepiece"
    if (d.tokenizer == "sentencepiece" or target_sp) and importlib.util.find_spec("sentencepiece") is None:
        errors.add(("data", "tokenizer" if d.tokenizer == "sentencepiece" else "target_tokenizer"),
                   "'sentencepiece' needs the sentencepiece package: pip install \"seqkit[subword]\".")
    if (d.tokenizer == "sentencepiece" or target_sp) and d.subword is None:
        d.subword = SubwordConfig()  # the defaults, written out in the run's recipe.yaml
    if d.tokenizer != "sentencepiece":
        if d.subword is not None and not target_sp:
            errors.add(("data", "subword"), f"sets the model of data.tokenizer: sentencepiece, but "
                                            f"data.tokenizer is '{d.tokenizer}'. Set data.tokenizer: "
                                            f"sentencepiece or remove data.subword.")
        return
    if d.source == "text_corpus":
        errors.add(("data", "tokenizer"), "'sentencepiece' trains its model on the whole training "
                                          "split in memory, which a text_corpus (a corpus larger than "
                                          "memory) is not read into; use char or whitespace, or the "
                                          "text_lines source for a corpus that fits.")
        return
    if head_cls is not None and not head_cls.subword_inputs:
        errors.add(("data", "tokenizer"), f"'sentencepiece' would cut the {config.head.type}'s "
                                          f"tokens into pieces that no longer match its one-target-"
                                          f"per-token targets; it reads char or whitespace tokens.")
        return
    if head_cls is not None and head_cls.word_inputs and source is not None and options is not None:
        splits = getattr(source, "splits_text", None)
        if callable(splits) and not splits(options):
            errors.add(("data", "tokenizer"), f"'sentencepiece' splits raw text, but the source "
                                              f"'{d.source}' gives pre-split tokens here; use a "
                                              f"text column (e.g. data.text_column / text_key) or "
                                              f"data.tokenizer: whitespace.")


def data_path_keys(data_opts) -> list[str]:
    """The keys of a data source's options that hold paths: ``path``, ``vocab_file``, ``*_path``,
    ``data_files`` (a file, a list, or ``{split: file(s)}``) and the source's own
    ``Options.path_keys`` (top-level keys, e.g. tfds's ``data_dir``)."""
    declared = getattr(type(data_opts), "path_keys", ())
    return [k for k in type(data_opts).model_fields
            if k in ("path", "vocab_file", "data_files") or k in declared or k.endswith("_path")]


def path_values(val) -> list[str]:
    """Every path string in a path key's value (a string, a list, or a mapping of them)."""
    if isinstance(val, str):
        return [val] if val else []
    if isinstance(val, dict):
        return [p for v in val.values() for p in path_values(v)]
    if isinstance(val, (list, tuple)):
        return [p for v in val for p in path_values(v)]
    return []


def _absolute(val, base_dir, key: str = ""):
    """A recipe path (or a list / ``{name: path(s)}`` of them) made absolute from ``base_dir``: a
    folder, or a function of the dotted key (``key``, then ``key.NAME`` inside a mapping) giving
    the folder, so each entry of a mapping is read from where it was written."""
    if isinstance(val, dict):
        return {k: _absolute(v, base_dir, f"{key}.{k}") for k, v in val.items()}
    if isinstance(val, list):
        return [_absolute(v, base_dir, key) for v in val]
    if callable(base_dir):
        base_dir = base_dir(key)
    p = os.path.expanduser(val)
    return p if os.path.isabs(p) else os.path.normpath(os.path.join(base_dir, p))


def _empty():
    return NoOptions()
