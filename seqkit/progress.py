"""Progress of long loops (decoding a test set, predicting over a file, export parity checks):
one line with an ETA on stderr, drawn only where someone is watching.

Library code wraps its loop::

    with progress(len(sources), "decoding", "sources") as bar:
        for chunk in chunks:
            ...
            bar.update(len(chunk))

and by default nothing is drawn: a library call prints nothing. Within :func:`shown` (the
command line wraps every command in it unless ``-q``; Python code may too) the line is drawn,
but only when ``sys.stderr`` is a terminal, so a pipe or a log file gets no progress at all.
It is redrawn in place (``\\r``) at most 10 times a second and erased when the loop ends, so
stdout and the lines seqkit logs are unchanged. Only the outermost loop draws (an inner one,
e.g. the decoding inside an export's parity check, stays silent). Every finished loop also
logs ``WHAT: N UNIT in S s`` at DEBUG level on the ``seqkit`` logger (``seqkit -v``).

Training's progress is Keras's own progress bar (``fit(verbose=1)``), which writes to stdout;
this module uses no third-party progress library (no new dependency).

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import contextlib
import sys
import time

from seqkit import log

_SHOWN: list[bool] = []  # a stack: the innermost shown(...) decides
_DRAWING: list["Progress"] = []  # the bar on screen now (at most one)

REFRESH_S = 0.1
WIDTH = 24  # characters of the bar itself


@contextlib.contextmanager
def shown(enabled: bool = True):
    """Within the block, draw progress lines on stderr when it is a terminal (``enabled=False``:
    never, e.g. ``seqkit -q``)."""
    _SHOWN.append(bool(enabled))
    try:
        yield
    finally:
        _SHOWN.pop()


def _clock(seconds: float) -> str:
    """``m:ss`` or ``h:mm:ss``."""
    s = int(round(max(seconds, 0.0)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def render(what: str, done: int, total: int, unit: str, elapsed: float) -> str:
    """The progress line: ``seqkit: WHAT DONE/TOTAL UNIT [####....] P% ELAPSED elapsed, ETA E``.

    ``total`` 0 (unknown): ``seqkit: WHAT DONE UNIT, ELAPSED elapsed``. The ETA assumes the remaining items take as long each as the finished ones:
    ``elapsed / done * (total - done)`` (shown as ``?`` before the first item finishes).
    """
    total = max(int(total), 0)
    if not total:  # an unknown count: no bar, no ETA
        return f"seqkit: {what} {done:,} {unit}, {_clock(elapsed)} elapsed"
    frac = min(done / total, 1.0)
    fill = int(frac * WIDTH)
    eta = _clock(elapsed / done * (total - done)) if done else "?"
    return (f"seqkit: {what} {done:,}/{total:,} {unit} [{'#' * fill}{'.' * (WIDTH - fill)}] "
            f"{100 * frac:3.0f}% {_clock(elapsed)} elapsed, ETA {eta}")


class Progress:
    """Counts finished items of one loop; draws its line when :func:`shown` and stderr is a TTY.

    Args:
        total: how many items the loop will finish.
        what: what is being done, e.g. ``"decoding"``.
        unit: what an item is, e.g. ``"sources"``.
    """

    def __init__(self, total: int, what: str, unit: str = "items"):
        self.total, self.what, self.unit = int(total), what, unit
        self.done = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._stream = sys.stderr
        self.drawing = bool(_SHOWN) and _SHOWN[-1] and not _DRAWING and _is_tty(self._stream)
        if self.drawing:
            _DRAWING.append(self)

    def update(self, n: int = 1) -> None:
        """``n`` more items are finished."""
        self.done += int(n)
        if not self.drawing:
            return
        now = time.monotonic()
        if now - self._last >= REFRESH_S or self.done >= self.total:
            self._last = now
            self._write("\r" + render(self.what, self.done, self.total, self.unit, now - self.start) + "\x1b[K")

    def close(self) -> None:
        """End the loop: erase the line, and log ``WHAT: N UNIT in S s`` at DEBUG level."""
        if self.drawing:
            self._write("\r\x1b[K")
            _DRAWING.remove(self)
            self.drawing = False
        log.logger.debug(f"{self.what}: {self.done:,} {self.unit} in {time.monotonic() - self.start:.1f} s")

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # a closed terminal must not break the work
            self.drawing = False


def _is_tty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def progress(total: int, what: str, unit: str = "items"):
    """A :class:`Progress` for the ``with`` block (closed, and its line erased, on exit)."""
    bar = Progress(total, what, unit)
    try:
        yield bar
    finally:
        bar.close()


def keras_evaluate(model, dataset, what: str = "evaluating") -> dict:
    """``model.evaluate(dataset, verbose=0, return_dict=True)`` with a progress line over its
    batches (their count from ``dataset.cardinality()``; unknown for a bucketed dataset)."""
    import keras

    try:
        total = max(int(dataset.cardinality()), 0)  # -1 infinite, -2 unknown
    except Exception:  # not a tf.data.Dataset
        total = 0
    with progress(total, what, "batches") as bar:

        class _Count(keras.callbacks.Callback):
            def on_test_batch_end(self, batch, logs=None):
                bar.update()

        return model.evaluate(dataset, verbose=0, return_dict=True, callbacks=[_Count()])
