"""Using a trained model, the machinery every head shares: decoding (:mod:`~seqkit.inference.decoding`:
greedy, sampling and beam search, in-graph and batched) and the text-in/text-out serving model
(:mod:`~seqkit.inference.serving`), and a recipe's ``decoding`` overridden for one evaluation
(:mod:`~seqkit.inference.decoding_overrides`). What a head answers raw input with is the head's own
(:meth:`seqkit.heads.base.Head.predict`; e.g. :mod:`seqkit.heads.language_model.generate`,
:mod:`seqkit.heads.sequence.predict`, :mod:`seqkit.heads.seq2seq.transduce`).

Exported models run without Keras in :mod:`seqkit.runtime`.
"""
