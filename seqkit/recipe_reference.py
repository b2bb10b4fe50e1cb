"""The recipe reference, generated from the schema: every key of :class:`seqkit.recipe.RecipeModel`
and of each registered data source's, cell's and head's ``Options`` model, with its type, default,
allowed values and the comment written beside it in the code.

The documentation site builds its "Recipe reference" page from :func:`markdown` (``docs/hooks.py``),
so the page cannot drift from what ``seqkit validate`` accepts.
"""

from __future__ import annotations

import inspect
import re
import typing

from pydantic import BaseModel

from seqkit.recipe import RecipeModel, _describe
from seqkit.registry import CELLS, DATA, HEADS


def _comments(cls: type) -> dict[str, str]:
    """``{field: comment}`` from the class source: the ``# ...`` after a field, or the full-line
    comments right above it."""
    try:
        src = inspect.getsource(cls)
    except (OSError, TypeError):
        return {}
    out, above = {}, []
    for line in src.splitlines():
        s = line.strip()
        if s.startswith("#"):
            above.append(s.lstrip("#").removeprefix(":").strip())  # ``#:`` (Sphinx's attribute docs) too
            continue
        m = re.match(r"^\s+([A-Za-z_][A-Za-z0-9_]*)\s*:[^=#]*(=[^#]*)?(#\s*(.*))?$", line)
        if m and not s.startswith(("def ", "@", "class ", "return", '"""', "model_config")):
            text = " ".join(above + ([m.group(4).strip()] if m.group(4) else []))
            if text:
                out[m.group(1)] = text
        above = []
    return out


def _type(annotation, info) -> str:
    return _describe(annotation, info)


def _default(info) -> str:
    if info.is_required():
        return "required"
    d = info.get_default(call_default_factory=True)
    if isinstance(d, BaseModel):
        return "(see its keys)"
    if d is None:
        return "null"
    if isinstance(d, bool):
        return "true" if d else "false"
    if d == [] or d == {}:
        return repr(d)
    return f"`{d}`"


def _nested(annotation) -> "type[BaseModel] | None":
    for a in (annotation, *typing.get_args(annotation)):
        if isinstance(a, type) and issubclass(a, BaseModel):
            return a
    return None


def rows(model: type[BaseModel], prefix: str) -> list[tuple[str, str, str, str]]:
    """``(key path, type, default, comment)`` of every key of ``model`` (nested models expanded)."""
    notes = _comments(model)
    out = []
    for name, info in model.model_fields.items():
        key = f"{prefix}.{name}" if prefix else name
        out.append((key, _type(info.annotation, info), _default(info), notes.get(name, "")))
        sub = _nested(info.annotation)
        if sub is not None:
            out.extend(rows(sub, key))
    return out


def _table(items) -> str:
    def cell(x: str) -> str:
        return x.replace("|", "\\|").replace("\n", " ")

    lines = ["| key | type / allowed values | default | notes |", "|---|---|---|---|"]
    lines += [f"| `{k}` | {cell(t)} | {cell(d)} | {cell(n)} |" for k, t, d, n in items]
    return "\n".join(lines)


def _first_line(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ")


def markdown() -> str:
    """The whole reference as Markdown (the sections, then one table per registered plugin)."""
    named = {"data.source": DATA, "model.cell": CELLS, "head.type": HEADS}
    top = []
    for k, t, d, n in rows(RecipeModel, ""):
        if k == "name":
            d, n = "the recipe file's stem", "the run's folder (runs/NAME) and the exports' name"
        elif k in named:
            t = "one of " + ", ".join(f"'{x}'" for x in sorted(named[k].names())) + " (or a plugin's name)"
        top.append((k, t, d, n))
    parts = ["## Top level and the common sections", "",
             "Every recipe has these keys; `data`, `model` and `head` also take the keys of the "
             "chosen data source, cell and head (below).", "",
             _table(top)]
    for title, section, reg in (("Data sources (`data.source`)", "data", DATA),
                                ("Cells (`model.cell`)", "model", CELLS),
                                ("Heads (`head.type`)", "head", HEADS)):
        parts += ["", f"## {title}", ""]
        for name in sorted(reg.names()):
            try:
                obj = reg.get(name)
            except Exception:  # a broken third-party plugin: listed by `seqkit list`, not here
                continue
            parts += [f"### `{name}`", "", _first_line(obj) or f"The `{name}` {section} plugin.", ""]
            opts = getattr(obj, "Options", None)
            if opts is None or not opts.model_fields:
                parts += ["No keys of its own.", ""]
                continue
            parts += [_table(rows(opts, section)), ""]
    return "\n".join(parts).rstrip() + "\n"
