"""Which plugins a run was trained with, so that reloading it can say what is missing.

``seqkit train`` writes ``plugins.json`` into a run directory whose recipe uses a
cell, head or data source that is not built in::

    [{"kind": "cell", "name": "peephole_lstm", "module": "seqkit_peephole",
      "package": "seqkit-peephole", "version": "0.1.0", "file": null}, ...]

Loading the run (:meth:`seqkit.rundir.RunDir.check`, used by ``evaluate``,
``generate``, ``export`` and ``train --resume``) first imports the recipe's own
``plugins:`` entries, then checks that every recorded plugin is registered;
when one is not, a :class:`~seqkit.errors.RunDirError` names it, its package
or file, and how to install or pass it -- before Keras would fail on an
unknown class. Runs without the file (built-ins only) are not affected.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import zipfile

from seqkit.errors import RunDirError

PLUGINS = "plugins.json"
BUILTIN = "seqkit (built in)"


def _lookups(recipe):
    from seqkit.registry import CELLS, DATA, HEADS

    return (("data source", DATA, recipe.data.source), ("cell", CELLS, recipe.model.cell),
            ("head", HEADS, recipe.head.type))


def provenance(recipe) -> list[dict]:
    """The recipe's non-built-in plugins: kind, name, module, package, version, file (or None)."""
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
        out.append(item)
    return out


def write_provenance(run_path: str, recipe) -> None:
    """Write ``plugins.json`` into a run directory when the recipe uses plugins (else nothing)."""
    from seqkit.rundir import atomic_write_json

    items = provenance(recipe)
    if items:
        atomic_write_json(os.path.join(run_path, PLUGINS), items)


def how_to_get(item: dict) -> str:
    """One sentence: how to make a recorded plugin available again."""
    if item.get("file"):
        return (f"Pass the file that registers it: --plugin {item['file']} (or list it under "
                f"`plugins:` in the recipe).")
    if item.get("package"):
        return (f"Install it (pip install {item['package']}, or pip install -e PATH from its "
                f"source folder, e.g. plugins/{item['package']} in a seqkit checkout) or pass the "
                f"module that registers it: --plugin {item['module']}.")
    return f"Pass the module or file that registers it: --plugin {item['module']}."


def _describe(item: dict) -> str:
    if item.get("file"):
        return f"the plugin file {item['file']}"
    if item.get("package"):
        return f"the package {item['package']} {item.get('version') or ''}".rstrip() + f" (module {item['module']})"
    return f"the module {item['module']}"


def require_run_plugins(run_path: str) -> None:
    """Raise a clear error when a plugin the run was trained with is not available.

    Raises:
        RunDirError: a recorded cell/head/data source is not registered (or its
            name is claimed by two installed plugins); the message names the
            plugin, its package or file, and how to install or pass it.
        SeqkitError: a ``plugins:`` entry of the run's recipe cannot be loaded.
    """
    from seqkit.recipe import read_yaml
    from seqkit.registry import CELLS, DATA, HEADS, load_plugin

    path = os.path.join(run_path, PLUGINS)
    if not os.path.isfile(path):
        return
    try:
        with open(path, encoding="utf-8") as f:
            items = json.load(f)
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{path}: unreadable ({exc}); it lists the run's plugins. Restore it or "
                          f"delete it (the run then loads if its plugins are available).") from exc
    raw, _ = read_yaml(os.path.join(run_path, "recipe.yaml"))
    for spec in raw.get("plugins") or []:
        if isinstance(spec, str):
            load_plugin(spec)
    registries = {"cell": CELLS, "head": HEADS, "data source": DATA}
    for item in items:
        registry = registries.get(item.get("kind"))
        if registry is None:
            continue
        if item["name"] in {c.name for c in registry.conflicts()}:
            try:
                registry.get(item["name"])
            except Exception as exc:  # the conflict error names both packages
                raise RunDirError(f"{run_path}: {exc}") from exc
        if item["name"] in registry:
            continue
        raise RunDirError(
            f"{run_path}: this run was trained with the {item['kind']} '{item['name']}' from "
            f"{_describe(item)}, which is not available here. {how_to_get(item)}")


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
