"""Hugging Face ``datasets`` read from local files only -- never a hub download.

Two ways in (recipe keys under ``data``):

* ``path: FOLDER``: a folder written by ``Dataset.save_to_disk`` or
  ``DatasetDict.save_to_disk`` (read with ``datasets.load_from_disk``);
* ``builder: csv | json | parquet | text`` with ``data_files``: local files read by
  that packaged builder (``datasets.load_dataset(builder, data_files=...)``).
  ``data_files`` is a file, a glob, a list of them, or ``{split: file(s)}``. As in
  ``load_dataset``, ``path: csv`` with ``data_files`` names the builder too; with
  ``data_files`` alone the builder follows the files' extension.

Any other builder name (a Hub id such as ``imdb``) and any URL are refused: seqkit
never downloads. Loading runs with ``HF_DATASETS_OFFLINE=1`` and ``HF_HUB_OFFLINE=1``
(restored afterwards), and a builder's cache goes to a temporary folder removed
after reading (nothing is written to ``~/.cache``).

Columns: ``text_column``, ``tokens_column``, ``label_column``, ``tags_column``,
``source_column``, ``target_column``; which are named decides the head's record
shape (:mod:`seqkit.data.columns`). ``ClassLabel`` features (or sequences of them)
give the class names.

Splits: a ``DatasetDict``'s own splits are used -- ``train_split`` (default
``train``), ``valid_split`` (default the first of ``validation``, ``valid``,
``dev`` present) and ``test_split`` (default ``test`` when present); a missing
valid or test split is carved from train by ``data.split``. A single ``Dataset``
is divided by ``data.split``.

``datasets`` is imported only when such a source is read (``pip install
"seqkit[hf]"``).

The optional package datasets is imported where used, so seqkit works without it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from seqkit import log
from seqkit.data.base import DataSource
from seqkit.data.columns import ROLES, drop_blank_texts, row_to_record, shape_error
from seqkit.errors import DataError, RecipeError, did_you_mean
from seqkit.registry import register_data

#: packaged builders that read local files and nothing else
LOCAL_BUILDERS = ("csv", "json", "parquet", "text")
_EXTENSIONS = {".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet",
               ".txt": "text"}
_VALID_NAMES = ("validation", "valid", "dev")
_OFFLINE_VARS = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")
PIP_EXTRA = 'pip install "seqkit[hf]"'


def _files(data_files) -> list:
    if isinstance(data_files, str):
        return [data_files]
    if isinstance(data_files, dict):
        return [f for v in data_files.values() for f in _files(v)]
    return list(data_files or [])


def save_hint(name: str) -> str:
    """How to turn a Hub data set into a local folder this source reads."""
    folder = name.replace("/", "_") + "_local"
    return (f"seqkit never downloads: where you have a network, save it to a local folder once with "
            f"`python -c \"import datasets; datasets.load_dataset('{name}').save_to_disk('{folder}')\"` "
            f"and set data.path: {folder} (then data.builder and data.data_files are not needed); or "
            f"write it as CSV/JSON/parquet/text files and read them with data.builder "
            f"({', '.join(LOCAL_BUILDERS)}) and data.data_files.")


def _fail(key: str, value, message: str):
    """Raise a validation error located at ``data.KEY`` (the recipe names that key's line)."""
    raise ValidationError.from_exception_data(
        "HfDatasetsOptions", [{"type": "value_error", "loc": (key,), "input": value,
                               "ctx": {"error": ValueError(message)}}])


class HfDatasetsOptions(BaseModel):
    """Recipe keys of ``hf_datasets`` (under ``data``); see the module docstring."""

    model_config = ConfigDict(extra="forbid")
    path: Optional[str] = None
    builder: Optional[str] = None
    data_files: Optional[Union[str, list[str], dict[str, Union[str, list[str]]]]] = None
    text_column: Optional[str] = None
    tokens_column: Optional[str] = None
    label_column: Optional[str] = None
    tags_column: Optional[str] = None
    source_column: Optional[str] = None
    target_column: Optional[str] = None
    #: how a string target (seq2seq) is split into symbols; default: data.tokenizer
    target_tokenizer: Optional[Literal["char", "whitespace", "sentencepiece"]] = None
    train_split: str = "train"
    valid_split: Optional[str] = None
    test_split: Optional[str] = None

    @model_validator(mode="after")
    def _check(self):
        for key, val in (("path", self.path), ("builder", self.builder),
                         *(("data_files", f) for f in _files(self.data_files))):
            if isinstance(val, str) and "://" in val:
                _fail(key, val, f"'{val}' is a URL; seqkit reads local files and folders only and never "
                                f"downloads. Download it yourself and name the local copy.")
        if self.data_files is not None and not _files(self.data_files):
            _fail("data_files", self.data_files, "no file named; give a file, a glob, a list or {split: file}.")
        builder_key = "builder"
        if self.data_files is not None and self.builder is None:
            if self.path is not None:  # load_dataset(path="csv", data_files=...): path is the builder
                self.builder, self.path, builder_key = self.path, None, "path"
            else:
                exts = {os.path.splitext(f)[1].lower() for f in _files(self.data_files)}
                kinds = {_EXTENSIONS.get(e) for e in exts}
                if len(kinds) != 1 or None in kinds:
                    _fail("data_files", self.data_files,
                          f"cannot tell the builder from the extension(s) {', '.join(sorted(exts))}; set "
                          f"data.builder to one of {', '.join(LOCAL_BUILDERS)}.")
                self.builder = kinds.pop()
        if self.builder is not None:
            if self.builder not in LOCAL_BUILDERS:
                _fail(builder_key, self.builder,
                      ("with data.data_files, data.path names the builder: " if builder_key == "path" else "")
                      + f"'{self.builder}' is not one of the local builders ({', '.join(LOCAL_BUILDERS)}); it "
                      f"would be a Hugging Face Hub data set, which seqkit does not fetch. "
                      + save_hint(self.builder))
            if self.path is not None:
                _fail("path", self.path, "give data.path (a save_to_disk folder) or data.builder with "
                                         "data.data_files (local files), not both.")
            if self.data_files is None:
                _fail("builder", self.builder, f"the '{self.builder}' builder needs data.data_files: the "
                                               f"local files to read (a file, a glob, a list or {{split: file}}).")
        elif self.path is None:
            raise ValueError("give data.path (a folder written by save_to_disk) or data.data_files "
                             "(local csv/json/parquet/text files, with data.builder).")
        err = shape_error(self.columns(), "column")
        if err:
            raise ValueError(err)
        return self

    def columns(self) -> dict:
        """``{role: column name or None}`` (see :mod:`seqkit.data.columns`)."""
        return {r: getattr(self, f"{r}_column") for r in ROLES}


@contextlib.contextmanager
def offline_datasets():
    """Import ``datasets`` (lazily) and hold it offline: ``HF_DATASETS_OFFLINE=1`` and
    ``HF_HUB_OFFLINE=1`` in the environment and in the libraries' read-at-import settings,
    progress bars off; everything is restored on exit.

    Yields:
        the ``datasets`` module.

    Raises:
        RecipeError: ``datasets`` is not installed (naming the pip extra).
    """
    saved_env = {k: os.environ.get(k) for k in _OFFLINE_VARS}
    os.environ.update({k: "1" for k in _OFFLINE_VARS})
    patched = []
    try:
        try:
            import datasets
        except ImportError as exc:
            raise RecipeError(f"data.source hf_datasets: needs the Hugging Face 'datasets' package, "
                              f"which is not installed ({exc}). Install it with `{PIP_EXTRA}`.") from exc
        import datasets.config as dconf

        mods = [dconf]
        try:
            import huggingface_hub.constants as hconst

            mods.append(hconst)
        except ImportError:  # pragma: no cover - datasets depends on huggingface_hub
            pass
        for mod in mods:
            for name in _OFFLINE_VARS:
                if hasattr(mod, name):
                    patched.append((mod, name, getattr(mod, name)))
                    setattr(mod, name, True)
        bars = datasets.utils.are_progress_bars_disabled()
        datasets.disable_progress_bars()
        try:
            yield datasets
        finally:
            if not bars:
                datasets.enable_progress_bars()
    finally:
        for mod, name, value in reversed(patched):
            setattr(mod, name, value)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@register_data("hf_datasets")
class HfDatasets(DataSource):
    """A Hugging Face data set from a ``save_to_disk`` folder or local files (never the Hub)."""

    Options = HfDatasetsOptions

    @classmethod
    def splits_text(cls, options) -> bool:
        """Acceptor/tagger inputs come from ``text_column`` split by ``data.tokenizer``."""
        return bool(getattr(options, "text_column", None)) and not getattr(options, "tokens_column", None)

    def describe(self) -> str:
        o = self.options
        if o.builder:
            return f"hf_datasets {o.builder} data_files={self._data_files()}"
        return f"hf_datasets {o.path}"

    def _data_files(self):
        df = self.options.data_files
        fix = self.recipe.resolve_path if self.recipe is not None else (lambda p: p)
        if isinstance(df, str):
            return fix(df)
        if isinstance(df, dict):
            return {k: self._fix_list(v, fix) for k, v in df.items()}
        return [fix(f) for f in df]

    @staticmethod
    def _fix_list(v, fix):
        return fix(v) if isinstance(v, str) else [fix(f) for f in v]

    def _open(self, datasets, cache_dir: str):
        """The ``Dataset`` or ``DatasetDict`` (in memory), and how messages name it."""
        o = self.options
        if o.builder:
            files = self._data_files()
            missing = [f for f in _files(files) if not any(c in f for c in "*?[") and not os.path.isfile(f)]
            if missing:
                raise DataError(f"data.data_files: no such file '{missing[0]}'. Fix the path in the recipe "
                                f"(relative paths are read from the recipe's folder; given with --set, from the "
                                f"current directory).")
            try:
                ds = datasets.load_dataset(o.builder, data_files=files, cache_dir=cache_dir,
                                           keep_in_memory=True)
            except Exception as exc:  # the builders raise many kinds (pyarrow, pandas, FileNotFound)
                raise DataError(f"data.data_files: the '{o.builder}' builder cannot read {files} "
                                f"({type(exc).__name__}: {exc}). Check the files' format.") from exc
            return ds, files if isinstance(files, str) else f"{o.builder} {files}"
        path = o.path if self.recipe is None else self.recipe.resolve_path(o.path)
        if not os.path.isdir(path):
            given = os.path.relpath(path, self.recipe.base_dir) if self.recipe is not None else path
            what = "a file" if os.path.exists(path) else "no such folder"
            raise RecipeError(f"data.path: '{path}' is {what}; hf_datasets reads a folder written by "
                              f"Dataset.save_to_disk / DatasetDict.save_to_disk (or local files with "
                              f"data.builder and data.data_files). If '{given}' names a Hugging Face "
                              f"Hub data set: " + save_hint(given))
        _check_saved_files(path)
        try:
            return datasets.load_from_disk(path, keep_in_memory=True), path
        except FileNotFoundError as exc:
            raise DataError(f"data.path: '{path}' is not a folder written by save_to_disk (no "
                            f"dataset_info.json / dataset_dict.json): {exc}. For CSV, JSON, parquet or "
                            f"text files use data.builder and data.data_files.") from exc
        except Exception as exc:
            raise DataError(f"data.path: cannot read the saved data set '{path}' "
                            f"({type(exc).__name__}: {exc}).") from exc

    def _pick_splits(self, names: list, where: str) -> dict:
        """``{seqkit split: data set split}`` for a DatasetDict's ``names``."""
        o = self.options
        out = {}
        for split, asked, default in (("train", o.train_split, None),
                                      ("valid", o.valid_split, next((n for n in _VALID_NAMES if n in names), None)),
                                      ("test", o.test_split, "test" if "test" in names else None)):
            name = asked or default
            if name is None:
                continue
            if name not in names:
                raise DataError(f"data.{split}_split: the data set {where} has no split '{name}'; its "
                                f"splits: {', '.join(names)}.{did_you_mean(name, names)} Set "
                                f"data.{split}_split to one of them.")
            out[split] = name
        unused = [n for n in names if n not in out.values()]
        if unused:
            log.info(f"{where}: split(s) {', '.join(unused)} not used (seqkit reads "
                     f"{', '.join(f'{v} as {k}' for k, v in out.items())}).")
        return out

    def _records(self, ds, where: str) -> list:
        o = self.options
        cols = o.columns()
        present = list(ds.column_names)
        for role, col in cols.items():
            if col and col not in present:
                raise DataError(f"data.{role}_column: the data set {where} has no column '{col}'; its "
                                f"columns: {', '.join(present)}.{did_you_mean(col, present)}")
        feats = ds.features
        names = {}
        for role in ("label", "tags"):
            if cols[role]:
                f = feats[cols[role]]
                f = getattr(f, "feature", f)  # Sequence/List(ClassLabel) -> ClassLabel
                names[role] = list(f.names) if hasattr(f, "names") else None
        d = self.recipe.data if self.recipe is not None else None
        tokenizer = d.tokenizer if d is not None else "whitespace"
        target_tokenizer = o.target_tokenizer or tokenizer
        table = ds.select_columns(sorted({c for c in cols.values() if c})).to_dict()
        n = ds.num_rows
        rows = ({c: table[c][i] for c in table} for i in range(n))
        recs = [row_to_record(row, cols, names=names, tokenizer=tokenizer, target_tokenizer=target_tokenizer,
                              where=f"{where} row {i}") for i, row in enumerate(rows)]
        return drop_blank_texts(recs, cols, where)

    def load(self) -> dict:
        """``{"all": records}`` (a Dataset) or the DatasetDict's splits as seqkit's.

        Raises:
            RecipeError: ``datasets`` is not installed (with ``pip install "seqkit[hf]"``); ``path``
                is no folder (with how to save a Hub data set locally).
            DataError: unreadable files, a missing column or split (naming what is there), null
                values or values of the wrong kind (naming the row).
        """
        with offline_datasets() as datasets, tempfile.TemporaryDirectory(prefix="seqkit-hf-") as cache:
            ds, where = self._open(datasets, cache)
            if isinstance(ds, datasets.DatasetDict):
                picked = self._pick_splits(list(ds), where)
                files = self._data_files() if self.options.builder else None
                out = {split: self._records(ds[name], f"{files[name]} [{name}]" if isinstance(files, dict)
                                            and isinstance(files.get(name), str) else f"{where} [{name}]")
                       for split, name in picked.items()}
            elif isinstance(ds, datasets.Dataset):
                out = {"all": self._records(ds, where)}
            else:
                raise DataError(f"data: {where} is a {type(ds).__name__}; hf_datasets reads a Dataset or "
                                f"DatasetDict.")
        for split, recs in out.items():
            if not recs:
                raise DataError(f"data: the split '{split}' of {where} has no rows.")
        return out


def _check_saved_files(path: str) -> None:
    """Refuse a ``save_to_disk`` folder whose ``state.json`` names a data file outside it
    (``"_data_files": [{"filename": "../other/data.arrow"}]``): the folder is data a user handed
    seqkit, and it reads only the files inside it.

    Raises:
        DataError: a file name with a folder in it, naming the ``state.json``.
    """
    from seqkit.runs.json_files import bounded_json

    folders = [path]
    dict_file = os.path.join(path, "dataset_dict.json")
    if os.path.isfile(dict_file):
        try:
            splits = bounded_json(dict_file).get("splits") or []
        except (OSError, ValueError, AttributeError):
            return  # the loader's own message names what is wrong with it
        folders = [os.path.join(path, str(name)) for name in splits if isinstance(name, str)]
        bad = [name for name in splits if not isinstance(name, str) or os.path.basename(name) != name
               or name in (".", "..")]
        if bad:
            raise DataError(f"{dict_file}: the split {bad[0]!r} is not a folder name inside "
                            f"{path}; seqkit reads only the files inside a saved data set. Save it again.")
    for folder in folders:
        state = os.path.join(folder, "state.json")
        if not os.path.isfile(state):
            continue
        try:
            files = bounded_json(state).get("_data_files") or []
        except (OSError, ValueError, AttributeError):
            continue  # the loader's own message names what is wrong with it
        for entry in files:
            name = entry.get("filename") if isinstance(entry, dict) else None
            if not isinstance(name, str) or os.path.basename(name) != name or name in ("", ".", ".."):
                raise DataError(f"{state}: names the data file {name!r}, not a file name inside "
                                f"{folder}; seqkit reads only the files inside a saved data set. Save it "
                                f"again with Dataset.save_to_disk.")
