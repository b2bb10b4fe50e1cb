"""The ``forecast`` entry of an export's metadata, read as untrusted input.

A ``.tflite`` file is whatever a user hands seqkit; seqkit's own schema
(:mod:`seqkit.export.metadata_schema`) checks the fields every export has and lets a head's own
entry through. :func:`read_forecast_metadata` checks this head's entry strictly (pydantic strict
mode: JSON integers are integers, names are strings) and within bounds before ``seqkit stream``
uses it: the columns, the window sizes, the quantile levels, a scaling for every series with
one mean and one positive scale per input column, and (``head.smoothing: fitted``) four smoothing
parameters in ``[0, 1]`` for every series.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from seqkit.errors import SeqkitError

MAX_STEPS = 1 << 16  # context, horizon
MAX_COLUMNS = 4096
MAX_SERIES = 1 << 20


#: The largest magnitude a float32 holds: a mean or scale beyond it overflows the model's input.
FLOAT32_MAX = 3.4028234663852886e38


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True, allow_inf_nan=False)


class SeriesScaling(_Strict):
    mean: list[Annotated[float, Field(ge=-FLOAT32_MAX, le=FLOAT32_MAX)]] = Field(max_length=MAX_COLUMNS)
    std: list[Annotated[float, Field(gt=0, le=FLOAT32_MAX)]] = Field(max_length=MAX_COLUMNS)

    @model_validator(mode="after")
    def _positive(self):
        if len(self.mean) != len(self.std):
            raise ValueError(f"{len(self.mean)} means but {len(self.std)} scales")
        return self


def _check_frequency(freq: str | None) -> None:
    """Refuse a frequency pandas cannot step by (``ValueError``, which pydantic reports)."""
    from seqkit_forecast.source import frequency_offset

    if freq is not None and frequency_offset(freq) is None:
        raise ValueError(f"{freq!r} is not a pandas frequency (e.g. 'D', 'h', '30min')")


class ForecastMetadata(_Strict):
    """What the forecast head's stream reads of an export (see :meth:`ForecastHead.export_metadata`)."""

    context: int = Field(gt=0, le=MAX_STEPS)
    horizon: int = Field(gt=0, le=MAX_STEPS)
    quantiles: list[float] = Field(max_length=64)
    point_level: int = Field(ge=0, lt=64)
    time_column: str = Field(min_length=1, max_length=256)
    id_column: Optional[str] = Field(None, min_length=1, max_length=256)
    target: str = Field(min_length=1, max_length=256)
    covariates: list[str] = Field(max_length=MAX_COLUMNS)
    calendar: list[Literal["hour", "day_of_week", "day_of_year", "month"]] = Field(max_length=4)
    scaling: dict[str, SeriesScaling] = Field(max_length=MAX_SERIES)
    frequency: Optional[str] = Field(None, max_length=64)
    transform: Literal["none", "log"] = "none"
    smoothing: Optional[dict[str, list[Annotated[float, Field(ge=0, le=1)]]]] = Field(None, max_length=MAX_SERIES)

    @model_validator(mode="after")
    def _consistent(self):
        _check_frequency(self.frequency)
        width = 1 + len(self.covariates) + 2 * len(self.calendar)
        levels = max(1, len(self.quantiles))
        if self.point_level >= levels:
            raise ValueError(f"point_level {self.point_level} with {levels} level(s)")
        if any(not 0 < q < 1 for q in self.quantiles):
            raise ValueError("quantile levels lie strictly between 0 and 1")
        for sid, s in self.scaling.items():
            if len(s.mean) != width:
                raise ValueError(f"series {sid!r} has {len(s.mean)} scaled columns; the columns "
                                 f"(target, covariates, calendar pairs) are {width}")
            if self.smoothing is not None and len(self.smoothing.get(sid) or ()) != 4:
                raise ValueError(f"series {sid!r} has no four smoothing parameters (alpha, beta, gamma, phi)")
        return self


class RunAssets(_Strict):
    """A forecast run's ``forecast_assets.json`` (:meth:`Scaler.to_dict`), read as untrusted:
    finite numbers, positive scales, a pandas frequency, smoothing parameters in ``[0, 1]``."""

    scaling: dict[str, SeriesScaling] = Field(min_length=1, max_length=MAX_SERIES)
    mase_scale: dict[str, Annotated[float, Field(gt=0, le=FLOAT32_MAX)]] = Field({}, max_length=MAX_SERIES)
    fitted_until: dict[str, Annotated[str, Field(max_length=64)]] = Field({}, max_length=MAX_SERIES)
    frequency: Optional[str] = Field(None, max_length=64)
    transform: Literal["none", "log"] = "none"
    smoothing: Optional[dict[str, list[Annotated[float, Field(ge=0, le=1)]]]] = Field(None, max_length=MAX_SERIES)

    @model_validator(mode="after")
    def _frequency(self):
        _check_frequency(self.frequency)
        return self


def read_run_assets(obj, where: str, width: int) -> RunAssets:
    """Validate a run's ``forecast_assets.json`` (parsed JSON) for a model of ``width`` input
    columns (target, covariates, calendar pairs).

    Raises:
        seqkit.errors.RunDirError: a field of the wrong type, out of bounds, or a series scaled
            over another number of columns (named, in one paragraph).
    """
    from seqkit.errors import RunDirError

    fix = ("The file was edited or damaged; seqkit does not forecast with a scaling it cannot trust. "
           "Restore it or train the run again.")
    try:
        assets = RunAssets.model_validate(obj)
    except ValidationError as exc:
        e = exc.errors()[0]
        field = ".".join(str(p) for p in e["loc"]) or "(the file)"
        raise RunDirError(f"{where}: key '{field}' is not valid ({e['msg']}). {fix}") from None
    for sid, s in assets.scaling.items():
        if len(s.mean) != width:
            raise RunDirError(f"{where}: key 'scaling.{sid}' scales {len(s.mean)} columns; the run's "
                              f"model reads {width} (target, covariates, calendar pairs). {fix}")
    return assets


def read_forecast_metadata(meta: dict, where: str) -> ForecastMetadata:
    """Validate ``meta["forecast"]``.

    Args:
        meta: an export's metadata (already through :func:`seqkit.export.metadata_schema.validate`);
        where: the file, for messages.

    Raises:
        seqkit.errors.SeqkitError: no ``forecast`` entry, or a field of the wrong type, out of
            bounds or inconsistent (named), in one paragraph.
    """
    fc = meta.get("forecast") if isinstance(meta, dict) else None
    if not isinstance(fc, dict):
        raise SeqkitError(f"{where}: its metadata has no 'forecast' entry, so it is not a forecast "
                          f"export; export the forecast run again (`seqkit export RUN --out DIR`).")
    try:
        return ForecastMetadata.model_validate(fc)
    except ValidationError as exc:
        e = exc.errors()[0]
        field = ".".join(str(p) for p in ("forecast", *e["loc"]))
        raise SeqkitError(f"{where}: the export's metadata field '{field}' is not valid ({e['msg']}). "
                          f"The file was not written by seqkit-forecast, or was edited or damaged; "
                          f"seqkit does not stream a model its metadata does not describe. Export "
                          f"the run again (`seqkit export RUN --out DIR`).") from None
