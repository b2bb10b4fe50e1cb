"""Data sources, splits, vocabulary and the tf.data pipeline on small files the test writes."""

import numpy as np
import pytest

from seqkit.data.split import split_examples
from seqkit.data.vocab import SPECIALS, Vocabulary, tokenize
from seqkit.errors import DataError


def test_contiguous_and_seeded_shuffled_splits():
    xs = list(range(100))
    s = split_examples(xs, 0.1, 0.2, shuffle=False, seed=0)
    assert s["train"] == list(range(70)) and s["valid"] == list(range(70, 80)) and s["test"] == list(range(80, 100))
    a = split_examples(xs, 0.1, 0.2, shuffle=True, seed=5)
    b = split_examples(xs, 0.1, 0.2, shuffle=True, seed=5)
    assert a == b and a["train"] != s["train"]
    assert sorted(a["train"] + a["valid"] + a["test"]) == xs


def test_labelled_examples_are_shuffled_before_splitting_by_default(caplog):
    """data.split.shuffle's default (null): a label-sorted list is shuffled with the seed (the
    split is the shuffle: true one, every class reaches valid and test, no warning); examples
    without a class label keep contiguous blocks (the shuffle: false split)."""
    import logging

    from seqkit.data.records import Record
    from seqkit.data.split import assemble_splits, default_shuffle
    from seqkit.recipe import SplitConfig

    assert SplitConfig().shuffle is None
    labelled = [Record(tokens=[str(i)], label=lab) for i, lab in enumerate("a" * 20 + "b" * 20 + "c" * 20)]
    with caplog.at_level(logging.WARNING, logger="seqkit"):
        auto = assemble_splits({"all": labelled}, 0.25, 0.25, shuffle=None, seed=3)
    assert not caplog.records
    assert auto == assemble_splits({"all": labelled}, 0.25, 0.25, shuffle=True, seed=3)
    assert {r.label for r in auto["valid"]} == {r.label for r in auto["test"]} == {"a", "b", "c"}
    contiguous = assemble_splits({"all": labelled}, 0.25, 0.25, shuffle=False, seed=3)
    assert {r.label for r in contiguous["test"]} == {"c"}  # what the default no longer does
    # a carved valid split (the files give train and test) is shuffled too; given splits stay as given
    given_test = labelled[:5]
    carved = assemble_splits({"train": labelled, "test": given_test}, 0.25, 0.25, shuffle=None, seed=3)
    assert carved["test"] == given_test and {r.label for r in carved["valid"]} == {"a", "b", "c"}

    text = [Record(text=f"line {i}") for i in range(20)]
    assert not default_shuffle({"all": text}) and default_shuffle({"train": text[:1] + labelled[:1]})
    split = assemble_splits({"all": text}, 0.1, 0.1, shuffle=None, seed=3)
    assert split["train"] == text[:16] and split["valid"] == text[16:18] and split["test"] == text[18:]


def test_a_label_sorted_csv_reaches_every_class_with_the_default_split(tmp_path, caplog):
    """The recipe's default goes through prepare(): a CSV sorted by label, no data.split.shuffle
    key, gives valid and test every class; shuffle: false (asked for) warns naming the classes."""
    import logging

    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import prepare

    rows = "".join(f"word{i} other{i % 7},{lab}\n" for i, lab in enumerate(["neg"] * 30 + ["pos"] * 30))
    (tmp_path / "sorted.csv").write_text("text,label\n" + rows, encoding="utf-8")

    def recipe(split):
        return recipe_from_dict({"name": "sorted", "data": {
            "source": "table", "path": str(tmp_path / "sorted.csv"), "tokenizer": "whitespace", "split": split},
            "model": {"units": 4, "embedding_dim": 4}, "head": {"type": "acceptor"}})

    with caplog.at_level(logging.WARNING, logger="seqkit"):
        prep = prepare(recipe({"valid": 0.2, "test": 0.2}))
    assert not caplog.records
    assert {r.label for r in prep.splits["valid"]} == {r.label for r in prep.splits["test"]} == {"neg", "pos"}
    with caplog.at_level(logging.WARNING, logger="seqkit"):
        prep = prepare(recipe({"valid": 0.2, "test": 0.2, "shuffle": False}))
    assert {r.label for r in prep.splits["test"]} == {"pos"}
    assert any("has no example of 1 of the 2 classes in train ('neg')" in r.getMessage() for r in caplog.records)


def test_split_errors():
    with pytest.raises(DataError, match="valid .* test .* below 1"):
        split_examples([1, 2], 0.5, 0.5, shuffle=False, seed=0)
    with pytest.raises(DataError, match="data.split.valid: 0.01 of 3 examples is none"):
        split_examples([1, 2, 3], 0.01, 0.0, shuffle=False, seed=0)


def test_vocabulary_ids_frequency_order_and_round_trip(tmp_path):
    v = Vocabulary.build([tokenize("abca", "char"), tokenize("cab c", "char")], min_count=2)
    assert v.tokens[:4] == list(SPECIALS)
    assert v.tokens[4:] == ["a", "c", "b"]  # a:3, c:3 (first seen before b), b:2; ' ' seen once is dropped
    assert v.encode(list("ab z")) == [4, 6, 1, 1]
    assert v.decode([4, 6, 3, 5]) == "ab"
    p = tmp_path / "vocab.json"
    v.save(str(p))
    assert Vocabulary.load(str(p)).tokens == v.tokens
    lookup = v.string_lookup()
    assert lookup(np.array(["a", "b", "z", ""])).numpy().tolist() == [4, 6, 1, 0]


def test_whitespace_tokenizer_and_lowercase():
    assert tokenize("The  cat\tsat", "whitespace", lowercase=True) == ["the", "cat", "sat"]


def lm_pairs(ids):
    """The language model's training view of a ragged batch (what its head passes)."""
    from seqkit.data.markers import add_markers
    from seqkit.heads.language_model.head import teacher_forcing_pair

    return teacher_forcing_pair(add_markers(ids, end=3))


def test_pipeline_pads_per_batch_and_matches_python_encoding(tf):
    from seqkit.data.pipeline import make_dataset

    v = Vocabulary.build([list("abcde")])
    ds = make_dataset(["ab", "abcde", "e"], v, lm_pairs, tokenizer="char", lowercase=False,
                      batch_size=8, max_length=16, shuffle=False, seed=0, bucket=False)
    (x, y), = list(ds)
    ids = v.encode(list("abcde"))
    assert x.numpy().tolist()[1] == [2] + ids
    assert y.numpy().tolist()[1] == ids + [3]
    assert x.numpy().tolist()[2] == [2, ids[4], 0, 0, 0, 0]  # padded to the batch's longest row
    assert y.numpy().tolist()[0] == ids[:2] + [3, 0, 0, 0]


def test_whitespace_tokens_in_the_pipeline_are_str_split_ones(tf):
    """The vocabulary, the n-gram baselines and generate's prompt split with ``str.split()``; the
    training pipeline split on ASCII whitespace only, so "a<no-break space>b" was one unknown token
    in training and two known ones everywhere else."""
    import sys

    from seqkit.data.pipeline import make_dataset

    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    lines = [f"x{s}y{s}{s}z" for s in spaces] + ["x\u00a0\u3000y\u2009z x"]
    v = Vocabulary.build([tokenize(ln, "whitespace") for ln in lines])
    assert len(v) == 4 + 3
    ds = make_dataset(lines, v, lm_pairs, tokenizer="whitespace", lowercase=False, batch_size=len(lines),
                      max_length=16, shuffle=False, seed=0, bucket=False)
    (_, y), = list(ds)
    for row, ln in zip(y.numpy().tolist(), lines):
        ids = v.encode(tokenize(ln, "whitespace")) + [3]
        assert row[:len(ids)] == ids and not any(row[len(ids):])


def test_bucketing_groups_similar_lengths(tf):
    from seqkit.data.pipeline import make_dataset

    lines = ["a" * n for n in [3, 40, 4, 41, 5, 42, 3, 44]]
    v = Vocabulary.build([["a"]])
    ds = make_dataset(lines, v, lm_pairs, tokenizer="char",
                      lowercase=False, batch_size=4, max_length=64, shuffle=False, seed=0, bucket=True)
    widths = sorted(int(x.shape[1]) for x, _ in ds)
    assert widths == [6, 45]  # short lines padded only to 6, long ones to 45
    total = sum(int(tf.reduce_sum(tf.cast(y > 0, tf.int32))) for _, y in ds)
    assert total == sum(n + 1 for n in [3, 40, 4, 41, 5, 42, 3, 44])


def test_text_lines_source_errors(tmp_path):
    from seqkit.data.text_lines import TextLines

    src = lambda p: TextLines(TextLines.Options(path=str(p)))  # noqa: E731
    with pytest.raises(DataError, match="no such file"):
        src(tmp_path / "missing.txt").examples()
    with pytest.raises(DataError, match="is a folder, not a file"):
        src(tmp_path).examples()
    for device in ("/dev/null", "/dev/zero"):  # /dev/zero would be read without end
        with pytest.raises(DataError, match=f"data.path: '{device}' is a device or a pipe, not a file"):
            src(device).examples()
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    with pytest.raises(DataError, match="no non-empty lines"):
        src(empty).examples()
    old_mac = tmp_path / "cr.txt"  # CR-only line ends: the whole file was read as one line
    old_mac.write_bytes(b"one\rtwo\rthree\r")
    with pytest.raises(DataError, match=r"cr.txt: its lines end in a carriage return alone"):
        src(old_mac).examples()
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"fine line\nsecond\ncaf\xe9\n")
    with pytest.raises(DataError, match=r"latin1.txt:3: not UTF-8 \(byte 0xe9"):
        src(bad).examples()
    good = tmp_path / "good.txt"
    good.write_text("one\r\n\r\ntwo  \n")
    assert src(good).examples() == ["one", "two"]


def test_pydoc_topics_is_real_text():
    from seqkit.data.text_lines import PydocTopics

    lines = PydocTopics(PydocTopics.Options()).examples()
    assert len(lines) > 5000 and sum(map(len, lines)) > 400_000
    assert all(line.strip() for line in lines)


def test_chunk_long_counts_and_splits():
    from seqkit.heads.language_model.head import chunk_long

    out, n = chunk_long(["abcdefg", "ab"], 3, "char")
    assert (out, n) == (["abc", "def", "g", "ab"], 1)
    out, n = chunk_long(["a b c d", "e"], 3, "whitespace")
    assert (out, n) == (["a b c", "d", "e"], 1)


def test_epoch_batches_advance_only_on_full_passes(tf):
    from seqkit.data.shuffle import epoch_batches

    ds = epoch_batches([1] * 50, 4, shuffle=True, seed=3)
    read = lambda d: [int(i) for b in d.as_numpy_iterator() for i in b]  # noqa: E731
    next(iter(ds))  # a partial pass (what Keras's symbolic build under a strategy does)
    e0, e1 = read(ds), read(ds)
    assert sorted(e0) == list(range(50)) and e0 != e1 and e0 != sorted(e0)
    assert read(epoch_batches([1] * 50, 4, shuffle=True, seed=3)) == e0  # same seed, same first epoch
    # a resumed run sees epoch 1's order
    assert read(epoch_batches([1] * 50, 4, shuffle=True, seed=3, first_epoch=1)) == e1
    assert [len(b) for b in ds.as_numpy_iterator()] == [4] * 12 + [2]


def test_a_partial_read_leaves_the_pass_unread_however_far_the_pipeline_reads_ahead(tf):
    """Keras reads one batch to build a model under a strategy. The gather + pad map runs ahead of
    its consumer (up to one call per core), and a pass shorter than that read-ahead was counted as
    read: the run then skipped epoch 0's order (the 16-thread pool is what a 16-core machine has)."""
    import time

    from seqkit.data.pipeline import make_array_dataset

    def make():  # 6 batches of 4 a pass
        ds = make_array_dataset([np.full(3, i + 1, np.int32) for i in range(24)], list(range(24)), batch_size=4,
                                shuffle=True, seed=3, bucket=True, max_length=16)
        opts = tf.data.Options()
        opts.threading.private_threadpool_size = 16
        return ds.with_options(opts)

    read = lambda d: [int(v) for _, y in d for v in y.numpy()]  # noqa: E731
    ref = make()
    e0, e1 = read(ref), read(ref)
    assert sorted(e0) == list(range(24)) and e0 != e1
    ds = make()
    it = iter(ds)
    assert next(it)[1].numpy().tolist() == e0[:4]
    time.sleep(0.3)  # the read-ahead runs to the end of the pass meanwhile
    del it
    assert read(ds) == e0 and read(ds) == e1


def test_steps_per_epoch_reads_passes_back_to_back_and_resumes_in_place(tf):
    """With ``steps_per_epoch`` the batches are passes 0, 1, 2, ... end to end (each pass its
    epoch's permutation), and epoch ``e`` starts ``e * steps_per_epoch`` batches into that stream."""
    from itertools import islice

    from seqkit.data.shuffle import epoch_batches

    lengths = [1] * 10  # 3 batches a pass: 4 + 4 + 2
    passes = [[int(i) for b in epoch_batches(lengths, 4, shuffle=True, seed=5, first_epoch=k).as_numpy_iterator()
               for i in b] for k in range(3)]
    stream = lambda e: [b.tolist() for b in islice(  # noqa: E731
        epoch_batches(lengths, 4, shuffle=True, seed=5, first_epoch=e, steps_per_epoch=2).as_numpy_iterator(), 4)]
    flat = [i for b in stream(0) for i in b] + [i for b in stream(2) for i in b]
    assert flat[:10] == passes[0] and flat[10:20] == passes[1]  # epochs 0-1, then 2-3 on resume
    assert stream(1) == stream(0)[2:] + stream(2)[:2]  # an epoch boundary inside a pass
    assert [len(b) for b in stream(0)] == [4, 4, 2, 4]


@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_batch_plan_equals_tf_data_bucket_by_sequence_length(tf, batch_size):
    """The numpy plan yields the very batches ``Dataset.bucket_by_sequence_length`` yields from
    the same order: same members, same order inside, same order of batches (full ones as they
    fill, partial ones at the end by bucket)."""
    from seqkit.data.pipeline import bucket_boundaries
    from seqkit.data.shuffle import batch_plan

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 61, size=203)
    order = rng.permutation(203)
    bounds = bucket_boundaries(60)
    flat, splits = batch_plan(order, lengths, batch_size, bounds)
    ours = [flat[a:b].tolist() for a, b in zip(splits[:-1], splits[1:])]
    ref = tf.data.Dataset.from_tensor_slices(order).bucket_by_sequence_length(
        element_length_func=lambda i: tf.gather(tf.constant(lengths, tf.int32), i), bucket_boundaries=bounds,
        bucket_batch_sizes=[batch_size] * (len(bounds) + 1))
    assert ours == [b.tolist() for b in ref.as_numpy_iterator()]
    if batch_size > 1:  # the end-of-pass partial batches (several buckets) are exercised too
        assert sum(len(b) < batch_size for b in ours) >= 3


def test_lm_to_pairs_vectorized_equals_to_pair_per_line(tf):
    """The head's batched training view equals its per-line one, for the stock head and for a
    subclass that overrides only ``to_pair`` (mapped over the lines)."""
    from seqkit.heads.language_model.head import LanguageModelHead

    class Reverse(LanguageModelHead):
        def to_pair(self, ids):
            return super().to_pair(tf.reverse(tf.cast(ids, tf.int32), [0]))

    lines = [[4, 8, 9], [], [5]]
    rt = tf.ragged.constant(lines, dtype=tf.int32)
    stock, rev = object.__new__(LanguageModelHead), object.__new__(Reverse)  # to_pair needs no recipe
    for head in (stock, rev):
        x, y = head.to_pairs(rt)
        for i, line in enumerate(lines):
            px, py = head.to_pair(tf.constant(line, tf.int32))
            assert x[i].numpy().tolist() == px.numpy().tolist() and y[i].numpy().tolist() == py.numpy().tolist()
    assert rev.to_pairs(rt)[0][0].numpy().tolist() == [2, 9, 8, 4]
    assert stock.to_pairs(rt)[1][1].numpy().tolist() == [3]  # an empty line: </s>


def test_pair_dataset_teacher_forcing_batches_by_hand(tf):
    """Two pairs, unshuffled: sources and targets padded with 0, ``<s>`` (2) before and ``</s>``
    (3) after each target."""
    from seqkit.heads.seq2seq.decoding import make_pair_dataset

    ds = make_pair_dataset([[5, 6, 7], []], [[9], [8, 10]], batch_size=2, shuffle=False, seed=0,
                           bucket=False, max_length=8)
    (src, dec_in), tgt = next(iter(ds))
    assert src.numpy().tolist() == [[5, 6, 7], [0, 0, 0]]
    assert dec_in.numpy().tolist() == [[2, 9, 0], [2, 8, 10]]
    assert tgt.numpy().tolist() == [[9, 3, 0], [8, 10, 3]]


def test_group_split_keeps_groups_whole_and_counts_groups():
    from seqkit.data.records import Record
    from seqkit.data.split import split_examples

    recs = [Record(text=f"w{i // 2}", group=f"w{i // 2}") for i in range(40)]  # 20 words, 2 each
    parts = split_examples(recs, 0.1, 0.2, shuffle=True, seed=4)
    groups = {k: {r.group for r in v} for k, v in parts.items()}
    assert [len(groups[k]) for k in ("train", "valid", "test")] == [14, 2, 4]
    assert [len(parts[k]) for k in ("train", "valid", "test")] == [28, 4, 8]
    assert not (groups["train"] & groups["test"]) and not (groups["valid"] & groups["test"])
