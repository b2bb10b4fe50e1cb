"""Shipping a run as a device would take it: the portable ``.keras`` file checked with a relative
tolerance, every ``.tflite`` verified in LiteRT's default interpreter (XNNPACK on), export from a
copied run directory without its data, one consistent metadata schema, and the standalone
``examples/litert_stream.py`` giving ``seqkit stream``'s output."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest


@pytest.fixture(scope="module")
def loud_lm(tiny_lm, tmp_path_factory):
    """A copy of the tiny trained LM whose output layer is scaled by 1000: logits in the thousands,
    where float32 values are ~1e-4 apart."""
    from seqkit.training.train import load_model

    run = str(tmp_path_factory.mktemp("loud") / "run")
    shutil.copytree(tiny_lm("lstm"), run)
    model = load_model(os.path.join(run, "model.keras"))
    dense = [layer for layer in model.layers if layer.__class__.__name__ == "Dense"][-1]
    dense.set_weights([w * 1000.0 for w in dense.get_weights()])
    model.save(os.path.join(run, "model.keras"))
    return run


def test_keras_export_of_large_logits_passes_a_relative_tolerance(loud_lm, tmp_path):
    from seqkit.export.portable import export_portable_keras

    report = export_portable_keras(loud_lm, str(tmp_path / "k"))
    # an absolute 1e-6 could not hold at this scale; relative to the largest output it does
    assert report["max_abs_diff"] > 1e-6
    assert report["max_rel_diff"] <= 1e-5 == report["tolerance"]
    assert report["max_rel_diff"] == pytest.approx(report["max_abs_diff"] / report["scale"])
    assert report["scale"] > 100


def test_keras_export_honours_tolerance_from_the_cli(loud_lm, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main

    res = CliRunner().invoke(main, ["export", loud_lm, "--format", "keras", "--out",
                                    str(tmp_path / "k"), "--tolerance", "1e-12"])
    assert res.exit_code != 0 and "--tolerance 1e-12" in res.output, res.output
    assert not (tmp_path / "k" / "model.keras").exists()
    res = CliRunner().invoke(main, ["export", loud_lm, "--format", "keras", "--out",
                                    str(tmp_path / "k"), "--tolerance", "1e-3"])
    assert res.exit_code == 0 and "tolerance 0.001" in res.output, res.output
