"""Class weights of the acceptor's loss (``training.class_weight``).

``balanced`` gives class ``c`` the weight ``n / (C * n_c)`` (``n`` training examples,
``C`` classes, ``n_c`` examples of class ``c``; scikit-learn's ``class_weight="balanced"``,
after King & Zeng 2001): every class then carries the same total weight, ``n / C``.
A mapping ``{label: weight}`` gives those labels their weight and every other label 1.

The weights multiply each example's cross-entropy in the training loss
(:class:`seqkit.training.losses.MaskedSparseCrossEntropy`); the reported figures (cross-entropy,
accuracy, macro-F1) and the value checkpoints and early stopping watch stay unweighted.
"""

from __future__ import annotations

import collections

from seqkit.errors import RecipeError

CLASS_WEIGHTS = "class_weights.json"


def resolve_class_weights(spec, names: list, train_labels: list) -> list | None:
    """One weight per class id.

    Args:
        spec: ``None``, ``"balanced"`` or ``{label: weight}`` (validated by the recipe).
        names: the label vocabulary's names, in id order.
        train_labels: the training split's labels (one per example).

    Returns:
        ``[w_0, ..., w_{C-1}]`` floats, or ``None`` when ``spec`` is ``None``.

    Raises:
        RecipeError: a mapping names a label the training split does not have.
    """
    if spec is None:
        return None
    if spec == "balanced":
        counts = collections.Counter(train_labels)
        n, c = sum(counts[k] for k in names), len(names)
        return [n / (c * counts[k]) for k in names]
    unknown = sorted(set(spec) - set(names))
    if unknown:
        shown = ", ".join(repr(x) for x in names[:20]) + (", ..." if len(names) > 20 else "")
        raise RecipeError(f"training.class_weight: {', '.join(repr(u) for u in unknown)} "
                          f"{'is not a label' if len(unknown) == 1 else 'are not labels'} of the "
                          f"training split (its labels: {shown}). Fix the spelling or remove the key.")
    return [float(spec.get(k, 1.0)) for k in names]
