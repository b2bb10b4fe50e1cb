"""MkDocs hooks (mkdocs.yml ``hooks:``): the recipe reference page is generated from the schema
(:func:`seqkit.recipe_reference.markdown`) where the page holds ``<!-- recipe-reference -->``."""

from __future__ import annotations

MARKER = "<!-- recipe-reference -->"


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 (MkDocs' hook signature)
    if MARKER not in markdown:
        return markdown
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from seqkit.recipe_reference import markdown as reference

    return markdown.replace(MARKER, reference())
