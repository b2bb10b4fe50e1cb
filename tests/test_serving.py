"""Text in, text out: the in-graph tokenizer gives the Python readers' ids on
tricky strings, and ``serving_model`` / the SavedModel text signatures give what the id paths
(``predict``, ``generate``, ``transduce``) give, for every head. Models are built, not trained
(equality of two paths over the same weights needs no training)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

# no line breaks inside (a file given to `seqkit predict` would split there; one string = one
# sequence for the text signatures)
TRICKY = ["The DOG runs", "  İstanbul\u00a0CAT\u3000sleeps\t", "ΟΔΟΣ ὈΔΥΣΣΕΎΣ ΑΣ.Σ", "☃ zebra ǅ",
          "a", "Σ ΣΑ aΣ'Σb"]
# besides: separators str.split() knows and tf.strings.split does not, line and paragraph separators
EXTRA = ["a\u2028b\x1cc\x85d\u2009e\u202ff", "", "   ", "ΑΣΣ", "ǅǄǆ İ"]


def _encoders(vocab):
    from seqkit.data.text_ids import TextEncoder

    for mode in ("char", "whitespace"):
        for lowercase in (False, True):
            for lower_tokens in (False, True):
                for strip in (False, True):
                    yield (mode, lowercase, lower_tokens, strip), TextEncoder(
                        vocab, tokenizer=mode, lowercase=lowercase, lower_tokens=lower_tokens, strip=strip)


def test_space_class_is_what_str_split_splits_on():
    from seqkit.data.text_ids import PY_SPACE, _re2_class

    assert PY_SPACE == _re2_class([c for c in range(sys.maxunicode + 1) if chr(c).isspace()])


def test_in_graph_ids_equal_the_python_readers_ids_on_tricky_strings(tf):
    from seqkit.data.vocab import Vocabulary, tokenize

    texts = TRICKY + EXTRA
    seen = [t for s in texts for m in ("char", "whitespace") for low in (False, True)
            for t in tokenize(s, m, low) + [w.lower() for w in tokenize(s, m)]]
    # about half of the tokens known, so both hits and [UNK] occur; the final and medial sigma,
    # "i̇" (İ lowered: two code points) and the lowered words are in it
    vocab = Vocabulary.build([seen[::2] + ["σ", "ς", "i\u0307", "οδος", "ας.ς", "aσ'σb"]])
    for (mode, lowercase, lower_tokens, strip), enc in _encoders(vocab):
        tokens, ids = enc.encode(tf.constant(texts))
        for s, got, toks in zip(texts, ids.to_list(), tokens.to_list()):
            src = s.strip() if strip else s
            if lower_tokens:  # acceptor / tagger: split, then lower each token
                raw = tokenize(src, mode)
                want = vocab.encode([t.lower() for t in raw] if lowercase else raw)
                assert [t.decode() for t in toks] == raw
            else:  # language model / seq2seq: lower the text, then split
                want = vocab.encode(tokenize(src, mode, lowercase))
            assert got == want, (mode, lowercase, lower_tokens, strip, s)
    # the cases the rules are there for
    enc = dict(_encoders(vocab))[("char", True, False, False)]
    assert enc.encode(tf.constant(["ΑΣ İ"]))[1].to_list()[0] == vocab.encode(["α", "ς", " ", "i", "\u0307"])
    enc = dict(_encoders(vocab))[("char", True, True, False)]
    assert enc.encode(tf.constant(["ΑΣ İ"]))[1].to_list()[0] == vocab.encode(["α", "σ", " ", "i\u0307"])


def _texts(out, key):
    return [x.decode() for x in np.asarray(out[key]).reshape(-1)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("serving")
    (d / "ab.tsv").write_text("".join(f"{t}\t{y}\n" for t, y in [
        ("aaAb", "A"), ("abaa", "A"), ("bBba", "B"), ("babb", "B"), ("σας", "A"), ("İa", "B")] * 4),
        encoding="utf-8")
    (d / "pos.txt").write_text("The/D dog/N runs/V\na/D cat/N sleeps/V\nthe/D CAT/N runs/V\nοδος/N\n" * 4,
                               encoding="utf-8")
    (d / "lm.txt").write_text("the dog runs\nΟ ΣΚΎΛΟΣ τρέχει\na cat sleeps\n" * 6, encoding="utf-8")
    (d / "g2p.dict").write_text("".join(f"{w} {p}\n" for w, p in {
        "ab": "AE B", "ba": "B AA", "abba": "AE B B AA", "baba": "B AA B AA", "aab": "AE AE B",
        "bab": "B AA B", "abab": "AE B AE B", "bba": "B B AA", "aa": "AE AE", "bb": "B B"}.items()),
        encoding="utf-8")
    return d


def _build(raw):
    import seqkit

    model, pre = seqkit.build(raw)
    return pre.prepared, model


SPLIT = {"valid": 0.0, "test": 0.2, "shuffle": True}
TRAIN = {"epochs": 1, "batch_size": 8, "early_stopping": None}


def test_acceptor_labels_and_probabilities_equal_predict(data, tf):
    from seqkit.heads.sequence.predict import predict, read_records
    from seqkit.inference.serving import serving_model

    prep, model = _build({"name": "acc", "seed": 3, "data": {
        "source": "tsv_text_label", "path": str(data / "ab.tsv"), "tokenizer": "char", "lowercase": True,
        "max_length": 8, "split": SPLIT}, "model": {"units": 8, "embedding_dim": 4},
        "head": {"type": "acceptor", "too_long": "truncate"}, "training": TRAIN})
    texts = ["aaaa", "BBab", "σΑΣ", "İb ☃", "abababababab"]  # the last is cut to data.max_length
    want = predict(prep, model, read_records("\n".join(texts), "<t>", "text", prep))
    sm = serving_model(prep, model)
    out = sm.predict(texts + [""], verbose=0)
    assert _texts(out, "label") == [w["label"] for w in want] + [""]
    names = prep.head.labels.names
    np.testing.assert_allclose(out["probabilities"][:-1],
                               [[w["probabilities"][n] for n in names] for w in want], atol=2e-6)
    np.testing.assert_allclose(out["probability"][:-1], [w["probability"] for w in want], atol=2e-6)
    assert not out["probabilities"][-1].any()  # an empty string: no label, zero probabilities
    alone = sm(tf.constant(texts[:1]))  # batch composition changes nothing
    np.testing.assert_allclose(alone["probabilities"].numpy(), out["probabilities"][:1], atol=1e-6)


@pytest.mark.parametrize("crf", [False, True])
def test_tagger_tags_equal_predict_with_split_pieces(data, tf, crf):
    from seqkit.heads.sequence.predict import predict, read_records
    from seqkit.inference.serving import serving_model

    prep, model = _build({"name": "pos", "seed": 1, "data": {
        "source": "word_tag", "path": str(data / "pos.txt"), "lowercase": True, "max_length": 3,
        "split": SPLIT}, "model": {"units": 8, "embedding_dim": 8},
        "head": {"type": "tagger", "too_long": "split", "crf": crf}, "training": TRAIN})
    texts = ["THE dog\u00a0sleeps", "a cat runs the dog runs a", "ΟΔΟΣ zebra", "cat"]  # 2nd: 3 pieces
    want = predict(prep, model, read_records("\n".join(texts), "<t>", "text", prep))
    out = serving_model(prep, model).predict(texts, verbose=0)
    n = out["lengths"].tolist()
    assert n == [len(w["tags"]) for w in want] == [3, 7, 2, 1]
    tags, toks = np.asarray(out["tags"]), np.asarray(out["tokens"])
    for i, w in enumerate(want):
        assert [t.decode() for t in tags[i, :n[i]]] == w["tags"] and not any(tags[i, n[i]:])
        assert [t.decode() for t in toks[i, :n[i]]] == w["tokens"]
        np.testing.assert_allclose(out["probabilities"][i, :n[i]],
                                   [[p[k] for k in prep.head.labels.names] for p in w["probabilities"]],
                                   atol=2e-6)


def test_language_model_generate_text_equals_greedy_generate(data, tf, tmp_path):
    import keras

    from seqkit.errors import SeqkitError
    from seqkit.heads.language_model.generate import generate_text
    from seqkit.inference.serving import add_text_endpoints, serving_model

    prep, model = _build({"name": "lm", "seed": 2, "data": {
        "source": "text_lines", "path": str(data / "lm.txt"), "tokenizer": "whitespace", "lowercase": True,
        "max_length": 8, "split": SPLIT}, "model": {"units": 8, "embedding_dim": 4},
        "head": {"type": "language_model"}, "training": TRAIN, "decoding": {"max_length": 5}})
    prompts = ["The", "", "ο ΣΚΎΛΟΣ\u3000Runs", "zebra  ☃"]
    out = serving_model(prep, model, max_length=6).predict(prompts, verbose=0)
    assert _texts(out, "text") == [generate_text(prep, model, p, greedy=True, max_length=6)[0] for p in prompts]

    archive = keras.export.ExportArchive()  # the SavedModel signature: decoding.max_length (5) baked in
    archive.track(model)
    assert add_text_endpoints(archive, prep, model) == ["generate_text"]
    archive.write_out(str(tmp_path / "sm"), verbose=False)
    res = tf.saved_model.load(str(tmp_path / "sm")).signatures["generate_text"](text=tf.constant(prompts))
    assert _texts({"t": res["text"].numpy()}, "t") == \
        [generate_text(prep, model, p, greedy=True, max_length=5)[0] for p in prompts]
    with pytest.raises(SeqkitError, match="greedy=True.*seq2seq"):
        serving_model(prep, model, greedy=True)


def test_seq2seq_beam_and_greedy_text_equal_transduce_and_the_saved_model_signatures(data, tf, tmp_path):
    import keras

    from seqkit.inference.serving import add_text_endpoints, serving_model

    prep, model = _build({"name": "g2p", "seed": 1, "data": {
        "source": "cmudict", "path": str(data / "g2p.dict"), "max_length": 6, "split": SPLIT},
        "model": {"units": 8, "embedding_dim": 8}, "head": {"type": "seq2seq", "decoder_units": 12},
        "training": TRAIN, "decoding": {"beam_width": 3, "n_best": 2, "max_length": 6}})
    texts = ["abba", " ba ", "bab", "zab"]
    want = prep.head.decode_texts(model, [t.strip() for t in texts], n_best=2)
    out = serving_model(prep, model).predict(texts + [""], verbose=0)
    hyps = np.asarray(out["hypotheses"])
    assert [[h.decode() for h in row] for row in hyps[:-1]] == [[" ".join(s) for s, _ in w] for w in want]
    np.testing.assert_allclose(out["scores"][:-1], [[sc for _, sc in w] for w in want], atol=1e-4)
    assert _texts(out, "output") == [" ".join(w[0][0]) for w in want] + [""]
    greedy = prep.head.decode_texts(model, [t.strip() for t in texts], beam_width=1, length_penalty=0.0)
    g = serving_model(prep, model, greedy=True).predict(texts, verbose=0)
    assert _texts(g, "output") == [" ".join(w[0][0]) for w in greedy]

    archive = keras.export.ExportArchive()
    archive.track(model)
    assert add_text_endpoints(archive, prep, model) == ["predict_text", "generate_text"]
    archive.write_out(str(tmp_path / "sm"), verbose=False)
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    res = loaded.signatures["predict_text"](text=tf.constant(texts))
    assert [[h.decode() for h in row] for row in res["hypotheses"].numpy()] == \
        [[h.decode() for h in row] for row in hyps[:-1]]
    assert _texts({"o": res["output"].numpy()}, "o") == _texts(out, "output")[:-1]
    res = loaded.signatures["generate_text"](text=tf.constant(texts))
    assert _texts({"o": res["output"].numpy()}, "o") == _texts(g, "output")
    with pytest.raises(tf.errors.InvalidArgumentError, match="data.max_length = 6"):
        loaded.signatures["predict_text"](text=tf.constant(["abababab"]))


def test_a_frames_run_is_refused_with_a_clear_error(tmp_path, keras):
    from seqkit.errors import SeqkitError
    from seqkit.recipe import recipe_from_dict
    from seqkit.inference.serving import serving_model
    from seqkit.training.train import prepare

    head = "@problemName up\n@timeStamps false\n@univariate true\n@classLabel true up down\n@data\n"
    (tmp_path / "t.ts").write_text(head + "".join(f"{i},{i + 1},{i + 2}:{'up' if i % 2 else 'down'}\n"
                                                  for i in range(8)), encoding="utf-8")
    prep = prepare(recipe_from_dict({"name": "ts", "data": {
        "source": "ts", "train_path": str(tmp_path / "t.ts"), "split": {"valid": 0.0, "test": 0.25}},
        "head": {"type": "acceptor"}}))
    with pytest.raises(SeqkitError, match="cannot serve text: it reads 1-channel frames"):
        serving_model(prep, None)
