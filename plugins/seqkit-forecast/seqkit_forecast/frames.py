"""pandas in, pandas out: ``Run.predict(frame)`` of a forecast run.

* :func:`read_frame` reads a ``pandas.DataFrame`` holding the columns of the training table (time,
  optional id, target, covariates) as :meth:`ForecastHead.read_inputs` reads the same table from
  a file: the last ``data.context`` rows of each series, one record per series;
* :func:`results_frame` turns the head's prediction dicts into one row per series and step.
"""

from __future__ import annotations

from seqkit.data.records import Record
from seqkit.errors import DataError

from seqkit_forecast.source import frequency_offset, read_series


def read_frame(head, frame, name: str = "<DataFrame>") -> list:
    """One record per series of ``frame``: its last ``data.context`` rows (raw input columns
    ``frames [context, D]`` float32, ``times`` ``datetime64[ns] [context]``, ``label`` the series
    id).

    Args:
        head: the loaded :class:`seqkit_forecast.head.ForecastHead`; frame: a ``pandas.DataFrame``
            (a time column held as the index is read as the column); name: how messages name it.

    Raises:
        seqkit.errors.DataError: a missing column, a bad cell, unsorted or uneven times (the row
            named ``NAME:N``, ``N`` its position), a series with fewer than ``data.context`` rows,
            or a series the run was not trained on.
    """
    return last_windows(head, read_series(head.data, "input.csv", name, frame=frame))


def last_windows(head, series: list) -> list:
    """One record per series of ``series``: its last ``data.context`` rows (``frames``, ``times``),
    labelled with the series id and named by its last row.

    Raises:
        seqkit.errors.DataError: a series with fewer than ``data.context`` rows, rows spaced other
            than the run's frequency, or a series the run was not trained on.
    """
    import pandas as pd

    C, out = head.data.context, []
    freq = head.scaler.frequency
    step = frequency_offset(freq)  # checked when the run loaded
    for s in series:
        if len(s) < C:
            raise DataError(f"{s.where(0)}: series '{s.id}' has {len(s)} rows; a forecast reads the "
                            f"last data.context = {C} rows. Give at least {C} rows.")
        # rows are evenly spaced (read_series); the first step says whether they are the run's
        if step is not None and len(s) > 1 and pd.Timestamp(s.times[0]) + step != pd.Timestamp(s.times[1]):
            raise DataError(f"{s.where(1)}: time {pd.Timestamp(s.times[1])} of series '{s.id}' is not one "
                            f"step ({freq}) after its previous row ({pd.Timestamp(s.times[0])}): the run "
                            f"was trained on steps of {freq}, and a forecast from rows of another "
                            f"spacing would be stamped and read as if they were. Give the input at the "
                            f"run's frequency.")
        r = Record(frames=s.features(head.data.calendar)[-C:], label=str(s.id), where=s.where(len(s) - 1))
        head.scaler.of(r.label, r.where)  # a series the run does not know: named here
        r.times = s.times[-C:]
        out.append(r)
    return out


def results_frame(results: list):
    """The prediction dicts (``series``, ``origin``, ``times [H]``, ``forecast [H]``, optional
    ``quantiles {level: [H]}``) as a ``pandas.DataFrame`` of ``len(results) * H`` rows, columns
    ``series`` (str), ``origin`` (the last observed time), ``time`` (the forecast step's time;
    both ``datetime64[ns]``, or ``+k`` strings when the run's frequency is unknown), ``step``
    (int, 1..H), ``forecast`` (float64, the point forecast) and one float64 column ``q<level>``
    per quantile level (e.g. ``q0.1``, ``q0.5``, ``q0.9``). The numbers are those of the dicts."""
    import pandas as pd

    rows = []
    for res in results:
        qs = res.get("quantiles") or {}
        for k, t in enumerate(res["times"]):
            rows.append({"series": res["series"], "origin": res["origin"], "time": t, "step": k + 1,
                         "forecast": res["forecast"][k], **{f"q{lv}": v[k] for lv, v in qs.items()}})
    levels = [f"q{lv}" for lv in (results[0].get("quantiles") or {})] if results else []
    df = pd.DataFrame(rows, columns=["series", "origin", "time", "step", "forecast", *levels])
    df["origin"] = pd.to_datetime(df["origin"])
    if not df["time"].astype(str).str.startswith("+").any():
        df["time"] = pd.to_datetime(df["time"])
    df["step"] = df["step"].astype("int64")
    for c in ["forecast", *levels]:
        df[c] = df[c].astype("float64")
    return df
