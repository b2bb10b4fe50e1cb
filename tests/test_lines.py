"""One line-splitting rule (:func:`seqkit.data.lines.split_lines`): ``\\n`` only, for training
data and prediction input alike -- U+2028, U+0085, form feeds inside a line stay in it."""

import gzip

from seqkit.data.lines import split_lines

ODD = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # all of these are line breaks to str.splitlines


def test_split_lines_breaks_at_newline_only():
    text = "\ufeffa\u2028b\r\nc\x85d\n\ne\x0cf\x1cg\n"
    assert split_lines(text) == ["a\u2028b", "c\x85d", "", "e\x0cf\x1cg"]
    assert len(f"x{ODD}y".splitlines()) == 9 and split_lines(f"x{ODD}y") == [f"x{ODD}y"]
    assert split_lines("a\nb") == ["a", "b"] and split_lines("") == [] and split_lines("\n") == [""]


def test_training_readers_keep_a_line_whole(tmp_path):
    from seqkit.data.lazy_corpus import read_lines
    from seqkit.data.text_lines import split_lines as text_lines
    from seqkit.data.word_tag import parse_word_tag

    text = "\ufeffone\u2028two  \r\n\nthree\x85four\n"
    assert text_lines(text) == ["one\u2028two", "three\x85four"]
    p = tmp_path / "c.txt.gz"
    with gzip.open(p, "wb") as f:
        f.write(text.encode("utf-8"))
    assert list(read_lines([str(p)])) == text_lines(text)  # the lazy corpus reads the same lines
    recs = parse_word_tag("the/D\u2028dog/N\nruns/V\n", "t.txt")  # U+2028: white space between tokens
    assert [(r.where, list(r.tokens)) for r in recs] == [("t.txt:1", ["the", "dog"]), ("t.txt:2", ["runs"])]


def test_export_runtimes_read_one_input_per_line():
    """The streaming runtimes of an export (``seqkit run-export``-style readers) number inputs by
    the file's own lines: a char export reads U+2028 / U+0085 as symbols of the line."""
    import types

    from seqkit.data.vocab import SPECIALS
    from seqkit.heads.seq2seq.runtime import read_sources
    from seqkit.heads.sequence.stream import read_stream_input

    meta = {"input": {"kind": "token"}, "vocab": list(SPECIALS) + ["a", "b", "\u2028"],
            "token_mode": "char", "lowercase": False}
    got = read_stream_input("ab\u2028a\n\nb\x85b\n", "in.txt", meta)
    assert [(x.where, x.tokens) for x in got] == [("in.txt:1", ["a", "b", "\u2028", "a"]),
                                                 ("in.txt:3", ["b", "\x85", "b"])]
    rt = types.SimpleNamespace(length=8, source_ids=lambda s: ([ord(c) for c in s], 0))
    assert read_sources("ab\u2028a\nb\x0cb\n", "in.txt", rt) == [
        ("in.txt:1", [97, 98, 0x2028, 97]), ("in.txt:2", [98, 12, 98])]
