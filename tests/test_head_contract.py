"""What a head's hooks return is checked where the machinery reads it."""

import types

import numpy as np
import pytest


def _prep(value):
    class Head:
        def baselines(self, prep):
            return value
    return types.SimpleNamespace(head=Head())


@pytest.mark.parametrize("value", [
    {},
    {"training-mean": {"valid": {"mae": 1.5}, "test": {"mae": np.float32(2.0), "n": np.int64(3)}}},
    {"3-gram": {"valid": 12.5, "test": None}},
])
def test_baselines_of_the_contracts_shape_pass_unchanged(value, seqkit_stderr, capsys):
    from seqkit.heads.contract import checked_baselines

    assert checked_baselines(_prep(value)) is value
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("value, named", [
    ({"valid": {"mean_value": {"mae": 1.0}}}, "the entry 'valid' with the key 'mean_value' where a split name"),
    ([("mean", 1.0)], "returned a list"),
    ({"mean": {"test": "low"}}, "the entry 'mean', split 'test': low"),
    ({"mean": {"test": {"mae": True}}}, "the entry 'mean', split 'test'"),
])
def test_baselines_of_another_shape_are_named_and_left_out(value, named, seqkit_stderr, capsys):
    """Splits and baseline names swapped (what a plugin head's author wrote): warned of, naming the
    head's class and the expected shape; metrics.json gets no baselines instead of misread ones."""
    from seqkit.heads.contract import checked_baselines

    assert checked_baselines(_prep(value)) == {}
    err = capsys.readouterr().err
    assert "Head.baselines() returned" in err and named in err and "{baseline name: {split: figures}}" in err


def test_calibration_reads_the_heads_own_inputs_whatever_the_head():
    """A plugin head with a vocabulary but none of the built-in heads' attributes (no ``inputs``,
    no text pairs): int8 calibration streams exactly what its ``parity_inputs`` gives. (It was read
    as a language model's text and failed with "'NoneType' object is not iterable".)"""
    from seqkit.export.calibration import step_positions

    class Head:
        def parity_inputs(self, records, length=None):
            x = np.asarray([[5, 6, 7], [8, 9, 0]], np.int32)[:, :length]
            return x, (x != 0).sum(1)

    prep = types.SimpleNamespace(head=Head(), vocab=["<pad>", "a"], recipe=None)
    x, valid = step_positions(prep, [object(), object()])
    np.testing.assert_array_equal(x, [[5, 6, 7], [8, 9, 0]])
    np.testing.assert_array_equal(valid, [[True, True, True], [True, True, False]])
