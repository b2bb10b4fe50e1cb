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
