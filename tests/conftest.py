"""Shared fixtures. TensorFlow is imported once per session (it is slow to import)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


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


@pytest.fixture
def seqkit_stderr():
    """Print seqkit's log lines to stderr during the test, as the CLI does (a library call
    alone prints nothing), so ``capsys.readouterr().err`` sees its warnings."""
    from seqkit.log import to_stderr

    with to_stderr():
        yield
