"""The tagger head (:mod:`.head`); its CRF layer is :mod:`seqkit.layers.crf` and the runtime Viterbi :mod:`seqkit.runtime.viterbi`."""
