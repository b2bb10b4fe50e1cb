"""Reading a JSON file seqkit wrote but a user may have replaced: bounded, never trusted.

No seqkit imports, so every module (the run directory's, the plugin records') can use it.
"""

from __future__ import annotations

import json
import os
import stat


#: Largest JSON file of a run or export seqkit reads (a vocabulary of a million tokens is ~15 MB).
MAX_JSON_BYTES = 64 << 20


def bounded_json(path: str, limit: int = MAX_JSON_BYTES):
    """``json.load`` of the file at ``path`` (a run's or export's own file: untrusted), refused
    unless it is a regular file (not a device, FIFO or folder, also behind a symbolic link) of at
    most ``limit`` bytes and nested less deep than Python's recursion limit.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a regular file, too large, not UTF-8 JSON, or nested too deep (its
            message says which; callers name the file).
    """
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("not a regular file (a device, a pipe or a folder)")
    if st.st_size > limit:
        raise ValueError(f"{st.st_size:,} bytes, more than the {limit:,} a file seqkit writes may hold")
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except RecursionError:
            raise ValueError("nested too deep") from None
