"""``python -m bench --suite step``: a recipe's step timed per variant, and the training time projected
from it (the arithmetic worked by hand; the report's counts checked against the library's)."""

import json

import pytest

from bench import suite_step
from bench.__main__ import main as bench_main


def test_projection_is_seconds_a_step_times_steps_an_epoch_times_epochs():
    # 250 ms x 473 steps x 20 epochs = 2,365 s
    assert suite_step.projected_seconds(250.0, 473, 20) == pytest.approx(2365.0)


def test_variants_are_set_overrides_and_a_word_without_equals_is_refused():
    assert suite_step.variant_overrides("") == []
    assert suite_step.variant_overrides("model.units=256 'data.path=a b.txt'") == ["model.units=256",
                                                                                  "data.path=a b.txt"]
    with pytest.raises(SystemExit, match="'units' is not KEY=VALUE"):
        suite_step.variant_overrides("model.units=8 units")


def test_one_recipe_is_required(tmp_path):
    with pytest.raises(SystemExit, match="give one --recipe FILE"):
        bench_main(["--suite", "step", "--out", str(tmp_path)])


def test_report_times_each_variant_and_projects_its_training_time(tmp_path, keras, recipe_dict, write_recipe):
    from seqkit.recipe import load_recipe
    from seqkit.training.train import compile_model, count_parameters, prepare

    path = write_recipe(recipe_dict(training={"steps_per_epoch": 3}))
    bench_main(["--suite", "step", "--recipe", path, "--variant", "", "--variant", "model.units=16",
                "--repeats", "2", "--out", str(tmp_path)])
    doc = json.loads((tmp_path / "step.json").read_text())
    rows = {r["contender"]: r for r in doc["rows"]}
    assert list(rows) == ["(recipe as written)", "model.units=16"]
    for name, over in (("(recipe as written)", None), ("model.units=16", ["model.units=16"])):
        r = rows[name]
        assert len(r["samples"]) == 2 and r["min"] <= r["median"] <= r["max"]
        assert (r["steps_per_epoch"], r["epochs"]) == (3, 2)
        assert r["projected_s"] == pytest.approx(r["median"] / 1e3 * 3 * 2)
        want = count_parameters(compile_model(prepare(load_recipe(path, over))))["total"]
        assert r["parameters"] == want
    # one LSTM of 32 against 16 units on a 16-wide embedding: 4*32*(16+32+1) - 4*16*(16+16+1) = 4,160
    # more recurrent weights, and the output layer's 16 more inputs a class
    v = (rows["(recipe as written)"]["parameters"] - rows["model.units=16"]["parameters"] - 4160) / 16
    assert v == int(v) and v > 1
    assert "ms per training step" in (tmp_path / "step.md").read_text()
