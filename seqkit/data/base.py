"""The data-source contract.

A data source reads raw examples from somewhere (a file, a package, TFDS) and
returns them as :class:`~seqkit.data.records.Record` lists, in a stable order:

* :meth:`DataSource.load` returns ``{"all": [...]}`` when the recipe's
  seeded ``data.split`` divides the examples, or named splits
  ``{"train": [...], "valid": [...], "test": [...]}`` (``valid``/``test``
  optional) when the files say which example belongs where; a missing
  ``valid`` or ``test`` is then carved from ``train`` by ``data.split``.
* Plain text sources only implement :meth:`DataSource.examples` (a list of
  strings); the default :meth:`load` wraps each string as ``Record(text=...)``.

The seqkit modules ``seqkit --help`` does not load are imported inside the functions that use them,
since ``seqkit --help`` imports this module.
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
import os
import sys
from typing import ClassVar, Optional

from pydantic import BaseModel, ConfigDict

from seqkit.cells.base import NoOptions
from seqkit.errors import DataError, SeqkitError
from seqkit.registry import DATA


_READING_A_RUN = contextvars.ContextVar("seqkit_reading_a_run", default=False)


@contextlib.contextmanager
def reading_a_run():
    """Within the block the data is read for a run that already exists (evaluate, export, ...):
    a run is data, so its recipe may not make seqkit download anything (:func:`downloads_allowed`)."""
    token = _READING_A_RUN.set(True)
    try:
        yield
    finally:
        _READING_A_RUN.reset(token)


def downloads_allowed() -> bool:
    """False while a run's data is read (:func:`reading_a_run`); sources that can download
    (``tfds``) then read only what is prepared already."""
    return not _READING_A_RUN.get()


class DataSource:
    """Base class for data sources; subclass and decorate with ``@register_data``.

    Args:
        options: an instance of the subclass's ``Options`` (validated recipe keys).
        recipe: the whole :class:`seqkit.recipe.Recipe` (for paths relative to it).
    """

    Options: ClassVar[type[BaseModel]] = NoOptions
    #: True when the source splits raw text with ``data.tokenizer`` (so ``seqkit predict``
    #: tokenizes text input the same way); False: tokens come pre-split (white space).
    tokenizes_text: ClassVar[bool] = False

    def __init__(self, options: BaseModel, recipe=None):
        self.options = options
        self.recipe = recipe

    @classmethod
    def check_recipe(cls, options: BaseModel, config) -> list:
        """Recipe-level checks of this source's keys against the rest of the recipe.

        Called while the recipe is validated (before any file is read), so a key that does not
        fit the head is a :class:`~seqkit.errors.RecipeError` naming ``data.KEY`` and its line.

        Args:
            options: the validated ``Options`` instance.
            config: the validated :class:`seqkit.recipe.RecipeModel` (``config.head.type``, ...).

        Returns:
            ``[(key under data, message), ...]``; empty when all is well.
        """
        return []

    @classmethod
    def text_tokenizer(cls, recipe) -> str:
        """How ``seqkit predict`` splits a line of text input for an acceptor or tagger run:
        ``recipe.data.tokenizer`` when this source tokenizes raw text (:meth:`splits_text`), else
        ``"whitespace"`` (pre-split tokens)."""
        return recipe.data.tokenizer if cls.splits_text(recipe.data_options) else "whitespace"

    @classmethod
    def splits_text(cls, options: BaseModel) -> bool:
        """True when, with these recipe ``options``, acceptor/tagger inputs are raw text split by
        ``data.tokenizer`` (default: :attr:`tokenizes_text`); sources whose input column is
        chosen in the recipe (``tfds``, ``hf_datasets``) override this."""
        return cls.tokenizes_text

    def describe(self) -> str:
        """One line saying where the examples come from (for logs and metrics.json)."""
        return type(self).__name__

    def examples(self) -> list[str]:
        """Return every example as a string (text sources).

        Raises:
            seqkit.errors.DataError: the data is missing, empty or unreadable.
            TypeError: the source overrides neither this nor :meth:`load`.
        """
        raise TypeError(f"data source {type(self).__name__} must override examples() (text) or "
                        f"load() (records)")

    def load(self) -> dict:
        """Return ``{"all": [Record, ...]}`` or ``{"train": [...], "valid": [...], "test": [...]}``.

        Raises:
            seqkit.errors.DataError: the data is missing, empty or unreadable.
        """
        from seqkit.data.records import Record

        return {"all": [Record(text=x, where=f"example {i + 1}") for i, x in enumerate(self.examples())]}


def input_token_mode(recipe) -> str:
    """How new acceptor/tagger input text is split into tokens, as the recipe's source split
    its training text: ``data.tokenizer`` or ``"whitespace"`` (same as :func:`text_tokenizer`)."""
    return text_tokenizer(recipe)


class FileSplitsOptions(BaseModel):
    """Recipe keys shared by file sources: one ``path`` (split by ``data.split``) or
    per-split files ``train_path`` (required then), ``valid_path``, ``test_path``."""

    model_config = ConfigDict(extra="forbid")
    path: Optional[str] = None
    train_path: Optional[str] = None
    valid_path: Optional[str] = None
    test_path: Optional[str] = None


class FileSource(DataSource, abc.ABC):
    """A source reading one file per split; subclasses implement :meth:`read_file`.

    Raises (from :meth:`load`):
        DataError: neither ``path`` nor ``train_path`` is given, both are, or a
            file is missing, not UTF-8 or has no example.
    """

    Options = FileSplitsOptions

    def files(self) -> dict:
        o = self.options
        if bool(o.path) == bool(o.train_path):
            raise DataError(f"data ({type(self).__name__}): give either data.path (one file, divided by "
                            f"data.split) or data.train_path (plus optional data.valid_path and "
                            f"data.test_path), not {'both' if o.path else 'neither'}.")
        if o.path:
            return {"all": o.path}
        return {k: getattr(o, f"{k}_path") for k in ("train", "valid", "test") if getattr(o, f"{k}_path")}

    def describe(self) -> str:
        return f"{type(self).__name__} " + ", ".join(f"{k}={v}" for k, v in self.files().items())

    @abc.abstractmethod
    def read_file(self, path: str) -> list:
        """Parse one file into records. Raises :class:`DataError` naming ``path:line``."""

    def load(self) -> dict:
        out = {}
        for split, path in self.files().items():
            records = self.read_file(path)
            if not records:
                raise DataError(f"{path}: no examples in the file; check its format "
                                f"({type(self).__name__}).")
            out[split] = records
        return out


def text_tokenizer(recipe) -> str:
    """:meth:`DataSource.text_tokenizer` of the recipe's source (a plugin source that is no
    :class:`DataSource` subclass: its ``tokenizes_text`` flag)."""
    src = DATA.get(recipe.data.source)
    if isinstance(src, type) and issubclass(src, DataSource):
        return src.text_tokenizer(recipe)
    return recipe.data.tokenizer if getattr(src, "tokenizes_text", False) else "whitespace"


def iconv_source(head: bytes) -> str:
    """The encoding to name in an ``iconv -f`` hint for a file that is not UTF-8: ``UTF-16`` when
    its first bytes are a UTF-16 byte-order mark, else ``latin1``."""
    return "UTF-16" if head[:2] in (b"\xff\xfe", b"\xfe\xff") else "latin1"


def read_text(path: str, key: str = "data.path") -> str:
    """Read a UTF-8 file: a recipe's ``key`` names a regular file; a command-line option's
    (``--input``) may also name a device or pipe (``/dev/stdin``, ``<(cmd)``).

    Raises:
        DataError: the file is missing, a folder, (for a recipe key) a device or pipe, or not
            UTF-8 (naming the line of the bad byte).
    """
    if os.path.isdir(path):
        raise DataError(f"{key}: '{path}' is a folder, not a file. Name a UTF-8 text file"
                        + (f", or pass {key} - for stdin." if key.startswith("--") else " in the recipe."))
    if not os.path.exists(path):
        if key.startswith("--"):  # a command-line option, not a recipe key
            raise DataError(f"{key}: no such file '{path}'. Check the path (relative paths are "
                            f"read from the current directory), or pass {key} - for stdin.")
        raise DataError(f"{key}: no such file '{path}'. Fix the path in the recipe (relative "
                        f"paths are read from the recipe's folder) or pass --set {key}=FILE (read from the current "
                        f"directory).")
    if not key.startswith("--") and not os.path.isfile(path):  # a recipe's data is read again later
        raise DataError(f"{key}: '{path}' is a device or a pipe, not a file. A recipe's data must be a "
                        f"regular file: `seqkit evaluate`, `export` and `--resume` read it again from the "
                        f"run's recipe. Save the data to a file and name that file.")
    with open(path, "rb") as f:
        raw = f.read()
    if raw.count(b"\r") > 1 and b"\n" not in raw:  # the whole file would read as one line
        raise DataError(f"{path}: its lines end in a carriage return alone (\\r, classic Mac OS line "
                        f"ends); seqkit reads lines ending in \\n (or \\r\\n). Convert the file, e.g. "
                        f"`tr '\\r' '\\n' < {path} > fixed{os.path.splitext(path)[1]}`.")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        source = iconv_source(raw)
        raise DataError(f"{path}:{line}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset "
                        f"{exc.start}{'; the file starts with a UTF-16 byte-order mark' if source == 'UTF-16' else ''}). "
                        f"Convert the file to UTF-8, e.g. `iconv -f {source} -t utf-8`.") from exc


def read_input(input_path: str) -> tuple[str, str]:
    """``(name, text)`` of ``--input`` (``-`` = stdin)."""
    if input_path == "-":
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
        if isinstance(data, str):
            return "<stdin>", data
        try:
            return "<stdin>", data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SeqkitError(f"<stdin>: not UTF-8 (byte {exc.start}: {exc.reason}); convert the "
                              f"input first, e.g. `iconv -f GBK -t UTF-8`.") from exc
    return input_path, read_text(input_path, key="--input")
