"""``python -m bench.lm_adaptive``: the stream LM's adaptive evaluation over seeds, as a report whose
figures are worked by hand here, and which the results page (not the benchmarks page) shows."""

import json
import math
import os

import yaml

from bench import lm_adaptive, pages


def _run(tmp_path, seed, val_bits, commit):
    d = tmp_path / f"lm-seed{seed}"
    d.mkdir()
    (d / "recipe.yaml").write_text(yaml.safe_dump({"name": f"lm-seed{seed}", "seed": seed}))
    (d / "history.json").write_text(json.dumps([{"val_cross_entropy": b * math.log(2)} for b in val_bits]))
    (d / "state.json").write_text(json.dumps({"epoch": len(val_bits), "status": "finished"}))
    (d / "provenance.json").write_text(json.dumps({"commit": commit, "wall_seconds": 1000.0,
                                                   "load_average_1min": 0.5, "command": "train it"}))
    return str(d)


def _eval(static, best, seconds=10.0):
    return {"static": {"bits_per_token": static},
            "dynamic+cache+ngram": {"bits_per_token": best, "seconds": seconds, "peak_memory_mb": 1500.0,
                                    "settings": {"valid_bits": best + 0.5}},
            "compressors": {"xz -9e": 1.1691, "zpaq -m5": "absent: no zpaq binary on PATH"}}


def _ensemble(static, best):
    return {f"{k.partition('+')[0]}+ensemble{'+' + k.partition('+')[2] if '+' in k else ''}": v
            for k, v in _eval(static, best).items() if k != "compressors"}


def test_report_gives_mean_sd_per_seed_ensembles_and_the_training_curve_worked_by_hand(tmp_path):
    runs = [_run(tmp_path, 7, [3.0, 2.5, 2.0, 1.9, 1.8], "aaa1111"),
            _run(tmp_path, 8, [3.2, 2.7, 2.2, 2.1, 2.0, 1.95], "bbb2222")]
    doc = lm_adaptive.report(runs, [_eval(1.4, 0.8, 10.0), _eval(1.5, 0.9, 20.0)],
                             {2: _ensemble(1.35, 0.75)}, ["two files"], env={"commit": "ccc3333"})
    md = doc["markdown"]
    # best mode: 0.8 and 0.9 -> mean 0.85, sample sd sqrt(2 * 0.05^2 / 1) = 0.0707; valid 1.3 and 1.4 -> 1.35
    assert ("| dynamic + cache + n-gram + match | **0.8500 ± 0.0707** | 0.8000 / 0.9000 | 1.3500 | 15 | 1,500 | "
            "0.7500 |") in md
    assert "| static (the network alone) | 1.4500 ± 0.0707 | 1.4000 / 1.5000 |  |  |  | 1.3500 |" in md
    assert "per seed (7, 8)" in md and "ensemble of 2" in md
    assert doc["figures"]["dynamic+cache+ngram"]["ensemble_2"] == 0.75
    # epoch 5: (1.8 + 2.0) / 2 = 1.9; epoch 6: only the second run, 1.95
    assert "epoch 5: 1.900, epoch 6: 1.950 (1 run)." in md
    assert "code aaa1111, 5 epochs, 1,000 s wall, load 0.5 at start; `train it`" in md
    assert "xz -9e 1.1691" in md and "zpaq -m5: absent" in md
    assert "dynamic + cache |" not in md  # a mode no evaluation holds is left out
    assert lm_adaptive.ensemble_key("dynamic+cache+ngram") == "dynamic+ensemble+cache+ngram"
    assert lm_adaptive.ensemble_key("static") == "static+ensemble"


def test_the_results_page_shows_the_adaptive_report_and_the_benchmarks_page_does_not(tmp_path):
    records, recipes = tmp_path / "records", tmp_path / "recipes"
    (records / "bench").mkdir(parents=True)
    recipes.mkdir()
    env = {"commit": "ccc3333", "command": "python -m bench.lm_adaptive --runs r1"}
    (records / "bench" / "lm-adaptive.json").write_text(json.dumps(
        {"suite": "lm-adaptive", "environment": env, "rows": [], "markdown": "| mode |\n|---|\n| x |\n"}))
    (records / "bench" / "decode.json").write_text(json.dumps(
        {"suite": "decode", "environment": env, "rows": [
            {"contender": "greedy", "metric": "tokens/s", "median": 10.0, "min": 9.0, "max": 11.0}]}))
    got = pages.blocks(str(records), str(recipes))
    assert "bench suite `lm-adaptive`" in got["results"] and "command python -m bench.lm_adaptive" in got["results"]
    assert "bench suite `lm-adaptive`" not in got["benchmarks"] and "bench suite `decode`" in got["benchmarks"]
    assert "| greedy | tokens/s | 10 | 9-11 |" in got["benchmarks"]


def test_readme_states_the_best_adaptive_figure_with_its_seeds_and_ensemble(tmp_path):
    runs = [_run(tmp_path, 7, [2.0], "aaa1111"), _run(tmp_path, 8, [2.0], "aaa1111")]
    for r, seed in zip(runs, (7, 8)):  # seed runs of one recipe: NAME-seed<S>
        (tmp_path / f"lm-seed{seed}" / "recipe.yaml").write_text(yaml.safe_dump({"name": f"lm-x-seed{seed}", "seed": seed}))
    doc = lm_adaptive.report(runs, [_eval(1.4, 0.8), _eval(1.5, 0.9)], {2: _ensemble(1.35, 0.75)}, [],
                             env={"commit": "ccc3333", "time": "2026-12-04 02:19:08 UTC"})
    assert doc["recipe"] == "lm-x"
    records, recipes = tmp_path / "records", tmp_path / "recipes"
    (records / "bench").mkdir(parents=True)
    recipes.mkdir()
    (records / "bench" / "lm-adaptive.json").write_text(json.dumps(doc))
    readme = pages.blocks(str(records), str(recipes))["readme"]
    assert "`lm-x` with adaptive evaluation" in readme
    assert "**0.850 ± 0.071 bits/char** (2 seeds; an ensemble of 2 seeds: 0.750); recorded 2026-12-04" in readme
