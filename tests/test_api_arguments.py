"""The Python API's calls name a bad argument in one paragraph, as the CLI's options do (they
were TypeError / AttributeError tracebacks, or silently accepted)."""

import pytest

from seqkit.errors import SeqkitError


@pytest.mark.parametrize("path", [None, 5, b"runs/lm"])
def test_load_takes_a_path(path):
    import seqkit

    with pytest.raises(SeqkitError, match=r"a run directory is a path \(str or pathlib.Path\)"):
        seqkit.load(path)


def test_predict_name_and_plot_are_checked_before_the_run_loads(tiny_tagger):
    import seqkit

    run = seqkit.load(tiny_tagger)
    with pytest.raises(SeqkitError, match=r"name=None: must be a string"):
        run.predict("a b", name=None)
    with pytest.raises(SeqkitError, match=r"plot=5: must be the path of a PNG"):
        run.predict("a b", plot=5)
    assert run._model is None  # refused before loading anything


def test_seq2seq_n_best_0_and_a_beam_of_0_are_refused(tiny_seq2seq):
    """``n_best=0`` was read as 1 and ``beam_width=0`` drew an attention map."""
    import seqkit

    run = seqkit.load(tiny_seq2seq())
    with pytest.raises(SeqkitError, match=r"n-best must be a positive integer, got 0"):
        run.predict("abc", n_best=0)
    with pytest.raises(SeqkitError, match=r"beam width must be a positive integer, got 0"):
        run.attention("abc", beam_width=0)
    with pytest.raises(SeqkitError, match=r"text=None: must be a string"):
        run.attention(None)
    assert run.attention("abc").weights.shape[1] == 3  # and the same calls done right still answer
