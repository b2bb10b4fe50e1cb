"""One generic name -> factory registry, used for cells, heads and data sources.

Third-party packages add entries through the entry-point groups
``seqkit.cells``, ``seqkit.heads`` and ``seqkit.data``: each entry point names a
module (or an object in it) whose import registers plugins with the decorators
:func:`seqkit.register_cell`, :func:`seqkit.register_head` and
:func:`seqkit.register_data`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from seqkit.errors import RegistryError, SeqkitError, did_you_mean


@dataclass(frozen=True)
class Entry:
    """A registered object and where it came from (``"seqkit"``, a package, a file)."""

    name: str
    obj: Any
    origin: str


@dataclass
class BrokenPlugin:
    """A plugin that could not be used: its import raised, or it claimed a taken name.

    Attributes:
        kind: ``"cell"``, ``"head"`` or ``"data source"``.
        entry_point: the entry point's ``name = value`` (or the name claimed twice).
        origin: the distribution (``seqkit-peephole 0.1.0``) or file it came from.
        error: one line: the exception type and message.
    """

    kind: str
    entry_point: str
    origin: str
    error: str


@dataclass
class Conflict:
    """One name claimed by two (or more) plugins; looking the name up raises."""

    name: str
    claims: list = field(default_factory=list)  # [(origin, qualname), ...]


# Where the plugin code being imported right now comes from (set while an entry point, a
# --plugin file or module is imported), so that registrations record the package, not a module.
_ORIGIN: list[str] = []


@contextlib.contextmanager
def plugin_origin(origin: str):
    """Record ``origin`` (a distribution or file) for plugins registered inside the block."""
    _ORIGIN.append(origin)
    try:
        yield
    finally:
        _ORIGIN.pop()


def _dist_label(dist) -> str:
    if dist is None:
        return "an unknown package"
    try:
        return f"{dist.metadata['Name']} {dist.version}"
    except Exception:  # pragma: no cover - metadata is best effort
        return getattr(dist, "name", None) or "an unknown package"


def _origin_of(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or ""
    top = module.split(".")[0]
    if top == "seqkit":
        return "seqkit (built in)"
    if _ORIGIN:
        return _ORIGIN[-1]
    return _module_origin(module) if module else "unknown"


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
        needs: ``(method, base class)``: a registered object is a class with this method (what
            the base class gives), e.g. ``("make_cell", "seqkit.cells.base.CellPlugin")``.

    Registering a *different* object under a taken name raises
    :class:`RegistryError`; registering the same object again (a plugin module
    imported twice) is harmless. Looking up an unknown name raises
    :class:`RegistryError` listing the known names and the closest match.

    Entry points are imported on first use. One that raises is kept out and
    remembered in :attr:`broken` (``seqkit list`` shows it with its error), so
    built-ins and the other plugins keep working. Two installed plugins that
    claim one name are both kept out of that name: looking it up raises a
    :class:`RegistryError` naming both packages (a plugin claiming a built-in
    name is ignored and listed as broken).
    """

    def __init__(self, kind: str, group: str, needs: tuple[str, str] | None = None):
        self.kind = kind
        self.group = group
        self.needs = needs
        self._entries: dict[str, Entry] = {}
        self._builtins_loaded = False
        self._entry_points_loaded = False
        self._builtin_modules: list[str] = []
        self.broken: list[BrokenPlugin] = []
        self._conflicts: dict[str, Conflict] = {}
        self._loading_entry_points = False

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
        if self.needs and not (isinstance(obj, type) and callable(getattr(obj, self.needs[0], None))):
            method, base = self.needs
            raise RegistryError(f"cannot register {self.kind} {name!r}: a {self.kind} plugin is a class with "
                                f"{method}() (subclass {base}); got {_qualname(obj)} "
                                f"({type(obj).__name__}).")
        old = self._entries.get(name)
        origin = origin or _origin_of(obj)
        if name in self._conflicts:
            if not any(o == origin for o, _ in self._conflicts[name].claims):
                self._conflicts[name].claims.append((origin, _qualname(obj)))
            return obj
        if old is not None and not _same_object(old.obj, obj) and self._loading_entry_points:
            # two installed packages claim one name: keep neither, say so on use and in `list`
            if old.origin == "seqkit (built in)":
                self.broken.append(BrokenPlugin(self.kind, name, origin, (
                    f"claims the built-in {self.kind} name '{name}' ({_qualname(obj)}); ignored. "
                    f"The plugin must choose another name.")))
                return obj
            self._conflicts[name] = Conflict(name, [(old.origin, _qualname(old.obj)),
                                                    (origin, _qualname(obj))])
            del self._entries[name]
            return obj
        if old is not None and not _same_object(old.obj, obj):
            raise RegistryError(
                f"cannot register {self.kind} '{name}' from {_origin_of(obj)}: the name is already "
                f"taken by {old.origin} ({getattr(old.obj, '__qualname__', old.obj)!s}). "
                f"Choose another name for your {self.kind}."
            )
        if old is not None:  # the same plugin again: keep the first record
            return obj
        self._entries[name] = Entry(name, obj, origin)
        return obj

    def _load(self) -> None:
        if not self._builtins_loaded:
            self._builtins_loaded = True
            for module in self._builtin_modules:
                importlib.import_module(module)
        if not self._entry_points_loaded:
            self._entry_points_loaded = True
            self._loading_entry_points = True
            try:
                for ep in importlib.metadata.entry_points(group=self.group):
                    origin = _dist_label(getattr(ep, "dist", None))
                    try:
                        with plugin_origin(origin):
                            ep.load()
                    except Exception as exc:  # a broken plugin must not break seqkit
                        error = f"{type(exc).__name__}: {exc}".splitlines()[0]
                        self.broken.append(BrokenPlugin(self.kind, f"{ep.name} = {ep.value}", origin, error))
                        warnings.warn(
                            f"seqkit: could not load {self.kind} plugin entry point '{ep.name}' "
                            f"({ep.value}) of {origin} from group '{self.group}': {error}. "
                            f"`seqkit list` shows it; the other plugins work.",
                            stacklevel=2,
                        )
            finally:
                self._loading_entry_points = False

    def load_entry_points(self) -> None:
        """Import the built-ins and every installed plugin of this kind now (normally on first use)."""
        self._load()

    def conflicts(self) -> list[Conflict]:
        """Names claimed by more than one installed plugin (unusable until one is removed)."""
        self._load()
        return [self._conflicts[k] for k in sorted(self._conflicts)]

    def _conflict_error(self, name: str) -> RegistryError:
        c = self._conflicts[name]
        who = " and ".join(f"{origin} ({qual})" for origin, qual in sorted(c.claims))
        return RegistryError(
            f"{self.kind} '{name}' is claimed by {len(c.claims)} installed plugins: {who}. seqkit "
            f"cannot tell which one you mean, so it uses neither. Uninstall one of them "
            f"(pip uninstall PACKAGE), or ask one author to rename theirs.")

    def get(self, name: str) -> Any:
        """Return the object registered as ``name``.

        Raises:
            RegistryError: no such name; the message lists the known names.
        """
        self._load()
        if name in self._conflicts:
            raise self._conflict_error(name)
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

    def entry(self, name: str) -> Entry:
        """The :class:`Entry` (object and origin) registered as ``name``; raises like :meth:`get`."""
        self.get(name)
        return self._entries[name]

    def entries(self) -> list[Entry]:
        """All entries, sorted by name."""
        self._load()
        return [self._entries[k] for k in sorted(self._entries)]

    def names(self) -> list[str]:
        return [e.name for e in self.entries()]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def _qualname(obj: Any) -> str:
    mod = getattr(obj, "__module__", "") or ""
    return f"{mod}.{getattr(obj, '__qualname__', obj)!s}".lstrip(".")


def head_class(name: str):
    """The head class registered as ``name``, or None when there is none (or it is contested):
    for checks that must not fail where the recipe's own check already names the problem."""
    try:
        return HEADS.get(name)
    except RegistryError:
        return None


CELLS = Registry("cell", "seqkit.cells", ("make_cell", "seqkit.cells.base.CellPlugin"))
HEADS = Registry("head", "seqkit.heads", ("build_model", "seqkit.heads.base.Head"))
DATA = Registry("data source", "seqkit.data", ("load", "seqkit.data.base.DataSource"))

CELLS.add_builtin_modules("seqkit.cells.simple_rnn", "seqkit.cells.lstm", "seqkit.cells.gru")
HEADS.add_builtin_modules("seqkit.heads.language_model.head", "seqkit.heads.acceptor.head", "seqkit.heads.tagger.head",
                        "seqkit.heads.seq2seq.head")
DATA.add_builtin_modules("seqkit.data.text_lines", "seqkit.data.ts_file", "seqkit.data.word_tag",
                       "seqkit.data.conll", "seqkit.data.tsv", "seqkit.data.tfds_source",
                       "seqkit.data.packaged", "seqkit.data.cmudict",
                       "seqkit.data.pinyin")
DATA.add_builtin_modules("seqkit.data.table", "seqkit.data.parallel",  # users' own tables and pairs
                         "seqkit.data.hf_datasets", "seqkit.data.text_corpus")


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

    A file is imported as module ``seqkit_plugin_STEM`` (so code under
    ``if __name__ == "__main__":`` does not run), with its folder on ``sys.path`` while it runs,
    as ``python FILE`` would have it: its imports of modules beside it work.

    Raises:
        SeqkitError: the file does not exist or the module cannot be imported.
    """
    if spec.endswith(".py") or os.sep in spec or os.path.exists(spec):
        path = os.path.abspath(spec)
        if not os.path.isfile(path):
            raise SeqkitError(f"--plugin {spec}: no such file. Pass a .py file or an importable module name.")
        if not path.endswith(".py"):  # importlib finds no loader for other names
            raise SeqkitError(f"--plugin {spec}: not a .py file. Pass the plugin's Python source file (NAME.py) "
                              f"or an importable module name.")
        mod_name = "seqkit_plugin_" + os.path.splitext(os.path.basename(path))[0]
        if mod_name in sys.modules and getattr(sys.modules[mod_name], "__file__", None) == path:
            return
        loc = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(loc)
        sys.modules[mod_name] = module
        folder = os.path.dirname(path)  # as `python FILE` does: the file's own imports of its
        added = folder not in sys.path  # neighbours (`import my_cells`) resolve while it runs
        if added:
            sys.path.insert(0, folder)
        try:
            with plugin_origin(path):
                loc.loader.exec_module(module)
        except SeqkitError:
            raise
        except (Exception, SystemExit) as exc:  # a plugin that calls sys.exit() does not end seqkit
            del sys.modules[mod_name]
            raise SeqkitError(f"--plugin {spec}: importing the file failed: {type(exc).__name__}: {exc}") from exc
        finally:
            if added and folder in sys.path:
                sys.path.remove(folder)
        return
    try:
        with plugin_origin(_module_origin(spec)):
            importlib.import_module(spec)
    except ImportError as exc:
        raise SeqkitError(
            f"--plugin {spec}: cannot import module '{spec}' ({exc}). Install the package that "
            f"provides it, or pass the path of a .py file."
        ) from exc
    except SeqkitError:
        raise
    except (Exception, SystemExit) as exc:  # as for a file: the module's own error, named
        raise SeqkitError(f"--plugin {spec}: importing the module failed: {type(exc).__name__}: {exc}") from exc


def _module_origin(module: str) -> str:
    """``"seqkit-peephole 0.1.0"`` for a module of an installed distribution, else the module name."""
    top = module.split(".")[0]
    try:
        dists = importlib.metadata.packages_distributions().get(top)
        if dists:
            return _dist_label(importlib.metadata.distribution(dists[0]))
    except Exception:  # pragma: no cover - metadata is best effort
        pass
    return module
