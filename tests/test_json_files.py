"""Reading a JSON file a user may have replaced: regular files only, bounded in size and nesting."""

import os

import pytest

from seqkit.runs.json_files import bounded_json


def test_bounded_json_reads_a_file_and_refuses_devices_size_and_depth(tmp_path):
    ok = tmp_path / "ok.json"
    ok.write_text('{"epoch": 3, "tokens": ["a", "b"]}')
    assert bounded_json(str(ok)) == {"epoch": 3, "tokens": ["a", "b"]}
    with pytest.raises(ValueError, match="not a regular file"):
        bounded_json("/dev/zero")
    link = tmp_path / "link.json"
    os.symlink("/dev/zero", link)
    with pytest.raises(ValueError, match="not a regular file"):  # also behind a symbolic link
        bounded_json(str(link))
    with pytest.raises(ValueError, match="34 bytes, more than the 33"):
        bounded_json(str(ok), limit=33)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deep"):
        bounded_json(str(deep))
    with pytest.raises(FileNotFoundError):
        bounded_json(str(tmp_path / "missing.json"))
