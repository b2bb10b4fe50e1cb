"""Adaptive evaluation of a stream language model over its seeds: ``python -m bench.lm_adaptive``.

For each run (one seed of the same recipe), ``Run.evaluate(cache=True, mix=True, dynamic=True)``
(``seqkit evaluate RUN --cache --mix --dynamic --json``) scores the test split eight ways: the
network alone (static) or dynamically evaluated (Krause et al. 2018), each alone and mixed with a
continuous cache of its hidden states (Grave et al. 2017), an online n-gram + longest-match model,
or both; every setting and mixture weight is chosen on the valid split, and test is scored once.
Then the runs are evaluated together (``ensemble``: the mean of their distributions) the same
eight ways: the measured value of a larger training budget (``N`` runs = ``N`` times the training).

The report (``bench/results/lm-adaptive.json`` and ``.md``) gives, per mode: the test bits per token,
mean ± sample sd over the seeds and each seed's value; the valid figure the settings were chosen on
(in-sample for the mixtures); the mean evaluation seconds and the peak memory; the ensembles'
figures; the compressors (same marginal rule) and the training curve (valid bits per token by epoch,
mean over the seeds, from each run's ``history.json``). ``python -m bench.pages --record-bench
bench/results/lm-adaptive.json --write`` puts it on the results page.

Usage (from the repository root)::

    python -m bench.lm_adaptive --runs runs/lm-pydoc-stream-seed1234 runs/lm-pydoc-stream-seed1235 \\
        runs/lm-pydoc-stream-seed1236 [--ensemble 2 --ensemble 3]      # minutes per run
    python -m bench.lm_adaptive --runs RUN... --from-json RUN=FILE[@COMMIT]... [--ensemble-json N=FILE...]
        # report `seqkit evaluate RUN --cache --mix --dynamic --json` outputs written earlier
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

SUITE = "lm-adaptive"
MODES = ("static", "static+cache", "static+ngram", "static+cache+ngram",
         "dynamic", "dynamic+cache", "dynamic+ngram", "dynamic+cache+ngram")
LABELS = {"static": "static (the network alone)", "static+cache": "static + cache",
          "static+ngram": "static + n-gram + match", "static+cache+ngram": "static + cache + n-gram + match",
          "dynamic": "dynamic evaluation", "dynamic+cache": "dynamic + cache",
          "dynamic+ngram": "dynamic + n-gram + match", "dynamic+cache+ngram": "dynamic + cache + n-gram + match"}
LN2 = math.log(2.0)


def _bits(figures: dict, mode: str):
    row = figures.get(mode)
    return row.get("bits_per_token") if isinstance(row, dict) else None


def ensemble_key(mode: str) -> str:
    """The key an ensemble's evaluation gives ``mode`` under (``dynamic+cache`` ->
    ``dynamic+ensemble+cache``)."""
    first, _, rest = mode.partition("+")
    return f"{first}+ensemble" + (f"+{rest}" if rest else "")


def _fmt(x, spec=".4f") -> str:
    return "" if x is None else format(x, spec)


def _mean_sd(xs: list) -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return ""
    if len(xs) == 1:
        return f"{xs[0]:.4f}"
    return f"{statistics.mean(xs):.4f} ± {statistics.stdev(xs):.4f}"


def _json(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or "static" not in doc:
        raise SystemExit(f"error: {path}: not the output of `seqkit evaluate RUN --cache --mix --dynamic --json` "
                         f"(no 'static' figures).")
    return doc


def _run_file(run: str, name: str) -> dict | list | None:
    try:
        with open(os.path.join(run, name), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def training_curve(runs: list[str], every: int = 5) -> list[tuple[int, float, int]]:
    """``(epoch, mean valid bits per token, runs averaged)`` every ``every`` epochs and at the last
    epoch any run reached, from the runs' ``history.json`` (``val_cross_entropy`` in nats / ln 2)."""
    curves = []
    for r in runs:
        hist = _run_file(r, "history.json") or []
        curves.append([h.get("val_cross_entropy") for h in hist if isinstance(h, dict)])
    last = max((len(c) for c in curves), default=0)
    out = []
    for e in sorted(set(list(range(every, last + 1, every)) + ([last] if last else []))):
        xs = [c[e - 1] / LN2 for c in curves if len(c) >= e and c[e - 1] is not None]
        if xs:
            out.append((e, statistics.mean(xs), len(xs)))
    return out


def report(runs: list[str], evals: list[dict], ensembles: dict[int, dict], sources: list[str],
           env: dict | None = None) -> dict:
    """The ``lm-adaptive`` report: ``{"suite", "environment", "rows": [], "markdown", "figures"}``
    (``figures``: per mode the per-seed, mean, sd and ensemble test bits per token; ``env``: the
    environment to record [default: :func:`bench.common.environment` now])."""
    if env is None:
        from bench.common import environment

        env = environment()

    import re

    import yaml

    seeds, names = [], []
    for r in runs:
        try:
            with open(os.path.join(r, "recipe.yaml"), encoding="utf-8") as f:
                rec = yaml.safe_load(f) or {}
        except (OSError, yaml.YAMLError):
            rec = {}
        seeds.append(rec.get("seed", "?"))
        names.append(re.sub(r"-seed\d+$", "", str(rec.get("name", ""))))
    sizes = sorted(ensembles)
    head = (["mode", f"test bits/char, mean ± sd ({len(runs)} seeds)", "per seed (" + ", ".join(map(str, seeds)) + ")",
             "valid (settings chosen on it)", "seconds", "peak MB"]
            + [f"ensemble of {n}" for n in sizes])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    figures = {}
    for m in MODES:
        xs = [_bits(d, m) for d in evals]
        if all(x is None for x in xs):
            continue
        valid = [((d.get(m) or {}).get("settings") or {}).get("valid_bits") for d in evals]
        secs = [(d.get(m) or {}).get("seconds") for d in evals]
        mem = [(d.get(m) or {}).get("peak_memory_mb") for d in evals]
        ens = {n: _bits(ensembles[n], ensemble_key(m)) for n in sizes}
        present = [x for x in xs if x is not None]
        figures[m] = {"values": xs, "mean": statistics.mean(present),
                      "sd": statistics.stdev(present) if len(present) > 1 else None,
                      **{f"ensemble_{n}": ens[n] for n in sizes}}
        vs = [v for v in valid if v is not None]
        ss = [s for s in secs if s is not None]
        ms = [x for x in mem if x is not None]
        cells = [LABELS[m], f"**{_mean_sd(xs)}**" if m == MODES[-1] else _mean_sd(xs),
                 " / ".join(_fmt(x) for x in xs), _fmt(statistics.mean(vs)) if vs else "",
                 f"{statistics.mean(ss):.0f}" if ss else "", f"{max(ms):,.0f}" if ms else ""]
        cells += [_fmt(ens[n]) for n in sizes]
        lines.append("| " + " | ".join(cells) + " |")
    comp = evals[0].get("compressors") or {}
    measured = ", ".join(f"{k} {v:.4f}" for k, v in comp.items() if isinstance(v, (int, float)))
    absent = "; ".join(f"{k}: {v}" for k, v in comp.items() if isinstance(v, str))
    curve = training_curve(runs)
    trained = []
    for r in runs:
        p = _run_file(r, "provenance.json") or {}
        st = _run_file(r, "state.json") or {}
        wall = p.get("wall_seconds")
        load = p.get("load_average_1min")
        trained.append(f"`{r}` (code {p.get('commit', 'not recorded')}, {st.get('epoch', '?')} epochs, "
                       + (f"{wall:,.0f} s wall" if isinstance(wall, (int, float)) else "wall time not recorded")
                       + (f", load {load:.1f} at start" if isinstance(load, (int, float)) else "")
                       + f"; `{p.get('command', 'command not recorded')}`)")
    md = ["\n".join(lines), "",
          f"Compressors on the same split (marginal bits/char after the training text): {measured or 'none'}"
          + (f"; not measured here: {absent}" if absent else "") + ".", "",
          "Runs: " + "; ".join(trained) + ".", "",
          "Evaluations: " + "; ".join(sources) + ".", ""]
    if curve:
        md += ["Training curve (valid bits/char of the network alone, mean over the seeds, by epoch): "
               + ", ".join(f"epoch {e}: {b:.3f}" + (f" ({n} run{'s' if n > 1 else ''})" if n != len(runs) else "")
                           for e, b, n in curve) + ".", ""]
    return {"suite": SUITE, "environment": env, "rows": [], "markdown": "\n".join(md), "figures": figures,
            "recipe": names[0] if names and len(set(names)) == 1 else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.lm_adaptive", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="+", required=True, metavar="RUN", help="runs of one stream LM recipe (its seeds)")
    ap.add_argument("--ensemble", type=int, action="append", default=[], metavar="N",
                    help="also evaluate the first N runs together (repeatable)")
    ap.add_argument("--from-json", nargs="+", default=[], metavar="RUN=FILE[@COMMIT]",
                    help="report these `seqkit evaluate RUN --cache --mix --dynamic --json` outputs instead of "
                         "evaluating (@COMMIT: the code that wrote the file, when not this checkout's)")
    ap.add_argument("--ensemble-json", nargs="+", default=[], metavar="N=FILE[@COMMIT]",
                    help="the same for `seqkit evaluate RUN --ensemble ...` of the first N runs")
    ap.add_argument("--out", default=os.path.join("bench", "results"))
    a = ap.parse_args(argv)
    given = dict(x.split("=", 1) for x in a.from_json)
    given_ens = {int(k): v for k, v in (x.split("=", 1) for x in a.ensemble_json)}
    evals, ensembles, sources = [], {}, []

    def stamp(spec):
        path, _, commit = spec.partition("@")
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(os.path.getmtime(path)))
        return f"file written {when}" + (f" by code {commit}" if commit else "")

    def load(spec):
        return _json(spec.partition("@")[0])

    for r in a.runs:
        if r in given:
            evals.append(load(given[r]))
            sources.append(f"`seqkit evaluate {r} --cache --mix --dynamic --json` ({stamp(given[r])})")
        else:
            import seqkit

            evals.append(seqkit.load(r).evaluate("test", cache=True, mix=True, dynamic=True))
            sources.append(f"`seqkit evaluate {r} --cache --mix --dynamic` (by this command)")
    for n in sorted(set(a.ensemble) | set(given_ens)):
        members = a.runs[:n]
        cmd = f"seqkit evaluate {members[0]} " + " ".join(f"--ensemble {m}" for m in members[1:]) + \
            " --cache --mix --dynamic"
        if n in given_ens:
            ensembles[n] = load(given_ens[n])
            sources.append(f"`{cmd} --json` ({stamp(given_ens[n])})")
        else:
            import seqkit

            ensembles[n] = seqkit.load(members[0]).evaluate("test", cache=True, mix=True, dynamic=True,
                                                            ensemble=members[1:])
            sources.append(f"`{cmd}` (by this command)")
    doc = report(a.runs, evals, ensembles, sources)
    doc["environment"]["command"] = "python -m bench.lm_adaptive " + " ".join(sys.argv[1:] if argv is None else argv)
    from bench.common import report_markdown

    os.makedirs(a.out, exist_ok=True)
    js, md = os.path.join(a.out, f"{SUITE}.json"), os.path.join(a.out, f"{SUITE}.md")
    for path, text in ((js, json.dumps(doc, indent=1)), (md, report_markdown(doc))):
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    print(report_markdown(doc))
    print(f"wrote {js} and {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
