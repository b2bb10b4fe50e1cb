"""The step runtime's Python calls refuse bad arguments in one paragraph (they were IndexError,
TypeError, MemoryError or LiteRT's RuntimeError), and still stream what they streamed."""

import os

import numpy as np
import pytest

from seqkit.errors import SeqkitError


@pytest.fixture(scope="module")
def rt(tiny_lm_export):
    from seqkit.runtime.streaming import StreamingModel

    out, _ = tiny_lm_export("lstm")
    return StreamingModel(out)


@pytest.mark.parametrize("call, message", [
    (lambda rt: rt.reset(-1), r"batch_size=-1: out of range"),
    (lambda rt: rt.reset(1.5), r"batch_size=1.5: must be a whole number"),
    (lambda rt: rt.reset(10**9), r"batch_size=1000000000: out of range"),  # 30 GiB of states
    (lambda rt: rt.step(-1), r"step: the input must be one token id per row, \[B\] integers in \[0, \d+\).*got shape \[\]"),
    (lambda rt: rt.step(None), r"step: the input must be one token id per row"),
    (lambda rt: rt.step("a"), r"step: the input must be one token id per row"),
    (lambda rt: rt.step([10**6]), r"step: LiteRT refused the input \(.*\); it must be one token id per row"),
    (lambda rt: rt.generate([], max_length=3), r"generate: prompt_ids must be a non-empty list"),
    (lambda rt: rt.generate([2], max_length=3, seed="x"), r"seed='x': must be a whole number"),
    (lambda rt: rt.generate([999], max_length=3), r"step: LiteRT refused the input"),
])
def test_bad_arguments_are_named(rt, call, message):
    with pytest.raises(SeqkitError, match=message):
        call(rt)


def test_after_refusals_the_runtime_streams_as_before(rt, tiny_lm_export):
    """Refused calls leave the runtime usable: the same greedy continuation as a fresh one."""
    from seqkit.runtime.streaming import StreamingModel

    out, _ = tiny_lm_export("lstm")
    fresh = StreamingModel(out).generate([2, 5, 6], max_length=8, greedy=True)
    for bad in (lambda: rt.step([10**6]), lambda: rt.reset(-1)):
        with pytest.raises(SeqkitError):
            bad()
    assert rt.generate([2, 5, 6], max_length=8, greedy=True) == fresh
    rt.reset(3)
    z = rt.step(np.asarray([5, 6, 7]))
    assert z.shape[0] == 3 and np.isfinite(z).all()


def test_any_integer_seed_samples(rt):
    """``default_rng`` refuses negative seeds (`seqkit stream --seed -1` was an internal error):
    any int is taken modulo 2**64, as the other samplers take it; equal seeds, equal samples."""
    a = rt.generate([2, 5], max_length=6, seed=-1)
    assert a == rt.generate([2, 5], max_length=6, seed=-1) == rt.generate([2, 5], max_length=6, seed=2**64 - 1)
