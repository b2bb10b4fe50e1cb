import pytest
import yaml

from seqkit.errors import RecipeError
from seqkit.recipe import load_recipe, parse_override, recipe_from_dict


def test_defaults_filled_and_plugin_keys_validated(recipe_dict):
    r = recipe_from_dict(recipe_dict())
    assert r.training.clipnorm == 1.0
    assert r.cell_options.recurrent_activation == "sigmoid"  # the lstm plugin's own key
    d = r.to_dict()
    assert d["model"]["unit_forget_bias"] is True and d["model"]["units"] == 32


def test_wrong_type_names_file_line_key_expected_and_found(recipe_dict, write_recipe):
    raw = recipe_dict()
    raw["model"]["units"] = "abc"
    path = write_recipe(raw)
    line = next(i for i, ln in enumerate(open(path), 1) if ln.strip().startswith("units:"))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert f"{path}:{line}: model.units: expected a positive integer, got 'abc'." in str(info.value)


def test_unknown_key_did_you_mean(recipe_dict):
    raw = recipe_dict()
    raw["training"]["epohcs"] = 3
    raw["model"]["unitz"] = 3
    with pytest.raises(RecipeError) as info:
        recipe_from_dict(raw)
    msg = str(info.value)
    assert "training.epohcs: unknown key. Did you mean 'epochs'?" in msg
    assert "model.unitz: unknown key. Did you mean 'units'?" in msg
    assert "2 problems" in msg


def test_unknown_cell_and_plugin_option_type(recipe_dict):
    with pytest.raises(RecipeError, match=r"model.cell: unknown cell 'lstmm'. Did you mean 'lstm'\?"):
        recipe_from_dict(recipe_dict(model={"cell": "lstmm"}))
    with pytest.raises(RecipeError, match=r"model.activation: expected one of 'tanh'"):
        recipe_from_dict(recipe_dict(model={"activation": "swishy"}))


def test_set_overrides_are_parsed_as_yaml_and_reported_as_set(recipe_dict, write_recipe):
    path = write_recipe(recipe_dict())
    r = load_recipe(path, ["training.epochs=1", "model.cell=gru", "model.dropout=0.25"])
    assert (r.training.epochs, r.model.cell, r.model.dropout) == (1, "gru", 0.25)
    with pytest.raises(RecipeError, match=r"--set training.epochs: expected a positive integer, got 0"):
        load_recipe(path, ["training.epochs=0"])
    assert parse_override("a.b=[1, 2]") == (["a", "b"], [1, 2])
    with pytest.raises(RecipeError, match="KEY.PATH=VALUE"):
        parse_override("novalue")


def test_malformed_yaml_gives_line_and_column(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\ndata:\n  source: text_lines\n   path: [oops\n")
    with pytest.raises(RecipeError, match=r"bad.yaml:4:\d+: malformed YAML"):
        load_recipe(str(p))


def test_missing_file_not_mapping_and_not_utf8(tmp_path):
    with pytest.raises(RecipeError, match="no such recipe file"):
        load_recipe(str(tmp_path / "nope.yaml"))
    p = tmp_path / "list.yaml"
    p.write_text("- a\n- b\n")
    with pytest.raises(RecipeError, match="found a list"):
        load_recipe(str(p))
    q = tmp_path / "latin1.yaml"
    q.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(RecipeError, match="not UTF-8"):
        load_recipe(str(q))


def test_missing_required_section(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("name: x\n")
    with pytest.raises(RecipeError, match=r"data: missing"):
        load_recipe(str(p))


def test_relative_data_path_resolved_against_recipe_folder(tmp_path, recipe_dict, write_recipe):
    raw = recipe_dict(data={"source": "text_lines", "path": "corpus.txt", "limit": None})
    path = write_recipe(raw)
    r = load_recipe(path)
    assert r.data_options.path == str(tmp_path / "corpus.txt")
    again = recipe_from_dict(yaml.safe_load(r.to_yaml()))  # the run's copy stays valid
    assert again.data_options.path == str(tmp_path / "corpus.txt")


def test_a_path_given_with_set_is_read_from_the_current_directory(tmp_path, recipe_dict, write_recipe,
                                                                  monkeypatch):
    from click.testing import CliRunner

    from seqkit.cli import main

    (tmp_path / "recipes").mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "mine.txt").write_text("print('hello')\n" * 40, encoding="utf-8")
    path = write_recipe(recipe_dict(data={"source": "text_lines", "path": "corpus.txt", "limit": None}),
                         name="recipes/r.yaml")
    monkeypatch.chdir(tmp_path / "work")
    assert load_recipe(path).data_options.path == str(tmp_path / "recipes" / "corpus.txt")
    given = load_recipe(path, overrides=["data.path=mine.txt"])
    assert given.data_options.path == str(tmp_path / "work" / "mine.txt")
    whole = load_recipe(path, overrides=["data={source: text_lines, path: mine.txt}"])
    assert whole.data_options.path == str(tmp_path / "work" / "mine.txt")
    hf = write_recipe(recipe_dict(data={"source": "hf_datasets", "builder": "csv", "text_column": "text",
                                        "data_files": {"train": "a.csv", "test": "b.csv"}}),
                      name="recipes/hf.yaml")
    files = load_recipe(hf, overrides=["data.data_files.train=mine.csv"]).data_options.data_files
    assert files == {"train": str(tmp_path / "work" / "mine.csv"), "test": str(tmp_path / "recipes" / "b.csv")}
    res = CliRunner().invoke(main, ["validate", path, "--set", "data.path=mine.txt"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["validate", path, "--set", "data.path=absent.txt"])
    assert res.exit_code != 0 and str(tmp_path / "work" / "absent.txt") in res.output
    tfds = write_recipe(recipe_dict(data={"source": "tfds", "name": "toy", "data_dir": "tfds_data"}),
                        name="recipes/tfds.yaml")  # a source's declared path_keys follow the same rules
    assert load_recipe(tfds).data_options.data_dir == str(tmp_path / "recipes" / "tfds_data")
    assert load_recipe(tfds, overrides=["data.data_dir=here"]).data_options.data_dir == str(tmp_path / "work" / "here")


def test_shipped_recipe_validates():
    import pathlib

    for p in pathlib.Path(__file__).parent.parent.joinpath("recipes").glob("*.yaml"):
        load_recipe(str(p))


def test_recipe_plugins_are_loaded_from_the_recipe_folder(tmp_path, recipe_dict, write_recipe):
    (tmp_path / "rcells.py").write_text(
        "import seqkit\nfrom seqkit.cells.lstm import LSTMPlugin\n\n"
        "@seqkit.register_cell('recipe_plugin_cell')\nclass R(LSTMPlugin):\n    pass\n")
    path = write_recipe(recipe_dict(plugins=["rcells.py"], model={"cell": "recipe_plugin_cell"}))
    r = load_recipe(path)
    assert r.model.cell == "recipe_plugin_cell"
    assert r.to_dict()["plugins"] == [str(tmp_path / "rcells.py")]
