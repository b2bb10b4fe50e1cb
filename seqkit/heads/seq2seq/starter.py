"""``seqkit init --task seq2seq``: the data section of an encoder-decoder's starter recipe
(:meth:`seqkit.heads.base.Head.starter`): two aligned files (line n of one is the output for line
n of the other) or a table with a source and a target column, each side's tokenizer words or
characters as its text has spaces or not, a shuffled split, Bahdanau attention.
"""

from __future__ import annotations

import os

from seqkit.starter import TABLE_EXT, InitError, held_out_split, sample_table, sniff_lines, tokenizer_for


def seq2seq_starter(paths: list[str], rel) -> dict:
    """The starter sections of an encoder-decoder for two aligned files or a table."""
    first = paths[0]
    folder = next((p for p in paths if os.path.isdir(p)), None)
    if folder is not None:
        raise InitError(f"{folder}: a folder; --task seq2seq reads two aligned files or a table.")
    if len(paths) == 2:
        data = {"source": "parallel_text", "source_path": rel(paths[0]), "target_path": rel(paths[1])}
        src, tgt = sniff_lines(paths[0], 200), sniff_lines(paths[1], 200)
    elif os.path.splitext(first)[1].lower() in TABLE_EXT:
        cols, rows = sample_table(first)
        if len(cols) < 2:
            raise InitError(f"{first}: a seq2seq table needs a source and a target column; found {cols}.")
        s = next((c for c in cols if c.lower() in ("source", "src", "input")), cols[0])
        t = next((c for c in cols if c.lower() in ("target", "tgt", "output")), next(c for c in cols if c != s))
        data = {"source": "parallel_text", "path": rel(first), "source_column": s, "target_column": t}
        src, tgt = [str(r.get(s, "")) for r in rows], [str(r.get(t, "")) for r in rows]
    else:
        raise InitError(f"{first}: --task seq2seq reads two aligned files (--data SOURCE --data TARGET, "
                        f"line n of one is the output for line n of the other) or a table "
                        f"(.csv, .tsv, .jsonl) with a source and a target column.")
    data["tokenizer"] = tokenizer_for(src)
    data["target_tokenizer"] = tokenizer_for(tgt)
    data["split"] = held_out_split(shuffle=True)
    return {"data": data, "head": {"attention": "bahdanau"}}
