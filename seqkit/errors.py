"""Errors that seqkit reports to users as one clear paragraph (no traceback).

Every error a user can cause by a bad recipe, data file, CLI argument or run
directory is a :class:`SeqkitError`. The CLI prints its message and exits with
status 2; ``--debug`` shows the traceback as well.
"""

from __future__ import annotations

import difflib
from typing import Iterable


class SeqkitError(Exception):
    """A user-facing error: the message names the file/line/key and the fix."""


class RecipeError(SeqkitError):
    """A recipe that does not validate (bad YAML, wrong type, unknown key)."""


class DataError(SeqkitError):
    """A data file or data source that cannot be read or is unusable."""


class RunDirError(SeqkitError):
    """A run directory that is missing, incomplete or not a seqkit run."""


class RegistryError(SeqkitError, KeyError):
    """An unknown or conflicting registry name."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest known name, or ``""``."""
    close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
    return f" Did you mean '{close[0]}'?" if close else ""


def shown_value(value, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters with the length said: a message that echoes
    what a user passed stays one paragraph whatever they passed."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def refuse_bidirectional(run_hint: str = "RUN_DIR", whole: bool = True) -> SeqkitError:
    """The error for a step export of a bidirectional encoder: offers the whole-sequence export
    (``whole``: the head has one) or the SavedModel (every head)."""
    why = ("this run's encoder is bidirectional (model.bidirectional: true): its backward pass reads "
           "the whole sequence from the end, so it has no step model to stream one input at a time "
           "(nor a state kept inside one, nor an int16 cell).")
    if not whole:
        return SeqkitError(f"{why} Its head exports no whole-sequence TFLite model either, so export it "
                           f"as `seqkit export {run_hint} --format saved_model` (its `predict` "
                           f"signature takes any shape), or train it with model.bidirectional: false "
                           f"for a step model.")
    return SeqkitError(
        f"{why} Export it as the whole-sequence model for a pinned shape instead -- `seqkit export "
        f"{run_hint}` does so when --step, --state internal and --int16-cell are left out (--batch B "
        f"--length T pin the shape) -- or as `--format saved_model` (its `predict` signature takes "
        f"any shape).")
