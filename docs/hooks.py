"""MkDocs hooks (mkdocs.yml ``hooks:``).

* The recipe reference page is generated from the schema (:func:`seqkit.recipe_reference.markdown`)
  where the page holds ``<!-- recipe-reference -->``.
* The command-line reference (mkdocs-click, table style) shows each option's real default. Since
  click 8.3 an option declared without a default holds click's internal ``UNSET`` sentinel in
  ``Option.default`` (flags included, whose real default is ``False``), and mkdocs-click prints that
  attribute as it is, so the table read ``Sentinel.UNSET``. :func:`option_default` asks click's public
  ``Option.to_info_dict()`` instead, which resolves flag defaults and turns the sentinel into ``None``;
  an option with no default (or an empty repeatable one) shows an empty cell rather than ``None``.
"""

from __future__ import annotations

MARKER = "<!-- recipe-reference -->"


def option_default(option) -> str:
    """The default cell of one option's row in the command-line reference.

    Args:
        option: a ``click.Option``.

    Returns:
        ``"_required"`` for a required option, ``""`` for one without a default (or a repeatable
        option whose default is empty), the option's own ``show_default`` text when it gives one,
        otherwise the default in backticks, e.g. ``"`False`"`` or ``"`tflite`"``.
    """
    if option.required:
        return "_required"
    if isinstance(option.show_default, str):
        return option.show_default
    default = option.to_info_dict().get("default")
    if default is None or callable(default) or (option.multiple and not default):
        return ""
    if isinstance(default, (list, tuple)):
        return ", ".join(f"`{item}`" for item in default)
    return f"`{default}`"


def _table_option_row(option) -> str:
    """One option's row of mkdocs-click's table, with :func:`option_default` as its default cell."""
    from mkdocs_click import _docs

    names = ", ".join(f"`{opt}`" for opt in option.opts)
    if option.secondary_opts:
        names += " / " + ", ".join(f"`{opt}`" for opt in option.secondary_opts)
    description = (option.help if option.help is not None else "N/A").replace("|", _docs._HTML_PIPE)
    return f"| {names} | {_docs._format_table_option_type(option)} | {description} | {option_default(option)} |"


def install_option_defaults() -> None:
    """Make mkdocs-click's table style render defaults with :func:`option_default`.

    mkdocs-click builds each row in ``mkdocs_click._docs._format_table_option_row``; this replaces
    that one function (idempotent). It raises ``AttributeError`` if a future mkdocs-click renames
    it, so the documentation build fails loudly instead of printing the sentinel again.
    """
    from mkdocs_click import _docs

    if _docs._format_table_option_row is not _table_option_row:
        _docs._format_table_option_row = _table_option_row


def on_config(config):
    install_option_defaults()
    return config


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 (MkDocs' hook signature)
    if MARKER not in markdown:
        return markdown
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from seqkit.recipe_reference import markdown as reference

    return markdown.replace(MARKER, reference())
