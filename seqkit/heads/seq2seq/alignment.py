"""Attention alignments of an encoder-decoder run: for one source, the decoder's attention over the
source positions at each output step of its best beam-search output (``seqkit attention`` draws
them with :func:`seqkit.diagnostics.alignment.draw`)."""

from __future__ import annotations

import numpy as np

from seqkit.data.vocab import START_ID
from seqkit.errors import SeqkitError
from seqkit.heads.seq2seq.decoding import Seq2SeqStepper


def alignment(prep, model, text: str, *, beam_width: int) -> tuple[list, list, np.ndarray]:
    """``(source symbols [S], output symbols + "</s>" [T], weights [T, S] float32)`` for one input.

    Raises:
        SeqkitError: the run was trained without attention (there are no weights to draw).
    """
    head = prep.head
    if head.options.attention == "none":
        raise SeqkitError("this run was trained with head.attention: none; it has no attention "
                          "weights to draw. Train with attention: bahdanau or luong.")
    out, _ = head.decode_texts(model, [text], beam_width=beam_width)[0][0]
    src = head.vocab.encode(head.source_tokens(text))
    dec_in = [START_ID] + head.target_vocab.encode(out)
    w = Seq2SeqStepper(model).alignment(np.asarray([src], "int32"), np.asarray([dec_in], "int32"))
    shown = [t if head.vocab.index.get(t) else "[UNK]" for t in head.source_tokens(text)]
    return shown, out + ["</s>"], np.asarray(w)[0]
