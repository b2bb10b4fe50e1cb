"""The Python API (seqkit/api.py, seqkit/runs/run.py): docs/python-api.md's examples run as written,
results equal the CLI's, wrong-head calls and bad recipes raise the CLI's messages, library calls
print nothing, and ``import seqkit`` imports no TensorFlow.

The doc's ```python blocks are executed in order, in one namespace, in a temporary folder that
holds a link to the repository's ``recipes/`` (the only thing the doc reads from the checkout);
everything else they need they write themselves.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "python-api.md")


def doc_blocks() -> list[str]:
    text = open(DOC, encoding="utf-8").read()
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


@pytest.fixture(scope="module")
def doc(tmp_path_factory, keras):
    """Run every code block of docs/python-api.md; return its namespace (+ what it printed)."""
    d = tmp_path_factory.mktemp("apidoc")
    os.symlink(os.path.join(ROOT, "recipes"), d / "recipes")
    cwd = os.getcwd()
    os.chdir(d)
    ns, printed = {"__name__": "__doc_example__"}, io.StringIO()
    try:  # the module's tests stay in that folder: the doc's runs are relative paths, as a user's are
        blocks = doc_blocks()
        assert len(blocks) >= 5
        with contextlib.redirect_stdout(printed):
            for i, block in enumerate(blocks):
                exec(compile(block, f"{DOC}:block{i + 1}", "exec"), ns)
        ns["_printed"], ns["_dir"] = printed.getvalue(), d
        yield ns
    finally:
        os.chdir(cwd)


def cli(*args, input=None):
    from seqkit.cli import main

    res = CliRunner().invoke(main, [str(a) for a in args], input=input)
    return res


def test_doc_examples_run_for_every_head(doc):
    import numpy as np

    import seqkit

    d = doc["_dir"]
    assert {p.name for p in (d / "runs").iterdir()} >= {"lm", "pos", "ab", "g2p", "mine"}
    assert doc["figures"]["split"] == "test" and doc["figures"]["perplexity"] > 1
    assert len(doc["tagged"]["tags"]) == 3 and len(doc["tagged"]["probability"]) == 3
    assert isinstance(doc["run"], seqkit.Run) and doc["run"].head == "language_model"
    att = doc["att"]
    assert att.weights.shape == (len(att.target), len(att.source)) and att.target[-1] == "</s>"
    np.testing.assert_allclose(att.weights.sum(axis=1), 1.0, atol=1e-5)
    hyps = doc["res"]["hypotheses"]
    assert len(hyps) == 2 and hyps[0]["score"] >= hyps[1]["score"]
    tfl = doc["report"]["tflite"]
    assert tfl["max_abs_diff"] <= 1e-4 and tfl["argmax_agreement"] >= 0.999 and tfl["bytes"] > 0
    assert os.path.isfile(d / "exports" / "mine" / "model.tflite")
    streamed = [ln for ln in doc["_printed"].splitlines() if ln.startswith("The ")]
    assert streamed and streamed[-1] == seqkit.stream(d / "exports" / "mine", prompt="The ", max_length=20,
                                                      seed=1).rstrip("\n")  # text out, seeded
    labels = [r["label"] for r in doc["acceptor"].predict(["aaaa", "bbbb"])]  # text in == ids in
    assert [x.decode() for x in doc["out"]["label"]] == labels
    assert [x.decode() for x in doc["text_out"]["label"].numpy()] == labels
    np.testing.assert_allclose(doc["text_out"]["probabilities"].numpy(), doc["out"]["probabilities"], atol=1e-6)
    assert "transduce needs an encoder-decoder (seq2seq) run" in doc["_printed"]
    assert "model.units" in doc["_printed"]


def test_from_model_run_evaluates_as_the_internal_path(doc):
    """build + your own fit + Run.from_model: the run's evaluate equals evaluating the fitted model
    through seqkit.training.train.evaluate_model on the same preprocessing (its export passed parity above)."""
    from seqkit.training.train import evaluate_model

    got = doc["mine"].evaluate("test")
    want = evaluate_model(doc["pre"].prepared, doc["model"], "test")
    assert set(want) <= set(got)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-5, abs=1e-6), k
    saved = doc["mine"].metrics
    assert saved["trained_by"] == "Run.from_model" and saved["epochs"] == 1
    assert saved["test"]["cross_entropy"] == pytest.approx(got["cross_entropy"], rel=1e-6)


def test_api_results_equal_the_cli(doc):
    d = doc["_dir"]
    lm, tagger, g2p = (str(d / "runs" / n) for n in ("lm", "pos", "g2p"))
    res = cli("evaluate", lm, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == json.loads(json.dumps(doc["run"].evaluate("test")))

    res = cli("generate", lm, "--prompt", "The ", "--max-length", "30", "--seed", "5", "--num", "2")
    assert res.stdout.splitlines() == doc["run"].generate("The ", max_length=30, seed=5, num=2)
    res = cli("generate", lm, "--prompt", "a", "--max-length", "12", "--beam-width", "3", "--n-best", "2")
    beams = doc["run"].generate("a", max_length=12, beam_width=3, n_best=2)
    assert res.stdout.splitlines() == [f"{s:.4f}\t{t}" for t, s in beams]

    res = cli("predict", tagger, "--format", "jsonl", "--probabilities", input="the cat runs\na dog\n")
    api = doc["tagger"].predict(["the cat runs", "a dog"], name="<stdin>")
    assert [json.loads(x) for x in res.stdout.splitlines()] == json.loads(json.dumps(api))

    # an empty line is skipped and said (as for seq2seq); each result names its input line
    res = cli("predict", tagger, "--format", "jsonl", input="the cat runs\n\na dog\n")
    assert res.exit_code == 0 and "1 empty line(s) skipped" in res.stderr
    assert [json.loads(x)["where"] for x in res.stdout.splitlines()] == ["<stdin>:1", "<stdin>:3"]
    assert [r["where"] for r in doc["acceptor"].predict(["aaaa", "", "bbbb"])] == ["<input>:1", "<input>:3"]

    res = cli("predict", g2p, "--format", "jsonl", "--n-best", "2", input="abba\nbab\n")
    api = doc["g2p"].transduce(["abba", "bab"], n_best=2, name="<stdin>")
    assert [json.loads(x) for x in res.stdout.splitlines()] == json.loads(json.dumps(api))


def test_wrong_head_calls_raise_the_cli_message(doc):
    import seqkit

    d = doc["_dir"]
    tagger_dir = str(d / "runs" / "pos")
    with pytest.raises(seqkit.SeqkitError) as exc:
        seqkit.load(tagger_dir).generate("the")
    assert "generate needs a language_model run; this run's head is 'tagger'" in str(exc.value)
    res = cli("generate", tagger_dir)
    assert res.exit_code == 2 and res.stderr.strip() == f"error: {exc.value}"
    with pytest.raises(seqkit.SeqkitError, match=r"predict needs an acceptor(, \w+)* or tagger run"):
        doc["run"].predict(["abc"])
    with pytest.raises(seqkit.SeqkitError, match="needs an encoder-decoder"):
        doc["acceptor"].attention("ab")
    with pytest.raises(seqkit.SeqkitError, match="are for seq2seq runs"):
        doc["tagger"].predict(["the dog"], beam_width=2)
    from seqkit.errors import RunDirError

    with pytest.raises(RunDirError, match="no such run directory"):
        seqkit.load(str(d / "runs" / "nothing"))


def test_recipe_errors_are_the_clis(tmp_path):
    """Recipe.from_yaml raises the message `seqkit validate` prints; from_dict the same problems,
    named ``<recipe>`` instead of FILE:LINE."""
    import yaml

    import seqkit
    from seqkit.errors import RecipeError

    raw = {"name": "x", "data": {"source": "pydoc_topics"}, "model": {"units": "many", "cel": "lstm"}}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    with pytest.raises(RecipeError) as exc:
        seqkit.Recipe.from_yaml(str(path), overrides={"training.epochs": 0})
    res = cli("validate", path, "--no-data", "--set", "training.epochs=0")
    assert res.exit_code == 2 and res.stderr.strip() == f"error: {exc.value}"
    assert "3 problems" in str(exc.value)
    with pytest.raises(RecipeError) as from_dict:
        seqkit.Recipe.from_dict(raw, overrides={"training.epochs": 0})
    assert str(from_dict.value) == re.sub(re.escape(str(path)) + r":\d+", "<recipe>", str(exc.value))
    ok = seqkit.Recipe.from_dict(raw | {"model": {}}, overrides={"training.epochs": 3, "model.cell": "gru"})
    assert ok.training.epochs == 3 and ok.model.cell == "gru"


def test_overrides_apply_to_a_recipe_dict_and_a_built_recipe_refuses_them(tmp_path):
    """validate (and train, through the same path) apply ``overrides`` to a recipe dict as to a
    file; a bad override is refused with the message a file's would get; a built Recipe, validated
    already, refuses overrides instead of dropping them."""
    import seqkit
    from seqkit.errors import RecipeError, SeqkitError

    raw = {"name": "x", "data": {"source": "pydoc_topics"}, "training": {"epochs": 2}}
    for call in (lambda o: seqkit.validate(seqkit.Recipe.from_dict(raw), o, data=False),
                 lambda o: seqkit.train(seqkit.Recipe.from_dict(raw), tmp_path / "never", overrides=o),
                 lambda o: seqkit.train_seeds(seqkit.Recipe.from_dict(raw), 2, tmp_path / "never", overrides=o)):
        with pytest.raises(SeqkitError, match="overrides apply to a recipe file or dict; this seqkit.Recipe"):
            call(["training.epochs=5"])
    assert not (tmp_path / "never").exists()
    out = seqkit.validate(raw, ["training.epochs=5", "model.cell=gru"], data=False)
    assert out["resolved"]["training"]["epochs"] == 5 and out["resolved"]["model"]["cell"] == "gru"
    out = seqkit.validate(raw, {"training.batch_size": 7}, data=False)
    assert out["resolved"]["training"]["batch_size"] == 7 and out["resolved"]["training"]["epochs"] == 2
    with pytest.raises(RecipeError, match="training.epochs"):
        seqkit.validate(raw, ["training.epochs=-1"], data=False)
    with pytest.raises(RecipeError, match="training.epochs"):  # refused before any seed trains
        seqkit.train_seeds(raw, 2, tmp_path / "never", overrides={"training.epochs": -1})
    assert not (tmp_path / "never").exists() and not os.path.exists(f"{tmp_path / 'never'}-seed1234")
    assert raw["training"] == {"epochs": 2}  # the caller's dict is not changed


def test_library_calls_print_nothing(doc, capfd, caplog, tmp_path):
    import logging

    import seqkit
    from conftest import make_recipe

    capfd.readouterr()
    with caplog.at_level(logging.WARNING, logger="seqkit"):
        run = seqkit.train(make_recipe(data={"limit": 60}, training={"epochs": 1}),
                           run_dir=tmp_path / "quiet")
        run.evaluate("test")
        run.generate("Th\u00a4 ", max_length=5)  # an unknown character: a logged warning
        doc["tagger"].predict(["the zebra runs"])
        doc["g2p"].transduce(["ab", "", "abz"])
        doc["g2p"].attention("ab")
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert "read as [UNK]" in caplog.text and "empty line(s) skipped" in caplog.text


def test_import_seqkit_imports_no_tensorflow():
    code = ("import sys, seqkit\n"
            "names = (seqkit.Run, seqkit.Recipe, seqkit.load, seqkit.build, seqkit.train, seqkit.Preprocessing)\n"
            "assert callable(seqkit.train)\n"
            "bad = [m for m in ('tensorflow', 'keras') if m in sys.modules]\n"
            "assert not bad, bad\n"
            "from seqkit.training.train import prepare  # the module does not shadow seqkit.train\n"
            "assert callable(seqkit.train) and seqkit.train is seqkit.api.train\n"
            "seqkit.Recipe.from_dict({'name': 'x', 'data': {'source': 'pydoc_topics'}})\n"
            "assert 'tensorflow' in sys.modules  # validation builds on the heads (Keras)\n"
            "print('ok')\n")
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr
    assert res.stderr == ""  # TF's C++ start-up lines are hidden in a library call too
