"""Seeded train / valid / test splits of a list of examples."""

from __future__ import annotations

import numpy as np

from seqkit import log
from seqkit.errors import DataError


def split_examples(examples: list, valid: float, test: float, *, shuffle: bool, seed: int) -> dict:
    """Divide examples into ``{"train": [...], "valid": [...], "test": [...]}``.

    Args:
        examples: the examples, in source order.
        valid, test: fractions in ``[0, 1)``; ``train`` gets the rest.
        shuffle: permute with ``seed`` first; otherwise contiguous blocks
            (train, then valid, then test), which keeps related lines together.
        seed: the permutation seed.

    Records with a ``group`` (:class:`~seqkit.data.records.Record`) are divided
    group by group: the fractions then count groups, and every record of a group
    lands in the same split (e.g. CMUdict's ``word`` and ``word(2)``).

    Raises:
        DataError: the fractions leave no training example, or a non-zero
            fraction rounds to an empty split.
    """
    groups = [getattr(x, "group", None) for x in examples]
    if any(g is not None for g in groups):
        return _split_groups(examples, groups, valid, test, shuffle=shuffle, seed=seed)
    n = len(examples)
    if valid + test >= 1.0:
        raise DataError(f"data.split: valid ({valid}) + test ({test}) must be below 1.")
    order = np.random.default_rng(seed).permutation(n) if shuffle else np.arange(n)
    n_test = int(round(n * test))
    n_valid = int(round(n * valid))
    n_train = n - n_test - n_valid
    for name, frac, k in (("valid", valid, n_valid), ("test", test, n_test)):
        if frac > 0 and k == 0:
            raise DataError(f"data.split.{name}: {frac} of {n} examples is none; use more data or "
                            f"a larger fraction.")
    if n_train <= 0:
        raise DataError(f"data.split: no training examples left from {n}.")
    pick = lambda idx: [examples[i] for i in idx]  # noqa: E731
    return {"train": pick(order[:n_train]), "valid": pick(order[n_train:n_train + n_valid]),
            "test": pick(order[n_train + n_valid:])}


def assemble_splits(loaded: dict, valid: float, test: float, *, shuffle: bool | None, seed: int,
                    limit: int | None = None, classes: bool = True) -> dict:
    """Turn a data source's :meth:`~seqkit.data.base.DataSource.load` result into three splits.

    Args:
        loaded: ``{"all": [...]}`` or ``{"train": [...], "valid"?: [...], "test"?: [...]}``.
        valid, test: fractions (``data.split``); used to divide ``all``, or to carve a
            split the files do not give from ``train`` (a given split is kept as it is).
        shuffle, seed: as for :func:`split_examples`; ``shuffle=None`` (``data.split.shuffle``'s
            default) is :func:`default_shuffle` of ``loaded``.
        limit: keep at most this many examples of each list first (``data.limit``).
        classes: the records' ``label`` names a class (the head's
            :attr:`~seqkit.heads.base.Head.label_classes`): warn of classes missing from a split
            (:func:`missing_classes`).

    Returns:
        ``{"train": [...], "valid": [...], "test": [...]}``.

    Raises:
        DataError: as :func:`split_examples`, or the source gave splits without ``train``.
    """
    if shuffle is None:
        shuffle = default_shuffle(loaded)
    splits = _assemble(loaded, valid, test, shuffle=shuffle, seed=seed, limit=limit)
    if classes:
        missing_classes(splits, shuffle=shuffle)
    return splits


def default_shuffle(loaded: dict) -> bool:
    """``data.split.shuffle``'s default for a source's examples: ``True`` when they carry a class
    label (:attr:`~seqkit.data.records.Record.label`, the acceptor's target), since a file sorted by
    label split into contiguous blocks leaves whole classes out of valid and test; ``False``
    otherwise (text, tags, targets, series), where contiguous blocks keep related lines together.

    Args:
        loaded: a data source's ``load()`` result, ``{split name: [Record]}``.

    Returns:
        Whether to shuffle before splitting.
    """
    return any(getattr(r, "label", None) is not None for recs in loaded.values() for r in recs)


def missing_classes(splits: dict, *, shuffle: bool = False) -> dict:
    """Warn (one line a split) when valid or test lacks a class that train has: its figures then
    say nothing of that class (typically a label-sorted file read with ``split.shuffle: false``).

    Args:
        splits: ``{"train": [...], "valid": [...], "test": [...]}`` of records; only records with a
            ``label`` (acceptor data) are looked at.
        shuffle: the recipe's ``data.split.shuffle`` (the warning's advice depends on it).

    Returns:
        ``{split: sorted missing labels}`` for the splits that lack some (empty when none do).
    """
    def labels(recs):
        return {str(r.label) for r in recs if getattr(r, "label", None) is not None}

    train = labels(splits.get("train", []))
    out = {}
    for name in ("valid", "test"):
        recs = splits.get(name) or []
        if not recs or not train:
            continue
        gone = sorted(train - labels(recs))
        if gone:
            out[name] = gone

            shown = ", ".join(repr(g) for g in gone[:10]) + (f" and {len(gone) - 10} more" if len(gone) > 10 else "")
            advice = ("set data.split.shuffle: true (a file sorted by label puts whole classes in one split)"
                      if not shuffle else "use more data, a larger data.split." + name + ", or give a " + name + "_path")
            log.warn(f"data.split: the {name} split has no example of {len(gone)} of the {len(train)} "
                     f"classes in train ({shown}); its figures say nothing of them. Fix: {advice}.")
    return out


def _assemble(loaded: dict, valid: float, test: float, *, shuffle: bool, seed: int,
              limit: int | None = None) -> dict:
    cut = (lambda xs: xs[:limit]) if limit else (lambda xs: xs)  # noqa: E731
    if "all" in loaded:
        return split_examples(cut(loaded["all"]), valid, test, shuffle=shuffle, seed=seed)
    if "train" not in loaded:
        raise DataError(f"data: the source gave the splits {sorted(loaded)} but no train split; "
                        f"give data.train_path.")
    need_valid = valid if "valid" not in loaded else 0.0
    need_test = test if "test" not in loaded else 0.0
    carved = split_examples(cut(loaded["train"]), need_valid, need_test, shuffle=shuffle, seed=seed)
    return {"train": carved["train"],
            "valid": cut(loaded["valid"]) if "valid" in loaded else carved["valid"],
            "test": cut(loaded["test"]) if "test" in loaded else carved["test"]}


def _split_groups(examples: list, groups: list, valid: float, test: float, *, shuffle: bool,
                  seed: int) -> dict:
    """:func:`split_examples` over groups (first-appearance order; a record without a group
    is a group of its own), expanded back to records in source order."""
    keys, index = [], {}
    for i, g in enumerate(groups):
        k = ("group", g) if g is not None else ("record", i)
        if k not in index:
            index[k] = len(keys)
            keys.append(k)
    parts = split_examples(list(range(len(keys))), valid, test, shuffle=shuffle, seed=seed)
    where = {gi: name for name, gis in parts.items() for gi in gis}
    out = {"train": [], "valid": [], "test": []}
    for i, g in enumerate(groups):
        k = ("group", g) if g is not None else ("record", i)
        out[where[index[k]]].append(examples[i])
    return out
