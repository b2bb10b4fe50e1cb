"""``seqkit train`` + ``evaluate`` + ``predict`` end to end on tiny files (stdin and file,
text and JSON lines, probabilities, too-long inputs)."""

import json

import numpy as np

import pytest
from click.testing import CliRunner

TRAIN = "".join(["the/D dog/N runs/V\n", "a/D cat/N sleeps/V\n", "the/D cat/N runs/V\n"] * 6)


@pytest.fixture(scope="module")
def tagger_run(tmp_path_factory, keras):
    import yaml

    from seqkit.cli import main

    d = tmp_path_factory.mktemp("tagrun")
    (d / "train.txt").write_text(TRAIN, encoding="utf-8")
    recipe = {"name": "tiny-tagger", "seed": 1,
              "data": {"source": "word_tag", "path": "train.txt", "max_length": 4,
                       "split": {"valid": 0.2, "test": 0.2, "shuffle": True}},
              "model": {"units": 8, "embedding_dim": 8},
              "head": {"type": "tagger", "too_long": "split"},
              "training": {"epochs": 25, "batch_size": 4, "learning_rate": 0.05, "early_stopping": None}}
    (d / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    res = CliRunner().invoke(main, ["train", str(d / "r.yaml"), "--run-dir", str(d / "run"), "--quiet"])
    assert res.exit_code == 0, res.output
    assert "token accuracy" in res.output and "baseline most-frequent-tag-per-word" in res.output
    return d / "run"


def test_predict_from_stdin_text(tagger_run):
    from seqkit.cli import main

    res = CliRunner().invoke(main, ["predict", str(tagger_run)], input="the dog sleeps\na cat runs\n")
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[-2:] == ["the/D dog/N sleeps/V", "a/D cat/N runs/V"]


def test_predict_from_conll_file_as_jsonl_with_probabilities(tagger_run, tmp_path):
    from seqkit.cli import main

    f = tmp_path / "in.conll"
    f.write_text("the\ncat\n\na\ndog\nruns\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["predict", str(tagger_run), "--input", str(f), "--input-format",
                                    "conll", "--format", "jsonl", "--probabilities"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.output.splitlines() if x.startswith("{")]
    assert [r["tags"] for r in rows] == [["D", "N"], ["D", "N", "V"]]
    p = rows[0]["probabilities"][0]
    assert sum(p.values()) == pytest.approx(1.0, abs=1e-4) and p["D"] == rows[0]["probability"][0]
    # the file's name says CoNLL: the same sequences without --input-format, from both entry points
    res = CliRunner().invoke(main, ["predict", str(tagger_run), "--input", str(f), "--format", "jsonl"])
    assert [json.loads(x)["tags"] for x in res.output.splitlines() if x.startswith("{")] == [["D", "N"],
                                                                                          ["D", "N", "V"]]
    from seqkit.runs.run import Run

    got = Run(str(tagger_run)).predict(f.read_text(encoding="utf-8"), name="in.conll")
    assert [r["tags"] for r in got] == [["D", "N"], ["D", "N", "V"]]


def test_predict_longer_than_max_length_is_split_and_counted(tagger_run):
    from seqkit.cli import main

    res = CliRunner().invoke(main, ["predict", str(tagger_run)],
                                             input="the dog runs the cat sleeps\n")
    assert res.exit_code == 0, res.output
    pairs = [w.rsplit("/", 1) for w in res.stdout.split()]
    # pieces of 4 and 2 tokens, re-joined: every word tagged, in order
    assert [w for w, _ in pairs] == "the dog runs the cat sleeps".split()
    assert [t for _, t in pairs][:3] == ["D", "N", "V"] and pairs[5][1] == "V"
    assert "1 sequence(s) longer than the run's data.max_length = 4 steps were split into pieces" in res.stderr


def test_evaluate_prints_per_tag_table_and_baseline(tagger_run):
    from seqkit.cli import main

    res = CliRunner().invoke(main, ["evaluate", str(tagger_run), "--split", "test", "--confusion-matrix"])
    assert res.exit_code == 0, res.output
    assert "token accuracy" in res.output and "  D " in res.output
    assert "confusion matrix (rows true, columns predicted)" in res.output
    assert "baseline most-frequent-tag-per-word: test accuracy" in res.output


def test_predict_wrong_input_kind_is_a_clear_error(tagger_run):
    from seqkit.cli import main

    res = CliRunner().invoke(main, ["predict", str(tagger_run), "--input-format", "ts"], input="x\n")
    assert res.exit_code == 2
    assert "this run reads tokens; --input-format ts gives frames" in res.output


TS_HEAD = "@problemName toy\n@dimensions 2\n@classLabel true up down\n@data\n"


def _ts_case(up, n):
    a = [str(i if up else -i) for i in range(n)]
    return ",".join(a) + ":" + ",".join(a) + ":" + ("up" if up else "down") + "\n"


@pytest.fixture(scope="module")
def acceptor_run(tmp_path_factory, keras):
    import yaml

    from seqkit.cli import main

    d = tmp_path_factory.mktemp("accrun")
    (d / "train.ts").write_text(TS_HEAD + "".join(_ts_case(i % 2 == 0, 3 + i % 4) for i in range(24)))
    recipe = {"name": "tiny-acceptor", "seed": 1,
              "data": {"source": "ts", "train_path": "train.ts", "max_length": 6,
                       "split": {"valid": 0.0, "test": 0.25, "shuffle": True}},
              "model": {"units": 8, "bidirectional": True},
              "head": {"type": "acceptor", "too_long": "refuse"},
              "training": {"epochs": 30, "batch_size": 4, "learning_rate": 0.05, "early_stopping": None}}
    (d / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    res = CliRunner().invoke(main, ["train", str(d / "r.yaml"), "--run-dir", str(d / "run"), "--quiet"])
    assert res.exit_code == 0, res.output
    return d / "run"


def test_acceptor_run_saves_the_training_normaliser(acceptor_run):
    from seqkit.data.normalize import FrameNormalizer
    from seqkit.data.ts_file import parse_ts
    from seqkit.recipe import load_recipe
    from seqkit.training.train import prepare

    norm = FrameNormalizer.load(str(acceptor_run / "normalizer.json"))
    prep = prepare(load_recipe(str(acceptor_run / "recipe.yaml")))
    frames = np.concatenate([r.frames for r in prep.splits["train"]])
    np.testing.assert_allclose(norm.mean, frames.mean(0), rtol=1e-6)
    np.testing.assert_allclose(norm.std, frames.std(0), rtol=1e-6)
    assert len(parse_ts(TS_HEAD + _ts_case(True, 3), "x")) == 1


def test_acceptor_predict_ts_file_and_stdin(acceptor_run, tmp_path):
    from seqkit.cli import main

    f = tmp_path / "in.ts"
    f.write_text("@dimensions 2\n@classLabel false\n@data\n0,1,2,3:0,1,2,3\n0,-1,-2:0,-1,-2\n")
    res = CliRunner().invoke(main, ["predict", str(acceptor_run), "--input", str(f), "--format", "jsonl",
                                    "--probabilities"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.output.splitlines() if x.startswith("{")]
    assert [r["label"] for r in rows] == ["up", "down"]
    assert rows[0]["probabilities"]["up"] == rows[0]["probability"]
    res = CliRunner().invoke(main, ["predict", str(acceptor_run)], input=f.read_text())
    assert res.exit_code == 0 and res.output.split()[-2:] == ["up", "down"]


def test_acceptor_predict_too_long_is_refused_per_recipe(acceptor_run):
    from seqkit.cli import main

    res = CliRunner().invoke(main, ["predict", str(acceptor_run)],
                             input="@classLabel false\n@data\n" + ",".join("0123456") + ":" + ",".join("0123456") + "\n")
    assert res.exit_code == 2
    assert "<stdin>:3: 1 sequence(s) are longer than the run's data.max_length = 6 steps" in res.output
    assert "Traceback" not in res.output


def test_token_acceptor_from_tsv_trains_resumes_and_predicts_with_its_tokenizer(tmp_path, keras):
    """TSV text-label with a char tokenizer: predict tokenizes stdin text the same way."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import load_run, train

    lines = [("aaab", "A"), ("abaa", "A"), ("bbba", "B"), ("babb", "B")] * 5
    (tmp_path / "d.tsv").write_text("".join(f"{t}\t{y}\n" for t, y in lines), encoding="utf-8")
    raw = {"name": "tsv", "seed": 2,
           "data": {"source": "tsv_text_label", "path": str(tmp_path / "d.tsv"), "tokenizer": "char",
                    "split": {"valid": 0.2, "test": 0.2, "shuffle": True}},
           "model": {"units": 8, "embedding_dim": 4}, "head": {"type": "acceptor", "pooling": "mean"},
           "training": {"epochs": 2, "batch_size": 4, "learning_rate": 0.05, "early_stopping": None}}
    run = str(tmp_path / "run")
    train(recipe_from_dict(raw), run, verbose=0)
    raw["training"]["epochs"] = 30
    m = train(recipe_from_dict(raw), run, resume=True, verbose=0)  # vocab and labels come from the run
    assert m["epochs"] == 30 and m["test"]["accuracy"] == 1.0
    assert m["baselines"]["majority-class"]["test"]["accuracy"] <= 0.75
    from seqkit.cli import main

    res = CliRunner().invoke(main, ["predict", run], input="aaaa\nbbbb\n")
    assert res.exit_code == 0, res.output
    assert res.output.split()[-2:] == ["A", "B"]
    # a table given to a run not trained from one: a header row names its 'text' column
    (tmp_path / "new.tsv").write_text("label\ttext\nB\taaaa\nA\tbbbb\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["predict", run, "--input", str(tmp_path / "new.tsv")])
    assert res.exit_code == 0 and res.output.split()[-2:] == ["A", "B"], res.output
    (tmp_path / "bare.tsv").write_text("aaaa\tA\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["predict", run, "--input", str(tmp_path / "bare.tsv")])
    assert res.exit_code == 2 and "the run was not trained from a table" in res.output
    assert "--input-format text" in res.output
    prep, _ = load_run(run)
    assert sorted(prep.head.labels.names) == ["A", "B"] and prep.head.inputs.kind == "tokens"


def test_tagger_truncate_says_how_many_steps_went_untagged(tagger_run, capsys, seqkit_stderr):
    from seqkit.data.records import Record
    from seqkit.heads.sequence.predict import format_result
    from seqkit.heads.sequence.predict import predict
    from seqkit.training.train import load_run

    prep, model = load_run(str(tagger_run))
    prep.head.options.too_long = "truncate"
    res = predict(prep, model, [Record(tokens="the dog runs the cat sleeps".split(), where="x")])[0]
    assert res["tokens"] == ["the", "dog", "runs", "the"] and len(res["tags"]) == 4
    assert res["untagged_steps"] == 2
    assert format_result(res, "text", False).endswith("... (2 more steps, not tagged)")
    assert "were truncated (head.too_long: truncate)" in capsys.readouterr().err


def test_predict_keeps_a_line_with_unicode_line_separators_whole(tagger_run):
    """U+2028 / U+0085 inside a line (white space to the tokenizer) do not make two records: one
    output per input line, in the Python API and the CLI (seqkit.data.lines.split_lines)."""
    from seqkit.cli import main
    from seqkit.runs.run import Run

    text = "the dog\u2028sleeps\na\x85cat runs\n"
    res = Run(str(tagger_run)).predict(text)
    assert [(r["where"], r["tokens"]) for r in res] == [("<input>:1", ["the", "dog", "sleeps"]),
                                                        ("<input>:2", ["a", "cat", "runs"])]
    out = CliRunner().invoke(main, ["predict", str(tagger_run), "--format", "jsonl"], input=text)
    assert out.exit_code == 0, out.output
    rows = [json.loads(x) for x in out.output.split("\n") if x.startswith("{")]
    assert [(r["where"], r["tags"]) for r in rows] == [("<stdin>:1", res[0]["tags"]),
                                                       ("<stdin>:2", res[1]["tags"])]


def test_a_table_acceptor_predicts_a_table_by_its_text_column(tmp_path, keras):
    """A run trained from a CSV's 'review' column, char tokens: a new CSV (an id column first, a
    quoted comma, an empty label column) is read by that column, row for row as the same texts
    given as lines; the header is never an input."""
    import yaml

    from seqkit.cli import main
    from seqkit.runs.run import Run

    rows = [("aa,ab", "A"), ("abaa", "A"), ("bb,ba", "B"), ("babb", "B")] * 5
    (tmp_path / "d.csv").write_text("id,review,label\n" + "".join(f'{i},"{t}",{y}\n' for i, (t, y) in enumerate(rows)))
    raw = {"name": "tab", "seed": 2,
           "data": {"source": "table", "path": "d.csv", "text_column": "review", "tokenizer": "char",
                    "split": {"valid": 0.2, "test": 0.2, "shuffle": True}},
           "model": {"units": 8, "embedding_dim": 4}, "head": {"type": "acceptor", "pooling": "mean"},
           "training": {"epochs": 3, "batch_size": 4, "learning_rate": 0.05, "early_stopping": None}}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(raw))
    run = str(tmp_path / "run")
    assert CliRunner().invoke(main, ["train", str(tmp_path / "r.yaml"), "--run-dir", run, "-q"]).exit_code == 0
    texts = ["aa,aa", "bbbb", "ab"]
    (tmp_path / "new.csv").write_text("id,review,label\n" + "".join(f'{i},"{t}",\n' for i, t in enumerate(texts)))
    res = CliRunner().invoke(main, ["predict", run, "--input", str(tmp_path / "new.csv"), "--format", "jsonl",
                                    "--probabilities"])
    assert res.exit_code == 0, res.output
    got = [json.loads(x) for x in res.stdout.splitlines()]
    want = Run(run).predict("\n".join(texts), input_format="text")
    assert [g["where"] for g in got] == [f"{tmp_path / 'new.csv'}:{n}" for n in (2, 3, 4)]
    assert [g["probabilities"] for g in got] == [w["probabilities"] for w in want]
    (tmp_path / "bad.csv").write_text("id,text\n1,ab\n")
    res = CliRunner().invoke(main, ["predict", run, "--input", str(tmp_path / "bad.csv")])
    assert res.exit_code == 2 and "the run reads a table's input from the column 'review'" in res.output and "has 'id', 'text'" in res.output


def test_a_tagger_predicts_a_table_by_its_tokens_column(tagger_run, tmp_path):
    """A tagger trained from word/TAG lines reads a table's 'tokens' column (white space between
    tokens), its other columns ignored: the tags of the same lines given as text."""
    from seqkit.cli import main

    f = tmp_path / "in.tsv"
    f.write_text("n\ttokens\n1\tthe dog sleeps\n2\ta cat runs\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["predict", str(tagger_run), "--input", str(f)])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[-2:] == ["the/D dog/N sleeps/V", "a/D cat/N runs/V"]


def test_a_list_of_sequences_is_never_read_as_a_table(tagger_run):
    """Run.predict(list, name="x.csv"): each item is a sequence, whatever the name says."""
    from seqkit.runs.run import Run

    run = Run(str(tagger_run))
    got = run.predict(["the dog sleeps", "a cat runs"], name="x.csv")
    assert [r["tags"] for r in got] == [["D", "N", "V"], ["D", "N", "V"]]
