"""The rms rule's gradient statistics kept in the run directory (seqkit.heads.language_model.dynamic_stats_cache):
reused bit for bit while weights, data and settings are unchanged; recomputed otherwise; a damaged
file is ignored with a warning; a read-only directory still evaluates."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from conftest import make_recipe
from seqkit.data.stream import StreamData, batchify


def _model_and_data():
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import prepare

    r = recipe_from_dict(make_recipe(data={"layout": "stream", "limit": 40},
                                     model={"cell": "lstm", "units": 8, "embedding_dim": 6, "layers": 1}))
    prep = prepare(r)
    rng = np.random.default_rng(5)
    text = rng.integers(4, len(prep.vocab), size=41).astype(np.int64)
    return prep.head.build_model(), StreamData(batchify(text, 2), 6)  # 2 columns of 20, 4 chunks


@pytest.fixture
def counted(monkeypatch):
    """gradient_stats, with the number of calls counted."""
    from seqkit.heads.language_model import dynamic_eval

    calls = []
    real = dynamic_eval.gradient_stats

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(dynamic_eval, "gradient_stats", counting)
    return calls


def test_second_call_reads_the_cache_and_a_change_recomputes(tmp_path, keras, counted, caplog):
    from seqkit.heads.language_model.dynamic_eval import gradient_stats
    from seqkit.heads.language_model.dynamic_stats_cache import CACHE, cached_gradient_stats
    from seqkit.runs.rundir import RUN_NAMES, is_run_name

    assert CACHE in RUN_NAMES and is_run_name(CACHE + ".4711.tmp")  # train --overwrite still sees a run
    model, data = _model_and_data()
    first = cached_gradient_stats(model, data, None, str(tmp_path))
    assert len(counted) == 1 and os.listdir(tmp_path) == [CACHE]  # no temporary left behind
    with np.load(tmp_path / CACHE, allow_pickle=False) as z:  # plain arrays
        assert sorted(z.files) == ["key"] + [f"ms_{i}" for i in range(len(first))]
    second = cached_gradient_stats(model, data, None, str(tmp_path))
    assert len(counted) == 1  # read, not computed
    for a, b in zip(first, second):
        assert a.dtype == b.dtype == np.float64 and np.array_equal(a, b)

    # each input of the statistics is in the key: max_chunks, the chunk length, the data, the weights
    cached_gradient_stats(model, data, 2, str(tmp_path))
    assert len(counted) == 2
    cached_gradient_stats(model, StreamData(data.columns, 5), 2, str(tmp_path))
    assert len(counted) == 3
    other = data.columns.copy()
    other[1, 7] = 4 if other[1, 7] != 4 else 5
    cached_gradient_stats(model, StreamData(other, 5), 2, str(tmp_path))
    assert len(counted) == 4
    cached_gradient_stats(model, StreamData(other, 5), 2, str(tmp_path))
    assert len(counted) == 4  # (and that one was stored)
    w = model.trainable_variables[0]
    w.assign(w.numpy() + 1e-3)
    with caplog.at_level(logging.WARNING, logger="seqkit"):
        changed = cached_gradient_stats(model, data, None, str(tmp_path))
    assert len(counted) == 5 and not [r for r in caplog.records if r.name == "seqkit"]  # stale: silently
    assert not np.array_equal(changed[0], first[0])
    for a, b in zip(changed, gradient_stats(model, data)):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "wrong shape", "absurd", "non-finite"])
def test_a_damaged_cache_is_recomputed_with_a_warning(tmp_path, keras, counted, caplog, damage):
    from seqkit.heads.language_model.dynamic_stats_cache import CACHE, cached_gradient_stats

    model, data = _model_and_data()
    first = cached_gradient_stats(model, data, None, str(tmp_path))
    path = tmp_path / CACHE
    raw = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"not a zip file at all")
    elif damage == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    else:  # a well-formed file with the right key but an array of another shape or absurd values
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        arrays["ms_0"] = {"wrong shape": arrays["ms_0"][:1], "absurd": np.full_like(arrays["ms_0"], 1e300),
                          "non-finite": np.full_like(arrays["ms_0"], np.nan)}[damage]
        with open(path, "wb") as f:
            np.savez(f, **arrays)
    with caplog.at_level(logging.WARNING, logger="seqkit"):
        again = cached_gradient_stats(model, data, None, str(tmp_path))
    assert len(counted) == 2
    assert any("ignoring the gradient-statistics cache" in r.getMessage() for r in caplog.records
               if r.name == "seqkit" and r.levelno == logging.WARNING)
    for a, b in zip(first, again):
        assert np.array_equal(a, b)
    cached_gradient_stats(model, data, None, str(tmp_path))
    assert len(counted) == 2  # replaced by a good file


def test_read_only_run_dir_still_evaluates(tmp_path, keras, counted, caplog, monkeypatch):
    import errno

    from seqkit.heads.language_model import dynamic_stats_cache
    from seqkit.heads.language_model.dynamic_stats_cache import cached_gradient_stats

    model, data = _model_and_data()
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    if os.geteuid() == 0:  # root writes to a mode-555 folder: refuse the write as a read-only mount would

        def read_only(path, mode="r", *a, **k):
            if any(c in mode for c in "wax+"):
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
            return open(path, mode, *a, **k)

        monkeypatch.setattr(dynamic_stats_cache, "open", read_only, raising=False)
    try:
        with caplog.at_level(logging.INFO, logger="seqkit"):
            ms = cached_gradient_stats(model, data, None, str(ro))
        assert os.listdir(ro) == [] and len(counted) == 1 and len(ms) == len(model.trainable_variables)
        assert any("not stored" in r.getMessage() for r in caplog.records)
    finally:
        ro.chmod(0o755)


def test_a_lazy_corpus_is_fingerprinted_by_its_files(tmp_path):
    """text_corpus streams: path, size and mtime_ns of each file, vocabulary, columns (no TensorFlow)."""
    from seqkit.data.lazy_corpus import LazyCorpus, LazyStreamData
    from seqkit.heads.language_model.dynamic_stats_cache import data_fingerprint

    p = tmp_path / "a.txt"
    p.write_text("the cat sat\non the mat\n" * 5, encoding="utf-8")
    corpus = LazyCorpus([str(p)], "char")
    vocab = corpus.vocabulary()
    first = data_fingerprint(LazyStreamData(corpus, vocab, 2, 4))
    assert data_fingerprint(LazyStreamData(corpus, vocab, 2, 4)) == first
    assert data_fingerprint(LazyStreamData(corpus, vocab, 3, 4)) != first  # other columns
    st = os.stat(p)
    p.write_text("the cat sat\non the hat\n" * 5, encoding="utf-8")  # same size, one letter changed
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert data_fingerprint(LazyStreamData(LazyCorpus([str(p)], "char"), vocab, 2, 4)) != first
