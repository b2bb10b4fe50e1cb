"""The results tables of docs/results.md, printed from run directories: ``python -m bench.tables``.

Every figure in README's results tables should come from files a reader can regenerate, not from
a note typed by hand. This module reads trained run directories (``metrics.json``,
``history.json``, ``state.json``, ``recipe.yaml``, and ``provenance.json`` where
``--train`` wrote one) and prints, as markdown:

* the **main results table**: one row per recipe (``recipe | task | test figure | baseline (same
  split) | epochs / training time``), the baseline being the one seqkit scored on the same test
  split and stored in the run's ``metrics.json``;
* the **LM comparison** (``lm-pydoc-chars`` / ``lm-pydoc-stream``): the n-gram and compressor
  baselines of ``metrics.json["baselines"]`` beside the models (valid and test perplexity, test
  bits per token = ``log2(perplexity)``);
* the **G2P table** (``head.attention | test WER | test PER | best epoch | training time``);
* the **pinyin table** (baseline and model: WER, phrase accuracy = 1 - WER, PER, BLEU, chrF).

Each table is preceded by a line naming the runs it came from: seed(s), the date the run was
written, the code (``git describe`` and CPU kind recorded by ``--train`` in ``provenance.json``;
"not recorded" for runs trained otherwise), and whether the run's ``recipe.yaml`` still agrees with
the shipped recipe (keys that differ are named).

Usage::

    python -m bench.tables                       # runs/<name> of every recipes/*.yaml found
    python -m bench.tables --runs DIR [DIR ...]  # these run directories
    python -m bench.tables --train               # first train the missing runs (seqkit.train)
    python -m bench.tables --seeds 3 [--train]   # runs/<name>-seeds.json (seqkit.train_seeds): mean ± sd
    python -m bench.tables --check docs/results.md  # rows whose figures the runs do not give

``--check`` matches each printed row to the README table row whose first cell holds the row's key
(e.g. ``unigram``, ``recipes/acceptor-japanese-vowels.yaml``, ``bahdanau``) and reports every
figure of the printed row that the README row does not contain (numbers compared as printed, so
``3.116`` against ``3.138`` is a difference, ``2.754`` against ``2.75`` is not: the coarser
precision decides), and names the printed rows no README row holds. The exit
status is 1 when a figure differs, 0 otherwise (rows README does not hold are listed, not counted).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import glob
import json
import math
import os
import re
import sys
import time

from bench.common import git_describe  # noqa: F401  (re-exported: the commit a run was trained at)

RECIPES = "recipes"
RUNS = "runs"
from seqkit.runs.rundir import PROVENANCE  # noqa: E402  (a name run directories may hold)


# ---------------------------------------------------------------------------------------- values

@dataclasses.dataclass(frozen=True)
class Stat:
    """A figure over several seeds: mean, sample sd (``n - 1``; None for n = 1), n."""
    mean: float
    sd: float | None
    n: int


def fmt(v, spec: str = ".4f", pct: bool = False) -> str:
    """``v`` (a number or :class:`Stat`) as text; ``pct`` multiplies by 100 and adds ``%``."""
    if v is None:
        return "n/a"
    scale, unit = (100.0, "%") if pct else (1.0, "")
    if isinstance(v, Stat):
        sd = "n/a" if v.sd is None else format(v.sd * scale, spec)
        return f"{format(v.mean * scale, spec)}{unit} ± {sd}{unit}"
    return f"{format(v * scale, spec)}{unit}"


def _mean(v):
    return v.mean if isinstance(v, Stat) else v


def _map(v, fn):
    """``fn`` of a number; of a :class:`Stat`, a Stat of ``fn(mean)`` with the sd kept (``fn``
    must be ``x -> c +- x``, e.g. phrase accuracy = 1 - WER, for the sd to carry over)."""
    return Stat(fn(v.mean), v.sd, v.n) if isinstance(v, Stat) else fn(v)


def _int(n) -> str:
    return f"{int(round(_mean(n))):,}"


# ----------------------------------------------------------------------------------------- runs

@dataclasses.dataclass
class RunFiles:
    """What the tables read from one run directory (or one seeds summary).

    Attributes:
        path: the run directory (a seeds summary: its JSON file).
        recipe: ``recipe.yaml`` as a dict (seeds: the first seed run's).
        metrics: ``metrics.json``; with seeds, the valid/test figures are :class:`Stat` values.
        history: ``history.json`` (a list of per-epoch dicts; seeds: the first run's).
        state: ``state.json`` (``monitor``, ``best``, ``epoch``) or {}.
        provenance: ``provenance.json`` (written by ``--train``) or {}.
        seeds: the seed(s) the figures come from.
        written: the date ``metrics.json`` was written (UTC, from the file's mtime).
        per_seed: seeds only: ``{split: {figure: [value per seed, in seeds' order]}}`` (the
            summary's ``values``), so that a record keeps what a later seed is summarised with.
    """
    path: str
    recipe: dict
    metrics: dict
    history: list
    state: dict
    provenance: dict
    seeds: list
    written: str
    per_seed: dict = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.recipe.get("name") or os.path.basename(os.path.normpath(self.path))

    @property
    def recipe_name(self) -> str:
        """The shipped recipe's name: :attr:`name` without the ``-seed<S>`` of ``--seeds`` runs."""
        return re.sub(r"-seed\d+$", "", self.name)

    @property
    def head(self) -> str:
        return (self.recipe.get("head") or {}).get("type", "")

    @property
    def source(self) -> str:
        return (self.recipe.get("data") or {}).get("source", "")

    def test(self, key, default=None):
        return (self.metrics.get("test") or {}).get(key, default)

    def valid(self, key, default=None):
        return (self.metrics.get("valid") or {}).get(key, default)


def _json(path, default):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return default


def _yaml(path) -> dict:
    import yaml

    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f) or {}


def _mtime(path) -> str:
    return datetime.datetime.fromtimestamp(os.path.getmtime(path), datetime.timezone.utc).strftime("%Y-%m-%d")


def read_run(path: str) -> RunFiles:
    """Read one trained run directory.

    Raises:
        FileNotFoundError: no ``metrics.json`` (not a finished run) or no ``recipe.yaml``.
    """
    metrics_path = os.path.join(path, "metrics.json")
    if not os.path.exists(metrics_path):
        raise FileNotFoundError(f"{path}: no metrics.json (not a finished seqkit run); train it first "
                                f"(--train) or pass another --runs directory.")
    recipe = _yaml(os.path.join(path, "recipe.yaml"))
    return RunFiles(path=path, recipe=recipe, metrics=_json(metrics_path, {}),
                    history=_json(os.path.join(path, "history.json"), []),
                    state=_json(os.path.join(path, "state.json"), {}),
                    provenance=_json(os.path.join(path, PROVENANCE), {}),
                    seeds=[recipe.get("seed")], written=_mtime(metrics_path))


def read_seeds(summary_path: str) -> RunFiles:
    """Read a ``train_seeds`` summary (``runs/NAME-seeds.json``) as one :class:`RunFiles`.

    Valid and test figures become :class:`Stat` (mean, sample sd, n) of the seeds; the recipe,
    history, baselines, counts and training time are those of the first seed's run (its split).
    """
    summary = _json(summary_path, None)
    if summary is None:
        raise FileNotFoundError(f"{summary_path}: no seeds summary; train it with --train --seeds N.")
    first = read_run(summary["runs"][0])
    metrics = dict(first.metrics)
    for split in ("valid", "test"):
        if split in summary:
            # tables and counts (per_class, per_tag) stay the first seed's: the summary has means only
            kept = {k: v for k, v in (first.metrics.get(split) or {}).items() if isinstance(v, (dict, list))}
            metrics[split] = {**kept, **{k: Stat(s["mean"], s["sd"], s["n"]) for k, s in summary[split].items()}}
    first_recipe = dict(first.recipe, name=summary.get("recipe", first.name))
    provenance = merged_provenance([_json(os.path.join(r, PROVENANCE), {}) for r in summary["runs"]],
                                   list(summary["seeds"]))
    per_seed = {split: {k: list(s.get("values") or []) for k, s in summary[split].items()
                        if not k.startswith(("per_class.", "per_tag.", "confusion"))}
                for split in ("valid", "test") if isinstance(summary.get(split), dict)}
    return dataclasses.replace(first, path=summary_path, recipe=first_recipe, metrics=metrics,
                               seeds=list(summary["seeds"]), written=_mtime(summary_path),
                               provenance=provenance, per_seed=per_seed)


def merged_provenance(provenances: list[dict], seeds: list) -> dict:
    """One provenance for several seeds' runs: the first run's, where a commit, command or start
    load differs between seeds each value is named with its seeds (``"0b9ac71 (seed 1234),
    7c1d2e0 (seeds 1235, 1236)"``; a run without provenance counts as ``"?"``)."""
    if not provenances or not any(provenances):
        return {}
    out = dict(next(p for p in provenances if p))
    for key in ("commit", "command", "load_average_1min"):
        groups: dict = {}
        for p, seed in zip(provenances, seeds):
            v = p.get(key, "?")
            groups.setdefault(f"{v:.1f}" if isinstance(v, float) else str(v), []).append(str(seed))
        if len(groups) > 1:
            out[key] = ", ".join(f"{v} (seed{'s' if len(ss) > 1 else ''} {', '.join(ss)})"
                                 for v, ss in groups.items())
    return out


def best_epoch(run: RunFiles) -> int | None:
    """The epoch whose ``history[monitor]`` equals ``state.json``'s ``best`` (the kept model);
    the last epoch when the run had no monitor (no valid split)."""
    if not run.history:
        return None
    monitor, best = run.state.get("monitor"), run.state.get("best")
    if monitor and best is not None:
        for e in run.history:
            if e.get(monitor) is not None and math.isclose(e[monitor], best, rel_tol=1e-9):
                return int(e["epoch"])
    return int(run.history[-1]["epoch"])


def _flat(d, prefix=""):
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def recipe_drift(run: RunFiles, recipes_dir: str = RECIPES) -> list[str] | None:
    """Keys of the shipped ``recipes/NAME.yaml`` whose value the run's ``recipe.yaml`` does not
    have (None when no shipped recipe has the run's name). Keys the shipped file leaves to seqkit's
    defaults are not compared; a shipped ``training.precision: auto`` agrees with the policy ``auto``
    picks on the run's recorded CPU (:func:`auto_chose`)."""
    base = run.recipe_name
    shipped = os.path.join(recipes_dir, f"{base}.yaml")
    if not os.path.exists(shipped):
        return None
    want, have = _flat(_yaml(shipped)), _flat(run.recipe)
    if want.get("training.precision") == "auto" and auto_chose(run, have.get("training.precision")):
        have["training.precision"] = "auto"
    missing = object()  # a key the run lacks agrees only with a shipped null
    return [k for k, v in want.items()
            if k not in ("name", "seed", "plugins") and have.get(k, None if v is None else missing) != v]


def auto_chose(run: RunFiles, precision) -> bool:
    """Whether ``training.precision: auto`` would have chosen ``precision`` on the machine the run
    recorded (``metrics.json``'s ``machine``: its CPU flags, no GPU). A run on a GPU, or one that
    recorded no CPU flags, never agrees: what ``auto`` picks there is not recorded."""
    from seqkit.training.precision import resolve

    m = run.metrics.get("machine") or {}
    if not isinstance(precision, str) or m.get("gpus") or "cpu_flags" not in m:
        return False
    flags = {f: True for f in m["cpu_flags"]}
    return resolve("auto", flags=flags, gpu=None)[0] == precision


def provenance_line(runs: list[RunFiles], recipes_dir: str = RECIPES) -> str:
    """Where a table's figures come from, in markdown: one sentence for one run, a list for several."""
    parts = []
    for r in runs:
        p, m = r.provenance, r.metrics.get("machine") or {}
        if p.get("commit"):
            code = f"code {p['commit']}, {p.get('cpu_kind', '?')} CPU ({p.get('cpu', '?')}, {p.get('cpus', '?')} cores"
            load = p.get("load_average_1min")
            if load is not None:
                code += f", load {load:.1f} at start" if isinstance(load, (int, float)) else f", load at start {load}"
            code += ")"
            if p.get("command"):
                code += f", command `{p['command']}`"
        elif m:  # seqkit.train records versions and CPU in metrics.json (not the commit)
            code = f"seqkit {m.get('seqkit', '?')}, {m.get('cpu_kind', '?')} CPU ({m.get('cpu', '?')})"
        else:
            code = "code and CPU not recorded in the run"
        drift = recipe_drift(r, recipes_dir)
        rec = ("" if drift is None else "; recipe as shipped" if not drift
               else f"; **differs from the shipped recipe in** {', '.join(drift)}")
        seeds = ", ".join(str(s) for s in r.seeds)
        parts.append(f"`{r.path}` (seed{'s' if len(r.seeds) > 1 else ''} {seeds}; written {r.written}; "
                     f"{code}{rec})")
    if len(parts) == 1:
        return f"From {parts[0]}."
    return "From:\n" + "\n".join(f"- {p}" for p in parts)


# --------------------------------------------------------------------------------------- tables

@dataclasses.dataclass
class Row:
    key: str             # what the row's first cell holds in README (for --check)
    cells: list[str]


@dataclasses.dataclass
class Table:
    title: str
    header: list[str]
    rows: list[Row]
    runs: list[RunFiles]
    figure_cols: tuple = ()   # columns whose numbers --check compares (the first is the key)


def _epochs(run: RunFiles) -> str:
    planned = (run.recipe.get("training") or {}).get("epochs")
    done = run.metrics.get("epochs")
    best = best_epoch(run)
    secs = run.metrics.get("train_seconds")
    text = f"{done} of {planned} epochs" if planned else f"{done} epochs"
    if best is not None and best != done:
        text += f" (best {best})"
    if secs is not None:
        text += f" in {secs:,.1f} s"
    if run.provenance.get("wall_seconds") is not None:
        text += f" / {run.provenance['wall_seconds']:,.0f} s"
    return text


def _model_text(run: RunFiles) -> str:
    m = run.recipe.get("model") or {}
    cell = str(m.get("cell", "rnn")).upper().replace("SIMPLE_RNN", "SimpleRNN")
    bi = "Bi" if m.get("bidirectional") else ""
    layers = m.get("layers") or 1
    text = f"{bi}{cell}({m.get('units')})" + (f" x {layers}" if layers > 1 else "")
    if m.get("char_embedding"):
        text += " + character-aware words"
    return text


def _main_row(run: RunFiles) -> Row:
    t, b = run.metrics.get("test") or {}, run.metrics.get("baselines") or {}
    head, key = run.head, f"recipes/{re.sub(r'-seed[0-9]+$', '', run.name)}.yaml"
    model = _model_text(run)
    if head == "acceptor":
        classes = len(run.test("per_class") or {}) or "?"
        task = f"acceptor, {classes} classes, {model}"
        fig = (f"accuracy **{fmt(t.get('accuracy'))}**, macro-F1 {fmt(t.get('macro_f1'))} "
               f"({_int(t.get('examples', 0))} test examples)")
    elif head == "tagger":
        tags = len(run.test("per_tag") or {}) or "?"
        task = f"tagger, {tags} tags, {model}"
        fig = (f"token accuracy **{fmt(t.get('accuracy'))}**, macro-F1 {fmt(t.get('macro_f1'))} "
               f"({_int(t.get('tokens', 0))} tokens, {_int(t.get('sequences', 0))} sentences)")
    elif head == "language_model":
        layout = (run.recipe.get("data") or {}).get("layout", "line")
        task = f"language model ({layout} layout), {model}"
        fig = f"perplexity **{fmt(t.get('perplexity'), '.3f')}**, {fmt(t.get('bits_per_token'))} bits/token"
    elif head == "seq2seq":
        att = (run.recipe.get("head") or {}).get("attention", "none")
        task = f"seq2seq, {model} encoder, attention {att}"
        fig = (f"WER **{fmt(t.get('wer'), '.2f', pct=True)}**, PER {fmt(t.get('per'), '.2f', pct=True)} "
               f"({_int(t.get('words', 0))} test sources, beam {_int(t.get('beam_width', 0))})")
    else:
        task, fig = head, ", ".join(f"{k} {fmt(v)}" for k, v in t.items() if isinstance(v, (int, float, Stat)))
    base = []
    for name, val in b.items():
        test = val.get("test") if isinstance(val, dict) else None
        if isinstance(test, dict):
            if head == "seq2seq":
                base.append(f"{name}: WER {fmt(test.get('wer'), '.2f', pct=True)}, PER "
                            f"{fmt(test.get('per'), '.2f', pct=True)}")
            else:
                base.append(f"{name}: accuracy {fmt(test.get('accuracy'))}, macro-F1 {fmt(test.get('macro_f1'))}")
        elif test is not None and name in ("5-gram", "xz -9e"):
            base.append(f"{name}: perplexity {fmt(test, '.3f')}")
    return Row(key, [f"`{key}`", task, fig, "; ".join(base) or "none stored", _epochs(run)])


def main_table(runs: list[RunFiles]) -> Table:
    return Table("Main results (test split of each recipe)",
                 ["recipe", "task", "test figure", "baseline (same split)", "epochs / training time (s)"],
                 [_main_row(r) for r in runs], runs, figure_cols=(2, 3))


LM_BASELINES = (("1-gram", "unigram"), ("3-gram", "trigram, absolute discounting"),
                ("5-gram", "5-gram, absolute discounting"))
LM_COMPRESSORS = (("zlib -9", "zlib -9 (marginal size after the training text)"), ("bzip2 -9", "bzip2 -9 (same)"),
                  ("xz -9e", "xz -9e (same)"))


def lm_table(runs: list[RunFiles]) -> Table | None:
    """The n-gram / compressor comparison (runs of the LM head that stored baselines)."""
    lms = [r for r in runs if r.head == "language_model"]
    if not lms:
        return None
    with_base = [r for r in lms if r.metrics.get("baselines")]
    base = with_base[0].metrics["baselines"] if with_base else {}

    def brow(name, label):
        v = base.get(name)
        if v is None:
            return None
        return Row(label.split(" (")[0].split(",")[0], [label, f"{v['valid']:.2f}", f"{v['test']:.2f}",
                                                        f"{math.log2(v['test']):.2f}"])

    def mrow(r):
        layout = (r.recipe.get("data") or {}).get("layout", "line")
        m = r.recipe.get("model") or {}
        what = f"{str(m.get('cell', '')).upper()} {m.get('units')}"
        key = f"LSTM {m.get('units')}, stream layout" if layout == "stream" else what
        tr = r.recipe.get("training") or {}
        base = r.recipe_name
        detail = (f"`recipes/{base}.yaml`, truncated BPTT {tr.get('bptt')}, " if layout == "stream" else "")
        label = (f"**seqkit {what}, {'stream layout' if layout == 'stream' else str(m.get('layers', 1)) + ' layer'}** "
                 f"({detail}{r.metrics.get('epochs')} of {tr.get('epochs')} epochs, best epoch {best_epoch(r)})")
        return Row(key, [label, fmt(r.valid("perplexity"), ".2f"), f"**{fmt(r.test('perplexity'), '.3f')}**",
                         f"**{fmt(_map(r.test('bits_per_token'), lambda x: x), '.2f')}**"])

    rows = [brow(*nl) for nl in LM_BASELINES]
    rows += [mrow(r) for r in lms if (r.recipe.get("data") or {}).get("layout", "line") != "stream"]
    rows += [brow(*nl) for nl in LM_COMPRESSORS]
    rows += [mrow(r) for r in lms if (r.recipe.get("data") or {}).get("layout") == "stream"]
    return Table("Language model against n-gram and compressor baselines (same split, per character)",
                 ["model", "valid perplexity", "test perplexity", "test bits/char"],
                 [r for r in rows if r is not None], lms, figure_cols=(1, 2, 3))


def _standard_g2p(run: RunFiles) -> bool:
    """A G2P run scored on the literature's CMUdict 0.7b test list (``data.test_words``)."""
    return run.head == "seq2seq" and run.source == "cmudict" and bool((run.recipe.get("data") or {}).get("test_words"))


# Published word / phoneme error rates on the CMUdict 0.7b test list (stress removed, a word right
# when it equals any reference): references to read seqkit's rows against, not seqkit's measurements.
G2P_PUBLISHED = (
    ("Phonetisaurus (joint-sequence WFST)", "about 24.4%", "n/a"),
    ("LSTM (Yao & Zweig 2015)", "23.55%", "n/a"),
    ("BiLSTM encoder-decoder with attention (Toshniwal & Livescu 2016)", "20.24%", "n/a"),
    ("Transformer (CMU g2p-seq2seq)", "20.2%", "n/a"),
    ("token-level ensemble distillation (Sun et al. 2019)", "19.88%", "4.6%"),
)


def g2p_standard_table(runs: list[RunFiles]) -> Table | None:
    std = [r for r in runs if _standard_g2p(r)]
    if not std:
        return None
    rows = [Row(name, [f"{name} (published)", wer, per, "", ""]) for name, wer, per in G2P_PUBLISHED]
    for r in std:
        base = r.recipe_name
        n = len(r.seeds)
        secs = r.metrics.get("train_seconds")
        rows.append(Row(base, [f"**seqkit `{base}`** ({_model_text(r)} encoder, attention "
                               f"{(r.recipe.get('head') or {}).get('attention', 'none')}, beam "
                               f"{_int(r.test('beam_width', 0))}; {n} seed{'s' if n > 1 else ''})",
                               f"**{fmt(r.test('wer'), '.2f', pct=True)}**", fmt(r.test("per"), ".2f", pct=True),
                               fmt(r.valid("wer"), ".2f", pct=True),
                               f"{best_epoch(r)} of {r.metrics.get('epochs')}"
                               + ("" if secs is None else f"; {_mean(secs):,.0f} s")]))
    return Table("Grapheme-to-phoneme on the CMUdict 0.7b test list (11,994 words, the literature's split)",
                 ["system", "test WER", "test PER", "valid WER", "best epoch; training time (first seed's "
                  "`train_seconds`)"], rows, std, figure_cols=(1, 2, 3))


def g2p_table(runs: list[RunFiles]) -> Table | None:
    g2p = [r for r in runs if r.head == "seq2seq" and r.source == "cmudict" and not _standard_g2p(r)]
    if not g2p:
        return None
    rows = []
    for r in g2p:
        att = (r.recipe.get("head") or {}).get("attention", "none")
        label = f"**{att}** (recipe default)" if r.name.startswith("g2p-cmudict-attention") else att
        secs = r.metrics.get("train_seconds")
        rows.append(Row(att, [label, f"{fmt(r.test('wer'), '.2f', pct=True)}", f"{fmt(r.test('per'), '.2f', pct=True)}",
                              f"{best_epoch(r)} of {r.metrics.get('epochs')}",
                              "n/a" if secs is None else f"{secs:,.1f} s"]))
    return Table("Grapheme-to-phoneme on CMUdict (beam search, held-out test words)",
                 ["`head.attention`", "test WER", "test PER", "best epoch", "training time (`train_seconds`, wall)"],
                 rows, g2p, figure_cols=(1, 2, 3))


def pinyin_table(runs: list[RunFiles]) -> Table | None:
    py = [r for r in runs if r.head == "seq2seq" and r.source == "pinyin_phrases"]
    if not py:
        return None
    rows = []

    def cells(d):
        wer = d.get("wer")
        return [fmt(wer, ".2f", pct=True), fmt(_map(wer, lambda x: 1 - x) if wer is not None else None, ".2f", pct=True),
                fmt(d.get("per"), ".2f", pct=True), fmt(d.get("bleu"), ".2f"), fmt(d.get("chrf"), ".2f")]

    base = (py[0].metrics.get("baselines") or {}).get("most-frequent-target-per-source-symbol", {}).get("test")
    if base:
        rows.append(Row("most frequent syllable per character",
                        ["most frequent syllable per character (training split)"] + cells(base)))
    for r in py:
        att = (r.recipe.get("head") or {}).get("attention", "none")
        rows.append(Row("seqkit seq2seq", [f"**seqkit seq2seq, attention {att}** ({r.metrics.get('epochs')} epochs)"]
                        + [f"**{c}**" for c in cells(r.metrics.get("test") or {})]))
    return Table("Chinese phrase -> pinyin (beam search, held-out test phrases)",
                 ["model (test split)", "WER (phrase error)", "phrase accuracy", "PER (syllable error)", "BLEU", "chrF"],
                 rows, py, figure_cols=(1, 2, 3, 4, 5))


def all_tables(runs: list[RunFiles]) -> list[Table]:
    return [t for t in (main_table(runs), lm_table(runs), g2p_standard_table(runs), g2p_table(runs),
                        pinyin_table(runs)) if t is not None]


def render(table: Table, recipes_dir: str = RECIPES) -> str:
    """One table as markdown: a ``###`` title, the provenance line, the table."""
    lines = [f"### {table.title}", "", provenance_line(table.runs, recipes_dir), "",
             "| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(r.cells) + " |" for r in table.rows]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------- check

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def numbers(text: str) -> list[str]:
    """The numbers of a cell as printed (thousands separators dropped: ``1,057`` -> ``1057``)."""
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)
    return NUMBER.findall(text)


def same_number(printed: str, readme: str) -> bool:
    """Whether two printed numbers agree at the coarser of their two precisions (``2.754`` and
    ``2.75`` agree, ``3.116`` and ``3.138`` do not; integers must be equal)."""
    dp = len(printed.partition(".")[2])
    dr = len(readme.partition(".")[2])
    if dp == 0 or dr == 0:
        return dp == dr and printed == readme
    d = min(dp, dr)
    return abs(round(float(printed), d) - round(float(readme), d)) < 0.5 * 10 ** -d


def markdown_rows(text: str) -> list[list[str]]:
    """Every markdown table row of ``text`` as its list of cells (separator rows left out)."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("|") and s.endswith("|") and not re.fullmatch(r"\|[\s:|-]*\|", s):
            out.append([c.strip() for c in s[1:-1].split("|")])
    return out


def _plain(cell: str) -> str:
    return cell.replace("**", "").replace("`", "")


def check(readme: str, tables: list[Table]) -> list[str]:
    """Differences between README's table rows and the rows the runs give.

    A printed row is matched to the first README row (of as many cells) whose first cell holds the
    row's key; every number of the printed row's figure columns that the matching README cell
    does not contain is a difference (``table: row: column: runs give X, README has ...``). A
    printed row that no README row matches is reported as missing from README.

    Returns:
        The difference lines (empty when README agrees with the runs).
    """
    rows = markdown_rows(readme)
    out = []
    for t in tables:
        for r in t.rows:
            match = next((c for c in rows if len(c) == len(r.cells) and r.key in _plain(c[0])), None)
            if match is None:
                out.append(f"{t.title}: row '{r.key}': not in README (runs give: {' | '.join(r.cells[1:])})")
                continue
            for col in t.figure_cols:
                have = numbers(match[col])
                missing = [n for n in numbers(r.cells[col]) if not any(same_number(n, h) for h in have)]
                if missing:
                    out.append(f"{t.title}: row '{r.key}', column '{t.header[col]}': runs give "
                               f"{_plain(r.cells[col])!r}, README has {_plain(match[col])!r}")
    return out


# ---------------------------------------------------------------------------------------- train

def machine() -> dict:
    """CPU model, kind and vector extensions (``bench.machine``), core count, load average."""
    from bench.common import _cpu_name
    from bench.machine import cpu_flags, cpu_kind, machine_kind

    flags = cpu_flags()
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {"cpu": _cpu_name(), "cpu_kind": cpu_kind(flags), "machine_kind": machine_kind(flags),
            "cpus": os.cpu_count(),
            "cpu_flags": " ".join(f for f, on in flags.items() if on), "load_average_1min": load}


def train_run(recipe_path: str, run_dir: str, seeds: int | None = None, verbose: int = 1) -> None:
    """Train ``recipe_path`` with its defaults into ``run_dir`` (``seqkit.train``), or with
    ``seeds`` seeds into ``run_dir-seed<S>`` (``seqkit.train_seeds``: a seed that finished earlier
    with the same recipe is kept), and write ``provenance.json`` into each run as it is trained:
    commit, date, machine, load at its start, wall seconds."""
    import seqkit

    name = _yaml(recipe_path).get("name") or os.path.splitext(os.path.basename(recipe_path))[0]
    command = f"python -m bench.tables --train{f' --seeds {seeds}' if seeds else ''} --only {name}"
    start = {}

    def begin():
        start.update(started=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                     t0=time.perf_counter(), commit=git_describe(), info=machine())

    def record(path, how="trained"):
        if how != "kept":
            write_provenance(path, start["commit"], start["started"], time.perf_counter() - start["t0"],
                             command, start["info"], resumed=how == "resumed")
        begin()

    begin()
    if seeds:
        seqkit.train_seeds(recipe_path, seeds, run_dir, verbose=verbose, on_run=record)
    else:
        seqkit.train(recipe_path, run_dir, verbose=verbose)
        record(run_dir)


def write_provenance(run_dir: str, commit: str, started: str, wall: float, command: str, info: dict,
                     resumed: bool = False) -> None:
    """Write ``run_dir/provenance.json`` (staged and renamed): what trained the run, where, when."""
    data = {"commit": commit, "started": started, "wall_seconds": round(wall, 1), "command": command, **info}
    if resumed:
        data["note"] = "resumed: wall_seconds and load are those of the resumed part"
    tmp = os.path.join(run_dir, PROVENANCE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, os.path.join(run_dir, PROVENANCE))


def shipped(recipes_dir: str = RECIPES) -> list[tuple[str, str]]:
    """``(name, path)`` of every ``recipes/*.yaml`` (the recipe's ``name:``, else the file stem)."""
    out = []
    for path in sorted(glob.glob(os.path.join(recipes_dir, "*.yaml"))):
        out.append((_yaml(path).get("name") or os.path.splitext(os.path.basename(path))[0], path))
    return out


def collect(run_dirs: list[str] | None, *, seeds: int | None = None, do_train: bool = False,
            recipes_dir: str = RECIPES, runs_dir: str = RUNS, log=print, verbose: int = 1,
            only: list[str] | None = None) -> list[RunFiles]:
    """The runs the tables read: ``run_dirs`` as given, else ``runs/<name>`` (or, with ``seeds``,
    ``runs/<name>-seeds.json``) for each shipped recipe (those named in ``only``, when given),
    training the missing ones when ``do_train`` and skipping them (with a note through ``log``)
    otherwise.

    Raises:
        ValueError: a name in ``only`` is not a shipped recipe.
    """
    if run_dirs:
        return [read_seeds(p) if p.endswith(".json") else read_run(p) for p in run_dirs]
    recipes = shipped(recipes_dir)
    unknown = sorted(set(only or ()) - {name for name, _ in recipes})
    if unknown:
        raise ValueError(f"--only {' '.join(unknown)}: not a recipe in {recipes_dir}/ "
                         f"(there: {', '.join(name for name, _ in recipes)})")
    out = []
    for name, path in recipes:
        if only and name not in only:
            continue
        base = os.path.join(runs_dir, name)
        target = f"{base}-seeds.json" if seeds else os.path.join(base, "metrics.json")
        if not os.path.exists(target):
            if not do_train:
                log(f"<!-- {name}: no {target}; skipped (add --train to train it) -->")
                continue
            log(f"<!-- training {path} into {base} -->")
            train_run(path, base, seeds, verbose)
        out.append(read_seeds(target) if seeds else read_run(base))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.tables", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="+", metavar="DIR", help="run directories (or -seeds.json summaries) "
                    "[default: runs/<name> of every recipes/*.yaml]")
    ap.add_argument("--train", action="store_true", help="train the missing runs first (recipe defaults)")
    ap.add_argument("--seeds", type=int, help="read (and with --train, train) N seeds: mean ± sd")
    ap.add_argument("--check", metavar="README", help="report README rows that differ from the runs (exit 1)")
    ap.add_argument("--recipes", default=RECIPES, help="folder of the shipped recipes [recipes]")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these shipped recipes (by name)")
    a = ap.parse_args(argv)
    try:
        runs = collect(a.runs, seeds=a.seeds, do_train=a.train, recipes_dir=a.recipes, only=a.only)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not runs:
        print("no runs to read: train them (--train) or give --runs DIR ...", file=sys.stderr)
        return 2
    tables = all_tables(runs)
    info = machine()
    print(f"<!-- printed by python -m bench.tables at {git_describe()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, on {info['cpu']} ({info['cpu_kind']}, "
          f"{info['cpus']} CPUs) -->\n")
    for t in tables:
        print(render(t, a.recipes))
    if a.check:
        with open(a.check, encoding="utf-8") as f:
            found = check(f.read(), tables)
        diffs = [d for d in found if ": not in README" not in d]
        print(f"## {a.check} against the runs: {len(diffs)} difference(s), "
              f"{len(found) - len(diffs)} printed row(s) README does not hold\n")
        for d in diffs + [d for d in found if d not in diffs]:
            print(f"- {d}")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
