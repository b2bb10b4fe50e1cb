"""The export's metadata inside the .tflite: equal to metadata.json, enough alone, the model unchanged."""

import json
import os
import shutil
import struct

import numpy as np
import pytest


@pytest.fixture(scope="module")
def lm(tmp_path_factory, keras, tiny_lm):
    """A tiny LM run (the session's, conftest ``tiny_lm``; read only) and its step export;
    ``converted``: the converter's bytes before embedding."""
    from seqkit.export import embedded_metadata
    from seqkit.export.writer import export_run

    run, out = tiny_lm("lstm"), str(tmp_path_factory.mktemp("emb") / "export")
    seen = []
    real = embedded_metadata.embed

    def spy(model, meta, files=None):
        seen.append(bytes(model))
        return real(model, meta, files)

    embedded_metadata.embed = spy
    try:
        export_run(run, out, parity_examples=2)
    finally:
        embedded_metadata.embed = real
    assert len(seen) == 1
    return run, out, seen[0]


def _strip(model: bytes) -> bytes:
    """``model`` without its seqkit metadata entries and their buffers (appended last by embed)."""
    from ai_edge_litert.tools import flatbuffer_utils

    m = flatbuffer_utils.convert_bytearray_to_object(bytearray(model))
    ours = [md for md in m.metadata if md.name.decode().startswith("seqkit_")]
    assert sorted(md.buffer for md in ours) == list(range(len(m.buffers) - len(ours), len(m.buffers)))
    m.metadata = [md for md in m.metadata if md not in ours]
    m.buffers = m.buffers[: len(m.buffers) - len(ours)]
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


def _read_by_hand(data: bytes) -> dict:
    """docs/export.md's Swift sketch, step for step: the flatbuffer walked with plain offsets."""
    u32 = lambda p: struct.unpack_from("<I", data, p)[0]  # noqa: E731
    u16 = lambda p: struct.unpack_from("<H", data, p)[0]  # noqa: E731

    def field(table, k):  # position of field k of a table, or None when absent
        vt = table - struct.unpack_from("<i", data, table)[0]
        slot = 4 + 2 * k
        return table + u16(vt + slot) if slot < u16(vt) and u16(vt + slot) else None

    def vector(p):  # (first element, length) of the vector a uoffset field points at
        v = p + u32(p)
        return v + 4, u32(v)

    model = u32(0)
    out = {}
    first, n = vector(field(model, 6))  # Model.metadata
    for i in range(n):
        md = first + 4 * i + u32(first + 4 * i)
        s, length = vector(field(md, 0))  # Metadata.name
        index = u32(field(md, 1))  # Metadata.buffer
        bufs, _ = vector(field(model, 4))  # Model.buffers
        buf = bufs + 4 * index + u32(bufs + 4 * index)
        p = field(buf, 0)  # Buffer.data
        start, size = vector(p) if p else (0, 0)
        out[data[s:s + length].decode()] = data[start:start + size]
    return json.loads(out["seqkit_metadata"])


def test_embedded_metadata_equals_metadata_json_and_the_run_vocab_model_otherwise_unchanged(lm):
    from seqkit.export import embedded_metadata
    from seqkit.export.tflite import op_names
    from seqkit.runtime.streaming import StreamingModel

    run, out, converted = lm
    path = os.path.join(out, "model.tflite")
    data = open(path, "rb").read()
    meta = embedded_metadata.read(path)
    assert meta == json.load(open(os.path.join(out, "metadata.json"), encoding="utf-8"))
    assert meta["vocab"] == json.load(open(os.path.join(run, "vocab.json"), encoding="utf-8"))
    assert meta["vocab"] == json.load(open(os.path.join(out, "vocab.json"), encoding="utf-8"))
    assert _read_by_hand(data) == meta  # docs/export.md's plain-offset walk finds the same JSON
    assert embedded_metadata.read(converted) is None  # the converter's bytes carry none
    assert _strip(data) == converted  # every other byte as the converter wrote it
    assert {"min_runtime_version", "CONVERSION_METADATA"} <= set(embedded_metadata.entries(data))
    ops = op_names(data)
    assert ops == op_names(converted) and not any(o.startswith("Flex") or o == "CUSTOM" for o in ops)
    # the same outputs, bit for bit, over a stream with the state carried
    a, b = StreamingModel(out), StreamingModel(model_bytes=converted, metadata=meta)
    rng = np.random.default_rng(0)
    for rt in (a, b):
        rt.reset(2)
    for t in rng.integers(4, len(meta["vocab"]), size=(12, 2)):
        za, zb = a.step(t), b.step(t)
        assert za.tobytes() == zb.tobytes()


@pytest.fixture(scope="module")
def tiny_model(tf):
    """A converter-made .tflite of a one-op function (no export needed)."""
    f = tf.function(lambda x: {"y": x * 2.0}, input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()])
    return conv.convert()


def test_embed_reembed_and_files(tiny_model):
    from seqkit.errors import SeqkitError
    from seqkit.export import embedded_metadata as em

    one = em.embed(tiny_model, {"head": "x", "vocab": ["", "é"]}, {"spm.model": b"\x00\x01tok"})
    assert em.read(one) == {"head": "x", "vocab": ["", "é"]}
    assert em.read_files(one) == {"spm.model": b"\x00\x01tok"}
    two = em.embed(one, {"head": "y"})  # re-embedding replaces; a file no longer given is emptied
    assert em.read(two) == {"head": "y"} and em.read_files(two) == {}
    assert [k for k in em.entries(two) if k.startswith("seqkit")] == ["seqkit_metadata", "seqkit_file:spm.model"]
    assert _strip(two) == tiny_model
    with pytest.raises(SeqkitError, match="not a TFLite model"):
        em.read(b"{" * 64)
    with pytest.raises(SeqkitError, match="not a TFLite model"):
        em.embed(b"\x00" * 64, {})


def test_stream_needs_the_tflite_alone_and_refuses_a_disagreeing_metadata_json(lm, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.errors import SeqkitError
    from seqkit.export.writer import check_out
    from seqkit.runtime.streaming import StreamingModel

    _, out, converted = lm
    r = CliRunner()
    argv = ["--prompt", "The ", "--max-length", "15", "--greedy"]
    before = r.invoke(main, ["stream", out, *argv])
    assert before.exit_code == 0, before.output
    export = str(tmp_path / "export")
    shutil.copytree(out, export)
    os.remove(os.path.join(export, "metadata.json"))
    lone = str(tmp_path / "lm.tflite")
    shutil.copy(os.path.join(out, "model.tflite"), lone)
    for where in (export, lone):
        res = r.invoke(main, ["stream", where, *argv])
        assert res.exit_code == 0, res.output
        assert res.stdout == before.stdout
    assert StreamingModel(lone).metadata == json.load(open(os.path.join(out, "metadata.json")))
    check_out(export, lm[0], overwrite=True)  # still an export to --overwrite: the model says so
    other = tmp_path / "other"
    other.mkdir()
    (other / "model.tflite").write_bytes(converted)  # a .tflite seqkit did not describe: left alone
    with pytest.raises(SeqkitError, match="left alone"):
        check_out(str(other), lm[0], overwrite=True)
    res = r.invoke(main, ["inspect", "--metadata", lone])
    assert res.exit_code == 0 and json.loads(res.stdout) == json.load(open(os.path.join(out, "metadata.json")))
    res = r.invoke(main, ["inspect", lone])
    assert res.exit_code == 0 and "metadata: embedded, entry 'seqkit_metadata'" in res.stdout
    assert "head language_model, step model, input token" in res.stdout

    # metadata.json beside the model that says something else: refused, naming it
    edited = json.load(open(os.path.join(out, "metadata.json")))
    edited["special_ids"]["end"] = 5
    with open(os.path.join(export, "metadata.json"), "w") as f:
        json.dump(edited, f)
    res = r.invoke(main, ["stream", export, *argv])
    assert res.exit_code == 2 and "metadata.json differs from the metadata embedded" in res.output
    assert "key 'special_ids'" in res.output and "Traceback" not in res.output
    # a .tflite without seqkit metadata, alone: refused, naming the key
    bare = tmp_path / "bare.tflite"
    bare.write_bytes(converted)
    res = r.invoke(main, ["stream", str(bare), *argv])
    assert res.exit_code == 2 and "without seqkit's embedded metadata" in res.output
    assert "seqkit_metadata" in res.output
