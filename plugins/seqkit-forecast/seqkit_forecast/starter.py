"""``seqkit init --task forecast``: a starter recipe for the user's time-series table
(:meth:`seqkit.heads.base.Head.starter`).

From the first rows of a CSV / TSV / Parquet file: the **time column** is the first column whose
cells all read as time stamps (a column named ``time``, ``date``, ``timestamp``, ``datetime``,
``ds``, ``month`` or ``week`` first); the **id column**, when there is one, a non-numeric column
whose values repeat (several series in one file); the **target** a numeric column named like one
(``value``, ``y``, ``target``, ``sales``, ``demand``, ``load``, ...) or else the first numeric
column. The time step (pandas' inferred frequency of the first series) sets the season, the
calendar features, the context, the horizon and the validation and test periods:

==============  ======  ===================  =======  =======  ===============
step            season  calendar             context  horizon  valid / test
==============  ======  ===================  =======  =======  ===============
hourly          24      hour, day_of_week    168      24       10% each
half-hourly     48      hour, day_of_week    336      48       10% each
daily           7       day_of_week, month   56       14       10% each
weekly          52      day_of_year          104      13       10% each
monthly         12      month                36       12       10% each
quarterly       4       month                16       4        10% each
other           1       (none)               32       8        10% each
==============  ======  ===================  =======  =======  ===============

each shortened to fit the first series (context + horizon within its training period). Other
numeric columns are named in a comment, not used: a covariate must be known as far as the
forecast looks, which only the user can tell.
"""

from __future__ import annotations

import os

from seqkit.starter import InitError

TIME_NAMES = ("time", "date", "timestamp", "datetime", "ds", "month", "week", "day", "period")
TARGET_NAMES = ("value", "y", "target", "sales", "demand", "load", "demand_mw", "count", "volume", "price")
SAMPLE_ROWS = 100_000


def _plan(freq: str | None):
    """``(season, calendar, context, horizon)`` for a pandas frequency (the table of the module
    docstring), by the offset's kind: hours, half-hours, days, weeks, months, quarters."""
    import pandas as pd

    from seqkit_forecast.source import frequency_offset

    other = (1, [], 32, 8)
    off = frequency_offset(freq)
    if off is None:
        return other
    o = pd.offsets
    if isinstance(off, o.Hour) and off.n == 1:
        return 24, ["hour", "day_of_week"], 168, 24
    if isinstance(off, o.Minute) and off.n == 30:
        return 48, ["hour", "day_of_week"], 336, 48
    if isinstance(off, o.Day) and off.n == 1:
        return 7, ["day_of_week", "month"], 56, 14
    if isinstance(off, o.Week) and off.n == 1:
        return 52, ["day_of_year"], 104, 13
    if isinstance(off, (o.MonthBegin, o.MonthEnd)) and off.n == 1:
        return 12, ["month"], 36, 12
    if isinstance(off, (o.QuarterBegin, o.QuarterEnd)) and off.n == 1:
        return 4, ["month"], 16, 4
    return other


def forecast_starter(paths: list[str], rel) -> dict:
    """The starter sections of a forecaster for a time-series table (see the module docstring).

    Raises:
        InitError: not a table, no time column, no numeric column, or a series too short.
    """
    import pandas as pd

    path = paths[0]
    ext = os.path.splitext(path)[1].lower()
    if os.path.isdir(path) or ext not in (".csv", ".tsv", ".parquet"):
        raise InitError(f"{path}: --task forecast reads one table (.csv, .tsv or .parquet) with a time "
                        f"column and a numeric target column.")
    try:
        if ext == ".parquet":
            frame = pd.read_parquet(path).head(SAMPLE_ROWS)
        else:
            frame = pd.read_csv(path, sep="\t" if ext == ".tsv" else ",", nrows=SAMPLE_ROWS)
    except Exception as exc:  # pandas' parser errors name the line
        raise InitError(f"{path}: cannot read the table ({type(exc).__name__}: {exc}).") from None
    cols = [str(c) for c in frame.columns]
    frame.columns = cols
    if len(frame) < 3 or len(cols) < 2:
        raise InitError(f"{path}: a time series table needs a header, a time column, a numeric column "
                        f"and rows; found columns {cols} and {len(frame)} rows.")

    def times(c):
        try:
            t = pd.to_datetime(frame[c].astype(str), errors="coerce", format="mixed")
        except (ValueError, TypeError):
            return None
        return t if t.notna().all() and not pd.api.types.is_numeric_dtype(frame[c]) else None

    ordered = sorted(cols, key=lambda c: (c.lower() not in TIME_NAMES, cols.index(c)))
    time_col = next((c for c in ordered if times(c) is not None), None)
    if time_col is None:
        raise InitError(f"{path}: no column of time stamps among {cols}; a forecast needs one (ISO 8601, "
                        f"e.g. 2024-01-31 or 2024-01-31 13:30).")
    numeric = [c for c in cols if c != time_col and pd.api.types.is_numeric_dtype(frame[c])]
    if not numeric:
        raise InitError(f"{path}: no numeric column besides the time '{time_col}' among {cols}; a forecast "
                        f"needs the values to forecast.")
    target = next((c for c in numeric if c.lower() in TARGET_NAMES), numeric[0])
    id_col = None
    if times(time_col).duplicated().any():  # several series: the column that tells their rows apart
        stamps_all = times(time_col)
        candidates = sorted((c for c in cols if c not in (time_col, target)),
                            key=lambda c: (pd.api.types.is_numeric_dtype(frame[c]), cols.index(c)))
        id_col = next((c for c in candidates if frame[c].nunique() < len(frame)
                       and not pd.DataFrame({"t": stamps_all, "c": frame[c]}).duplicated().any()), None)
        if id_col is None:
            raise InitError(f"{path}: time stamps repeat in '{time_col}', and no column tells the rows of "
                            f"one time apart (a series id); sort the file by time and remove duplicate "
                            f"rows, or add an id column.")
    first = frame[frame[id_col] == frame[id_col].iloc[0]] if id_col else frame
    stamps = pd.DatetimeIndex(times(time_col)[first.index]).sort_values()
    freq = pd.infer_freq(stamps) if len(stamps) > 2 else None
    season, calendar, context, horizon = _plan(freq)
    n = len(first)
    held = max(1, n // 10)
    train = n - 2 * held
    if train < 4:
        raise InitError(f"{path}: the first series has {n} rows; a forecast needs room for a training "
                        f"period and validation and test periods (about 20 rows at the least).")
    horizon = max(1, min(horizon, held))
    context = max(2, min(context, train - horizon))
    if season > 1 and context < 2 * season:
        season = 1 if context < 4 else season
    data = {"source": "timeseries", "path": rel(path), "time_column": time_col}
    if id_col:
        data["id_column"] = id_col
    data.update({"target": target, "calendar": calendar, "context": context, "horizon": horizon,
                 "valid_steps": held, "test_steps": held})
    unused = [c for c in numeric if c not in (target, id_col)]
    head = {"loss": "mae", "season": season if season <= context else 1}
    out = {"data": data, "head": head, "model": {"cell": "gru", "units": 32, "dropout": 0.0, "embedding_dim": None},
           "training": {"epochs": 20}}
    if unused:
        out["notes"] = [f"Numeric columns not used: {', '.join(unused)}. Those known as far ahead as the "
                        f"forecast looks can be inputs: data.covariates."]
    return out
