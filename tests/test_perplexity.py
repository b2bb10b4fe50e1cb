"""One perplexity rule (seqkit.metrics.perplexity): exp(H) in float64, inf beyond float64 range
(never a capped number, never an OverflowError), and strict JSON's null for that inf only."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest


def test_perplexity_worked_numbers():
    from seqkit.metrics.perplexity import MAX_CROSS_ENTROPY, perplexity

    assert MAX_CROSS_ENTROPY == pytest.approx(709.782712893384, abs=1e-12)
    assert perplexity(math.log(4.0)) == pytest.approx(4.0, rel=1e-15)  # H = ln 4 nats: 4 equally likely tokens
    # 100 nats: beyond float32's exp (overflows above 88.72) but a float64 number, 2.688117e43
    with np.errstate(over="ignore"):
        assert np.isinf(np.exp(np.float32(100.0)))
    assert perplexity(np.float32(100.0)) == pytest.approx(2.6881171418161356e43, rel=1e-12)
    assert perplexity(709.0) == pytest.approx(8.218407461554972e307, rel=1e-12)
    # 800 nats: e^800 = 10^347.4 is beyond every double (max 1.797e308): inf, not 1.01e304 (the old
    # exp(min(H, 700)) cap) and not the OverflowError of math.exp(800)
    with pytest.raises(OverflowError):
        math.exp(800.0)
    assert perplexity(800.0) == math.inf and perplexity(math.inf) == math.inf
    assert math.isnan(perplexity(math.nan))


def test_every_report_follows_the_rule():
    from seqkit.heads.language_model.head import LanguageModelHead
    from seqkit.heads.language_model.stream import figures
    from seqkit.runs.rundir import strict_json

    # stream LM figures: 8000 nats over 10 tokens = 800 nats/token
    f = figures(8000.0, 10.0, 0.0)
    assert f["cross_entropy"] == 800.0 and f["perplexity"] == math.inf
    assert f["bits_per_token"] == pytest.approx(800.0 / math.log(2.0))
    assert json.loads(strict_json(f)) == {"cross_entropy": 800.0, "perplexity": None, "accuracy": 0.0,
                                          "bits_per_token": pytest.approx(1154.156, abs=1e-3), "tokens": 10}
    f = figures(1000.0, 10.0, 0.0)  # 100 nats/token: a number in the JSON too
    assert json.loads(strict_json(f))["perplexity"] == pytest.approx(2.6881171418161356e43, rel=1e-12)

    # export parity: one position, logits (0, -800): -log softmax = 800 + log(1 + e^-800) = 800 nats
    logits = np.array([[[0.0, -800.0]]], np.float32)  # [B=1, T=1, V=2]; target id 1 (the -800 logit)
    with np.errstate(over="raise"):
        got = LanguageModelHead.task_metric(logits, np.array([[1]]), np.array([[True]]))
    assert got == {"perplexity": math.inf, "scored": 1}
    got = LanguageModelHead.task_metric(np.array([[[0.0, -100.0]]], np.float32), np.array([[1]]),
                      np.array([[True]]))
    assert got["perplexity"] == pytest.approx(2.6881171418161356e43, rel=1e-6)


def test_language_model_summarize_uses_float64():
    """A Keras float32 perplexity of inf (H = 100 nats) is replaced by exp(H) in float64."""
    from conftest import make_recipe
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import prepare

    head = prepare(recipe_from_dict(make_recipe(data={"limit": 20}))).head
    out = head.summarize({"loss": 99.0, "cross_entropy": np.float32(100.0), "accuracy": 0.0,
                          "perplexity": np.float32(np.inf)})
    assert out["perplexity"] == pytest.approx(2.6881171418161356e43, rel=1e-12)
    assert out["bits_per_token"] == pytest.approx(100.0 / math.log(2.0))
    assert "loss" not in out
