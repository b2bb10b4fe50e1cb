"""``training.monitor``: which validation figure keeps the best epoch.

By default the best epoch (``model.keras``), early stopping and a ``plateau`` schedule watch the
exact validation cross-entropy (``val_cross_entropy``; ``val_loss`` for a head without it). With
label smoothing, or when outputs are what is scored (a transducer's words), the epoch of the
lowest cross-entropy need not be the epoch of the fewest wrong outputs. A head may offer figures
it computes by decoding the validation split at the end of each epoch
(:attr:`seqkit.heads.base.Head.selection_metrics`; the encoder-decoder offers ``wer`` and
``per``); ``training.monitor: val_wer`` then keeps the epoch of the lowest validation WER, as
the G2P and translation literature selects its checkpoints (on the development set's error rate
or BLEU). The figures go into each epoch's logs, ``history.json`` and TensorBoard as
``val_<name>``. Cost: one decoding pass over the validation split per epoch.

Keras is imported inside the function that defines the callback, so importing this module does
not load TensorFlow.
"""

from __future__ import annotations

from seqkit.errors import SeqkitError


def resolve(monitor: str | None, default: str, has_valid: bool) -> str:
    """The logged name the checkpoint and early stopping watch.

    Args:
        monitor: ``training.monitor`` (``None`` or ``val_<name>``; the recipe check has made sure
            ``<name>`` is one of the head's :attr:`~seqkit.heads.base.Head.selection_metrics`).
        default: the exact cross-entropy's logged name (``val_cross_entropy`` or
            ``cross_entropy`` without a validation split).
        has_valid: whether the validation split has records.

    Returns:
        ``monitor`` when given, else ``default``.

    Raises:
        SeqkitError: ``monitor`` set and the validation split empty.
    """
    if monitor is None:
        return default
    if not has_valid:
        raise SeqkitError(f"training.monitor: {monitor} is decoded on the validation split, which is "
                          f"empty for this recipe. Give data.split.valid a share (or a valid file), or "
                          f"remove training.monitor.")
    return monitor


def callback(head, records: list):
    """A Keras callback that puts the head's selection figures into each epoch's logs.

    Args:
        head: the run's :class:`~seqkit.heads.base.Head` (its :meth:`selection_figures`).
        records: the validation split's records.

    Returns:
        A ``keras.callbacks.Callback`` to run before the checkpoint callback, whose ``logs`` it
        fills in place with ``val_<name>`` floats.
    """
    import keras

    class SelectionFigures(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if logs is None:
                return
            figures = head.selection_figures(self.model, records)
            logs.update({f"val_{k}": float(v) for k, v in figures.items()})

    return SelectionFigures()
