"""bench.pages: run and bench records in git, and the pages' generated blocks rendered from them.

The runs are the hand-built run directories of test_bench_tables (seqkit's exact layout, figures
chosen so each printed cell can be worked by hand).
"""

import json
import os

import pytest

from bench import pages, tables
from seqkit.training.seeds import summarize
from tests.test_bench_tables import acceptor_run, lm_run, pinyin_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def seeds_summary(tmp_path):
    paths = [acceptor_run(tmp_path, f"acceptor-japanese-vowels-seed{s}", s, acc)
             for s, acc in ((1234, 0.9703), (1235, 0.9757), (1236, 0.9703))]
    metrics = [json.load(open(os.path.join(p, "metrics.json"))) for p in paths]
    sp = tmp_path / "acceptor-japanese-vowels-seeds.json"
    sp.write_text(json.dumps({"recipe": "acceptor-japanese-vowels", **summarize(metrics, [1234, 1235, 1236], paths)}))
    return str(sp)


def test_a_record_renders_the_same_tables_as_its_run(tmp_path):
    runs = [tables.read_run(lm_run(tmp_path)), tables.read_run(pinyin_run(tmp_path)),
            tables.read_seeds(seeds_summary(tmp_path))]
    records = tmp_path / "records"
    paths = [pages.write_record(r, str(records)) for r in runs]
    assert sorted(os.path.basename(p) for p in paths) == [
        "acceptor-japanese-vowels.json", "lm-pydoc-chars.json", "seq2seq-pinyin-phrases.json"]
    back = [pages.read_record(p) for p in paths]
    no_recipes = str(tmp_path / "no-recipes")
    assert [tables.render(t, no_recipes) for t in tables.all_tables(back)] == \
        [tables.render(t, no_recipes) for t in tables.all_tables(runs)]
    # the seeds' figures come back as mean ± sample sd: sd = sqrt((2 * 0.0018^2 + 0.0036^2) / 2) = 0.0031
    acc = back[2].metrics["test"]["accuracy"]
    assert isinstance(acc, tables.Stat) and (acc.n, round(acc.mean, 4), round(acc.sd, 4)) == (3, 0.9721, 0.0031)
    assert "confusion_matrix" not in json.dumps(json.load(open(paths[2])))
    # the record keeps each seed's figure, in the seeds' order, for a later seed's summary
    assert back[2].per_seed["test"]["accuracy"] == [0.9703, 0.9757, 0.9703] and back[0].per_seed == {}


def test_readme_block_is_a_line_per_record_with_baseline_anchor_and_code(tmp_path):
    runs = [tables.read_run(lm_run(tmp_path)), tables.read_seeds(seeds_summary(tmp_path))]
    runs[0].provenance.update(commit="abc1234")
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for name in ("lm-pydoc-chars", "acceptor-japanese-vowels", "g2p-cmudict-standard"):
        (recipes / f"{name}.yaml").write_text(f"name: {name}\n")
    out = pages.render_readme(runs, str(recipes)).splitlines()
    written = runs[0].written
    # exp(1.1366324) = 3.1163; 1.1366324 / ln 2 = 1.6398; the 5-gram's stored test perplexity 3.4043
    assert out[2] == (f"| `lm-pydoc-chars` | perplexity **3.116**, 1.640 bits/char | 5-gram perplexity 3.404 | "
                      f"xz -9e 1.17 bits/char (same split) | abc1234, {written} |")
    assert out[3].startswith("| `acceptor-japanese-vowels` | accuracy **0.9721 ± 0.0031** (3 seeds) | "
                             "majority-class 0.0946 | 1-NN DTW 0.949 (UEA archive) | not recorded, ")
    assert out[-1] == "No record yet: `g2p-cmudict-standard` (earlier figures: see Results)."


PAGE = "# Results\n\nintro\n\n{}\n\nold table\n\n{}\n\nafter\n"


def test_write_replaces_only_the_block_and_check_finds_a_hand_edit(tmp_path):
    for name, page in pages.PAGES.items():
        os.makedirs(tmp_path / os.path.dirname(page), exist_ok=True)
        (tmp_path / page).write_text(PAGE.format(*pages._markers(name)))
    (tmp_path / "recipes").mkdir()
    records = tmp_path / "bench" / "records"
    pages.write_record(tables.read_run(lm_run(tmp_path)), str(records))
    assert sorted(pages.stale(str(tmp_path))) == sorted(pages.PAGES.values())
    assert sorted(pages.write_pages(str(tmp_path))) == sorted(pages.PAGES.values())
    assert pages.stale(str(tmp_path)) == [] and pages.write_pages(str(tmp_path)) == []
    text = (tmp_path / "docs" / "results.md").read_text()
    assert text.startswith("# Results\n\nintro\n\n<!-- begin generated: results ") and text.endswith(
        "<!-- end generated: results -->\n\nafter\n")
    assert "old table" not in text and "| **3.116** | **1.64** |" in text
    (tmp_path / "docs" / "results.md").write_text(text.replace("| **3.116** |", "| **3.100** |"))
    assert pages.stale(str(tmp_path)) == ["docs/results.md"]
    assert "No bench report is recorded yet" in (tmp_path / "docs" / "benchmarks.md").read_text()


def test_a_page_without_its_markers_and_a_foreign_record_are_refused(tmp_path):
    with pytest.raises(pages.RecordError, match="README.md: needs one line '<!-- begin generated: readme"):
        pages.replace_block("no markers here", "readme", "x", "README.md")
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"schema": 1, "path": "p", "seeds": "1234"}))
    with pytest.raises(pages.RecordError, match=r"x.json: key 'seeds' must be a list"):
        pages.read_record(str(bad))
    bad.write_text("[1, 2")
    with pytest.raises(pages.RecordError, match="x.json: not a JSON record"):
        pages.read_record(str(bad))
    (tmp_path / "y.json").write_text("{}")
    with pytest.raises(pages.RecordError, match="y.json: not a python -m bench report"):
        pages.record_bench(str(tmp_path / "y.json"))


def test_a_bench_record_shows_its_commit_command_and_table(tmp_path):
    report = {"suite": "decode", "environment": {"cpu": "AMD EPYC", "cpu_kind": "avx512", "commit": "abc1234",
                                                  "command": "python -m bench --suite decode", "time": "2026-12-03"},
              "rows": [{"contender": "greedy", "metric": "ms/sequence", "median": 12.5, "min": 12.0, "max": 13.25,
                        "samples": [12.0, 12.5, 13.25], "ratio": 1.0, "notes": "batch 1"}]}
    src = tmp_path / "decode.json"
    src.write_text(json.dumps(report))
    path = pages.record_bench(str(src), str(tmp_path / "records"))
    assert path == str(tmp_path / "records" / "bench" / "decode.json")
    md = pages.render_benchmarks(pages.read_bench_records(str(tmp_path / "records")))
    assert md.startswith("### bench suite `decode`\n\ncpu AMD EPYC, cpu_kind avx512, commit abc1234, "
                         "command python -m bench --suite decode, time 2026-12-03\n")
    assert "| greedy | ms/sequence | 12.5 | 12-13.2 | 1.00 | batch 1 |" in md


def test_the_shipped_pages_match_the_shipped_records():
    """README, docs/results.md and docs/benchmarks.md hold exactly what bench/records/ gives."""
    assert pages.stale(ROOT) == [], "run python -m bench.pages --write and commit the pages"


def test_records_are_not_ignored_by_git():
    """The records are the pages' source: a .gitignore pattern (e.g. ``runs/``) must not hide them."""
    import shutil
    import subprocess

    if shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    for kind in ("recipes", "bench"):
        probe = os.path.join("bench", "records", kind, "any.json")
        ignored = subprocess.run(["git", "check-ignore", "-q", probe], cwd=ROOT).returncode == 0
        assert not ignored, f"{probe} is ignored by git: a record there would never reach a clone"
