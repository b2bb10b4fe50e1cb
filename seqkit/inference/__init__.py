"""Using a trained model: decoding and answering inputs (what ``Run.generate`` / ``predict`` /
``transduce`` and ``seqkit generate`` / ``predict`` compute).

* :mod:`~seqkit.inference.decoding` -- greedy, sampling and beam search, in-graph and batched;
* :mod:`~seqkit.inference.generate` -- text generation from a language-model run;
* :mod:`~seqkit.inference.predict` -- raw input -> records -> labels or tags (acceptor, tagger);
* :mod:`~seqkit.inference.transduce` -- source strings -> n-best target sequences (seq2seq);
* :mod:`~seqkit.inference.serving` -- a run as a Keras model from raw strings to answers (the
  SavedModel's text signatures).

Exported models run without Keras in :mod:`seqkit.runtime`.
"""
