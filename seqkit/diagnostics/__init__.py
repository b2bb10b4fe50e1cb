"""Seeing inside a trained model (``seqkit diagnose``, ``seqkit plot``, ``seqkit attention``,
``seqkit evaluate --out``).

* :mod:`~seqkit.diagnostics.diagnose` -- gradient flow through time and gate statistics;
* :mod:`~seqkit.diagnostics.plots` -- pictures of those, of training curves and of confusion
  matrices, each with a JSON of the plotted numbers (matplotlib, the ``plot`` extra);
* :mod:`~seqkit.diagnostics.alignment` -- an encoder-decoder's attention matrix for one input.

The gradient norms recorded *during* training (``training.diagnostics``) are in
:mod:`seqkit.training.grad_stats`.
"""
