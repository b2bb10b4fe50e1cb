"""No two seqkit modules import each other, directly or through a chain: every module's imports are
read with ``ast`` (those inside functions too, which hide loops from a plain import) and the
graph is searched for strongly connected components."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent / "seqkit"


def module_names() -> dict:
    """``{dotted module name: path}`` of every module under ``seqkit/``."""
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: dict) -> set:
    """The seqkit modules ``name`` imports anywhere in its file (``from pkg import sub`` counts
    ``pkg.sub`` when that is a module; the root package ``seqkit`` is left out)."""
    is_pkg = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + is_pkg]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
            found.update(f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in modules)
    out = set()
    for mod in found:
        while mod not in modules and "." in mod:
            mod = mod.rsplit(".", 1)[0]
        if mod in modules and mod not in (name, "seqkit"):
            out.add(mod)
    return out


def cycles(graph: dict) -> list:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_loop_through_three_modules():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_function_level_imports_are_read(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    from seqkit.registry import HEADS\n")
    assert imports_of("seqkit.m", tmp_path / "m.py", {"seqkit.registry": None}) == {"seqkit.registry"}


def test_no_two_seqkit_modules_import_each_other():
    modules = module_names()
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert cycles(graph) == []
