"""Corpora larger than memory (text_corpus, seqkit.data.lazy_corpus) and generation across lines for
stream-trained language models."""

from __future__ import annotations

import collections
import gzip
import json
import os

import numpy as np
import pytest
import yaml

from conftest import make_recipe
from seqkit.data.lazy_corpus import BoundedCounter, LazyCorpus, LazyStreamData, read_vocab_file
from seqkit.data.stream import StreamData, batchify, decode_lines, prompt_ids, token_stream
from seqkit.data.text_lines import split_lines
from seqkit.data.vocab import END_ID, START_ID, Vocabulary, tokenize
from seqkit.errors import DataError


def _corpus_files(tmp_path):
    """Three files (the middle one gzipped) of pydoc text with \\r\\n, blank and padded lines."""
    from pydoc_data.topics import topics

    texts = [topics[k] for k in list(topics)[:9]]
    paths = []
    for i in range(3):
        text = "\n".join(texts[3 * i: 3 * i + 3]) + "\r\n   \n\tlast line  "
        p = tmp_path / (f"part{i}.txt" + (".gz" if i == 1 else ""))
        with (gzip.open(p, "wt", encoding="utf-8", newline="") if i == 1 else
              open(p, "w", encoding="utf-8", newline="")) as f:
            f.write(text)
        paths.append(str(p))
    lines = []
    for i, p in enumerate(paths):
        raw = gzip.open(p, "rb").read() if i == 1 else open(p, "rb").read()
        lines += split_lines(raw.decode("utf-8"))  # what text_lines reads from each file
    return paths, lines


# ---------------------------------------------------------------- lazy layout (no TensorFlow)

def test_lazy_stream_equals_in_memory_layout_chunk_for_chunk(tmp_path):
    paths, lines = _corpus_files(tmp_path)
    corpus = LazyCorpus(paths, "char", seek_bytes=300)  # many seek points: readers enter mid-file
    assert list(corpus) == lines and len(corpus) == len(lines)
    vocab = corpus.vocabulary(max_size=50)
    ids = [vocab.encode(tokenize(x, "char")) for x in lines]
    stream = token_stream(ids)
    assert corpus.scan()["length"] == len(stream)
    assert len(corpus.scan()["seek"]) > 20
    for columns, bptt in ((5, 17), (1, 64), (7, 3)):
        ref, lazy = StreamData(batchify(stream, columns), bptt), LazyStreamData(corpus, vocab, columns, bptt)
        assert (len(lazy), lazy.tokens, lazy.batch_size) == (len(ref), ref.tokens, ref.batch_size)
        got = list(lazy)
        assert len(got) == len(ref)
        for (x, y), (gx, gy) in zip(ref, got):
            assert gx.dtype == np.int32 and (gx == x).all() and (gy == y).all()
    # training.steps_per_epoch: each pass starts where the last stopped, wrapping round (resume-exact)
    ref, lazy = StreamData(batchify(stream, 5), 17), LazyStreamData(corpus, vocab, 5, 17)
    for epoch in range(4):
        want, got = ref.epoch_chunks(epoch, 70), list(lazy.epoch_chunks(epoch, 70))
        assert len(got) == len(want) == 70
        assert all((a == c).all() and (b == d).all() for (a, b), (c, d) in zip(want, got))


def test_a_line_longer_than_the_bound_is_named_not_held(tmp_path, monkeypatch):
    """A corpus is read a line at a time: a .gz that is one enormous line (510 KB holding 512 MiB
    took 2.9 GB) is refused at the bound, naming the file and line; shorter lines read as before."""
    import seqkit.data.lazy_corpus as lc

    monkeypatch.setattr(lc, "MAX_LINE_BYTES", 100)
    p = tmp_path / "c.txt.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write("short line\n" + "x" * 99 + "\n" + "y" * 101 + "\nlast\n")
    with pytest.raises(DataError, match=r"c\.txt\.gz:3: a line longer than 100 bytes"):
        LazyCorpus([str(p)], "char").scan()
    with pytest.raises(DataError, match=r"c\.txt\.gz:3: a line longer than 100 bytes"):
        list(LazyCorpus([str(p)], "char"))
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write("short line\n" + "x" * 99 + "\nlast\n")  # the longest line, 100 bytes with its \n
    assert list(LazyCorpus([str(p)], "char")) == ["short line", "x" * 99, "last"]


def test_bounded_counter_equals_counter_build(tmp_path):
    paths, lines = _corpus_files(tmp_path)
    for mode, min_count, max_size in (("whitespace", 2, 300), ("whitespace", 1, None), ("char", 3, 40)):
        corpus = LazyCorpus(paths, mode, lowercase=True)
        want = Vocabulary.build((tokenize(x, mode, True) for x in lines), min_count=min_count, max_size=max_size)
        assert corpus.vocabulary(min_count, max_size).tokens == want.tokens
        assert corpus.scan()["counter"].pruned == 0
    # past its capacity the counter drops the rarer half; the frequent tokens keep exact counts
    c = BoundedCounter(capacity=4)
    for tokens in (["a", "a", "b"], ["c", "a", "d"], ["e", "a", "b", "f"], ["a", "g"]):
        c.update(tokens)
    assert c.pruned == 1 and sorted(c.counts) == ["a", "b", "g"]
    assert c.counts["a"] == 5 and c.vocabulary().tokens[4] == "a"


def test_vocab_file_one_per_line_and_json(tmp_path):
    p = tmp_path / "v.txt"
    p.write_text("the\n \nof\n\n</s>\n", encoding="utf-8")  # a space token; specials are put first
    assert read_vocab_file(str(p)).tokens == ["", "[UNK]", "<s>", "</s>", "the", " ", "of"]
    j = tmp_path / "vocab.json"
    j.write_text(json.dumps(["", "[UNK]", "<s>", "</s>", "x"]), encoding="utf-8")
    assert read_vocab_file(str(j)).tokens[-1] == "x"
    p.write_text("a\nb\na\n", encoding="utf-8")
    with pytest.raises(DataError, match="listed twice"):
        read_vocab_file(str(p))
    j.write_text(json.dumps(["", "[UNK]", "<s>", "</s>", "a", "a"]), encoding="utf-8")  # a run trained
    with pytest.raises(DataError, match="the token 'a' is listed twice"):  # with it could not be loaded
        read_vocab_file(str(j))
    with pytest.raises(DataError, match="data.vocab_file"):
        read_vocab_file(str(tmp_path / "missing.txt"))


def test_prompt_ids_and_decode_lines_by_hand():
    enc = lambda s: [10 + ord(c) - ord("a") for c in s]  # noqa: E731
    # complete lines lose trailing space, empty ones are skipped; the last line is kept as typed
    assert prompt_ids("ab \n\ncd\n", enc) == [START_ID, 10, 11, START_ID, 12, 13, START_ID]
    assert prompt_ids("ab\nc", enc) == [START_ID, 10, 11, START_ID, 12]
    v = Vocabulary(["", "[UNK]", "<s>", "</s>", "x", "y"])
    assert decode_lines(v, [4, 5, END_ID, 4, END_ID, 5]) == "xy\nx\ny"


# ---------------------------------------------------------------- priming and generation (TensorFlow)

def test_multiline_prompt_primes_state_as_step_by_step(tf, keras):
    from seqkit.heads.language_model.stream import prime_states
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import prepare

    prep = prepare(recipe_from_dict(make_recipe(data={"layout": "stream", "limit": 40},
                                                model={"units": 8, "embedding_dim": 6, "layers": 2})))
    model = prep.head.build_model()
    ids = prompt_ids("The for\nstatement  \n\nis", lambda s: prep.vocab.encode(tokenize(s, "char")))
    assert ids.count(START_ID) == 3
    primed = prime_states(model, ids, batch_size=2)
    stepper = prep.head.stepper(model)
    states = stepper.initial_state(1)
    for t in ids:
        _, states = stepper.step(tf.constant([t]), states)
    assert len(primed) == len(states) == 4
    for p, s in zip(primed, states):
        np.testing.assert_allclose(p.numpy(), np.repeat(s.numpy(), 2, axis=0), atol=1e-5)


@pytest.fixture(scope="module")
def stream_run(tmp_path_factory):
    """A tiny stream LM trained through text_corpus (a plain and a .gz file, a vocab file) on
    alternating lines 'abcd' / 'xyz': which line comes next depends on the line before."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    d = tmp_path_factory.mktemp("lazy")
    (d / "a.txt").write_text("abcd\nxyz\n" * 80, encoding="utf-8")
    with gzip.open(d / "b.txt.gz", "wt", encoding="utf-8") as f:
        f.write("abcd\nxyz\n" * 70)
    (d / "valid.txt").write_text("abcd\nxyz\n" * 8, encoding="utf-8")
    (d / "vocab.txt").write_text("\n".join("zyxqdcba"), encoding="utf-8")  # q never occurs
    raw = make_recipe(data={"source": "text_corpus", "train_path": [str(d / "*.txt.gz"), str(d / "a.txt")],
                            "valid_path": str(d / "valid.txt"), "vocab_file": str(d / "vocab.txt"),
                            "layout": "stream", "limit": None, "split": {"valid": 0.0, "test": 0.0}},
                      model={"units": 16, "embedding_dim": 8},
                      training={"epochs": 2, "batch_size": 4, "bptt": 16, "learning_rate": 0.05})
    metrics = train(recipe_from_dict(raw), str(d / "run"), verbose=0)
    return str(d / "run"), metrics


def test_text_corpus_run_honours_vocab_file_and_trains(stream_run):
    run, metrics = stream_run
    with open(os.path.join(run, "vocab.json"), encoding="utf-8") as f:
        assert json.load(f) == ["", "[UNK]", "<s>", "</s>", *"zyxqdcba"]
    assert metrics["examples"] == {"train": 300, "valid": 16, "test": 0}
    assert metrics["valid"]["tokens"] == 8 * 9  # one stream: every token after the leading </s> scored
    assert metrics["valid"]["bits_per_token"] < 0.5  # against log2(5 symbols) = 2.32 for a guess


def test_generation_goes_on_past_line_ends(stream_run):
    from seqkit.runs.run import Run

    run = Run(stream_run[0])
    out, = run.generate("ab", greedy=True, max_length=20)
    assert out == "abcd\nxyz\nabcd\nxyz\nabcd"  # 20 new tokens, line ends included
    # the state primed by the prompt's lines decides the next line: a line model restarts at <s>
    assert run.generate("abcd\n", greedy=True, max_length=4)[0] == "abcd\nxyz\n"
    assert run.generate("xyz\n", greedy=True, max_length=5)[0] == "xyz\nabcd\n"
    assert run.generate("abcd\nxyz\nab", greedy=True, max_length=3)[0] == "abcd\nxyz\nabcd\n"


def test_seqkit_stream_carries_state_across_lines(stream_run, tmp_path):
    """The TFLite step model of a stream run: `seqkit stream` primes across the prompt's lines and
    goes on past line ends, as `seqkit generate` does."""
    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.runs.run import Run

    out = str(tmp_path / "export")
    Run(stream_run[0]).export(out, parity_examples=4)
    with open(os.path.join(out, "metadata.json"), encoding="utf-8") as f:
        assert json.load(f)["layout"] == "stream"
    res = CliRunner().invoke(main, ["stream", out, "--prompt", "abcd\n", "--greedy", "--max-length", "9"])
    assert res.exit_code == 0, res.output
    assert res.output == "abcd\nxyz\nabcd\n\n"  # the echoed text ends with a line break, then echo's own
    res = CliRunner().invoke(main, ["stream", out, "--prompt", "ab", "--greedy", "--max-length", "7"])
    assert res.output == "abcd\nxyz\n\n"  # "ab" + 7 new tokens: "cd", </s>, "xyz", </s>


def test_lazy_spans_equal_chunk_spans():
    from seqkit.data.stream import chunk_spans

    class Fake(LazyStreamData):
        def __init__(self, length, bptt):
            self.length, self.bptt = length, bptt
            self.n_chunks = -(-(length - 1) // bptt)

    for length, bptt in ((13, 4), (13, 5), (2, 7), (65, 64), (66, 64)):
        d = Fake(length, bptt)
        assert [d.span(j) for j in range(len(d))] == chunk_spans(length, bptt)


def test_export_records_of_a_lazy_corpus_are_its_lines_drawn_as_from_a_list(tmp_path):
    from types import SimpleNamespace

    from seqkit.export.calibration import calibration_records, parity_records
    from seqkit.export.sample import write_export_sample

    paths, lines = _corpus_files(tmp_path)
    corpus = LazyCorpus(paths)
    picked = corpus.records([5, 0, 5, 2, len(lines) + 3])  # any order, repeats and past the end
    assert [(r.text, r.where) for r in picked] == [(lines[i], f"train line {i + 1}") for i in (0, 2, 5)]

    def prep(train):
        return SimpleNamespace(splits={"train": train, "valid": [], "test": []},
                               recipe=SimpleNamespace(seed=3))

    lazy = calibration_records(prep(corpus), 7)
    listed = calibration_records(prep([SimpleNamespace(text=t) for t in lines]), 7)
    assert len(lazy) == 7 and [r.text for r in lazy] == [r.text for r in listed]  # the same seeded draw
    assert [r.text for r in parity_records(prep(corpus), 4)] == lines[:4]  # no held-out file: first lines

    path = write_export_sample(prep(corpus), str(tmp_path))
    with open(path, encoding="utf-8") as f:
        sample = json.load(f)
    assert [r["text"] for r in sample["calibration"]] == [r.text for r in calibration_records(prep(corpus), 128)]
    assert [r["text"] for r in sample["parity"]] == lines[:200]


def test_evaluating_a_split_without_its_file_names_the_key_to_add(stream_run):
    import seqkit
    from seqkit.errors import SeqkitError

    with pytest.raises(SeqkitError, match=r"test split is empty \(the recipe gives no data.test_path"):
        seqkit.load(stream_run[0]).evaluate(split="test")


def test_an_export_without_held_out_data_says_its_figure_is_the_training_splits(tmp_path):
    from types import SimpleNamespace

    from seqkit.export.calibration import parity_split

    def prep(**splits):
        return SimpleNamespace(splits={"train": [1], "valid": [], "test": [], **splits})

    assert [parity_split(prep(test=[1], valid=[1])), parity_split(prep(valid=[1])), parity_split(prep())] == \
        ["test", "valid", "train"]


def test_adaptive_evaluation_reads_a_text_corpus_training_split(stream_run):
    """--cache / --mix read the training text as one stream: from a text_corpus it is the corpus's
    own encoding, id for id the stream of its lines encoded one by one; and the n-gram models,
    counted on it, beat the network alone on the alternating lines."""
    from seqkit.heads.language_model.adaptive_eval import training_stream
    from seqkit.runs.run import Run
    from seqkit.training.train import load_run

    prep, _ = load_run(stream_run[0], with_data=True)
    corpus = prep.splits["train"]
    want = token_stream([prep.head.vocab.encode(list(line)) for line in corpus])
    np.testing.assert_array_equal(training_stream(prep.head, corpus), want)
    assert len(want) == 1 + 150 * 5 + 150 * 4  # </s>, then 150 "abcd</s>" and 150 "xyz</s>"
    res = Run(stream_run[0]).evaluate("valid", cache=True, mix=True)
    assert res["static+cache+ngram"]["bits_per_token"] < res["static"]["bits_per_token"]
