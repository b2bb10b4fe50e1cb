"""seqkit: recurrent sequence models on Keras 3 — task heads, cell plugins, YAML recipes.

Train, evaluate and ship a model from Python (see docs/python-api.md)::

    import seqkit

    run = seqkit.train(seqkit.Recipe.from_yaml("lm-pydoc-chars"), run_dir="runs/lm")  # a shipped recipe
    run.evaluate("test")                 # the dict `seqkit evaluate --json` prints
    run.generate("The ", max_length=80)

Write a cell plugin::

    import seqkit

    @seqkit.register_cell("my_cell")
    class MyCell(seqkit.CellPlugin):
        ...

TensorFlow and Keras are imported lazily, so ``seqkit --help`` stays fast. Once Keras is
imported (before or after seqkit), seqkit's Keras classes and those of installed plugins are
registered, so ``keras.saving.load_model("run/model.keras")`` needs nothing but ``import seqkit``.

Where things live (one concept per file; see each package's docstring): the Python API in
:mod:`seqkit.api` and :mod:`seqkit.runs`; the command line in :mod:`seqkit.cli`; training in
:mod:`seqkit.training`; decoding and answering in :mod:`seqkit.inference`; figures in
:mod:`seqkit.metrics`; looking inside a model in :mod:`seqkit.diagnostics`; plugins' building
blocks in :mod:`seqkit.cells`, :mod:`seqkit.heads`, :mod:`seqkit.layers`, :mod:`seqkit.data`;
shipping in :mod:`seqkit.export` and :mod:`seqkit.runtime`.
"""

from __future__ import annotations

import os as _os

_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # hide TF's C++ start-up chatter
_os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from seqkit.errors import SeqkitError  # noqa: E402
from seqkit.registry import (CELLS, DATA, HEADS, load_plugin, register_cell,  # noqa: E402
                             register_data, register_head)

__version__ = "0.2.0"  # the one place the version is written (pyproject reads it)


def __getattr__(name):  # lazy: these import pydantic/keras only when used
    if name == "CellPlugin":
        from seqkit.cells.base import CellPlugin

        return CellPlugin
    if name == "Head":
        from seqkit.heads.base import Head

        return Head
    if name == "DataSource":
        from seqkit.data.base import DataSource

        return DataSource
    if name in _API:  # the Python API (seqkit/api.py): imports TensorFlow only when used
        import seqkit.api

        return getattr(seqkit.api, name)
    raise AttributeError(f"module 'seqkit' has no attribute {name!r}")


def recipes():
    """The recipes shipped with seqkit (what ``seqkit recipes`` lists), sorted by name.

    Returns:
        A list of :class:`seqkit.shipped.ShippedRecipe` (``name``, ``path``, ``head``, ``source``,
        ``summary``); ``seqkit.Recipe.from_yaml(name)`` and ``seqkit train NAME`` read one by name.
    """
    from seqkit.shipped import recipes as _recipes

    return _recipes()


def __dir__():  # the lazily imported API too, so dir(seqkit) shows what there is to call
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__")})


_API = ("Alignment", "Preprocessing", "Recipe", "Run", "build", "init", "load", "stream", "train",
        "train_seeds", "validate")

__all__ = ["CELLS", "DATA", "HEADS", "SeqkitError", "load_plugin", "register_cell",
           "register_data", "register_head", "register_keras_objects", "__version__",
           "Alignment", "Preprocessing", "Recipe", "Run", "build", "init", "load", "recipes", "stream", "train",
           "train_seeds", "validate"]


# Last, once the names above exist (plugins imported by the hook use them): make
# keras.saving.load_model find seqkit's Keras classes as soon as Keras is imported, without
# importing Keras (or TensorFlow) here. See seqkit/_keras_hook.py.
from seqkit._keras_hook import install as _install_keras_hook  # noqa: E402
from seqkit._keras_hook import register_keras_objects  # noqa: E402

_install_keras_hook()
