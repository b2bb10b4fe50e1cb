"""The line-oriented tagged and labelled sources (``tsv_text_label``, ``word_tag``, ``conll``) at the
data boundary: a malformed line is one DataError naming the file, the line and the fix; a label or
tag never holds a character that breaks line-oriented output; a line is what ``\\n`` ends (a
``\\r`` or U+2028 inside it does not make two examples). Bad files written here, then generated
ones (Hypothesis): every reader either returns records that satisfy the rules or raises a
SeqkitError, and well-formed files read back exactly what was written."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from hypothesis import strategies as st

from seqkit.data.conll import parse_conll
from seqkit.data.lines import split_lines
from seqkit.data.tsv import parse_tsv
from seqkit.data.typed import LINE_BREAKING
from seqkit.data.word_tag import parse_word_tag
from seqkit.errors import DataError, SeqkitError
from tests.test_hostile_inputs import PROFILES, run_property

# ---------------------------------------------------------------- bad files, one by one


@pytest.mark.parametrize("text, line, words", [
    ("good text\tpos\nno tab here\n", 2, "no tab in this line; tsv_text_label reads one example a line as "
                                         "text<TAB>label. Separate the label from the text with a tab"),
    ("a\tpos\n\nb c\t \n", 3, "empty label (after the last tab); every line is text<TAB>label. Write the "
                              "line's class after the last tab, or remove the line."),
    ("a\tpos\n  \tneg\n", 2, "empty text (an empty sequence); every line is text<TAB>label. Write the line's text"),
    ("a\tpos\nb\tne\u2028g\n", 2, "the label (after the last tab) 'ne\\u2028g' holds the character U+2028"),
    ("a\tpos\nb\tne\x0bg\n", 2, "holds the character U+000B, which breaks seqkit's line-per-input output"),
    ("a\tpos\nb\tne\x85g\n", 2, "holds the character U+0085"),
])
def test_tsv_bad_line_names_file_line_and_fix(text, line, words):
    with pytest.raises(DataError) as err:
        parse_tsv(text, "reviews.tsv")
    msg = str(err.value)
    assert msg.startswith(f"reviews.tsv:{line}: ") and words in msg and "\n" not in msg


def test_tsv_label_first_says_where_the_label_is():
    with pytest.raises(DataError, match=r"^r.tsv:1: empty label \(before the first tab\); every line is "
                                        r"label<TAB>text \(data.label_first: true\)"):
        parse_tsv(" \tsome text\n", "r.tsv", label_first=True)
    with pytest.raises(DataError, match=r"^r.tsv:1: the label \(before the first tab\) 'p\\x1cos' holds the "
                                        r"character U\+001C"):
        parse_tsv("p\x1cos\tsome text\n", "r.tsv", label_first=True)


def test_tsv_a_line_ends_at_newline_only():
    """A bare CR inside a line (a file saved by an old Mac tool) does not make two examples with
    shifted line numbers: the line is one example and the next line is line 2."""
    recs = parse_tsv("a b\tpos\rc d\tneg\ne\tpos\r\n", "r.tsv")
    assert [(r.tokens, r.label, r.where) for r in recs] == [
        (["a", "b", "pos", "c", "d"], "neg", "r.tsv:1"), (["e"], "pos", "r.tsv:2")]


def test_word_tag_bad_token_names_file_line_and_fix():
    with pytest.raises(DataError, match=r"^pd.txt:3: token 'b/' is not word/TAG \(a word, a '/', a tag\); "
                                        r"fix the line or remove it\.$"):
        parse_word_tag("a/N b/V\n\nc/N b/\n", "pd.txt")
    with pytest.raises(DataError, match=r"^pd.txt:1: token '/N' is not word/TAG"):
        parse_word_tag("/N\n", "pd.txt")


def test_conll_tag_with_a_line_break_character_names_its_line():
    """With a separator, a column may hold U+0085 or U+2028 (white space cannot: it ends the
    column); the message names the token's own line, not the sentence's first."""
    text = "a\tB\nb\tO\n\nc\tO\nd\tI\x85J\n"
    with pytest.raises(DataError, match=r"^x.conll:5: the tag \(column 1\) 'I\\x85J' holds the character U\+0085"):
        parse_conll(text, "x.conll", separator="\t")
    # the same characters inside a token are text, not a tag: accepted
    assert parse_conll("a\u2028b\tB\n", "x.conll", separator="\t")[0].tokens == ["a\u2028b"]


def test_conll_carriage_return_inside_a_column_is_refused_with_its_line():
    """With a tab separator a bare CR stays inside a column, where the CoNLL parser would end the
    line (a ValueError from inside it before): one DataError naming the line and the fix."""
    with pytest.raises(DataError, match=r"^x.conll:2: a carriage return \(\\r\) inside the line, in a column; "
                                        r".*Remove it, e\.g\. `tr -d '\\r' < x.conll > fixed.conll`\.$"):
        parse_conll("a\tB\nb\tO\rx\n", "x.conll", separator="\t")
    # with white space between columns a CR is white space: here a third column, named as such
    with pytest.raises(DataError, match=r"^x.conll:2: 3 columns, but the file's first token line has 2"):
        parse_conll("a B\nb O\rx\n", "x.conll")
    assert [r.tags for r in parse_conll("a B\r\nb O\r\n", "x.conll")] == [["B", "O"]]  # CRLF file


def test_conll_columns_name_the_file_and_the_fix():
    with pytest.raises(DataError, match=r"^data.tag_column: column 2 does not exist; x.conll has 2 columns "
                                        r"\(0 to 1, or -1 for the last\)\. Give a column of the file\.$"):
        parse_conll("a B\nb O\n", "x.conll", tag_column=2)
    with pytest.raises(DataError, match=r"data.token_column \(1\) and data.tag_column \(-1\) are the same "
                                        r"column \(1 of x.conll's 2\): the tags would be the tokens\. Give "
                                        r"two different columns"):
        parse_conll("a B\nb O\n", "x.conll", token_column=1, tag_column=-1)
    with pytest.raises(DataError, match=r"^x.conll:2: 1 columns, but the file's first token line has 2"):
        parse_conll("a B\nb\n", "x.conll")


def test_cli_refuses_a_bad_label_line_with_one_paragraph(tmp_path):
    from seqkit.cli import main

    (tmp_path / "labels.tsv").write_text("good one\tpos\nbad one\tneg\u2029x\nmore\tneg\n", encoding="utf-8")
    (tmp_path / "r.yaml").write_text(
        "data: {source: tsv_text_label, path: labels.tsv, tokenizer: whitespace, split: {valid: 0.0, test: 0.0}}\n"
        "model: {units: 4, embedding_dim: 4}\nhead: {type: acceptor}\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["validate", str(tmp_path / "r.yaml")])
    assert res.exit_code != 0
    assert "labels.tsv:2: the label (after the last tab) 'neg\\u2029x' holds the character U+2029" in res.output
    assert "Traceback" not in res.output and "internal error" not in res.output


# ---------------------------------------------------------------- generated files (Hypothesis)

HOSTILE = list("ab/ \t\r\n\"é") + ["\u2028", "\x85", "\x0b", "\x1c", "\x00", "\ufeff"]


def hostile_text(max_size=80):
    return st.text(alphabet=st.sampled_from(HOSTILE), max_size=max_size)


def line_number(where: str, path: str, text: str) -> int:
    m = re.fullmatch(re.escape(path) + r":(\d+)", where)
    assert m, where
    n = int(m.group(1))
    assert 1 <= n <= len(split_lines(text))
    return n


@pytest.mark.parametrize("examples", PROFILES)
def test_tsv_reader_on_hostile_text(examples):
    def check(case):
        text, label_first = case
        try:
            recs = parse_tsv(text, "g.tsv", label_first=label_first)
        except SeqkitError:
            return
        lines = split_lines(text)
        assert len(recs) == sum(1 for ln in lines if ln.strip())
        for r in recs:
            line = lines[line_number(r.where, "g.tsv", text) - 1]
            fields = line.split("\t")
            assert r.label == (fields[0] if label_first else fields[-1]).strip() != ""
            assert not set(r.label) & set(LINE_BREAKING) and r.tokens

    run_property(examples, st.tuples(hostile_text(), st.booleans()), check)


@pytest.mark.parametrize("examples", PROFILES)
def test_word_tag_reader_on_hostile_text(examples):
    def check(text):
        try:
            recs = parse_word_tag(text, "g.txt")
        except SeqkitError:
            return
        lines = split_lines(text)
        for r in recs:
            line = lines[line_number(r.where, "g.txt", text) - 1]
            assert [f"{w}/{t}" for w, t in zip(r.tokens, r.tags)] == line.split()
            assert all(t and not set(t) & set(LINE_BREAKING) for t in r.tags)

    run_property(examples, hostile_text(), check)


@pytest.mark.parametrize("examples", PROFILES)
def test_conll_reader_on_hostile_text(examples):
    def check(case):
        text, separator = case
        try:
            recs = parse_conll(text, "g.conll", separator=separator)
        except SeqkitError:
            return
        for r in recs:
            line_number(r.where, "g.conll", text)
            assert len(r.tokens) == len(r.tags) > 0
            assert all(t and not set(t) & set(LINE_BREAKING) for t in r.tags)

    run_property(examples, st.tuples(hostile_text(), st.sampled_from([None, "\t"])), check)


WORD = st.text(alphabet=st.sampled_from(list("abcé1/-.\"") + ["\u2028"]), min_size=1, max_size=5).filter(
    lambda w: w.strip() == w and not w.endswith("/"))
TAG = st.text(alphabet=st.sampled_from(list("ABN-1")), min_size=1, max_size=3)
SENTENCES = st.lists(st.lists(st.tuples(WORD, TAG), min_size=1, max_size=4), min_size=1, max_size=4)


@pytest.mark.parametrize("examples", PROFILES)
def test_well_formed_files_read_back_what_was_written(examples):
    """Sentences with words holding '/', quotes, U+2028: written as each format, read back the same
    (U+2028 is white space to word/TAG and CoNLL's default columns, so those two get it in no word)."""
    def check(sentences):
        words = [[w for w, _ in s] for s in sentences]
        tags = [[t for _, t in s] for s in sentences]
        tsv = "".join(" ".join(ws) + "\t" + ts[0] + "\n" for ws, ts in zip(words, tags))
        got = parse_tsv(tsv, "w.tsv", tokenizer="whitespace")
        assert [(r.tokens, r.label) for r in got] == [(" ".join(ws).split(), ts[0]) for ws, ts in zip(words, tags)]
        plain = [[w.replace("\u2028", "x") for w in ws] for ws in words]
        wt = "".join(" ".join(f"{w}/{t}" for w, t in zip(ws, ts)) + "\n" for ws, ts in zip(plain, tags))
        assert [(r.tokens, r.tags) for r in parse_word_tag(wt, "w.txt")] == list(zip(plain, tags))
        conll = "\n".join("".join(f"{w}\t{t}\n" for w, t in zip(ws, ts)) for ws, ts in zip(words, tags))
        got = parse_conll(conll, "w.conll", separator="\t")
        assert [(r.tokens, r.tags) for r in got] == list(zip(words, tags))
        assert [r.where for r in got] == [f"w.conll:{1 + sum(len(s) + 1 for s in words[:i])}"
                                          for i in range(len(words))]

    run_property(examples, SENTENCES, check)
