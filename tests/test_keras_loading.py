"""Every .keras file seqkit writes loads with plain ``keras.saving.load_model``
(safe mode, compiled or not) in a fresh process after ``import seqkit`` alone, in either import
order, for every head, every built-in cell and an installed plugin cell; and ``import seqkit``
still imports neither Keras nor TensorFlow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import make_recipe

ROOT = Path(__file__).resolve().parents[1]
TRAINING = {"epochs": 1, "batch_size": 8, "early_stopping": None}
TAG_TRAIN = "".join(["the/D dog/N runs/V\n", "a/D cat/N sleeps/V fast/R\n", "the/D cat/N runs/V\n"] * 4)


def _recipes(d: Path) -> dict:
    """Tiny recipes of three of the six cases (together: each head, each built-in cell and the
    installed peephole_lstm plugin cell; six runs, not heads x cells, to keep the file short: the
    cells' Keras classes do not depend on the head). The other three are conftest's session runs:
    lm_lstm (``tiny_lm("lstm")``), acceptor (LSTM over frames, mean pooling: ``tiny_acceptor``)
    and seq2seq (bidirectional LSTM encoder, Bahdanau attention: ``tiny_seq2seq()``)."""
    (d / "tags.txt").write_text(TAG_TRAIN, encoding="utf-8")
    (d / "d.tsv").write_text("".join(f"{t}\t{y}\n" for t, y in [("aaab", "A"), ("abaa", "A"), ("bbba", "B"),
                                                                 ("babb", "B")] * 4), encoding="utf-8")
    lm_data = {"limit": 40, "max_length": 40}
    tiny = {"units": 6, "embedding_dim": 4, "layers": 1}
    out = {"lm_peephole_lstm": make_recipe(data=lm_data, model={**tiny, "cell": "peephole_lstm"},
                                           training=TRAINING)}
    split = {"valid": 0.2, "test": 0.2, "shuffle": True}
    out["tagger"] = {"name": "tag", "seed": 1, "training": TRAINING, "head": {"type": "tagger"},
                     "data": {"source": "word_tag", "path": str(d / "tags.txt"), "max_length": 8,
                              "split": split},
                     "model": {**tiny, "cell": "simple_rnn", "bidirectional": True}}
    out["acceptor_tokens"] = {"name": "acct", "seed": 2, "training": TRAINING,
                              "head": {"type": "acceptor", "pooling": "final"},
                              "data": {"source": "tsv_text_label", "path": str(d / "d.tsv"),
                                       "tokenizer": "char", "split": split},
                              "model": {**tiny, "cell": "gru", "bidirectional": True}}
    return out


def _inputs(model, rng) -> list:
    """A fixed batch for ``model``: token ids 1..3 for int inputs, normal frames for float ones."""
    xs = []
    for t in model.inputs:
        if "int" in str(t.dtype):
            xs.append(rng.integers(1, 4, size=(3, 5)).astype(str(t.dtype)))
        else:
            xs.append(rng.normal(size=(3, 5, t.shape[-1])).astype(str(t.dtype)))
    return xs


def _outputs(y) -> list:
    return [np.asarray(a) for a in (y if isinstance(y, (list, tuple)) else [y])]


@pytest.fixture(scope="module")
def cases(tmp_path_factory, keras, tiny_lm, tiny_acceptor, tiny_seq2seq):
    """Train every recipe (1 epoch), then save a fixed input and the in-process model's output
    for each of its .keras files; returns the path of a JSON manifest of the cases. The lm_lstm
    case (first) is the session's tiny 2-layer LSTM LM (conftest ``tiny_lm``), the acceptor and
    seq2seq cases the session's ``tiny_acceptor`` and ``tiny_seq2seq()``; all three read only."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import load_model, train

    d = tmp_path_factory.mktemp("keras_loading")
    rng = np.random.default_rng(0)
    manifest = []
    shared = {"lm_lstm": tiny_lm("lstm"), "acceptor": tiny_acceptor, "seq2seq": tiny_seq2seq()}
    for name, raw in {"lm_lstm": None, **_recipes(d), "acceptor": None, "seq2seq": None}.items():
        run = d / name
        if raw is None:
            run = Path(shared[name])
        else:
            train(recipe_from_dict(raw), str(run), verbose=0)
        files = sorted(p.name for p in run.iterdir() if p.suffix == ".keras")
        assert {"model.keras", "last.keras"} <= set(files), (name, files)
        # last.keras holds the same classes (plus optimizer state): two runs check it, for time
        for fname in files if name in ("lm_lstm", "seq2seq") else ["model.keras"]:
            model = load_model(str(run / fname))
            xs = _inputs(model, rng)
            ys = _outputs(model.predict(xs if len(xs) > 1 else xs[0], verbose=0))
            stem = d / f"{name}-{fname}"
            for i, a in enumerate(xs):
                np.save(f"{stem}.x{i}.npy", a)
            for i, a in enumerate(ys):
                np.save(f"{stem}.y{i}.npy", a)
            manifest.append({"case": f"{name}/{fname}", "path": str(run / fname), "stem": str(stem),
                             "n_in": len(xs), "n_out": len(ys)})
    (d / "cases.json").write_text(json.dumps(manifest), encoding="utf-8")
    return d / "cases.json", manifest


# Only `import seqkit` and plain Keras: no seqkit module is imported by hand.
LOAD_ALL = """
import json, sys
import numpy as np
{imports}
done = []
only, compiles = sys.argv[2], [c == "1" for c in sys.argv[3]]
for c in json.load(open(sys.argv[1])):
    if only != "all" and c["case"] not in only.split(","):
        continue
    xs = [np.load(f"{{c['stem']}}.x{{i}}.npy") for i in range(c["n_in"])]
    want = [np.load(f"{{c['stem']}}.y{{i}}.npy") for i in range(c["n_out"])]
    for compile in compiles:
        model = keras.saving.load_model(c["path"], compile=compile)  # safe_mode defaults to True
        assert (getattr(model, "optimizer", None) is not None) == compile, (c["case"], compile)
        got = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
        got = got if isinstance(got, (list, tuple)) else [got]
        assert len(got) == len(want), c["case"]
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w, atol=1e-6, err_msg=c["case"])
    done.append(c["case"])
print(json.dumps(done))
"""


def _run(code, *args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)


RUNS = {"lm_lstm", "lm_peephole_lstm", "tagger", "acceptor", "acceptor_tokens", "seq2seq"}


def _old_module_paths_copy(c: dict, dst: Path) -> dict:
    """A copy of case ``c``'s .keras file at ``dst`` whose config names the modules seqkit's Keras
    classes lived in before the regrouping (checked here): the case, pointing at the copy."""
    import zipfile

    with zipfile.ZipFile(c["path"]) as src, zipfile.ZipFile(dst, "w") as out:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "config.json":
                text = data.decode("utf-8")
                for new, was in OLD_MODULES.items():
                    text = text.replace(f'"module": "{new}"', f'"module": "{was}"')
                assert '"module": "seqkit.losses"' in text and '"module": "seqkit.optimizers"' in text
                assert "seqkit.training" not in text
                data = text.encode("utf-8")
            out.writestr(item, data)
    return {**c, "case": "old-paths/" + c["case"], "path": str(dst)}


@pytest.fixture(scope="module")
def after_seqkit_then_keras(cases, tmp_path_factory):
    """One fresh process (``import seqkit`` then ``import keras``) loads every case compiled and
    not, and the seq2seq model.keras rewritten to the old module paths (see
    :func:`test_keras_files_that_name_the_old_module_paths_still_load`): ``(result, manifest)``.
    One process for both: each fresh process costs a TensorFlow import."""
    _, manifest = cases
    d = tmp_path_factory.mktemp("old_paths")
    old = [_old_module_paths_copy(c, d / c["case"].replace("/", "-"))
           for c in manifest if c["case"] == "seq2seq/model.keras"]  # losses, metrics, optimizer, seq2seq layers
    assert len(old) == 1
    path = d / "cases.json"
    path.write_text(json.dumps(manifest + old), encoding="utf-8")
    return _run(LOAD_ALL.format(imports="import seqkit\nimport keras"), path, "all", "10"), manifest


def test_every_keras_file_loads_compiled_or_not_after_import_seqkit_then_keras(after_seqkit_then_keras):
    res, manifest = after_seqkit_then_keras
    assert res.returncode == 0, res.stderr[-4000:]
    done = json.loads(res.stdout.strip().splitlines()[-1])
    done = [c for c in done if not c.startswith("old-paths/")]
    assert done == [c["case"] for c in manifest]
    assert {c.split("/")[0] for c in done} == RUNS and {c.split("/")[1] for c in done} == {
        "model.keras", "last.keras"}


# Keras alone first (the load must fail: the registration is what makes it work, which guards
# against a test that passes vacuously), then `import seqkit` in the same process.
LOAD_AFTER_KERAS = """
import json, sys
import keras
try:
    keras.saving.load_model(json.load(open(sys.argv[1]))[0]["path"])
    print(json.dumps({"without_seqkit": "loaded"}))
except Exception as exc:
    # the failed load imported no seqkit module, so what follows is `import keras`, then seqkit
    print(json.dumps({"without_seqkit": f"{type(exc).__name__}: {exc}",
                      "seqkit_modules": sorted(m for m in sys.modules if m.split(".")[0] == "seqkit")}))
""" + LOAD_ALL.format(imports="import seqkit")


@pytest.fixture(scope="module")
def keras_then_seqkit(cases):
    """One fresh process: Keras alone fails to load lm_lstm/model.keras, then ``import seqkit``
    registers at once and every run's model.keras loads (compiled, to keep it short).
    Returns ``(result, {"without_seqkit": what the first load said})``."""
    path, manifest = cases
    assert manifest[0]["case"].startswith("lm_lstm/")  # the first case: a seqkit>FusedLSTM inside
    res = _run(LOAD_AFTER_KERAS, path, ",".join(f"{r}/model.keras" for r in sorted(RUNS)), "1")
    lines = res.stdout.strip().splitlines()
    first = json.loads(lines[0]) if lines and lines[0].startswith("{") else {}
    return res, first


def test_every_run_loads_after_import_keras_then_seqkit(keras_then_seqkit):
    """Keras already imported: ``import seqkit`` registers at once (compiled, to keep it short)."""
    res, _ = keras_then_seqkit
    assert res.returncode == 0, res.stderr[-4000:]
    assert set(json.loads(res.stdout.strip().splitlines()[-1])) == {f"{r}/model.keras" for r in RUNS}


def test_a_seqkit_module_that_first_imports_keras_does_not_break_registration(cases):
    """The hook runs while the seqkit module that imported Keras is half-imported."""
    path, manifest = cases
    code = LOAD_ALL.format(imports="import seqkit\nimport seqkit.layers.attention\nimport keras")
    res = _run(code, path, "seq2seq/model.keras", "1")
    assert res.returncode == 0, res.stderr[-4000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == ["seq2seq/model.keras"]
    assert "Warning" not in res.stderr, res.stderr[-4000:]


def test_without_import_seqkit_keras_cannot_load_them(keras_then_seqkit):
    """The registration is what makes it work (guards against a test that passes vacuously):
    in the process of :func:`test_every_run_loads_after_import_keras_then_seqkit`, before
    ``import seqkit``."""
    res, first = keras_then_seqkit
    said = first.get("without_seqkit", "")
    assert said != "loaded" and "seqkit>" in said, (first, res.stderr[-2000:])
    assert first["seqkit_modules"] == [], first


def test_import_seqkit_imports_neither_keras_nor_tensorflow():
    code = """
        import sys
        import seqkit
        assert seqkit.register_keras_objects
        heavy = sorted(m for m in ("keras", "tensorflow", "jax", "torch") if m in sys.modules)
        print(heavy)
    """
    res = _run(code)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "[]"


# -- `seqkit export RUN --format keras`, a model.keras that needs no seqkit --------

PORTABLE = ("lm_lstm", "tagger", "acceptor_tokens")  # LSTM, bidirectional SimpleRNN, bi GRU + final


#: Where seqkit's Keras classes lived before the regrouping into subpackages.
OLD_MODULES = {"seqkit.training.losses": "seqkit.losses", "seqkit.training.optimizers": "seqkit.optimizers",
               "seqkit.training.schedules": "seqkit.schedules"}


def test_keras_files_that_name_the_old_module_paths_still_load(after_seqkit_then_keras):
    """A .keras written before the layout change names e.g. ``"module": "seqkit.losses"``; Keras
    finds the classes by their registered names (``seqkit>Adam``), so such a file loads and
    predicts as before, compiled or not. The file is the seq2seq run's model.keras rewritten to
    the old paths (checked in :func:`_old_module_paths_copy`), loaded in the process of
    :func:`test_every_keras_file_loads_compiled_or_not_after_import_seqkit_then_keras`."""
    res, _ = after_seqkit_then_keras
    assert res.returncode == 0, res.stderr[-4000:]
    done = json.loads(res.stdout.strip().splitlines()[-1])
    assert [c for c in done if c.startswith("old-paths/")] == ["old-paths/seq2seq/model.keras"]


@pytest.fixture(scope="module")
def portable(cases, tmp_path_factory):
    from seqkit.export.portable import export_portable_keras

    _, manifest = cases
    out = tmp_path_factory.mktemp("portable")
    made = []
    for c in manifest:
        run, fname = os.path.split(c["path"])
        name = c["case"].split("/")[0]
        if name in PORTABLE and fname == "model.keras":
            report = export_portable_keras(run, str(out / name))
            assert report["max_abs_diff"] <= 1e-6, report
            made.append({**c, "path": report["path"], "rewritten": report["rewritten"], "run": run})
    assert sorted(m["case"].split("/")[0] for m in made) == sorted(PORTABLE)
    (out / "cases.json").write_text(json.dumps(made), encoding="utf-8")
    return out / "cases.json", made


@pytest.mark.slow  # heavy; the default run stays under 15 min on 2 cores (run with -m slow)
def test_portable_export_loads_and_agrees_where_seqkit_cannot_be_imported(portable):
    path, made = portable
    by_run = {m["case"].split("/")[0]: m["rewritten"] for m in made}
    assert by_run["lm_lstm"] == ["seqkit>FusedLSTM"]
    assert by_run["acceptor_tokens"] == ["seqkit>FusedGRU", "seqkit>SequencePooling"]
    guard = textwrap.dedent("""
        import sys
        sys.modules["seqkit"] = None  # `import seqkit` now raises ImportError
        try:
            import seqkit
            raise SystemExit("seqkit was importable")
        except ImportError:
            pass
        import keras
    """)
    code = LOAD_ALL.format(imports=guard) + textwrap.dedent("""
        bad = sorted(m for m in sys.modules if m.split(".")[0].startswith("seqkit") and sys.modules[m])
        assert not bad, bad
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-c", code, str(path), "all", "0"], cwd=str(path.parent),
                         env={**env, "TF_CPP_MIN_LOG_LEVEL": "3"}, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == [m["case"] for m in made]


def test_a_portable_export_says_what_it_reads_and_writes(portable):
    """model.json beside each portable model.keras: its input tensor, the run's vocabulary and
    labels (id = position), the special ids; ids made with it alone give the run's answers."""
    import keras
    import numpy as np

    _, made = portable
    for m in made:
        folder = os.path.dirname(m["path"])
        info = json.load(open(os.path.join(folder, "model.json"), encoding="utf-8"))
        assert info["written_by"] == "seqkit export --format keras" and info["model"] == "model.keras"
        assert info["input"][0]["dtype"] == "int32" and info["input"][0]["shape"] == [None, None]
        assert info["special_ids"] == {"pad": 0, "unk": 1, "start": 2, "end": 3}
        assert info["vocab"] == json.load(open(os.path.join(m["run"], "vocab.json"), encoding="utf-8"))
        if os.path.exists(os.path.join(m["run"], "labels.json")):
            assert info["labels"] == json.load(open(os.path.join(m["run"], "labels.json"), encoding="utf-8"))
        assert sorted(os.listdir(folder)) == ["model.json", "model.keras"]
        ids = np.asarray([[info["special_ids"]["start"]] + list(range(4, min(9, len(info["vocab"]))))], np.int32)
        mine = keras.saving.load_model(os.path.join(folder, "model.keras"), compile=False).predict(ids, verbose=0)
        theirs = keras.saving.load_model(os.path.join(m["run"], "model.keras"), compile=False).predict(ids, verbose=0)
        np.testing.assert_array_equal(mine.argmax(-1), theirs.argmax(-1))


@pytest.mark.parametrize("run, names", [("seq2seq", "seqkit>Seq2SeqDecoder"), ("acceptor", "seqkit>FrameMask")])
def test_portable_export_refuses_layers_without_a_stock_equivalent(cases, tmp_path, run, names):
    from seqkit.errors import SeqkitError
    from seqkit.export.portable import export_portable_keras

    _, manifest = cases
    run_dir = os.path.dirname(next(c["path"] for c in manifest if c["case"].startswith(run + "/")))
    with pytest.raises(SeqkitError, match=names):
        export_portable_keras(run_dir, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_cli_export_format_keras(cases, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main

    _, manifest = cases
    run_dir = os.path.dirname(next(c["path"] for c in manifest if c["case"].startswith("lm_lstm/")))
    res = CliRunner().invoke(main, ["export", run_dir, "--format", "keras", "--out", str(tmp_path / "e")])
    assert res.exit_code == 0, res.output
    assert "stock Keras layers in place of seqkit>FusedLSTM" in res.output
    assert (tmp_path / "e" / "model.keras").is_file()
