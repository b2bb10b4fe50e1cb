"""The recipe's ``decoding`` section overridden for one evaluation (``seqkit evaluate --set
decoding.KEY=VALUE``, ``Run.evaluate(decoding={...})``): the outputs a trained model is scored
on are chosen at evaluation time (beam width, length penalty), so they can be chosen on valid
without retraining. The model, data and vocabularies stay the run's."""

from __future__ import annotations

import dataclasses

import pydantic

from seqkit.errors import SeqkitError
from seqkit.recipe import DecodingConfig, override_problems, parse_override
from seqkit.registry import HEADS


def decoding_from_sets(texts) -> dict:
    """``["decoding.beam_width=10", ...]`` (``--set`` strings) -> ``{"beam_width": 10, ...}``.

    Raises:
        SeqkitError: a string without ``=``, or a key outside ``decoding``.
    """
    out = {}
    for text in texts:
        parts, value = parse_override(text)
        if len(parts) != 2 or parts[0] != "decoding":
            raise SeqkitError(f"--set {text}: evaluate takes decoding.KEY=VALUE only (e.g. --set "
                              f"decoding.beam_width=10 --set decoding.length_penalty=0.6); the model, "
                              f"data and every other key are the trained run's.")
        out[parts[1]] = value
    return out


def with_decoding(recipe, decoding: dict, where: str):
    """A copy of ``recipe`` (:class:`seqkit.recipe.Recipe`) whose ``decoding`` section takes the
    keys of ``decoding`` over the run's.

    Args:
        recipe: the run's recipe.
        decoding: ``{key of the decoding section: value}``.
        where: the run directory, for messages.

    Returns:
        The new :class:`~seqkit.recipe.Recipe` (the run's is not changed).

    Raises:
        SeqkitError: the run's head does not decode outputs in its evaluation
            (``Head.evaluation_decodes``), or a key or value the recipe's ``decoding`` would refuse.
    """
    head = HEADS.get(recipe.head.type)
    if not getattr(head, "evaluation_decodes", False):
        raise SeqkitError(f"{where}: the '{recipe.head.type}' head's evaluation decodes no outputs, so "
                          f"decoding.* settings would change none of its figures; use them with "
                          f"`seqkit generate` / `seqkit predict`, or evaluate an encoder-decoder run.")
    try:
        section = DecodingConfig.model_validate({**recipe.decoding.model_dump(), **decoding})
    except pydantic.ValidationError as exc:
        errs = "; ".join(override_problems(exc, DecodingConfig, "decoding", decoding))
        raise SeqkitError(f"{where}: evaluation decoding settings refused: {errs.rstrip('.')}. The keys are those of "
                          f"the recipe's decoding section (docs/recipe-reference.md).") from None
    return dataclasses.replace(recipe, config=recipe.config.model_copy(update={"decoding": section}))
