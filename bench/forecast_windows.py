"""The forecasting suite's common ground: one recipe's series, split points and test windows, read
the way seqkit's ``timeseries`` source reads them, without TensorFlow or PyTorch.

Every contender of ``python -m bench --suite forecast`` is scored on the windows
:func:`load_problem` returns, which are the ``test`` records of
:class:`seqkit_forecast.source.TimeSeriesSource` itself (same origins, same targets, same order),
and learns from :meth:`ForecastProblem.train_series` alone: each series cut at the end of its
training period, so nothing of the validation or test period reaches a fitted parameter or a
scaling statistic.

Usage (from the repository root)::

    from bench.forecast_windows import load_problem
    p = load_problem("plugins/seqkit-forecast/recipes/forecast-monthly.yaml")
    p.windows[0].origin, p.inputs(p.windows[0])   # the first test origin and its context
"""

from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np

PLUGIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugins", "seqkit-forecast")
RECIPES = {"forecast-electricity": os.path.join(PLUGIN, "recipes", "forecast-electricity.yaml"),
           "forecast-monthly": os.path.join(PLUGIN, "recipes", "forecast-monthly.yaml")}


def use_plugin_source() -> str:
    """Put this checkout's ``plugins/seqkit-forecast`` first on ``sys.path``, so that
    ``seqkit_forecast`` is the copy beside this ``bench`` unless another copy was imported before;
    return the file of the ``seqkit_forecast`` package in use (reports name it).

    Imports ``seqkit`` first: with Keras already imported, ``import seqkit`` loads the installed
    head plugins, and a ``seqkit_forecast`` module imported before ``seqkit`` would be imported
    again, half-initialised, from inside its own first import."""
    if PLUGIN not in sys.path:
        sys.path.insert(0, PLUGIN)
    import seqkit  # noqa: F401 (before any seqkit_forecast module; see above)
    import seqkit_forecast

    return os.path.abspath(seqkit_forecast.__file__)


@dataclasses.dataclass
class SeriesSplit:
    """One series and where its periods end.

    Attributes:
        id: the series id (the id column's value; ``"series"`` without one).
        times: ``datetime64[ns] [N]``; y: the target ``float64 [N]`` (raw units).
        calendar: ``float32 [N, 2 * len(calendar)]``, the recipe's calendar features (sine/cosine
            pairs, as seqkit feeds them; derived from the time stamps alone).
        train_end, valid_end: indices: ``y[:train_end]`` is the training period,
            ``y[train_end:valid_end]`` the validation period, the rest the test period.
        mean, std: the training period's mean and (population) standard deviation of ``y``, the
            standardisation seqkit's ``forecast`` head fits (std 1.0 for a constant period).
        scale: MASE's denominator, the training period's in-sample seasonal naive MAE.
    """

    id: str
    times: np.ndarray
    y: np.ndarray
    calendar: np.ndarray
    train_end: int
    valid_end: int
    mean: float
    std: float
    scale: float


@dataclasses.dataclass
class Window:
    """One test window: the series ``sid``, the forecast origin (index of the first target step),
    and the ``horizon`` targets ``target float64 [H]``."""

    sid: str
    origin: int
    target: np.ndarray


@dataclasses.dataclass
class ForecastProblem:
    """A recipe's forecasting task, as every contender sees it.

    Attributes:
        name: the recipe's name; recipe_path: its file; seed: its ``seed``.
        context, horizon: ``C`` and ``H`` (steps); season: ``m`` (``head.season``).
        freq: the pandas frequency string of the time steps (e.g. ``30min``, ``MS``).
        calendar: the recipe's calendar feature names.
        series: ``{id: SeriesSplit}`` in file order; windows: the test windows in seqkit's order.
        quantiles: the recipe's ``head.quantiles`` (empty: a point forecast);
        loss: ``head.loss``; units, layers, cell: ``model.units``, ``model.layers``, ``model.cell``;
        epochs, batch_size, learning_rate: ``training.*``; stride: ``data.stride``.
        train_windows: seqkit's training windows (one per ``stride`` steps of each training period).
    """

    name: str
    recipe_path: str
    seed: int
    context: int
    horizon: int
    season: int
    freq: str
    calendar: list
    series: dict
    windows: list
    quantiles: list
    loss: str
    units: int
    layers: int
    cell: str
    epochs: int
    batch_size: int
    learning_rate: float
    stride: int
    train_windows: int

    def train_series(self) -> dict:
        """``{id: (times [n], y [n])}``: each series' training period only (``n = train_end``)."""
        return {sid: (s.times[:s.train_end], s.y[:s.train_end]) for sid, s in self.series.items()}

    def inputs(self, w: Window) -> tuple[np.ndarray, np.ndarray]:
        """``(times [C], y [C])``: the ``context`` steps before the window's origin, what every
        contender reads to forecast it."""
        s = self.series[w.sid]
        return s.times[w.origin - self.context:w.origin], s.y[w.origin - self.context:w.origin]

    def targets(self) -> np.ndarray:
        """``float64 [N, H]``: the test windows' targets."""
        return np.stack([w.target for w in self.windows])

    def scales(self) -> np.ndarray:
        """``float64 [N]``: each window's MASE denominator (its series' ``scale``)."""
        return np.asarray([self.series[w.sid].scale for w in self.windows])


def _recipe_dict(path: str) -> dict:
    import yaml

    from seqkit.recipe import RecipeLoader

    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=RecipeLoader)


def load_problem(recipe_path: str) -> ForecastProblem:
    """Read a ``timeseries`` / ``forecast`` recipe's data into a :class:`ForecastProblem`.

    The windows are ``TimeSeriesSource(...).load()["test"]`` (the source seqkit trains from), so a
    contender forecasting them answers exactly the windows seqkit's test figures are computed on.
    Imports neither TensorFlow nor PyTorch (the recipe is read as YAML, not validated: train it
    with seqkit first to have it checked).

    Raises:
        ValueError: the recipe's data source is not ``timeseries`` or its head not ``forecast``.
        seqkit.errors.DataError: as the source (a bad table, a series too short).
    """
    use_plugin_source()
    from seqkit_forecast import metrics as M
    from seqkit_forecast.source import TimeSeriesOptions, TimeSeriesSource, frequency, read_series

    d = _recipe_dict(recipe_path)
    data, head, model, training = (dict(d.get(k) or {}) for k in ("data", "head", "model", "training"))
    if data.pop("source", None) != "timeseries" or head.get("type") != "forecast":
        raise ValueError(f"{recipe_path}: the forecast suite reads recipes with data.source timeseries "
                         f"and head.type forecast.")
    opts = TimeSeriesOptions(**data)
    if opts.covariates:
        raise ValueError(f"{recipe_path}: data.covariates: the forecast suite compares models of the "
                         f"target and calendar features only; drop the covariates.")
    if not os.path.isabs(opts.path):
        opts.path = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(recipe_path)), opts.path))
    source = TimeSeriesSource(opts)
    m = int(head.get("season", 1))
    series, train_windows = {}, 0
    raw = read_series(opts, opts.path)
    for s in raw:
        train_end, valid_end = source.split_points(s)
        tr = s.y[:train_end]
        std = float(np.std(tr))
        series[str(s.id)] = SeriesSplit(
            id=str(s.id), times=s.times, y=s.y, calendar=s.features(opts.calendar)[:, 1 + len(opts.covariates):],
            train_end=train_end, valid_end=valid_end, mean=float(np.mean(tr)), std=std if std > 0 else 1.0,
            scale=M.seasonal_scale(tr, m))
        train_windows += len(range(opts.context, train_end - opts.horizon + 1, opts.stride))
    test = source.load()["test"]
    windows = [Window(sid=r.label, origin=int(r.origin), target=np.asarray(r.target, float)) for r in test]
    return ForecastProblem(
        name=d.get("name", os.path.splitext(os.path.basename(recipe_path))[0]), recipe_path=recipe_path,
        seed=int(d.get("seed", 0) or 0), context=opts.context, horizon=opts.horizon, season=m, freq=frequency(raw), calendar=list(opts.calendar),
        series=series, windows=windows, quantiles=list(head.get("quantiles") or []), loss=head.get("loss", "mae"),
        units=int(model.get("units", 64)), layers=int(model.get("layers", 1)), cell=str(model.get("cell", "lstm")),
        epochs=int(training.get("epochs", 10)), batch_size=int(training.get("batch_size", 32)),
        learning_rate=float(training.get("learning_rate", 1e-3)), stride=opts.stride, train_windows=train_windows)


def gradient_steps(p: ForecastProblem, epochs: int | None = None) -> int:
    """Optimizer steps seqkit takes on ``p``: ``epochs * ceil(train_windows / batch_size)``
    (``epochs``: the recipe's by default). The external libraries get the same budget."""
    e = p.epochs if epochs is None else epochs
    return e * -(-p.train_windows // p.batch_size)
