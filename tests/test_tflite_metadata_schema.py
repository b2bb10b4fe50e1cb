"""A lone .tflite is untrusted input: its embedded metadata passes a strict schema
(seqkit.export.metadata_schema) and must describe the model's own signature before `stream`,
the runtimes or `inspect` use it."""

from __future__ import annotations

import copy
import os

import pytest
from click.testing import CliRunner

from seqkit.cli import main
from seqkit.errors import SeqkitError


@pytest.fixture(scope="module")
def export(tiny_lm_export):
    """``(model bytes, metadata)`` of the tiny LM's float32 export (built once per session)."""
    from seqkit.export import embedded_metadata

    out, _ = tiny_lm_export("lstm")
    with open(os.path.join(out, "model.tflite"), "rb") as f:
        data = f.read()
    return data, embedded_metadata.read(data)


def lone(tmp_path, data: bytes, meta: dict, name: str = "hostile.tflite") -> str:
    """A lone .tflite carrying ``meta`` as its embedded metadata."""
    from seqkit.export import embedded_metadata

    path = tmp_path / name
    path.write_bytes(embedded_metadata.embed(data, meta))
    return str(path)


def edited(meta: dict, edit) -> dict:
    m = copy.deepcopy(meta)
    edit(m)
    return m


def stream(path: str):
    return CliRunner().invoke(main, ["stream", path, "--prompt", "a", "--max-length", "3", "--greedy"])


def test_the_exporters_metadata_passes_and_streams(export, tmp_path):
    from seqkit.export.metadata_schema import validate
    from seqkit.runtime.streaming import StreamingModel

    data, meta = export
    assert validate(meta, "x") is meta
    rt = StreamingModel(lone(tmp_path, data, meta))
    assert rt.step([meta["special_ids"]["start"]]).shape == (1, len(meta["vocab"]))


CASES = {
    "vocab entries of the wrong type": (lambda m: m.__setitem__("vocab", list(range(len(m["vocab"])))), "vocab[0]"),
    "a negative state size": (lambda m: m["state_layout"][0].__setitem__("size", -3), "state_layout[0].size"),
    "a 10^12 state size": (lambda m: m["state_layout"][0].__setitem__("size", 10**12), "state_layout[0].size"),
    "a state size of 16.0": (lambda m: m["state_layout"][0].__setitem__("size", 16.0), "state_layout[0].size"),
    "an end id of 10^9": (lambda m: m["special_ids"].__setitem__("end", 10**9), "special_ids.end"),
    "an end id past the vocabulary": (lambda m: m["special_ids"].__setitem__("end", len(m["vocab"])),
                                      "outside the vocabulary"),
    "subword_model /dev/zero": (lambda m: m.__setitem__("subword_model", "/dev/zero"), "subword_model"),
    "an absolute subword_model": (lambda m: m.__setitem__("subword_model", "/etc/passwd"), "subword_model"),
    "a .. subword_model": (lambda m: m.__setitem__("subword_model", "../secret.model"), "subword_model"),
    "a renamed input": (lambda m: m["input"].__setitem__("name", "renamed"), "signature 'step' takes"),
    "an empty state layout": (lambda m: m.__setitem__("state_layout", []), "signature 'step' takes"),
    "a vocabulary shorter than the logits": (lambda m: m["vocab"].pop(), "logits have"),
    "a state of another size": (lambda m: m["state_layout"][1].__setitem__("size", 17), "of size 16"),
    "a head that is a list": (lambda m: m.__setitem__("head", ["language_model"]), "head"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_metadata_is_refused_naming_the_field(export, tmp_path, case):
    from seqkit.export.metadata_schema import MetadataError
    from seqkit.runtime.streaming import StreamingModel

    data, meta = export
    edit, field = CASES[case]
    path = lone(tmp_path, data, edited(meta, edit))
    with pytest.raises(MetadataError, match="the metadata|metadata field") as exc:
        StreamingModel(path)
    assert field in str(exc.value) and path in str(exc.value)
    res = stream(path)
    assert res.exit_code == 2 and "error:" in res.output and field in res.output, res.output
    assert "internal error" not in res.output and "Traceback" not in res.output


def test_metadata_nested_100000_deep_is_refused(export, tmp_path):
    from seqkit.export import embedded_metadata

    data, meta = export
    k = 100_000
    placeholder = "A" * (2 * k - 2)
    model = embedded_metadata.embed(data, {**meta, "recipe": placeholder})
    model = model.replace(f'"{placeholder}"'.encode(), b"[" * k + b"]" * k)
    path = tmp_path / "deep.tflite"
    path.write_bytes(model)
    with pytest.raises(SeqkitError, match="deeper"):
        embedded_metadata.read(str(path))
    res = stream(str(path))
    assert res.exit_code == 2 and "deeper" in res.output, res.output
    res = CliRunner().invoke(main, ["inspect", str(path)])
    assert res.exit_code == 2 and "deeper" in res.output and "internal error" not in res.output


def test_metadata_64_levels_deep_passes_65_does_not(export):
    from seqkit.export.metadata_schema import MAX_DEPTH, MetadataError, validate

    _, meta = export

    def nest(n):
        v = 0
        for _ in range(n):
            v = [v]
        return v

    assert validate({**meta, "recipe": {"x": nest(MAX_DEPTH - 2)}}, "x")  # meta + recipe + x: 64 levels
    with pytest.raises(MetadataError, match="deeper than 64"):
        validate({**meta, "recipe": {"x": nest(MAX_DEPTH - 1)}}, "x")


def test_inspect_still_shows_what_it_can(export, tmp_path):
    data, meta = export
    path = lone(tmp_path, data, edited(meta, lambda m: m["state_layout"][0].__setitem__("size", -3)))
    res = CliRunner().invoke(main, ["inspect", path])
    assert res.exit_code == 0, res.output
    assert "signature 'step':" in res.output and "ops:" in res.output
    assert "not valid" in res.output and "state_layout[0].size" in res.output
    res = CliRunner().invoke(main, ["inspect", path, "--json"])
    assert res.exit_code == 0 and '"metadata_error"' in res.output
    res = CliRunner().invoke(main, ["inspect", path, "--metadata"])
    assert res.exit_code == 0 and '"size": -3' in res.output


def test_a_subword_model_name_is_never_a_path_on_disk(tmp_path):
    from seqkit.data.subword import TextTokenizer
    from seqkit.errors import RunDirError

    for name in ("/dev/zero", "../x.model", "a/b.model"):
        with pytest.raises(RunDirError, match="not a file name inside it"):
            TextTokenizer.load(str(tmp_path), "sentencepiece", False, name)
