"""Training a run: data -> vocabulary -> model -> ``fit``, and what the recipe's ``training`` section
configures.

* :mod:`~seqkit.training.train` -- ``prepare`` / ``compile_model`` / ``train`` / ``load_run``
  (what ``seqkit train``, ``evaluate`` and :func:`seqkit.train` run);
* :mod:`~seqkit.training.losses` -- masked losses and Keras metrics (padding never counts);
* :mod:`~seqkit.training.optimizers` -- optimizers with exact global-norm clipping under
  ``tf.distribute``;
* :mod:`~seqkit.training.schedules` -- learning-rate schedules (``training.schedule``);
* :mod:`~seqkit.training.class_weights` -- ``training.class_weight``;
* :mod:`~seqkit.training.distribute` -- ``training.distribute`` strategies;
* :mod:`~seqkit.training.grad_stats` -- ``training.diagnostics``: gradient norms per epoch;
* :mod:`~seqkit.training.precision` -- ``training.precision``: mixed-precision policies;
* :mod:`~seqkit.training.progress` -- the step count, the ETA and early stopping's ending, as training runs;
* :mod:`~seqkit.training.seeds` -- ``seqkit train --seeds N``: one recipe, several seeds.

Nothing is imported here, so ``import seqkit.training`` loads no TensorFlow.
"""
