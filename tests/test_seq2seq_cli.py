"""``seqkit train`` + ``evaluate`` + ``predict`` + ``attention`` for a seq2seq run, end to end on a
tiny pronunciation file the test writes, and its bad-input cases."""

import json

import pytest
from click.testing import CliRunner

WORDS = {"ab": "AE B", "ba": "B AA", "abba": "AE B B AA", "baba": "B AA B AA", "aab": "AE AE B",
         "bab": "B AA B", "abab": "AE B AE B", "bba": "B B AA", "aa": "AE AE", "bb": "B B"}


@pytest.fixture(scope="module")
def run(tmp_path_factory, keras):
    import yaml

    from seqkit.cli import main

    d = tmp_path_factory.mktemp("g2prun")
    lines = [f"{w} {p}" for w, p in WORDS.items()] * 1 + ["abba(2) AE B AA # alternative"]
    (d / "tiny.dict").write_text("\n".join(lines) + "\n", encoding="utf-8")
    recipe = {"name": "tiny-g2p", "seed": 1,
              "data": {"source": "cmudict", "path": "tiny.dict", "max_length": 6,
                       "split": {"valid": 0.2, "test": 0.2, "shuffle": True}},
              "model": {"units": 8, "embedding_dim": 8, "bidirectional": True},
              "head": {"type": "seq2seq", "attention": "bahdanau", "decoder_units": 12},
              "training": {"epochs": 2, "batch_size": 4, "learning_rate": 0.01, "early_stopping": None},
              "decoding": {"beam_width": 3, "max_length": 6}}
    (d / "r.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    res = CliRunner().invoke(main, ["train", str(d / "r.yaml"), "--run-dir", str(d / "run"), "--quiet"])
    assert res.exit_code == 0, res.output
    assert "WER" in res.output and "PER" in res.output and "beam 3" in res.output
    assert {"target_vocab.json", "vocab.json"} <= {p.name for p in (d / "run").iterdir()}
    return d / "run"


def test_evaluate_reports_wer_and_per_as_json(run):
    from seqkit.cli import main

    res = CliRunner().invoke(main, ["evaluate", str(run), "--split", "test", "--json"])
    assert res.exit_code == 0, res.output
    figs = json.loads(res.output[res.output.index("{"):])
    assert figs["words"] == 2 and 0.0 <= figs["per"] and 0.0 <= figs["wer"] <= 1.0
    assert figs["beam_width"] == 3 and "cross_entropy" in figs


def test_predict_prints_n_best_with_falling_scores_and_counts_bad_input(run):
    from seqkit.cli import main

    res = CliRunner().invoke(main, ["predict", str(run), "--beam-width", "3", "--n-best", "3"],
                                             input="ab\n\nbaxz\n")
    assert res.exit_code == 0, res.output + res.stderr
    rows = [line.split("\t") for line in res.stdout.splitlines()]
    assert [r[:2] for r in rows] == [["ab", "1"], ["ab", "2"], ["ab", "3"],
                                     ["baxz", "1"], ["baxz", "2"], ["baxz", "3"]]
    scores = [float(r[2]) for r in rows[:3]]
    assert scores == sorted(scores, reverse=True) and all(s <= 0 for s in scores)
    assert "1 empty line(s) skipped" in res.stderr
    assert "2 of 6 input symbols were never seen in training" in res.stderr


@pytest.mark.parametrize("args,stdin,msg", [
    (["--beam-width", "2", "--n-best", "3"], "ab\n", "n-best (3) is larger than the beam width (2)"),
    (["--n-best", "4"], "ab\n", "n-best (4) is larger than the beam width (3)"),
    (["--beam-width", "10000000"], "ab\n", "beam width 10,000,000 is more than seqkit searches"),
    ([], "abababab\n", "<stdin>:1: the input has 8 symbols, more than the run's data.max_length (6)"),
    ([], "\n  \n", "no input (only empty lines)"),
])
def test_predict_bad_input_is_a_clear_error(run, args, stdin, msg):
    from seqkit.cli import main

    res = CliRunner().invoke(main, ["predict", str(run), *args], input=stdin)
    assert res.exit_code == 2, res.output
    assert msg in res.output


def test_attention_writes_a_png_labelled_with_the_output(run, tmp_path):
    pytest.importorskip("matplotlib", reason="pip install 'seqkit[plot]'")
    from seqkit.cli import main

    out = tmp_path / "a.png"
    res = CliRunner().invoke(main, ["attention", str(run), "--input", "abba", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "x 4 attention weights" in res.output


def test_alignment_rows_sum_to_one_over_the_source(run):
    import numpy as np

    from seqkit.heads.seq2seq.alignment import alignment
    from seqkit.training.train import load_run

    prep, model = load_run(str(run))
    src, tgt, w = alignment(prep, model, "abba", beam_width=3)
    assert src == ["a", "b", "b", "a"] and tgt[-1] == "</s>" and w.shape == (len(tgt), 4)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-5)


def test_text_metrics_equal_sacrebleu_on_the_decoded_outputs(run):
    pytest.importorskip("sacrebleu", reason="pip install 'seqkit[text]'")
    from seqkit.metrics.text import bleu_chrf
    from seqkit.training.train import load_run

    prep, model = load_run(str(run), with_data=True)
    prep.head.options.text_metrics = True
    recs = prep.splits["train"]
    figs = prep.head.evaluate(model, recs)
    refs = {}
    for r in recs:
        refs.setdefault(r.text, []).append(" ".join(r.target))
    hyps = [" ".join(h[0][0]) for h in prep.head.decode_texts(model, list(refs))]
    want = bleu_chrf(list(refs.values()), hyps)
    assert figs["bleu"] == pytest.approx(want["bleu"]) and figs["chrf"] == pytest.approx(want["chrf"])
    assert "BLEU" in prep.head.format_metrics(figs)[0]


def test_predict_keeps_a_line_with_unicode_line_separators_whole(run):
    """A U+2028 / U+0085 inside a source line is a symbol of that line, not a line break: one
    output per input line (API and CLI), and ``file:line`` names the input's own lines."""
    from seqkit.cli import main
    from seqkit.runs.run import Run

    text = "ab\u2028a\nb\x85b\n"
    res = Run(str(run)).predict(text)
    assert [(r["where"], r["input"]) for r in res] == [("<input>:1", "ab\u2028a"), ("<input>:2", "b\x85b")]
    out = CliRunner().invoke(main, ["predict", str(run), "--format", "jsonl"], input=text)
    assert out.exit_code == 0, out.output + out.stderr
    assert "\u2028" not in out.stdout and "\x85" not in out.stdout  # escaped in the JSON (json_line)
    rows = [json.loads(x) for x in out.stdout.splitlines() if x]  # so even splitlines keeps each record whole
    assert [(r["where"], r["input"]) for r in rows] == [("<stdin>:1", "ab\u2028a"), ("<stdin>:2", "b\x85b")]


def test_evaluate_ensemble_of_a_run_and_its_copy_equals_the_run_and_cli_equals_api(run):
    import shutil

    from seqkit.cli import main
    from seqkit.runs.run import Run

    copy = run.parent / "run-copy"
    if not copy.exists():
        shutil.copytree(run, copy)
    res = CliRunner().invoke(main, ["evaluate", str(run), "--split", "test", "--ensemble", str(copy), "--json"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output[res.output.index("{"):])
    single, ens = rep["single"], rep["ensemble"]
    assert ens["members"] == 2 and ens["runs"] == [str(run), str(copy)]
    # identical members average to the same distributions: the same outputs and figures
    for key in ("wer", "per", "words", "phonemes", "beam_width"):
        assert ens[key] == single[key], key
    api = Run(str(run)).evaluate("test", ensemble=[str(copy)])
    assert api["ensemble"]["wer"] == ens["wer"] and api["single"]["per"] == single["per"]
    text = CliRunner().invoke(main, ["evaluate", str(run), "--split", "test", "--ensemble", str(copy)])
    assert text.exit_code == 0 and "test ensemble (" in text.output and "2 runs decoded together" in text.output


def test_evaluate_ensemble_refuses_a_run_whose_seed_drew_another_split(run):
    from seqkit.cli import main

    other = run.parent / "run-seed2"
    if not other.exists():
        res = CliRunner().invoke(main, ["train", str(run.parent / "r.yaml"), "--run-dir", str(other),
                                        "--set", "seed=2", "--set", "training.epochs=1", "--quiet"])
        assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["evaluate", str(run), "--split", "test", "--ensemble", str(other)])
    assert res.exit_code != 0
    assert "test split holds other records" in res.output and "seed, 2, drew another split" in res.output
    assert "Traceback" not in res.output
    twice = CliRunner().invoke(main, ["evaluate", str(run), "--ensemble", str(other), "--ensemble", str(other)])
    assert twice.exit_code != 0 and "named twice" in twice.output


def test_evaluate_ensemble_takes_a_run_whose_split_seed_names_the_same_split(run):
    """A run of another seed with ``data.split.seed`` equal to the first run's seed (whose own
    ``split.seed`` is unset) splits alike: it joins the ensemble, scored on the same test words."""
    from seqkit.cli import main
    from seqkit.data.records import records_fingerprint
    from seqkit.runs.run import Run
    from seqkit.training.train import load_run

    other = run.parent / "run-seed3-split1"
    if not other.exists():
        res = CliRunner().invoke(main, ["train", str(run.parent / "r.yaml"), "--run-dir", str(other),
                                        "--set", "seed=3", "--set", "data.split.seed=1",
                                        "--set", "training.epochs=1", "--quiet"])
        assert res.exit_code == 0, res.output
    assert Run(str(run)).recipe.config.data.split.seed is None
    rep = Run(str(run)).evaluate("test", ensemble=[str(other)])
    assert rep["ensemble"]["members"] == 2 and rep["ensemble"]["words"] == rep["single"]["words"] == 2
    # they do split alike: the same test records
    tests = [load_run(str(p), with_data=True)[0].splits["test"] for p in (run, other)]
    assert records_fingerprint(tests[0]) == records_fingerprint(tests[1])


def test_evaluate_with_other_decoding_settings_scores_those_outputs_and_keeps_the_runs(run):
    from seqkit.cli import main
    from seqkit.heads.seq2seq.head import references
    from seqkit.metrics.edit_distance import g2p_error_rates
    from seqkit.runs.run import Run

    res = CliRunner().invoke(main, ["evaluate", str(run), "--split", "test", "--json",
                                    "--set", "decoding.beam_width=1"])
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output[res.output.index("{"):])
    assert rep["decoding"] == {"beam_width": 1} and rep["beam_width"] == 1
    # the same figures as greedy outputs decoded directly (beam width 1 is greedy)
    r = Run(str(run))
    assert r.evaluate("test", decoding={"beam_width": 1})["wer"] == rep["wer"]  # loads the data too
    prep, model = r.prepared, r.model
    refs = references(prep.splits["test"])
    hyps = [h[0][0] for h in prep.head.decode_texts(model, list(refs), beam_width=1)]
    direct = g2p_error_rates(list(refs.values()), hyps)
    assert rep["wer"] == float(direct["wer"]) and rep["per"] == float(direct["per"])
    # the run's own decoding is back for the next evaluation
    again = r.evaluate("test")
    assert again["beam_width"] == 3 and "decoding" not in again
    text = CliRunner().invoke(main, ["evaluate", str(run), "--set", "decoding.length_penalty=0.6"])
    assert text.exit_code == 0 and "decoding: length_penalty 0.6 (not the recipe's)" in text.output


@pytest.mark.parametrize("setting, message", [
    ("training.epochs=3", "evaluate takes decoding.KEY=VALUE only"),
    ("decoding.beam_width=0", "--set decoding.beam_width: expected a positive integer <= 1000, got 0"),
    ("decoding.beam_size=4", "--set decoding.beam_size: unknown key. Did you mean 'beam_width'?"),
    ("decoding.beam_width", "expected KEY.PATH=VALUE"),
])
def test_evaluate_refuses_settings_outside_decoding_or_that_the_recipe_would_refuse(run, setting, message):
    from seqkit.cli import main

    res = CliRunner().invoke(main, ["evaluate", str(run), "--set", setting])
    assert res.exit_code != 0 and message in res.output and "Traceback" not in res.output


def test_decoding_settings_are_refused_for_a_head_whose_evaluation_decodes_nothing():
    from seqkit.errors import SeqkitError
    from seqkit.inference.decoding_overrides import with_decoding
    from seqkit.recipe import recipe_from_dict
    from tests.conftest import make_recipe

    recipe = recipe_from_dict(make_recipe())
    assert recipe.head.type == "language_model"
    with pytest.raises(SeqkitError, match="'language_model' head's evaluation decodes no outputs"):
        with_decoding(recipe, {"beam_width": 2}, "runs/lm")


def test_predict_reads_a_table_by_its_source_column(run, tmp_path):
    """A CSV of words (an id column, a header): its 'source' column is transduced row for row as
    the same words given a line each; a row too long is named by its line."""
    from seqkit.cli import main

    (tmp_path / "words.csv").write_text("id,source\n7,ab\n8,baba\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["predict", str(run), "--input", str(tmp_path / "words.csv"), "--format", "jsonl"])
    assert res.exit_code == 0, res.output
    table = [json.loads(x) for x in res.stdout.splitlines()]
    res = CliRunner().invoke(main, ["predict", str(run), "--format", "jsonl"], input="ab\nbaba\n")
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert [t["where"] for t in table] == [f"{tmp_path / 'words.csv'}:{n}" for n in (2, 3)]
    assert [(t["input"], t["hypotheses"]) for t in table] == [(x["input"], x["hypotheses"]) for x in lines]
    (tmp_path / "long.csv").write_text("source\nab\nabababab\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["predict", str(run), "--input", str(tmp_path / "long.csv")])
    assert res.exit_code == 2 and "long.csv:3: the input has 8 symbols" in res.output
