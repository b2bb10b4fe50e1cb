"""data.tokenizer: sentencepiece (seqkit.data.subword): trained on the training split only,
lossless on held-out text, saved in the run and every export, and the same through the Keras
path and an exported TFLite model (language model, acceptor, seq2seq)."""

from __future__ import annotations

import json
import os
import shutil
import random

import pytest

from conftest import make_recipe

pytest.importorskip("sentencepiece")  # the subword extra

WORDS = ("the cat sat on a mat and my dog ran to his big red box with hot tea by night but "
         "every quick fox jumps over lazy wolves while zany kids play games").split()


def lm_lines(n_train: int = 80, n_held: int = 20, seed: int = 0) -> list[str]:
    """Lines of WORDS; the last ``n_held`` lines (valid and test of a contiguous 10/10 split) also
    hold "toast", a word never in the first ``n_train`` lines, spelled with their characters."""
    rng = random.Random(seed)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) for _ in range(n_train)]
    for i in range(n_held):
        ws = [rng.choice(WORDS) for _ in range(4)] + ["toast"] * 3
        rng.shuffle(ws)
        lines.append(("  " if i % 5 == 0 else " ").join(ws))  # a double space survives too
    return lines


def lm_recipe(path: str, **subword) -> dict:
    return make_recipe(data={"source": "text_lines", "path": path, "tokenizer": "sentencepiece",
                             "subword": {"vocab_size": 60, **subword}, "max_length": 80, "limit": None,
                             "split": {"valid": 0.1, "test": 0.1}},
                       model={"cell": "lstm", "units": 16, "embedding_dim": 8, "layers": 1},
                       training={"epochs": 1, "batch_size": 16, "learning_rate": 0.02, "early_stopping": None},
                       decoding={"max_length": 12})


@pytest.fixture(scope="module")
def lm_text(tmp_path_factory):
    p = tmp_path_factory.mktemp("sp") / "lines.txt"
    p.write_text("\n".join(lm_lines()) + "\n", encoding="utf-8")
    return str(p)


# ------------------------------------------------------------------ the tokenizer alone


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
def test_trained_on_the_train_split_only_and_lossless_on_test(lm_text, model_type):
    """A word only the held-out lines hold is no piece (it would be, trained on every line), and
    every test line comes back exactly from its pieces and from their seqkit ids."""
    from seqkit.data.subword import SubwordModel
    from seqkit.data.vocab import UNK_ID
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import prepare

    prep = prepare(recipe_from_dict(lm_recipe(lm_text, model_type=model_type)))
    tok, vocab = prep.head.tokenizer, prep.vocab
    assert tok.model.model_type == model_type and len(tok.model) == 60
    assert vocab.tokens[:4] == ["", "[UNK]", "<s>", "</s>"] and len(vocab) == 60 + 3  # <unk> is [UNK]
    assert not any(t in p for p in vocab.tokens for t in ("toast", "oast"))
    assert not any("toast" in r.text for r in prep.splits["train"])
    # the same settings on all lines (test split included) learn the word: the check above can fail
    everything = SubwordModel.train([r.text for s in ("train", "valid", "test") for r in prep.splits[s]],
                                    model_type=model_type, vocab_size=60)
    assert any("toast" in p for p in everything.vocabulary_tokens())

    test = [r.text for r in prep.splits["test"]]
    assert len(test) == 10 and all("toast" in x for x in test) and any("  " in x for x in test)
    for x in test:
        pieces = tok.split(x)
        ids = vocab.encode(pieces)
        assert UNK_ID not in ids
        assert tok.join(pieces) == x
        assert tok.join(vocab.decode_tokens(ids)) == x
        assert len(pieces) < len(x)  # pieces, not characters


def test_training_is_deterministic_and_errors_name_the_key():
    from seqkit.data.subword import SubwordModel
    from seqkit.errors import DataError

    lines = lm_lines(seed=3)
    a = SubwordModel.train(lines, vocab_size=50)
    assert a.proto == SubwordModel.train(lines, vocab_size=50).proto
    with pytest.raises(DataError, match=r"data\.subword\.vocab_size 5000: .*value <= \d+"):
        SubwordModel.train(lines, vocab_size=5000)


def test_a_cut_or_replaced_model_is_refused_against_the_vocabulary(tmp_path):
    """A model file cut in half still parses (16 of 28 pieces): text was split into other pieces
    and read as other ids (generate answered "the ⁇ ⁇ sat ⁇"). Loaded with the vocabulary its ids
    index, the missing pieces are named; another model of the same size is refused the same way."""
    from seqkit.data.subword import SUBWORD_MODEL, SubwordModel, TextTokenizer
    from seqkit.errors import RunDirError

    model = SubwordModel.train(lm_lines(seed=3), vocab_size=50)
    tok = TextTokenizer("sentencepiece", False, model)
    vocab = tok.vocabulary().tokens
    tok.save(str(tmp_path))
    assert TextTokenizer.load(str(tmp_path), "sentencepiece", False, vocab=vocab).model.proto == model.proto
    path = tmp_path / SUBWORD_MODEL
    data = path.read_bytes()

    def parses(cut):
        try:
            return 0 < len(SubwordModel(data[:cut])) < len(model)
        except Exception:  # noqa: BLE001  (cut inside a field: the file does not parse)
            return False

    cut = next(c for c in range(len(data) // 2, len(data) // 4, -1) if parses(c))
    path.write_bytes(data[:cut])  # a file cut at a piece boundary parses: only the vocabulary shows it
    with pytest.raises(RunDirError, match=r"subword.model: the sentencepiece model \(\d+ pieces\) lacks \d+ "
                                          r"of the vocabulary's tokens"):
        TextTokenizer.load(str(tmp_path), "sentencepiece", False, vocab=vocab)
    SubwordModel.train(lm_lines(seed=9)[::-1] + ["zebra quagga okapi"] * 5, vocab_size=50).save(str(path))
    with pytest.raises(RunDirError, match="lacks"):
        TextTokenizer.load(str(tmp_path), "sentencepiece", False, vocab=vocab)


def test_recipe_keys_are_checked(lm_text):
    from seqkit.errors import RecipeError
    from seqkit.recipe import recipe_from_dict

    raw = lm_recipe(lm_text)
    raw["data"]["subword"]["model_type"] = "wordpiece"
    with pytest.raises(RecipeError, match=r"data\.subword\.model_type"):
        recipe_from_dict(raw)
    raw = lm_recipe(lm_text, vocab_size=3)
    with pytest.raises(RecipeError, match=r"data\.subword\.vocab_size: expected an integer >= 8, got 3"):
        recipe_from_dict(raw)
    raw = lm_recipe(lm_text)
    del raw["data"]["subword"]
    assert recipe_from_dict(raw).data.subword.model_dump() == {  # the defaults, kept in the run's recipe
        "model_type": "unigram", "vocab_size": 1000, "character_coverage": 1.0, "byte_fallback": False}
    raw = lm_recipe(lm_text)
    raw["data"]["tokenizer"] = "char"
    with pytest.raises(RecipeError, match=r"data\.subword: sets the model of data\.tokenizer: sentencepiece"):
        recipe_from_dict(raw)
    raw = lm_recipe(lm_text)
    raw["head"] = {"type": "tagger"}
    raw["data"] = {"source": "conll", "path": lm_text, "tokenizer": "sentencepiece"}
    with pytest.raises(RecipeError, match=r"data\.tokenizer: 'sentencepiece' would cut the tagger's tokens"):
        recipe_from_dict(raw)


# ------------------------------------------------------------------ language model, end to end


def test_language_model_run_export_and_stream(lm_text, tmp_path):
    """The run holds subword.model and loads without the data; greedy generation through the
    Keras model, the TFLite step model (streaming runtime) and `seqkit stream` gives the same text."""
    from click.testing import CliRunner

    import seqkit
    from seqkit.cli import main
    from seqkit.runs.rundir import RUN_NAMES, not_a_run_because

    run_dir = str(tmp_path / "run")
    run = seqkit.train(lm_recipe(lm_text, model_type="bpe"), run_dir)
    assert "subword.model" in os.listdir(run_dir) and "subword.model" in RUN_NAMES
    assert not_a_run_because(run_dir) is None  # so train --overwrite may replace it
    os.rename(lm_text, lm_text + ".away")  # loading the run needs no training data
    try:
        run = seqkit.load(run_dir)
        prompts = ["the cat", "my dog  ran"]
        keras_out = [run.generate(p, greedy=True, max_length=12)[0] for p in prompts]
    finally:
        os.rename(lm_text + ".away", lm_text)
    out = str(tmp_path / "export")
    report = run.export(out, parity_examples=4)  # its parity check reads held-out lines
    assert report["tflite"]["argmax_agreement"] == 1.0
    meta = json.load(open(os.path.join(out, "metadata.json"), encoding="utf-8"))
    assert meta["tokenization"] == "sentencepiece" and meta["subword_model"] == "subword.model"
    with open(os.path.join(out, "subword.model"), "rb") as f, open(os.path.join(run_dir, "subword.model"), "rb") as g:
        assert f.read() == g.read()
    cli = CliRunner()
    for p, ref in zip(prompts, keras_out):
        assert ref.startswith(p)
        res = cli.invoke(main, ["stream", out, "--prompt", p, "--greedy", "--max-length", "12"])
        assert res.exit_code == 0, res.output
        assert res.output.splitlines()[-1] == ref
    res = cli.invoke(main, ["inspect", out])
    assert "tokenizer: sentencepiece (subword.model: sentencepiece bpe, 60 pieces)" in res.output
    # the portable Keras export carries it too, named by its model.json
    portable = str(tmp_path / "portable")
    run.export(portable, format="keras")
    info = json.load(open(os.path.join(portable, "model.json"), encoding="utf-8"))
    assert info["tokenization"] == "sentencepiece" and info["subword_model"] == "subword.model"
    with open(os.path.join(portable, "subword.model"), "rb") as f, open(os.path.join(run_dir, "subword.model"), "rb") as g:
        assert f.read() == g.read()
    # a lone .tflite carries the subword model too (embedded beside the metadata)
    lone = tmp_path / "elsewhere"
    lone.mkdir()
    shutil.copy(os.path.join(out, "model.tflite"), lone / "lm.tflite")
    for p, ref in zip(prompts, keras_out):
        res = cli.invoke(main, ["stream", str(lone / "lm.tflite"), "--prompt", p, "--greedy", "--max-length", "12"])
        assert res.exit_code == 0, res.output
        assert res.output.splitlines()[-1] == ref


# ------------------------------------------------------------------ acceptor and seq2seq


def acceptor_rows(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pos, neg = ["good", "great", "lovely"], ["bad", "awful", "nasty"]
    rows = []
    for _ in range(n):
        label = rng.choice(["pos", "neg"])
        ws = [rng.choice(WORDS) for _ in range(4)] + [rng.choice(pos if label == "pos" else neg)]
        rng.shuffle(ws)
        rows.append(" ".join(ws) + "\t" + label)
    return rows


def test_acceptor_predict_equals_streamed_export(tmp_path):
    """An acceptor on sentencepiece pieces: `seqkit stream`'s final answer on the exported
    TFLite step model equals Run.predict (label and probability) line by line."""
    from click.testing import CliRunner

    import seqkit
    from seqkit.cli import main

    (tmp_path / "train.tsv").write_text("\n".join(acceptor_rows(100, 1)) + "\n", encoding="utf-8")
    (tmp_path / "test.tsv").write_text("\n".join(acceptor_rows(12, 2)) + "\n", encoding="utf-8")
    raw = make_recipe(data={"source": "tsv_text_label", "train_path": str(tmp_path / "train.tsv"),
                            "test_path": str(tmp_path / "test.tsv"), "tokenizer": "sentencepiece",
                            "subword": {"vocab_size": 50}, "max_length": 80, "limit": None},
                      model={"cell": "gru", "units": 16, "embedding_dim": 8, "layers": 1},
                      head={"type": "acceptor"},
                      training={"epochs": 1, "batch_size": 16, "learning_rate": 0.02, "early_stopping": None})
    run = seqkit.train(raw, str(tmp_path / "run"))
    lines = ["the cat was good", "a lazy  dog ran to his awful box"]
    pred = run.predict(lines)
    out = str(tmp_path / "export")
    run.export(out, parity_examples=4)
    assert json.load(open(os.path.join(out, "metadata.json")))["tokenization"] == "sentencepiece"
    res = CliRunner().invoke(main, ["stream", out], input="\n".join(lines) + "\n")
    assert res.exit_code == 0, res.output
    finals = [ln.split("\t") for ln in res.output.splitlines() if ln.endswith("\tfinal")]
    assert [f[2] for f in finals] == [p["label"] for p in pred]
    assert [float(f[3]) for f in finals] == pytest.approx([p["probability"] for p in pred], abs=1e-4)
    n_pieces = [len(run.tokenizer.split(x)) for x in lines]
    assert [int(f[1].split()[1]) for f in finals] == n_pieces  # one step per piece


def test_seq2seq_sentencepiece_target_decodes_to_text(tmp_path):
    """Both sides sentencepiece (each its own model): a run saves both files, transduce gives the
    decoded pieces as text, and a loaded run re-reads the same tokenizers."""
    import seqkit

    rng = random.Random(4)
    src = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 4))) for _ in range(120)]
    (tmp_path / "s.txt").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "t.txt").write_text("\n".join(" ".join(reversed(s.split())).upper() for s in src) + "\n",
                                    encoding="utf-8")
    raw = make_recipe(data={"source": "parallel_text", "source_path": str(tmp_path / "s.txt"),
                            "target_path": str(tmp_path / "t.txt"), "tokenizer": "sentencepiece",
                            "target_tokenizer": "sentencepiece", "subword": {"vocab_size": 40},
                            "max_length": 40, "limit": None, "split": {"valid": 0.1, "test": 0.1}},
                      model={"cell": "gru", "units": 16, "embedding_dim": 8, "layers": 1},
                      head={"type": "seq2seq", "attention": "luong"},
                      training={"epochs": 1, "batch_size": 16, "learning_rate": 0.02, "early_stopping": None},
                      decoding={"beam_width": 2, "max_length": 16})
    run = seqkit.train(raw, str(tmp_path / "run"))
    names = os.listdir(tmp_path / "run")
    assert "subword.model" in names and "target_subword.model" in names
    head = seqkit.load(str(tmp_path / "run")).prepared.head
    assert head.target_subword and any(p.isupper() and len(p) > 2 for p in head.target_vocab.tokens)
    assert not any(p.isupper() for p in head.vocab.tokens[4:])  # each side its own pieces
    res = run.transduce(["the cat sat"], n_best=2)[0]
    for h in res["hypotheses"]:
        assert h["text"] == head.target_tokenizer.join(h["output"])
    for t in ("THE CAT", "BIG  RED BOX"):  # the target side is lossless too
        assert head.target_tokenizer.join(head.target_tokenizer.split(t)) == t
