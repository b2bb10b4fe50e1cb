"""The Python API checks its arguments as the CLI does (seqkit.arguments): the same SeqkitError
(also a TypeError / ValueError) with the same message, before any model is loaded; and the
printed advice for a cell defined in a script does not tell the user to import the script."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

from seqkit.cli import main
from seqkit.errors import SeqkitError


@pytest.fixture
def run(tmp_path):
    """A run directory as far as Run() checks it; generate refuses bad arguments before loading."""
    from seqkit.runs.run import Run

    d = tmp_path / "run"
    d.mkdir()
    (d / "recipe.yaml").write_text("name: r\n", encoding="utf-8")
    (d / "model.keras").write_bytes(b"never loaded")
    return Run(str(d))


@pytest.mark.parametrize("kwargs, kind, words", [
    ({"prompt": 123}, TypeError, "prompt=123: must be a string"),
    ({"prompt": None}, TypeError, "prompt=None: must be a string"),
    ({"max_length": "5"}, TypeError, "max_length='5': must be a whole number"),
    ({"max_length": 5.7}, TypeError, "max_length=5.7: must be a whole number"),
    ({"max_length": 0}, ValueError, "max_length=0: out of range; it must be >= 1 and <= 1,000,000"),
    ({"num": True}, TypeError, "num=True: must be a whole number"),
    ({"top_k": 2.5}, TypeError, "top_k=2.5: must be a whole number"),
    ({"top_k": -1}, ValueError, "top_k=-1: out of range"),
    ({"temperature": math.nan}, ValueError, "temperature=nan: must be a finite number > 0"),
    ({"temperature": "hot"}, TypeError, "temperature='hot': must be a number"),
    ({"top_p": 1.5}, ValueError, "top_p=1.5: out of range; it must be > 0 and <= 1"),
    ({"seed": 1.5}, TypeError, "seed=1.5: must be a whole number"),
])
def test_generate_refuses_bad_arguments_as_seqkit_errors(run, kwargs, kind, words):
    prompt = kwargs.pop("prompt", "a")
    with pytest.raises(SeqkitError) as exc:
        run.generate(prompt, **kwargs)
    assert isinstance(exc.value, kind) and words in str(exc.value)


def test_numpy_integers_and_plain_ints_pass():
    import numpy as np

    from seqkit.arguments import real, whole

    assert whole("top_k", np.int64(3), 0) == 3 and type(whole("top_k", np.int64(3), 0)) is int
    assert real("temperature", 1, 0, low_open=True) == 1.0


def test_the_cli_says_what_the_api_says(run):
    with pytest.raises(SeqkitError) as exc:
        run.generate("a", temperature=math.nan)
    res = CliRunner().invoke(main, ["generate", run.path, "--temperature", "nan"])
    assert res.exit_code == 2 and str(exc.value) in res.output, res.output


def test_stream_refuses_a_nan_temperature(tmp_path):
    res = CliRunner().invoke(main, ["stream", str(tmp_path), "--temperature", "nan", "--prompt", "a"])
    assert res.exit_code == 2, res.output
    assert "temperature=nan: must be a finite number > 0 (--temperature in the CLI)" in res.output
    assert "internal error" not in res.output


def test_a_cell_from_a_script_is_not_to_be_passed_as_the_script():
    from seqkit.plugins import how_to_get

    msg = how_to_get({"kind": "cell", "module": "__main__", "file": "/work/train_mine.py", "name": "c"})
    assert "Do not pass that script to --plugin" in msg
    assert "importing a script runs its top-level code" in msg
    assert "--plugin my_cells.py" in msg and "--plugin /work/train_mine.py" not in msg
    other = how_to_get({"kind": "cell", "module": "cells_mod", "file": "/work/cells_mod.py", "name": "c"})
    assert "--plugin /work/cells_mod.py" in other  # a module of its own: pass it as it is


def test_a_fix_built_from_names_a_run_holds_runs_nothing_else_when_pasted():
    import shlex

    from seqkit.plugins import how_to_get

    evil = "x; rm -rf ~ #"
    for item in ({"kind": "cell", "module": evil, "name": "c"},
                 {"kind": "cell", "module": evil, "package": evil, "name": "c"},
                 {"kind": "cell", "module": evil, "root": "/tmp/a b", "name": "c"}):
        msg = how_to_get(item)
        assert f"--plugin {shlex.quote(evil)}" in msg and f"--plugin {evil}" not in msg
        assert shlex.split(msg.split("--plugin ", 1)[1].rstrip("."))[0] == evil  # one word, as written


# ---- paths, names and beam arguments of load / predict / attention

@pytest.mark.parametrize("path", [None, 5, b"runs/lm"])
def test_load_takes_a_path(path):
    import seqkit

    with pytest.raises(SeqkitError, match=r"a run directory is a path \(str or pathlib.Path\)"):
        seqkit.load(path)


def test_predict_name_and_plot_are_checked_before_the_run_loads(tiny_tagger):
    import seqkit

    run = seqkit.load(tiny_tagger)
    with pytest.raises(SeqkitError, match=r"name=None: must be a string"):
        run.predict("a b", name=None)
    with pytest.raises(SeqkitError, match=r"plot=5: must be the path of a PNG"):
        run.predict("a b", plot=5)
    assert run._model is None  # refused before loading anything


def test_seq2seq_n_best_0_and_a_beam_of_0_are_refused(tiny_seq2seq):
    """``n_best=0`` was read as 1 and ``beam_width=0`` drew an attention map."""
    import seqkit

    run = seqkit.load(tiny_seq2seq())
    with pytest.raises(SeqkitError, match=r"n-best must be a positive integer, got 0"):
        run.predict("abc", n_best=0)
    with pytest.raises(SeqkitError, match=r"beam width must be a positive integer, got 0"):
        run.attention("abc", beam_width=0)
    with pytest.raises(SeqkitError, match=r"text=None: must be a string"):
        run.attention(None)
    assert run.attention("abc").weights.shape[1] == 3  # and the same calls done right still answer


@pytest.mark.parametrize("call, words", [
    (lambda s: s.Recipe.from_yaml(None), "path=None: must be a path"),
    (lambda s: s.Recipe.from_yaml(3), "path=3: must be a path"),
    (lambda s: s.train("lm-pydoc-chars", run_dir=5), "run_dir=5: must be a path"),
    (lambda s: s.train_seeds("lm-pydoc-chars", 2.5), "seeds=2.5: must be a whole number"),
    (lambda s: s.train_seeds("lm-pydoc-chars", "2"), "seeds='2': must be a whole number"),
    (lambda s: s.train_seeds("lm-pydoc-chars", 2, on_run=5), "on_run=5: must be a function"),
    (lambda s: s.Recipe.from_yaml("lm-pydoc-chars", overrides={"training.epochs": object()}),
     "overrides: training.epochs=<object"),
    (lambda s: s.Recipe.from_yaml("lm-pydoc-chars", overrides=[3]), "overrides: 3 is a int"),
])
def test_api_arguments_of_the_wrong_type_are_seqkit_errors_before_anything_runs(call, words, tmp_path,
                                                                                 monkeypatch):
    import seqkit

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SeqkitError, match=words):
        call(seqkit)
    assert list(tmp_path.iterdir()) == []  # nothing trained, nothing written


def test_numpy_values_in_overrides_are_the_values_they_hold():
    """A parameter sweep's NumPy values go through overrides as plain numbers."""
    import numpy as np

    import seqkit

    r = seqkit.Recipe.from_yaml("lm-pydoc-chars", overrides={"training.epochs": np.int64(3),
                                                              "training.learning_rate": np.float64(0.005),
                                                              "model.units": np.array(16)})
    assert (r.training.epochs, r.training.learning_rate, r.model.units) == (3, 0.005, 16)


def test_plot_out_must_be_a_path(tiny_tagger):
    import seqkit

    for bad in (None, 5):
        with pytest.raises(SeqkitError, match=f"out={bad}: must be a path"):
            seqkit.load(tiny_tagger).plot(bad)


def test_a_run_deleted_after_it_was_opened_is_named(tiny_tagger, tmp_path):
    import shutil

    import seqkit

    copy = tmp_path / "run"
    shutil.copytree(tiny_tagger, copy)
    run = seqkit.load(copy)
    shutil.rmtree(copy)
    for call in (lambda: run.evaluate("test"), lambda: run.predict(["the dog"])):
        with pytest.raises(SeqkitError, match=r"run: no such run directory \(it was moved or deleted"):
            call()


def test_export_refuses_a_model_changed_in_memory_and_from_model_names_a_misfit(tiny_tagger, tmp_path):
    """run.model changed in memory: predict uses it, export (which reads the run directory)
    refuses rather than write the saved weights; Run.from_model with a model the recipe does not
    build names the misfit and writes nothing."""
    import keras
    import numpy as np

    import seqkit

    run = seqkit.load(tiny_tagger)
    before = run.predict(["the dog"])[0]["probabilities"]
    run.model.set_weights([np.zeros_like(w) for w in run.model.get_weights()])
    after = run.predict(["the dog"])[0]["probabilities"]
    assert after != before and len(set(np.round(list(after[0].values()), 6))) == 1  # uniform now
    with pytest.raises(SeqkitError, match=r"run.model was changed in memory .*seqkit.Run.from_model"):
        run.export(tmp_path / "e", parity_examples=2)
    assert not (tmp_path / "e").exists()
    assert seqkit.load(tiny_tagger).export(tmp_path / "e", parity_examples=2)["tflite"]["max_abs_diff"] < 1e-4

    _, pre = seqkit.build(run.recipe)
    other = keras.Sequential([keras.Input((None,), dtype="int32"), keras.layers.Embedding(50, 3),
                              keras.layers.LSTM(5, return_sequences=True), keras.layers.Dense(4)])
    with pytest.raises(SeqkitError, match=r"Run.from_model: the model does not fit the recipe .* Nothing was written"):
        seqkit.Run.from_model(other, pre, tmp_path / "mine")
    assert not (tmp_path / "mine").exists()
