"""First contact: the shipped recipes by name, ``seqkit init`` on a user's CSV, CoNLL file,
parallel text and text folder, a recipe named after its file, ``dir(seqkit)``, one version, and
the warning for a split that leaves a class out."""

from __future__ import annotations

import json
import logging

import pytest
import yaml
from click.testing import CliRunner

import seqkit
from seqkit.cli import main

FILES = {
    "reviews.csv": "id,review,stars\n" + "".join(f'{i},"{t}",{s}\n' for i, (t, s) in enumerate(
        [("Great, really great", 5), ("Dull and far too long", 1), ("Loved it", 5), ("Boring", 1)] * 6)),
    "train.conll": "-DOCSTART- O\n\nthe DT\ncat NN\nsat VBD\n\na DT\ndog NN\nran VBD\n\n" * 5,
    "train.en": "the house\na garden\nthe small house\na big garden\n" * 5,
    "train.de": "das Haus\nein Garten\ndas kleine Haus\nein großer Garten\n" * 5,
    "corpus/a.txt": "hello world this is text\n" * 10,
    "corpus/b.txt": "more text here\n" * 10,
    "corpus/c.txt": "valid text\n" * 5,
    "corpus/d.txt": "test text\n" * 5,
}


@pytest.fixture
def user_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, text in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("task, data, written, expect", [
    ("classify", ["reviews.csv"], "reviews-classify.yaml",
     {"source": "table", "text_column": "review", "label_column": "stars", "tokenizer": "whitespace"}),
    ("tag", ["train.conll"], "train-tag.yaml", {"source": "conll", "path": "train.conll"}),
    ("seq2seq", ["train.en", "train.de"], "train-seq2seq.yaml",
     {"source": "parallel_text", "source_path": "train.en", "target_path": "train.de"}),
    ("lm", ["corpus"], "corpus-lm.yaml",
     {"source": "text_corpus", "layout": "stream", "train_path": ["corpus/a.txt", "corpus/b.txt"],
      "valid_path": "corpus/c.txt", "test_path": "corpus/d.txt"}),
])
def test_init_writes_a_recipe_validate_accepts(user_files, tf, task, data, written, expect):
    args = ["init", "--task", task] + [x for d in data for x in ("--data", d)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == written
    raw = yaml.safe_load((user_files / written).read_text(encoding="utf-8"))
    assert {k: raw["data"][k] for k in expect} == expect
    assert raw["head"]["type"] == {"classify": "acceptor", "tag": "tagger", "lm": "language_model",
                                   "seq2seq": "seq2seq"}[task]
    res = CliRunner().invoke(main, ["validate", written, "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["ok"] is True and report["parameters"], report
    assert report["data"], report


def test_init_recipe_trains_one_tiny_epoch(user_files, tf):
    """The CoNLL starter trains (one epoch, a tiny model) and is evaluated against its baseline."""
    assert CliRunner().invoke(main, ["init", "--task", "tag", "--data", "train.conll"]).exit_code == 0
    run = seqkit.train(seqkit.Recipe.from_yaml("train-tag.yaml", overrides={
        "training.epochs": 1, "model.units": 8, "model.embedding_dim": 8, "training.batch_size": 4}),
        run_dir="runs/tag")
    assert run.path.endswith("runs/tag") or str(run.path).endswith("runs/tag")
    m = run.evaluate("test")
    assert 0.0 <= m["accuracy"] <= 1.0


def test_init_refuses_a_file_it_did_not_write_and_unknown_formats(user_files):
    (user_files / "mine.yaml").write_text("name: mine\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["init", "--task", "classify", "--data", "reviews.csv", "--out", "mine.yaml",
                                    "--overwrite"])
    assert res.exit_code == 2 and "not written by seqkit init" in res.output
    assert (user_files / "mine.yaml").read_text(encoding="utf-8") == "name: mine\n"
    res = CliRunner().invoke(main, ["init", "--task", "classify", "--data", "train.en"])
    assert res.exit_code == 2 and "train.en" in res.output and "table" in res.output
    # a second init over its own file needs --overwrite, then replaces it
    assert CliRunner().invoke(main, ["init", "--task", "tag", "--data", "train.conll"]).exit_code == 0
    assert CliRunner().invoke(main, ["init", "--task", "tag", "--data", "train.conll"]).exit_code == 2
    assert CliRunner().invoke(main, ["init", "--task", "tag", "--data", "train.conll", "--overwrite"]).exit_code == 0


def test_shipped_recipes_listed_and_found_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no recipes/ folder here
    names = [r.name for r in seqkit.recipes()]
    assert names == sorted(names) and {"lm-pydoc-chars", "g2p-cmudict-attention"} <= set(names)
    res = CliRunner().invoke(main, ["recipes"])
    assert res.exit_code == 0
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("lm-pydoc-chars "))
    assert "language_model" in line and "Character-level LSTM language model" in line
    rec = seqkit.Recipe.from_yaml("lm-pydoc-chars")
    assert rec.name == "lm-pydoc-chars" and rec.data.source == "pydoc_topics"
    res = CliRunner().invoke(main, ["validate", "lm-pydoc-chars", "--no-data"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["validate", "no-such-recipe", "--no-data"])
    assert res.exit_code == 2 and "seqkit recipes" in res.output


def test_a_users_file_wins_over_a_shipped_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lm-pydoc-chars").write_text("name: mine\ndata: {source: text_lines, path: c.txt}\n",
                                             encoding="utf-8")
    assert seqkit.Recipe.from_yaml("lm-pydoc-chars").name == "mine"


def test_recipe_name_defaults_to_the_file_stem(tmp_path):
    (tmp_path / "c.txt").write_text("ab\ncd\n", encoding="utf-8")
    path = tmp_path / "my-corpus_v2.yaml"
    path.write_text("data: {source: text_lines, path: c.txt}\n", encoding="utf-8")
    assert seqkit.Recipe.from_yaml(str(path)).name == "my-corpus_v2"


def test_dir_lists_the_api_and_the_version_is_one():
    import importlib.metadata
    import pathlib

    public = [n for n in dir(seqkit) if not n.startswith("_")]
    assert {"train", "load", "build", "Recipe", "Run", "recipes", "train_seeds"} <= set(public)
    assert "annotations" not in public
    assert seqkit.__version__ == "0.2.0"
    res = CliRunner().invoke(main, ["--version"])
    assert res.output.strip() == f"seqkit, version {seqkit.__version__}"
    toml = (pathlib.Path(__file__).parent.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in toml and 'attr = "seqkit.__version__"' in toml
    assert importlib.metadata.version  # the installed metadata is the wheel's business (test_wheel.py)


def test_a_split_that_leaves_a_class_out_warns_naming_it(caplog):
    from seqkit.data.records import Record
    from seqkit.data.split import assemble_splits

    # label-sorted, contiguous split: train gets a and b, valid and test only c
    recs = [Record(tokens=["x"], label=lab) for lab in ["a"] * 8 + ["b"] * 8 + ["c"] * 4]
    with caplog.at_level(logging.WARNING, logger="seqkit"):
        splits = assemble_splits({"all": recs}, 0.1, 0.1, shuffle=False, seed=1)
    assert [r.label for r in splits["valid"]] == ["c", "c"] and [r.label for r in splits["test"]] == ["c", "c"]
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 2
    assert "valid split has no example of 2 of the 2 classes in train ('a', 'b')" in msgs[0]
    assert "data.split.shuffle: true" in msgs[0] and "test split" in msgs[1]
    # every class everywhere: no warning; a split without labels (a tagger's) is not looked at
    from seqkit.data.split import missing_classes

    a, b = Record(tokens=["x"], label="a"), Record(tokens=["y"], label="b")
    assert missing_classes({"train": [a, b], "valid": [b, a], "test": [a]}) == {"test": ["b"]}
    assert missing_classes({"train": [a, b], "valid": [b, a], "test": [b, a]}) == {}
    tagged = Record(tokens=["x"], tags=["T"])
    assert missing_classes({"train": [tagged], "valid": [], "test": [tagged]}) == {}


def test_init_picks_the_label_column_with_fewest_values_first_of_equals(tmp_path):
    """Without a column named like a label, the label is the column with the fewest distinct
    values (the first of equals), the text the longest of the rest, in a narrow table and in one
    of 3,000 columns (the pick is linear in the columns; this test checks what it picks, not its time)."""
    from seqkit.starter import classify_columns

    rows = [{"id": str(i), "kind": "ab"[i % 2], "mood": "xy"[i % 2], "body": "words " * (i + 3)}
            for i in range(6)]
    got = classify_columns("t.csv", rows, ["id", "kind", "mood", "body"])
    assert (got["label_column"], got["text_column"]) == ("kind", "body")
    cols = [f"c{i}" for i in range(3000)]
    wide = [{c: f"{r}-{c}" for c in cols} | {"c2999": "yes" if r % 2 else "no"} for r in range(4)]
    assert classify_columns("w.csv", wide, cols)["label_column"] == "c2999"


@pytest.mark.parametrize("content, message", [
    (b"text,text\nhello,pos\n", "the header names the column 'text' twice"),
    (b'{"text": "a", "label": ' + b"9" * 5000 + b'}\n', r"t.jsonl:1: not readable JSON \(Exceeds the limit"),
    (b'{"text": "a", "label": }\n', r"t.jsonl:1: not readable JSON \(Expecting value"),
    ("text,label\ncaf\u00e9,pos\n".encode("latin1"), r"not UTF-8 \(byte 14.*Latin-1\?.*iconv -f latin1"),
    ("text,label\nhi,pos\n".encode("utf-16"), r"not UTF-8 \(byte 0.*looks like UTF-16.*iconv -f UTF-16"),
])
def test_init_names_what_is_wrong_with_a_table(tmp_path, content, message):
    """A duplicate header, Latin-1 and UTF-16 files: one paragraph each (they were internal errors)."""
    from seqkit.starter import InitError, sample_table

    p = tmp_path / ("t.jsonl" if content.startswith(b"{") else "t.csv")
    p.write_bytes(content)
    with pytest.raises(InitError, match=message):
        sample_table(str(p))


def test_init_reads_a_field_longer_than_the_csv_modules_limit(tmp_path):
    from seqkit.starter import sample_table

    p = tmp_path / "t.csv"
    p.write_text("text,label\n" + "word " * 40_000 + ",pos\n", encoding="utf-8")  # 200,000 characters
    cols, rows = sample_table(str(p))
    assert cols == ["text", "label"] and len(rows[0]["text"]) == 200_000


def test_init_reads_headerless_tables_other_delimiters_unspaced_text_and_short_word_tag_lines(tmp_path, tf):
    """What init guesses is what the data holds, checked by reading the data through the recipe:
    a headerless ``text<TAB>label`` file keeps its first example; a ``;``-separated CSV is read by
    its columns; Chinese without spaces is read a character at a time; word/TAG sentences all of
    one short length are word/TAG, not CoNLL columns."""
    from seqkit.recipe import Recipe
    from seqkit.starter import starter_recipe
    from seqkit.training.train import prepare

    def records(name: str, text: str, task: str = "classify"):
        (tmp_path / name).write_text(text, encoding="utf-8")
        raw = starter_recipe(task, str(tmp_path / name), out=str(tmp_path / "r.yaml"))
        raw["data"]["split"] = {"valid": 0.0, "test": 0.0}
        rec = Recipe.from_dict(raw, base_dir=str(tmp_path))
        return raw["data"], prepare(rec).splits["train"]

    reviews = [("The plot was tedious.", "negative"), ("A fine, warm film", "positive")] * 6
    data, recs = records("r.tsv", "".join(f"{t}\t{y}\n" for t, y in reviews))
    assert data["source"] == "tsv_text_label" and len(recs) == 12
    assert recs[0].tokens == ["The", "plot", "was", "tedious."] and recs[0].label == "negative"
    data, recs = records("s.csv", "id;review;mood\n" + "".join(f"{i};{t};{y}\n" for i, (t, y) in enumerate(reviews)))
    assert (data["delimiter"], data["text_column"], data["label_column"]) == (";", "review", "mood")
    assert recs[1].tokens == ["A", "fine,", "warm", "film"] and recs[1].label == "positive"
    spam = [("win a free prize now, click here", "spam"), ("see you at lunch tomorrow", "ham")] * 6
    data, recs = records("spam.csv", "message,spam\n" + "".join(f'"{t}",{y}\n' for t, y in spam))
    assert (data["source"], data["text_column"], data["label_column"]) == ("table", "message", "spam")
    assert len(recs) == 12  # a header whose label name is also a label is still a header
    zh = [("演员表演非常出色。", "好评"), ("剧情太无聊了！", "差评")] * 6
    data, recs = records("zh.csv", "评论,标签\n" + "".join(f"{t},{y}\n" for t, y in zh))
    assert data["tokenizer"] == "char" and recs[1].tokens == list("剧情太无聊了！")
    tagged = "Google/B-ORG left/O London/B-LOC ./O\nAlice/B-PER left/O Paris/B-LOC ./O\n" * 6
    data, recs = records("t.txt", tagged, "tag")
    assert data["source"] == "word_tag" and recs[0].tags == ["B-ORG", "O", "B-LOC", "O"]


def test_a_plugin_head_brings_its_own_init_task(user_files):
    """--task words come from the heads: a plugin head's starter_task is one, its starter() writes
    the data and head sections; an unknown word lists the tasks there are."""
    plugin = user_files / "sentiment_head.py"
    plugin.write_text(
        "from seqkit.registry import HEADS, register_head\n\n\n"
        "@register_head('sentiment_acceptor')\n"
        "class Sentiment(HEADS.get('acceptor')):\n"
        "    starter_task = 'sentiment'\n\n"
        "    @classmethod\n"
        "    def starter(cls, paths, rel):\n"
        "        out = super().starter(paths, rel)\n"
        "        return {**out, 'head': {'pooling': 'mean'}, 'notes': ['pooled over the whole review']}\n")
    from seqkit.registry import HEADS

    try:
        res = CliRunner().invoke(main, ["init", "--task", "sentiment", "--data", "reviews.csv", "--plugin", str(plugin)])
    finally:  # the head stays out of later tests' lists of heads
        HEADS._entries.pop("sentiment_acceptor", None)
    assert res.exit_code == 0, res.output
    text = (user_files / "reviews-sentiment.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    assert raw["head"] == {"type": "sentiment_acceptor", "pooling": "mean"}
    assert (raw["data"]["text_column"], raw["data"]["label_column"]) == ("review", "stars")
    assert "# pooled over the whole review" in text
    res = CliRunner().invoke(main, ["init", "--task", "sentimnet", "--data", "reviews.csv"])
    assert res.exit_code == 2 and "unknown task 'sentimnet'; choose one of classify, " in res.output


def test_init_refuses_a_file_whose_lines_end_in_a_carriage_return_alone(tmp_path):
    """What training refuses, init refuses first (it wrote a recipe validate then refused)."""
    from seqkit.starter import InitError, starter_recipe

    (tmp_path / "t.txt").write_text("the/D dog/N\ra/D cat/N\rthe/D cat/N\r", encoding="utf-8", newline="")
    with pytest.raises(InitError, match=r"t.txt: its lines end in a carriage return alone .*`tr "):
        starter_recipe("tag", str(tmp_path / "t.txt"))
