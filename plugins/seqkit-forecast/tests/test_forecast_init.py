"""``seqkit init --task forecast``: the starter recipe of a user's time-series table names its time,
id and target columns and a plan sized by its time step; it validates, and it trains."""

from __future__ import annotations

import os

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from seqkit.cli import main  # noqa: E402

MONTHLY = os.path.join(os.path.dirname(__file__), "..", "seqkit_forecast", "data", "monthly.csv")


def _sales(path, days=200):
    """Daily rows ``date,store,sales,temperature`` of two stores (a weekly pattern)."""
    rng = np.random.default_rng(0)
    rows = ["date,store,sales,temperature"]
    for store, level in (("north", 100), ("south", 60)):
        start = np.datetime64("2022-01-01")
        for d, day in enumerate(np.arange(start, start + days)):
            rows.append(f"{day},{store},{level + 10 * np.sin(2 * np.pi * d / 7) + rng.normal():.2f},"
                        f"{10 + rng.normal():.1f}")
    path.write_text("\n".join(rows) + "\n")


def test_a_daily_table_of_two_stores_gets_its_columns_and_a_weekly_plan(tmp_path):
    _sales(tmp_path / "sales.csv")
    out = tmp_path / "sales-forecast.yaml"
    res = CliRunner().invoke(main, ["init", "--task", "forecast", "--data", str(tmp_path / "sales.csv"),
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    recipe = yaml.safe_load(text)
    d = recipe["data"]
    assert (d["source"], d["path"], d["time_column"], d["id_column"], d["target"]) == (
        "timeseries", "sales.csv", "date", "store", "sales")
    # 200 days a store: 20 held out twice, a 56-day context and a 14-day horizon, a weekly season
    assert (d["calendar"], d["context"], d["horizon"], d["valid_steps"], d["test_steps"]) == (
        ["day_of_week", "month"], 56, 14, 20, 20)
    assert recipe["head"] == {"type": "forecast", "loss": "mae", "season": 7}
    assert "embedding_dim" not in recipe["model"]  # frames in: no embedding
    assert "# Numeric columns not used: temperature." in text  # a covariate is the user's call
    res = CliRunner().invoke(main, ["validate", str(out)])
    assert res.exit_code == 0, res.output


def test_the_shipped_monthly_table_validates_and_a_short_or_timeless_table_is_refused(tmp_path):
    from seqkit.starter import InitError, starter_recipe

    recipe = starter_recipe("forecast", MONTHLY, out=str(tmp_path / "m.yaml"))
    d = recipe["data"]
    assert (d["time_column"], d["id_column"], d["target"], d["calendar"]) == ("month", "series", "value", ["month"])
    assert (d["context"], d["horizon"], recipe["head"]["season"]) == (36, 12, 12)
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(recipe))
    assert CliRunner().invoke(main, ["validate", str(tmp_path / "m.yaml")]).exit_code == 0
    (tmp_path / "notime.csv").write_text("a,b\nx,1\ny,2\nz,3\nw,4\n")
    with pytest.raises(InitError, match=r"notime.csv: no column of time stamps among \['a', 'b'\]"):
        starter_recipe("forecast", str(tmp_path / "notime.csv"))
    (tmp_path / "short.csv").write_text("time,value\n" + "".join(f"2024-01-0{i},{i}\n" for i in range(1, 6)))
    with pytest.raises(InitError, match="short.csv: the first series has 5 rows"):
        starter_recipe("forecast", str(tmp_path / "short.csv"))


def test_numbered_series_and_the_time_step_plans(tmp_path):
    """Stores numbered 1-3 are the series id (their rows share time stamps), not a covariate; a
    minutely or millisecond step gets no monthly plan."""
    from seqkit.starter import starter_recipe
    from seqkit_forecast.starter import _plan

    _sales(tmp_path / "s.csv", days=120)
    text = (tmp_path / "s.csv").read_text().replace(",north,", ",1,").replace(",south,", ",2,")
    (tmp_path / "n.csv").write_text(text)
    recipe, notes = starter_recipe("forecast", str(tmp_path / "n.csv"), with_notes=True)
    d = recipe["data"]
    assert (d["id_column"], d["target"], d["calendar"]) == ("store", "sales", ["day_of_week", "month"])
    assert notes == ["Numeric columns not used: temperature. Those known as far ahead as the forecast "
                     "looks can be inputs: data.covariates."]
    assert [_plan(f)[0] for f in ("h", "30min", "D", "W-SUN", "MS", "ME", "QS-OCT", "min", "ms", "YS")] == \
        [24, 48, 7, 52, 12, 12, 4, 1, 1, 1]
