"""TensorFlow Datasets by name (``tfds.load``): works where the user has a network
or a prepared local TFDS data dir (``data.data_dir``); ``data.download: false``
refuses to fetch.

Feature keys map the examples onto records: ``data.tokens_key`` (a sequence of
strings) plus ``data.tags_key`` (sequence of class ids or strings: tagger) or
``data.label_key`` (one class: acceptor), or ``data.text_key`` (a string,
tokenized by ``data.tokenizer``) plus ``data.label_key``. Class ids are turned
into names with the data set's ``ClassLabel`` names where it has them.
Splits: ``data.train_split`` (required), ``data.valid_split``, ``data.test_split``.
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict

from seqkit.data.base import DataSource
from seqkit.data.records import Record
from seqkit.data.vocab import tokenize
from seqkit.errors import DataError
from seqkit.registry import register_data


class TfdsOptions(BaseModel):
    """Recipe keys of ``tfds`` (under ``data``)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    data_dir: Optional[str] = None
    download: bool = True
    train_split: str = "train"
    valid_split: Optional[str] = None
    test_split: Optional[str] = "test"
    tokens_key: Optional[str] = None
    text_key: Optional[str] = None
    tags_key: Optional[str] = None
    label_key: Optional[str] = None


def _names(feature):
    """Class names of a (sequence of) ``ClassLabel`` feature, else ``None``."""
    f = getattr(feature, "feature", feature)
    return list(f.names) if hasattr(f, "names") else None


def _text(x) -> str:
    return x.decode("utf-8") if isinstance(x, bytes) else str(x)


def records_from_examples(examples, info_features, o: TfdsOptions, tokenizer: str, where: str) -> list:
    """Map TFDS numpy examples (dicts) onto records (see the module docstring).

    Raises:
        DataError: a feature key the data set does not have.
    """
    keys = [k for k in (o.tokens_key, o.text_key, o.tags_key, o.label_key) if k]
    for k in keys:
        if k not in info_features:
            raise DataError(f"data: the TFDS data set {o.name} has no feature '{k}'; it has "
                            f"{', '.join(sorted(info_features))}.")
    tag_names = _names(info_features[o.tags_key]) if o.tags_key else None
    label_names = _names(info_features[o.label_key]) if o.label_key else None
    out = []
    for i, ex in enumerate(examples):
        toks = ([_text(t) for t in ex[o.tokens_key]] if o.tokens_key
                else tokenize(_text(ex[o.text_key]), tokenizer))
        rec = Record(tokens=toks, where=f"{where} example {i}")
        if o.tags_key:
            rec.tags = [tag_names[int(t)] if tag_names else _text(t) for t in ex[o.tags_key]]
        if o.label_key:
            v = ex[o.label_key]
            rec.label = label_names[int(v)] if label_names else _text(v)
        out.append(rec)
    return out


@register_data("tfds")
class Tfds(DataSource):
    """A TensorFlow Datasets data set by name (network or local data dir)."""

    Options = TfdsOptions

    def describe(self):
        return f"tfds {self.options.name}" + (f" ({self.options.data_dir})" if self.options.data_dir else "")

    def load(self):
        import tensorflow_datasets as tfds

        o = self.options
        if not o.tokens_key and not o.text_key:
            raise DataError("data: a tfds source needs data.tokens_key or data.text_key (the input feature).")
        if not o.tags_key and not o.label_key:
            raise DataError("data: a tfds source needs data.tags_key (tagger) or data.label_key (acceptor).")
        tokenizer = self.recipe.data.tokenizer if self.recipe is not None else "whitespace"
        out = {}
        splits = {"train": o.train_split, "valid": o.valid_split, "test": o.test_split}
        try:
            builder = tfds.builder(o.name, data_dir=o.data_dir)
            if o.download:
                builder.download_and_prepare()
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
