"""Register seqkit's Keras classes as soon as Keras is imported, without importing Keras here.

Keras 3 finds a saved model's non-Keras classes (``seqkit>FusedLSTM``, ``seqkit>Adam``,
``seqkit_peephole>PeepholeLSTMCell``) only in its global registry, which the
``@keras.saving.register_keras_serializable`` decorators fill when their modules run. So
``keras.saving.load_model("run/model.keras")`` works only once those modules have been imported.

``import seqkit`` must stay fast (no TensorFlow), so it cannot import them itself. Instead
:func:`install` (called by ``seqkit/__init__.py``):

* if ``keras`` is already imported, registers now (TensorFlow is loaded anyway);
* otherwise puts a finder at the front of ``sys.meta_path`` that answers only for the top-level
  ``keras`` module: it lets the normal finders locate Keras and wraps the loader, so that right
  after Keras's ``__init__`` has run, :func:`register_keras_objects` imports seqkit's modules
  with Keras classes and the installed cell and head plugins (their entry points, through
  :data:`seqkit.registry.CELLS` / ``HEADS``, the same way as on first use). The finder then
  removes itself. TensorFlow is thus imported only when Keras is imported anyway.

seqkit's own modules import ``keras`` at their top; when one of them is what first imports Keras,
the hook runs while that module is still half-imported. Importing it again returns the partial
module (it registers its classes itself when it finishes), and the modules imported here refer to
each other as ``from seqkit.layers import x`` (never ``from x import name``), so no import fails.
"""

from __future__ import annotations

import importlib
import sys
import threading
import warnings

from seqkit.registry import CELLS, HEADS

#: seqkit modules whose import registers Keras classes (``register_keras_serializable``).
KERAS_MODULES = (
    "seqkit.layers.fused_rnn",
    "seqkit.layers.fused_lstm",
    "seqkit.layers.fused_gru",
    "seqkit.layers.attention",
    "seqkit.layers.decoder",
    "seqkit.layers.pooling",
    "seqkit.layers.frame_mask",
    "seqkit.layers.char_word_embedding",
    "seqkit.training.losses",
    "seqkit.training.optimizers",
    "seqkit.training.schedules",
)

_lock = threading.RLock()
_registered = False
_running = False


def register_keras_objects() -> None:
    """Register every Keras class a seqkit model can contain with Keras's global registry.

    Imports seqkit's layers, losses and optimizers and the installed cell and head plugins
    (entry-point groups ``seqkit.cells`` and ``seqkit.heads``); idempotent. ``import seqkit``
    arranges for this to run when Keras is imported, so it is rarely needed by hand.
    Plugins passed as files (``--plugin my_cells.py``) must still be imported by the caller.

    Raises:
        ImportError: a seqkit module could not be imported (Keras or TensorFlow missing).
    """
    global _registered, _running
    with _lock:
        if _registered or _running:
            return
        _running = True
        try:
            for name in KERAS_MODULES:
                importlib.import_module(name)

            for registry in (CELLS, HEADS):
                # a registry whose built-ins are being imported right now (one of them imported
                # Keras) loads its entry points itself next, after all its built-ins
                if getattr(registry, "_builtins_loaded", False) and not getattr(
                        registry, "_entry_points_loaded", True):
                    continue
                registry.load_entry_points()
            _registered = True
        finally:
            _running = False
    uninstall()


def _after_keras_import() -> None:
    try:
        register_keras_objects()
    except Exception as exc:  # never break `import keras`; loading a model will say what is missing
        warnings.warn(f"seqkit: could not register its Keras classes when keras was imported "
                      f"({type(exc).__name__}: {exc}); seqkit models will not load with "
                      f"keras.saving.load_model until seqkit.register_keras_objects() succeeds.",
                      stacklevel=2)


class _RegisteringLoader:
    """Wraps Keras's own loader: runs it, then registers seqkit's classes."""

    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        # the module keeps Keras's real loader (importlib.resources and friends look at it)
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        _after_keras_import()


class KerasImportHook:
    """A ``sys.meta_path`` finder that wraps the loader of the top-level ``keras`` module only."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "keras" or _registered or _running:
            return None
        for finder in list(sys.meta_path):
            if finder is self or isinstance(finder, KerasImportHook):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _RegisteringLoader(spec.loader)
        return spec

    def invalidate_caches(self):
        pass


def uninstall() -> None:
    """Remove the finder (once Keras's classes are registered it has nothing left to do)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, KerasImportHook)]


def install() -> None:
    """Register now if Keras is imported, else arrange to register when it is (see module doc)."""
    keras = sys.modules.get("keras")
    if keras is not None:
        if getattr(getattr(keras, "__spec__", None), "_initializing", False):
            return  # seqkit imported from inside Keras's own import: nothing safe to do now
        _after_keras_import()
        return
    if not any(isinstance(f, KerasImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, KerasImportHook())
