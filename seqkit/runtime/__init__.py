"""Streaming runtime: run an exported TFLite step model one input at a time (the on-device loop).

``Seq2SeqModel`` (an encoder-decoder export's runtime) belongs to its head,
:mod:`seqkit.heads.seq2seq.runtime`; it is still reachable here, looked up on first use so that this
package imports no head.
"""

from seqkit.runtime.stateful import StatefulStreamingModel
from seqkit.runtime.streaming import StreamingModel

__all__ = ["Seq2SeqModel", "StatefulStreamingModel", "StreamingModel"]


def __getattr__(name: str):
    if name == "Seq2SeqModel":
        from seqkit.heads.seq2seq.runtime import Seq2SeqModel

        return Seq2SeqModel
    raise AttributeError(f"module 'seqkit.runtime' has no attribute {name!r}")
