"""The user's own data files: the ``table`` source for every head and
``parallel_text`` for the encoder-decoder, read with the ``csv`` / ``json`` modules.

Each (source, head) pair trains one tiny epoch (units 8, a dozen examples) from a file the test
writes and answers a new input; the vocabularies and label lists the runs save are checked
against the ones worked out by hand from the training rows (contiguous split: the first rows
train). The error tests read the files only (no model).
"""

from __future__ import annotations

import json
import os

import pytest

from seqkit.errors import DataError, RecipeError

BOM = "\ufeff"
SPECIALS = ["", "[UNK]", "<s>", "</s>"]


def recipe(data: dict, head: str, **head_keys) -> dict:
    """A tiny recipe: 12 examples split 6 / 3 / 3 (contiguous, asked for: labelled examples would
    be shuffled by default), 1 epoch, 8 units."""
    return {"name": "mine", "seed": 5,
            "data": {"max_length": 24, "split": {"valid": 0.25, "test": 0.25, "shuffle": False}, **data},
            "model": {"cell": "gru", "units": 8, "embedding_dim": 4},
            "head": {"type": head, **head_keys},
            "training": {"epochs": 1, "batch_size": 6, "early_stopping": None},
            "decoding": {"max_length": 6, "beam_width": 2}}


def train(tmp, raw):
    import seqkit

    return seqkit.train(seqkit.Recipe.from_dict(raw, base_dir=str(tmp)), str(tmp / "runs" / "r"))


def saved(run, name):
    with open(os.path.join(run.path, name), encoding="utf-8") as f:
        return json.load(f)


def load(tmp, raw):
    """The source's ``load()`` for a recipe dict (files relative to ``tmp``)."""
    import seqkit
    from seqkit.registry import DATA

    r = seqkit.Recipe.from_dict(raw, base_dir=str(tmp))
    return DATA.get(r.data.source)(r.data_options, r).load()


# ---------------------------------------------------------------- one tiny run per (source, head)


@pytest.fixture(scope="module")
def acceptor_csv(tmp_path_factory, keras):
    """A CSV with a byte-order mark, commas and line breaks inside quoted fields."""
    d = tmp_path_factory.mktemp("acc")
    rows = "".join('"good, fine",pos,1\n"bad\nawful",neg,2\n' for _ in range(6))
    (d / "reviews.csv").write_text(BOM + "review,stars,id\n" + rows, encoding="utf-8")
    raw = recipe({"source": "table", "path": "reviews.csv", "text_column": "review",
                  "label_column": "stars", "tokenizer": "whitespace"}, "acceptor")
    return train(d, raw)


def test_table_acceptor_trains_from_csv_and_predicts(acceptor_csv):
    run = acceptor_csv
    assert run.metrics["examples"] == {"train": 6, "valid": 3, "test": 3}
    # "good, fine" is one field (tokens 'good,' 'fine'), "bad\nawful" another ('bad' 'awful')
    assert saved(run, "vocab.json") == SPECIALS + ["good,", "fine", "bad", "awful"]
    assert saved(run, "labels.json") == ["pos", "neg"]  # 3 each in training: first seen first
    out = run.predict(["good, fine", "bad awful"])
    assert [o["where"] for o in out] == ["<input>:1", "<input>:2"]
    for o in out:
        assert set(o["probabilities"]) == {"pos", "neg"}
        assert sum(o["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
        assert o["label"] == max(o["probabilities"], key=o["probabilities"].get)


@pytest.fixture(scope="module")
def tagger_jsonl(tmp_path_factory, keras):
    """JSON lines; tokens and tags as JSON lists and as space-separated strings."""
    d = tmp_path_factory.mktemp("tag")
    rows = []
    for _ in range(6):
        rows.append({"words": ["the", "cat"], "pos": ["DT", "NN"]})
        rows.append({"words": "a dog runs", "pos": "DT NN VB"})
    (d / "pos.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    raw = recipe({"source": "table", "path": "pos.jsonl", "tokens_column": "words",
                  "tags_column": "pos"}, "tagger")
    return train(d, raw)


def test_table_tagger_trains_from_jsonl_and_tags(tagger_jsonl):
    run = tagger_jsonl
    assert run.metrics["examples"] == {"train": 6, "valid": 3, "test": 3}
    # training rows: 3 x (the cat) + 3 x (a dog runs): DT 6, NN 6, VB 3
    assert saved(run, "labels.json") == ["DT", "NN", "VB"]
    assert saved(run, "vocab.json") == SPECIALS + ["the", "cat", "a", "dog", "runs"]
    [out] = run.predict("the dog runs\n")  # pre-split tokens: a line is split at white space
    assert out["tokens"] == ["the", "dog", "runs"] and len(out["tags"]) == 3
    assert set(out["tags"]) <= {"DT", "NN", "VB"}


@pytest.fixture(scope="module")
def lm_tsv(tmp_path_factory, keras):
    d = tmp_path_factory.mktemp("lm")
    (d / "lines.tsv").write_text("id\ttext\n" + "".join(f"{i}\t{'ab' * (1 + i % 3)}a\n" for i in range(12)),
                                 encoding="utf-8")
    return train(d, recipe({"source": "table", "path": "lines.tsv"}, "language_model"))


def test_table_language_model_trains_from_tsv_and_generates(lm_tsv):
    run = lm_tsv
    assert run.metrics["examples"] == {"train": 6, "valid": 3, "test": 3}
    # training lines aba, ababa, abababa (twice each): a 12, b 6 (char tokenizer)
    assert saved(run, "vocab.json") == SPECIALS + ["a", "b"]
    [text] = run.generate("ab", max_length=5, seed=3)  # the prompt and at most 5 more characters
    assert text.startswith("ab") and len(text) <= 7 and set(text) <= {"a", "b"}


@pytest.fixture(scope="module")
def seq2seq_csv(tmp_path_factory, keras):
    d = tmp_path_factory.mktemp("s2s")
    pairs = [("ab", "A B"), ("ba", "B A"), ("abb", "A B B")] * 4
    (d / "pairs.csv").write_text("source,target\n" + "".join(f"{s},{t}\n" for s, t in pairs),
                                 encoding="utf-8")
    raw = recipe({"source": "table", "path": "pairs.csv", "target_tokenizer": "whitespace"}, "seq2seq")
    return train(d, raw)


def test_table_seq2seq_trains_from_csv_and_transduces(seq2seq_csv):
    run = seq2seq_csv
    assert run.metrics["examples"] == {"train": 6, "valid": 3, "test": 3}
    # source side: data.tokenizer char; target side: white space -- two vocabularies
    assert saved(run, "vocab.json") == SPECIALS + ["b", "a"]  # b 8, a 6 in ab ba abb ab ba abb
    assert saved(run, "target_vocab.json") == SPECIALS + ["B", "A"]
    [res] = run.transduce(["bab"], n_best=2)
    assert len(res["hypotheses"]) == 2
    assert res["hypotheses"][0]["score"] >= res["hypotheses"][1]["score"]
    for h in res["hypotheses"]:
        assert set(h["output"]) <= {"A", "B", "[UNK]"}


@pytest.fixture(scope="module")
def parallel_files(tmp_path_factory, keras):
    """Aligned files: white-space source words, character targets (per-side tokenizers)."""
    d = tmp_path_factory.mktemp("par")
    pairs = [("one two", "xy"), ("two one", "yx"), ("one", "x")] * 4
    (d / "train.src").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (d / "train.tgt").write_text("".join(t + "\r\n" for _, t in pairs) + "\n\n", encoding="utf-8")
    raw = recipe({"source": "parallel_text", "source_path": "train.src", "target_path": "train.tgt",
                  "tokenizer": "whitespace", "target_tokenizer": "char"}, "seq2seq")
    return train(d, raw)


def test_parallel_text_trains_from_aligned_files_and_predicts(parallel_files):
    run = parallel_files
    assert run.metrics["examples"] == {"train": 6, "valid": 3, "test": 3}
    assert saved(run, "vocab.json") == SPECIALS + ["one", "two"]  # one 6, two 4
    assert saved(run, "target_vocab.json") == SPECIALS + ["x", "y"]  # x 6, y 4
    [res] = run.predict("two two one\n")  # a seq2seq run's predict is transduce
    assert res["input"] == "two two one" and len(res["hypotheses"]) == 1
    assert set(res["hypotheses"][0]["output"]) <= {"x", "y", "[UNK]"}


# ---------------------------------------------------------------- parallel_text: files and errors


def write(tmp, name, text):
    (tmp / name).write_text(text, encoding="utf-8")
    return name


def par(**data):
    return recipe({"source": "parallel_text", "target_tokenizer": "whitespace", **data}, "seq2seq")


def test_parallel_text_per_split_files_and_a_jsonl_table(tmp_path):
    write(tmp_path, "tr.src", "ab\nba\nabab\nbaba\n")
    write(tmp_path, "tr.tgt", "A B\nB A\nA B A B\nB A B A\n")
    write(tmp_path, "va.src", "aab\n")
    write(tmp_path, "va.tgt", "A A B\n")
    got = load(tmp_path, par(train_source_path="tr.src", train_target_path="tr.tgt",
                             valid_source_path="va.src", valid_target_path="va.tgt"))
    assert sorted(got) == ["train", "valid"]
    assert [(r.text, r.target) for r in got["valid"]] == [("aab", ["A", "A", "B"])]
    assert got["train"][2].text == "abab" and got["train"][2].where == f"{tmp_path}/tr.src:3"

    from seqkit.data.split import assemble_splits  # test is carved from train (data.split.test)

    splits = assemble_splits(got, 0.25, 0.25, shuffle=False, seed=0)
    assert [len(splits[k]) for k in ("train", "valid", "test")] == [3, 1, 1]

    rows = [{"en": "the cat", "de": "die Katze", "n": 1}, {"en": "a dog", "de": "ein Hund", "n": 2}]
    write(tmp_path, "p.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    got = load(tmp_path, par(path="p.jsonl", source_column="en", target_column="de"))
    assert [(r.text, r.target) for r in got["all"]] == [("the cat", ["die", "Katze"]),
                                                         ("a dog", ["ein", "Hund"])]


def test_parallel_text_line_count_mismatch_names_the_first_line_without_a_partner(tmp_path):
    write(tmp_path, "a.src", "ab\nba\nabb\n")
    write(tmp_path, "a.tgt", "A B\nB A\n\n\n")  # trailing blank lines are not lines
    with pytest.raises(DataError, match=r"a\.src:3: .*a\.src has 3 lines but .*a\.tgt has 2"):
        load(tmp_path, par(source_path="a.src", target_path="a.tgt"))


def test_parallel_text_empty_target_line_names_the_target_file_and_line(tmp_path):
    write(tmp_path, "b.src", "ab\nba\n\nabb\n")  # line 3 blank in both files: skipped
    write(tmp_path, "b.tgt", "A B\nB A\n\n  \n")
    with pytest.raises(DataError, match=r"b\.tgt:4: empty target"):
        load(tmp_path, par(source_path="b.src", target_path="b.tgt"))


def test_parallel_text_over_long_pair_names_the_side_and_line_or_is_skipped(tmp_path):
    write(tmp_path, "c.src", "ab\nabcdef\nab\n")
    write(tmp_path, "c.tgt", "A\nA\nA B C D E\n")
    raw = par(source_path="c.src", target_path="c.tgt", max_length=5)
    with pytest.raises(DataError, match=r"c\.src:2: the source has 6 symbols, more than "
                                        r"data\.max_length = 5"):
        load(tmp_path, raw)
    write(tmp_path, "c.src", "ab\nabcde\nab\n")  # 5 source symbols fit; 5 target symbols + </s> do not
    with pytest.raises(DataError, match=r"c\.tgt:3: the target has 5 symbols, more than "
                                        r"data\.max_length - 1 = 4"):
        load(tmp_path, raw)
    raw["data"]["too_long"] = "skip"  # kept by the source, left out by the head (counted warning)
    got = load(tmp_path, raw)["all"]
    assert len(got) == 3
    from seqkit.heads.seq2seq.head import Seq2SeqHead
    import seqkit

    head = Seq2SeqHead(seqkit.Recipe.from_dict(raw, base_dir=str(tmp_path)))
    assert [r.where.rsplit(":", 1)[1] for r in head.check_records(got, "all")] == ["1", "2"]


def test_parallel_text_recipe_errors_name_the_key():
    import seqkit

    with pytest.raises(RecipeError, match=r"data\.target_path: missing; data\.source_path needs"):
        seqkit.Recipe.from_dict(par(source_path="x.src"))
    with pytest.raises(RecipeError, match=r"data\.source: parallel_text gives \(source, target\) "
                                          r"pairs for head\.type seq2seq; head\.type is 'acceptor'"):
        seqkit.Recipe.from_dict(recipe({"source": "parallel_text", "source_path": "x",
                                        "target_path": "y"}, "acceptor"))
    with pytest.raises(RecipeError, match=r"data\.path: give aligned files"):
        seqkit.Recipe.from_dict(par(source_path="x", target_path="y", path="t.csv"))
    with pytest.raises(RecipeError, match=r"data\.source_column: is for a table"):
        seqkit.Recipe.from_dict(par(source_path="x", target_path="y", source_column="en"))


# ---------------------------------------------------------------- tables: reading and errors


def test_csv_quoted_fields_bom_and_start_lines(tmp_path):
    from seqkit.data.table import read_table

    write(tmp_path, "q.csv", BOM + 'text,label\n"a, b",x\n"line one\nline two",y\n\n"say ""hi""",z\n')
    t = read_table(str(tmp_path / "q.csv"))
    assert t.columns == ["text", "label"]  # the byte-order mark is not part of 'text'
    assert [(w.rsplit(":", 1)[1], r["text"], r["label"]) for w, r in t.rows] == [
        ("2", "a, b", "x"), ("3", "line one\nline two", "y"), ("6", 'say "hi"', "z")]


def test_missing_column_names_the_column_the_file_and_the_columns(tmp_path):
    write(tmp_path, "m.csv", "review,stars\ngood,5\n")
    raw = recipe({"source": "table", "path": "m.csv", "text_column": "text",
                  "label_column": "stars"}, "acceptor")
    with pytest.raises(DataError) as exc:
        load(tmp_path, raw)
    msg = str(exc.value)
    assert "data.text_column: no column 'text'" in msg and f"{tmp_path}/m.csv" in msg
    assert "its columns are 'review', 'stars'" in msg


def test_table_row_errors_name_file_and_line(tmp_path):
    write(tmp_path, "u.csv", 'text,label\nok,a\n"never closed,b\nmore\n')
    with pytest.raises(DataError, match=r"u\.csv:3: malformed CSV"):
        load(tmp_path, recipe({"source": "table", "path": "u.csv"}, "acceptor"))
    write(tmp_path, "f.csv", "text,label\nok,a\nx,y,z\n")
    with pytest.raises(DataError, match=r"f\.csv:3: 3 fields, but the header \(.*f\.csv:1\) has 2"):
        load(tmp_path, recipe({"source": "table", "path": "f.csv"}, "acceptor"))
    write(tmp_path, "e.csv", "text,label\nok,a\nfine,\n")
    with pytest.raises(DataError, match=r"e\.csv:3: column 'label' \(data\.label_column\) is empty"):
        load(tmp_path, recipe({"source": "table", "path": "e.csv"}, "acceptor"))
    write(tmp_path, "j.jsonl", '{"text": "a"}\n{"text": \n')
    with pytest.raises(DataError, match=r"j\.jsonl:2: not JSON"):
        load(tmp_path, recipe({"source": "table", "path": "j.jsonl"}, "language_model"))
    write(tmp_path, "t.tsv", 'tokens\ttags\nthe cat\tDT NN\n["a", "b", "c"]\t["DT", "NN"]\n')
    with pytest.raises(DataError, match=r"t\.tsv:3: 3 tokens but 2 tags"):
        load(tmp_path, recipe({"source": "table", "path": "t.tsv"}, "tagger"))


def test_headerless_tsv_by_column_number_keeps_quotes_when_told(tmp_path):
    write(tmp_path, "h.tsv", 'pos\the said "hi\nneg\tno\n')
    got = load(tmp_path, recipe({"source": "table", "path": "h.tsv", "header": False, "quotes": False,
                                 "text_column": 1, "label_column": 0, "tokenizer": "whitespace"},
                                "acceptor"))["all"]
    assert [(r.tokens, r.label, r.where.rsplit(":", 1)[1]) for r in got] == [
        (["he", "said", '"hi'], "pos", "1"), (["no"], "neg", "2")]


def test_table_columns_that_do_not_fit_the_head_are_recipe_errors(tmp_path, write_recipe):
    import seqkit
    from click.testing import CliRunner

    from seqkit.cli import main

    with pytest.raises(RecipeError, match=r"data\.label_column: a language_model head reads "
                                          r"data\.text_column from a table"):
        seqkit.Recipe.from_dict(recipe({"source": "table", "path": "x.csv", "label_column": "y"},
                                       "language_model"))
    with pytest.raises(RecipeError, match=r"data\.target_tokenizer: an acceptor head reads"):
        seqkit.Recipe.from_dict(recipe({"source": "table", "path": "x.csv",
                                        "target_tokenizer": "char"}, "acceptor"))
    with pytest.raises(RecipeError, match=r"data\.text_column: data\.header is false"):
        seqkit.Recipe.from_dict(recipe({"source": "table", "path": "x.tsv", "header": False,
                                        "text_column": "review"}, "language_model"))
    # the CLI gives the same message with the recipe's file and line
    path = write_recipe(recipe({"source": "table", "path": "x.csv", "tags_column": "t"}, "acceptor"))
    res = CliRunner().invoke(main, ["validate", path])
    assert res.exit_code != 0 and "Traceback" not in res.output
    line = next(n for n, ln in enumerate(open(path), start=1) if ln.strip().startswith("tags_column"))
    assert f"recipe.yaml:{line}: data.tags_column: an acceptor head reads" in res.output


def test_parquet_table_reads_when_pandas_and_pyarrow_are_installed(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    pd.DataFrame({"source": ["ab", "ba"], "target": ["A B", "B A"]}).to_parquet(tmp_path / "p.parquet")
    got = load(tmp_path, par(path="p.parquet"))["all"]
    assert [(r.text, r.target, r.where.rsplit(" ", 1)[1]) for r in got] == [
        ("ab", ["A", "B"], "1"), ("ba", ["B", "A"], "2")]


def test_predict_splits_text_input_as_each_source_does():
    """``seqkit predict`` (and the export metadata) split a text line with data.tokenizer when the
    source tokenized raw text, at white space when it held pre-split tokens."""
    import seqkit
    from seqkit.data.base import text_tokenizer

    def mode(source, head, **data):
        return text_tokenizer(seqkit.Recipe.from_dict(recipe({"source": source, "tokenizer": "char",
                                                              **data}, head)))

    assert mode("table", "acceptor", path="x.csv") == "char"
    assert mode("table", "tagger", path="x.csv") == "whitespace"
    assert mode("tsv_text_label", "acceptor", path="x.tsv") == "char"
    assert mode("conll", "tagger", path="x.conll") == "whitespace"


def test_tsv_text_label_quotes_are_ordinary_characters():
    """parse_tsv reads through the csv module with QUOTE_NONE: a '"' opens no quoted field, the
    label is after the last tab, a byte-order mark is dropped."""
    from seqkit.data.tsv import parse_tsv

    recs = parse_tsv(BOM + 'say "hi\tthere\tpos\n"a\tneg\n', "q.tsv")
    assert [(r.tokens, r.label, r.where) for r in recs] == [
        (["say", '"hi', "there"], "pos", "q.tsv:1"), (['"a'], "neg", "q.tsv:2")]
