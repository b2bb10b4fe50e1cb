"""The figures a run is judged by, computed in Python from its outputs (no Keras).

* :mod:`~seqkit.metrics.classification` -- accuracy, per-class precision/recall/F1, macro-F1,
  confusion matrix, entity-level F1 (acceptor, tagger);
* :mod:`~seqkit.metrics.edit_distance` -- Levenshtein distance, word and phoneme error rates
  (seq2seq, G2P);
* :mod:`~seqkit.metrics.text` -- BLEU and chrF of text outputs (``sacrebleu``, the ``text`` extra);
* :mod:`~seqkit.metrics.baselines` -- count-based baselines every model must beat (n-gram LMs,
  most frequent target per symbol);
* :mod:`~seqkit.metrics.significance` -- McNemar's exact test of two systems on the same items
  (seq2seq model against its lookup baseline).

The masked losses and Keras metrics computed while training are in :mod:`seqkit.training.losses`.
"""
