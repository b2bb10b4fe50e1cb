"""Pictures and pandas of a forecast run: ``run.predict(DataFrame)`` gives the numbers ``seqkit
predict --format jsonl`` prints; ``seqkit predict --plot`` and ``Run.predict(plot=)`` draw a PNG and
keep a file seqkit did not write; ``--plot`` on a classifier run is one clear error; ``seqkit plot``
and ``Run.plot`` draw the backtest of the test period with numbers that match ``evaluate`` and
``predict``. The model is test_forecast.py's tiny seasonal run (its module fixture)."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from click.testing import CliRunner  # noqa: E402

from seqkit.cli import main  # noqa: E402
from seqkit.errors import DataError, SeqkitError  # noqa: E402
from seqkit.outputs import OutputPathError, written_by_seqkit  # noqa: E402
from test_forecast import seasonal_run  # noqa: E402,F401  (the shared tiny run: context 24, horizon 6)

PNG = b"\x89PNG\r\n\x1a\n"


def png_size(path) -> tuple[int, int]:
    """``(width, height)`` in pixels from a PNG's IHDR chunk (the file must be a PNG)."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == PNG and head[12:16] == b"IHDR", head
    return struct.unpack(">II", head[16:24])


def recent(d, tmp_path, ids=("a", "b"), rows=24, end=None):
    """The last ``rows`` rows (before row ``end`` of each series) of the run's table, as a
    DataFrame and as a CSV file."""
    import pandas as pd

    table = pd.read_csv(d / "s.csv")
    parts = [table[table.id == i].iloc[:end].tail(rows) for i in ids]
    frame = pd.concat(parts, ignore_index=True)
    path = tmp_path / "recent.csv"
    frame.to_csv(path, index=False)
    return frame, path


# ------------------------------------------------------------------ pandas in, pandas out
def test_dataframe_prediction_holds_the_numbers_of_the_jsonl_prediction(seasonal_run, tmp_path):
    import pandas as pd

    import seqkit

    d, run = seasonal_run
    frame, path = recent(d, tmp_path)
    res = CliRunner().invoke(main, ["predict", run, "--input", str(path), "--format", "jsonl"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert [p["series"] for p in lines] == ["a", "b"]

    frame["time"] = pd.to_datetime(frame["time"])  # time stamps, not text: read the same
    got = seqkit.load(run).predict(frame)
    assert list(got.columns) == ["series", "origin", "time", "step", "forecast", "q0.1", "q0.5", "q0.9"]
    assert len(got) == 2 * 6 and got["step"].tolist() == [1, 2, 3, 4, 5, 6] * 2
    assert str(got["time"].dtype).startswith("datetime64") and str(got["origin"].dtype).startswith("datetime64")
    for p in lines:
        rows = got[got.series == p["series"]]
        assert rows["forecast"].tolist() == p["forecast"]  # the same numbers, not merely close
        for level, values in p["quantiles"].items():
            assert rows[f"q{level}"].tolist() == values
        assert [t.isoformat() for t in rows["time"]] == p["times"]
        assert {t.isoformat() for t in rows["origin"]} == {p["origin"]}
    # the input's last time is 2024-01-15 23:00 (360 hourly rows); the first step an hour later
    assert got["time"].iloc[0] == pd.Timestamp("2024-01-16 00:00")

    # the time column held as the index reads the same
    again = seqkit.load(run).predict(frame.set_index("time"))
    assert again["forecast"].tolist() == got["forecast"].tolist()


def test_dataframe_errors_name_the_row_by_position(seasonal_run, tmp_path):
    import seqkit

    d, run = seasonal_run
    frame, _ = recent(d, tmp_path)
    frame.loc[5, "value"] = np.nan  # series a's sixth row
    with pytest.raises(DataError) as err:
        seqkit.load(run).predict(frame)
    assert "<DataFrame>:5" in str(err.value) and "'value'" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(DataError) as err:
        seqkit.load(run).predict(frame.drop(columns=["temp"]))
    assert "'temp'" in str(err.value)


# ------------------------------------------------------------------ predict --plot
def test_predict_plot_draws_a_png_from_the_cli_and_from_python(seasonal_run, tmp_path):
    import seqkit

    d, run = seasonal_run
    frame, path = recent(d, tmp_path)
    out = tmp_path / "forecast.png"
    res = CliRunner().invoke(main, ["predict", run, "--input", str(path), "--plot", str(out)])
    assert res.exit_code == 0, res.output
    assert len(res.stdout.splitlines()) == 2 * 6  # the forecasts are still printed
    # two series: two panels side by side, each 7.5 x 3.3 inches at 110 dpi
    assert png_size(out) == (1650, 363)
    assert 10_000 < out.stat().st_size < 2_000_000 and written_by_seqkit(str(out))
    assert not (tmp_path / "forecast.json").exists()  # the numbers are the printed prediction

    one = tmp_path / "one.png"
    got = seqkit.load(run).predict(frame[frame.id == "a"], plot=one)
    assert png_size(one) == (825, 363) and len(got) == 6  # one series, one panel; a DataFrame back
    results = seqkit.load(run).predict(path.read_text(), plot=out)  # text in: dicts back; its own PNG replaced
    assert [r["series"] for r in results] == ["a", "b"] and png_size(out) == (1650, 363)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]  # staged, then renamed


def test_each_panel_shows_its_own_series_dates(seasonal_run, tmp_path, monkeypatch):
    """Three series on a 2 x 2 grid, each over its own time range: every panel's x axis spans its
    series' history and forecast, and every panel (the upper row too) has its date labels."""
    import copy

    import matplotlib.dates as mdates
    import pandas as pd

    import seqkit
    from seqkit.outputs import picture_outputs
    from seqkit_forecast import plot as P

    d, run = seasonal_run
    table = pd.read_csv(d / "s.csv")
    a = table[table.id == "a"].tail(24)  # ends 2024-01-15 23:00
    b = table[table.id == "b"].iloc[76:100]  # ends 2024-01-05 03:00
    loaded = seqkit.load(run)
    head = loaded.prepared.head
    records = head.read_frame(pd.concat([a, b]))
    results = head.predict(loaded.model, records)
    c_rec, c_res = copy.copy(records[1]), dict(results[1], series="c")  # b, ten days later
    c_rec.times = records[1].times + np.timedelta64(240, "h")
    c_res["times"] = [(pd.Timestamp(t) + pd.Timedelta(hours=240)).isoformat() for t in results[1]["times"]]
    drawn = []
    save = P._save
    monkeypatch.setattr(P, "_save", lambda fig, *args, **kw: (drawn.append(fig), save(fig, *args, **kw)))
    out = str(tmp_path / "three.png")
    P.draw_prediction(head, results + [c_res], records + [c_rec], out, picture_outputs(out, with_json=False))
    assert png_size(out) == (1650, 726)  # 2 x 2 panels of 7.5 x 3.3 inches at 110 dpi
    (fig,) = drawn
    axes = [ax for ax in fig.axes if ax.lines]
    b_first = pd.Timestamp(b.time.iloc[0])
    spans = [(pd.Timestamp(a.time.iloc[0]), pd.Timestamp("2024-01-16 05:00")),  # history .. last step
             (b_first, pd.Timestamp("2024-01-05 09:00")),
             (b_first + pd.Timedelta(hours=240), pd.Timestamp("2024-01-15 09:00"))]
    assert len(axes) == 3
    for ax, (first, last) in zip(axes, spans):
        lo, hi = (pd.Timestamp(t).tz_localize(None) for t in mdates.num2date(ax.get_xlim()))
        assert lo <= first and last <= hi and hi - lo < pd.Timedelta(hours=40)  # its own range
        assert [t.get_text() for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]  # labelled


def test_plot_path_seqkit_did_not_write_is_kept_unless_overwrite(seasonal_run, tmp_path):
    d, run = seasonal_run
    _, path = recent(d, tmp_path)
    mine = tmp_path / "mine.png"
    mine.write_bytes(b"my own picture")
    r = CliRunner()
    res = r.invoke(main, ["predict", run, "--input", str(path), "--plot", str(mine)])
    assert res.exit_code == 2, res.output
    assert "exists and was not written by seqkit" in res.output and "--overwrite" in res.output
    assert res.stdout == "" and mine.read_bytes() == b"my own picture"  # refused before predicting
    res = r.invoke(main, ["predict", run, "--input", str(path), "--plot", str(path)])  # the input itself
    assert res.exit_code == 2 and "prediction input" in res.output and path.read_text().startswith("time,")
    res = r.invoke(main, ["predict", run, "--input", str(path), "--plot", str(mine), "--overwrite"])
    assert res.exit_code == 0, res.output
    assert mine.read_bytes()[:8] == PNG and written_by_seqkit(str(mine))
    res = r.invoke(main, ["predict", run, "--input", str(path), "--plot", os.path.join(run, "p.png"),
                          "--overwrite"])
    assert res.exit_code == 2 and "inside the seqkit run directory" in res.output
    assert not os.path.exists(os.path.join(run, "p.png"))


def test_plot_without_matplotlib_is_said_before_predicting(seasonal_run, tmp_path, monkeypatch):
    import sys

    import seqkit

    d, run = seasonal_run
    _, path = recent(d, tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    loaded = seqkit.load(run)
    with pytest.raises(SeqkitError) as err:
        loaded.predict(path.read_text(), plot=tmp_path / "p.png")
    assert 'pip install "seqkit[plot]"' in str(err.value) and not (tmp_path / "p.png").exists()
    assert loaded._model is None  # refused before the run loaded
    res = CliRunner().invoke(main, ["plot", run, "--out", str(tmp_path / "c.png")])
    assert res.exit_code == 2 and "seqkit[plot]" in res.output and not (tmp_path / "c.png").exists()


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
    """A tiny sequence classifier (one epoch on 16 two-frame .ts cases): only its head matters."""
    d = tmp_path_factory.mktemp("classifier")
    cases = "".join(f"{i},{i + 1}:{i},{-i}:{'up' if i % 2 else 'down'}\n" for i in range(16))
    (d / "train.ts").write_text("@problemName toy\n@dimensions 2\n@classLabel true up down\n@data\n" + cases)
    recipe = {"name": "tiny-classifier", "seed": 1,
              "data": {"source": "ts", "train_path": "train.ts", "max_length": 4,
                       "split": {"valid": 0.0, "test": 0.25, "shuffle": True}},
              "model": {"units": 4}, "head": {"type": "acceptor"},
              "training": {"epochs": 1, "batch_size": 4, "early_stopping": None}}
    (d / "r.yaml").write_text(json.dumps(recipe))
    res = CliRunner().invoke(main, ["train", str(d / "r.yaml"), "--run-dir", str(d / "run"), "--quiet"])
    assert res.exit_code == 0, res.output
    return d, str(d / "run")


def test_plot_and_dataframes_on_a_classifier_run_are_one_clear_error(classifier_run, tmp_path):
    import pandas as pd

    import seqkit

    d, run = classifier_run
    (tmp_path / "in.ts").write_text("@problemName toy\n@dimensions 2\n@classLabel true up down\n@data\n"
                                    "1,2:1,-1:up\n")
    out = tmp_path / "p.png"
    res = CliRunner().invoke(main, ["predict", run, "--input", str(tmp_path / "in.ts"), "--plot", str(out)])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    msg = res.output.strip()
    assert msg.startswith("error: ") and "\n" not in msg, msg  # one paragraph
    assert "--plot needs a run whose head draws its predictions" in msg and "'acceptor'" in msg
    assert "forecast" in msg and "Drop --plot" in msg and not out.exists()
    with pytest.raises(SeqkitError) as err:  # the same refusal from Python
        seqkit.load(run).predict("1,2:1,-1", plot=out)
    assert str(err.value) == msg[len("error: "):]
    with pytest.raises(SeqkitError) as err:
        seqkit.load(run).predict(pd.DataFrame({"x": [1.0]}))
    assert "a pandas DataFrame input needs a run whose head reads tables" in str(err.value)
    assert "'acceptor'" in str(err.value)
    res = CliRunner().invoke(main, ["plot", run, "--out", str(tmp_path / "c.png")])
    assert res.exit_code == 0, res.output  # training curves only: its head draws no picture
    assert sorted(p.name for p in tmp_path.glob("c*")) == ["c.json", "c.png"]


# ------------------------------------------------------------------ seqkit plot: the backtest
def test_seqkit_plot_draws_the_backtest_of_the_test_period(seasonal_run, tmp_path):
    import pandas as pd

    import seqkit

    d, run = seasonal_run
    out = tmp_path / "pics" / "curves.png"
    out.parent.mkdir()
    res = CliRunner().invoke(main, ["plot", run, "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.parent.iterdir()) == ["curves-backtest.json", "curves-backtest.png",
                                                           "curves.json", "curves.png"]
    assert f"wrote {out.parent / 'curves-backtest.png'}" in res.output
    png = out.parent / "curves-backtest.png"
    assert png_size(png) == (1650, 363) and png.stat().st_size > 10_000 and written_by_seqkit(str(png))
    bt = json.loads((out.parent / "curves-backtest.json").read_text())
    assert bt["written_by"].startswith("seqkit") and bt["horizon"] == 6 and bt["quantiles"] == [0.1, 0.5, 0.9]
    # test period: the last 60 of 360 hourly steps; origins 300, 303, ..., 354 (eval_stride 3):
    # 19 windows. Drawn: every second one (no overlap at horizon 6) = 10, thinned to 8 spread evenly
    a = bt["series"]["a"]
    t0 = pd.Timestamp("2024-01-01")
    assert a["windows"] == 19
    assert [pd.Timestamp(o["origin"]) for o in a["origins"]] == [
        t0 + pd.Timedelta(hours=h - 1) for h in (300, 306, 318, 324, 330, 336, 348, 354)]
    # the actual values from 6 steps before the first origin to the series' end: steps 294..359
    assert len(a["actual"]) == 66 and pd.Timestamp(a["times"][0]) == t0 + pd.Timedelta(hours=294)
    table = pd.read_csv(d / "s.csv")
    np.testing.assert_allclose(a["actual"], table[table.id == "a"]["value"].iloc[294:], atol=1e-9)
    for o in a["origins"]:
        assert all(lo <= f <= hi for lo, f, hi in zip(o["lower"], o["forecast"], o["upper"]))

    # both series have 19 test windows: the mean of their MAEs is the run's test MAE
    figures = seqkit.load(run).evaluate("test")
    assert (a["mae"] + bt["series"]["b"]["mae"]) / 2 == pytest.approx(figures["mae"], rel=1e-5)
    # the last drawn forecast is what predict answers for the 24 rows before its origin
    _, path = recent(d, tmp_path, ids=("a",), end=354)
    (pred,) = seqkit.load(run).predict(path.read_text())
    np.testing.assert_allclose(a["origins"][-1]["forecast"], pred["forecast"], atol=1e-4)
    np.testing.assert_allclose(a["origins"][-1]["upper"], pred["quantiles"]["0.9"], atol=1e-4)

    # Run.plot is the same command: the same numbers, its own files replaced
    written = seqkit.load(run).plot(out)
    assert written == [str(out), str(out.parent / "curves.json"), str(png), str(out.parent / "curves-backtest.json")]
    assert json.loads((out.parent / "curves-backtest.json").read_text())["series"] == bt["series"]


def test_seqkit_plot_checks_every_picture_before_drawing_any(seasonal_run, tmp_path):
    d, run = seasonal_run
    (tmp_path / "c-backtest.png").write_bytes(b"someone else's")
    res = CliRunner().invoke(main, ["plot", run, "--out", str(tmp_path / "c.png")])
    assert res.exit_code == 2 and "c-backtest.png" in res.output and "was not written by seqkit" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c-backtest.png"]  # not even the curves
    with pytest.raises(OutputPathError):
        import seqkit

        seqkit.load(run).plot(tmp_path / "c.png")
    res = CliRunner().invoke(main, ["plot", run, run, "--out", str(tmp_path / "two.png")])
    assert res.exit_code == 0, res.output  # several runs: a picture per run, named after it
    assert (tmp_path / "two-run1-backtest.png").exists() and (tmp_path / "two-run2-backtest.json").exists()


def test_pick_origins_by_hand():
    from seqkit_forecast.plot import band_pairs, pick_origins

    assert pick_origins(list(range(0, 30, 3)), 6, most=8) == [0, 2, 4, 6, 8]
    assert pick_origins([0, 1, 2, 7, 8, 20], 6) == [0, 3, 5]  # 0, then 7 (>= 6 later), then 20
    assert pick_origins(list(range(0, 60, 6)), 6, most=4) == [0, 3, 6, 9]  # linspace(0, 9, 4)
    assert band_pairs([0.1, 0.5, 0.9]) == [(0, 2)]
    assert band_pairs([0.05, 0.25, 0.5, 0.75, 0.95]) == [(0, 4), (1, 3)]
    assert band_pairs([]) == []
