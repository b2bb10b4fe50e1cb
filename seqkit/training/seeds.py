"""Training one recipe with several seeds and reporting the spread (``seqkit train --seeds N``).

Run ``i`` (``i = 0..N-1``) uses seed ``S_i = recipe.seed + i`` (the data split unless
``data.split.seed`` fixes it, the weight initialisation, the dropout masks and the batch order all
follow it), is named
``NAME-seed<S_i>`` and is written to ``BASE-seed<S_i>`` (``BASE``: ``--run-dir``, default
``runs/NAME``). The summary ``BASE-seeds.json`` gives, for every numeric figure of each split in
the runs' ``metrics.json`` (nested keys joined with ``.``, e.g. ``per_class.pos.f1``), over
the ``n`` runs::

    mean = sum x_i / n,   sd = sqrt(sum (x_i - mean)^2 / (n - 1))   (sample sd; null for n = 1),
    min, max, and the per-seed values.

The summary is seqkit's own file (it carries ``"written_by": "seqkit train --seeds"``): a file of
that name seqkit did not write, a folder or a symbolic link there is refused before any seed
trains, and the summary is staged under a hidden temporary name and renamed into place.

A stopped ``--seeds`` command continues where it stopped when run again: a seed's run that
already finished with the same recipe is kept (its ``metrics.json`` is read, nothing retrains), an
unfinished one with the same recipe is resumed from its last finished epoch, and any other existing
run is refused unless ``--overwrite`` (which retrains every seed).

Note: the data split follows the seed when it is shuffled (``data.split.shuffle: true``, the default
for examples that carry a class label) and ``data.split.seed`` is not set, so the spread then
includes the choice of the valid and test sets.
"""

from __future__ import annotations

import dataclasses
import math
import os


from seqkit.errors import RecipeError, RunDirError, SeqkitError
from seqkit.guards import check_writable
from seqkit.outputs import FileOutputs, OutputPathError, json_mark, written_by_seqkit
from seqkit.runs.json_files import bounded_json
from seqkit.runs.lifecycle import check_target
from seqkit.runs.rundir import not_a_run_because, strict_json
from seqkit.training.train import _flatten, train

SPLITS = ("valid", "test")


def seed_recipe(recipe, seed: int):
    """``recipe`` with ``seed`` and the name ``NAME-seed<seed>`` (a new :class:`Recipe`)."""
    if not 0 <= seed <= 2 ** 32 - 1:
        raise RecipeError(f"seed: {seed} is outside numpy's seed range [0, 2**32 - 1]; lower the "
                          f"recipe's seed or --seeds.")
    config = recipe.config.model_copy(update={"seed": seed, "name": f"{recipe.config.name}-seed{seed}"})
    return dataclasses.replace(recipe, config=config)


def numeric_leaves(d, prefix: str = "") -> dict:
    """``{"a.b": number}`` for the int/float leaves of nested dicts (bools, lists, strings skipped)."""
    out = {}
    for k, v in (d or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(numeric_leaves(v, key + "."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[key] = float(v)
    return out


def describe(values: list) -> dict:
    """``{"mean", "sd" (sample, n - 1; None for one value), "min", "max", "n"}`` of numbers."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1)) if n > 1 else None
    return {"mean": mean, "sd": sd, "min": min(values), "max": max(values), "n": n}


def summarize(metrics: list, seeds: list, runs: list) -> dict:
    """The seeds summary of the runs' ``metrics.json`` dicts (same order as ``seeds``).

    A figure missing from some runs is summarised over the runs that have it (``n`` says how many).
    """
    out = {"seeds": list(seeds), "runs": list(runs), "sd": "sample standard deviation (n - 1)"}
    for split in SPLITS:
        leaves = [numeric_leaves(m.get(split)) for m in metrics]
        keys = list(dict.fromkeys(k for lv in leaves for k in lv))
        if keys:
            out[split] = {k: {**describe([lv[k] for lv in leaves if k in lv]),
                              "values": [lv.get(k) for lv in leaves]} for k in keys}
    return out


def format_summary(summary: dict, split: str = "test") -> list[str]:
    """Console table lines: ``figure  mean ± sd  min  max`` for one split (per-class rows left out)."""
    rows = {k: v for k, v in summary.get(split, {}).items() if not k.startswith(("per_class.", "confusion"))}
    if not rows:
        return []
    width = max(len(k) for k in rows)
    lines = [f"{split} over {len(summary['seeds'])} seeds ({', '.join(map(str, summary['seeds']))}); "
             f"sd: sample (n - 1)",
             f"  {'figure':<{width}}  {'mean ± sd':>22}  {'min':>10}  {'max':>10}"]
    for k, s in rows.items():
        sd = "n/a" if s["sd"] is None else f"{s['sd']:.4g}"
        lines.append(f"  {k:<{width}}  {s['mean']:>11.4f} ± {sd:<8}  {s['min']:>10.4f}  {s['max']:>10.4f}")
    return lines


def summary_path(base: str) -> str:
    return f"{os.path.normpath(base)}-seeds.json"


#: The keys every seeds summary has held (one written before summaries carried ``written_by``).
SUMMARY_KEYS = ("recipe", "seeds", "runs", "sd")


def _is_summary(path: str) -> bool:
    """True when the regular file at ``path`` is a seeds summary seqkit wrote (its mark, or the
    keys and ``sd`` wording of one written before the mark; at most 64 MiB read)."""
    if written_by_seqkit(path):
        return True
    try:
        obj = bounded_json(path, 64 << 20)
    except (OSError, ValueError):
        return False
    return (isinstance(obj, dict) and all(k in obj for k in SUMMARY_KEYS)
            and obj["sd"] == "sample standard deviation (n - 1)" and isinstance(obj["seeds"], list))


def summary_output(base: str) -> FileOutputs:
    """The summary file ``BASE-seeds.json`` checked before training: absent, or a summary seqkit
    wrote (which it replaces).

    Raises:
        SeqkitError: the path is a folder, a symbolic link, a file inside a run directory, or a
            file seqkit did not write (named, with the fix); nothing has trained then.
    """
    out = summary_path(base)
    what = ("a symbolic link" if os.path.islink(out) else "a folder" if os.path.isdir(out)
            else "something other than a file" if os.path.lexists(out) and not os.path.isfile(out)
            else "a file that is not a summary seqkit wrote" if os.path.lexists(out) and not _is_summary(out)
            else None)
    if what is not None:
        raise OutputPathError(f"{out}: train --seeds writes its summary of the seeds there, and this is "
                              f"{what}, which seqkit does not replace. Nothing was trained; move it "
                              f"away or choose another --run-dir.")
    return FileOutputs([out], overwrite=True, option="--run-dir")


def existing_seed_run(path: str, recipe) -> str | None:
    """How :func:`train_seeds` may continue the run at ``path`` for ``recipe`` (one seed's recipe).

    Returns:
        ``"finished"`` (a seqkit run trained from the same recipe, with ``state.json`` status
        ``finished`` and a ``metrics.json``: kept as it is), ``"unfinished"`` (same recipe, not
        finished: resumed), or None (absent, empty, another recipe, or not a seqkit run: the
        usual refusal or ``overwrite`` applies).
    """
    import yaml

    if not os.path.isdir(path) or os.path.islink(path) or not_a_run_because(path):
        return None
    try:
        with open(os.path.join(path, "recipe.yaml"), encoding="utf-8") as f:
            saved = yaml.safe_load(f)
        saved = _flatten(saved) if isinstance(saved, dict) else None
        state = bounded_json(os.path.join(path, "state.json"))
    except (OSError, ValueError, yaml.YAMLError, RecursionError):
        return None
    if saved is None:
        return None
    now = _flatten(yaml.safe_load(recipe.to_yaml()))
    # a key the run's recipe.yaml lacks (added to the schema since) reads as its default, null
    if not isinstance(state, dict) or any(saved.get(k) != now.get(k) for k in set(saved) | set(now)):
        return None
    finished = state.get("status") == "finished" and os.path.isfile(os.path.join(path, "metrics.json"))
    return "finished" if finished else "unfinished"


def _read_metrics(path: str) -> dict:
    file = os.path.join(path, "metrics.json")
    try:
        metrics = bounded_json(file)
    except (OSError, ValueError) as e:
        raise RunDirError(f"{file}: cannot be read as JSON ({e}); retrain this seed with --overwrite.") from e
    if not isinstance(metrics, dict):
        raise RunDirError(f"{file}: is not a JSON object of figures; retrain this seed with --overwrite.")
    return metrics


def train_seeds(recipe, n: int, base: str | None = None, *, overwrite: bool = False,
                verbose: int = 1, on_run=None, log=None) -> dict:
    """Train ``recipe`` with ``n`` seeds; write and return the summary (see the module docstring).

    Args:
        recipe: the validated recipe.
        n: number of seeds (>= 1).
        base: the runs' path prefix (default ``runs/NAME``).
        overwrite: replace existing seed runs (only seqkit runs); without it a seed's run that
            finished with the same recipe is kept and an unfinished one is resumed
            (:func:`existing_seed_run`).
        verbose: Keras ``fit`` verbosity.
        on_run: called as ``on_run(path, how)`` after each seed's run is ready (``how``:
            ``"trained"``, ``"resumed"`` or ``"kept"``), e.g. to record provenance as each ends.
        log: called with one line per kept or resumed seed (default: seqkit's logger).

    Returns:
        The summary dict (also in ``BASE-seeds.json``; ``"path"`` names that file).

    Raises:
        SeqkitError: ``n < 1``; and what :func:`seqkit.training.train.train` raises (a run that exists
            with another recipe, without ``overwrite``, is refused before anything is trained).
    """
    if log is None:
        import logging

        log = logging.getLogger("seqkit").info
    if n < 1:
        raise SeqkitError(f"--seeds {n}: give a number of seeds >= 1.")
    base = base if base is not None else os.path.join("runs", recipe.name)
    seeds = [recipe.seed + i for i in range(n)]
    plan = [(seed_recipe(recipe, s), f"{os.path.normpath(base)}-seed{s}") for s in seeds]
    how = {}
    summary_file = summary_output(base)  # every refusal before the first run trains
    for rec, path in plan:
        check_writable(path, "train")
        how[path] = None if overwrite else existing_seed_run(path, rec)
        if how[path] is None:
            check_target(path, rec, overwrite)
    metrics = []
    for rec, path in plan:
        if how[path] == "finished":
            log(f"{path}: finished earlier with this recipe; kept (--overwrite retrains it)")
            metrics.append(_read_metrics(path))
        else:
            if how[path] == "unfinished":
                log(f"{path}: unfinished run of this recipe; resuming from its last finished epoch")
            metrics.append(train(rec, path, resume=how[path] == "unfinished", overwrite=overwrite,
                                 verbose=verbose))
        if on_run is not None:
            on_run(path, {"finished": "kept", "unfinished": "resumed"}.get(how[path], "trained"))
    summary = {"recipe": recipe.name, **summarize(metrics, seeds, [p for _, p in plan]),
               **json_mark("train --seeds")}
    out = summary_file.paths[0]
    text = strict_json(summary, indent=2, ensure_ascii=False) + "\n"

    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    summary_file.write({out: write})
    return {**summary, "path": out}
