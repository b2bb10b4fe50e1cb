"""Streaming runtime: run an exported TFLite step model one input at a time (the on-device loop)."""

from seqkit.runtime.streaming import StreamingModel

__all__ = ["StreamingModel"]
