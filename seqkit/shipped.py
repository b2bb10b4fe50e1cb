"""The recipes shipped inside the package (``seqkit/recipes/*.yaml``), found by name.

``seqkit train lm-pydoc-chars`` and ``seqkit.Recipe.from_yaml("lm-pydoc-chars")`` read the shipped
file of that name when no file of that path exists; ``seqkit recipes`` (:func:`recipes`) lists them.
A clone of the repository also reaches them as ``recipes/NAME.yaml`` (a link to the same folder).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import yaml

from seqkit.heads import DEFAULT_HEAD

FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recipes")


@dataclass(frozen=True)
class ShippedRecipe:
    """One shipped recipe.

    Attributes:
        name: the file's stem (also its ``name:``), e.g. ``"lm-pydoc-chars"``; what
            ``seqkit train NAME`` takes.
        path: the absolute path of the YAML file inside the installed package.
        head: its ``head.type`` (``language_model`` when the recipe leaves it out).
        source: its ``data.source``.
        summary: the first sentence of the comment that opens the file (one line).
    """

    name: str
    path: str
    head: str
    source: str
    summary: str


def _summary(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    words = re.sub(r"\s*\([^)]*\)", "", " ".join(lines))  # parentheses left out
    m = re.match(r"(.+?)[.:;](\s|$)", words)
    words = (m.group(1) if m else words).strip()
    return words if len(words) <= 90 else words[:89].rsplit(" ", 1)[0] + "…"


def recipes() -> list[ShippedRecipe]:
    """The shipped recipes, sorted by name.

    Returns:
        One :class:`ShippedRecipe` per ``seqkit/recipes/*.yaml``.
    """
    out = []
    for fname in sorted(os.listdir(FOLDER)):
        if not fname.endswith(".yaml"):
            continue
        path = os.path.join(FOLDER, fname)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        raw = yaml.safe_load(text) or {}
        out.append(ShippedRecipe(name=fname[:-len(".yaml")], path=path,
                                 head=(raw.get("head") or {}).get("type", DEFAULT_HEAD),
                                 source=(raw.get("data") or {}).get("source", "?"),
                                 summary=_summary(text)))
    return out


def recipe_path(name: str) -> str | None:
    """The shipped file for ``name`` (``"lm-pydoc-chars"`` or ``"lm-pydoc-chars.yaml"``), else ``None``.

    A name holding a path separator is never a shipped recipe (it is a path the user gave).
    """
    if not name or "/" in name or os.sep in name:
        return None
    stem = name[:-len(".yaml")] if name.endswith(".yaml") else name
    path = os.path.join(FOLDER, stem + ".yaml")
    return path if os.path.isfile(path) else None


def resolve(path: str) -> str:
    """``path`` itself when it names an existing file or is no shipped recipe's name; else the
    shipped file of that name (so a file of the user's always wins)."""
    if os.path.exists(path):
        return path
    return recipe_path(path) or path
