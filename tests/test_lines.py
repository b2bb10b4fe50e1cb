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
