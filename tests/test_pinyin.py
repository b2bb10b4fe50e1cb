"""The pinyin_phrases source (pypinyin's phrase dictionary): tone numbers, records of known
phrases, the seeded split by phrase; the per-character baseline worked by hand; and a tiny
phrase -> pinyin model that reads a polyphone from its context, which the baseline cannot."""

import json
import types

import pytest

#: a small phrase dictionary in pypinyin's format: 行 is xing2 in three phrases, hang2 in two
PHRASES = {"行走": [["xíng"], ["zǒu"]], "行人": [["xíng"], ["rén"]], "银行": [["yín"], ["háng"]],
           "人行": [["rén"], ["xíng"]], "行列": [["háng"], ["liè"]], "走人": [["zǒu"], ["rén"]],
           "朝阳": [["zhāo", "cháo"], ["yáng"]], "一点儿": [["yì"], ["diǎn"], ["er"]]}


def _recipe(tmp_path, entries, **data):
    from seqkit.recipe import recipe_from_dict
    from tests.conftest import make_recipe

    (tmp_path / "p.json").write_text(json.dumps(entries, ensure_ascii=False), encoding="utf-8")
    return recipe_from_dict(make_recipe(
        data={"source": "pinyin_phrases", "path": str(tmp_path / "p.json"), "limit": None,
              "max_length": 12, **data}, head={"type": "seq2seq"}))


def _load(recipe):
    from seqkit.registry import DATA

    return DATA.get("pinyin_phrases")(recipe.data_options, recipe).load()["all"]


@pytest.mark.parametrize("marked, numbered", [
    ("zhòng", "zhong4"), ("qīng", "qing1"), ("hái", "hai2"), ("lǜ", "lv4"), ("Lǚ", "Lv3"),
    ("nü", "nv5"), ("de", "de5"), ("ňg", "ng3"), ("ḿ", "m2"), ("m\u0300", "m4")])
def test_tone_marks_become_numbers_neutral_tone_5_and_u_umlaut_v(marked, numbered):
    from seqkit.data.pinyin import tone3

    assert tone3(marked) == numbered


def test_package_phrases_read_in_context_and_match_pypinyins_own_tone3():
    """The shipped dictionary: polyphones by context, tone sandhi, the neutral tone, the two
    phrases with alternative readings; every syllable equals pypinyin's own TONE3 conversion."""
    pytest.importorskip("pypinyin", reason="pip install 'seqkit[examples]'")
    from pypinyin.contrib.tone_convert import to_tone3

    from seqkit.data.pinyin import PinyinOptions, PinyinPhrases, tone3

    source = PinyinPhrases(PinyinOptions())
    recs = source.load()["all"]
    by = {}
    for x in recs:
        by.setdefault(x.text, []).append(x.target)
    assert by["重庆"] == [["chong2", "qing4"]]
    assert by["银行"] == [["yin2", "hang2"]] and by["行走"] == [["xing2", "zou3"]]
    assert by["一不小心"] == [["yi2", "bu4", "xiao3", "xin1"]]  # 一 before a 4th tone: yi2
    assert by["一丁点儿"] == [["yi1", "ding1", "dian3", "er5"]]  # neutral tone: 5
    assert by["朝阳"] == [["zhao1", "yang2"], ["chao2", "yang2"]]
    assert all(len(x.target) == len(x.text) and x.group == x.text for x in recs)
    with open(source.path(), encoding="utf-8") as f:
        marked = {s for v in json.load(f).values() for alts in v for s in alts}
    assert all(tone3(s) == to_tone3(s, neutral_tone_with_five=True) for s in marked)


def test_seeded_split_by_phrase_is_deterministic_without_overlap(tmp_path):
    from seqkit.data.split import assemble_splits

    entries = {**PHRASES, **{f"字{chr(0x4e00 + i)}": [["zì"], ["yī"]] for i in range(40)}}
    r = _recipe(tmp_path, entries)
    recs = _load(r)
    assert len(recs) == len(entries) + 1  # 朝阳's two readings
    a = assemble_splits({"all": recs}, 0.1, 0.2, shuffle=True, seed=5)
    b = assemble_splits({"all": _load(r)}, 0.1, 0.2, shuffle=True, seed=5)
    assert {k: [(x.text, x.target) for x in v] for k, v in a.items()} == \
        {k: [(x.text, x.target) for x in v] for k, v in b.items()}
    texts = {k: {x.text for x in v} for k, v in a.items()}
    assert [len(texts[k]) for k in ("train", "valid", "test")] == [33, 5, 10]  # 48 phrases: 4.8 and 9.6 round to 5 and 10
    assert not (texts["train"] & texts["valid"] or texts["train"] & texts["test"]
                or texts["valid"] & texts["test"])
    assert sum(x.text == "朝阳" for v in a.values() for x in v) == 2
    # a seeded sample of phrases and a length cap
    assert len({x.text for x in _load(_recipe(tmp_path, entries, phrases=7))}) == 7
    assert {x.text for x in _load(_recipe(tmp_path, PHRASES, max_chars=2))} == set(PHRASES) - {"一点儿"}


def test_a_phrase_with_a_wrong_number_of_readings_is_named(tmp_path):
    from seqkit.errors import DataError

    with pytest.raises(DataError, match=r"p\.json: 行走: a phrase needs one non-empty list of readings"):
        _load(_recipe(tmp_path, {"行走": [["xíng"]]}))


def test_most_frequent_syllable_per_character_baseline_by_hand(tmp_path):
    """Train: 行 xing2 x3, hang2 x2 -> xing2, also the commonest syllable overall. Test: 银行
    (baseline xing2 xing2: 银 is unseen, 2 edits) and 人行 (right). WER = 1/2 phrases wrong;
    PER = 2 edits / 4 reference syllables."""
    from seqkit.metrics.baselines import MostFrequentTargetPerSymbol
    from seqkit.heads.seq2seq.head import Seq2SeqHead

    recs = {x.text: x for x in _load(_recipe(tmp_path, PHRASES))}
    train = [recs[k] for k in ("行走", "行人", "行列", "走人", "一点儿")] + [
        types.SimpleNamespace(text="行", target=["xing2"]), types.SimpleNamespace(text="行", target=["hang2"])]
    base = MostFrequentTargetPerSymbol((list(x.text), x.target) for x in train)
    assert base(list("银行人")) == ["xing2", "xing2", "ren2"]  # 银 unseen: the commonest syllable
    head = Seq2SeqHead(_recipe(tmp_path, PHRASES))
    prep = types.SimpleNamespace(splits={"train": train, "valid": [],
                                         "test": [recs["银行"], recs["人行"]]})
    assert head.baselines(prep) == {"most-frequent-target-per-source-symbol": {
        "test": {"wer": 0.5, "per": 0.5}}}
    # unaligned data (G2P): no baseline
    prep.splits["train"] = [types.SimpleNamespace(text="ab", target=["AE"])]
    assert head.baselines(prep) == {}


def test_tiny_model_reads_a_polyphone_from_context_the_baseline_cannot(tmp_path, keras):
    """Trained on the eight phrases, the model transduces each back (n-best: scores falling),
    including 银行 and 行列 (行 = hang2), which the most-frequent-syllable baseline reads xing2."""
    import seqkit
    from seqkit.metrics.baselines import MostFrequentTargetPerSymbol

    r = _recipe(tmp_path, PHRASES)
    raw = {"name": "tiny-pinyin", "seed": 3,
           "data": {"source": "pinyin_phrases", "path": str(tmp_path / "p.json"), "max_length": 6,
                    "split": {"valid": 0.0, "test": 0.0}},
           "model": {"units": 24, "embedding_dim": 16, "bidirectional": True},
           "head": {"type": "seq2seq", "attention": "bahdanau", "decoder_units": 32},
           "training": {"epochs": 20, "batch_size": 9, "learning_rate": 0.03, "early_stopping": None},
           "decoding": {"beam_width": 3, "max_length": 6}}
    run = seqkit.train(raw, str(tmp_path / "run"))
    recs = _load(r)
    out = run.transduce([p for p in PHRASES], n_best=2)
    best = {o["input"]: o["hypotheses"][0]["output"] for o in out}
    for x in recs:
        if x.text != "朝阳":
            assert best[x.text] == x.target, (x.text, best[x.text])
    assert best["朝阳"] in ([["zhao1", "yang2"], ["chao2", "yang2"]])
    assert all(o["hypotheses"][0]["score"] >= o["hypotheses"][1]["score"] for o in out)
    base = MostFrequentTargetPerSymbol((list(x.text), x.target) for x in recs)
    assert base(list("银行")) == ["yin2", "xing2"] and base(list("行列")) == ["xing2", "lie4"]


def test_evaluate_pairs_the_model_with_the_lookup_baseline(tmp_path):
    """check_splits fits the lookup on the training split; paired_test counts, per test phrase,
    who is right. Training syllables xing2, zou3, ren2 twice each: the commonest overall is the
    first seen, xing2. 银行 -> model right (yin2 hang2), baseline wrong (银 unseen: xing2 xing2);
    人行 -> both right; 行人 -> model wrong (hang2 ren2), baseline right (xing2 ren2). b = 1,
    c = 1: exact McNemar p = min(1, 2 * (1 + 2) / 4) = 1."""
    from seqkit.heads.seq2seq.head import Seq2SeqHead, references

    recs = {x.text: x for x in _load(_recipe(tmp_path, PHRASES))}
    head = Seq2SeqHead(_recipe(tmp_path, PHRASES))
    head.check_splits({"train": [recs[k] for k in ("行走", "人行", "走人", "一点儿")],
                       "test": []})
    refs = references([recs["银行"], recs["人行"], recs["行人"]])
    hyps = [["yin2", "hang2"], ["ren2", "xing2"], ["hang2", "ren2"]]
    assert head.lookup(list("银行")) == ["xing2", "xing2"]
    assert head.paired_test(refs, hyps) == {"baseline": "most-frequent-target-per-source-symbol",
                                            "model_only": 1, "baseline_only": 1, "p_value": 1.0}
    head.check_splits({"train": [types.SimpleNamespace(text="ab", target=["AE"])]})
    assert head.lookup is None  # unaligned (G2P): no baseline, no paired test


def test_prepare_and_baselines_fit_the_lookup_once(tmp_path, monkeypatch):
    """The lookup baseline fitted by check_splits (prepare) is the one baselines() scores: one fit
    per training split, not two. Test 银行 -> lookup xing2 xing2 (银 unseen: the commonest syllable,
    xing2; 行 -> xing2), both syllables wrong; 行人 -> xing2 ren2, right: PER 2/4, WER 1/2."""
    from seqkit.heads.seq2seq.head import LOOKUP_BASELINE, Seq2SeqHead

    recs = {x.text: x for x in _load(_recipe(tmp_path, PHRASES))}
    head = Seq2SeqHead(_recipe(tmp_path, PHRASES))
    fits = []
    fit = Seq2SeqHead.fit_lookup
    monkeypatch.setattr(Seq2SeqHead, "fit_lookup", lambda self, train: fits.append(1) or fit(self, train))
    splits = {"train": [recs[k] for k in ("行走", "人行", "走人", "一点儿")], "valid": [],
              "test": [recs["银行"], recs["行人"]]}
    head.check_splits(splits)
    out = head.baselines(types.SimpleNamespace(splits=splits))
    assert len(fits) == 1
    assert out == {LOOKUP_BASELINE: {"test": {"wer": 0.5, "per": 0.5}}}
