"""Sequence-level distillation (``head.distill``): a seq2seq run trained on the beam outputs of
teacher runs; the targets equal the teachers' decoding, are kept in the run and read back."""

import os
import re
import shutil

import pytest
import yaml
from click.testing import CliRunner

WORDS = {"ab": "AE B", "ba": "B AA", "abba": "AE B B AA", "baba": "B AA B AA", "aab": "AE AE B",
         "bab": "B AA B", "abab": "AE B AE B", "bba": "B B AA", "aa": "AE AE", "bb": "B B"}


def _recipe(seed=1, distill=None):
    head = {"type": "seq2seq", "attention": "bahdanau", "decoder_units": 12}
    if distill:
        head["distill"] = distill
    return {"name": "tiny-g2p", "seed": seed,
            "data": {"source": "cmudict", "path": "tiny.dict", "max_length": 6,
                     "split": {"valid": 0.2, "test": 0.2, "shuffle": True}},
            "model": {"units": 8, "embedding_dim": 8, "bidirectional": True}, "head": head,
            "training": {"epochs": 1, "batch_size": 4, "learning_rate": 0.01, "early_stopping": None},
            "decoding": {"beam_width": 3, "max_length": 6}}


@pytest.fixture(scope="module")
def folder(tmp_path_factory, keras):
    from seqkit.cli import main

    d = tmp_path_factory.mktemp("distill")
    lines = [f"{w} {p}" for w, p in WORDS.items()] + ["abba(2) AE B AA"]
    (d / "tiny.dict").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (d / "teacher.yaml").write_text(yaml.safe_dump(_recipe()), encoding="utf-8")
    res = CliRunner().invoke(main, ["train", str(d / "teacher.yaml"), "--run-dir", str(d / "teacher"), "--quiet"])
    assert res.exit_code == 0, res.output
    # a teacher of other data: its source vocabulary has a letter the first teacher's lacks
    (d / "other.dict").write_text("\n".join(lines + ["abc AE B K"]) + "\n", encoding="utf-8")
    other = _recipe()
    other["data"]["path"] = "other.dict"
    (d / "other.yaml").write_text(yaml.safe_dump(other), encoding="utf-8")
    res = CliRunner().invoke(main, ["train", str(d / "other.yaml"), "--run-dir", str(d / "other"), "--quiet"])
    assert res.exit_code == 0, res.output
    return d


@pytest.fixture(autouse=True)
def _in_folder(folder, monkeypatch):
    """Teacher runs are named from the current directory (as --run-dir is): the folder they are in."""
    monkeypatch.chdir(folder)


def test_teacher_runs_are_named_from_the_current_directory_not_the_recipes_folder(folder):
    from seqkit.recipe import load_recipe

    (folder / "recipes").mkdir(exist_ok=True)
    path = folder / "recipes" / "student.yaml"
    path.write_text(yaml.safe_dump(_recipe(distill={"runs": ["teacher", str(folder / "other")]})), encoding="utf-8")
    assert load_recipe(str(path)).head_options.distill.runs == [str(folder / "teacher"), str(folder / "other")]
    given = load_recipe(str(path), overrides=["head.distill.runs=[other]"])
    assert given.head_options.distill.runs == [str(folder / "other")]
    assert load_recipe(str(path)).data_options.path == str(folder / "recipes" / "tiny.dict")  # a data file


def _prepare(folder, recipe, run_dir=None):
    from seqkit.recipe import load_recipe
    from seqkit.training.train import prepare

    path = folder / "student.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    return prepare(load_recipe(str(path)), run_dir=run_dir, read_data=True)


def test_the_training_targets_are_the_teachers_beam_outputs_and_valid_and_test_keep_theirs(folder):
    from seqkit.runs.run import Run

    plain = _prepare(folder, _recipe())
    student = _prepare(folder, _recipe(distill={"runs": ["teacher"]}))  # from the current directory
    teacher = Run(str(folder / "teacher"))
    sources = list(dict.fromkeys(r.text for r in plain.splits["train"]))
    outputs = teacher.prepared.head.decode_texts([teacher._load()[1]], sources, beam_width=3)
    first_ref = {}
    for r in plain.splits["train"]:
        first_ref.setdefault(r.text, r.target)
    # the best output; an empty one leaves the source its first reference
    assert [(r.text, r.target) for r in student.splits["train"]] == \
        [(s, list(h[0][0]) or first_ref[s]) for s, h in zip(sources, outputs)]
    for split in ("valid", "test"):
        assert [(r.text, r.target) for r in student.splits[split]] == \
            [(r.text, r.target) for r in plain.splits[split]]
    assert student.recipe.head_options.distill.runs == [str(folder / "teacher")]


def test_a_distilled_run_keeps_its_targets_and_never_needs_its_teachers_again(folder):
    import json

    from seqkit.cli import main
    from seqkit.errors import RunDirError

    (folder / "student.yaml").write_text(yaml.safe_dump(_recipe(distill={"runs": ["teacher"]})), encoding="utf-8")
    res = CliRunner().invoke(main, ["train", str(folder / "student.yaml"), "--run-dir",
                                    str(folder / "student"), "--quiet"])
    assert res.exit_code == 0, res.output
    kept = folder / "student" / "distilled_targets.jsonl"
    lines = kept.read_text(encoding="utf-8").splitlines()
    fresh = _prepare(folder, _recipe(distill={"runs": ["teacher"]}))
    assert [json.loads(x) for x in lines] == [{"source": r.text, "target": r.target} for r in fresh.splits["train"]]
    shutil.copytree(folder / "teacher", folder / "teacher-kept")
    shutil.rmtree(folder / "teacher")
    try:
        again = _prepare(folder, _recipe(distill={"runs": ["teacher"]}), run_dir=str(folder / "student"))
        assert [(r.text, r.target) for r in again.splits["train"]] == \
            [(r.text, r.target) for r in fresh.splits["train"]]
        res = CliRunner().invoke(main, ["evaluate", str(folder / "student"), "--split", "test"])
        assert res.exit_code == 0 and "WER" in res.output, res.output
        first = json.loads(lines[0])
        tampered = {
            "missing": ("\n".join(lines[1:]), "holds .* sources for .* training sources .* the data the recipe reads changed"),
            "unknown symbol": ("\n".join([json.dumps({"source": first["source"], "target": ["ZZ"]})] + lines[1:]),
                               "target symbol\\(s\\) 'ZZ' are not in the run's target vocabulary"),
            "not json": ("\n".join([first["source"] + "\t" + " ".join(first["target"])] + lines[1:]),
                         ':1: expected {"source": str, "target": \\[symbols\\]}'),
            "empty target": ("\n".join([json.dumps({"source": first["source"], "target": []})] + lines[1:]),
                             ":1: expected .* non-empty target"),
        }
        for what, (text, message) in tampered.items():
            kept.write_text(text + "\n", encoding="utf-8")
            with pytest.raises(RunDirError, match=message):
                _prepare(folder, _recipe(distill={"runs": ["teacher"]}), run_dir=str(folder / "student"))
            res = CliRunner().invoke(main, ["evaluate", str(folder / "student")])
            assert res.exit_code != 0 and "distilled_targets.jsonl" in res.output and "Traceback" not in res.output, what
    finally:
        kept.write_text("\n".join(lines) + "\n", encoding="utf-8")
        shutil.copytree(folder / "teacher-kept", folder / "teacher", dirs_exist_ok=True)


def test_targets_with_tabs_and_spaces_read_back_as_written(tmp_path):
    from seqkit.data.records import Record
    from seqkit.heads.seq2seq.distill import read_targets, write_targets

    train = [Record(text="a\tb c", target=["x", " ", "y"]), Record(text="line\u2028two", target=["z"])]
    write_targets(str(tmp_path), train)
    assert read_targets(str(tmp_path), train, {"x", " ", "y", "z"}) == \
        {"a\tb c": ["x", " ", "y"], "line\u2028two": ["z"]}


def test_validate_reads_the_split_without_decoding_and_the_teachers_are_protected(folder):
    from seqkit.api import validate
    from seqkit.cli import main

    out = validate(_recipe(distill={"runs": ["no-such-run"]}), data=False)
    assert out["ok"]
    (folder / "student.yaml").write_text(yaml.safe_dump(_recipe(distill={"runs": ["no-such-run"]})), encoding="utf-8")
    res = CliRunner().invoke(main, ["validate", str(folder / "student.yaml")])  # with data, no teachers needed
    assert res.exit_code == 0, res.output
    (folder / "student.yaml").write_text(yaml.safe_dump(_recipe(distill={"runs": ["teacher"]})), encoding="utf-8")
    before = sorted(os.listdir(folder / "teacher"))
    res = CliRunner().invoke(main, ["train", str(folder / "student.yaml"), "--run-dir", str(folder / "teacher"),
                                    "--overwrite"])
    assert res.exit_code != 0 and "it is a run the recipe reads (head.distill.runs)" in " ".join(res.output.split())
    assert sorted(os.listdir(folder / "teacher")) == before


@pytest.mark.parametrize("runs, culprit, message", [
    (["no-such-run"], "no-such-run", "no such run directory"),
    (["teacher", "teacher"], None, "head.distill.runs: .*teacher named more than once; each teacher is named once"),
    (["teacher", "ACCEPTOR"], "ACCEPTOR", "a run of the 'acceptor' head; a teacher must be an encoder-decoder"),
    (["teacher", "other"], "other", "its vocabularies differ from .*teacher's, so the teachers cannot be decoded"),
])
def test_bad_teachers_are_refused_naming_the_run(folder, tiny_acceptor, runs, culprit, message):
    import re

    from seqkit.cli import main
    from seqkit.errors import SeqkitError

    runs = [tiny_acceptor if r == "ACCEPTOR" else r for r in runs]
    where = "" if culprit is None else \
        re.escape(f"head.distill.runs: {tiny_acceptor if culprit == 'ACCEPTOR' else folder / culprit}: ")
    with pytest.raises(SeqkitError, match=message):
        _prepare(folder, _recipe(distill={"runs": runs}))
    res = CliRunner().invoke(main, ["train", str(folder / "student.yaml"), "--run-dir", str(folder / "refused")])
    assert res.exit_code != 0 and re.search(where + message, " ".join(res.output.split())), res.output
    assert "Traceback" not in res.output and not os.path.exists(folder / "refused")


def test_a_teacher_that_would_read_the_sources_as_unknown_symbols_is_refused(folder, monkeypatch, caplog):
    import logging

    from seqkit.errors import SeqkitError
    from seqkit.heads.seq2seq import distill

    # the student's dictionary spells every word with a letter the teacher never saw
    (folder / "c.dict").write_text("".join(f"c{w} K {p}\n" for w, p in WORDS.items()), encoding="utf-8")
    recipe = _recipe(distill={"runs": ["teacher"]})
    recipe["data"]["path"] = "c.dict"
    with pytest.raises(SeqkitError, match=r"head.distill.runs: .*teacher: \d+ of the \d+ symbols of this "
                                          r"recipe's training sources \('c'\) never occur in the teacher's training"):
        _prepare(folder, recipe)
    monkeypatch.setattr(distill, "MAX_UNKNOWN", 0.9)  # below the bound: a warning, and training goes on
    with caplog.at_level(logging.WARNING, logger="seqkit"):
        prep = _prepare(folder, recipe)
    assert re.search(r"\('c'\) never occur in the teacher's training sources, so it reads them as \[UNK\] "
                     r"\(rare symbols its training split lacked\)", caplog.text)
    assert prep.splits["train"] and all(r.target for r in prep.splits["train"])


def test_a_teacher_that_trained_on_a_test_source_is_refused(folder):
    from seqkit.errors import SeqkitError

    # another seed draws another split: the teacher trained on some of this recipe's test words
    with pytest.raises(SeqkitError, match=r"trained on 2 source\(s\) of this recipe's test split \(aa, ba\)"):
        _prepare(folder, _recipe(seed=2, distill={"runs": ["teacher"]}))


def test_sources_decoded_earlier_in_the_process_are_not_decoded_again(folder, monkeypatch):
    from seqkit.heads.seq2seq import distill
    from seqkit.heads.seq2seq.head import Seq2SeqHead

    plain = _prepare(folder, _recipe())
    train = plain.splits["train"]
    sources = list(dict.fromkeys(r.text for r in train))
    decoded, real = [], Seq2SeqHead.decode_texts

    def counting(self, models, texts, **kw):
        decoded.append(list(texts))
        return real(self, models, texts, **kw)

    monkeypatch.setattr(Seq2SeqHead, "decode_texts", counting)
    monkeypatch.setattr(distill, "_DECODED", {})
    opts = distill.DistillOptions(runs=[str(folder / "teacher")])
    part = [r for r in train if r.text in sources[:3]]
    first = distill.decode_teachers(opts, {"train": part, "test": plain.splits["test"]}, 3)
    whole = distill.decode_teachers(opts, {"train": train, "test": plain.splits["test"]}, 3)
    assert sorted(decoded[0]) == sorted(sources[:3]) and sorted(decoded[1]) == sorted(sources[3:])
    monkeypatch.setattr(distill, "_DECODED", {})  # a fresh process decodes them all, the same
    assert distill.decode_teachers(opts, {"train": train, "test": plain.splits["test"]}, 3) == whole
    assert {s: whole[s] for s in first} == first and sorted(decoded[2]) == sorted(sources)
    # another beam width is another teacher set: decoded afresh, and only the last set is kept
    distill.decode_teachers(opts, {"train": part, "test": plain.splits["test"]}, 2)
    assert sorted(decoded[3]) == sorted(sources[:3]) and [k[1] for k in distill._DECODED] == [2]
