"""The cell-plugin contract.

A cell plugin turns the ``model`` section of a recipe into Keras recurrent
layers. seqkit's state layout is one ``[B, H]`` float32 tensor per state per
layer, in the order given by :attr:`CellPlugin.state_names` (LSTM: ``h`` then
``c``, as Keras's ``LSTMCell``).

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import abc
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict


class NoOptions(BaseModel):
    """Options model for a cell plugin that takes no options of its own."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class CellSpec:
    """Everything a plugin needs to build one recurrent layer.

    Attributes:
        units: hidden width ``H`` (positive int).
        dropout: fraction of the layer's inputs dropped in training, in ``[0, 1)``.
        recurrent_dropout: fraction of the recurrent state dropped, in ``[0, 1)``.
        options: the plugin's own validated options (an instance of ``Options``).
        weight_drop: DropConnect rate on the recurrent kernel in training, in ``[0, 1)``
            (``model.weight_drop``; only plugins with :attr:`CellPlugin.supports_weight_drop`).
    """

    units: int
    dropout: float = 0.0
    recurrent_dropout: float = 0.0
    options: Any = None
    weight_drop: float = 0.0


def low_product(a, w, dtype: str):
    """``a @ w`` with both operands rounded to ``dtype`` (``"bfloat16"`` / ``"float16"``), the
    product accumulated in float32 by the backend and its result widened to float32: what a
    plugin's :meth:`CellPlugin.product_step` multiplies with. ``a [B, D]``, ``w [D, G]`` float32
    -> ``[B, G]`` float32."""
    from keras import ops

    return ops.cast(ops.matmul(ops.cast(a, dtype), ops.cast(w, dtype)), "float32")


class CellPlugin(abc.ABC):
    """Base class for cell plugins; subclass it and decorate with ``@register_cell``.

    The guide ``docs/cells.md`` writes one from scratch (a complete, tested example).

    Subclasses set :attr:`Options` (a pydantic model whose fields become recipe
    keys under ``model``), :attr:`state_names`, and implement :meth:`make_cell`.
    The default :meth:`make_layer` wraps the cell in ``keras.layers.RNN``; a
    plugin may return a faster fused layer instead, as long as its ``.cell``
    holds the same weights (the step models used for generation and streaming
    call ``layer.cell`` one step at a time). Such a layer must treat a mask as
    ``keras.layers.RNN`` does (padded steps keep the state) and take
    ``return_sequences``, ``return_state`` and ``go_backwards`` (see
    ``plugins/seqkit-mingru`` for a parallel-scan layer). Keras classes a plugin
    defines must be registered with ``keras.saving.register_keras_serializable``
    and implement ``get_config``: runs reload in Keras safe mode.
    """

    Options: ClassVar[type[BaseModel]] = NoOptions
    state_names: ClassVar[tuple[str, ...]] = ("h",)
    #: whether :meth:`make_layer` honours ``spec.weight_drop`` (the recipe refuses it otherwise)
    supports_weight_drop: ClassVar[bool] = False
    _warned: ClassVar[set] = set()

    def __init__(self, spec: CellSpec):
        self.spec = spec
        self.options = spec.options if spec.options is not None else self.Options()

    def product_step(self, cell, x_t, states, dtype: str):
        """One step of :meth:`make_cell`'s cell with its matrix products in ``dtype``, or None.

        An encoder-decoder trained under a mixed precision policy calls this for each decoder
        step (per-step products of ``[B, D] @ [D, G]``, too large to leave in float32 at the
        batch sizes such models train with). A plugin that implements it runs its products in
        ``dtype`` (``"bfloat16"`` / ``"float16"``) with float32 accumulation and keeps every
        state, gate and output float32; None (this default): the decoder calls the cell as it
        is, in float32.

        Args:
            cell: a cell this plugin made (built).
            x_t: ``[B, D]`` float32 step input.
            states: the cell's states, ``[B, H]`` float32 each (:attr:`state_names` order).
            dtype: ``"bfloat16"`` or ``"float16"``.

        Returns:
            ``(y_t [B, H] float32, new_states)`` as ``cell(x_t, states)`` returns them, or None.
        """
        return None

    @abc.abstractmethod
    def make_cell(self, name: str | None = None):
        """Return a Keras RNN cell: ``call(x_t [B, D], states) -> (y_t [B, H], new_states)``."""

    def make_layer(self, *, return_sequences: bool = True, return_state: bool = False,
                   go_backwards: bool = False, name: str | None = None):
        """Return a full-sequence layer: ``[B, T, D] -> [B, T, H]`` (or ``[B, H]``), plus states."""
        import keras

        return keras.layers.RNN(
            self.make_cell(name=None if name is None else name + "_cell"),
            return_sequences=return_sequences, return_state=return_state,
            go_backwards=go_backwards, name=name,
        )

    def fast_path_issues(self) -> list[str]:
        """Reasons this configuration leaves the fused (cuDNN) kernel; empty when it stays on it."""
        return []

    def warn_fast_path(self, cell_name: str) -> None:
        """Warn once per process and reason when the configuration leaves the fused kernel."""
        for reason in self.fast_path_issues():
            key = (cell_name, reason)
            if key not in CellPlugin._warned:
                CellPlugin._warned.add(key)
                warnings.warn(
                    f"seqkit: cell '{cell_name}' will not use the fused kernel (cuDNN on a GPU; "
                    f"for lstm also seqkit's fused CPU kernel) because {reason}; training runs "
                    f"the generic step loop, several times slower on a GPU and about 1.3x "
                    f"slower on a CPU for lstm.",
                    stacklevel=3,
                )

    def parameter_count(self, input_dim: int) -> int | None:
        """Weights of one layer over inputs of width ``input_dim`` (``None``: unknown).

        seqkit refuses a recipe whose model cannot fit in memory before building it; a plugin
        that returns ``None`` is caught only when building runs out of memory.
        """
        return None

    def gates(self, cell, x_t, states) -> dict | None:
        """The cell's gate activations for one step, for ``seqkit diagnose`` (optional hook).

        Args:
            cell: a step cell this plugin made (``layer.cell`` of a trained run), with its weights.
            x_t: the layer's input at this step, ``[B, D]`` float32.
            states: the layer's states before the step, ``[B, H]`` float32 each,
                in :attr:`state_names` order.

        Returns:
            ``{gate name: [B, H] float32 in [0, 1]}`` computed from the cell's weights
            exactly as its ``call`` does (inference: no dropout), or ``None`` (the
            default) for a cell without gates -- ``seqkit diagnose`` then reports
            gradient flow only. The built-in ``lstm`` gives ``input``, ``forget``,
            ``output``; ``gru`` gives ``update``, ``reset``.
        """
        return None

    @property
    def state_size(self) -> list[int]:
        """Width of each state tensor, in :attr:`state_names` order."""
        return [self.spec.units] * len(self.state_names)


class KerasCellPlugin(CellPlugin):
    """A plugin over one of Keras's own recurrent layers (``keras.layers.<layer_name>``).

    Subclasses set :attr:`cell_name` / :attr:`layer_name` (e.g. ``"LSTMCell"``
    / ``"LSTM"``) and :meth:`layer_kwargs`; the fused layer and the step cell
    then take the same configuration.
    """

    cell_name: ClassVar[str]
    layer_name: ClassVar[str]

    @abc.abstractmethod
    def layer_kwargs(self) -> dict:
        """Constructor arguments shared by the cell and the full-sequence layer."""

    def make_cell(self, name=None):
        import keras

        return getattr(keras.layers, self.cell_name)(name=name, **self.layer_kwargs())

    def layer_class(self):
        """The full-sequence layer class (default ``keras.layers.<layer_name>``)."""
        import keras

        return getattr(keras.layers, self.layer_name)

    def make_layer(self, *, return_sequences=True, return_state=False, go_backwards=False, name=None):
        extra = {"weight_drop": self.spec.weight_drop} if self.spec.weight_drop else {}
        return self.layer_class()(
            return_sequences=return_sequences, return_state=return_state,
            go_backwards=go_backwards, name=name, **self.layer_kwargs(), **extra)


def cudnn_reasons(*, activation: str, recurrent_activation: str, recurrent_dropout: float,
                  use_bias: bool, reset_after: bool | None = None) -> list[str]:
    """Reasons a Keras LSTM/GRU configuration is refused by the cuDNN kernel (Keras 3 rules)."""
    reasons = []
    if activation != "tanh":
        reasons.append(f"activation is '{activation}' (cuDNN needs 'tanh')")
    if recurrent_activation != "sigmoid":
        reasons.append(f"recurrent_activation is '{recurrent_activation}' (cuDNN needs 'sigmoid')")
    if recurrent_dropout > 0:
        reasons.append(f"recurrent_dropout is {recurrent_dropout} (cuDNN needs 0)")
    if not use_bias:
        reasons.append("use_bias is false (cuDNN needs biases)")
    if reset_after is False:
        reasons.append("reset_after is false (cuDNN needs the reset gate after the matmul)")
    return reasons
