"""``seqkit init --task classify`` (acceptor) and ``--task tag`` (tagger): the data section of a
starter recipe for the user's table, CoNLL or word/TAG file (:meth:`seqkit.heads.base.Head.starter`).

* ``classify``: a table (``.csv``, ``.tsv``, ``.jsonl``, ``.parquet``); the label column is one
  named like a label (``label``, ``class``, ``stars``...) or else the column with the fewest
  distinct values, the text column the one with the longest values; a table whose first line is
  data (a headerless ``text<TAB>label`` file) is read without a header; a ``.csv`` separated by
  ``;``, ``|`` or tabs gets ``data.delimiter``.
* ``tag``: a CoNLL column file (a token and a tag a line, blank lines between sentences), a
  ``word/TAG`` file (a sentence a line), or a table with token and tag columns.

Both get a shuffled split (a file sorted by label still puts every class in valid and test) and
a bidirectional encoder (an answer may read the whole sequence).
"""

from __future__ import annotations

import os

from seqkit.starter import (TABLE_EXT, InitError, classify_columns, csv_delimiter, headerless,
                            headerless_classify, held_out_split, one_file, sample_table, tag_file_format)


def classify_starter(paths: list[str], rel) -> dict:
    """The starter sections of an acceptor for a table (see the module docstring)."""
    first = one_file(paths, "classify", "a table")
    ext = os.path.splitext(first)[1].lower()
    if ext not in TABLE_EXT:
        raise InitError(f"{first}: --task classify reads a table (.csv, .tsv, .jsonl, .parquet) with a "
                        f"text column and a label column; rename or convert the file.")
    cols, rows = sample_table(first)
    if headerless(cols, rows) and TABLE_EXT[ext] in ("csv", "tsv"):
        data = headerless_classify(first, rel(first), TABLE_EXT[ext])
    else:
        found = classify_columns(first, rows, cols)
        data = {"source": "table", "path": rel(first), "text_column": found["text_column"],
                "label_column": found["label_column"], "tokenizer": found["tokenizer"]}
    if TABLE_EXT[ext] == "csv":
        with open(first, encoding="utf-8-sig", newline="") as f:
            delimiter = csv_delimiter(f)
        if delimiter != ",":
            data["delimiter"] = delimiter
    data["split"] = held_out_split(shuffle=True)
    return {"data": data, "head": {}, "model": {"bidirectional": True}}


def tag_starter(paths: list[str], rel) -> dict:
    """The starter sections of a tagger for a CoNLL, word/TAG or table file."""
    first = one_file(paths, "tag", "a CoNLL, word/TAG or table file")
    if os.path.splitext(first)[1].lower() in TABLE_EXT:
        cols, _ = sample_table(first)
        tok = next((c for c in cols if c.lower() in ("tokens", "words", "token", "word")), None)
        tags = next((c for c in cols if c.lower() in ("tags", "labels", "ner_tags", "pos_tags", "tag")), None)
        if not tok or not tags:
            raise InitError(f"{first}: a tagging table needs a tokens column and a tags column "
                            f"(named e.g. 'tokens' and 'tags'); found {cols}.")
        data = {"source": "table", "path": rel(first), "tokens_column": tok, "tags_column": tags}
    else:
        data = {"source": tag_file_format(first)["source"], "path": rel(first)}
    data["split"] = held_out_split(shuffle=True)
    return {"data": data, "head": {}, "model": {"bidirectional": True}}
