"""One generic name -> factory registry, used for cells, heads and data sources.

Third-party packages add entries through the entry-point groups
``seqkit.cells``, ``seqkit.heads`` and ``seqkit.data``: each entry point names a
module (or an object in it) whose import registers plugins with the decorators
:func:`seqkit.register_cell`, :func:`seqkit.register_head` and
:func:`seqkit.register_data`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from seqkit.errors import RegistryError, SeqkitError, did_you_mean


@dataclass(frozen=True)
class Entry:
    """A registered object and where it came from (``"seqkit"``, a package, a file)."""

    name: str
    obj: Any
    origin: str


def _origin_of(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or ""
    top = module.split(".")[0]
    if top == "seqkit":
        return "seqkit (built in)"
    try:
        dists = importlib.metadata.packages_distributions().get(top)
    except Exception:  # pragma: no cover - metadata is best effort
        dists = None
    if dists:
        return dists[0]
    return module or "unknown"


def _same_object(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` are the same plugin, even if its module was imported twice."""
    if a is b:
        return True
    try:
        return (
            getattr(a, "__qualname__", None) == getattr(b, "__qualname__", None)
            and inspect.getsourcefile(a) == inspect.getsourcefile(b)
            and getattr(a, "__qualname__", None) is not None
        )
    except TypeError:
        return False


class Registry:
    """A mapping from names to plugin objects of one kind.

    Args:
        kind: what is registered, e.g. ``"cell"``; used in error messages.
        group: the entry-point group scanned for third-party plugins.

    Registering a *different* object under a taken name raises
    :class:`RegistryError`; registering the same object again (a plugin module
    imported twice) is harmless. Looking up an unknown name raises
    :class:`RegistryError` listing the known names and the closest match.
    """

    def __init__(self, kind: str, group: str):
        self.kind = kind
        self.group = group
        self._entries: dict[str, Entry] = {}
        self._builtins_loaded = False
        self._entry_points_loaded = False
        self._builtin_modules: list[str] = []

    def add_builtin_modules(self, *modules: str) -> None:
        """Name modules whose import registers the built-in plugins (imported lazily)."""
        self._builtin_modules.extend(modules)

    def register(self, name: str, obj: Any = None, *, origin: str | None = None):
        """Register ``obj`` under ``name``; usable as ``@registry.register("name")``.

        Raises:
            RegistryError: ``name`` is taken by a different object, or is not a
                valid identifier-like string.
        """
        if obj is None:
            return lambda o: self.register(name, o, origin=origin)
        if not isinstance(name, str) or not name or not name.replace("_", "a").replace("-", "a").isalnum():
            raise RegistryError(
                f"cannot register {self.kind} {name!r}: a name is letters, digits, '_' or '-'."
            )
        old = self._entries.get(name)
        if old is not None and not _same_object(old.obj, obj):
            raise RegistryError(
                f"cannot register {self.kind} '{name}' from {_origin_of(obj)}: the name is already "
                f"taken by {old.origin} ({getattr(old.obj, '__qualname__', old.obj)!s}). "
                f"Choose another name for your {self.kind}."
            )
        self._entries[name] = Entry(name, obj, origin or _origin_of(obj))
        return obj

    def _load(self) -> None:
        if not self._builtins_loaded:
            self._builtins_loaded = True
            for module in self._builtin_modules:
                importlib.import_module(module)
        if not self._entry_points_loaded:
            self._entry_points_loaded = True
            for ep in importlib.metadata.entry_points(group=self.group):
                try:
                    ep.load()
                except Exception as exc:  # a broken plugin must not break seqkit
                    warnings.warn(
                        f"seqkit: could not load {self.kind} plugin entry point '{ep.name}' "
                        f"({ep.value}) from group '{self.group}': {exc}",
                        stacklevel=2,
                    )

    def get(self, name: str) -> Any:
        """Return the object registered as ``name``.

        Raises:
            RegistryError: no such name; the message lists the known names.
        """
        self._load()
        entry = self._entries.get(name)
        if entry is None:
            known = sorted(self._entries)
            raise RegistryError(
                f"unknown {self.kind} '{name}'.{did_you_mean(name, known)} Known {self.kind}s: "
                f"{', '.join(known) or '(none)'}. A {self.kind} from a plugin needs the plugin "
                f"installed (entry-point group '{self.group}') or passed with --plugin."
            )
        return entry.obj

    def __contains__(self, name: str) -> bool:
        self._load()
        return name in self._entries

    def entries(self) -> list[Entry]:
        """All entries, sorted by name."""
        self._load()
        return [self._entries[k] for k in sorted(self._entries)]

    def names(self) -> list[str]:
        return [e.name for e in self.entries()]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


CELLS = Registry("cell", "seqkit.cells")
HEADS = Registry("head", "seqkit.heads")
DATA = Registry("data source", "seqkit.data")

CELLS.add_builtin_modules("seqkit.cells.simple_rnn", "seqkit.cells.lstm", "seqkit.cells.gru")
HEADS.add_builtin_modules("seqkit.heads.language_model", "seqkit.heads.acceptor", "seqkit.heads.tagger",
                        "seqkit.heads.seq2seq")
DATA.add_builtin_modules("seqkit.data.text_lines", "seqkit.data.ts_file", "seqkit.data.word_tag",
                       "seqkit.data.conll", "seqkit.data.tsv", "seqkit.data.tfds_source",
                       "seqkit.data.packaged", "seqkit.data.cmudict")


def register_cell(name: str) -> Callable[[Any], Any]:
    """Decorator: register a cell plugin class (see :class:`seqkit.cells.base.CellPlugin`)."""
    return CELLS.register(name)


def register_head(name: str) -> Callable[[Any], Any]:
    """Decorator: register a task head class (see :class:`seqkit.heads.base.Head`)."""
    return HEADS.register(name)


def register_data(name: str) -> Callable[[Any], Any]:
    """Decorator: register a data source class (see :class:`seqkit.data.base.DataSource`)."""
    return DATA.register(name)


def load_plugin(spec: str) -> None:
    """Import a plugin given as a ``.py`` file path or a dotted module name.

    Raises:
        SeqkitError: the file does not exist or the module cannot be imported.
    """
    import importlib.util
    import os
    import sys

    if spec.endswith(".py") or os.sep in spec or os.path.exists(spec):
        path = os.path.abspath(spec)
        if not os.path.isfile(path):
            raise SeqkitError(f"--plugin {spec}: no such file. Pass a .py file or an importable module name.")
        mod_name = "seqkit_plugin_" + os.path.splitext(os.path.basename(path))[0]
        if mod_name in sys.modules and getattr(sys.modules[mod_name], "__file__", None) == path:
            return
        loc = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(loc)
        sys.modules[mod_name] = module
        try:
            loc.loader.exec_module(module)
        except SeqkitError:
            raise
        except Exception as exc:
            del sys.modules[mod_name]
            raise SeqkitError(f"--plugin {spec}: importing the file failed: {type(exc).__name__}: {exc}") from exc
        return
    try:
        importlib.import_module(spec)
    except ImportError as exc:
        raise SeqkitError(
            f"--plugin {spec}: cannot import module '{spec}' ({exc}). Install the package that "
            f"provides it, or pass the path of a .py file."
        ) from exc
