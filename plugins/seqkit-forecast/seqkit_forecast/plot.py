"""Pictures of a forecast run (matplotlib, the ``plot`` extra; seqkit's Agg backend):

* :func:`draw_prediction` -- ``seqkit predict --plot`` / ``Run.predict(plot=)``: per series, the
  input's last ``context`` rows, the forecast and its quantile bands;
* :func:`draw_backtest` -- the ``backtest`` picture of ``seqkit plot`` / ``Run.plot``: per series,
  the test period with the forecasts of evenly spread evaluation origins (each with the band of
  its outer quantiles), and the numbers drawn in a JSON beside it.

Files go through seqkit's output rule (:class:`seqkit.outputs.FileOutputs`, checked by the caller
before the work): staged, then renamed, the PNG marked as seqkit's.
"""

from __future__ import annotations

import json
import math

import numpy as np

from seqkit.diagnostics.plots import json_safe
from seqkit.errors import SeqkitError

#: at most this many series (panels) are drawn; the title says how many there were
MAX_PANELS = 12
#: at most this many evaluation origins are drawn per series in a backtest
MAX_ORIGINS = 8


def _save(fig, plt, outputs, path: str, data: dict | None = None) -> None:
    """Write the figure to ``path`` (and ``data`` to its JSON when given) through ``outputs``."""
    from seqkit.diagnostics.plots import json_path
    from seqkit.outputs import json_mark, png_metadata

    writers = {path: lambda tmp: fig.savefig(tmp, dpi=110, format="png", metadata=png_metadata())}
    if data is not None:
        def js(tmp):
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({**json_mark("plot"), **json_safe(data)}, f, indent=1)

        writers[json_path(path)] = js
    try:
        outputs.write(writers)
    finally:
        plt.close(fig)


def _grid(plt, n: int):
    ncol = 1 if n == 1 else 2
    nrow = math.ceil(n / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(7.5 * ncol, 3.3 * nrow), squeeze=False)
    for k in range(n, nrow * ncol):
        axes[k // ncol][k % ncol].axis("off")
    return fig, [axes[k // ncol][k % ncol] for k in range(n)]


def _dates(ax) -> None:
    """Slanted x tick labels on every panel (each panel has its own time range: never hidden)."""
    ax.tick_params(axis="x", labelrotation=25)


def _when(iso: str) -> str:
    """``2024-01-15T23:00:00 -> 2024-01-15 23:00``; a midnight time stamp -> the date alone."""
    import pandas as pd

    t = pd.Timestamp(iso)
    return t.strftime("%Y-%m-%d") if t == t.normalize() else t.strftime("%Y-%m-%d %H:%M")


def band_pairs(quantiles: list) -> list[tuple[int, int]]:
    """``[(lower index, upper index)]`` of the symmetric quantile bands, outermost first:
    ``[0.1, 0.5, 0.9] -> [(0, 2)]``; ``[0.05, 0.25, 0.5, 0.75, 0.95] -> [(0, 4), (1, 3)]``."""
    Q = len(quantiles)
    return [(i, Q - 1 - i) for i in range(Q // 2)]


def _bands(ax, x, levels: dict, quantiles: list, color, label: bool = True) -> None:
    """Shade the quantile bands of one forecast (``levels``: ``{level text: [H]}``)."""
    cols = list(levels.values())
    pairs = band_pairs(quantiles)
    for k, (lo, hi) in enumerate(pairs):
        ax.fill_between(x, cols[lo], cols[hi], color=color, alpha=0.15 + 0.15 * k, linewidth=0,
                        label=f"q{quantiles[lo]:g} - q{quantiles[hi]:g}" if label else None)


def _axis(times: list, history_times) -> tuple:
    """``(x of the history, x of the forecast)``: time stamps, or step numbers (the history at
    ``-C+1 .. 0``, the forecast at ``1 .. H``) when the run's frequency is unknown (``+k`` times)."""
    import pandas as pd

    if any(str(t).startswith("+") for t in times):
        C = len(history_times)
        return np.arange(1 - C, 1), np.arange(1, len(times) + 1)
    return pd.DatetimeIndex(history_times), pd.to_datetime(list(times))


def draw_prediction(head, results: list, records: list, path: str, outputs) -> None:
    """Per series (at most :data:`MAX_PANELS`), the input's last ``data.context`` target values,
    the point forecast of the next ``horizon`` steps and its quantile bands, into the PNG ``path``.

    Args:
        head: the :class:`seqkit_forecast.head.ForecastHead`; results: its ``predict`` dicts;
        records: the records they answer (``frames [C, D]``, column 0 the raw target; ``times``);
        path: the PNG; outputs: its checked :class:`seqkit.outputs.FileOutputs`.

    Raises:
        seqkit.errors.SeqkitError: matplotlib missing; the file cannot be written.
    """
    from seqkit.diagnostics.plots import pyplot

    plt = pyplot()
    shown = list(zip(results, records))[:MAX_PANELS]
    fig, axes = _grid(plt, len(shown))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (res, rec) in zip(axes, shown):
        xh, xf = _axis(res["times"], rec.times)
        ax.plot(xh, np.asarray(rec.frames, float)[:, 0], color="0.25", linewidth=1.2, label="history")
        if res.get("quantiles"):
            _bands(ax, xf, res["quantiles"], head.quantiles, colors[0])
        ax.plot(xf, res["forecast"], color=colors[0], linewidth=1.6, label="forecast")
        ax.axvline(xh[-1], color="0.6", linestyle=":", linewidth=1)
        ax.set_title(f"{res['series']}: {len(res['forecast'])} steps after {_when(res['origin'])}", fontsize=9)
        ax.set_ylabel(head.data.target, fontsize=8)
        ax.tick_params(labelsize=7)
        _dates(ax)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    if len(results) > len(shown):
        fig.suptitle(f"the first {len(shown)} of {len(results)} series", fontsize=9)
    fig.tight_layout()
    _save(fig, plt, outputs, path)


def pick_origins(origins: list, horizon: int, most: int = MAX_ORIGINS) -> list[int]:
    """Positions (into ``origins``, increasing step indices) of the origins a backtest draws:
    one every ``horizon`` steps (forecasts that do not overlap), then at most ``most`` of those,
    evenly spread, the first and last included.

    >>> pick_origins(list(range(0, 30, 3)), 6, most=8)   # every second origin: 0, 6, 12, 18, 24
    [0, 2, 4, 6, 8]
    """
    keep, last = [], None
    for i, o in enumerate(origins):
        if last is None or o - last >= horizon:
            keep.append(i)
            last = o
    if len(keep) > most:
        keep = [keep[int(round(k))] for k in np.linspace(0, len(keep) - 1, most)]
    return keep


def backtest_data(head, model, records: list) -> dict:
    """The numbers of a backtest picture: per series (order of appearance, at most
    :data:`MAX_PANELS`) the target over its evaluation windows (``times``, ``actual``), the MAE of
    the point forecast over all its windows (series' units), and the forecasts of the origins
    :func:`pick_origins` keeps (``origin``, ``times``, ``forecast``, and with quantiles
    ``lower`` / ``upper``: the outer levels).

    Args:
        records: the windows of one split (``origin``, ``times [C + H]``, ``target``, ``history``).
    """
    import pandas as pd

    C, H = head.data.context, head.data.horizon
    by_series: dict = {}
    for r in records:
        by_series.setdefault(r.label, []).append(r)
    out = {"context": C, "horizon": H, "quantiles": list(head.quantiles), "series_total": len(by_series),
           "series": {}}
    lo, hi = (0, len(head.quantiles) - 1) if head.levels > 1 else (None, None)
    for sid in list(by_series)[:MAX_PANELS]:
        recs = sorted(by_series[sid], key=lambda r: r.origin)
        f = head.forecasts(model, recs)  # [N, H, Q], series' units
        y = np.asarray([r.target for r in recs], float)
        point = f[..., head.point_level]
        start = recs[0].origin - min(C, H)
        steps = {}
        for r in recs:
            for j, t in enumerate(r.times):
                i = r.origin - C + j
                if i >= start:
                    steps[i] = (t, float(r.history[i]))
        idx = sorted(steps)
        entry = {"times": [pd.Timestamp(steps[i][0]).isoformat() for i in idx],
                 "actual": [steps[i][1] for i in idx],
                 "mae": float(np.mean(np.abs(point - y))), "windows": len(recs), "origins": []}
        for k in pick_origins([r.origin for r in recs], H):
            r = recs[k]
            o = {"origin": pd.Timestamp(r.times[C - 1]).isoformat(),
                 "times": [pd.Timestamp(t).isoformat() for t in r.times[C:]],
                 "forecast": [float(v) for v in point[k]]}
            if lo is not None:
                o["lower"] = [float(v) for v in f[k, :, lo]]
                o["upper"] = [float(v) for v in f[k, :, hi]]
            entry["origins"].append(o)
        out["series"][sid] = entry
    return out


def draw_backtest(head, model, records: list, path: str, outputs, title: str = "") -> None:
    """Draw :func:`backtest_data` of ``records`` (one split's windows) into the PNG ``path`` and the
    numbers into the JSON beside it: per series the actual values (grey) and each kept origin's
    forecast (a colour per origin) with its outer quantile band.

    Raises:
        seqkit.errors.SeqkitError: no windows; matplotlib missing; a file cannot be written.
    """
    import pandas as pd

    from seqkit.diagnostics.plots import pyplot

    if not records:
        raise SeqkitError(f"{title or 'backtest'}: the split has no windows to draw; give the recipe "
                          f"test steps (data.test_steps) of at least data.horizon.")
    plt = pyplot()
    data = backtest_data(head, model, records)
    fig, axes = _grid(plt, len(data["series"]))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    q = head.quantiles
    band = f"q{q[0]:g} - q{q[-1]:g}" if head.levels > 1 else None
    for ax, (sid, s) in zip(axes, data["series"].items()):
        ax.plot(pd.to_datetime(s["times"]), s["actual"], color="0.25", linewidth=1.1, label="actual")
        for n, o in enumerate(s["origins"]):
            c = colors[n % len(colors)]
            x = pd.to_datetime(o["times"])
            if "lower" in o:
                ax.fill_between(x, o["lower"], o["upper"], color=c, alpha=0.2, linewidth=0,
                                label=band if n == 0 else None)
            ax.plot(x, o["forecast"], color=c, linewidth=1.4, label="forecasts" if n == 0 else None)
            ax.axvline(pd.Timestamp(o["origin"]), color=c, linestyle=":", linewidth=0.8)
        ax.set_title(f"{sid}: MAE {s['mae']:.4g} over {s['windows']} origins ({len(s['origins'])} drawn)",
                     fontsize=9)
        ax.set_ylabel(head.data.target, fontsize=8)
        ax.tick_params(labelsize=7)
        _dates(ax)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    more = (f"; the first {len(data['series'])} of {data['series_total']} series"
            if data["series_total"] > len(data["series"]) else "")
    fig.suptitle(f"{title}backtest: forecasts of {data['horizon']} steps from test-period origins{more}",
                 fontsize=10)
    fig.tight_layout()
    _save(fig, plt, outputs, path, data)
