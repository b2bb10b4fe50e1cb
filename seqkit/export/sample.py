"""The export sample: what ``seqkit export`` needs of the data, kept in the run directory.

A full-integer export calibrates on training records and every export checks its parity on
held-out records, so an export used to read the run's data source again -- from the absolute
path it was trained on. At the end of training, :func:`write_export_sample` keeps a small, fixed,
seeded sample of those records in the run directory, ``export_sample.json``::

    {"format": "seqkit export sample", "version": 1, "seed": <recipe seed>,
     "calibration": [record, ...],   # up to CALIBRATION_RECORDS (128) training records, drawn
                                     # with numpy default_rng(seed) as the export draws them
     "parity": [record, ...]}        # the first PARITY_RECORDS (200) held-out records (test split,
                                     # else valid, else train), in the order the export takes them

Each record is a JSON object with the fields of :class:`seqkit.data.records.Record` that it has:
``text`` (a language model's line), ``tokens`` (a list of strings), ``frames`` (a list of ``[D]``
float lists), ``label``, ``tags``, ``target``, and ``where`` (file *name* and line, never a
directory). :func:`seqkit.export.writer.load_for_export` reads the run's data when it is there, and this sample when it
is not (a run directory copied to another machine); ``--calibration FILE`` / ``--parity FILE``
(JSON Lines, one such record per line) replace either part.

NumPy is imported inside the functions that use it, so importing this module does not load it.
"""

from __future__ import annotations

import json
import os

from seqkit import log
from seqkit.data.records import Record
from seqkit.errors import DataError, SeqkitError
from seqkit.export.calibration import calibration_records, parity_records
from seqkit.runs.rundir import EXPORT_SAMPLE as SAMPLE_FILE  # noqa: E402 (one of the run's own names)
from seqkit.runs.rundir import atomic_write_text, strict_json
from seqkit.runs.json_files import bounded_json
FORMAT = "seqkit export sample"
VERSION = 1
#: the records kept for calibration (the default --calibration-examples)
CALIBRATION_RECORDS = 128
#: the held-out records kept for parity (enough for the README's --parity-examples 200)
PARITY_RECORDS = 200
_FIELDS = ("text", "tokens", "frames", "label", "tags", "target")


def record_to_json(rec) -> dict:
    """A :class:`~seqkit.data.records.Record` as a JSON object (fields that are set; ``frames`` as
    nested lists; ``where`` without its directory)."""
    import numpy as np

    out = {}
    for k in _FIELDS:
        v = getattr(rec, k, None)
        if v is not None:
            out[k] = np.asarray(v, dtype=np.float32).tolist() if k == "frames" else (
                list(v) if isinstance(v, (list, tuple)) else v)
    if getattr(rec, "where", ""):
        out["where"] = os.path.basename(rec.where)
    return out


def record_from_json(obj: dict, where: str):
    """The :class:`~seqkit.data.records.Record` of :func:`record_to_json`'s object.

    Raises:
        SeqkitError: not an object, or an unknown field (named, with ``where``).
    """
    import numpy as np

    if not isinstance(obj, dict):
        raise SeqkitError(f"{where}: expected a JSON object with fields {', '.join(_FIELDS)}.")
    unknown = sorted(set(obj) - set(_FIELDS) - {"where"})
    if unknown:
        raise SeqkitError(f"{where}: unknown field(s) {', '.join(unknown)}; a record has "
                          f"{', '.join(_FIELDS)} (and where).")
    kw = {k: obj[k] for k in _FIELDS if k in obj}
    if "frames" in kw:
        kw["frames"] = np.asarray(kw["frames"], dtype=np.float32)
    return Record(**kw, where=obj.get("where") or where)


def write_export_sample(prep, run_dir: str) -> str:
    """Write ``run_dir/export_sample.json`` (see the module docstring) from ``prep``'s splits;
    staged and renamed. Returns its path."""
    sample = {"format": FORMAT, "version": VERSION, "seed": int(prep.recipe.seed),
              "calibration": [record_to_json(r) for r in calibration_records(prep, CALIBRATION_RECORDS)]
              if prep.splits.get("train") else [],
              "parity": [record_to_json(r) for r in parity_records(prep, PARITY_RECORDS)]}
    path = os.path.join(run_dir, SAMPLE_FILE)
    atomic_write_text(path, strict_json(sample, ensure_ascii=False, separators=(",", ":")) + "\n")
    return path


def read_records_file(path: str) -> list:
    """Records of a JSON Lines file (one :func:`record_to_json` object per non-empty line).

    Raises:
        SeqkitError: a missing file, a line that is not JSON or not a record (file:line named),
            or no records.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise SeqkitError(f"{path}: cannot read the records file ({exc}).") from exc
    out = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise SeqkitError(f"{path}:{n}: not JSON ({exc}); a records file holds one JSON object "
                              f"per line, e.g. {{\"text\": \"a line\"}} or {{\"tokens\": [\"a\", "
                              f"\"b\"]}}.") from exc
        out.append(record_from_json(obj, f"{os.path.basename(path)}:{n}"))
    if not out:
        raise SeqkitError(f"{path}: no records (an empty file).")
    return out


def read_export_sample(run_dir: str) -> dict:
    """``{"calibration": [Record], "parity": [Record]}`` of ``run_dir/export_sample.json``.

    Raises:
        SeqkitError: the file is missing or not a sample of this format.
    """
    path = os.path.join(run_dir, SAMPLE_FILE)
    try:
        raw = bounded_json(path)
    except FileNotFoundError:
        raise SeqkitError(f"{path}: missing (a run trained before seqkit kept its export sample).")
    except (OSError, ValueError) as exc:
        raise SeqkitError(f"{path}: unreadable ({exc}).") from exc
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("version") != VERSION:
        raise SeqkitError(f"{path}: not a version-{VERSION} seqkit export sample.")
    return {k: [record_from_json(o, f"{SAMPLE_FILE} {k}[{i}]") for i, o in enumerate(raw.get(k) or [])]
            for k in ("calibration", "parity")}


