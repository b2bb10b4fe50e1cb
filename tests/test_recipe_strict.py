"""Strict recipe values: no silent coercion of booleans, fractions or strings into numbers, no
key given twice, a usable learning rate and seed. The shipped recipes still validate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from seqkit.errors import RecipeError
from seqkit.recipe import load_recipe, recipe_from_dict

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("section, key, value, expected", [
    ("model", "units", True, "model.units: expected a positive integer, got True. true/false is not a number."),
    ("model", "layers", 2.0, "model.layers: expected a positive integer <= 256, got 2.0. Write a whole number"),
    ("model", "layers", 2.5, "model.layers: expected a positive integer <= 256, got 2.5."),
    ("training", "epochs", "1", "training.epochs: expected a positive integer, got '1'. A quoted number is a string"),
    ("training", "learning_rate", "0.01", "training.learning_rate: expected a finite positive number, got '0.01'."),
    ("training", "learning_rate", float("inf"), "training.learning_rate: expected a finite positive number, got inf."),
    ("training", "learning_rate", float("nan"), "training.learning_rate: expected a finite positive number, got nan."),
    ("training", "learning_rate", 0.0, "training.learning_rate: expected a finite positive number, got 0.0."),
    ("training", "learning_rate", -0.1, "training.learning_rate: expected a finite positive number, got -0.1."),
    ("model", "dropout", True, "model.dropout: expected a number in [0, 1), got True."),
    ("model", "bidirectional", 1, "model.bidirectional: expected true or false, got 1."),
    ("model", "use_bias", 0, "model.use_bias: expected true or false, got 0."),  # a plugin's own key
    (None, "seed", 2**32, "seed: expected an integer in [0, 4294967295], got 4294967296."),
    (None, "seed", -1, "seed: expected an integer in [0, 4294967295], got -1."),
])
def test_value_of_the_wrong_kind_is_an_error_naming_the_key(recipe_dict, section, key, value, expected):
    raw = recipe_dict()
    (raw[section] if section else raw)[key] = value
    with pytest.raises(RecipeError) as info:
        recipe_from_dict(raw)
    assert expected in str(info.value)


def test_in_a_file_the_error_names_file_and_line(recipe_dict, write_recipe):
    path = write_recipe(recipe_dict(model={"units": True}))
    line = next(i for i, ln in enumerate(open(path), 1) if ln.strip().startswith("units:"))
    with pytest.raises(RecipeError, match=rf"{path}:{line}: model.units: expected a positive integer, got True"):
        load_recipe(path)


def test_a_key_given_twice_names_both_lines(tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text("name: dup\ndata:\n  source: pydoc_topics\nmodel:\n  units: 32\n  layers: 1\n"
                 "  units: 64\ntraining:\n  epochs: 1\nseed: 3\nseed: 4\n", encoding="utf-8")
    with pytest.raises(RecipeError) as info:
        load_recipe(str(p))
    msg = str(info.value)
    assert f"{p}:7: model.units: given twice (lines 5 and 7)" in msg
    assert f"{p}:11: seed: given twice (lines 10 and 11)" in msg and "2 problems" in msg


def test_a_recipe_larger_than_a_recipe_is_refused_unread(recipe_dict, write_recipe, tmp_path):
    """A valid recipe padded with comments past 1 MiB: refused by its size (parsing 30 MB of YAML
    took 18 s and 870 MB); the same recipe under the bound loads."""
    from seqkit.recipe import MAX_RECIPE_BYTES

    text = open(write_recipe(recipe_dict()), encoding="utf-8").read()
    p = tmp_path / "big.yaml"
    p.write_text(text + "#" * (MAX_RECIPE_BYTES - len(text) - 1) + "\n", encoding="utf-8")
    assert load_recipe(str(p)).name  # exactly at the bound: read
    p.write_text(text + "#" * (MAX_RECIPE_BYTES - len(text)) + "\n", encoding="utf-8")
    with pytest.raises(RecipeError, match=rf"{p}: {MAX_RECIPE_BYTES + 1:,} bytes, more than a recipe may hold"):
        load_recipe(str(p))


def test_numbers_without_a_point_and_overrides_stay_valid(recipe_dict, write_recipe, tmp_path):
    path = write_recipe(recipe_dict())
    text = open(path).read().replace("learning_rate: 0.01", "learning_rate: 1e-3")
    assert "learning_rate: 1e-3" in text
    Path(path).write_text(text)
    r = load_recipe(path, ["training.epochs=3", "training.learning_rate=2e-4", "model.dropout=0",
                           "seed=0"])
    assert (r.training.epochs, r.training.learning_rate, r.model.dropout, r.seed) == (3, 2e-4, 0.0, 0)
    assert isinstance(r.model.dropout, float)
    with pytest.raises(RecipeError, match=r"--set training.epochs: expected a positive integer, got 2.0"):
        load_recipe(path, ["training.epochs=2.0"])
    with pytest.raises(RecipeError, match=r"--set training.epochs: expected a positive integer, got '3'"):
        load_recipe(path, ["training.epochs='3'"])
    r2 = load_recipe(path)  # the run's copy (to_yaml) reads back to the same values
    (tmp_path / "copy.yaml").write_text(r2.to_yaml())
    assert load_recipe(str(tmp_path / "copy.yaml")).to_dict() == r2.to_dict()


SHIPPED = sorted(p.name for p in (ROOT / "recipes").glob("*.yaml"))


@pytest.mark.parametrize("recipe", SHIPPED)
def test_shipped_recipes_still_validate(recipe, monkeypatch):
    """`seqkit validate` in this process (TensorFlow imported once, not once per recipe: no
    shipped recipe names plugins, so nothing one imports can help another); the command as a
    separate process is the test below."""
    from click.testing import CliRunner

    from seqkit.cli import main

    monkeypatch.chdir(ROOT)
    res = CliRunner().invoke(main, ["validate", f"recipes/{recipe}", "--no-data"])
    assert res.exit_code == 0, res.output[-2000:]
    assert res.stdout.strip().endswith(": OK")


def test_a_shipped_recipe_validates_through_the_command_in_a_fresh_process():
    assert not any("plugins" in yaml.safe_load((ROOT / "recipes" / r).read_text(encoding="utf-8"))
                   for r in SHIPPED)  # the in-process test above relies on it
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    res = subprocess.run([sys.executable, "-m", "seqkit.cli", "validate", f"recipes/{SHIPPED[0]}", "--no-data"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().endswith(": OK")


def test_shipped_recipes_strict_in_process():
    for p in sorted((ROOT / "recipes").glob("*.yaml")):
        load_recipe(str(p))
        with open(p, encoding="utf-8") as f:
            assert isinstance(yaml.safe_load(f), dict)
