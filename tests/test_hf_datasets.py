"""The hf_datasets source (Hugging Face ``datasets``, local only): save_to_disk folders and local
CSV/JSON builders for every head, the dataset's own splits, no network (sockets blocked: any
attempt fails the test), and the refusals (a Hub id, a URL, a missing column, no package).

Every data set is a dozen rows the test writes; every model is 8 units trained for one epoch.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from seqkit.errors import DataError, RecipeError

datasets = pytest.importorskip("datasets")  # the `hf` extra (installed by the README test command)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = {"model": {"units": 8, "embedding_dim": 4},
        "training": {"epochs": 1, "batch_size": 4, "early_stopping": None},
        "decoding": {"max_length": 8}}


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any socket connection or name lookup fails the test (raises, and is recorded)."""
    tried = []

    def refuse(*args, **kwargs):
        tried.append(args)
        raise AssertionError(f"network access attempted: {args[1:] if len(args) > 1 else args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield tried
    assert not tried, f"network access attempted: {tried}"


def recipe(tmp_path, data: dict, head: str, **extra):
    import seqkit

    raw = {"name": "hf", "seed": 3, "data": {"source": "hf_datasets", **data},
           "head": {"type": head, **extra.pop("head_options", {})}, **TINY, **extra}
    return seqkit.Recipe.from_dict(raw, base_dir=tmp_path)


def features(**cols):
    return datasets.Features(cols)


SENTIMENT = [("good fun", "pos"), ("bad day", "neg"), ("good day", "pos"), ("bad fun", "neg")]


def test_acceptor_from_a_saved_dataset_dict_uses_its_splits_and_class_names(tmp_path):
    import seqkit
    from seqkit.training.train import prepare

    feats = features(sentence=datasets.Value("string"), label=datasets.ClassLabel(names=["neg", "pos"]))
    ids = {"neg": 0, "pos": 1}

    def part(rows):
        return datasets.Dataset.from_dict({"sentence": [t for t, _ in rows], "label": [ids[y] for _, y in rows]},
                                          features=feats)

    datasets.DatasetDict({"train": part(SENTIMENT * 3), "validation": part([("good", "pos"), ("bad", "neg")]),
                          "test": part([("fun day", "pos")])}).save_to_disk(str(tmp_path / "sentiment"))
    # relative to the recipe's folder; split fractions are unused when the data set has the splits
    rec = recipe(tmp_path, {"path": "sentiment", "text_column": "sentence", "label_column": "label",
                            "tokenizer": "whitespace", "split": {"valid": 0.5, "test": 0.5}}, "acceptor")
    assert rec.data_options.path == str(tmp_path / "sentiment")
    prep = prepare(rec)
    assert [len(prep.splits[k]) for k in ("train", "valid", "test")] == [12, 2, 1]
    v = prep.splits["valid"][1]
    assert (v.tokens, v.label) == (["bad"], "neg")  # ClassLabel id 0 -> its name
    assert v.where == f"{tmp_path / 'sentiment'} [validation] row 1"
    assert prep.splits["test"][0].tokens == ["fun", "day"]
    run = seqkit.train(rec, tmp_path / "runs" / "acc")
    assert run.metrics["examples"] == {"train": 12, "valid": 2, "test": 1}
    out = run.predict(["good good fun", "bad"])
    assert [set(o["probabilities"]) for o in out] == [{"neg", "pos"}] * 2
    for o in out:
        assert abs(sum(o["probabilities"].values()) - 1) < 1e-5
        assert o["label"] == max(o["probabilities"], key=o["probabilities"].get)


def test_tagger_from_a_saved_dataset_divided_by_data_split(tmp_path):
    """A single Dataset (no splits) is divided by data.split; Sequence(ClassLabel) tags give their
    names; new input is split at white space like the pre-split tokens column (not by the
    recipe's default char tokenizer)."""
    import seqkit
    from seqkit.training.train import prepare

    names = ["O", "B-PER"]
    rows = [(["Ann", "sings"], [1, 0]), (["Bo", "runs", "fast"], [1, 0, 0]), (["it", "rains"], [0, 0])] * 4
    feats = features(words=datasets.Sequence(datasets.Value("string")),
                     ner=datasets.Sequence(datasets.ClassLabel(names=names)))
    datasets.Dataset.from_dict({"words": [w for w, _ in rows], "ner": [t for _, t in rows]},
                               features=feats).save_to_disk(str(tmp_path / "ner"))
    rec = recipe(tmp_path, {"path": str(tmp_path / "ner"), "tokens_column": "words", "tags_column": "ner",
                            "split": {"valid": 0.25, "test": 0.25}}, "tagger")
    prep = prepare(rec)
    assert [len(prep.splits[k]) for k in ("train", "valid", "test")] == [6, 3, 3]
    r = prep.splits["train"][1]
    assert (r.tokens, r.tags, r.where) == (["Bo", "runs", "fast"], ["B-PER", "O", "O"], f"{tmp_path / 'ner'} row 1")
    run = seqkit.train(rec, tmp_path / "runs" / "ner")
    out = run.predict(["Ann runs", "Zed sings fast"])
    assert [o["tokens"] for o in out] == [["Ann", "runs"], ["Zed", "sings", "fast"]]
    assert all(len(o["tags"]) == len(o["tokens"]) and set(o["tags"]) <= set(names) for o in out)


def test_language_model_from_a_local_csv_through_the_csv_builder(tmp_path, monkeypatch):
    """``path: csv`` + data_files is load_dataset("csv", data_files=...): the builder, not a folder;
    the load runs offline (both variables and both libraries' settings) and restores them."""
    import seqkit
    from seqkit.training.train import prepare

    lines = ["the cat sat", "a dog ran", "the dog sat", "a cat ran"] * 3
    (tmp_path / "lines.csv").write_text("id,line\n" + "".join(f"{i},{t}\n" for i, t in enumerate(lines)),
                                        encoding="utf-8")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    import datasets.config as dconf
    import huggingface_hub.constants as hconst

    seen = []
    real = datasets.load_dataset

    def spy(*args, **kwargs):
        seen.append((args, kwargs, os.environ.get("HF_DATASETS_OFFLINE"), os.environ.get("HF_HUB_OFFLINE"),
                     dconf.HF_HUB_OFFLINE, dconf.HF_DATASETS_OFFLINE, hconst.HF_HUB_OFFLINE))
        return real(*args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", spy)
    before = (dconf.HF_HUB_OFFLINE, dconf.HF_DATASETS_OFFLINE, hconst.HF_HUB_OFFLINE)
    rec = recipe(tmp_path, {"path": "csv", "data_files": "lines.csv", "text_column": "line",
                            "split": {"valid": 0.25, "test": 0.25}}, "language_model")
    assert (rec.data_options.builder, rec.data_options.path) == ("csv", None)
    assert rec.data_options.data_files == str(tmp_path / "lines.csv")
    prep = prepare(rec)
    (args, kwargs, *flags), = seen
    assert args == ("csv",) and kwargs["data_files"] == str(tmp_path / "lines.csv")
    assert not kwargs["cache_dir"].startswith(os.path.expanduser("~"))  # a temporary cache
    assert not os.path.exists(kwargs["cache_dir"])  # ... removed after reading
    assert flags == ["1", "1", True, True, True]
    assert os.environ.get("HF_DATASETS_OFFLINE") is None and os.environ["HF_HUB_OFFLINE"] == "0"
    assert (dconf.HF_HUB_OFFLINE, dconf.HF_DATASETS_OFFLINE, hconst.HF_HUB_OFFLINE) == before
    # no splits in one CSV file: the contiguous data.split blocks of its rows
    assert [r.text for r in prep.splits["train"]] == lines[:6]
    assert [r.text for r in prep.splits["test"]] == lines[9:]
    run = seqkit.train(rec, tmp_path / "runs" / "lm")
    out = run.generate("the ", max_length=5, greedy=True)
    assert len(out) == 1 and out[0].startswith("the ") and set(out[0]) <= set("".join(lines))


def test_seq2seq_from_local_csv_files_per_split(tmp_path):
    """data_files {train, validation, test}: the builder's splits, 'validation' read as valid;
    string targets split by target_tokenizer."""
    import seqkit
    from seqkit.training.train import prepare

    words = {"ab": "A B", "ba": "B A", "aab": "A A B", "bb": "B B", "abb": "A B B", "ba a": "B A A"}
    rows = list(words.items()) * 2

    def write(name, pairs):
        (tmp_path / name).write_text("word,phones\n" + "".join(f"{w},{p}\n" for w, p in pairs), encoding="utf-8")

    write("train.csv", rows)
    write("dev.csv", [("aa", "A A")])
    write("test.csv", [("bab", "B A B"), ("a", "A")])
    rec = recipe(tmp_path, {"data_files": {"train": "train.csv", "validation": "dev.csv", "test": "test.csv"},
                            "source_column": "word", "target_column": "phones", "target_tokenizer": "whitespace"},
                 "seq2seq", head_options={"attention": "luong_dot"})
    assert rec.data_options.builder == "csv"  # from the files' extension
    prep = prepare(rec)
    assert [len(prep.splits[k]) for k in ("train", "valid", "test")] == [12, 1, 2]
    assert (prep.splits["valid"][0].text, prep.splits["valid"][0].target) == ("aa", ["A", "A"])
    assert prep.splits["valid"][0].where == f"{tmp_path / 'dev.csv'} [validation] row 0"
    assert prep.splits["train"][5].target == ["B", "A", "A"] and prep.splits["train"][5].text == "ba a"
    run = seqkit.train(rec, tmp_path / "runs" / "g2p")
    out = run.transduce(["abab"], beam_width=2, n_best=2)
    hyps = out[0]["hypotheses"]
    assert out[0]["input"] == "abab" and len(hyps) == 2 and hyps[0]["score"] >= hyps[1]["score"]
    assert all(set(h["output"]) <= {"A", "B", "</s>"} for h in hyps)


def test_a_hub_id_or_url_is_refused_before_anything_is_read(tmp_path, write_recipe):
    for data in ({"path": "imdb", "data_files": "x.csv", "text_column": "text", "label_column": "label"},
                 {"builder": "stanfordnlp/imdb", "data_files": "x.csv", "text_column": "text",
                  "label_column": "label"}):
        with pytest.raises(RecipeError) as err:
            recipe(tmp_path, data, "acceptor")
        msg = str(err.value)
        assert "not one of the local builders (csv, json, parquet, text)" in msg
        assert "never downloads" in msg and "save_to_disk" in msg
    # from a file: the recipe's line
    p = write_recipe({"name": "x", "data": {"source": "hf_datasets", "builder": "imdb", "data_files": "a.csv",
                                            "text_column": "text"}})
    from seqkit.recipe import load_recipe

    with pytest.raises(RecipeError, match=r"recipe.yaml:4: data.builder: 'imdb' is not one of the local builders"):
        load_recipe(p)
    with pytest.raises(RecipeError, match="is a URL; seqkit reads local files"):
        recipe(tmp_path, {"data_files": "https://example.org/a.csv", "text_column": "t"}, "language_model")
    with pytest.raises(RecipeError, match="is a URL"):
        recipe(tmp_path, {"path": "hf://datasets/imdb", "text_column": "t"}, "language_model")
    # a bare name that is no local folder: the same advice, at load time (seqkit train's message)
    rec = recipe(tmp_path, {"path": "stanfordnlp/imdb", "text_column": "text", "label_column": "label"},
                 "acceptor")
    from seqkit.training.train import prepare

    with pytest.raises(RecipeError) as err:
        prepare(rec)
    msg = str(err.value)
    assert f"'{tmp_path / 'stanfordnlp' / 'imdb'}' is no such folder" in msg
    assert "load_dataset('stanfordnlp/imdb').save_to_disk('stanfordnlp_imdb_local')" in msg


def test_text_builder_skips_blank_lines_and_a_null_csv_value_is_named(tmp_path):
    from seqkit.data.hf_datasets import HfDatasets

    (tmp_path / "a.txt").write_text("one line\n\n  \ntwo lines\n", encoding="utf-8")
    rec = recipe(tmp_path, {"builder": "text", "data_files": "a.txt", "text_column": "text"}, "language_model")
    assert [r.text for r in HfDatasets(rec.data_options, rec).load()["train"]] == ["one line", "two lines"]
    (tmp_path / "b.csv").write_text("w,p\nab,A B\nba,\n", encoding="utf-8")
    rec = recipe(tmp_path, {"data_files": "b.csv", "source_column": "w", "target_column": "p"}, "seq2seq")
    with pytest.raises(DataError, match=r"b.csv \[train\] row 1: column 'p' \(data.target_column\) is empty"):
        HfDatasets(rec.data_options, rec).load()


def test_recipe_shape_errors(tmp_path):
    for data, text in (({"path": "d"}, "name the columns to read"),
                       ({"path": "d", "tokens_column": "w"}, "data.tokens_column needs data.label_column"),
                       ({"path": "d", "source_column": "w"}, "add data.target_column"),
                       ({"path": "d", "text_column": "t", "tokens_column": "w", "label_column": "l"},
                        "not both"),
                       ({"path": "d", "label_column": "l"}, "an input column is missing"),
                       ({"data_files": "a.xlsx", "text_column": "t"}, "cannot tell the builder"),
                       ({"builder": "csv", "text_column": "t"}, "needs data.data_files")):
        with pytest.raises(RecipeError, match=text):
            recipe(tmp_path, data, "language_model")


def test_a_missing_column_or_split_names_what_is_there(tmp_path):
    from seqkit.training.train import prepare

    (tmp_path / "a.csv").write_text("sentence,label\nhi,x\nho,y\n", encoding="utf-8")
    rec = recipe(tmp_path, {"data_files": "a.csv", "text_column": "text", "label_column": "label"}, "acceptor")
    with pytest.raises(DataError) as err:
        prepare(rec)
    msg = str(err.value)
    assert "data.text_column" in msg and "no column 'text'" in msg and str(tmp_path / "a.csv") in msg
    assert "its columns: sentence, label" in msg
    rec = recipe(tmp_path, {"data_files": {"train": "a.csv"}, "text_column": "sentence",
                            "label_column": "label", "test_split": "testing"}, "acceptor")
    with pytest.raises(DataError, match=r"data.test_split: .* has no split 'testing'; its splits: train"):
        prepare(rec)


def test_without_the_package_a_recipe_error_names_the_pip_extra(tmp_path, monkeypatch):
    from seqkit.training.train import prepare

    (tmp_path / "a.csv").write_text("t\nhi\n", encoding="utf-8")
    rec = recipe(tmp_path, {"data_files": "a.csv", "text_column": "t"}, "language_model")
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` raises ImportError
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    with pytest.raises(RecipeError, match=r'pip install "seqkit\[hf\]"'):
        prepare(rec)
    assert "HF_DATASETS_OFFLINE" not in os.environ  # restored on the way out


def test_import_seqkit_and_validation_import_no_datasets():
    code = ("import sys, seqkit, seqkit.cli\n"
            "from seqkit.registry import DATA\n"
            "src = DATA.get('hf_datasets')\n"
            "src.Options.model_validate({'data_files': 'a.csv', 'text_column': 't'})\n"
            "assert 'datasets' not in sys.modules, 'datasets imported'\n"
            "print('ok')\n")
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr


def test_the_cli_gives_the_same_refusals(tmp_path, write_recipe):
    from click.testing import CliRunner

    from seqkit.cli import main

    base = {"name": "x", "model": {"units": 8}, "head": {"type": "acceptor"}}
    p = write_recipe({**base, "data": {"source": "hf_datasets", "path": "imdb", "data_files": "a.csv",
                                       "text_column": "text", "label_column": "label"}})
    res = CliRunner().invoke(main, ["train", p, "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "'imdb' is not one of the local builders" in res.output and "never downloads" in res.output
    p = write_recipe({**base, "data": {"source": "hf_datasets", "path": "imdb", "text_column": "text",
                                       "label_column": "label"}}, name="folder.yaml")
    res = CliRunner().invoke(main, ["train", p, "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "is no such folder" in res.output and "save_to_disk('imdb_local')" in res.output
    assert not (tmp_path / "run").exists()


def test_a_saved_data_set_naming_a_file_outside_its_folder_is_refused(tmp_path):
    """save_to_disk's state.json lists the folder's Arrow files; one edited to
    "../other/data.arrow" made seqkit read a file outside the folder it was given."""
    import json
    import shutil

    from seqkit.training.train import prepare

    datasets.Dataset.from_dict({"text": ["a b", "c d"] * 4, "label": ["x", "y"] * 4}).save_to_disk(
        str(tmp_path / "ds"))
    rec = recipe(tmp_path, {"path": str(tmp_path / "ds"), "text_column": "text", "label_column": "label",
                            "split": {"valid": 0.25, "test": 0.25}}, "acceptor")
    assert len(prepare(rec).splits["train"]) == 4  # as saved: read
    state_file = tmp_path / "ds" / "state.json"
    state = json.loads(state_file.read_text())
    name = state["_data_files"][0]["filename"]
    (tmp_path / "other").mkdir()
    shutil.move(str(tmp_path / "ds" / name), str(tmp_path / "other" / name))
    state["_data_files"][0]["filename"] = f"../other/{name}"
    state_file.write_text(json.dumps(state))
    with pytest.raises(DataError, match=rf"state.json: names the data file '\.\./other/{name}', not a file "
                                        rf"name inside .*ds; seqkit reads only the files inside"):
        prepare(rec)
