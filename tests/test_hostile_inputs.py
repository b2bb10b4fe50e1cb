"""Generated hostile input at every boundary (Hypothesis): the recipe loader, the data-source
readers, the export-metadata reader and the CLI's argument parsing either succeed or raise a
SeqkitError -- never another exception, never a write outside the target. Inputs are small and
bounded (no hangs). The default profile runs a few dozen examples per boundary; ``-m slow`` runs
the long profile. Also: disk full, file-size limit and out of memory end as one named error."""

from __future__ import annotations

import errno
import json
import os

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqkit.cli import main
from seqkit.errors import SeqkitError

PROFILES = [pytest.param(30, id="default"), pytest.param(600, id="long", marks=pytest.mark.slow)]


def run_property(examples: int, strategy, check) -> None:
    """Run ``check(value)`` on ``examples`` values drawn from ``strategy``."""
    def prop(value):
        check(value)

    settings(max_examples=examples, deadline=None, database=None,
             suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                    HealthCheck.filter_too_much])(given(strategy)(prop))()


def ok_or_seqkit_error(fn, *args, **kwargs):
    """``fn(*args)``'s value, or None when it raised a SeqkitError (any other exception fails)."""
    try:
        return fn(*args, **kwargs)
    except SeqkitError:
        return None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=True)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)

RECIPE_KEYS = {
    "data": ["source", "tokenizer", "max_length", "limit", "split", "path", "layout", "min_count",
             "max_vocab", "lowercase", "text_column", "label_column", "header"],
    "model": ["cell", "units", "layers", "embedding_dim", "dropout", "bidirectional", "weight_drop"],
    "head": ["type", "pooling", "crf", "attention"],
    "training": ["epochs", "batch_size", "learning_rate", "optimizer", "early_stopping", "clipnorm"],
    "decoding": ["max_length", "temperature", "top_k", "top_p", "beam_width", "strategy"],
}


@st.composite
def hostile_recipes(draw):
    from tests.conftest import make_recipe

    raw = make_recipe()
    for _ in range(draw(st.integers(1, 4))):
        section = draw(st.sampled_from(sorted(RECIPE_KEYS) + ["name", "seed", "plugins", "extra"]))
        value = draw(json_values)
        if section in RECIPE_KEYS and draw(st.booleans()):
            key = draw(st.sampled_from(RECIPE_KEYS[section]) | st.text(max_size=8))
            if isinstance(raw.get(section), dict):
                raw[section][key] = value
            else:
                raw[section] = {key: value}
        else:
            raw[section] = value
    return raw


@pytest.mark.parametrize("examples", PROFILES)
def test_recipe_loader_on_hostile_dicts(examples, tmp_path, monkeypatch):
    from seqkit.recipe import recipe_from_dict

    monkeypatch.chdir(tmp_path)
    run_property(examples, hostile_recipes(),
                 lambda raw: ok_or_seqkit_error(recipe_from_dict, raw, load_plugins=False))
    assert os.listdir(tmp_path) == []  # validating writes nothing


@pytest.mark.parametrize("examples", PROFILES)
def test_recipe_loader_on_hostile_yaml(examples, tmp_path):
    from seqkit.recipe import load_recipe

    path = tmp_path / "r.yaml"

    def check(text):
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        ok_or_seqkit_error(load_recipe, str(path), [])

    yaml_ish = st.text(alphabet=st.sampled_from(list("abn: -[]{}&*!|>'\"#%@`,?\n\t 019.e")), max_size=80)
    run_property(examples, yaml_ish | st.text(max_size=60), check)
    assert os.listdir(tmp_path) == ["r.yaml"]


TABLE_HEADS = ["acceptor", "tagger", "language_model", "seq2seq"]


@pytest.mark.parametrize("examples", PROFILES)
def test_table_reader_on_hostile_files(examples, tmp_path):
    from types import SimpleNamespace

    from seqkit.data.table import read_table, records_from_table

    def check(case):
        ext, data, head, columns = case
        path = tmp_path / f"t{ext}"
        path.write_bytes(data)
        opts = SimpleNamespace(header=columns is None, target_tokenizer=None, target_lowercase=False,
                               too_long="refuse", **{k: (columns or {}).get(k) for k in
                                                     ("text_column", "label_column", "tokens_column",
                                                      "tags_column", "source_column", "target_column")})
        data_opts = SimpleNamespace(tokenizer="whitespace", lowercase=False, max_length=50)
        table = ok_or_seqkit_error(read_table, str(path), header=columns is None)
        if table is not None:
            ok_or_seqkit_error(records_from_table, table, head, opts, data_opts)

    rows = st.lists(st.dictionaries(st.sampled_from(["text", "label", "tokens", "tags", "source", "target"]),
                                    json_values, max_size=4), max_size=4)
    jsonl = rows.map(lambda rs: "\n".join(json.dumps(r) for r in rs).encode())
    texty = st.text(alphabet=st.sampled_from(list("ab,\t\"\n\r[]{}\\ é\u2028\x85")), max_size=60).map(
        lambda t: t.encode("utf-8"))
    columns = st.none() | st.dictionaries(st.sampled_from(["text_column", "label_column", "tokens_column",
                                                           "tags_column"]),
                                          st.integers(-3, 4) | st.text(max_size=5), max_size=2)
    case = st.tuples(st.sampled_from([".csv", ".tsv", ".jsonl"]), jsonl | texty | st.binary(max_size=60),
                     st.sampled_from(TABLE_HEADS), columns)
    run_property(examples, case, check)


@pytest.mark.parametrize("examples", PROFILES)
def test_line_readers_on_hostile_bytes(examples, tmp_path):
    import gzip

    from seqkit.data.lazy_corpus import LazyCorpus, read_lines

    def check(case):
        data, gz, cut = case
        path = tmp_path / ("c.txt.gz" if gz else "c.txt")
        raw = gzip.compress(data) if gz else data
        path.write_bytes(raw[: max(0, len(raw) - cut)] if cut else raw)
        ok_or_seqkit_error(lambda: list(read_lines([str(path)])))
        ok_or_seqkit_error(LazyCorpus([str(path)]).scan)

    run_property(examples, st.tuples(st.binary(max_size=200), st.booleans(), st.integers(0, 30)), check)


@pytest.mark.parametrize("examples", PROFILES)
def test_metadata_schema_on_hostile_metadata(examples):
    from seqkit.export.metadata_schema import validate

    base = {"seqkit_version": "0", "head": "language_model", "artefact": "step",
            "input": {"name": "token", "dtype": "int32", "shape": [None], "kind": "token"},
            "special_ids": {"pad": 0, "unk": 1, "start": 2, "end": 3},
            "state_layout": [{"name": "h0", "size": 4}], "vocab": ["", "[UNK]", "<s>", "</s>", "a"],
            "quantize": "none"}
    assert validate(base, "m") is base

    @st.composite
    def mutated(draw):
        meta = json.loads(json.dumps(base))
        for _ in range(draw(st.integers(1, 3))):
            target = meta
            path = draw(st.sampled_from([("vocab",), ("head",), ("special_ids", "end"), ("state_layout",),
                                         ("input", "name"), ("input", "shape"), ("subword_model",),
                                         ("recipe",), ("batch",), ("state_layout", 0)]))
            for p in path[:-1]:
                target = target[p] if isinstance(target, dict) else target
            if isinstance(target, dict):
                target[path[-1]] = draw(json_values)
            elif isinstance(target, list) and target:
                target[0] = draw(json_values)
        return meta

    run_property(examples, mutated() | json_values, lambda m: ok_or_seqkit_error(validate, m, "m"))


@pytest.mark.parametrize("examples", PROFILES)
def test_metadata_reader_on_hostile_bytes(examples):
    from seqkit.export import embedded_metadata

    def check(data):
        ok_or_seqkit_error(embedded_metadata.read, data, validate=True)

    header = st.binary(max_size=4).map(lambda b: b.ljust(4, b"\0") + b"TFL3")
    run_property(examples, st.binary(max_size=120) | st.tuples(header, st.binary(max_size=200)).map(
        lambda t: t[0] + t[1]), check)


def _fake_run(folder) -> str:
    folder.mkdir()
    (folder / "recipe.yaml").write_text("name: fake\n", encoding="utf-8")
    (folder / "state.json").write_text('{"epoch": 1, "best": 1.0}', encoding="utf-8")
    (folder / "history.json").write_text('[{"epoch": 1, "loss": 2.0, "val_loss": 1.9}]', encoding="utf-8")
    return str(folder)


@pytest.mark.parametrize("examples", PROFILES)
def test_cli_argument_parsing_on_hostile_argv(examples, tmp_path, monkeypatch):
    """Commands that do not train: no exit status 1 (internal error), no traceback, and nothing
    written outside the folder the command was given."""
    monkeypatch.chdir(tmp_path)
    run = _fake_run(tmp_path / "run")
    (tmp_path / "recipe.yaml").write_text("name: r\ndata: {source: pydoc_topics, limit: 20}\n", encoding="utf-8")
    (tmp_path / "out").mkdir()
    before = {p: os.path.getmtime(p) for p in (run, os.path.join(run, "history.json"), "recipe.yaml")}
    tokens = st.sampled_from(["--out", "out/x.png", "out/x.json", "run/model.keras", "recipe.yaml",
                              "--overwrite", "--set", "model.units=1e23", "model.units=-1",
                              "training.epochs=nan", "--no-data", "--json", "-q", "-v", "--temperature",
                              "nan", "inf", "-1", "0", "run", "out", "--max-lag", "--split", "test", "x"])
    argv = st.tuples(st.sampled_from(["plot", "validate", "inspect", "stream", "list"]),
                     st.lists(tokens | st.text(max_size=6), max_size=6))

    def check(case):
        cmd, args = case
        if cmd == "validate" and "--no-data" not in args:
            args = [*args, "--no-data"]  # reading the data source would be slow, not hostile
        res = CliRunner().invoke(main, [cmd, *args], catch_exceptions=True)
        assert res.exit_code in (0, 2), (cmd, args, res.output, res.exception)
        assert "internal error" not in res.output and "Traceback" not in res.output
        written = set(os.listdir(tmp_path)) - {"run", "out", "recipe.yaml"}
        assert not written, (cmd, args, written)
        assert sorted(os.listdir(run)) == ["history.json", "recipe.yaml", "state.json"]

    run_property(examples, argv, check)
    assert {p: os.path.getmtime(p) for p in before} == before


# ---------------------------------------------------------------- resources

@pytest.mark.parametrize("exc, words", [
    (OSError(errno.ENOSPC, "No space left on device", "/data/runs/x/last.tmp.keras"), "disk is full"),
    (OSError(errno.EFBIG, "File too large", "/data/runs/x/last.tmp.keras"), "file-size limit"),
    (OSError(errno.EDQUOT, "Disk quota exceeded", "/data/runs/x/last.tmp.keras"), "quota"),
    (MemoryError(), "out of memory"),
])
def test_resource_exhaustion_is_one_named_error(tmp_path, monkeypatch, exc, words):
    import seqkit.cli.diagnose as cli_diagnose

    def fails(*args, **kwargs):
        raise exc

    monkeypatch.setattr(cli_diagnose, "plot_runs", fails)  # whatever was writing: the CLI names it
    res = CliRunner().invoke(main, ["plot", _fake_run(tmp_path / "run"), "--out", str(tmp_path / "c.png")])
    assert res.exit_code == 2, res.output
    assert words in res.output and "internal error" not in res.output
    if isinstance(exc, OSError):
        assert "/data/runs/x/last.tmp.keras" in res.output and "nothing half-written" in res.output


def test_resource_error_is_a_seqkit_error_and_an_oserror():
    from seqkit.guards import ResourceError, resource_error

    err = resource_error(OSError(errno.ENOSPC, "No space left on device"), "exports/x")
    assert isinstance(err, ResourceError) and isinstance(err, SeqkitError) and isinstance(err, OSError)
    assert str(err).startswith("exports/x: cannot write it: the disk is full")
    assert resource_error(OSError(errno.ENOENT, "gone")) is None
