"""The ``timeseries`` data source: a table of time-stamped observations cut into forecasting windows.

A CSV (or Parquet, with pyarrow installed) file holds one row per time step: a time column, an
optional id column (several series in one file), the target column and optional covariate columns
(observed alongside the target: past values only). Calendar features (``calendar``: ``hour``,
``day_of_week``, ``day_of_year``, ``month``) are derived from the time column, each as a sine and
cosine pair. Each series is split by **time**, never shuffled: the last ``test_steps`` steps are the
test period, the ``valid_steps`` before them the validation period, the rest the training period.

A *window* ends at a forecast origin ``o`` (an index into one series): its input is the ``context``
steps before ``o`` and its target the ``horizon`` steps from ``o`` on. Training windows lie wholly
inside the training period; a validation (test) window's target lies wholly inside the validation
(test) period and its context may reach back into earlier periods (what a forecaster knows at the
origin). Each window is a :class:`seqkit.data.records.Record`:

* ``frames`` ``[context, D]`` float32: the *raw* target, covariates and calendar features
  (``D = 1 + len(covariates) + 2 * len(calendar)``), scaled by the head;
* ``target``: the ``horizon`` future target values (float, raw units);
* ``label``: the series id (``"series"`` without an id column);
* ``where``: ``file:line`` of the origin's row;
* in memory only (not kept in an export sample): ``times`` (``datetime64[ns]`` of the
  ``context + horizon`` steps), ``origin``, ``history`` (the whole series' target, float64; a
  baseline reads only ``history[:origin]``) and ``train_end`` (the series' training length).

Refused with a one-paragraph :class:`~seqkit.errors.DataError` naming the file and row, before
anything is written: a missing file or column, an unparseable time, times with a UTC offset beside
times without one (times whose offsets differ, as local times across a summer-time change, are read
as UTC), timestamps of a series out of order or repeated, uneven spacing (a missing time step), an empty cell or NaN (unless
``missing: interpolate``, which fills interior gaps of a series linearly and says how many), an
infinite value or one beyond float32's range, and a
series too short for ``context + horizon`` in its training period or ``horizon`` in its validation
and test periods.
"""

from __future__ import annotations

import os
from typing import Literal, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from seqkit.data.records import Record
from seqkit.errors import DataError
from seqkit.registry import register_data

CALENDAR = ("hour", "day_of_week", "day_of_year", "month")
#: the id of the one series of a file without an id column
ONE_SERIES = "series"


class TimeSeriesOptions(BaseModel):
    """Recipe keys under ``data`` of ``source: timeseries``.

    Attributes:
        path: the CSV (``.csv``, ``.tsv``) or Parquet (``.parquet``) file; relative paths are read
            from the recipe's folder.
        time_column: the time stamps (ISO 8601 or anything ``pandas.to_datetime`` reads).
        id_column: the series id (several series in one file); None: one series.
        target: the column forecast.
        covariates: further numeric columns fed as inputs (past values only).
        calendar: calendar features derived from the time column (sine/cosine pairs).
        context: input steps of a window (> 0); horizon: steps forecast (> 0).
        valid_steps, test_steps: steps of each series' validation and test periods (an integer), or
            that fraction of each series (a number below 1).
        stride: steps between training windows' origins; eval_stride: the same for validation and
            test windows (default: 1, every origin).
        missing: ``error`` (an empty cell or NaN is refused) or ``interpolate`` (interior gaps
            filled linearly in the step index; a gap at a series' start or end is still refused).
    """

    model_config = ConfigDict(extra="forbid")
    path: str
    time_column: str = "time"
    id_column: Optional[str] = None
    target: str = "value"
    covariates: list[str] = []
    calendar: list[Literal["hour", "day_of_week", "day_of_year", "month"]] = []
    context: int = Field(gt=0)
    horizon: int = Field(gt=0)
    valid_steps: float = Field(0.1, gt=0)
    test_steps: float = Field(0.1, gt=0)
    stride: int = Field(1, gt=0)
    eval_stride: int = Field(1, gt=0)
    missing: Literal["error", "interpolate"] = "error"

    @property
    def width(self) -> int:
        """``D``: input columns of a window (target, covariates, calendar sine/cosine pairs)."""
        return 1 + len(self.covariates) + 2 * len(self.calendar)


def calendar_features(times, calendar) -> np.ndarray:
    """``[T, 2 * len(calendar)]`` float32: ``sin(2 pi u), cos(2 pi u)`` of each feature's phase
    ``u`` in [0, 1): ``hour`` (of the day, minutes included), ``day_of_week`` (Monday 0),
    ``day_of_year`` (/ 365.25), ``month`` (January 0)."""
    import pandas as pd

    t = pd.DatetimeIndex(times)
    cols = []
    for name in calendar:
        if name == "hour":
            u = (t.hour + t.minute / 60.0) / 24.0
        elif name == "day_of_week":
            u = (t.dayofweek + (t.hour + t.minute / 60.0) / 24.0) / 7.0
        elif name == "day_of_year":
            u = (t.dayofyear - 1) / 365.25
        else:
            u = (t.month - 1) / 12.0
        u = np.asarray(u, np.float64)
        cols += [np.sin(2 * np.pi * u), np.cos(2 * np.pi * u)]
    return np.stack(cols, axis=1).astype(np.float32) if cols else np.zeros((len(t), 0), np.float32)


class Series:
    """One series of a table, sorted and checked.

    Attributes:
        id: the series id; times: ``datetime64[ns] [N]``; y: the target ``float64 [N]``;
        covariates: ``float64 [N, K]``; lines: each row's line in the file (header = line 1);
        name: the file's name for messages.
    """

    def __init__(self, sid, times, y, covariates, lines, name):
        self.id, self.times, self.y, self.covariates, self.lines, self.name = sid, times, y, covariates, lines, name

    def __len__(self):
        return len(self.y)

    def features(self, calendar) -> np.ndarray:
        """The raw input columns ``[N, D]`` float32: target, covariates, calendar features."""
        return np.concatenate([self.y[:, None], self.covariates,
                               calendar_features(self.times, calendar)], axis=1).astype(np.float32)

    def where(self, i: int) -> str:
        return f"{self.name}:{self.lines[i]}"


def _read_table(path: str, name: str, text: str | None = None):
    import io

    import pandas as pd

    if text is None and not os.path.isfile(path):
        raise DataError(f"data.path: no such file '{path}'. Fix the path in the recipe (relative paths "
                        f"are read from the recipe's folder) or pass --set data.path=FILE.")
    try:
        if text is None and path.endswith(".parquet"):
            try:
                return pd.read_parquet(path)
            except ImportError as exc:
                raise DataError(f"{name}: reading Parquet needs pyarrow: `pip install pyarrow` "
                                f"(or save the table as CSV).") from exc
        sep = "\t" if (path or "").endswith(".tsv") else ","
        src = io.StringIO(text) if text is not None else path
        return pd.read_csv(src, sep=sep, dtype=str, keep_default_na=False, skip_blank_lines=True)
    except DataError:
        raise
    except Exception as exc:  # pandas' parser errors name the line
        raise DataError(f"{name}: cannot read the table ({type(exc).__name__}: {exc}). A "
                        f"timeseries file is CSV with a header row (or Parquet).") from exc


#: The largest magnitude a float32 holds; a value beyond it (or infinite) is refused.
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _numbers(frame, col, name, lines, missing):
    """``float64 [N]`` of one column; NaN where empty/NaN; non-numbers, infinities and magnitudes
    beyond float32's refused."""
    import pandas as pd

    raw = frame[col]
    if raw.dtype == object or str(raw.dtype).startswith("str"):
        s = raw.astype(str).str.strip()
        empty = s.eq("") | s.str.lower().isin(["nan", "na", "null", "none"])
        num = pd.to_numeric(s.where(~empty), errors="coerce")
        bad = num.isna() & ~empty
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataError(f"{name}:{lines[i]}: column '{col}' holds {s.iloc[i]!r}, not a number. "
                            f"Fix the cell (an empty cell is a missing value).")
        out = num.to_numpy(np.float64)
    else:
        out = pd.to_numeric(raw, errors="coerce").to_numpy(np.float64)
    big = np.abs(np.nan_to_num(out, nan=0.0, posinf=np.inf, neginf=np.inf)) > FLOAT32_MAX
    if big.any():
        i = int(np.flatnonzero(big)[0])
        raise DataError(f"{name}:{lines[i]}: column '{col}' holds {raw.iloc[i]!r}, not a finite number "
                        f"a model can read (float32 holds magnitudes up to 3.4e38). Fix the cell, or "
                        f"leave it empty for a missing value.")
    return out


def frame_as_table(frame, time_column: str):
    """A ``pandas.DataFrame`` given in memory as the all-text table :func:`_read_table` reads from a
    file: every cell as its text (a float's shortest round-trip form, a time stamp's ISO form), a
    missing cell (NaN, None, NaT, ``pd.NA``) empty. A time column held as the index is taken as a
    column."""
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise DataError(f"expected a pandas DataFrame, got {type(frame).__name__}.")
    if time_column not in frame.columns and frame.index.name == time_column:
        frame = frame.reset_index()
    cells = frame.astype(object)
    return cells.where(frame.notna(), "").astype(str).reset_index(drop=True)


def _first_uneven_step(t) -> tuple[int, str]:
    """``(k, usual)``: the first step ``t[k] -> t[k + 1]`` off the series' usual step, and that
    step in words. The usual step is the calendar frequency pandas infers from the longest
    evenly spaced start of the series (months and years have steps of different lengths: a
    monthly series missing one month is blamed on the month after the gap, not on February);
    without one, the median step."""
    import pandas as pd

    index = pd.DatetimeIndex(t)
    lo, hi = 3, len(t)  # the longest prefix with an inferable frequency (binary search)
    freq = pd.infer_freq(index[:3])
    if freq is not None:
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if pd.infer_freq(index[:mid]) is not None:
                lo = mid
            else:
                hi = mid - 1
        freq = pd.infer_freq(index[:lo])
        off = frequency_offset(freq)
        for k in range(len(t) - 1):
            if index[k] + off != index[k + 1]:
                return k, freq
    step = np.diff(t).astype(np.int64)
    med = np.median(step)
    k = int(np.flatnonzero(step != med)[0]) if (step != med).any() else 0
    return k, str(pd.Timedelta(int(med), "ns"))


def _offset_times(text, name: str, column: str, lines):
    """Time stamps that carry different UTC offsets (local times across a summer-time change), as
    UTC; refused when some carry an offset and others none (their instant is unknown)."""
    import re

    import pandas as pd

    offset = text.str.contains(r"(?:Z|[+-]\d{2}:?\d{2})$", flags=re.IGNORECASE, regex=True).to_numpy()
    if not offset.all():
        i, j = int(np.flatnonzero(offset)[0]), int(np.flatnonzero(~offset)[0])
        raise DataError(f"{name}:{lines[j]}: time {text.iloc[j]!r} in column '{column}' has no UTC "
                        f"offset, while row {lines[i]} has one ({text.iloc[i]!r}), so the two cannot "
                        f"be put on one time line. Write every time with its offset, or none.")
    return pd.to_datetime(text, errors="coerce", format="mixed", utc=True)


def read_series(options: TimeSeriesOptions, path: str, name: str | None = None, *, text: str | None = None,
                missing: str | None = None, frame=None) -> list[Series]:
    """Read and check a table into series (see the module docstring for what is refused).

    Args:
        options: the source's recipe keys (columns, calendar, missing-value policy).
        path: the file (used for its format when ``text`` is given); name: how messages name it.
        text: the table's text instead of reading ``path`` (prediction input, streams).
        missing: override ``options.missing``.
        frame: a ``pandas.DataFrame`` instead of a file (:func:`frame_as_table`); messages name a
            row ``NAME:N``, ``N`` its position (``frame.iloc[N]``).

    Returns:
        The series in order of first appearance, each sorted as in the file.

    Raises:
        seqkit.errors.DataError: see the module docstring.
    """
    import pandas as pd

    name = name or os.path.basename(path)
    missing = missing or options.missing
    given = frame is not None
    frame = frame_as_table(frame, options.time_column) if given else _read_table(path, name, text)
    cols = [options.time_column, options.target, *options.covariates] + (
        [options.id_column] if options.id_column else [])
    absent = [c for c in cols if c not in frame.columns]
    if absent:
        raise DataError(f"{name}: no column {', '.join(repr(c) for c in absent)} (the file has "
                        f"{', '.join(map(repr, frame.columns))}). Name the columns with data.time_column, "
                        f"data.target, data.covariates and data.id_column.")
    if len(frame) == 0:
        raise DataError(f"{name}: no rows below the header.")
    # a file's header is line 1 (a CSV without blank lines); a DataFrame's rows by position
    lines = np.arange(len(frame)) + (0 if given else 2)
    try:
        times = pd.to_datetime(frame[options.time_column].astype(str).str.strip(), errors="coerce",
                               format="mixed", utc=False) \
            if frame[options.time_column].dtype == object or str(frame[options.time_column].dtype).startswith("str") \
            else pd.to_datetime(frame[options.time_column], errors="coerce")
    except (ValueError, TypeError):  # different UTC offsets (summer time), or offsets beside none
        times = _offset_times(frame[options.time_column].astype(str).str.strip(), name,
                              options.time_column, lines)
    if getattr(times.dt, "tz", None) is not None:
        times = times.dt.tz_convert("UTC").dt.tz_localize(None)
    bad = times.isna().to_numpy()
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"{name}:{lines[i]}: time {frame[options.time_column].iloc[i]!r} in column "
                        f"'{options.time_column}' is not a time stamp. Write times as ISO 8601, e.g. "
                        f"2000-06-05 00:30:00.")
    y = _numbers(frame, options.target, name, lines, missing)
    cov = np.stack([_numbers(frame, c, name, lines, missing) for c in options.covariates], axis=1) \
        if options.covariates else np.zeros((len(frame), 0))
    ids = frame[options.id_column].astype(str).to_numpy() if options.id_column else np.full(len(frame), ONE_SERIES)
    t_all = times.to_numpy("datetime64[ns]")
    out = []
    for sid in dict.fromkeys(ids):
        rows = np.flatnonzero(ids == sid)
        t, ln = t_all[rows], lines[rows]
        step = np.diff(t)
        back = np.flatnonzero(step <= np.timedelta64(0))
        if len(back):
            k = int(back[0])
            what = "repeats" if step[k] == np.timedelta64(0) else "comes before"
            raise DataError(f"{name}:{ln[k + 1]}: time {pd.Timestamp(t[k + 1])} {what} the time of row "
                            f"{ln[k]} ({pd.Timestamp(t[k])})" + (f" in series '{sid}'" if options.id_column else "")
                            + ". Rows of a series must have strictly increasing times: sort the file by "
                              "time and remove duplicate rows.")
        if len(t) > 2 and pd.infer_freq(pd.DatetimeIndex(t)) is None:
            k, usual = _first_uneven_step(t)
            raise DataError(f"{name}:{ln[k + 1]}: the time step from row {ln[k]} ({pd.Timestamp(t[k])}) to "
                            f"row {ln[k + 1]} ({pd.Timestamp(t[k + 1])}) differs from the series' usual "
                            f"step ({usual}): a missing time step or uneven spacing"
                            + (f" in series '{sid}'" if options.id_column else "") + ". Add the missing "
                              "rows (an empty target cell, with data.missing: interpolate, fills them).")
        ys, cs = y[rows].copy(), cov[rows].copy()
        for col, v in [(options.target, ys)] + [(c, cs[:, j]) for j, c in enumerate(options.covariates)]:
            nan = np.isnan(v)
            if not nan.any():
                continue
            i = int(np.flatnonzero(nan)[0])
            if missing != "interpolate":
                raise DataError(f"{name}:{ln[i]}: column '{col}' is empty or NaN. Fill it, or set "
                                f"data.missing: interpolate to fill interior gaps linearly.")
            if nan[0] or nan[-1]:
                j = 0 if nan[0] else len(v) - 1
                raise DataError(f"{name}:{ln[j]}: column '{col}' is empty or NaN at the "
                                f"{'start' if j == 0 else 'end'} of "
                                + (f"series '{sid}'" if options.id_column else "the series")
                                + "; data.missing: interpolate fills interior gaps only. Drop those rows.")
            idx = np.arange(len(v))
            v[nan] = np.interp(idx[nan], idx[~nan], v[~nan])
        out.append(Series(sid, t, ys, cs, ln, name))
    return out


def frequency_offset(freq: str | None):
    """The pandas ``DateOffset`` of a frequency string (``"D"``, ``"30min"``, ``"MS"``, ...), or
    None when there is none or pandas cannot read it: the one place a frequency becomes a step."""
    import pandas as pd

    if not freq:
        return None
    try:
        return pd.tseries.frequencies.to_offset(freq)
    except (ValueError, TypeError):
        return None


def period_steps(value: float, n: int) -> int:
    """Steps of a period: ``value`` itself when >= 1, else ``round(value * n)``."""
    return int(value) if value >= 1 else int(round(value * n))


def frequency(series: list[Series]) -> str | None:
    """The pandas frequency string of the series' time steps (e.g. ``30min``, ``W-SAT``)."""
    import pandas as pd

    for s in series:
        if len(s) > 2:
            return pd.infer_freq(pd.DatetimeIndex(s.times))
    return None


def windows(s: Series, options: TimeSeriesOptions, start: int, stop: int, stride: int,
            feats: np.ndarray | None = None, train_end: int | None = None) -> list[Record]:
    """Records of the windows of ``s`` whose targets lie in ``[start, stop)`` (origins
    ``o = start, start + stride, ...`` with ``o >= context`` and ``o + horizon <= stop``)."""
    C, H = options.context, options.horizon
    feats = s.features(options.calendar) if feats is None else feats
    out = []
    for o in range(max(start, C), stop - H + 1, stride):
        r = Record(frames=feats[o - C:o].copy(), target=[float(v) for v in s.y[o:o + H]],
                   label=str(s.id), where=s.where(o))
        r.times, r.origin, r.history, r.train_end = s.times[o - C:o + H], o, s.y, train_end
        out.append(r)
    return out


@register_data("timeseries")
class TimeSeriesSource:
    """Forecasting windows of a table of time series (see the module docstring).

    Args:
        options: :class:`TimeSeriesOptions`; recipe: the recipe (relative paths).
    """

    Options = TimeSeriesOptions
    tokenizes_text = False

    def __init__(self, options: TimeSeriesOptions, recipe=None):
        self.options, self.recipe = options, recipe

    @classmethod
    def check_recipe(cls, options, config) -> list:
        """The ``forecast`` head reads these windows; other heads cannot."""
        if config.head.type != "forecast":
            return [("source", f"'timeseries' gives forecasting windows for head.type forecast; this "
                               f"recipe's head is {config.head.type}.")]
        return []

    def path(self) -> str:
        """The table's path (relative paths read from the recipe's folder)."""
        p = self.options.path
        return self.recipe.resolve_path(p) if self.recipe is not None else p

    def describe(self) -> str:
        o = self.options
        return (f"timeseries {self.path()} (target {o.target}, context {o.context}, horizon "
                f"{o.horizon}, split by time)")

    def split_points(self, s: Series) -> tuple[int, int]:
        """``(train_end, valid_end)`` indices of series ``s``.

        Raises:
            seqkit.errors.DataError: a period too short for its windows (names the series' row).
        """
        o, n = self.options, len(s)
        n_valid, n_test = period_steps(o.valid_steps, n), period_steps(o.test_steps, n)
        train_end, valid_end = n - n_valid - n_test, n - n_test
        need = o.context + o.horizon
        label = f"series '{s.id}'" if o.id_column else "the series"
        if train_end < need or n_valid < o.horizon or n_test < o.horizon:
            raise DataError(f"{s.where(0)}: {label} has {n} steps: {max(train_end, 0)} for training, "
                            f"{n_valid} for validation, {n_test} for test; it needs at least "
                            f"context + horizon = {need} for training and horizon = {o.horizon} for each "
                            f"of the others. Lower data.context / data.horizon / data.valid_steps / "
                            f"data.test_steps, or drop the series.")
        return train_end, valid_end

    def load(self) -> dict:
        """``{"train", "valid", "test"}`` windows of every series, split by time (never shuffled).

        Raises:
            seqkit.errors.DataError: see the module docstring.
        """
        o = self.options
        series = read_series(o, self.path(), os.path.basename(self.path()))
        out = {"train": [], "valid": [], "test": []}
        for s in series:
            train_end, valid_end = self.split_points(s)
            feats = s.features(o.calendar)
            out["train"] += windows(s, o, o.context, train_end, o.stride, feats, train_end)
            out["valid"] += windows(s, o, train_end, valid_end, o.eval_stride, feats, train_end)
            out["test"] += windows(s, o, valid_end, len(s), o.eval_stride, feats, train_end)
        return out
