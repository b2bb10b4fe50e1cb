"""seqkit plugin: time-series forecasting.

* the data source ``timeseries`` (:mod:`seqkit_forecast.source`): a CSV/Parquet table of one or
  many series cut into ``context -> horizon`` windows, split by time;
* the head ``forecast`` (:mod:`seqkit_forecast.head`): an encoder RNN with a direct multi-horizon
  point or quantile output, its figures (:mod:`seqkit_forecast.metrics`) beside naive, seasonal
  naive, drift and ETS (:mod:`seqkit_forecast.baselines`), prediction, export and streaming.

Both register through the entry-point groups ``seqkit.data`` and ``seqkit.heads``.
"""

__version__ = "0.1.0"

# seqkit first: its import may load the installed plugins' entry points (this package's head and
# source among them); importing it before any of this package's modules keeps that from meeting a
# half-imported module of ours (e.g. `import keras; import seqkit_forecast.source`)
import seqkit  # noqa: E402,F401
