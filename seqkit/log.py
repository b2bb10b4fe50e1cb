"""Console messages for humans, through Python :mod:`logging` (logger name ``seqkit``).

A library call prints nothing: the ``seqkit`` logger has only a :class:`logging.NullHandler`
until someone adds a handler (``logging.basicConfig(level=logging.INFO)`` shows seqkit's
progress and warnings in your program). The command line installs :func:`to_stderr` around
each command, which prints ``seqkit: MESSAGE`` / ``seqkit: warning: MESSAGE`` to stderr,
apart from the results on stdout.
"""

from __future__ import annotations

import contextlib
import logging
import sys

logger = logging.getLogger("seqkit")
logger.addHandler(logging.NullHandler())


def info(msg: str) -> None:
    """Log a progress/information line (level INFO)."""
    logger.info(msg)


def warn(msg: str) -> None:
    """Log a warning (level WARNING)."""
    logger.warning(msg)


class StderrHandler(logging.Handler):
    """Print records as ``seqkit: MSG`` (``seqkit: warning: MSG`` from WARNING up) to the
    *current* ``sys.stderr`` (click's test runner swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            prefix = "seqkit: warning: " if record.levelno >= logging.WARNING else "seqkit: "
            print(prefix + record.getMessage(), file=sys.stderr, flush=True)
        except Exception:  # pragma: no cover - logging's own convention
            self.handleError(record)


@contextlib.contextmanager
def to_stderr(level: int = logging.INFO):
    """Within the block, print seqkit's log lines from ``level`` up to stderr (what the CLI
    does around every command). Nested blocks print each line once."""
    if any(isinstance(h, StderrHandler) for h in logger.handlers):
        yield
        return
    handler, old, propagate = StderrHandler(level), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False  # a root handler (TF/absl install one) would print each line again
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
        logger.propagate = propagate
