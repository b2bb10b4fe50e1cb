"""Export of encoder-decoder (seq2seq) runs: encode + decode_step streamed equal the teacher-forced
Keras logits (TFLite and SavedModel), SavedModel generate / beam_search and the TFLite runtime's
greedy / beam search equal Keras's transduce, builtin ops only, the padding mask survives the
pinned encoder, a failed or interrupted export writes nothing, CLI export / stream / inspect."""

import json
import os
import shutil

import numpy as np
import pytest

from tests.conftest import G2P_WORDS as WORDS  # noqa: F401 (read from here by other test files)

# name: (model section, head section); tiny, trained a few epochs so outputs vary by source
RUNS = {
    "bi-lstm-bahdanau": ({"cell": "lstm", "bidirectional": True}, {"attention": "bahdanau"}),  # conftest's
    "gru-luong-2xlstm": ({"cell": "gru"}, {"attention": "luong", "decoder_cell": "lstm",
                                            "decoder_layers": 2}),
    "simple_rnn-none": ({"cell": "simple_rnn"}, {"attention": "none"}),
}
# the default run checks the bidirectional encoder with Bahdanau attention; the two-layer Luong
# decoder with input feeding and the attention-free one repeat its checks under -m slow (suite time)
NAMES = ["bi-lstm-bahdanau", pytest.param("gru-luong-2xlstm", marks=pytest.mark.slow),
         pytest.param("simple_rnn-none", marks=pytest.mark.slow)]
STATES = {"bi-lstm-bahdanau": ["dec_0_h", "dec_0_c"],
          "gru-luong-2xlstm": ["dec_0_h", "dec_0_c", "dec_1_h", "dec_1_c", "feed"],
          "simple_rnn-none": ["dec_0_h"]}
S_MAX = 6  # conftest tiny_seq2seq_recipe's data.max_length and decoding.max_length
SOURCES = ["abba", "bab", "ab", "bbaa", "aabb", "baab", "b", "a", "abbab", "bbbbbb", "aaaa", "ba"]
BEAM, ALPHA = 3, 0.6  # its decoding.beam_width and length_penalty


class _Lazy(dict):
    """A dict whose values are made on first use: a test that needs one run trains only that one."""

    def __init__(self, make):
        super().__init__()
        self._make = make

    def __missing__(self, name):
        self[name] = self._make(name)
        return self[name]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, keras, tiny_seq2seq):
    """name -> run directory, trained on first use (conftest ``tiny_seq2seq_recipe``, 20 epochs on
    12 words, beam 3, length penalty 0.6, sources of at most 6 symbols). bi-lstm-bahdanau is
    conftest's session run ``tiny_seq2seq()`` (also tests/test_keras_loading.py's); read only."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train
    from tests.conftest import tiny_seq2seq_recipe, write_g2p_words

    d = tmp_path_factory.mktemp("s2s")

    def make(name):
        if name == "bi-lstm-bahdanau":
            return tiny_seq2seq()
        model_cfg, head_cfg = RUNS[name]
        recipe = tiny_seq2seq_recipe(write_g2p_words(d / "tiny.dict"), model_cfg, head_cfg)
        train(recipe_from_dict(recipe), str(d / name), verbose=0)
        return str(d / name)

    return _Lazy(make)


@pytest.fixture(scope="module")
def exports(runs, tmp_path_factory):
    """Each run exported once with --format all (float32); name -> (export dir, report)."""
    from seqkit.export.writer import export_run

    d = tmp_path_factory.mktemp("s2s_exports")
    return _Lazy(lambda name: (str(d / name), export_run(runs[name], str(d / name), fmt="all",
                                                          parity_examples=16)))


@pytest.fixture(scope="module")
def loaded(runs):
    from seqkit.training.train import load_run

    return _Lazy(lambda name: load_run(runs[name]))


def _ids(prep, words):
    return prep.head.encode_sources(words)[0]


def _no_flex(ops):
    return not any(o.startswith("Flex") or o in ("CUSTOM", "DELEGATE") for o in ops)


@pytest.mark.parametrize("name", NAMES)
def test_export_all_passes_parity_with_builtin_ops(exports, name):
    from seqkit.export import embedded_metadata
    from seqkit.export.tflite import op_names

    out, report = exports[name]
    for kind in ("saved_model", "tflite"):
        assert report[kind]["max_abs_diff"] <= 1e-5, (kind, report[kind])
        assert report[kind]["argmax_agreement"] == 1.0 and report[kind]["positions"] > 0
        for how in ("greedy", "beam"):
            assert report[f"{kind}_decoding"][how]["identical"] == 1.0, report
    ops = op_names(os.path.join(out, "model.tflite"))  # read from the file, default delegates off
    assert _no_flex(ops) and {"FULLY_CONNECTED", "GATHER", "WHILE"} <= set(ops), ops  # WHILE: the encoder
    assert sorted(os.listdir(out)) == ["metadata.json", "model.tflite", "parity.json", "saved_model",
                                       "target_vocab.json", "vocab.json"]
    meta = json.load(open(os.path.join(out, "metadata.json")))
    assert [s["name"] for s in meta["state_layout"]] == STATES[name]
    assert meta["encoder"]["pinned_length"] == S_MAX and meta["input"]["shape"] == [1, S_MAX]
    assert meta["decoding"] == {"beam_width": BEAM, "n_best": 1, "length_penalty": ALPHA, "max_length": S_MAX}
    assert meta["target_vocab"] == json.load(open(os.path.join(out, "target_vocab.json")))
    assert meta["vocab"][:4] == ["", "[UNK]", "<s>", "</s>"] and "AE" in meta["target_vocab"]
    assert json.load(open(os.path.join(out, "parity.json"))) == json.loads(json.dumps(report))
    assert embedded_metadata.read(os.path.join(out, "model.tflite")) == meta


@pytest.mark.parametrize("name", NAMES)
def test_decode_step_streamed_equals_teacher_forced_keras(exports, loaded, name, tf):
    from seqkit.data.vocab import START_ID
    from seqkit.heads.seq2seq.archive import state_names
    from seqkit.heads.seq2seq.parity import SavedModelSeq2Seq
    from seqkit.heads.seq2seq.runtime import Seq2SeqModel

    out, _ = exports[name]
    prep, model = loaded[name]
    runners = {"tflite": Seq2SeqModel(out),  # from the files on disk, not the exporter's bytes
               "saved_model": SavedModelSeq2Seq(tf.saved_model.load(os.path.join(out, "saved_model")),
                                                state_names(model))}
    pairs = [("abba", ["AE", "B", "B", "AA"]), ("b", ["B", "AA", "AE"]), ("bbaabb", ["B"])]
    for word, target in pairs:
        src = _ids(prep, [word])[0]
        dec_in = [START_ID] + prep.head.target_vocab.encode(target)
        want = model([np.array([src], np.int32), np.array([dec_in], np.int32)]).numpy()[0]
        for kind, rt in runners.items():
            rt.start(src)
            got = np.stack([rt.step([t])[0] for t in dec_in])
            np.testing.assert_allclose(got, want, atol=1e-5, err_msg=f"{kind} {word}")


@pytest.mark.parametrize("name", NAMES)
def test_saved_model_generate_and_beam_search_equal_transduce(exports, loaded, name, tf):
    from seqkit.heads.seq2seq.head import transduce

    out, _ = exports[name]
    prep, model = loaded[name]
    sm = tf.saved_model.load(os.path.join(out, "saved_model"))
    ids = _ids(prep, SOURCES)
    src = np.zeros((len(ids), max(map(len, ids))), np.int32)
    for i, s in enumerate(ids):
        src[i, : len(s)] = s
    g = sm.signatures["generate"](source=tf.constant(src), max_length=tf.constant(S_MAX))
    b = sm.signatures["beam_search"](source=tf.constant(src), max_length=tf.constant(S_MAX))
    greedy = transduce(model, ids, beam_width=1, max_length=S_MAX, batch_size=len(ids))
    beam = transduce(model, ids, beam_width=BEAM, length_penalty=ALPHA, max_length=S_MAX, batch_size=len(ids))
    gt, gl, bt, bl = (g["tokens"].numpy(), g["lengths"].numpy(), b["tokens"].numpy(), b["lengths"].numpy())
    assert [gt[i, : gl[i]].tolist() for i in range(len(ids))] == [h[0][0] for h in greedy]
    assert [bt[i, 0, : bl[i, 0]].tolist() for i in range(len(ids))] == [h[0][0] for h in beam]
    np.testing.assert_allclose(b["scores"].numpy()[:, 0], [h[0][1] for h in beam], rtol=1e-6)
    assert len({tuple(h[0][0]) for h in beam}) > 1  # the outputs depend on the source


def test_beam_differs_from_greedy_somewhere(loaded):
    """Guards the decoding tests above: on these sources beam search is not greedy in disguise."""
    from seqkit.heads.seq2seq.head import transduce

    prep, model = loaded["bi-lstm-bahdanau"]
    ids = _ids(prep, SOURCES)
    greedy = transduce(model, ids, beam_width=1, max_length=S_MAX)
    beam = transduce(model, ids, beam_width=BEAM, length_penalty=ALPHA, max_length=S_MAX)
    assert any(g[0][0] != b[0][0] for g, b in zip(greedy, beam))


@pytest.mark.parametrize("name", NAMES)
def test_tflite_runtime_greedy_and_beam_equal_transduce(exports, loaded, name):
    from seqkit.heads.seq2seq.head import transduce
    from seqkit.heads.seq2seq.runtime import Seq2SeqModel

    out, _ = exports[name]
    prep, model = loaded[name]
    rt = Seq2SeqModel(out)
    ids = _ids(prep, SOURCES)
    greedy = transduce(model, ids, beam_width=1, max_length=S_MAX)
    beam = transduce(model, ids, beam_width=BEAM, n_best=BEAM, length_penalty=ALPHA, max_length=S_MAX)
    for s, g, b in zip(ids, greedy, beam):
        assert rt.greedy(s) == g[0][0]
        assert rt.beam_search(s, beam_width=1, length_penalty=0.0) == [(g[0][0], pytest.approx(g[0][1], rel=1e-5))]
        got = rt.beam_search(s, n_best=BEAM)  # width and penalty from metadata.json
        assert [h for h, _ in got] == [h for h, _ in b]
        np.testing.assert_allclose([sc for _, sc in got], [sc for _, sc in b], rtol=1e-5)


def test_padded_source_keeps_the_mask_in_the_pinned_encoder(exports, loaded):
    """The TFLite encoder reads [1, S_max]: a shorter source is padded with 0, and its outputs at
    the real positions and the decoder start states equal Keras's on the unpadded source (a
    bidirectional encoder that read the padding would start its backward pass elsewhere)."""
    from seqkit.heads.seq2seq.runtime import Seq2SeqModel

    out, _ = exports["bi-lstm-bahdanau"]
    prep, model = loaded["bi-lstm-bahdanau"]
    rt = Seq2SeqModel(out)
    enc = model.get_layer("encoder")
    for word in ("ab", "bbaab"):
        src = _ids(prep, [word])[0]
        got = rt.encode(src)
        want = [np.asarray(t) for t in enc(np.array([src], np.int32))]
        n = len(src)
        np.testing.assert_array_equal(got["memory_mask"][0], [1.0] * n + [0.0] * (S_MAX - n))
        np.testing.assert_allclose(got["memory"][0, :n], want[0][0], atol=1e-5)
        np.testing.assert_allclose(got["dec_0_h"], want[1], atol=1e-5)
        np.testing.assert_allclose(got["dec_0_c"], want[2], atol=1e-5)
        # the check can fail: the same positions read as real symbols ([UNK]) change what the
        # backward direction carries into the real positions
        unmasked = enc(np.array([src + [1] * (S_MAX - n)], np.int32))
        assert np.abs(np.asarray(unmasked[0])[0, :n] - want[0][0]).max() > 1e-3


def test_quantized_exports_agree_and_are_builtin(runs, exports, tmp_path):
    from seqkit.export.writer import export_run

    _, f32 = exports["bi-lstm-bahdanau"]  # the float32 model.tflite, exported once for the module
    for q in ("dynamic-range", "float16"):
        rep = export_run(runs["bi-lstm-bahdanau"], str(tmp_path / q), quantize=q, parity_examples=8)
        assert rep["tflite"]["argmax_agreement"] >= 0.99 and _no_flex(rep["tflite"]["ops"])
        assert rep["tflite"]["bytes"] < f32["tflite"]["bytes"], q
        assert "saved_model" not in rep and not (tmp_path / q / "saved_model").exists()
    assert "DEQUANTIZE" in rep["tflite"]["ops"]  # float16 weights are dequantized at load


def test_parity_failure_and_interruption_write_nothing(runs, tmp_path, monkeypatch):
    import seqkit.heads.seq2seq.parity as sp
    import seqkit.export.tflite as tfl
    from seqkit.errors import SeqkitError
    from seqkit.export.writer import export_run
    from seqkit.heads.seq2seq.runtime import Seq2SeqModel

    run = runs["simple_rnn-none"]
    real = sp.Seq2SeqParityCase.check_teacher_forced

    def off_by_one(self, runner):  # the TFLite model answers differently from Keras
        res = real(self, runner)
        return {**res, "max_abs_diff": res["max_abs_diff"] + 1.0} if isinstance(runner, Seq2SeqModel) else res

    monkeypatch.setattr(sp.Seq2SeqParityCase, "check_teacher_forced", off_by_one)
    with pytest.raises(SeqkitError, match=r"parity check failed for the TFLite encode \+ decode_step .*nothing was written"):
        export_run(run, str(tmp_path / "e"), fmt="all", parity_examples=4)
    assert os.listdir(tmp_path) == []
    monkeypatch.setattr(sp.Seq2SeqParityCase, "check_teacher_forced", real)

    def boom(*a, **kw):
        raise KeyboardInterrupt

    # interrupted in the conversion, with the pinned SavedModel staged for it; the --format all
    # failure above already had the SavedModel export staged and removed, so the TFLite-only export
    # is enough here (no second SavedModel export with its decoding graphs and checks)
    monkeypatch.setattr(tfl, "convert_signature", boom)
    with pytest.raises(KeyboardInterrupt):
        export_run(run, str(tmp_path / "e"), fmt="tflite", parity_examples=4)
    assert os.listdir(tmp_path) == []
    with pytest.raises(SeqkitError, match="--batch 2: a seq2seq export pins its encoder"):
        export_run(run, str(tmp_path / "e"), batch=2, parity_examples=4)


def test_cli_export_stream_equals_predict_and_inspect(runs, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main

    r = CliRunner()
    run, out = runs["bi-lstm-bahdanau"], str(tmp_path / "e")
    res = r.invoke(main, ["export", run, "--out", out, "--parity-examples", "4"])
    assert res.exit_code == 0, res.output
    assert "tflite: max |logit diff|" in res.output and "tflite decoding: identical to Keras" in res.output
    assert not os.path.exists(os.path.join(out, "saved_model"))
    words = "\n".join(SOURCES) + "\n"
    res = r.invoke(main, ["stream", out], input=words)
    assert res.exit_code == 0, res.output
    pred = r.invoke(main, ["predict", run], input=words)
    assert pred.exit_code == 0, pred.output
    want = [line.split("\t")[3] for line in pred.stdout.splitlines()]
    assert res.stdout.splitlines() == want and len(want) == len(SOURCES)
    lone = str(tmp_path / "g2p.tflite")  # the model alone: its metadata is embedded
    shutil.copy(os.path.join(out, "model.tflite"), lone)
    res = r.invoke(main, ["stream", lone], input=words)
    assert res.exit_code == 0 and res.stdout.splitlines() == want, res.output
    res = r.invoke(main, ["stream", out, "--greedy"], input=words)
    greedy = r.invoke(main, ["predict", run, "--beam-width", "1", "--length-penalty", "0"], input=words)
    assert res.stdout.splitlines() == [line.split("\t")[3] for line in greedy.stdout.splitlines()]
    assert res.stdout.splitlines() != want  # beam and greedy differ on these words
    res = r.invoke(main, ["stream", out], input="abababab\n")
    assert res.exit_code == 2 and "<stdin>:1: the input has 8 symbols" in res.output
    res = r.invoke(main, ["stream", out, "--prompt", "ab"])
    assert res.exit_code == 2 and "--prompt is for language-model exports" in res.output
    res = r.invoke(main, ["bench-step", out])
    assert res.exit_code == 2 and "an encoder-decoder export" in res.output
    res = r.invoke(main, ["inspect", out])
    assert res.exit_code == 0, res.output
    assert "signature 'encode'" in res.output and "signature 'decode_step'" in res.output
    assert f"encoder pinned to [1, {S_MAX}]" in res.output and "states dec_0_h dec_0_c" in res.output


def test_state_internal_is_refused_naming_what_is_supported(runs, tmp_path):
    from click.testing import CliRunner

    from seqkit.cli import main

    res = CliRunner().invoke(main, ["export", runs["simple_rnn-none"], "--out", str(tmp_path / "e"),
                                    "--state", "internal"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "supported for the step models of acceptor, language_model, tagger" in res.output
    assert "beam search, for one, reorders" in res.output
    assert os.listdir(tmp_path) == []
