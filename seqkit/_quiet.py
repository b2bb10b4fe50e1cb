"""Import TensorFlow with its C++ start-up log lines (oneDNN, CUDA probing) hidden.

Those lines are written to file descriptor 2 before Python's logging exists,
so the only way to hide them is to point fd 2 elsewhere for the import.
Python exceptions still propagate; ``--debug`` skips the hiding.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import os
import sys
import threading


def import_tensorflow_quietly() -> None:
    """Import TF (and probe devices) with fd 2 sent to /dev/null; restore it afterwards."""
    if "tensorflow" in sys.modules:
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        import tensorflow as tf

        tf.config.list_physical_devices()
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


#: Lines LiteRT's C++ writes to fd 2 on every interpreter it makes: noise, not news.
LITERT_NOISE = ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",)


class litert_quietly:
    """Around making a LiteRT interpreter: fd 2 is captured, and what LiteRT wrote there passes on
    to stderr less its :data:`LITERT_NOISE` lines (its errors still show, and raise as before).

    One capture at a time per process (a lock; a nested or concurrent use waits, and fd 2 is
    always put back); where fd 2 cannot be duplicated or no temporary file can be made, nothing
    is captured."""

    _lock = threading.RLock()

    def __enter__(self):
        import tempfile

        self._lock.acquire()
        self._saved = self._file = None
        try:
            sys.stderr.flush()
            self._file = tempfile.TemporaryFile()
            self._saved = os.dup(2)
            os.dup2(self._file.fileno(), 2)
        except (OSError, ValueError):  # no fd 2, no temporary folder: LiteRT writes as it would
            if self._saved is not None:
                os.close(self._saved)
            if self._file is not None:
                self._file.close()
            self._saved = self._file = None
        return self

    def __exit__(self, *exc):
        try:
            if self._saved is None:
                return False
            sys.stderr.flush()
            os.dup2(self._saved, 2)
            os.close(self._saved)
            self._file.seek(0)
            text = self._file.read(1 << 20).decode("utf-8", "replace")
            self._file.close()
            kept = [ln for ln in text.splitlines() if ln.strip() and ln.strip() not in LITERT_NOISE]
            if kept:
                sys.stderr.write("\n".join(kept) + "\n")
                sys.stderr.flush()
            return False
        finally:
            self._lock.release()
