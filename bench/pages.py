"""The generated parts of the results and benchmark pages: ``python -m bench.pages``.

A figure in seqkit's documentation comes from a file a reader can check, never from a note typed
by hand. Two kinds of files are kept in git under ``bench/records/`` (small JSON, no weights):

* a **run record** ``bench/records/recipes/NAME.json`` per shipped recipe: what :mod:`bench.tables`
  reads from a trained run (``recipe.yaml``, ``metrics.json`` without its confusion matrices,
  ``history.json``, ``state.json``, ``provenance.json``) or from a ``--seeds`` summary (figures as
  mean, sample sd and n), written by ``--record``;
* a **bench record** ``bench/records/bench/SUITE.json``: a ``python -m bench`` report
  (``bench/results/SUITE.json``; also ``python -m bench.lm_adaptive``'s), copied by ``--record-bench``.

``--write`` renders them into the blocks of the pages that say where they begin and end::

    <!-- begin generated: results (python -m bench.pages --write; edit bench/records/, not this block) -->
    ...
    <!-- end generated: results -->

(``results`` in ``docs/results.md``, ``readme`` in ``README.md``, ``benchmarks`` in
``docs/benchmarks.md``, ``g2p`` in ``docs/tutorials/seq2seq-results.md``; a bench record of :data:`RESULT_SUITES`, such as the stream LM's adaptive
evaluation over its seeds, goes on the results page); ``--check`` exits 1 when a block differs from what the records give, so a
page cannot drift from its records. Every table names its runs' seeds, date, commit, CPU kind and
the command that trained them; every bench report names its commit, date, CPU and command.

Usage (from the repository root)::

    python -m bench.tables --train --seeds 5 --only acceptor-japanese-vowels   # a run (hours for some recipes)
    python -m bench.pages --record                   # record every runs/NAME[-seeds.json] found
    python -m bench.pages --record-bench bench/results/forecast.json
    python -m bench.pages --write                    # regenerate the blocks
    python -m bench.pages --check                    # exit 1 if a block is stale
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from bench import tables
from bench.common import report_markdown

RECORDS = os.path.join("bench", "records")
RECORD_SCHEMA = 1
PAGES = {"results": os.path.join("docs", "results.md"), "readme": "README.md",
         "benchmarks": os.path.join("docs", "benchmarks.md"),
         "g2p": os.path.join("docs", "tutorials", "seq2seq-results.md")}
MAX_RECORD_BYTES = 2_000_000
# bench reports whose figures are results of shipped recipes (they go on the results page, after
# the tables; every other report goes on the benchmarks page)
RESULT_SUITES = frozenset({"lm-adaptive"})

# Published figures a recipe's result is read against (a reference, not a measurement of seqkit's).
ANCHORS = {
    "lm-pydoc-chars": "xz -9e 1.17 bits/char (same split)",
    "lm-pydoc-stream": "xz -9e 1.17, bzip2 -9 1.24 bits/char (same split)",
    "acceptor-japanese-vowels": "1-NN DTW 0.949 (UEA archive)",
    "g2p-cmudict-attention": "Yao & Zweig 2015: WER 23.6%, PER 5.5%",
    "g2p-cmudict-standard": "same test list: LSTM 23.55% (Yao & Zweig 2015), BiLSTM + attention 20.24% (Toshniwal & Livescu 2016)",
}


# ------------------------------------------------------------------------------------- records

def _plain(obj):
    """``obj`` with every :class:`bench.tables.Stat` as ``{"mean", "sd", "n"}`` (JSON-ready)."""
    if isinstance(obj, tables.Stat):
        return {"mean": obj.mean, "sd": obj.sd, "n": obj.n}
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items() if k != "confusion_matrix"}
    if isinstance(obj, list):
        return [_plain(v) for v in obj]
    return obj


def _stats(split: dict) -> dict:
    return {k: tables.Stat(v["mean"], v["sd"], v["n"]) if isinstance(v, dict) and set(v) == {"mean", "sd", "n"}
            else v for k, v in split.items()}


def record_of(run: tables.RunFiles) -> dict:
    """The JSON record of one run (or seeds summary) read by :func:`bench.tables.read_run` /
    :func:`bench.tables.read_seeds`: everything the tables print, nothing else."""
    return {"schema": RECORD_SCHEMA, "name": run.recipe_name, "path": run.path,
            "seeds": run.seeds, "written": run.written, "recipe": run.recipe, "metrics": _plain(run.metrics),
            "history": run.history, "state": run.state, "provenance": run.provenance,
            **({"per_seed": run.per_seed} if run.per_seed else {})}


def _write_json(path: str, obj: dict) -> None:
    """Staged write: ``path.tmp`` then rename, so a failed write leaves the old record."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def write_record(run: tables.RunFiles, records_dir: str = RECORDS) -> str:
    """Write ``records_dir/runs/NAME.json`` for ``run``; return its path."""
    rec = record_of(run)
    path = os.path.join(records_dir, "recipes", f"{rec['name']}.json")
    _write_json(path, rec)
    return path


class RecordError(ValueError):
    """A record under ``bench/records/`` that is not one this module wrote."""


def _load(path: str) -> dict:
    if os.path.getsize(path) > MAX_RECORD_BYTES:
        raise RecordError(f"{path}: {os.path.getsize(path):,} bytes, over the {MAX_RECORD_BYTES:,} a record may "
                          f"have; write it again with python -m bench.pages --record.")
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordError(f"{path}: not a JSON record ({e}); write it again with python -m bench.pages.") from e
    if not isinstance(obj, dict):
        raise RecordError(f"{path}: a record is a JSON object; write it again with python -m bench.pages.")
    return obj


def read_record(path: str) -> tables.RunFiles:
    """A run record as the :class:`bench.tables.RunFiles` it was written from (figures over seeds
    as :class:`bench.tables.Stat`).

    Raises:
        RecordError: not a run record of this schema (the message names the file and the key).
    """
    obj = _load(path)
    if obj.get("schema") != RECORD_SCHEMA:
        raise RecordError(f"{path}: schema {obj.get('schema')!r}, expected {RECORD_SCHEMA}; write it again "
                          f"with python -m bench.pages --record.")
    want = {"path": str, "seeds": list, "written": str, "recipe": dict, "metrics": dict, "history": list,
            "state": dict, "provenance": dict}
    for key, typ in want.items():
        if not isinstance(obj.get(key), typ):
            raise RecordError(f"{path}: key {key!r} must be a {typ.__name__}; write the record again with "
                              f"python -m bench.pages --record.")
    metrics = dict(obj["metrics"])
    for split in ("valid", "test"):
        if isinstance(metrics.get(split), dict):
            metrics[split] = _stats(metrics[split])
    per_seed = obj.get("per_seed", {})
    if not isinstance(per_seed, dict):
        raise RecordError(f"{path}: key 'per_seed' must be a dict; write the record again with "
                          f"python -m bench.pages --record.")
    return tables.RunFiles(path=obj["path"], recipe=obj["recipe"], metrics=metrics, history=obj["history"],
                           state=obj["state"], provenance=obj["provenance"], seeds=obj["seeds"],
                           written=obj["written"], per_seed=per_seed)


def read_records(records_dir: str = RECORDS, recipes_dir: str = tables.RECIPES) -> list[tables.RunFiles]:
    """Every run record, in the order of the shipped recipes (then any others, by name)."""
    folder = os.path.join(records_dir, "recipes")
    names = sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".json")) if os.path.isdir(folder) else []
    order = [n for n, _ in tables.shipped(recipes_dir)]
    names.sort(key=lambda n: (order.index(n) if n in order else len(order), n))
    return [read_record(os.path.join(folder, f"{n}.json")) for n in names]


def record_bench(report: str, records_dir: str = RECORDS) -> str:
    """Copy a ``python -m bench`` report into ``records_dir/bench/SUITE.json``; return its path.

    Raises:
        RecordError: ``report`` is not a bench report (no ``suite`` / ``rows`` / ``environment``).
    """
    doc = _load(report)
    if not isinstance(doc.get("suite"), str) or not isinstance(doc.get("rows"), list) \
            or not isinstance(doc.get("environment"), dict):
        raise RecordError(f"{report}: not a python -m bench report (needs 'suite', 'rows', 'environment').")
    if not re.fullmatch(r"[a-z0-9_-]+", doc["suite"]):
        raise RecordError(f"{report}: suite name {doc['suite']!r} is not a plain name.")
    path = os.path.join(records_dir, "bench", f"{doc['suite']}.json")
    _write_json(path, doc)
    return path


def read_bench_records(records_dir: str = RECORDS) -> list[dict]:
    folder = os.path.join(records_dir, "bench")
    if not os.path.isdir(folder):
        return []
    return [_load(os.path.join(folder, f)) for f in sorted(os.listdir(folder)) if f.endswith(".json")]


# --------------------------------------------------------------------------------------- blocks

def _unrecorded(runs: list[tables.RunFiles], recipes_dir: str) -> list[str]:
    """Names of the shipped recipes that no record in ``runs`` belongs to."""
    have = {r.recipe_name for r in runs}
    return [n for n, _ in tables.shipped(recipes_dir) if n not in have]


def render_results(runs: list[tables.RunFiles], recipes_dir: str = tables.RECIPES,
                   reports: list[dict] = ()) -> str:
    """The ``results`` block: every table of :mod:`bench.tables` from the records, the recorded
    reports of :data:`RESULT_SUITES` (e.g. the stream LM's adaptive evaluation over its seeds), and
    the shipped recipes that have no record yet."""
    parts = [tables.render(t, recipes_dir) for t in tables.all_tables(runs)] if runs else []
    parts += [report_markdown(doc, level=3) for doc in reports if doc.get("suite") in RESULT_SUITES]
    missing = _unrecorded(runs, recipes_dir)
    if missing:
        parts.append("Shipped recipes with no record yet (their earlier figures, measured by hand, are on the "
                     "in-depth pages linked below): "
                     + ", ".join(f"`{n}`" for n in missing) + ". To add one: `python -m bench.tables --train "
                     "--only NAME`, then `python -m bench.pages --record --write`.\n")
    return "\n".join(parts)


def _readme_figure(run: tables.RunFiles) -> tuple[str, str]:
    """(figure, baseline) cells of README's table: the head's main test figure and the strongest
    baseline stored with it on the same split."""
    t, b = run.metrics.get("test") or {}, run.metrics.get("baselines") or {}
    seeds = f" ({len(run.seeds)} seeds)" if len(run.seeds) > 1 else ""
    head = run.head
    if head == "language_model":
        fig = (f"perplexity **{tables.fmt(t.get('perplexity'), '.3f')}**, "
               f"{tables.fmt(t.get('bits_per_token'), '.3f')} bits/char{seeds}")
        five = (b.get("5-gram") or {}).get("test")
        base = f"5-gram perplexity {five:.3f}" if isinstance(five, (int, float)) else "none stored"
    elif head in ("acceptor", "tagger"):
        what = "accuracy" if head == "acceptor" else "token accuracy"
        fig = f"{what} **{tables.fmt(t.get('accuracy'))}**{seeds}"
        base = "; ".join(f"{name} {tables.fmt((v.get('test') or {}).get('accuracy'))}"
                         for name, v in b.items() if isinstance(v, dict) and isinstance(v.get("test"), dict)) \
            or "none stored"
    elif head == "seq2seq":
        fig = (f"WER **{tables.fmt(t.get('wer'), '.2f', pct=True)}**, "
               f"PER {tables.fmt(t.get('per'), '.2f', pct=True)}{seeds}")
        base = "; ".join(f"{name}: WER {tables.fmt((v.get('test') or {}).get('wer'), '.2f', pct=True)}"
                         for name, v in b.items() if isinstance(v, dict) and isinstance(v.get("test"), dict)) \
            or "none stored"
    else:
        fig = ", ".join(f"{k} {tables.fmt(v)}" for k, v in t.items() if isinstance(v, (int, float, tables.Stat)))
        base = "none stored"
    return fig, base


def _adaptive_line(doc: dict) -> str | None:
    """README's sentence for a recorded ``lm-adaptive`` report: the recipe's best adaptive figure
    over its seeds and its largest ensemble's."""
    from bench.lm_adaptive import MODES

    figs, recipe = doc.get("figures") or {}, doc.get("recipe")
    best = figs.get(MODES[-1]) if isinstance(figs, dict) else None
    if not isinstance(best, dict) or not recipe or not isinstance(best.get("mean"), (int, float)):
        return None
    n = len([v for v in best.get("values") or [] if v is not None])
    sd = f" ± {best['sd']:.3f}" if isinstance(best.get("sd"), (int, float)) else ""
    ens = sorted((int(k.split("_")[1]), v) for k, v in best.items()
                 if k.startswith("ensemble_") and isinstance(v, (int, float)))
    tail = f"; an ensemble of {ens[-1][0]} seeds: {ens[-1][1]:.3f}" if ens else ""
    return (f"`{recipe}` with adaptive evaluation (`seqkit evaluate RUN --cache --mix --dynamic`: dynamic "
            f"evaluation, a continuous cache, an online n-gram and match model, every weight chosen on valid): "
            f"**{best['mean']:.3f}{sd} bits/char** ({n} seeds{tail}); recorded "
            f"{str((doc.get('environment') or {}).get('time', '?'))[:10]}, each evaluation's command and code on "
            f"the Results page.")


def render_readme(runs: list[tables.RunFiles], recipes_dir: str = tables.RECIPES, reports: list[dict] = ()) -> str:
    """The ``readme`` block: a line per recorded recipe (test figure, baseline on the same split,
    published anchor, code and date), and a sentence per recorded adaptive LM evaluation."""
    lines = ["| recipe | figure (test) | baseline (same split) | anchor | code, date |",
             "|---|---|---|---|---|"]
    for r in runs:
        name = r.recipe_name
        fig, base = _readme_figure(r)
        code = r.provenance.get("commit", "not recorded")
        lines.append(f"| `{name}` | {fig} | {base} | {ANCHORS.get(name, '')} | {code}, {r.written} |")
    missing = _unrecorded(runs, recipes_dir)
    out = "\n".join(lines) + "\n"
    for doc in reports:
        line = _adaptive_line(doc) if doc.get("suite") == "lm-adaptive" else None
        if line:
            out += f"\n{line}\n"
    if missing:
        out += f"\nNo record yet: {', '.join(f'`{n}`' for n in missing)} (earlier figures: see Results).\n"
    return out


def render_benchmarks(reports: list[dict]) -> str:
    """The ``benchmarks`` block: each recorded bench report with its environment line (commit,
    date, CPU, command) and its tables."""
    reports = [doc for doc in reports if doc.get("suite") not in RESULT_SUITES]
    if not reports:
        return "No bench report is recorded yet: `python -m bench --suite NAME`, then " \
               "`python -m bench.pages --record-bench bench/results/NAME.json --write`.\n"
    return "\n".join(report_markdown(doc, level=3) for doc in reports)


def blocks(records_dir: str = RECORDS, recipes_dir: str = tables.RECIPES) -> dict[str, str]:
    """``{block name: markdown}`` of every generated block, from the records."""
    runs, reports = read_records(records_dir, recipes_dir), read_bench_records(records_dir)
    return {"results": render_results(runs, recipes_dir, reports), "readme": render_readme(runs, recipes_dir, reports),
            "benchmarks": render_benchmarks(reports), "g2p": render_g2p(runs, recipes_dir)}


def render_g2p(runs: list[tables.RunFiles], recipes_dir: str = tables.RECIPES) -> str:
    """The ``g2p`` block leading the G2P section: the standard-split table (published systems on the
    CMUdict 0.7b test list beside seqkit's recorded seeds), or what to run while none is recorded."""
    table = tables.g2p_standard_table(runs)
    if table is None:
        return ("No run of `g2p-cmudict-standard` is recorded yet: `seqkit train "
                "recipes/g2p-cmudict-standard.yaml --seeds 3`, then `python -m bench.pages --record "
                "runs/g2p-cmudict-standard-seeds.json --write`.\n")
    return tables.render(table, recipes_dir)


def _markers(name: str) -> tuple[str, str]:
    return (f"<!-- begin generated: {name} (python -m bench.pages --write; edit bench/records/, not this block) -->",
            f"<!-- end generated: {name} -->")


def replace_block(text: str, name: str, body: str, where: str = "page") -> str:
    """``text`` with the generated block ``name`` holding ``body``.

    Raises:
        RecordError: the page has not exactly one begin and one end marker for ``name``, in order.
    """
    begin, end = _markers(name)
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise RecordError(f"{where}: needs one line '{begin}' and, after it, one line '{end}' around the "
                          f"generated block.")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n\n{body.rstrip()}\n\n{end}{tail}"


def _regenerated(root: str, records_dir: str | None) -> list[tuple[str, str, str, str]]:
    """``(page, path, text now, text with its block regenerated)`` of every page."""
    records_dir = records_dir or os.path.join(root, RECORDS)
    gen = blocks(records_dir, os.path.join(root, tables.RECIPES))
    out = []
    for name, page in PAGES.items():
        path = os.path.join(root, page)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        out.append((page, path, text, replace_block(text, name, gen[name], page)))
    return out


def stale(root: str = ".", records_dir: str | None = None) -> list[str]:
    """The pages (relative paths) whose generated block differs from what the records give."""
    return [page for page, _, text, new in _regenerated(root, records_dir) if new != text]


def write_pages(root: str = ".", records_dir: str | None = None) -> list[str]:
    """Rewrite every page's generated block (staged + renamed); return the pages that changed."""
    changed = []
    for page, path, text, new in _regenerated(root, records_dir):
        if new != text:
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.write(new)
            os.replace(path + ".tmp", path)
            changed.append(page)
    return changed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.pages", description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", nargs="*", metavar="RUN", default=None,
                    help="record these runs (directories or -seeds.json summaries) [default: runs/NAME-seeds.json "
                         "or runs/NAME of every shipped recipe found]")
    ap.add_argument("--record-bench", nargs="+", metavar="REPORT", default=[],
                    help="record these python -m bench reports (bench/results/SUITE.json)")
    ap.add_argument("--write", action="store_true", help="rewrite the pages' generated blocks from the records")
    ap.add_argument("--check", action="store_true", help="exit 1 if a page's generated block is stale")
    a = ap.parse_args(argv)
    if a.record is None and not a.record_bench and not a.write and not a.check:
        ap.error("nothing to do: give --record, --record-bench, --write or --check")
    try:
        if a.record is not None:
            paths = a.record
            if not paths:
                paths = []
                for name, _ in tables.shipped():
                    summary, single = os.path.join(tables.RUNS, f"{name}-seeds.json"), os.path.join(tables.RUNS, name)
                    if os.path.exists(summary):
                        paths.append(summary)
                    elif os.path.exists(os.path.join(single, "metrics.json")):
                        paths.append(single)
            for p in paths:
                run = tables.read_seeds(p) if p.endswith(".json") else tables.read_run(p)
                print(f"recorded {p} -> {write_record(run)}")
        for report in a.record_bench:
            print(f"recorded {report} -> {record_bench(report)}")
        if a.write:
            changed = write_pages()
            print("rewritten: " + (", ".join(changed) if changed else "nothing (the pages were up to date)"))
        if a.check:
            bad = stale()
            if bad:
                print(f"stale generated blocks in: {', '.join(bad)} (run python -m bench.pages --write)", file=sys.stderr)
                return 1
            print("every generated block matches bench/records/")
    except (RecordError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
