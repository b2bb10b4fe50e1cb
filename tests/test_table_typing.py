"""Typed cells at the data boundary (seqkit.data.typed): a text is UTF-8, a missing label is
refused with its row, a column number is >= 0, numeric labels are one class, and no label or
tag holds a character that breaks line-per-input output. Damaged .gz corpora are named."""

from __future__ import annotations

import gzip
import json
from types import SimpleNamespace

import pytest

from seqkit.data.table import read_table, records_from_table
from seqkit.errors import DataError

DATA = SimpleNamespace(tokenizer="whitespace")


def acceptor_records(path, **columns):
    opts = SimpleNamespace(header=True, text_column=None, label_column=None, **columns)
    return records_from_table(read_table(str(path)), "acceptor", opts, DATA)


def jsonl(tmp_path, rows, name="t.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return p


def test_json_lines_labels_1_and_1_0_are_one_class(tmp_path):
    p = jsonl(tmp_path, [{"text": "a b", "label": 1}, {"text": "c", "label": 1.0},
                         {"text": "d", "label": 2.5}, {"text": "e", "label": "1"}])
    assert [r.label for r in acceptor_records(p)] == ["1", "1", "2.5", "1"]


@pytest.mark.parametrize("label", ["pos\tneg", "pos\nneg", "pos\rx", "a\u2028b", "a\u2029b", "a\x85b"])
def test_a_label_that_breaks_line_output_is_refused_with_its_row(tmp_path, label):
    p = jsonl(tmp_path, [{"text": "fine", "label": "ok"}, {"text": "a b", "label": label}])
    with pytest.raises(DataError, match=r"t\.jsonl:2: column 'label' \(data\.label_column\)"):
        acceptor_records(p)


def test_a_tag_that_breaks_line_output_is_refused(tmp_path):
    p = jsonl(tmp_path, [{"tokens": ["New", "York"], "tags": ["B-LOC", "I-\u2028LOC"]}])
    opts = SimpleNamespace(header=True, tokens_column=None, tags_column=None)
    with pytest.raises(DataError, match=r"t\.jsonl:1: column 'tags'"):
        records_from_table(read_table(str(p)), "tagger", opts, DATA)


def test_a_negative_column_number_is_refused(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("hello there,pos\n", encoding="utf-8")
    opts = SimpleNamespace(header=False, text_column=-1, label_column=1)
    with pytest.raises(DataError, match=r"data\.text_column: -1 is not a column"):
        records_from_table(read_table(str(p), header=False), "acceptor", opts, DATA)
    opts = SimpleNamespace(header=False, text_column=0, label_column=1)  # the same file, numbered from 0
    (rec,) = records_from_table(read_table(str(p), header=False), "acceptor", opts, DATA)
    assert (rec.tokens, rec.label) == (["hello", "there"], "pos")


def test_parquet_binary_text_is_decoded_or_refused(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    p = tmp_path / "t.parquet"
    pd.DataFrame({"text": [b"big cat", b"small dog"], "label": [b"a", b"b"]}).to_parquet(p)
    recs = acceptor_records(p)
    assert [r.tokens for r in recs] == [["big", "cat"], ["small", "dog"]]
    assert [r.label for r in recs] == ["a", "b"]
    pd.DataFrame({"text": [b"ok", b"caf\xe9"], "label": ["a", "b"]}).to_parquet(p)
    with pytest.raises(DataError, match=r"t\.parquet row 2: column 'text' .* not UTF-8 \(byte 3"):
        acceptor_records(p)


def test_a_nat_or_missing_label_is_refused_with_its_row(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    p = tmp_path / "t.parquet"
    frame = pd.DataFrame({"text": ["a", "b"], "label": pd.to_datetime(["2020-01-01", None])})
    frame.to_parquet(p)
    with pytest.raises(DataError, match=r"t\.parquet row 2: column 'label' .* is empty"):
        acceptor_records(p)
    p = jsonl(tmp_path, [{"text": "a", "label": "x"}, {"text": "b", "label": None}])
    with pytest.raises(DataError, match=r"t\.jsonl:2: column 'label' .* is empty \(null or NaN\)"):
        acceptor_records(p)
    p.write_text('{"text": "a", "label": "x"}\n{"text": "b", "label": NaN}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"t\.jsonl:2: column 'label' .* is empty \(null or NaN\)"):
        acceptor_records(p)


def test_column_sources_type_their_cells_the_same_way():
    from seqkit.data.columns import row_to_record

    cols = {"text": "t", "label": "l"}
    kw = dict(names={}, tokenizer="whitespace", target_tokenizer="whitespace", where="ds[3]")
    assert row_to_record({"t": b"a b", "l": 1.0}, cols, **kw).label == "1"
    with pytest.raises(DataError, match=r"ds\[3\].*TAB"):
        row_to_record({"t": "a b", "l": "x\ty"}, cols, **kw)
    with pytest.raises(DataError, match=r"ds\[3\].*not UTF-8"):
        row_to_record({"t": b"\xff", "l": "x"}, cols, **kw)


def test_a_truncated_gz_corpus_names_the_file_and_offset(tmp_path):
    from seqkit.data.lazy_corpus import LazyCorpus, read_lines

    whole = gzip.compress(("one line of text\n" * 5000).encode())
    p = tmp_path / "part.txt.gz"
    p.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError, match=r"part\.txt\.gz: the gzip file is damaged at uncompressed byte [\d,]+"):
        list(read_lines([str(p)]))
    with pytest.raises(DataError, match=r"part\.txt\.gz: the gzip file is damaged"):
        LazyCorpus([str(p)]).scan()
    p.write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4)  # corrupt from the start
    with pytest.raises(DataError, match=r"part\.txt\.gz: the gzip file is damaged"):
        list(read_lines([str(p)]))


def test_parquet_that_decompresses_past_memory_is_refused_before_reading(tmp_path, monkeypatch):
    """A few kilobytes of Parquet can hold gigabytes of one string repeated (dictionary-encoded): the
    decoded length is summed before the strings are expanded, and compared with the machine's memory."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    import seqkit.guards

    p = tmp_path / "bomb.parquet"
    pd.DataFrame({"text": ["x" * 1_000_000] * 8, "label": ["a"] * 8}).to_parquet(p, compression="zstd")
    assert p.stat().st_size < 20_000
    assert len(read_table(str(p), "parquet").rows) == 8  # 8 MB decoded: read
    monkeypatch.setattr(seqkit.guards, "memory_bytes", lambda: 16_000_000)  # as if the machine had 16 MB
    with pytest.raises(DataError, match=r"bomb\.parquet: its text columns hold 8,000,008 bytes once decoded "
                                        r"\(the file is [\d,]+\).*more than this machine's 16,000,000 bytes"):
        read_table(str(p), "parquet")


def test_a_wide_header_is_read_in_linear_time_and_bounded(tmp_path):
    """A duplicate among 50,000 header names is found (a quadratic scan took 145 s for 200,000);
    more columns than MAX_COLUMNS are refused at the header."""
    from seqkit.data.table import MAX_COLUMNS

    names = [f"c{i}" for i in range(50_000)]
    p = tmp_path / "wide.csv"
    p.write_text(",".join(names + ["c49999"]) + "\n" + ",".join(["1"] * 50_001) + "\n")
    with pytest.raises(DataError, match=r"wide\.csv:1: the header names the column 'c49999' twice"):
        read_table(str(p), "csv")
    p.write_text(",".join(f"c{i}" for i in range(MAX_COLUMNS + 1)) + "\n")
    with pytest.raises(DataError, match=rf"wide\.csv:1: {MAX_COLUMNS + 1:,} columns, more than a table"):
        read_table(str(p), "csv")


def test_a_label_of_thousands_of_digits_is_named(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"text": "a b", "label": ' + "9" * 5000 + '}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"t\.jsonl:1: a value JSON cannot be read as Python's \(Exceeds the limit"):
        acceptor_records(p)


def test_a_semicolon_table_read_with_commas_names_the_delimiter_key(tmp_path):
    """A spreadsheet's ';' export read as CSV: one column, so the messages say data.delimiter: ';'."""
    p = tmp_path / "s.csv"
    p.write_text("text;label\ngood film;pos\nslow;neg\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"data.text_column: no column 'text' .* one column, 'text;label': "
                                        r"if the file's fields are separated by ';', set data.delimiter: ';'"):
        acceptor_records(p)
    p.write_text("text;label\ngood, warm film;pos\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"s.csv:2: 2 fields, but the header .* has 1 \(the header reads as "
                                        r"one column.*set data.delimiter: ';'\)"):
        read_table(str(p))
    p.write_text("text;label\ngood film;pos\n", encoding="utf-8")
    recs = records_from_table(read_table(str(p), delimiter=";"), "acceptor",
                              SimpleNamespace(header=True, text_column=None, label_column=None), DATA)
    assert [(r.tokens, r.label) for r in recs] == [(["good", "film"], "pos")]


def test_a_json_lines_row_naming_a_key_twice_is_refused(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"text": "a", "label": "x"}\n{"text": "b", "text": "SHADOW", "label": "y"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"d.jsonl:2: the key 'text' appears twice"):
        read_table(str(p))
