"""``seqkit init --task lm``: the data section of a language model's starter recipe
(:meth:`seqkit.heads.base.Head.starter`).

One text file is ``text_lines`` (a line an example, characters, ``data.max_length`` from its
longest sampled line, an unshuffled split); a folder of text files is ``text_corpus`` read as one
stream (truncated BPTT over 64 steps), its last two files valid and test when it has three or
more, its tokenizer words or characters as its text has spaces or not.
"""

from __future__ import annotations

import os

from seqkit.starter import held_out_split, sniff_lines, text_files, tokenizer_for


def lm_starter(paths: list[str], rel) -> dict:
    """The starter sections of a language model for a text file or a folder of them."""
    first = paths[0]
    if os.path.isdir(first):
        files = text_files(first)
        ext = os.path.splitext(files[0])[1]
        held = files[-2:] if len(files) >= 3 else []
        data = {"source": "text_corpus", "layout": "stream",
                "train_path": [rel(p) for p in files[:-2]] if held else rel(os.path.join(first, "*" + ext))}
        if held:
            data.update(valid_path=rel(held[0]), test_path=rel(held[1]))
        data["tokenizer"] = tokenizer_for(sniff_lines(files[0], 50))
        return {"data": data, "head": {}, "training": {"bptt": 64}}  # valid/test are files, never carved
    sample = sniff_lines(first, 200)
    data = {"source": "text_lines", "path": rel(first), "tokenizer": "char",
            "split": held_out_split(shuffle=False),
            "max_length": max(2, min(512, max((len(s) for s in sample), default=2) + 2))}
    return {"data": data, "head": {}}
