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
    to stderr less its :data:`LITERT_NOISE` lines (its errors still show, and raise as before)."""

    def __enter__(self):
        import tempfile

        sys.stderr.flush()
        self._saved = os.dup(2)
        self._file = tempfile.TemporaryFile()
        os.dup2(self._file.fileno(), 2)
        return self

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        text = self._file.read(1 << 20).decode("utf-8", "replace")
        self._file.close()
        kept = [ln for ln in text.splitlines() if ln.strip() and ln.strip() not in LITERT_NOISE]
        if kept:
            sys.stderr.write("\n".join(kept) + "\n")
        return False
