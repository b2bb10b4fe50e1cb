"""The recurrent encoder stack built from a cell plugin.

``[B, T, D] -> [B, T, H]`` (``[B, T, 2H]`` when bidirectional), with dropout
on each layer's input (non-recurrent dropout, Zaremba et al. 2014) and the
mask carried through. Layers are named ``rnn_0``, ``rnn_1``, ... so step
models can find their cells.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

from seqkit.cells.base import CellPlugin, CellSpec
from seqkit.errors import RecipeError
from seqkit.registry import CELLS


def make_plugin(model_cfg, cell_options) -> CellPlugin:
    """Instantiate the recipe's cell plugin (``model.cell``) with its spec (``model.weight_drop``
    reaches it only for a cell that supports it: recipe validation refuses the others)."""
    cls = CELLS.get(model_cfg.cell)
    spec = CellSpec(units=model_cfg.units, dropout=0.0, recurrent_dropout=model_cfg.recurrent_dropout,
                    options=cell_options, weight_drop=model_cfg.weight_drop)
    plugin = cls(spec)
    plugin.warn_fast_path(model_cfg.cell)
    return plugin


def apply_stack(x, plugin: CellPlugin, model_cfg, *, causal: bool, name: str = "rnn",
                return_state: bool = False):
    """Apply ``model.layers`` recurrent layers to a Keras tensor.

    Args:
        x: ``[B, T, D]`` float Keras tensor (its mask, if any, is used).
        plugin: the cell plugin.
        model_cfg: the recipe's ``model`` section (layers, dropout, bidirectional).
        causal: the head reads left to right only (language model, streaming);
            ``model.bidirectional`` is then refused.
        name: layer name prefix.
        return_state: also return each layer's final states (at the last
            unmasked step).

    Returns:
        ``[B, T, H]`` (or ``[B, T, 2H]``) Keras tensor; with ``return_state``,
        ``(that, states)`` where ``states[i]`` lists layer ``i``'s final states
        ``[B, H]`` in :attr:`CellPlugin.state_names` order (bidirectional: the
        forward layer's, then the backward layer's).

    Raises:
        RecipeError: bidirectional requested for a causal head.
    """
    import keras

    if model_cfg.bidirectional and causal:
        raise RecipeError(
            "model.bidirectional: true is refused for this head: a bidirectional encoder reads "
            "the future, which a left-to-right model (language model, streaming) must not see. "
            "Set model.bidirectional: false.")
    states = []
    for i in range(model_cfg.layers):
        if model_cfg.dropout > 0:
            x = keras.layers.Dropout(model_cfg.dropout, name=f"{name}_dropout_{i}")(x)
        layer = plugin.make_layer(return_sequences=True, return_state=return_state, name=f"{name}_{i}")
        if model_cfg.bidirectional:
            layer = keras.layers.Bidirectional(layer, name=f"{name}_bi_{i}")
        x = layer(x)
        if return_state:
            x, st = x[0], list(x[1:])
            states.append(st)
    return (x, states) if return_state else x


def recurrent_layers(model, name: str = "rnn") -> list:
    """The stack's recurrent layers of a built model, in order (``rnn_0``, ``rnn_1``, ...)."""
    out, i = [], 0
    names = {layer.name: layer for layer in model.layers}
    while f"{name}_{i}" in names:
        out.append(names[f"{name}_{i}"])
        i += 1
    return out
