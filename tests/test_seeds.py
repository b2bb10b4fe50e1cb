"""``seqkit train --seeds N``: one run per seed and a summary whose numbers equal statistics
computed by hand from the runs' ``metrics.json``."""

import json
import math
import os
import statistics

import pytest
import yaml
from click.testing import CliRunner

from tests.conftest import make_recipe


def test_summary_statistics_by_hand():
    """Values 1, 3, 8: mean 4, sample sd sqrt((9 + 1 + 16) / 2) = sqrt(13); nested keys joined."""
    from seqkit.training.seeds import summarize

    metrics = [{"test": {"a": 1.0, "b": {"c": 2}, "name": "x", "flag": True}, "valid": {"a": 0.5}},
               {"test": {"a": 3.0, "b": {"c": 2}}},
               {"test": {"a": 8.0, "b": {"c": 5}}}]
    s = summarize(metrics, [7, 8, 9], ["r7", "r8", "r9"])
    assert s["test"]["a"] == {"mean": 4.0, "sd": pytest.approx(math.sqrt(13)), "min": 1.0, "max": 8.0,
                              "n": 3, "values": [1.0, 3.0, 8.0]}
    assert s["test"]["b.c"]["mean"] == 3.0 and s["test"]["b.c"]["sd"] == pytest.approx(math.sqrt(3))
    assert set(s["test"]) == {"a", "b.c"}  # strings and booleans are not figures
    assert s["valid"]["a"] == {"mean": 0.5, "sd": None, "min": 0.5, "max": 0.5, "n": 1,
                               "values": [0.5, None, None]}


def test_a_split_seed_gives_every_seed_the_same_split():
    """By default a shuffled split follows the recipe's seed; ``data.split.seed`` fixes it (to the
    split the recipe's seed of that value draws), whatever the seed."""
    from seqkit.recipe import Recipe
    from seqkit.training.train import prepare

    def texts(seed, split_seed=None):
        split = {"valid": 0.2, "test": 0.2, "shuffle": True}
        if split_seed is not None:
            split["seed"] = split_seed
        rec = Recipe.from_dict(make_recipe(seed=seed, data={"limit": 60, "split": split}))
        return {k: [r.text for r in v] for k, v in prepare(rec).splits.items()}

    assert texts(7) != texts(8) and sorted(sum(texts(7).values(), [])) == sorted(sum(texts(8).values(), []))
    assert texts(7, 3) == texts(8, 3) == texts(3)


def test_cli_seeds_trains_one_run_per_seed_and_summarises(tmp_path, keras):
    """2 seeds, 1 epoch each (cosine schedule over the run): runs tiny-seed7 and tiny-seed8, the
    summary equals statistics.mean/stdev of their metrics.json; each run's last rate is the
    cosine's at its last update."""
    from seqkit.cli import main
    from seqkit.training.schedules import WarmupCosine

    raw = make_recipe(data={"limit": 60, "max_length": 60}, model={"units": 8, "embedding_dim": 4},
                      training={"epochs": 1, "batch_size": 16, "schedule": {"type": "cosine"}})
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    base = tmp_path / "runs" / "tiny"
    res = CliRunner().invoke(main, ["train", str(path), "--seeds", "2", "--run-dir", str(base), "--quiet"])
    assert res.exit_code == 0, res.output
    runs = [f"{base}-seed7", f"{base}-seed8"]
    summary = json.load(open(f"{base}-seeds.json", encoding="utf-8"))
    assert summary["seeds"] == [7, 8] and summary["runs"] == runs
    metrics = [json.load(open(os.path.join(r, "metrics.json"), encoding="utf-8")) for r in runs]
    for r, seed in zip(runs, (7, 8)):
        rec = yaml.safe_load(open(os.path.join(r, "recipe.yaml"), encoding="utf-8"))
        assert (rec["seed"], rec["name"]) == (seed, f"tiny-seed{seed}")
    assert metrics[0]["test"]["cross_entropy"] != metrics[1]["test"]["cross_entropy"]
    for key in ("cross_entropy", "perplexity", "accuracy"):
        xs = [m["test"][key] for m in metrics]
        got = summary["test"][key]
        assert got["values"] == xs
        assert got["mean"] == pytest.approx(statistics.mean(xs), rel=1e-12)
        assert got["sd"] == pytest.approx(statistics.stdev(xs), rel=1e-9)
        assert (got["min"], got["max"]) == (min(xs), max(xs))
    assert "test over 2 seeds (7, 8); sd: sample (n - 1)" in res.output
    assert f"{summary['test']['cross_entropy']['mean']:.4f} ± " in res.output
    steps = int(keras.saving.load_model(os.path.join(runs[0], "last.keras")).optimizer.iterations.numpy())
    last = json.load(open(os.path.join(runs[0], "history.json"), encoding="utf-8"))[-1]["learning_rate"]
    assert last == pytest.approx(float(WarmupCosine(0.01, steps)(steps - 1)), rel=1e-6)
    assert 0 < last < 0.01 * (1 - math.cos(math.pi / steps))  # the cosine's last step, near 0

    import seqkit
    from seqkit.errors import RunDirError

    # run again: both finished seeds are kept as they are (nothing retrains) and the summary is the
    # same; the first run's recipe.yaml as an older seqkit wrote it, without data.split.seed, too
    saved = yaml.safe_load(open(os.path.join(runs[0], "recipe.yaml"), encoding="utf-8"))
    assert saved["data"]["split"].pop("seed") is None
    with open(os.path.join(runs[0], "recipe.yaml"), "w", encoding="utf-8") as f:
        yaml.safe_dump(saved, f)
    seen, mtimes = [], [os.stat(os.path.join(r, "metrics.json")).st_mtime_ns for r in runs]
    again = seqkit.train_seeds(str(path), 2, base, on_run=lambda p, how: seen.append((p, how)))
    assert seen == [(runs[0], "kept"), (runs[1], "kept")]
    assert [os.stat(os.path.join(r, "metrics.json")).st_mtime_ns for r in runs] == mtimes
    assert again["test"] == summary["test"]
    # the summary is seqkit's own file: one of an older seqkit (no mark) is replaced; a user's
    # file, a folder or a symbolic link of that name is refused before anything runs, as it was
    from seqkit.outputs import OutputPathError

    out = f"{base}-seeds.json"
    assert summary["written_by"] == "seqkit train --seeds"
    older = {k: v for k, v in summary.items() if k != "written_by"}
    open(out, "w", encoding="utf-8").write(json.dumps(older))
    open(out + ".tmp", "w", encoding="utf-8").write("the user's")
    seqkit.train_seeds(str(path), 2, base)
    assert json.load(open(out, encoding="utf-8"))["written_by"] == "seqkit train --seeds"
    assert open(out + ".tmp", encoding="utf-8").read() == "the user's"
    os.remove(out)
    open(out, "w", encoding="utf-8").write('{"mine": "precious"}')
    with pytest.raises(OutputPathError, match=r"tiny-seeds\.json: train --seeds writes .* not a summary seqkit wrote"):
        seqkit.train_seeds(str(path), 2, base)
    assert open(out, encoding="utf-8").read() == '{"mine": "precious"}'
    os.rename(out, str(tmp_path / "mine.json"))
    os.symlink(tmp_path / "mine.json", out)
    with pytest.raises(OutputPathError, match="symbolic link"):
        seqkit.train_seeds(str(path), 2, base)
    os.remove(out)
    os.mkdir(out)
    res = CliRunner().invoke(main, ["train", str(path), "--seeds", "2", "--run-dir", str(base), "--quiet"])
    assert res.exit_code != 0 and "this is a folder" in res.output and "Traceback" not in res.output
    os.rmdir(out)
    # a seed whose training stopped is resumed from its last finished epoch
    state_file = os.path.join(runs[1], "state.json")
    state = json.load(open(state_file, encoding="utf-8"))
    json.dump({**state, "status": "failed", "reason": "interrupted"}, open(state_file, "w", encoding="utf-8"))
    seen.clear()
    seqkit.train_seeds(str(path), 2, base, on_run=lambda p, how: seen.append((p, how)))
    assert seen == [(runs[0], "kept"), (runs[1], "resumed")]
    assert json.load(open(state_file, encoding="utf-8"))["status"] == "finished"
    # another recipe: the existing seeds are refused before anything trains
    path.write_text(yaml.safe_dump({**raw, "training": {**raw["training"], "epochs": 2}}), encoding="utf-8")
    with pytest.raises(RunDirError, match="seed7"):
        seqkit.train_seeds(str(path), 3, base)
    assert not os.path.exists(f"{base}-seed9")
