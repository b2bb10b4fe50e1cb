"""``.ts`` time-series files (the UCR/UEA archive format, as sktime writes them).

A header of ``@key value`` lines (``@dimensions``, ``@classLabel true a b c``,
...), then after ``@data`` one case per line: the channels separated by ``:``,
each a comma-separated list of values, and the class label last::

    1.0,2.0,3.0:0.5,0.4,0.3:speaker1

A case becomes ``Record(frames=[T, D] float32, label=...)``. Refused with the
file and line: channels of different lengths in one case, a case with another
number of channels than ``@dimensions`` or than the first case, missing values
(``?``, NaN), a label not declared in ``@classLabel``, time-stamped series.
"""

from __future__ import annotations

import numpy as np

from seqkit.data.base import FileSource, read_text
from seqkit.data.lines import split_lines
from seqkit.data.records import Record
from seqkit.errors import DataError
from seqkit.registry import register_data


def parse_ts(text: str, path: str, *, need_labels: bool = True) -> list[Record]:
    """Parse the text of a ``.ts`` file into records (see the module docstring).

    Args:
        need_labels: refuse a file without ``@classLabel true``; with False (prediction
            input) an unlabelled file's cases are channels only (``label=None``).

    Raises:
        DataError: a malformed file, naming ``path:line`` and the fix.
    """
    header, labels, dims, records = {}, None, None, []
    in_data = False
    for n, raw in enumerate(split_lines(text), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{n}"
        if not in_data:
            if not line.startswith("@"):
                raise DataError(f"{where}: expected a '@key value' header line or '@data' before the "
                                f"cases; is this a .ts (UCR/UEA) file?")
            key, _, value = line[1:].partition(" ")
            key = key.lower()
            if key == "data":
                in_data = True
                continue
            header[key] = value.strip()
            if key == "timestamps" and value.strip().lower() == "true":
                raise DataError(f"{where}: time-stamped series are not supported; export the series "
                                f"without time stamps.")
            if key == "classlabel":
                parts = value.split()
                if parts and parts[0].lower() == "true":
                    labels = parts[1:]
            if key == "dimensions":
                try:
                    dims = int(value)
                except ValueError:
                    raise DataError(f"{where}: @dimensions {value!r} is not an integer.") from None
            continue
        if labels is None and need_labels:
            raise DataError(f"{where}: the header declares no class labels (@classLabel true ...); "
                            f"a .ts source needs labelled cases.")
        if labels is None:
            channels, label = line.split(":"), None
        else:
            *channels, label = line.split(":")
            label = label.strip()
        if not channels:
            raise DataError(f"{where}: a case is 'values:values:...:label'; found no ':'.")
        if labels is not None and label not in labels:
            raise DataError(f"{where}: label {label!r} is not declared in @classLabel "
                            f"({' '.join(labels)}).")
        want = dims if dims is not None else (records[0].frames.shape[1] if records else None)
        if want is not None and len(channels) != want:
            src = "@dimensions" if dims is not None else f"the first case ({records[0].where})"
            raise DataError(f"{where}: {len(channels)} channels, but {src} says {want}; every case "
                            f"needs the same channels, separated by ':'.")
        try:
            cols = [[float(v) for v in ch.split(",")] for ch in channels]
        except ValueError:
            if "?" in line:
                raise DataError(f"{where}: missing values ('?'); seqkit does not impute: fill or "
                                f"drop them first.") from None
            raise DataError(f"{where}: a value is not a number.") from None
        lengths = {len(c) for c in cols}
        if len(lengths) > 1:
            raise DataError(f"{where}: the channels have different lengths ({sorted(lengths)}); a "
                            f"case needs one value per channel at every step.")
        frames = np.asarray(cols, "float32").T  # [T, D]
        if not np.isfinite(frames).all():
            raise DataError(f"{where}: missing (NaN) or infinite values; fill or drop them first.")
        records.append(Record(frames=frames, label=label, where=where))
    if not in_data:
        raise DataError(f"{path}: no '@data' line; is this a .ts (UCR/UEA) file?")
    return records


@register_data("ts")
class TsFile(FileSource):
    """UCR/UEA ``.ts`` files: labelled multichannel time series (frames ``[T, D]``)."""

    def read_file(self, path):
        return parse_ts(read_text(path), path)
