"""The data-source contract.

A data source reads raw examples from somewhere (a file, a package) and
returns them as a list of strings, one example each, in a stable order. The
recipe's ``data.split`` then divides them into train / valid / test.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from seqkit.cells.base import NoOptions


class DataSource:
    """Base class for data sources; subclass and decorate with ``@register_data``.

    Args:
        options: an instance of the subclass's ``Options`` (validated recipe keys).
        recipe: the whole :class:`seqkit.recipe.Recipe` (for paths relative to it).
    """

    Options: ClassVar[type[BaseModel]] = NoOptions

    def __init__(self, options: BaseModel, recipe=None):
        self.options = options
        self.recipe = recipe

    def describe(self) -> str:
        """One line saying where the examples come from (for logs and metrics.json)."""
        return type(self).__name__

    def examples(self) -> list[str]:
        """Return every example as a string.

        Raises:
            seqkit.errors.DataError: the data is missing, empty or unreadable.
        """
        raise NotImplementedError
