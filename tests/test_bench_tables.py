"""bench.tables: README's results tables printed from run directories, and --check against README.

The run directories are written here in the exact layout seqkit writes (``metrics.json``,
``history.json``, ``state.json``, ``recipe.yaml``; keys and nesting copied from real runs of the
shipped recipes), with figures chosen so that every printed cell can be worked by hand.
"""

import json
import math
import os

import pytest
import yaml

from bench import tables
from seqkit.training.seeds import summarize

LM_BASELINES = {"1-gram": {"valid": 27.1033, "test": 23.8816}, "3-gram": {"valid": 6.5365, "test": 5.0521},
                "5-gram": {"valid": 4.6014, "test": 3.4043}, "xz -9e": {"valid": 3.5486, "test": 2.2487},
                "bzip2 -9": {"valid": 3.3482, "test": 2.3566}, "zlib -9": {"valid": 4.7132, "test": 3.5813}}


def write_run(path, recipe, metrics, history, state):
    os.makedirs(path)
    with open(os.path.join(path, "recipe.yaml"), "w") as f:
        yaml.safe_dump(recipe, f, sort_keys=False)
    for name, obj in (("metrics.json", metrics), ("history.json", history), ("state.json", state)):
        with open(os.path.join(path, name), "w") as f:
            json.dump(obj, f, indent=2)
    return str(path)


def lm_run(root, name="lm-pydoc-chars", layout="line", test_ce=1.1366324424743652):
    # perplexity = exp(CE), bits/token = CE / ln 2, as seqkit stores them
    valid_ce = 1.3689261674880981
    recipe = {"name": name, "seed": 1234, "plugins": [],
              "data": {"source": "pydoc_topics", "tokenizer": "char", "layout": layout},
              "model": {"cell": "lstm", "units": 256, "layers": 1, "bidirectional": False},
              "head": {"type": "language_model"},
              "training": {"epochs": 3, "batch_size": 64, "bptt": 128 if layout == "stream" else None}}
    history = [{"epoch": e, "loss": 3.0 - e / 2, "cross_entropy": 3.0 - e / 2, "val_cross_entropy": v,
                "val_perplexity": math.exp(v), "seconds": 9.3 * e}
               for e, v in ((1, 2.4), (2, valid_ce), (3, 1.4))]
    metrics = {"recipe": name, "source": "pydoc_topics (Python 3.11.7 pydoc_data.topics)", "epochs": 3,
               "train_seconds": 27.9, "parameters": {"total": 362730}, "vocabulary": 106, "replicas": 1,
               "examples": {"train": 7844, "valid": 436, "test": 436},
               "valid": {"accuracy": 0.64, "cross_entropy": valid_ce, "perplexity": math.exp(valid_ce),
                         "bits_per_token": valid_ce / math.log(2)},
               "test": {"accuracy": 0.69, "cross_entropy": test_ce, "perplexity": math.exp(test_ce),
                        "bits_per_token": test_ce / math.log(2)},
               "baselines": LM_BASELINES}
    state = {"epoch": 3, "best": valid_ce, "monitor": "val_cross_entropy", "status": "finished"}
    return write_run(root / name, recipe, metrics, history, state)


def acceptor_run(root, name="acceptor-japanese-vowels", seed=1234, accuracy=0.972972972972973):
    recipe = {"name": name, "seed": seed, "data": {"source": "ucr_sktime"},
              "model": {"cell": "lstm", "units": 32, "layers": 1, "bidirectional": True},
              "head": {"type": "acceptor"}, "training": {"epochs": 60}}
    per_class = {str(c): {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 41} for c in range(1, 10)}
    metrics = {"recipe": name, "epochs": 4, "train_seconds": 211.5, "examples": {"train": 243, "valid": 27, "test": 370},
               "valid": {"accuracy": 0.9629629629629629, "macro_f1": 0.974026, "examples": 27},
               "test": {"accuracy": accuracy, "macro_f1": 0.9728171111111111, "examples": 370,
                        "per_class": per_class, "confusion_matrix": [[41]]},
               "baselines": {"majority-class": {"valid": {"accuracy": 0.037037, "macro_f1": 0.007937},
                                                "test": {"accuracy": 0.094595, "macro_f1": 0.019204}}}}
    history = [{"epoch": e, "val_cross_entropy": v, "seconds": e * 5.0} for e, v in ((1, 0.5), (2, 0.09), (3, 0.1),
                                                                                      (4, 0.2))]
    state = {"epoch": 4, "best": 0.09, "monitor": "val_cross_entropy", "status": "finished"}
    return write_run(root / name, recipe, metrics, history, state)


def g2p_run(root):
    name = "g2p-cmudict-attention"
    recipe = {"name": name, "seed": 1234, "data": {"source": "cmudict"},
              "model": {"cell": "lstm", "units": 128, "layers": 1, "bidirectional": True},
              "head": {"type": "seq2seq", "attention": "bahdanau"}, "training": {"epochs": 6}}
    metrics = {"recipe": name, "epochs": 6, "train_seconds": 1153.7,
               "test": {"accuracy": 0.9276702404022217, "cross_entropy": 0.22087445855140686,
                        "wer": 0.34491511978422973, "per": 0.08466629895201323, "words": 6303, "phonemes": 39886,
                        "edits": 3377, "beam_width": 5}, "baselines": {}}
    history = [{"epoch": e, "val_cross_entropy": v} for e, v in ((5, 0.3250049352645874), (6, 0.23046405613422394))]
    state = {"epoch": 6, "best": 0.23046405613422394, "monitor": "val_cross_entropy", "status": "finished"}
    return write_run(root / name, recipe, metrics, history, state)


def pinyin_run(root):
    name = "seq2seq-pinyin-phrases"
    recipe = {"name": name, "seed": 1234, "data": {"source": "pinyin_phrases"},
              "model": {"cell": "lstm", "units": 128, "bidirectional": True},
              "head": {"type": "seq2seq", "attention": "bahdanau"}, "training": {"epochs": 12}}
    metrics = {"recipe": name, "epochs": 12, "train_seconds": 995.4,
               "test": {"wer": 0.14091680814940577, "per": 0.05141171512852929, "words": 2356, "beam_width": 5,
                        "bleu": 89.5344974365448, "chrf": 95.00630921109271},
               "baselines": {"most-frequent-target-per-source-symbol": {
                   "test": {"wer": 0.154499, "per": 0.05703, "bleu": 88.520342, "chrf": 94.295443}}}}
    history = [{"epoch": e, "loss": 1.0 / e} for e in range(1, 13)]  # no valid split: no monitor
    return write_run(root / name, recipe, metrics, history, {"epoch": 12, "status": "finished"})


LM_TABLE = """\
| model | valid perplexity | test perplexity | test bits/char |
|---|---|---|---|
| unigram | 27.10 | 23.88 | 4.58 |
| trigram, absolute discounting | 6.54 | 5.05 | 2.34 |
| 5-gram, absolute discounting | 4.60 | 3.40 | 1.77 |
| **seqkit LSTM 256, 1 layer** (3 of 3 epochs, best epoch 2) | 3.93 | **3.116** | **1.64** |
| zlib -9 (marginal size after the training text) | 4.71 | 3.58 | 1.84 |
| bzip2 -9 (same) | 3.35 | 2.36 | 1.24 |
| xz -9e (same) | 3.55 | 2.25 | 1.17 |
"""


def test_tables_printed_from_runs_equal_the_markdown_worked_by_hand(tmp_path):
    runs = [tables.read_run(p) for p in (lm_run(tmp_path), acceptor_run(tmp_path), g2p_run(tmp_path),
                                         pinyin_run(tmp_path))]
    out = {t.title.split(" ")[0]: tables.render(t, str(tmp_path / "no-recipes")) for t in tables.all_tables(runs)}
    assert set(out) == {"Main", "Language", "Grapheme-to-phoneme", "Chinese"}
    # exp(1.3689) = 3.931, exp(1.1366) = 3.1163, 1.1366 / ln 2 = 1.6398; log2(23.8816) = 4.578 ...
    assert out["Language"].endswith(LM_TABLE)
    assert "(seed 1234; written " in out["Language"] and "code and CPU not recorded in the run" in out["Language"]
    main = out["Main"].splitlines()
    assert main[-4] == ("| `recipes/lm-pydoc-chars.yaml` | language model (line layout), LSTM(256) | perplexity "
                        "**3.116**, 1.6398 bits/token | 5-gram: perplexity 3.404; xz -9e: perplexity 2.249 | "
                        "3 of 3 epochs (best 2) in 27.9 s |")
    assert main[-3] == ("| `recipes/acceptor-japanese-vowels.yaml` | acceptor, 9 classes, BiLSTM(32) | accuracy "
                        "**0.9730**, macro-F1 0.9728 (370 test examples) | majority-class: accuracy 0.0946, "
                        "macro-F1 0.0192 | 4 of 60 epochs (best 2) in 211.5 s |")
    assert main[-2].startswith("| `recipes/g2p-cmudict-attention.yaml` | seq2seq, BiLSTM(128) encoder, attention "
                               "bahdanau | WER **34.49%**, PER 8.47% (6,303 test sources, beam 5) | none stored | ")
    assert out["Grapheme-to-phoneme"].endswith(
        "| **bahdanau** (recipe default) | 34.49% | 8.47% | 6 of 6 | 1,153.7 s |\n")
    assert out["Chinese"].endswith(
        "| most frequent syllable per character (training split) | 15.45% | 84.55% | 5.70% | 88.52 | 94.30 |\n"
        "| **seqkit seq2seq, attention bahdanau** (12 epochs) | **14.09%** | **85.91%** | **5.14%** | **89.53** | "
        "**95.01** |\n")


def test_check_finds_an_altered_figure_and_nothing_else(tmp_path):
    runs = [tables.read_run(lm_run(tmp_path))]
    lm = [t for t in tables.all_tables(runs) if t.title.startswith("Language")]
    readme = "## Results\n\n" + LM_TABLE + "\ntext\n"
    assert tables.check(readme, lm) == []
    # README quoting the stream row at 2 decimals agrees with 3; a changed digit does not
    altered = readme.replace("| **3.116** |", "| **3.138** |").replace("| 6.54 |", "| 6.5 |")
    diffs = tables.check(altered, lm)
    assert diffs == ["Language model against n-gram and compressor baselines (same split, per character): row "
                     "'LSTM 256', column 'test perplexity': runs give '3.116', README has '3.138'"]
    gone = tables.check(readme.replace("| xz -9e (same) | 3.55 | 2.25 | 1.17 |\n", ""), lm)
    assert len(gone) == 1 and gone[0].startswith(lm[0].title + ": row 'xz -9e': not in README")


def test_main_exits_1_on_drift_and_prints_the_tables(tmp_path, capsys):
    path = lm_run(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(LM_TABLE.replace("| 3.93 |", "| 4.03 |"))
    assert tables.main(["--runs", path, "--check", str(readme), "--recipes", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert LM_TABLE in out and "against the runs: 1 difference(s), 1 printed row(s) README does not hold" in out
    assert "column 'valid perplexity': runs give '3.93', README has '4.03'" in out


def test_seeds_summary_gives_mean_and_sample_sd(tmp_path):
    paths = [acceptor_run(tmp_path, f"acceptor-japanese-vowels-seed{s}", s, acc)
             for s, acc in ((1234, 0.9703), (1235, 0.9757), (1236, 0.9703))]
    metrics = [json.load(open(os.path.join(p, "metrics.json"))) for p in paths]
    summary = {"recipe": "acceptor-japanese-vowels", **summarize(metrics, [1234, 1235, 1236], paths)}
    sp = tmp_path / "acceptor-japanese-vowels-seeds.json"
    sp.write_text(json.dumps(summary))
    run = tables.read_seeds(str(sp))
    # mean 0.9721; sd = sqrt((2 * 0.0018^2 + 0.0036^2) / 2) = 0.0031177
    assert run.seeds == [1234, 1235, 1236]
    row = tables.main_table([run]).rows[0]
    assert row.cells[2] == "accuracy **0.9721 ± 0.0031**, macro-F1 0.9728 ± 0.0000 (370 test examples)"
    assert row.cells[1].startswith("acceptor, 9 classes,")  # per_class kept from the first seed's run
    assert "(seeds 1234, 1235, 1236; written" in tables.provenance_line([run], str(tmp_path))


def test_provenance_names_recipe_keys_the_run_no_longer_matches(tmp_path):
    (tmp_path / "runs").mkdir()
    path = acceptor_run(tmp_path / "runs")
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "acceptor-japanese-vowels.yaml").write_text(
        "name: acceptor-japanese-vowels\nseed: 1234\nmodel: {cell: lstm, units: 32, bidirectional: true}\n"
        "training: {epochs: 60}\n")
    run = tables.read_run(path)
    assert "recipe as shipped" in tables.provenance_line([run], str(recipes))
    (recipes / "acceptor-japanese-vowels.yaml").write_text(
        "name: acceptor-japanese-vowels\nmodel: {units: 64, char_embedding: {dim: 32}}\n")
    line = tables.provenance_line([run], str(recipes))
    assert "**differs from the shipped recipe in** model.units, model.char_embedding.dim" in line


@pytest.mark.parametrize("flags, precision, agrees", [
    (["avx2", "fma", "avx512f", "avx512_bf16"], "mixed_bfloat16", True),   # auto picks bf16 there
    (["avx2", "fma", "amx_bf16"], "mixed_bfloat16", True),
    (["avx2", "fma", "avx512f"], "mixed_bfloat16", False),                  # auto would pick float32
    (["avx2", "fma", "avx512f"], "float32", True),
    (["avx2", "fma", "avx512f", "avx512_bf16"], "float32", False),
])
def test_shipped_auto_precision_agrees_with_what_auto_picks_on_the_runs_cpu(tmp_path, flags, precision, agrees):
    (tmp_path / "runs").mkdir()
    run = tables.read_run(acceptor_run(tmp_path / "runs"))
    run.recipe["training"]["precision"] = precision
    run.metrics["machine"] = {"cpu_flags": flags, "gpus": 0}
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "acceptor-japanese-vowels.yaml").write_text(
        "name: acceptor-japanese-vowels\ntraining: {epochs: 60, precision: auto}\n")
    assert tables.recipe_drift(run, str(recipes)) == ([] if agrees else ["training.precision"])


def test_shipped_auto_precision_never_agrees_with_a_gpu_run(tmp_path):
    (tmp_path / "runs").mkdir()
    run = tables.read_run(acceptor_run(tmp_path / "runs"))
    run.recipe["training"]["precision"] = "mixed_bfloat16"
    run.metrics["machine"] = {"cpu_flags": ["avx512_bf16"], "gpus": 1}
    assert not tables.auto_chose(run, "mixed_bfloat16")


def test_collect_skips_missing_runs_without_train_and_reads_present_ones(tmp_path):
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for name in ("acceptor-japanese-vowels", "lm-pydoc-chars"):
        (recipes / f"{name}.yaml").write_text(f"name: {name}\n")
    runs_dir = tmp_path / "runs"
    runs_dir.mkdir()
    acceptor_run(runs_dir)
    notes = []
    got = tables.collect(None, recipes_dir=str(recipes), runs_dir=str(runs_dir), log=notes.append)
    assert [r.name for r in got] == ["acceptor-japanese-vowels"]
    assert len(notes) == 1 and "lm-pydoc-chars: no " in notes[0] and "--train" in notes[0]
    with pytest.raises(FileNotFoundError, match="no metrics.json"):
        tables.read_run(str(runs_dir / "nothing"))


def test_train_writes_a_real_run_whose_files_the_tables_read(tmp_path, tf, recipe_dict):
    # a real tiny run through seqkit.train: the fabricated runs above use the same files and keys
    recipes, runs_dir = tmp_path / "recipes", tmp_path / "runs"
    recipes.mkdir()
    raw = recipe_dict(name="tiny-lm", training={"epochs": 1}, model={"units": 16, "embedding_dim": 8})
    (recipes / "tiny-lm.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    (run,) = tables.collect(None, do_train=True, recipes_dir=str(recipes), runs_dir=str(runs_dir),
                            log=lambda _: None, verbose=0)
    assert run.path == str(runs_dir / "tiny-lm")
    assert run.provenance["commit"] and run.provenance["cpu_kind"] in ("avx512", "avx2", "other")
    assert run.provenance["wall_seconds"] > 0 and best_epoch_is_one(run)
    t = run.metrics["test"]
    lm = [x for x in tables.all_tables([run]) if x.title.startswith("Language")][0]
    model_row = [r for r in lm.rows if r.key == "LSTM 16"][0]
    assert model_row.cells[1:] == [f"{run.metrics['valid']['perplexity']:.2f}", f"**{t['perplexity']:.3f}**",
                                   f"**{t['bits_per_token']:.2f}**"]
    assert math.isclose(t["perplexity"], math.exp(t["cross_entropy"]), rel_tol=1e-5)
    assert [r.key for r in lm.rows] == ["unigram", "trigram", "5-gram", "LSTM 16", "zlib -9", "bzip2 -9", "xz -9e"]
    line = tables.provenance_line([run], str(recipes))
    assert f"code {run.provenance['commit']}" in line and "recipe as shipped" in line


def best_epoch_is_one(run):
    return tables.best_epoch(run) == 1 and run.metrics["epochs"] == 1


def test_a_seeds_summary_names_each_seeds_commit_and_command_when_they_differ(tmp_path):
    """Seeds trained by two commands: the provenance names both commits with their seeds; one
    command for all seeds gives its values once."""
    paths = [acceptor_run(tmp_path, f"acceptor-japanese-vowels-seed{s}", s, 0.97) for s in (1234, 1235, 1236)]
    for p, commit, load in zip(paths, ("0b9ac71", "2bfe024", "2bfe024"), (5.0, 0.5, 2.25)):
        with open(os.path.join(p, "provenance.json"), "w") as f:
            json.dump({"commit": commit, "command": "python -m bench.tables --train --seeds 3", "cpu": "AMD EPYC",
                       "cpu_kind": "avx512", "cpus": 2, "load_average_1min": load}, f)
    metrics = [json.load(open(os.path.join(p, "metrics.json"))) for p in paths]
    sp = tmp_path / "acceptor-japanese-vowels-seeds.json"
    sp.write_text(json.dumps({"recipe": "acceptor-japanese-vowels", **summarize(metrics, [1234, 1235, 1236], paths)}))
    line = tables.provenance_line([tables.read_seeds(str(sp))], str(tmp_path))
    assert "code 0b9ac71 (seed 1234), 2bfe024 (seeds 1235, 1236), avx512 CPU (AMD EPYC, 2 cores" in line
    assert "load at start 5.0 (seed 1234), 0.5 (seed 1235), 2.2 (seed 1236))" in line
    assert line.count("command `python -m bench.tables --train --seeds 3`") == 1


def test_standard_split_g2p_gets_its_own_table_with_the_published_rows_and_mean_sd(tmp_path):
    paths = []
    for seed, wer, per in ((1234, 0.2300, 0.0550), (1235, 0.2340, 0.0560)):
        name = f"g2p-cmudict-standard-seed{seed}"
        recipe = {"name": name, "seed": seed, "data": {"source": "cmudict", "test_words": "cmudict-0.7b"},
                  "model": {"cell": "lstm", "units": 160, "layers": 2, "bidirectional": True},
                  "head": {"type": "seq2seq", "attention": "bahdanau"}, "training": {"epochs": 20}}
        metrics = {"recipe": name, "epochs": 20, "train_seconds": 3600.0,
                   "valid": {"wer": wer + 0.01, "per": per},
                   "test": {"wer": wer, "per": per, "words": 11994, "beam_width": 5}, "baselines": {}}
        history = [{"epoch": e, "val_cross_entropy": 1.0 / e} for e in range(1, 21)]
        paths.append(write_run(tmp_path / name, recipe, metrics, history,
                               {"epoch": 20, "best": 0.05, "monitor": "val_cross_entropy", "status": "finished"}))
    sp = tmp_path / "g2p-cmudict-standard-seeds.json"
    sp.write_text(json.dumps({"recipe": "g2p-cmudict-standard",
                              **summarize([json.load(open(os.path.join(p, "metrics.json"))) for p in paths],
                                          [1234, 1235], paths)}))
    run = tables.read_seeds(str(sp))
    std = [t for t in tables.all_tables([run]) if "0.7b" in t.title]
    assert len(std) == 1 and not [t for t in tables.all_tables([run]) if t.title.startswith("Grapheme-to-phoneme on CMUdict")]
    text = tables.render(std[0], str(tmp_path))
    assert "| LSTM (Yao & Zweig 2015) (published) | 23.55% | n/a |" in text
    # mean 0.2320, sample sd sqrt(2 * 0.002^2 / 1) = 0.00283 -> 23.20% ± 0.28%; PER 5.55% ± 0.07%
    assert ("| **seqkit `g2p-cmudict-standard`** (BiLSTM(160) x 2 encoder, attention bahdanau, beam 5; 2 seeds) "
            "| **23.20% ± 0.28%** | 5.55% ± 0.07% | 24.20% ± 0.28% | 20 of 20; 3,600 s |") in text
    # the main table's figure: the beam width of the seeds is one number, not a mean and sd
    (main,) = [r for r in tables.main_table([run]).rows]
    assert main.cells[2] == "WER **23.20% ± 0.28%**, PER 5.55% ± 0.07% (11,994 test sources, beam 5)"
