"""``seqkit stream`` of a forecast export: observations in, a line at a time, forecasts out as
they come.

The input is a CSV table like the training file (a header row, then one observation a row; rows
of several series may interleave). Each row is checked as it arrives -- its fields, its time (after
its series' previous row, one time step later when the export knows the step), its numbers (a
stream cannot interpolate: an empty cell is refused) -- then scaled with its series' training
statistics from the export's metadata and stepped through the export, each series with its own
state. From a series' ``context``-th row on, each row prints ``series<TAB>time<TAB>`` and the
``horizon`` point forecasts (space-separated, the series' units) before the next row is read.
"""

from __future__ import annotations

import csv
from typing import Iterator

import numpy as np

from seqkit.errors import DataError, SeqkitError


def _row(line: str) -> list[str]:
    return next(csv.reader([line]), [])


def forecast_stream(export: str, metadata: dict, request) -> Iterator[str]:
    """Yield one line of forecasts per observation (see the module docstring).

    Args:
        export: the export (directory or ``.tflite``); metadata: its validated metadata;
        request: a :class:`seqkit.runtime.request.StreamRequest` (its ``lines()``).

    Raises:
        seqkit.errors.SeqkitError: metadata that does not describe the model (named field).
        seqkit.errors.DataError: an empty input, a missing column, a row with the wrong number of
            fields, a time that does not parse, comes before its series' previous one or skips a
            step, a cell that is not a number or empty, a series the export has no scaling for:
            naming the input and line.
    """
    import pandas as pd

    from seqkit.runtime.streaming import StreamingModel
    from seqkit_forecast.head import Scaler, _iso
    from seqkit_forecast.metadata import read_forecast_metadata
    from seqkit_forecast.source import ONE_SERIES, calendar_features, frequency_offset

    fc = read_forecast_metadata(metadata, export)  # untrusted: checked before use
    C, H, Q, p = fc.context, fc.horizon, max(1, len(fc.quantiles)), fc.point_level
    width = 1 + len(fc.covariates) + 2 * len(fc.calendar) + (4 if fc.smoothing is not None else 0)
    shape = (metadata.get("input") or {}).get("shape") or []
    if shape and shape[-1] != width:
        raise SeqkitError(f"{export}: the model reads frames of {shape[-1]} columns; its 'forecast' "
                          f"metadata describes {width} (target, covariates, calendar pairs, fitted "
                          f"smoothing). The metadata was edited or copied from another export; export "
                          f"the run again.")
    scaler = Scaler({k: {"mean": v.mean, "std": v.std} for k, v in fc.scaling.items()},
                    frequency=fc.frequency, transform=fc.transform, smoothing=fc.smoothing)
    step = frequency_offset(fc.frequency)
    rt = StreamingModel(export)
    explicit = hasattr(rt, "states") and isinstance(rt.states, dict)
    name = request.name or (request.input_path if request.input_path not in (None, "-") else "<stdin>")
    lines = iter(request.lines())
    header = None
    for number, line in enumerate(lines, start=1):
        if line.strip():
            header = [h.strip() for h in _row(line)]
            break
    if header is None:
        raise DataError(f"{name}: no header row; a forecast stream reads a CSV table with the columns "
                        f"{fc.time_column}, {fc.target}" + (f", {fc.id_column}" if fc.id_column else "") + ".")
    need = [fc.time_column, fc.target, *fc.covariates] + ([fc.id_column] if fc.id_column else [])
    absent = [c for c in need if c not in header]
    if absent:
        raise DataError(f"{name}:{number}: no column {', '.join(map(repr, absent))} in the header "
                        f"({', '.join(map(repr, header))}); the export reads {', '.join(map(repr, need))}.")
    at = {c: header.index(c) for c in need}
    seen: dict = {}  # series -> (last time, rows seen, states)
    for number, line in enumerate(lines, start=number + 1):
        if not line.strip():
            continue
        row = _row(line)
        if len(row) != len(header):
            raise DataError(f"{name}:{number}: {len(row)} fields; the header has {len(header)}.")
        sid = row[at[fc.id_column]].strip() if fc.id_column else ONE_SERIES
        where = f"{name}:{number}"
        try:
            t = pd.Timestamp(row[at[fc.time_column]].strip())
        except (ValueError, TypeError):
            t = pd.NaT
        if pd.isna(t):
            raise DataError(f"{where}: time {row[at[fc.time_column]]!r} in column '{fc.time_column}' is "
                            f"not a time stamp. Write times as ISO 8601, e.g. 2000-06-05 00:30:00.")
        if t.tzinfo is not None:
            t = t.tz_convert("UTC").tz_localize(None)
        values = []
        for col in [fc.target, *fc.covariates]:
            cell = row[at[col]].strip()
            try:
                v = float(cell)
            except ValueError:
                v = float("nan")
            if not np.isfinite(v):
                raise DataError(f"{where}: column '{col}' holds {cell!r}, not a finite number. A stream "
                                f"cannot fill gaps: give every observation (or fill it before streaming).")
            values.append(v)
        last, count, states = seen.get(sid, (None, 0, None))
        if last is not None and t <= last:
            raise DataError(f"{where}: time {t} of series '{sid}' is not after its previous row's ({last}). "
                            f"Stream each series' rows in time order, once each.")
        if last is not None and step is not None and last + step != t:
            raise DataError(f"{where}: time {t} of series '{sid}' is not one step ({fc.frequency}) after "
                            f"its previous row ({last}): a missing time step. Stream every step.")
        frame = np.concatenate([values, calendar_features([t], fc.calendar)[0]])[None, :]
        x = scaler.frames(frame, sid, where)
        if explicit:
            if states is None:
                rt.reset(1)
            else:
                rt.states = states
        elif seen and sid not in seen:
            raise SeqkitError(f"{where}: series '{sid}' after series '{next(iter(seen))}': this export "
                              f"keeps its state inside the model (--state internal), one series at a "
                              f"time. Stream one series per run, or export without --state internal.")
        out = np.asarray(rt.step(x))[0]
        if out.size != H * Q:
            raise SeqkitError(f"{export}: the model returns {out.size} forecast columns; its metadata says "
                              f"horizon {H} x {Q} level(s). The metadata was edited or copied from another "
                              f"export; export the run again.")
        seen[sid] = (t, count + 1, dict(rt.states) if explicit else None)
        if count + 1 < C:
            continue
        vals = scaler.unscale(out.reshape(H, Q)[:, p], sid, where)
        yield f"{sid}\t{_iso(t)}\t" + " ".join(f"{v:.5f}" for v in vals) + "\n"
