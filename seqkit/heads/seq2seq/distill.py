"""Sequence-level knowledge distillation (Kim & Rush 2016, "Sequence-Level Knowledge
Distillation", section 3.2): an encoder-decoder trained on the beam outputs of trained runs
instead of the references.

``head.distill: {runs: [DIR, ...], beam_width: null}`` names the teacher runs (seq2seq runs with
the same source and target vocabularies, decoded together as ``seqkit evaluate --ensemble`` does:
one beam over their mean log-probabilities, :mod:`seqkit.heads.seq2seq.ensemble`; the length
penalty and maximum output length are the first teacher's ``decoding``). Every distinct source of
the training split gets ONE target, the teachers' best output (beam width ``beam_width``, default
the recipe's ``decoding.beam_width``); a source's later records (its alternative references) are
dropped, the first keeps its place, so the split's order is kept. A source whose best output is
empty keeps its first reference. Valid and test keep their references. The targets are written
into the run directory (:data:`DISTILLED`, one JSON object ``{"source": str, "target": [str, ...]}``
per line) and read back on resume and evaluation, so a trained run never needs its teachers again;
the file is read as untrusted (bounded size, every training source exactly once, every symbol in
the run's target vocabulary).

TensorFlow is imported by the functions that load the teachers, not by this module.
"""

from __future__ import annotations

import json
import os
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from seqkit import log
from seqkit.data.records import Record
from seqkit.errors import RunDirError, SeqkitError

#: the distilled training targets in a run directory
DISTILLED = "distilled_targets.jsonl"
#: the largest such file read back (bytes)
MAX_BYTES = 256 * 1024 * 1024
#: sources handed to one beam-search call (results do not depend on it; memory does)
CHUNK = 2000
#: the teachers' outputs decoded in this process for the last teacher set and beam width, so the
#: seeds of one ``seqkit train --seeds N`` command decode each source once (their training splits
#: overlap); another teacher set replaces them
_DECODED: dict = {}


class DistillOptions(BaseModel):
    """``head.distill``: the teacher runs and their beam width."""

    model_config = ConfigDict(extra="forbid")
    #: teacher run directories (relative to the current directory, as ``--run-dir`` is)
    runs: list[str] = Field(min_length=1)
    #: beam width of the teachers' decoding [default: the recipe's decoding.beam_width]
    beam_width: Optional[int] = Field(None, gt=0)

    @field_validator("runs")
    @classmethod
    def _distinct(cls, runs: list) -> list:
        twice = sorted({r for r in runs if runs.count(r) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} named more than once; each teacher is named once "
                             f"(a run named twice would weigh twice in the mean).")
        return runs


def first_per_source(train: list, targets: dict) -> list:
    """The training records with distilled targets: each source's first record, its target
    ``targets[source]``; later records of the same source dropped; order kept.

    Args:
        train: :class:`~seqkit.data.records.Record` list (``text`` = source, ``target`` symbols).
        targets: ``{source: [symbols]}`` for every source of ``train``.
    """
    seen, out = set(), []
    for r in train:
        if r.text in seen:
            continue
        seen.add(r.text)
        out.append(Record(text=r.text, target=list(targets[r.text]), group=r.group, where=r.where))
    return out


def _load_teacher(path: str):
    """``(prepared, model)`` of one teacher run, its errors naming it as a teacher."""
    from seqkit.runs.run import Run

    try:
        return Run(path)._load(with_data=True)
    except SeqkitError as e:
        raise type(e)(f"head.distill.runs: {path}: this teacher could not be loaded: {e}") from None


def _stamp(run: str) -> tuple:
    """What identifies a teacher's weights now: its model file's size and modification time."""
    try:
        st = os.stat(os.path.join(run, "model.keras"))
    except OSError:
        return ()
    return st.st_size, st.st_mtime_ns


#: the share of the training sources' symbols a teacher may read as [UNK] before it is refused
MAX_UNKNOWN = 0.01


def _check_symbols(where: str, head, sources: set, taught: set) -> None:
    """Refuse a teacher that never saw over :data:`MAX_UNKNOWN` of the training sources' symbols
    in its own training sources (its data was read otherwise: another source, tokenizer or
    casing), so reads them as ``[UNK]``; warn below. Symbols its vocabulary left out on purpose
    (``data.min_count``, ``data.max_vocab``) are in its training sources and not counted. Symbols
    are split by the teacher's own head, as its decoding splits them."""
    from collections import Counter

    counts = Counter(tok for s in sources for tok in head.source_tokens(s))
    known = set(head.vocab.tokens) | {tok for s in taught for tok in head.source_tokens(s)}
    unknown = {t: n for t, n in counts.items() if t not in known}
    total, unk = sum(counts.values()), sum(unknown.values())
    if not unk:
        return
    shown = ", ".join(repr(t) for t, _ in sorted(unknown.items(), key=lambda kv: -kv[1])[:5])
    what = (f"{unk} of the {total} symbols of this recipe's training sources ({shown}) never occur "
            f"in the teacher's training sources, so it reads them as [UNK]")
    if unk > MAX_UNKNOWN * total:
        raise SeqkitError(f"{where}: {what}: its data was read otherwise than this recipe's (another "
                          f"source, tokenizer or casing); name teachers trained on this recipe's data.")
    log.warn(f"{where}: {what} (rare symbols its training split lacked).")


def decode_teachers(options: DistillOptions, splits: dict, beam_width: int) -> dict:
    """``{source: [symbols]}``: the teachers' best output for every source of the training split
    (a source whose best output is empty: its first reference). Sources these teachers decoded
    earlier in this process (another seed of ``--seeds``) are not decoded again.

    Args:
        options: ``head.distill`` (run paths already absolute: the recipe loader reads them from
            the current directory).
        splits: the student's ``{"train", "valid", "test"}`` record lists.
        beam_width: the beam width of the teachers' decoding.

    Raises:
        SeqkitError: a teacher is missing, cannot be loaded, is not a seq2seq run, would read
            over :data:`MAX_UNKNOWN` of the training sources' symbols as ``[UNK]`` (symbols its own
            training sources lack), its
            vocabularies differ from the first teacher's, or it trained on a source of the
            student's test split (naming the run).
    """
    train, test = splits.get("train") or [], splits.get("test") or []
    valid_sources = {r.text for r in splits.get("valid") or []}
    test_sources = {r.text for r in test}
    for path in options.runs:  # every teacher is there before any is loaded
        if not os.path.isdir(path):
            raise SeqkitError(f"head.distill.runs: {path}: no such run directory; name trained seq2seq "
                              f"runs (e.g. the RUN-seed<S> directories of seqkit train --seeds; relative "
                              f"paths are read from the current directory).")
    models, head, first, seen_valid = [], None, None, set()
    for path in options.runs:
        where = f"head.distill.runs: {path}"
        prep, model = _load_teacher(path)
        if prep.recipe.head.type != "seq2seq":
            raise SeqkitError(f"{where}: a run of the '{prep.recipe.head.type}' head; a teacher must "
                              f"be an encoder-decoder (seq2seq) run.")
        taught = {r.text for r in prep.splits.get("train") or []}
        if first is None:
            first, head = path, prep.head
            _check_symbols(where, head, {r.text for r in train}, taught)
        elif prep.head.vocabularies() != head.vocabularies():
            raise SeqkitError(f"{where}: its vocabularies differ from {first}'s, so the teachers "
                              f"cannot be decoded together; name runs of one recipe and data.")
        leaked = sorted(taught & test_sources)
        if leaked:
            raise SeqkitError(f"{where}: it trained on {len(leaked)} source(s) of this recipe's test "
                              f"split ({', '.join(leaked[:5])}{' ...' if len(leaked) > 5 else ''}), so "
                              f"its outputs would carry the test references into training. Use "
                              f"teachers whose test split is this recipe's (the same data section).")
        seen_valid |= taught & valid_sources
        models.append(model)
    if seen_valid:
        log.warn(f"head.distill: the teachers trained on {len(seen_valid)} of this run's "
                 f"{len(valid_sources)} valid sources (seeds that drew other valid words), so the "
                 f"valid figures are not independent of the teachers and read optimistic; the test "
                 f"split's are (no teacher trained on it). One data.split.seed in the teachers' "
                 f"and this recipe gives them all one valid split.")
    from seqkit.progress import progress

    key = (tuple((p, _stamp(p)) for p in options.runs), beam_width)
    for other in [k for k in _DECODED if k != key]:  # one teacher set kept (~30 MB for 112k words)
        del _DECODED[other]
    done = _DECODED.setdefault(key, {})
    wanted = {r.text for r in train}
    sources = sorted(wanted - set(done), key=lambda s: (len(s), s))
    log.info(f"head.distill: decoding {len(sources)} training sources with {len(models)} teacher "
             f"run(s), beam {beam_width}" + (f" ({len(wanted) - len(sources)} decoded earlier in this "
                                             f"command)" if len(sources) < len(wanted) else ""))
    with progress(len(sources), "head.distill: the teachers decoding", "training sources") as bar:
        for i in range(0, len(sources), CHUNK):  # one bar over the chunks (theirs stay silent)
            chunk = sources[i:i + CHUNK]
            hyps = head.decode_texts(models, chunk, beam_width=beam_width)
            done.update({s: list(h[0][0]) for s, h in zip(chunk, hyps)})
            bar.update(len(chunk))
    out = {s: list(done[s]) for s in wanted}
    empty = {s for s, t in out.items() if not t}
    if empty:
        firsts = {}
        for r in train:
            firsts.setdefault(r.text, list(r.target))
        out.update({s: firsts[s] for s in empty})
        log.warn(f"head.distill: the teachers' best output was empty for {len(empty)} training "
                 f"source(s); they keep their first reference.")
    return out


def write_targets(run_dir: str, train: list) -> None:
    """Write the distilled training records' targets as :data:`DISTILLED` (staged, renamed)."""
    from seqkit.runs.rundir import atomic_write_text

    atomic_write_text(os.path.join(run_dir, DISTILLED), "".join(
        json.dumps({"source": r.text, "target": list(r.target)}, ensure_ascii=False) + "\n" for r in train))


def read_targets(run_dir: str, train: list, symbols: Optional[set] = None) -> dict:
    """``{source: [symbols]}`` from a run's :data:`DISTILLED`, checked against ``train``.

    Args:
        run_dir: the run directory.
        train: the training split's records (as read from the data now).
        symbols: the run's target vocabulary; a symbol outside it is refused (None: not checked).

    Raises:
        RunDirError: the file is missing, too large, not UTF-8, a line is not a JSON object with
            a string ``source`` and a non-empty list of known symbols as ``target``, a source comes
            twice, or it does not hold every training source exactly once (the data changed).
    """
    path = os.path.join(run_dir, DISTILLED)
    fix = "the run was trained with head.distill and this file is its own; train it again."
    if not os.path.isfile(path):
        raise RunDirError(f"{path}: missing; {fix}")
    if os.path.getsize(path) > MAX_BYTES:
        raise RunDirError(f"{path}: over {MAX_BYTES // 2**20} MiB; {fix}")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise RunDirError(f"{path}: not UTF-8 text; {fix}") from None
    out = {}
    for n, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            obj = None
        ok = isinstance(obj, dict) and set(obj) == {"source", "target"} and isinstance(obj["source"], str) \
            and isinstance(obj["target"], list) and obj["target"] \
            and all(isinstance(s, str) and s for s in obj["target"])
        if not ok or obj["source"] in out:
            raise RunDirError(f'{path}:{n}: expected {{"source": str, "target": [symbols]}} with a new '
                              f"source and a non-empty target; {fix}")
        unknown = sorted(set(obj["target"]) - symbols) if symbols is not None else []
        if unknown:
            raise RunDirError(f"{path}:{n}: target symbol(s) {', '.join(map(repr, unknown[:5]))} are not "
                              f"in the run's target vocabulary; {fix}")
        out[obj["source"]] = obj["target"]
    sources = {r.text for r in train}
    missing = sources - set(out)
    if missing or len(out) != len(sources):
        raise RunDirError(f"{path}: holds {len(out)} sources for {len(sources)} training sources "
                          f"({len(missing)} missing): the data the recipe reads changed since the run "
                          f"was trained (its training split must be the same); {fix}")
    return out
