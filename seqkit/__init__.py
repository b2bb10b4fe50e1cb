"""seqkit: recurrent sequence models on Keras 3 — task heads, cell plugins, YAML recipes.

Quick use::

    import seqkit

    @seqkit.register_cell("my_cell")
    class MyCell(seqkit.CellPlugin):
        ...

TensorFlow and Keras are imported lazily, so ``seqkit --help`` stays fast. Once Keras is
imported (before or after seqkit), seqkit's Keras classes and those of installed plugins are
registered, so ``keras.saving.load_model("run/model.keras")`` needs nothing but ``import seqkit``.
"""

from __future__ import annotations

import os as _os

_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # hide TF's C++ start-up chatter
_os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from seqkit.errors import SeqkitError  # noqa: E402
from seqkit.registry import (CELLS, DATA, HEADS, load_plugin, register_cell,  # noqa: E402
                             register_data, register_head)

__version__ = "0.1.0"


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
    raise AttributeError(name)


__all__ = ["CELLS", "DATA", "HEADS", "SeqkitError", "load_plugin", "register_cell",
           "register_data", "register_head", "register_keras_objects", "__version__"]

# Last, once the names above exist (plugins imported by the hook use them): make
# keras.saving.load_model find seqkit's Keras classes as soon as Keras is imported, without
# importing Keras (or TensorFlow) here. See seqkit/_keras_hook.py.
from seqkit._keras_hook import install as _install_keras_hook  # noqa: E402
from seqkit._keras_hook import register_keras_objects  # noqa: E402

_install_keras_hook()
