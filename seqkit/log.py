"""Console messages for humans (stderr), separate from results (stdout)."""

from __future__ import annotations

import sys


def info(msg: str) -> None:
    """Print a progress/information line to stderr."""
    print(f"seqkit: {msg}", file=sys.stderr, flush=True)


def warn(msg: str) -> None:
    print(f"seqkit: warning: {msg}", file=sys.stderr, flush=True)
