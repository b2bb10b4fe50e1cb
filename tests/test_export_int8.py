"""Full-integer TFLite exports (``--quantize int8 | int16x8``) of a language model, a tagger, a
(frame) acceptor and a seq2seq model: builtin ops only, integer tensors where the mode says so
(read from the interpreter's tensor details), arg-max agreement above the gate and the task metric
near Keras on held-out data, the runtimes read integer I/O, and a gate above what the model reaches
refuses with nothing written."""

import json
import os

import numpy as np
import pytest

from tests.test_export_sequence import TS_HEAD, _train, ts_case

WORDS = {"ab": "AE B", "ba": "B AA", "abba": "AE B B AA", "baba": "B AA B AA", "aab": "AE AE B",
         "bab": "B AA B", "abab": "AE B AE B", "bba": "B B AA", "aa": "AE AE", "bb": "B B",
         "abb": "AE B B", "baa": "B AA AA"}
FAST = {"parity_examples": 6, "calibration_examples": 16}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, keras, tiny_tagger, tiny_acceptor):
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train
    from tests.conftest import make_recipe

    out = {}
    d = tmp_path_factory.mktemp("q_lm")
    out["lm"] = str(d / "run")
    train(recipe_from_dict(make_recipe(data={"limit": 60, "max_length": 60},
                                       model={"cell": "lstm", "units": 16, "layers": 1},
                                       training={"epochs": 1})), out["lm"], verbose=0)
    out["tagger"] = tiny_tagger  # conftest's session run (also tests/test_export_stateful.py's); read only
    out["acceptor"] = tiny_acceptor  # conftest's session run (also tests/test_keras_loading.py's); read only
    d = tmp_path_factory.mktemp("q_biacc")  # bidirectional: exported full-sequence, padded rows
    (d / "train.ts").write_text(TS_HEAD + "".join(ts_case(i) for i in range(30)))
    out["bi_acceptor"] = _train(d, {
        "name": "biacc", "seed": 1,
        "data": {"source": "ts", "train_path": str(d / "train.ts"), "max_length": 6,
                 "split": {"valid": 0.0, "test": 0.3, "shuffle": True}},
        "model": {"cell": "lstm", "units": 8, "layers": 1, "bidirectional": True},
        "head": {"type": "acceptor", "pooling": "final"},
        "training": {"epochs": 10, "batch_size": 4, "learning_rate": 0.02, "early_stopping": None}})
    d = tmp_path_factory.mktemp("q_s2s")
    (d / "tiny.dict").write_text("\n".join(f"{w} {p}" for w, p in WORDS.items()) + "\n", encoding="utf-8")
    out["seq2seq"] = str(d / "run")
    train(recipe_from_dict({
        "name": "tiny-g2p", "seed": 1,
        "data": {"source": "cmudict", "path": str(d / "tiny.dict"), "max_length": 6,
                 "split": {"valid": 0.0, "test": 0.3, "shuffle": True}},
        "model": {"cell": "gru", "units": 8, "embedding_dim": 8},
        "head": {"type": "seq2seq", "decoder_units": 12, "attention": "luong"},
        "training": {"epochs": 20, "batch_size": 4, "learning_rate": 0.02, "early_stopping": None},
        "decoding": {"beam_width": 2, "max_length": 6}}), out["seq2seq"], verbose=0)
    return out


def _no_flex(ops):
    return not any(o.startswith("Flex") or o in ("CUSTOM", "DELEGATE") for o in ops)


def _io(path, signature):
    """``({input: dtype name}, {output: dtype name}, {every tensor's dtype name})`` of a signature."""
    from seqkit.export.tflite import interpreter

    it = interpreter(os.path.join(path, "model.tflite"))
    r = it.get_signature_runner(signature)
    ins = {k: np.dtype(d["dtype"]).name for k, d in r.get_input_details().items()}
    outs = {k: np.dtype(d["dtype"]).name for k, d in r.get_output_details().items()}
    return ins, outs, {np.dtype(d["dtype"]).name for d in it.get_tensor_details()}


def test_lm_int8_integer_io_streams_and_int16x8_float_io(runs, tmp_path):
    from seqkit.export.writer import export_run
    from seqkit.runtime import StreamingModel
    from seqkit.training.train import load_run

    out8 = str(tmp_path / "i8")
    r8 = export_run(runs["lm"], out8, quantize="int8", io_type="int", **FAST)
    t = r8["tflite"]
    assert _no_flex(t["ops"]) and "QUANTIZE" not in t["ops"] and "DEQUANTIZE" not in t["ops"]
    assert t["argmax_agreement"] >= r8["min_argmax_agreement"] == 0.95
    assert t["task"]["metric"] == "perplexity" and t["task"]["scored"] == t["positions"]
    assert abs(t["task"]["export"] / t["task"]["keras"] - 1) < 0.05
    assert r8["calibration"]["examples"] == 16 and r8["io_type"] == "int"
    ins, outs, _ = _io(out8, "step")
    assert ins == {"token": "int32", "rnn_0_h": "int8", "rnn_0_c": "int8"}
    assert outs == {"logits": "int8", "rnn_0_h": "int8", "rnn_0_c": "int8"}
    meta = json.load(open(os.path.join(out8, "metadata.json")))
    assert meta["quantize"] == "int8" and meta["io_type"] == "int"
    # the runtime dequantizes: its float logits are the report's, close to Keras's
    prep, model = load_run(runs["lm"])
    rt = StreamingModel(out8)
    ids = [2, 5, 9, 7, 4, 11, 6]
    z = np.stack([rt.step([i])[0] for i in ids])
    # states carried as stored when the state input and output share scale and zero point
    assert z.dtype == np.float32 and rt.states["rnn_0_h"].dtype == (np.int8 if rt._raw_states else np.float32)
    ref = np.asarray(model(np.asarray([ids], np.int32), training=False))[0]
    assert np.abs(z - ref).max() <= 2 * t["max_abs_diff"] + 0.05
    assert (z.argmax(-1) == ref.argmax(-1)).mean() >= 0.8

    out16 = str(tmp_path / "i16")
    r16 = export_run(runs["lm"], out16, quantize="int16x8", **FAST)
    t16 = r16["tflite"]
    assert _no_flex(t16["ops"]) and t16["argmax_agreement"] >= 0.98
    assert t16["max_abs_diff"] < t["max_abs_diff"]  # 16-bit activations: finer than 8-bit
    ins, outs, every = _io(out16, "step")
    assert ins == {"token": "int32", "rnn_0_h": "float32", "rnn_0_c": "float32"}
    assert set(outs.values()) == {"float32"} and "int16" in every  # float I/O, int16 inside


def test_tagger_int8_and_int16x8_integer_io(runs, tmp_path):
    from seqkit.export.writer import export_run
    from seqkit.runtime import StreamingModel

    for q, act in (("int8", "int8"), ("int16x8", "int16")):
        out = str(tmp_path / q)
        r = export_run(runs["tagger"], out, quantize=q, io_type="int", **FAST)
        t = r["tflite"]
        assert _no_flex(t["ops"]) and t["argmax_agreement"] >= r["min_argmax_agreement"]
        assert t["task"]["metric"] == "accuracy" and abs(t["task"]["export"] - t["task"]["keras"]) <= 0.1
        ins, outs, _ = _io(out, "step")
        name = json.load(open(os.path.join(out, "metadata.json")))["input"]["name"]
        assert ins.pop(name) == "int32" and set(ins.values()) == {act}
        assert set(outs.values()) == {act}
        rt = StreamingModel(out)
        assert rt.step([3]).dtype == np.float32


def test_frame_acceptor_int8_integer_frames(runs, tmp_path):
    from seqkit.export.writer import export_run
    from seqkit.runtime import StreamingModel

    out = str(tmp_path / "a8")
    r = export_run(runs["acceptor"], out, quantize="int8", io_type="int", **FAST)
    t = r["tflite"]
    assert _no_flex(t["ops"]) and t["argmax_agreement"] >= 0.95
    assert t["task"]["metric"] == "accuracy" and t["task"]["export"] == t["task"]["keras"]
    ins, outs, _ = _io(out, "step")
    assert set(ins.values()) == {"int8"} and set(outs.values()) == {"int8"}  # frames quantized too
    rt = StreamingModel(out)
    z = np.stack([rt.step(np.asarray([[j, 10.0 + j]], np.float32))[0] for j in range(4)])
    assert z.dtype == np.float32 and np.isfinite(z).all()


def test_bidirectional_frame_acceptor_int8_padded_rows_read_through_lengths(runs, tmp_path):
    """No int8 value is NaN, so a full-integer frame model cannot find NaN padding: its
    ``predict`` takes ``lengths`` instead. Held-out rows of 3-6 frames in a [1, 6] pinned
    model (most padded) give finite logits that agree with Keras's on every row, and the
    runtime's answer for a row does not depend on what the padding frames hold."""
    from seqkit.export.writer import export_run
    from seqkit.runtime.full_sequence import FullSequenceModel
    from seqkit.training.train import load_run

    out = str(tmp_path / "b8")
    r = export_run(runs["bi_acceptor"], out, quantize="int8", full_sequence=True, parity_examples=9,
                   calibration_examples=16)
    t = r["tflite"]
    assert _no_flex(t["ops"]) and "WHILE" not in t["ops"]
    assert "NOT_EQUAL" not in t["ops"] and "REDUCE_ANY" not in t["ops"]  # no NaN test left
    assert "SELECT_V2" not in t["ops"] and "LESS" not in t["ops"]  # the mask: a lookup, by arithmetic
    assert t["argmax_agreement"] == 1.0 and t["task"]["export"] == t["task"]["keras"]
    meta = json.load(open(os.path.join(out, "metadata.json")))
    assert meta["full_sequence"]["lengths"] == {"name": "lengths", "dtype": "int32", "shape": [1]}
    ins, _, _ = _io(out, "predict")
    assert ins == {"frames": "float32", "lengths": "int32"}
    prep, model = load_run(runs["bi_acceptor"], with_data=True)
    rows = [np.asarray(rec.frames, np.float32) for rec in prep.splits["test"]]
    assert min(len(x) for x in rows) < 6  # padded rows
    rt = FullSequenceModel(out)
    got = np.stack(rt.predict(rows))
    assert np.isfinite(got).all()
    ref = np.concatenate([np.asarray(model(prep.head.inputs.normalizer(x[None]), training=False)) for x in rows])
    assert (got.argmax(-1) == ref.argmax(-1)).all()
    # padding content is ignored: garbage in the padding frames gives the same logits
    short = next(x for x in rows if len(x) < 6)
    runner = rt.runner
    base = np.zeros((1, 6, short.shape[1]), np.float32)
    base[0, : len(short)] = short
    junk = base.copy()
    junk[0, len(short):] = 50.0
    n = np.asarray([len(short)], np.int32)
    a, b = runner(frames=base, lengths=n)["logits"], runner(frames=junk, lengths=n)["logits"]
    np.testing.assert_array_equal(a, b)


def test_seq2seq_int8_integer_io_unrolled_encoder_and_int16x8(runs, tmp_path):
    from seqkit.errors import SeqkitError
    from seqkit.export.writer import export_run
    from seqkit.runtime import Seq2SeqModel

    out = str(tmp_path / "s8")
    # a tiny model trained hard on 8 pairs: sharp logits, so a looser gate than the default 0.95
    r = export_run(runs["seq2seq"], out, quantize="int8", io_type="int", min_agreement=0.85, **FAST)
    t = r["tflite"]
    assert _no_flex(t["ops"]) and t["argmax_agreement"] >= 0.85 and "WHILE" not in t["ops"]
    assert {"SELECT_V2", "NOT_EQUAL", "GREATER"}.isdisjoint(t["ops"])  # masks: lookups, arithmetic
    assert t["task"]["metric"] == "wer" and r["tflite_decoding"]["wer"]["export"] == t["task"]["export"]
    assert abs(t["task"]["export"] - t["task"]["keras"]) <= 0.34
    ins, outs, _ = _io(out, "decode_step")
    assert ins["token"] == "int32" and {v for k, v in ins.items() if k != "token"} == {"int8"}
    assert set(outs.values()) == {"int8"}
    enc_in, enc_out, _ = _io(out, "encode")
    assert enc_in == {"source": "int32"}
    # Luong input feeding starts from zeros: a constant the converter leaves float
    assert enc_out == {"memory": "int8", "memory_mask": "int8", "keys": "int8", "dec_0_h": "int8",
                       "feed": "float32"}
    rt = Seq2SeqModel(out)
    assert rt.greedy([4, 5, 5, 4]) == rt.beam_search([4, 5, 5, 4], beam_width=1)[0][0]

    # int16x8: the token and the source are read by GATHER alone (TF 2.21's int16x8 quantizer
    # wants a range for any other int32 op), the masks are float and applied by arithmetic, the
    # attention normalises with SOFTMAX (no SELECT_V2 / CAST / DIV kernel in int16x8)
    out16 = str(tmp_path / "s16")
    r16 = export_run(runs["seq2seq"], out16, quantize="int16x8", min_agreement=0.85, **FAST)
    t16 = r16["tflite"]
    assert _no_flex(t16["ops"]) and "WHILE" not in t16["ops"] and t16["argmax_agreement"] >= 0.85
    assert {"SELECT_V2", "CAST", "DIV", "NOT_EQUAL", "GREATER"}.isdisjoint(t16["ops"])
    assert abs(t16["task"]["export"] - t16["task"]["keras"]) <= 0.34
    assert "int16" in _io(out16, "decode_step")[2] and "int16" in _io(out16, "encode")[2]
    rt16 = Seq2SeqModel(out16)
    assert rt16.greedy([4, 5, 5, 4]) == rt16.beam_search([4, 5, 5, 4], beam_width=1)[0][0]


def test_int16x8_full_sequence_tagger_and_bidirectional_acceptor(runs, tmp_path):
    """int16x8 of pinned full-sequence models, padded rows: the token mask and the lengths mask
    are float table lookups (the one int32 op left is GATHER) applied by arithmetic in the
    unrolled layers; builtin int16 kernels only, and every held-out row agrees with Keras
    (the parity check runs the export through ``FullSequenceModel``)."""
    from seqkit.export.writer import export_run

    cases = (("tagger", {"batch": 2, "length": 8, "parity_examples": 6}),
             ("bi_acceptor", {"parity_examples": 9}))
    for name, kw in cases:
        out = str(tmp_path / name)
        r = export_run(runs[name], out, quantize="int16x8", full_sequence=True, calibration_examples=16, **kw)
        t = r["tflite"]
        assert _no_flex(t["ops"]) and "WHILE" not in t["ops"], t["ops"]
        assert {"SELECT_V2", "CAST", "NOT_EQUAL", "LESS"}.isdisjoint(t["ops"]), t["ops"]
        assert t["argmax_agreement"] == 1.0 and t["task"]["export"] == t["task"]["keras"]
        assert t["positions"] > (6 if name == "tagger" else 8)
        ins, outs, every = _io(out, "predict")
        assert "int16" in every and set(outs.values()) == {"float32"}
    assert ins == {"frames": "float32", "lengths": "int32"}


def test_int16x8_rewrites_are_exact_in_float(runs):
    """The graph the int16x8 export traces (float table-lookup masks, arithmetic masking in the
    unrolled layers) computes Keras's logits to 1e-6 in float32 on padded rows; the shifted
    softmax gives the masked softmax's weights to 1e-6."""
    import tensorflow as tf

    from seqkit.export.frame_lengths import lengths_predict_fn
    from seqkit.export.id_lookups import gathered_ids, id_mask, shifted_softmax
    from seqkit.export.unrolled import unrolled
    from seqkit.layers.attention import masked_softmax
    from seqkit.training.train import load_run

    prep, model = load_run(runs["tagger"])
    tokens = np.asarray([[5, 3, 7, 2, 0, 0, 0, 0], [4, 6, 0, 0, 0, 0, 0, 0]], np.int32)
    ref = np.asarray(model(tokens, training=False))
    with unrolled(model, True), gathered_ids(model, "float32"):
        got = np.asarray(tf.function(lambda x: model(x, training=False))(tf.constant(tokens)))
    valid = tokens != 0
    np.testing.assert_allclose(got[valid], ref[valid], atol=1e-6)
    np.testing.assert_array_equal(np.asarray(id_mask(tokens, 10, "float32")), valid.astype(np.float32))

    prep, model = load_run(runs["bi_acceptor"], with_data=True)
    rows = [np.asarray(rec.frames, np.float32) for rec in prep.splits["test"]][:4]
    ref = np.concatenate([np.asarray(model(prep.head.inputs.normalizer(x[None]), training=False)) for x in rows])
    frames = np.zeros((len(rows), 6, rows[0].shape[1]), np.float32)
    for i, x in enumerate(rows):
        frames[i, : len(x)] = x
    lengths = np.asarray([len(x) for x in rows], np.int32)
    assert lengths.min() < 6
    with unrolled(model, True):
        fn = lengths_predict_fn(prep, model, 6, "float32")
        got = np.asarray(tf.function(fn)(tf.constant(frames), tf.constant(lengths))["logits"])
    np.testing.assert_allclose(got, ref, atol=1e-6)

    scores = np.random.default_rng(0).normal(0, 3, (3, 7)).astype(np.float32)
    mask = np.asarray([[1] * 7, [1, 1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0]], np.float32)
    np.testing.assert_allclose(np.asarray(shifted_softmax(scores, mask)),
                               np.asarray(masked_softmax(scores, mask > 0)), atol=1e-6)


def test_gate_above_what_the_model_reaches_refuses_and_writes_nothing(runs, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main
    from seqkit.errors import SeqkitError
    from seqkit.export.writer import export_run

    with pytest.raises(SeqkitError, match=r"--io-type int: integer inputs and outputs need a full-integer"):
        export_run(runs["lm"], str(tmp_path / "x"), quantize="dynamic-range", io_type="int")
    # the tiny seq2seq model's int8 agreement is below 0.99 (0.89 with these settings)
    r = CliRunner().invoke(main, ["export", runs["seq2seq"], "--out", str(tmp_path / "e"), "--quantize",
                                  "int8", "--min-agreement", "0.99", "--parity-examples", "6",
                                  "--calibration-examples", "16"])
    assert r.exit_code != 0 and "Traceback" not in r.output, r.output
    assert "parity check failed for the TFLite encode + decode_step (int8) model: arg-max agreement" in r.output
    assert "< 0.99; nothing was written. Held-out wer" in r.output
    assert list(tmp_path.iterdir()) == []


def test_unquantizable_ops_read_from_converter_messages():
    from seqkit.export.tflite import unquantizable_ops

    # TF 2.21's int16x8 wording (a forward acceptor's mean-pooling step divides by the count)
    msg = ("error: Quantization to 16x8-bit not yet supported for op: 'DIV'.\n"
           "error: Quantization to 16x8-bit not yet supported for op: 'NOT_EQUAL'.\n"
           "error: 'tfl.while' op is neither a custom op nor a flex op")
    assert unquantizable_ops(msg) == ["DIV", "NOT_EQUAL", "WHILE"]
    assert unquantizable_ops("error: Quantization not yet supported for op: 'tfl.div'") == ["DIV"]
    assert unquantizable_ops("something else") == []
