"""The encoder-decoder (seq2seq) head and everything it owns: the head (:mod:`.head`), decoding
(:mod:`.decoding`), transduction of raw input (:mod:`.transduce`), the export writer, its archive and
parity check (:mod:`.export`, :mod:`.archive`, :mod:`.parity`) and the TFLite runtime
(:mod:`.runtime`)."""
