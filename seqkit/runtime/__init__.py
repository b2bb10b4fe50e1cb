"""Streaming runtime: run an exported TFLite step model one input at a time (the on-device loop)."""

from seqkit.runtime.seq2seq_stream import Seq2SeqModel
from seqkit.runtime.stateful import StatefulStreamingModel
from seqkit.runtime.streaming import StreamingModel

__all__ = ["Seq2SeqModel", "StatefulStreamingModel", "StreamingModel"]
