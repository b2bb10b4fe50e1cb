"""DropConnect on the recurrent kernel ("weight dropping", AWD-LSTM's main regulariser).

Sources: L. Wan, M. Zeiler, S. Zhang, Y. LeCun, R. Fergus, "Regularization of Neural Networks
using DropConnect", ICML 2013 (dropout applied to weights rather than activations); S. Merity,
N. S. Keskar, R. Socher, "Regularizing and Optimizing LSTM Language Models", ICLR 2018, Section
2 (the hidden-to-hidden matrix ``U`` is dropped once per forward pass, the same mask for every
time step and every sequence of the batch, so the recurrence itself is regularised while the
fused/cuDNN kernels still run: nothing changes inside the loop).

In training, every call of a layer with ``weight_drop = p > 0`` uses
``U~ = U * M / (1 - p)``, ``M`` a Bernoulli(1 - p) mask of ``U``'s shape ``[H, G]`` (``G`` = 4H
for the LSTM, 3H for the GRU) drawn from the cell's seed generator; the gradient reaches ``U``
through the mask. At inference ``U`` is used as it is (the 1 / (1 - p) scaling keeps its
expected value), so step models, exports and generation are unchanged.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def dropped_recurrent_kernel(layer, training):
    """Within the block, ``layer.cell.recurrent_kernel`` is the dropped ``U~`` (training only).

    Args:
        layer: a :class:`~seqkit.layers.fused_lstm.FusedLSTM` / :class:`~seqkit.layers.fused_gru.FusedGRU`
            (its ``weight_drop`` rate ``p`` in ``[0, 1)``, ``cell.recurrent_kernel`` ``[H, G]``
            float32, ``cell.seed_generator``).
        training: Python bool or None; the mask applies only when true and ``p > 0``.

    Both the fused CPU loop and Keras's own paths (cuDNN, the generic step loop) read
    ``cell.recurrent_kernel``, so all of them see ``U~``; the variable is put back on exit.
    """
    rate = layer.weight_drop
    if not (training and rate > 0):
        yield
        return
    import keras

    cell = layer.cell
    kernel = cell.recurrent_kernel
    dropped = keras.random.dropout(kernel, rate, seed=cell.seed_generator)
    object.__setattr__(cell, "recurrent_kernel", dropped)  # a tensor: not tracked as a weight
    try:
        yield
    finally:
        object.__setattr__(cell, "recurrent_kernel", kernel)


def check_rate(rate) -> float:
    """``rate`` as a float in ``[0, 1)``; ValueError otherwise."""
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"weight_drop must be in [0, 1), got {rate}.")
    return rate


class WeightDropConfig:
    """Mixin for a fused recurrent layer: the ``weight_drop`` constructor argument (checked by
    :func:`check_rate`) and its place in ``get_config`` (left out at 0, so the configs of earlier
    runs stay as they were). The layer applies it with :func:`dropped_recurrent_kernel`."""

    def __init__(self, *args, weight_drop: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.weight_drop = check_rate(weight_drop)

    def get_config(self):
        config = super().get_config()
        if self.weight_drop:
            config["weight_drop"] = self.weight_drop
        return config
