"""Corpora larger than memory: peak RSS of stream-LM training against the size of the training text.

``python -m bench --suite corpus`` writes two training texts under a temporary
folder (deleted afterwards, never committed): about 10 MB and 1 GB (``--quick``:
10 MB and 100 MB) of CPython's pydoc help text, repeated block after block with
a numbered header line per block so the files are not one block's copies only,
plus a 20 kB validation file. For each size one fresh process
(``python -m bench.suite_corpus --worker``) trains a tiny character-level stream
LM (``source: text_corpus``, LSTM 64, 16 columns, bptt 64) for one epoch of
``training.steps_per_epoch`` = 50 chunks, so the training time does not grow
with the text, only the counting pass does. Reported per size:

* ``peak RSS``: the child's ``ru_maxrss`` from ``os.wait4`` (its whole life:
  TensorFlow, the counting pass, training, the final evaluation), and its own
  ``VmHWM`` read just before it exits (the same figure where ``/proc`` exists);
* ``count pass s``: the one bounded counting pass over the text (lines, stream length,
  token counts, seek table; :meth:`seqkit.data.lazy_corpus.LazyCorpus.scan`);
* ``train s``: the whole ``seqkit.training.train.train`` call (pass included).

Baseline: the in-memory path (``source: text_lines``, the same 10 MB file, the same
model and steps), which holds the lines, their encoding and the ``[B, N/B]`` columns.
Both skip the n-gram and compressor baselines that ``seqkit train`` computes after
training on an in-memory text (``text_corpus`` runs never compute them).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SIZES = {"10 MB": 10 * 10**6, "1 GB": 10**9}
QUICK_SIZES = {"10 MB": 10 * 10**6, "100 MB": 100 * 10**6}
STEPS = 50


def write_text(path: str, size: int) -> int:
    """Write about ``size`` bytes of pydoc text (blocks with a numbered header line); return bytes."""
    from pydoc_data.topics import topics

    block = "\n".join(topics[k] for k in topics).encode("utf-8") + b"\n"
    written, n = 0, 0
    with open(path, "wb") as f:
        while written < size:
            head = f"== block {n} of the corpus benchmark ==\n".encode("ascii")
            piece = head + block[: max(0, size - written - len(head))]
            f.write(piece)
            written += len(piece)
            n += 1
    return written


def _recipe(train: str, valid: str, lazy: bool) -> dict:
    data = ({"source": "text_corpus", "train_path": train, "valid_path": valid} if lazy else
            {"source": "text_lines", "path": train, "split": {"valid": 0.001, "test": 0.0}})
    return {"name": "corpus-bench", "seed": 1234,
            "data": {**data, "tokenizer": "char", "layout": "stream"},
            "model": {"cell": "lstm", "units": 64, "embedding_dim": 16},
            "head": {"type": "language_model"},
            "training": {"epochs": 1, "steps_per_epoch": STEPS, "batch_size": 16, "bptt": 64,
                         "learning_rate": 0.003, "early_stopping": None}}


def _vm_hwm_mb() -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _worker(a) -> dict:
    from seqkit._quiet import import_tensorflow_quietly

    import_tensorflow_quietly()
    from seqkit.data import lazy_corpus
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    scans = []
    original = lazy_corpus.LazyCorpus.scan

    def scan(self, count=True):  # record the counting pass's own time
        done = self._scan is not None and (self._scan["counter"] is not None or not count)
        out = original(self, count)
        if not done:
            scans.append(out["seconds"])
        return out

    lazy_corpus.LazyCorpus.scan = scan
    from seqkit.heads.language_model.head import LanguageModelHead

    LanguageModelHead.baselines = lambda self, prep: {}  # the in-memory path's n-grams and xz: not training
    t0 = time.perf_counter()
    metrics = train(recipe_from_dict(_recipe(a.train, a.valid, a.lazy)), a.run, verbose=0)
    return {"train_s": time.perf_counter() - t0, "count_pass_s": scans, "vm_hwm_mb": _vm_hwm_mb(),
            "valid_bits": metrics["valid"]["bits_per_token"], "lines": metrics["examples"]["train"],
            "vocabulary": metrics["vocabulary"]}


def _spawn(train: str, valid: str, run: str, lazy: bool) -> dict:
    cmd = [sys.executable, "-m", "bench.suite_corpus", "--worker", "--train", train, "--valid", valid,
           "--run", run] + (["--lazy"] if lazy else [])
    out = tempfile.TemporaryFile()
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    text = out.read().decode("utf-8", "replace")
    try:
        r = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"exit {p.returncode}: {text[-500:]}"}
    r["ru_maxrss_mb"] = usage.ru_maxrss / 1024  # KiB on Linux
    return r


def run(args):
    sizes = QUICK_SIZES if args.quick else SIZES
    rows, extra = [], {"steps": STEPS, "model": "char LSTM 64, 16 columns x bptt 64, 1 epoch"}
    with tempfile.TemporaryDirectory(prefix="seqkit-corpus-") as tmp:
        valid = os.path.join(tmp, "valid.txt")
        write_text(valid, 20_000)
        jobs = [(name, size, True) for name, size in sizes.items()] + [("10 MB", sizes["10 MB"], False)]
        for name, size, lazy in jobs:
            path = os.path.join(tmp, f"train-{size}.txt")
            if not os.path.exists(path):
                t0 = time.perf_counter()
                write_text(path, size)
                print(f"  corpus: wrote {name} in {time.perf_counter() - t0:.1f} s", flush=True)
            print(f"  corpus: training on {name} ({'text_corpus, lazy' if lazy else 'text_lines, in memory'}) ...",
                  flush=True)
            r = _spawn(path, valid, os.path.join(tmp, f"run-{size}-{lazy}"), lazy)
            label = f"{name}, {'text_corpus (lazy)' if lazy else 'text_lines (in memory)'}"
            if "error" in r:
                row = {"contender": label, "metric": "error", "median": 0, "min": 0, "max": 0,
                       "notes": r["error"][-300:]}
            else:
                mb = round(r["ru_maxrss_mb"])
                count = f"count pass {r['count_pass_s'][0]:.1f} s; " if r["count_pass_s"] else ""
                row = {"contender": label, "metric": "peak RSS MB", "median": mb, "min": mb, "max": mb,
                       "ratio": None, "notes": f"{count}train {r['train_s']:.1f} s (whole call); "
                       f"{r['lines']:,} lines; VmHWM {r['vm_hwm_mb']:.0f} MB; valid "
                       f"{r['valid_bits']:.3f} bits/char", **{"raw": r}}
            rows.append(row)
            print(f"  corpus: {row}", flush=True)
            if os.path.exists(path) and not any(j[1] == size for j in jobs[jobs.index((name, size, lazy)) + 1:]):
                os.remove(path)
    base = next((r["median"] for r in rows if r["metric"] == "peak RSS MB"), None)
    for r in rows:
        if base and r["metric"] == "peak RSS MB":
            r["ratio"] = r["median"] / base  # against the smallest lazy text
    return rows, extra


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--train")
    ap.add_argument("--valid")
    ap.add_argument("--run")
    ap.add_argument("--lazy", action="store_true")
    a = ap.parse_args()
    print(json.dumps(_worker(a)), flush=True)
