"""TensorFlow Datasets by name (``tfds.load``): works where the user has a network
or a prepared local TFDS data dir (``data.data_dir``); ``data.download: false``
refuses to fetch.

Feature keys map the examples onto records, one shape per head
(:mod:`seqkit.data.columns`): ``data.text_key`` alone (a string: language model);
``data.tokens_key`` (a sequence of strings) or ``data.text_key`` (a string,
tokenized by ``data.tokenizer``) plus ``data.tags_key`` (a sequence of class ids
or strings: tagger) or ``data.label_key`` (one class: acceptor);
``data.source_key`` plus ``data.target_key`` (strings, the target split into
symbols by ``data.target_tokenizer``, default ``data.tokenizer``, or a sequence
of strings: seq2seq). Class ids are turned into names with the data set's
``ClassLabel`` names where it has them.
Splits: ``data.train_split`` (required), ``data.valid_split``, ``data.test_split``.

TensorFlow Datasets is imported inside the functions that use it, so importing this module does not
load it.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import BaseModel, ConfigDict

from seqkit.data.base import DataSource, downloads_allowed
from seqkit.data.columns import ROLES, drop_blank_texts, row_to_record, shape_error
from seqkit.errors import DataError
from seqkit.registry import register_data


class TfdsOptions(BaseModel):
    """Recipe keys of ``tfds`` (under ``data``)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    data_dir: Optional[str] = None
    download: bool = True
    #: keys holding paths besides seqkit's naming rule (``path``, ``vocab_file``, ``*_path``,
    #: ``data_files``): made absolute when the recipe is read, from the recipe's folder
    path_keys: ClassVar[tuple] = ("data_dir",)
    train_split: str = "train"
    valid_split: Optional[str] = None
    test_split: Optional[str] = "test"
    tokens_key: Optional[str] = None
    text_key: Optional[str] = None
    tags_key: Optional[str] = None
    label_key: Optional[str] = None
    source_key: Optional[str] = None
    target_key: Optional[str] = None
    #: how a string target (seq2seq) is split into symbols; default: data.tokenizer
    target_tokenizer: Optional[Literal["char", "whitespace", "sentencepiece"]] = None

    def keys(self) -> dict:
        """``{role: feature key or None}`` (see :mod:`seqkit.data.columns`)."""
        return {r: getattr(self, f"{r}_key") for r in ROLES}


def _names(feature):
    """Class names of a (sequence of) ``ClassLabel`` feature, else ``None``."""
    f = getattr(feature, "feature", feature)
    return list(f.names) if hasattr(f, "names") else None


def records_from_examples(examples, info_features, o: TfdsOptions, tokenizer: str, where: str) -> list:
    """Map TFDS numpy examples (dicts) onto records (see the module docstring).

    Raises:
        DataError: a feature key the data set does not have, or keys that make no record shape.
    """
    keys = o.keys()
    err = shape_error(keys, "key")
    if err:
        raise DataError(f"data (tfds): {err}")
    for role, k in keys.items():
        if k and k not in info_features:
            raise DataError(f"data.{role}_key: the TFDS data set {o.name} has no feature '{k}'; it has "
                            f"{', '.join(sorted(info_features))}.")
    names = {r: _names(info_features[keys[r]]) for r in ("tags", "label") if keys[r]}
    recs = [row_to_record(ex, keys, names=names, tokenizer=tokenizer,
                          target_tokenizer=o.target_tokenizer or tokenizer,
                          where=f"{where} example {i}", key="key")
            for i, ex in enumerate(examples)]
    return drop_blank_texts(recs, keys, where)


@register_data("tfds")
class Tfds(DataSource):
    """A TensorFlow Datasets data set by name (network or local data dir)."""

    Options = TfdsOptions

    @classmethod
    def splits_text(cls, options) -> bool:
        """Acceptor/tagger inputs come from ``text_key`` split by ``data.tokenizer``."""
        return bool(getattr(options, "text_key", None)) and not getattr(options, "tokens_key", None)

    def describe(self):
        return f"tfds {self.options.name}" + (f" ({self.options.data_dir})" if self.options.data_dir else "")

    def load(self):
        import tensorflow_datasets as tfds

        o = self.options
        err = shape_error(o.keys(), "key")
        if err:
            raise DataError(f"data (tfds): {err}")
        tokenizer = self.recipe.data.tokenizer if self.recipe is not None else "whitespace"
        out = {}
        splits = {"train": o.train_split, "valid": o.valid_split, "test": o.test_split}
        try:
            builder = tfds.builder(o.name, data_dir=o.data_dir)
            if o.download and not builder.is_prepared() and not downloads_allowed():
                raise DataError(f"data.name: the TFDS data set '{o.name}' is not prepared "
                                f"({builder.data_dir}), and reading a run's data never downloads it: a run "
                                f"directory is data and may not reach the network. Prepare it once with "
                                f"`seqkit validate RUN/recipe.yaml` (which downloads it), or set "
                                f"data.data_dir to a prepared copy.")
            if o.download:
                builder.download_and_prepare()
        except DataError:
            raise
        except Exception as exc:
            raise DataError(f"data.name: cannot open the TFDS data set '{o.name}' ({type(exc).__name__}: "
                            f"{exc}). Check the name, the network, or data.data_dir.") from exc
        for split, name in splits.items():
            if not name:
                continue
            try:
                ds = builder.as_dataset(split=name)
            except Exception as exc:
                raise DataError(f"data.{split}_split: TFDS data set '{o.name}' has no split '{name}' "
                                f"prepared ({type(exc).__name__}: {exc}).") from exc
            out[split] = records_from_examples(tfds.as_numpy(ds), builder.info.features, o, tokenizer,
                                               f"tfds {o.name}[{name}]")
        return out
