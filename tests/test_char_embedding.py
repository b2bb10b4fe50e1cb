"""Character-aware word inputs (``model.char_embedding``): unseen words get their own vectors,
the step model equals the full-sequence model, padding changes nothing, recipe errors name the
key, and a trained run keeps its character vocabulary through save, load and predict."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from seqkit.errors import DataError, RecipeError
from tests.seqhelp import fitted_head, frame_records, token_records

ROWS = [["The", "cat", "sat"], ["A", "dog", "ran", "far"], ["The", "dog", "sat"]]
TAGS = [["D", "N", "V"], ["D", "N", "V", "R"], ["D", "N", "V"]]


def _recipe(head="tagger", char=None, head_opts=None, **model):
    from seqkit.recipe import recipe_from_dict

    return recipe_from_dict(_raw(head, char, head_opts, **model))


def _raw(head="tagger", char=None, head_opts=None, data=None, **model):
    return {"name": "t", "seed": 3,
            "data": {"source": "word_tag", "path": "unused.txt", "max_length": 40, **(data or {})},
            "model": {"cell": "lstm", "units": 4, "embedding_dim": 3,
                      "char_embedding": {"dim": 3, "units": 2, "max_chars": 5, **(char or {})}, **model},
            "head": {"type": head, **(head_opts or {})},
            "training": {"epochs": 1, "batch_size": 4, "early_stopping": None}}


def _fitted(keras, head="tagger", seed=2, **kw):
    keras.utils.set_random_seed(seed)
    labels = None if head == "tagger" else ["x", "y", "x"]
    recs = token_records(ROWS, tags=TAGS if head == "tagger" else None, labels=labels)
    head = fitted_head(_recipe(head, **kw), recs)
    return head, head.build_model()


def _packed(head, rows):
    """``[N, T, 1 + W]`` packed inputs of token lists (0-padded to the longest)."""
    enc = [head.inputs.encode(r) for r in token_records(rows)]
    x = np.zeros((len(enc), max(map(len, enc)), enc[0].shape[1]), "int32")
    for i, e in enumerate(enc):
        x[i, : len(e)] = e
    return x


def test_packing_by_hand(keras):
    """Word id first, then the first W characters (unknown ones 1, padding 0)."""
    head, _ = _fitted(keras)
    chars = head.inputs.chars.vocab.index
    got = head.inputs.encode(token_records([["The", "zebras"]])[0])
    w = head.inputs.vocab.index
    assert got.dtype == np.int32 and got.shape == (2, 6)
    assert got[0].tolist() == [w["The"], chars["T"], chars["h"], chars["e"], 0, 0]
    # 'zebras' is no word of the training split ([UNK] = 1); z, b, s are unseen characters; cut at 5
    assert got[1].tolist() == [1, 1, chars["e"], 1, chars["r"], chars["a"]]


def test_unseen_words_get_their_own_vectors(keras):
    """Plain word embeddings give every unseen word [UNK]'s vector; here an unseen word's vector
    differs from [UNK]'s and from another unseen word's, and shares [UNK]'s word part."""
    head, model = _fitted(keras)
    emb = model.get_layer("embedding")
    x = _packed(head, [["zebra", "yak"]])
    unk = np.zeros((1, 1, x.shape[-1]), "int32")
    unk[0, 0, 0] = 1  # the [UNK] word id, no characters
    v = np.asarray(emb(x))[0]
    u = np.asarray(emb(unk))[0, 0]
    E = 3
    assert x[0, 0, 0] == x[0, 1, 0] == 1  # both read as [UNK] by the word vocabulary
    np.testing.assert_array_equal(v[0, :E], u[:E])
    np.testing.assert_array_equal(v[1, :E], u[:E])
    assert v.shape == (2, E + 2 * 2)  # E + forward and backward character states
    assert np.abs(v[0] - u).max() > 1e-3 and np.abs(v[1] - u).max() > 1e-3
    assert np.abs(v[0] - v[1]).max() > 1e-3


@pytest.mark.parametrize("head_type,cell,kw", [
    ("tagger", "gru", {}),
    ("tagger", "lstm", {"layers": 2}),
    ("acceptor", "simple_rnn", {"head_opts": {"pooling": "mean"}}),
])
def test_steps_equal_full_sequence(keras, head_type, cell, kw):
    """The step model (``token [B, 1 + W]``) gives the full-sequence logits at every step (the
    acceptor: its running answer equals the Keras answer on every prefix)."""
    head, model = _fitted(keras, head_type, char={"cell": cell, "bidirectional": cell != "gru"}, **kw)
    x = _packed(head, [["The", "zebra", "sat", "far"], ["A", "yak", "ran", "slowly"]])
    st = head.stepper(model)
    assert st.input_spec().name == "token" and st.input_spec().shape.as_list() == [None, 6]
    states, out = st.initial_state(2), []
    for t in range(x.shape[1]):
        logits, states = st.step(x[:, t], states)
        out.append(np.asarray(logits))
    streamed = np.stack(out, axis=1)
    if head_type == "tagger":
        np.testing.assert_allclose(streamed, model(x).numpy(), atol=1e-5)
    else:
        for t in range(1, x.shape[1] + 1):
            np.testing.assert_allclose(streamed[:, t - 1], model(x[:, :t]).numpy(), atol=1e-5)


def test_padding_changes_nothing(keras):
    """A short row padded in a batch gets the same logits as alone; so does the acceptor."""
    for head_type in ("tagger", "acceptor"):
        head, model = _fitted(keras, head_type)
        x = _packed(head, [["The", "zebra", "sat", "far", "away"], ["A", "yak"]])
        alone = _packed(head, [["A", "yak"]])
        z, za = model(x).numpy(), model(alone).numpy()
        if head_type == "tagger":
            np.testing.assert_allclose(z[1, :2], za[0], atol=1e-5)
        else:
            np.testing.assert_allclose(z[1], za[0], atol=1e-5)


def test_lookup_form_equals_call_under_full_integer_tracing(keras, tf):
    """Full-integer exports trace the model inside ``gathered_ids`` and ``unrolled``: the layer
    then reads the packed ids by lookups alone (no int32 slice, reshape or ``!=``) and its masks
    are float 1 / 0; the tagger's logits stay those of the plain model (bool and float masks)."""
    from seqkit.export.id_lookups import gathered_ids
    from seqkit.export.unrolled import unrolled

    head, model = _fitted(keras, char={"cell": "lstm", "bidirectional": True})
    x = _packed(head, [["The", "zebra", "sat", "far"], ["A", "yak"]])  # row 2 padded
    ref = model(x).numpy()
    emb = model.get_layer("embedding")
    for dtype in ("bool", "float32"):
        with unrolled(model, dtype == "float32"), gathered_ids(model, dtype):
            got = model(tf.constant(x)).numpy()
            m = emb.compute_mask(tf.constant(x))
        assert m.dtype == dtype and np.asarray(m).tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
        np.testing.assert_allclose(got, ref, atol=1e-6)
    assert emb.compute_mask(tf.constant(x)).dtype == "bool"  # restored afterwards


def test_crf_tagger_decodes_packed_inputs(keras, tf):
    """The CRF's mask is the word id column: ``decode`` of packed records gives the Viterbi paths
    of the emissions over each row's own words."""
    head, model = _fitted(keras, head_opts={"crf": True})
    rows = [["The", "zebra", "sat", "far"], ["A", "yak"]]
    got = head.decode(model, token_records(rows))
    x = _packed(head, rows)
    want = model.get_layer("crf").decode(model(x), tf.constant(x[..., 0] != 0)).numpy()
    for r, (tags, probs), w in zip(rows, got, want):
        assert tags.tolist() == w[: len(r)].tolist() and probs.shape == (len(r), len(head.labels))
        np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("change,message", [
    ({"head": {"type": "language_model"}},
     "model.char_embedding: character-aware word inputs are for the acceptor and tagger heads"),
    ({"char": {"cell": "lstmm"}}, "model.char_embedding.cell: unknown cell 'lstmm'"),
    ({"char": {"max_chars": 0}}, "model.char_embedding.max_chars: expected a positive integer"),
    ({"char": {"width": 3}}, "model.char_embedding.width: unknown key"),
    ({"data": {"source": "table", "path": "x.csv", "tokenizer": "char"}, "head": {"type": "acceptor"}},
     "model.char_embedding: the source 'table' splits its text into characters"),
    ({"data": {"source": "table", "path": "x.csv", "tokenizer": "sentencepiece"}, "head": {"type": "acceptor"}},
     "model.char_embedding: data.tokenizer sentencepiece gives subword pieces"),
])
def test_recipe_errors_name_the_key(change, message):
    from seqkit.recipe import recipe_from_dict

    raw = _raw(char=change.get("char"))
    raw["data"].update(change.get("data", {}))
    raw["head"].update(change.get("head", {}))
    with pytest.raises(RecipeError) as info:
        recipe_from_dict(raw)
    assert message in str(info.value)


def test_word_inputs_by_whitespace_are_accepted():
    """A table acceptor splitting on white space reads words: accepted."""
    from seqkit.recipe import recipe_from_dict

    raw = _raw("acceptor")
    raw["data"].update({"source": "table", "path": "x.csv", "tokenizer": "whitespace"})
    assert recipe_from_dict(raw).model.char_embedding.max_chars == 5


def test_frames_refused_at_fit():
    head_recipe = _recipe("acceptor")
    from seqkit.registry import HEADS

    head = HEADS.get("acceptor")(head_recipe)
    with pytest.raises(DataError, match="model.char_embedding: the data gives real-valued frames"):
        head.fit(frame_records([np.ones((3, 2))], ["x"]))


# ---------------------------------------------------------------- a trained run
TRAIN = "\n".join(
    " ".join(f"{w}/{t}" for w, t in pairs) for pairs in [
        [("the", "D"), ("cat", "N"), ("runs", "V")], [("a", "D"), ("dog", "N"), ("walks", "V")],
        [("the", "D"), ("bird", "N"), ("sings", "V")], [("a", "D"), ("cow", "N"), ("eats", "V")],
        [("the", "D"), ("dog", "N"), ("eats", "V")], [("a", "D"), ("cat", "N"), ("sings", "V")],
        [("the", "D"), ("cow", "N"), ("runs", "V")], [("a", "D"), ("bird", "N"), ("walks", "V")],
    ] * 3) + "\n"


@pytest.fixture(scope="module")
def char_run(tmp_path_factory, keras):
    import seqkit

    d = tmp_path_factory.mktemp("charrun")
    (d / "train.txt").write_text(TRAIN, encoding="utf-8")
    raw = _raw(data={"path": str(d / "train.txt"), "max_length": 8,
                     "split": {"valid": 0.15, "test": 0.15, "shuffle": True}})
    raw["training"].update({"epochs": 2, "learning_rate": 0.05})
    run = seqkit.train(raw, str(d / "run"))
    return str(d / "run"), run


def test_run_saves_reloads_and_predicts_unseen_words(char_run, tf):
    """char_vocab.json beside vocab.json; the reloaded run scores its test split as training did;
    `Run.predict` on raw text with unseen words equals the model on inputs packed by hand from
    the saved vocabularies."""
    from seqkit.training.train import load_run

    path, run = char_run
    with open(os.path.join(path, "char_vocab.json"), encoding="utf-8") as f:
        chars = json.load(f)
    with open(os.path.join(path, "vocab.json"), encoding="utf-8") as f:
        words = json.load(f)
    with open(os.path.join(path, "inputs.json"), encoding="utf-8") as f:
        assert json.load(f)["max_chars"] == 5
    assert chars[:2] == ["", "[UNK]"] and set("thecatrunsdogwalks") <= set(chars)
    prep, model = load_run(path, with_data=True)
    assert prep.head.inputs.chars.vocab.tokens == chars
    ev = prep.head.evaluate(model, prep.splits["test"])
    assert ev["accuracy"] == pytest.approx(run.metrics["test"]["accuracy"])
    # the accuracy on the tokens the word vocabulary reads as [UNK], counted by hand
    recs = token_records([["the", "zebra", "runs"], ["a", "yak", "walks"]],
                         tags=[["D", "N", "V"], ["D", "N", "V"]])
    ev = prep.head.evaluate(model, recs)
    pred = [[prep.head.labels.names[k] for k in ids] for ids, _ in prep.head.decode(model, recs)]
    assert ev["oov_tokens"] == 2
    assert ev["oov_accuracy"] == (int(pred[0][1] == "N") + int(pred[1][1] == "N")) / 2

    out = run.predict(["the zebra runs", "a cat walked"])
    x = np.zeros((2, 3, 6), "int32")
    for i, sent in enumerate(["the zebra runs", "a cat walked"]):
        for t, w in enumerate(sent.split()):
            x[i, t, 0] = words.index(w) if w in words else 1
            cs = [chars.index(c) if c in chars else 1 for c in w[:5]]
            x[i, t, 1:1 + len(cs)] = cs
    want = np.argmax(model(x).numpy(), axis=-1)
    names = prep.head.labels.names
    assert [o["tags"] for o in out] == [[names[k] for k in row] for row in want]
    assert out[0]["tokens"] == ["the", "zebra", "runs"]


def _stream_tags(export_dir, lines):
    """``seqkit stream``'s answers for text lines, as tag lists (the runtime packs the characters)."""
    from seqkit.heads.sequence.stream import (full_sequence_answers, read_stream_input,
                                                stream_answers)
    from seqkit.runtime.streaming import read_export_metadata

    meta = read_export_metadata(export_dir)
    inputs = read_stream_input("\n".join(lines), "<in>", meta, export_dir)
    if meta.get("full_sequence"):
        from seqkit.runtime.full_sequence import FullSequenceModel

        answers = full_sequence_answers(FullSequenceModel(export_dir), inputs)
    else:
        from seqkit.runtime.streaming import StreamingModel

        answers = stream_answers(StreamingModel(export_dir), inputs)
    tags = [[] for _ in lines]
    for a in answers:
        tags[a.index].append(a.name)
    return tags, meta


LINES = ["the zebra runs", "a cat walked", "the dog eats"]


def test_step_export_parity_and_stream(char_run, tmp_path):
    """TFLite step model (token [B, 1 + W]): parity with Keras passes; the metadata carries the
    character vocabulary and the stream runtime, packing characters itself, tags as Run.predict."""
    from seqkit.export.writer import export_run

    path, run = char_run
    out = str(tmp_path / "exp")
    rep = export_run(path, out)
    assert rep["tflite"]["max_abs_diff"] < 1e-4 and rep["tflite"]["argmax_agreement"] == 1.0
    assert "WHILE" not in rep["tflite"]["ops"]  # the character loop is written out
    tags, meta = _stream_tags(out, LINES)
    with open(os.path.join(path, "char_vocab.json"), encoding="utf-8") as f:
        assert meta["char_vocab"] == json.load(f) and meta["max_chars"] == 5
    assert meta["input"]["shape"] == [None, 6] and os.path.isfile(os.path.join(out, "char_vocab.json"))
    assert tags == [o["tags"] for o in run.predict(LINES)]


@pytest.mark.slow
def test_full_sequence_and_saved_model_exports(char_run, tmp_path):
    """The pinned-shape TFLite predict (tokens [B, T, 1 + W]) and the SavedModel step/predict
    pass parity; the full-sequence runtime answers as Run.predict."""
    from seqkit.export.writer import export_run

    path, run = char_run
    out = str(tmp_path / "fs")
    rep = export_run(path, out, full_sequence=True, batch=2, length=6)
    assert rep["tflite"]["max_abs_diff"] < 1e-4
    tags, meta = _stream_tags(out, LINES)
    assert meta["full_sequence"]["input"]["shape"] == [2, 6, 6]
    assert tags == [o["tags"] for o in run.predict(LINES)]
    rep = export_run(path, str(tmp_path / "sm"), fmt="saved_model")
    assert rep["saved_model"]["max_abs_diff"] < 1e-4 and rep["saved_model_predict"]["max_abs_diff"] < 1e-4


def test_full_sequence_int16x8_export_converts_and_agrees(char_run, tmp_path):
    """int16x8 full-sequence export of a character-aware tagger: the packed ids are read by
    lookups alone, so the quantizer finds a range for every tensor (it refused the model before
    with 'Empty min/max for tensor .../Reshape'); builtin int16 ops only, tags as Keras."""
    from seqkit.export.writer import export_run

    path, _ = char_run
    rep = export_run(path, str(tmp_path / "q16"), fmt="tflite", full_sequence=True, batch=2, length=6,
                     quantize="int16x8")
    assert rep["tflite"]["argmax_agreement"] >= 0.98
    assert not {"SELECT_V2", "CAST", "NOT_EQUAL"} & set(rep["tflite"]["ops"]), rep["tflite"]["ops"]


def test_a_run_with_character_features_is_recognised_as_a_seqkit_run(char_run):
    """char_vocab.json is a name a run holds, so --overwrite and train --seeds accept the run."""
    from seqkit.data.word_chars import CHAR_VOCAB
    from seqkit.runs.lifecycle import check_target
    from seqkit.runs.rundir import RUN_NAMES, not_a_run_because
    from seqkit.recipe import recipe_from_dict

    path, _ = char_run
    assert CHAR_VOCAB in RUN_NAMES and os.path.isfile(os.path.join(path, CHAR_VOCAB))
    assert not_a_run_because(path) is None
    assert check_target(path, recipe_from_dict(_raw()), overwrite=True) == "run"
