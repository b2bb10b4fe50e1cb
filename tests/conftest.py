"""Shared fixtures. TensorFlow is imported once per session (it is slow to import)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # xdist workers (addopts: three) share the machine's cores: each sizes TensorFlow's thread pools
    # to its share (one thread on two cores), so that no worker's pools spin for cores the others
    # are using (decoding loops of small ops ran 10-30x slower with the default pools than alone);
    # the commands the tests start as child processes inherit it. Set here, at import, because
    # TensorFlow reads these once, when its runtime starts.
    _share = str(max(1, len(os.sched_getaffinity(0)) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", _share)
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", _share)


@pytest.fixture(scope="session")
def tf():
    import tensorflow as tf

    return tf


@pytest.fixture(scope="session")
def keras(tf):
    import keras

    return keras


def make_recipe(tmp_path=None, **sections):
    """A small valid recipe dict (tiny LSTM LM on a slice of pydoc text), updated by ``sections``."""
    raw = {
        "name": "tiny",
        "seed": 7,
        "data": {"source": "pydoc_topics", "tokenizer": "char", "max_length": 160, "limit": 240,
                 "split": {"valid": 0.1, "test": 0.1}},
        "model": {"cell": "lstm", "units": 32, "embedding_dim": 16, "layers": 1},
        "head": {"type": "language_model"},
        "training": {"epochs": 2, "batch_size": 32, "learning_rate": 0.01, "early_stopping": None},
        "decoding": {"max_length": 40},
    }
    for k, v in sections.items():
        if isinstance(v, dict) and isinstance(raw.get(k), dict):
            raw[k].update(v)
        else:
            raw[k] = v
    return raw


@pytest.fixture
def recipe_dict():
    return make_recipe


@pytest.fixture
def write_recipe(tmp_path):
    """Write a recipe dict to tmp_path/recipe.yaml and return the path."""
    import yaml

    def _write(raw, name="recipe.yaml"):
        p = tmp_path / name
        p.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
        return str(p)

    return _write


@pytest.fixture(autouse=True, scope="module")
def _forget_test_plugins():
    """Drop cells, heads and data sources that a test module defined once its tests end.

    A head registered in one test file would otherwise stay in the process's registry and change
    what later files' tests on the same worker see (e.g. the heads listed in a "needs a ... run" message).
    Plugins from seqkit, installed packages and plugin files are kept: re-importing them does not
    register them again.
    """
    yield
    import sys

    registry = sys.modules.get("seqkit.registry")
    if registry is None:
        return
    for reg in (registry.CELLS, registry.HEADS, registry.DATA):
        for name, entry in list(reg._entries.items()):
            module = getattr(entry.obj, "__module__", "") or ""
            if module.split(".")[-1].startswith("test_") and not module.startswith("seqkit"):
                del reg._entries[name]


@pytest.fixture
def seqkit_stderr():
    """Print seqkit's log lines to stderr during the test, as the CLI does (a library call
    alone prints nothing), so ``capsys.readouterr().err`` sees its warnings."""
    from seqkit.log import to_stderr

    with to_stderr():
        yield


# --- Built once per test session, shared by every xdist worker -------------------------------
# A tiny model trained (or exported) in several test files is built by the first worker that
# asks and read by the others: `--dist loadfile` puts files on either worker, so a plain session
# fixture would build it once per worker. Tests must only READ these directories.

@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory):
    """A folder all xdist workers of this pytest run see (their common base temp); without xdist,
    the run's own base temp. Never a folder of an earlier run."""
    base = tmp_path_factory.getbasetemp()
    d = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    d.mkdir(exist_ok=True)
    return d


def built_once(shared, name: str, build) -> str:
    """``shared/name``, made by ``build(path)`` by the first caller in this pytest run (an exclusive
    ``flock`` on ``shared/name.lock``: the others wait, then reuse it); a build that raised is
    made again by the next caller."""
    import fcntl
    import shutil

    path, done = shared / name, shared / f"{name}.built"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(path, ignore_errors=True)
            build(str(path))
            done.touch()
    return str(path)


def tiny_lm_recipe(cell: str = "lstm") -> dict:
    """A tiny 2-layer LM (16 units, 100 pydoc lines, 1 epoch): the export tests' run."""
    return make_recipe(data={"limit": 100}, model={"cell": cell, "units": 16, "layers": 2},
                       training={"epochs": 1})


@pytest.fixture(scope="session")
def tiny_lm(shared_dir, keras):
    """``tiny_lm(cell)``: the run directory of :func:`tiny_lm_recipe`, trained once per session."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    def get(cell: str = "lstm") -> str:
        return built_once(shared_dir, f"tiny_lm_{cell}",
                          lambda p: train(recipe_from_dict(tiny_lm_recipe(cell)), p, verbose=0))

    return get


@pytest.fixture(scope="session")
def tiny_lm_export(shared_dir, tiny_lm):
    """``tiny_lm_export(cell)``: ``(export dir, parity report)`` of ``tiny_lm(cell)`` exported once
    per session with ``--format all`` (float32, 12 parity examples): model.tflite, metadata.json,
    parity.json, saved_model/, vocab.json."""
    import json

    from seqkit.export.writer import export_run

    def get(cell: str = "lstm"):
        run = tiny_lm(cell)
        out = built_once(shared_dir, f"tiny_lm_{cell}_export_all",
                         lambda p: export_run(run, p, fmt="all", parity_examples=12))
        with open(os.path.join(out, "parity.json"), encoding="utf-8") as f:
            return out, json.load(f)

    return get


#: The line that :func:`tiny_stream_lm_text` repeats (its words occur in no other line).
REPEATED_LINE = "quick brown fox jumps"


def tiny_stream_lm_text() -> str:
    """200 lines of six random Greek-letter words, every fourth line :data:`REPEATED_LINE`."""
    import numpy as np

    rng = np.random.default_rng(11)
    words = ["alpha", "beta", "gamma", "delta", "tau", "sigma", "omega", "kappa"]
    return "\n".join(REPEATED_LINE if i % 4 == 0 else " ".join(rng.choice(words, 6))
                     for i in range(200)) + "\n"


@pytest.fixture(scope="session")
def tiny_stream_lm(shared_dir, keras):
    """The run directory of a tiny stream-layout LM (characters, 1 layer of 16 units, 1 epoch) on
    :func:`tiny_stream_lm_text`, trained once per session (valid 20%, test 10% of the lines)."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    def build(path):
        text = shared_dir / "tiny_stream_lm.txt"
        text.write_text(tiny_stream_lm_text(), encoding="utf-8")
        raw = make_recipe(data={"source": "text_lines", "path": str(text), "limit": None,
                                "layout": "stream", "split": {"valid": 0.2, "test": 0.1}},
                          model={"units": 16, "embedding_dim": 8, "layers": 1},
                          training={"epochs": 1, "batch_size": 8, "bptt": 16, "learning_rate": 0.02})
        train(recipe_from_dict(raw), path, verbose=0)

    return built_once(shared_dir, "tiny_stream_lm", build)


#: Word/TAG lines (3 sentences x 5) of the tiny taggers (tests/test_export_sequence.py and others).
TAG_TRAIN = "".join(["the/D dog/N runs/V\n", "a/D cat/N sleeps/V fast/R\n", "the/D cat/N runs/V\n"] * 5)

#: The header of the tiny two-dimensional ``.ts`` frame files (labels up / down).
TS_HEAD = "@problemName toy\n@dimensions 2\n@classLabel true up down\n@data\n"


def ts_case(i, label=True):
    """Line ``i`` of a tiny ``.ts`` file: 3-6 frames of 2 values, rising ("up") for even ``i``."""
    n, up = 3 + i % 4, i % 2 == 0
    a = [f"{(j if up else -j) + 0.5 * (i % 3):g}" for j in range(n)]
    b = [f"{10 + j * (i % 5):g}" for j in range(n)]
    return ",".join(a) + ":" + ",".join(b) + (":" + ("up" if up else "down") if label else "") + "\n"


def tiny_tagger_recipe(path: str) -> dict:
    """A tiny 1-layer GRU tagger (8 units, embedding 6) trained 8 epochs on :data:`TAG_TRAIN`
    (written at ``path``; 30% held out as test, no validation split): the int8 export tests' run."""
    return {"name": "tag", "seed": 1,
            "data": {"source": "word_tag", "path": path, "max_length": 8,
                     "split": {"valid": 0.0, "test": 0.3, "shuffle": True}},
            "model": {"cell": "gru", "units": 8, "embedding_dim": 6, "layers": 1},
            "head": {"type": "tagger"},
            "training": {"epochs": 8, "batch_size": 4, "learning_rate": 0.02, "early_stopping": None}}


@pytest.fixture(scope="session")
def tiny_tagger(shared_dir, keras):
    """The run directory of :func:`tiny_tagger_recipe`, trained once per session (read only)."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    def build(path):
        data = shared_dir / "tiny_tagger.txt"
        data.write_text(TAG_TRAIN, encoding="utf-8")
        train(recipe_from_dict(tiny_tagger_recipe(str(data))), path, verbose=0)

    return built_once(shared_dir, "tiny_tagger", build)


def tiny_acceptor_recipe(path: str) -> dict:
    """A tiny 1-layer LSTM acceptor (8 units, mean pooling) trained 8 epochs on 20 lines of
    :func:`ts_case` frames (written at ``path``; 30% held out as test): the int8 export tests' run."""
    return {"name": "acc", "seed": 1,
            "data": {"source": "ts", "train_path": path, "max_length": 6,
                     "split": {"valid": 0.0, "test": 0.3, "shuffle": True}},
            "model": {"cell": "lstm", "units": 8, "layers": 1},
            "head": {"type": "acceptor", "pooling": "mean"},
            "training": {"epochs": 8, "batch_size": 4, "learning_rate": 0.02, "early_stopping": None}}


@pytest.fixture(scope="session")
def tiny_acceptor(shared_dir, keras):
    """The run directory of :func:`tiny_acceptor_recipe`, trained once per session (read only)."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    def build(path):
        data = shared_dir / "tiny_acceptor.ts"
        data.write_text(TS_HEAD + "".join(ts_case(i) for i in range(20)), encoding="utf-8")
        train(recipe_from_dict(tiny_acceptor_recipe(str(data))), path, verbose=0)

    return built_once(shared_dir, "tiny_acceptor", build)


#: Word -> phonemes pairs of the tiny pronunciation dictionary (cmudict format) of the seq2seq runs.
G2P_WORDS = {"ab": "AE B", "ba": "B AA", "abba": "AE B B AA", "baba": "B AA B AA", "aab": "AE AE B",
             "bab": "B AA B", "abab": "AE B AE B", "bba": "B B AA", "aa": "AE AE", "bb": "B B",
             "abb": "AE B B", "baa": "B AA AA"}


def tiny_seq2seq_recipe(path: str, model: dict | None = None, head: dict | None = None) -> dict:
    """A tiny encoder-decoder on :data:`G2P_WORDS` (written at ``path``; 30% held out as test):
    8 units, embedding 8, a 12-unit decoder, 20 epochs, beam 3 with length penalty 0.6, sources of
    at most 6 symbols. ``model`` / ``head`` update those sections; without them it is a
    bidirectional LSTM encoder with Bahdanau attention, :func:`tiny_seq2seq`'s run."""
    return {"name": "tiny-g2p", "seed": 1,
            "data": {"source": "cmudict", "path": path, "max_length": 6,
                     "split": {"valid": 0.0, "test": 0.3, "shuffle": True}},
            "model": {"units": 8, "embedding_dim": 8,
                      **(model if model is not None else {"cell": "lstm", "bidirectional": True})},
            "head": {"type": "seq2seq", "decoder_units": 12,
                     **(head if head is not None else {"attention": "bahdanau"})},
            "training": {"epochs": 20, "batch_size": 4, "learning_rate": 0.02, "early_stopping": None},
            "decoding": {"beam_width": 3, "max_length": 6, "length_penalty": 0.6}}


def write_g2p_words(path) -> str:
    """Write :data:`G2P_WORDS` as a cmudict file at ``path``; returns ``str(path)``."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(f"{w} {p}" for w, p in G2P_WORDS.items()) + "\n")
    return str(path)


@pytest.fixture(scope="session")
def tiny_seq2seq(shared_dir, keras):
    """``tiny_seq2seq()``: the run directory of :func:`tiny_seq2seq_recipe` (bidirectional LSTM
    encoder, Bahdanau attention), trained once per session on first use (read only)."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    def build(path):
        data = write_g2p_words(shared_dir / "tiny_seq2seq.dict")
        train(recipe_from_dict(tiny_seq2seq_recipe(data)), path, verbose=0)

    return lambda: built_once(shared_dir, "tiny_seq2seq", build)
