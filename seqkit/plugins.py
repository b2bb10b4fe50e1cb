"""Which plugins a run was trained with, so that reloading it can say what is missing.

``seqkit train`` writes ``plugins.json`` into a run directory whose recipe uses a
cell, head or data source that is not built in::

    [{"kind": "cell", "name": "peephole_lstm", "module": "seqkit_peephole",
      "package": "seqkit-peephole", "version": "0.1.0", "file": null}, ...]

Loading the run (:meth:`seqkit.runs.rundir.RunDir.check`, used by ``evaluate``,
``generate``, ``predict``, ``export``, ``attention`` and ``train --resume``)
checks that every recorded plugin, and every cell, head and data source the
run's recipe names, is registered; when one is not, a
:class:`~seqkit.errors.RunDirError` names it, its package or file, and the
``--plugin`` to pass -- before Keras would fail on an unknown class.

A run directory is data, never code: loading one imports nothing it names (no
file, no module from ``plugins.json`` or the recipe's ``plugins:``). Plugins
come from installed entry points, ``--plugin`` or :func:`seqkit.load_plugin`.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shlex
import sys
import zipfile

from seqkit.errors import RecipeError, RunDirError
from seqkit.heads import DEFAULT_HEAD
from seqkit.recipe import read_yaml
from seqkit.registry import CELLS, DATA, HEADS
from seqkit.runs.json_files import bounded_json

PLUGINS = "plugins.json"
BUILTIN = "seqkit (built in)"


def _lookups(recipe):
    return (("data source", DATA, recipe.data.source), ("cell", CELLS, recipe.model.cell),
            ("head", HEADS, recipe.head.type))


def _module_file(module: str) -> str | None:
    """The absolute ``.py`` file a loaded top-level module or ``__main__`` script came from
    (``None`` for a package's submodule, a notebook / ``python -c`` session, or a compiled module)."""
    mod = sys.modules.get(module)
    path = getattr(mod, "__file__", None) if mod is not None else None
    if not isinstance(path, str) or not path.endswith(".py") or not os.path.isfile(path):
        return None
    if "." in module or os.path.basename(path) == "__init__.py":
        return None  # a package's module: its relative imports need the package (PYTHONPATH)
    return os.path.abspath(path)


def _import_root(module: str) -> str | None:
    """The ``sys.path`` folder a (dotted) module of a package in a working folder was found under."""
    top = sys.modules.get(module.split(".")[0])
    path = getattr(top, "__file__", None) if top is not None else None
    if not isinstance(path, str):
        return None
    depth = 2 if os.path.basename(path) == "__init__.py" else 1
    root = os.path.abspath(path)
    for _ in range(depth):
        root = os.path.dirname(root)
    return root


def provenance(recipe) -> list[dict]:
    """The recipe's non-built-in plugins: kind, name, module, package, version, file (or None).

    ``file`` is the absolute ``.py`` path of a plugin passed as a file, of a top-level module
    imported from a working folder (``import my_cells``), or of the script a cell was defined in
    (module ``__main__``); a package's module records ``root``, the folder it was imported from.
    A cell defined in a notebook or ``python -c`` (module ``__main__``, no file) records
    ``file: None``: reloading it in a new process needs its code moved into a ``.py`` file.
    Nothing recorded here is ever imported by seqkit (:func:`require_run_plugins`).
    """
    out = []
    for kind, registry, name in _lookups(recipe):
        entry = registry.entry(name)
        if entry.origin == BUILTIN:
            continue
        module = getattr(entry.obj, "__module__", "") or ""
        item = {"kind": kind, "name": name, "module": module, "package": None, "version": None,
                "file": None}
        if entry.origin.endswith(".py") and os.path.isabs(entry.origin):
            item["file"] = entry.origin
        else:
            try:
                dists = importlib.metadata.packages_distributions().get(module.split(".")[0]) or []
                if dists:
                    dist = importlib.metadata.distribution(dists[0])
                    item["package"], item["version"] = dist.metadata["Name"], dist.version
            except Exception:  # pragma: no cover - metadata is best effort
                pass
            if item["package"] is None and module:  # a script, a notebook, a working-folder module
                item["file"] = _module_file(module)
                if item["file"] is None and "." in module and _import_root(module):
                    item["root"] = _import_root(module)
        out.append(item)
    return out


def how_to_get(item: dict) -> str:
    """How to make a recorded plugin available again: the ``--plugin`` to pass (CLI) and the
    :func:`seqkit.load_plugin` call (Python), exactly as they work when pasted."""
    module, file = item.get("module") or "", item.get("file")
    if module == "__main__" and not file:  # a notebook cell or python -c: no file to import
        return (f"It was defined in a notebook or an interactive session (module __main__), which "
                f"no other process can import. Move its code (the class and its "
                f"@seqkit.register_{_KIND_WORD.get(item.get('kind'), 'cell')}, with their imports) "
                f"into a .py file, e.g. my_cells.py, and pass that file: --plugin my_cells.py "
                f"(Python: seqkit.load_plugin(\"my_cells.py\") before seqkit.load). In the notebook, "
                f"`import my_cells` then registers it for new runs.")
    if file and module == "__main__":  # a script: importing it runs its top-level code
        kind = _KIND_WORD.get(item.get("kind"), "cell")
        mod = {"cell": "my_cells.py", "head": "my_heads.py"}.get(kind, "my_sources.py")
        return (f"It was defined in the script {file}, the one the run was trained from. Do not pass "
                f"that script to --plugin: importing a script runs its top-level code (it may train "
                f"again and replace runs). First move the {kind} (the class and its "
                f"@seqkit.register_{kind}, with their imports) into a module of its own, e.g. "
                f"{mod} next to the script, and import it from the script; then pass that "
                f"module: --plugin {mod} (Python: seqkit.load_plugin(\"{mod}\")).")
    if file:
        return (f"Pass the file that registers it: --plugin {_quote(file)} (Python: "
                f"seqkit.load_plugin({file!r})); seqkit does not import code a run directory names, "
                f"so check the file before you pass it.")
    if item.get("package"):
        return (f"Install it (pip install {_quote(item['package'])}, or pip install -e PATH from its "
                f"source folder, e.g. plugins/{_quote(item['package'])} in a seqkit checkout) or pass the "
                f"module that registers it: --plugin {_quote(module)}.")
    if item.get("root"):
        return (f"Pass the module that registers it with its folder on the import path: "
                f"PYTHONPATH={_quote(item['root'])} seqkit ... --plugin {_quote(module)}.")
    return f"Pass the module or file that registers it: --plugin {_quote(module)}."


_KIND_WORD = {"cell": "cell", "head": "head", "data source": "data"}


def _quote(path: str) -> str:
    """``path`` (a path, module or package name a run names: untrusted) as the shell needs it,
    quoted when it holds spaces or shell characters, so a pasted fix runs nothing else."""
    return shlex.quote(str(path))


def _describe(item: dict) -> str:
    if item.get("module") == "__main__":
        return f"the script {item['file']}" if item.get("file") else "a notebook or interactive session"
    if item.get("file"):
        return f"the plugin file {item['file']}"
    if item.get("package"):
        return f"the package {item['package']} {item.get('version') or ''}".rstrip() + f" (module {item['module']})"
    return f"the module {item['module']}"


def _recipe_names(raw: dict) -> list[tuple[str, str]]:
    """``(kind, name)`` of the data source, cell and head a raw (unvalidated) recipe names."""
    out = []
    for kind, section, key, default in (("data source", "data", "source", None),
                                        ("cell", "model", "cell", "lstm"),
                                        ("head", "head", "type", DEFAULT_HEAD)):
        sec = raw.get(section)
        name = sec.get(key, default) if isinstance(sec, dict) else default
        if isinstance(name, str):
            out.append((kind, name))
    return out


def require_run_plugins(run_path: str) -> None:
    """Raise a clear error when a plugin the run needs is not registered; import nothing.

    Checks the plugins recorded in ``plugins.json`` and the data source, cell and
    head the run's ``recipe.yaml`` names (so a run without ``plugins.json`` is held
    to the same rule). Nothing the run directory names is imported.

    Raises:
        RunDirError: a needed cell/head/data source is not registered (or its name
            is claimed by two installed plugins); the message names the plugin,
            its package or file, and the ``--plugin`` to pass or package to install.
    """
    path = os.path.join(run_path, PLUGINS)
    items = []
    if os.path.isfile(path):
        try:
            items = bounded_json(path)
            if not isinstance(items, list) or not all(
                    isinstance(i, dict) and isinstance(i.get("name"), str)
                    and all(isinstance(i.get(k), (str, type(None))) for k in ("kind", "module", "package", "file",
                                                                               "version", "root"))
                    for i in items):
                raise ValueError("expected a list of {kind, name, module, package, version, file}")
        except (OSError, ValueError) as exc:
            raise RunDirError(f"{path}: unreadable ({exc}); it lists the run's plugins. Restore it "
                              f"or delete it (the run then loads if its plugins are available)."
                              ) from exc
    try:
        raw, _ = read_yaml(os.path.join(run_path, "recipe.yaml"))
    except RecipeError:
        raw = {}  # loading the recipe reports it
    listed = [s for s in (raw.get("plugins") or []) if isinstance(s, str)] \
        if isinstance(raw.get("plugins"), list) else []
    registries = {"cell": CELLS, "head": HEADS, "data source": DATA}

    def check_conflict(registry, name):
        if name in {c.name for c in registry.conflicts()}:
            try:
                registry.get(name)
            except Exception as exc:  # the conflict error names both packages
                raise RunDirError(f"{run_path}: {exc}") from exc

    for item in items:
        registry = registries.get(item.get("kind"))
        if registry is None:
            continue
        check_conflict(registry, item["name"])
        if item["name"] in registry:
            continue
        raise RunDirError(
            f"{run_path}: this run was trained with the {item['kind']} '{item['name']}' from "
            f"{_describe(item)}, which is not registered here. {how_to_get(item)}")
    recorded = {(i.get("kind"), i["name"]) for i in items}
    for kind, name in _recipe_names(raw):
        registry = registries[kind]
        if (kind, name) in recorded:
            continue
        check_conflict(registry, name)
        if name in registry:
            continue
        if listed:
            how = (f"Its recipe lists plugins: {', '.join(listed)}; seqkit does not import code a run "
                   f"directory names. If you trust it, pass it yourself: "
                   + " ".join(f"--plugin {_quote(s)}" for s in listed) + ".")
        else:
            how = ("Install the package that provides it, or pass the module or .py file that "
                   "registers it: --plugin PATH_OR_MODULE.")
        raise RunDirError(f"{run_path}: this run's recipe uses the {kind} '{name}', which is not "
                          f"registered here. {how}")


def keras_classes_needed(model_path: str) -> list[str]:
    """``module>Class`` of the non-Keras classes a ``.keras`` file's config names (for error messages)."""
    found = []
    try:
        with zipfile.ZipFile(model_path) as z:
            config = json.loads(z.read("config.json"))
    except Exception:
        return found

    def walk(node):
        if isinstance(node, dict):
            mod = node.get("module")
            if isinstance(mod, str) and "class_name" in node and not mod.startswith(("keras", "builtins")):
                name = node.get("registered_name") or f"{mod}>{node['class_name']}"
                label = f"{name} (module {mod})"
                if label not in found and not name.startswith("seqkit>"):
                    found.append(label)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(config)
    return found
