"""k-fold cross-validation of the JapaneseVowels acceptor recipe on the archive's TRAIN file only
(a measurement for choosing recipe defaults, not a test; the archive's TEST file is never read).

    python -m bench.jv_cv --out /tmp/cv.jsonl --name base                       # recipe as it is
    python -m bench.jv_cv --out /tmp/cv.jsonl --name units64 --set model.units=64  # one change

The 270 training utterances (30 per speaker) are divided into ``--folds`` stratified folds
(seeded with ``--fold-seed``: utterances of each speaker shuffled, then dealt round-robin).
For fold ``k`` the other folds become a ``.ts`` train file (the recipe's ``data.split.valid``
carves its early-stopping valid split from it, as the recipe does from the archive's train file)
and fold ``k`` the ``.ts`` test file; the recipe (``--recipe``, default
``recipes/acceptor-japanese-vowels.yaml``) is trained with ``data.source: ts`` on them, with
seed ``recipe.seed + k``, plus the ``--set`` overrides. One JSON line per setting is appended
to ``--out``: per-fold held-out accuracy, their pooled accuracy (correct / 270), the mean and
sample sd over folds, epochs and seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import yaml


def fold_files(train_ts: str, folds: int, seed: int, out_dir: str) -> list[tuple[str, str]]:
    """Write ``fold<k>-train.ts`` / ``fold<k>-test.ts`` for k < folds; return their paths.

    Stratified: each label's cases are permuted (``numpy.random.default_rng(seed)``) and dealt
    to folds 0, 1, ..., so each fold holds ``n_c / folds`` cases of class ``c`` (+-1).
    """
    lines = open(train_ts, encoding="utf-8").read().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip().lower() == "@data")
    header, cases = lines[:at + 1], [ln for ln in lines[at + 1:] if ln.strip()]
    label = [ln.rsplit(":", 1)[1].strip() for ln in cases]
    rng = np.random.default_rng(seed)
    fold_of = np.zeros(len(cases), int)
    for c in sorted(set(label)):
        idx = rng.permutation([i for i, y in enumerate(label) if y == c])
        for j, i in enumerate(idx):
            fold_of[i] = j % folds
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for k in range(folds):
        tr, te = (os.path.join(out_dir, f"fold{k}-{s}.ts") for s in ("train", "test"))
        for path, keep in ((tr, fold_of != k), (te, fold_of == k)):
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(header + [c for c, m in zip(cases, keep) if m]) + "\n")
        paths.append((tr, te))
    return paths


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipe", default="recipes/acceptor-japanese-vowels.yaml")
    ap.add_argument("--name", required=True, help="the setting's name in the output line")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--fold-seed", type=int, default=0)
    ap.add_argument("--work", default="/tmp/jv_cv")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import seqkit
    from seqkit.data.packaged import UcrSktime

    raw = yaml.safe_load(open(args.recipe, encoding="utf-8"))
    src = UcrSktime.__new__(UcrSktime)
    src.options = UcrSktime.Options(name=raw["data"]["name"])
    train_ts = os.path.join(src.folder(), f"{raw['data']['name']}_TRAIN.ts")
    paths = fold_files(train_ts, args.folds, args.fold_seed, os.path.join(args.work, "folds"))
    accs, n_correct, n_total, epochs, secs = [], 0, 0, [], []
    for k, (tr, te) in enumerate(paths):
        d = json.loads(json.dumps(raw))
        d["data"] = {**{x: v for x, v in d["data"].items() if x not in ("source", "name")},
                     "source": "ts", "train_path": tr, "test_path": te}
        d["seed"] = int(raw.get("seed", 1234)) + k
        rec = seqkit.Recipe.from_dict(d, args.sets)
        t0 = time.time()
        run_dir = os.path.join(args.work, "run")
        run = seqkit.train(rec, run_dir, overwrite=True)
        secs.append(time.time() - t0)
        test = run.metrics["test"]
        accs.append(test["accuracy"])
        n_correct += round(test["accuracy"] * test["examples"])
        n_total += test["examples"]
        epochs.append(len(json.load(open(os.path.join(run_dir, "history.json"), encoding="utf-8"))))
        print(f"{args.name} fold {k}: accuracy {test['accuracy']:.4f} ({secs[-1]:.0f} s)", flush=True)
    row = {"name": args.name, "set": args.sets, "folds": args.folds, "fold_seed": args.fold_seed,
           "pooled_accuracy": n_correct / n_total, "errors": n_total - n_correct,
           "mean": statistics.mean(accs), "sd": statistics.stdev(accs), "per_fold": accs,
           "epochs": epochs, "seconds": [round(s, 1) for s in secs]}
    with open(args.out, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
