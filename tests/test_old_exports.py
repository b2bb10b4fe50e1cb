"""Exports written by earlier seqkit versions still stream: a ``.tflite`` whose embedded metadata
predates ``schema_version`` (``tokenizer`` instead of ``tokenization``, no ``logits_index``, no
``verified``) gives, greedy, the text the current file gives."""

from __future__ import annotations

import os
import shutil


def test_an_export_from_before_the_metadata_schema_streams_as_today(tiny_lm_export, tmp_path):
    from seqkit.export import embedded_metadata
    from seqkit.runtime.request import stream

    out, _ = tiny_lm_export("lstm")
    new = os.path.join(out, "model.tflite")
    data = open(new, "rb").read()
    meta = embedded_metadata.read(data)
    assert meta["schema_version"] == 1 and meta["logits_index"] == "vocab"
    old = {k: v for k, v in meta.items() if k not in ("schema_version", "tokenization", "logits_index",
                                                      "verified")}
    old["tokenizer"] = meta["tokenization"]  # the field files of that time carried
    old_file = tmp_path / "old.tflite"
    old_file.write_bytes(embedded_metadata.embed(data, old))
    assert "schema_version" not in embedded_metadata.read(str(old_file))
    lone = tmp_path / "new.tflite"
    shutil.copyfile(new, lone)  # the lone file too, not the export directory
    want = stream(str(lone), prompt="ab", greedy=True, max_length=12)
    assert stream(str(old_file), prompt="ab", greedy=True, max_length=12) == want
    assert want.startswith("ab") and len(want) > 3
