"""A recipe's training step, timed, and the training time it projects: ``--suite step``.

``python -m bench --suite step --recipe RECIPE [--variant "KEY=VALUE ..."]...`` builds the
recipe's model once per *variant* (its ``--set`` overrides, space-separated; no ``--variant``:
the recipe as written), compiled as ``seqkit train`` compiles it (precision, schedule, loss,
``jit_compile``), on the recipe's own training split, bucketing and batch size. Each variant's
``train_function`` is traced (its first step) and warmed up (one discarded measurement); then the
variants are timed round-robin, ``--repeats`` measurements of ``CALLS`` consecutive steps each, so
that a change in the machine's load falls on every variant alike.

Rows: per variant, the median milliseconds a step (min and max of the measurements), the
parameters, the steps an epoch (:func:`seqkit.training.train.steps_per_epoch_of`) and the
**projected training time**: median seconds a step x steps an epoch x ``training.epochs``. The
projection leaves out what an epoch does besides its steps (validation, and the decoding of the
validation split that ``training.monitor: val_wer`` adds) and the data preparation: a planning
figure for a recipe's time budget before a long run, not a substitute for timing the run.
"""

from __future__ import annotations

import shlex
import time

CALLS = 5  # consecutive steps in one measurement


def variant_overrides(variant: str) -> list[str]:
    """``"a.b=1 c=d"`` -> ``["a.b=1", "c=d"]`` (shell quoting rules; ``""`` -> ``[]``).

    Raises:
        SystemExit: a word without ``=`` (the one-line reason names it).
    """
    words = shlex.split(variant)
    bad = [w for w in words if "=" not in w]
    if bad:
        raise SystemExit(f"bench step: --variant {variant!r}: {bad[0]!r} is not KEY=VALUE "
                         "(give recipe overrides as --set takes them, space-separated)")
    return words


def projected_seconds(ms_per_step: float, steps_per_epoch: int, epochs: int) -> float:
    """Training time, seconds, of ``epochs`` epochs of ``steps_per_epoch`` steps at ``ms_per_step``."""
    return ms_per_step / 1e3 * steps_per_epoch * epochs


def _stepper(recipe_path: str, overrides: list[str]):
    from bench.suite_train import keras_stepper
    from seqkit.recipe import load_recipe
    from seqkit.training.train import (compile_model, count_parameters, make_split_dataset, prepare,
                                       seed_everything, steps_per_epoch_of)

    r = load_recipe(recipe_path, overrides or None)
    seed_everything(r.seed, r.training.deterministic)
    prep = prepare(r)
    steps = steps_per_epoch_of(prep)
    if not steps:
        raise SystemExit(f"bench step: {recipe_path}: the recipe has no training split to time")
    model = compile_model(prep, steps_per_epoch=steps)
    step = keras_stepper(model, make_split_dataset(prep, "train", training=True))
    t0 = time.perf_counter()
    step()  # traced here
    first = time.perf_counter() - t0
    return step, {"steps_per_epoch": steps, "epochs": r.training.epochs, "first_step_s": first,
                  "parameters": count_parameters(model)["total"]}


def run(args):
    from bench.common import interleaved, summarize, time_calls

    recipes = args.recipe or []
    if len(recipes) != 1:
        raise SystemExit("bench step: give one --recipe FILE (the recipe whose step is timed)")
    recipe = recipes[0]
    variants = args.variant or [""]
    steppers, info = {}, {}
    for v in variants:
        name = v or "(recipe as written)"
        print(f"-- {name}: preparing", flush=True)
        steppers[name], info[name] = _stepper(recipe, variant_overrides(v))

    res = interleaved({k: (lambda s=s: time_calls(s, CALLS) * 1e3) for k, s in steppers.items()},
                      repeats=2 if args.quick else args.repeats, warmup=1)
    rows = []
    for name, samples in res.items():
        s, i = summarize(samples), info[name]
        proj = projected_seconds(s["median"], i["steps_per_epoch"], i["epochs"])
        rows.append({"contender": name, "metric": "ms/step", **s, "parameters": i["parameters"],
                     "steps_per_epoch": i["steps_per_epoch"], "epochs": i["epochs"], "projected_s": proj,
                     "notes": f"{i['parameters']:,} parameters; {i['epochs']} epochs of {i['steps_per_epoch']} steps "
                              f"-> {proj / 60:.0f} min of steps; first step {i['first_step_s']:.1f} s"})
    return rows, {"what": f"{recipe}: ms per training step ({CALLS} steps a measurement, variants interleaved)",
                  "projected": "median s/step x steps an epoch x training.epochs: no validation, no decoding, "
                               "no data preparation"}
