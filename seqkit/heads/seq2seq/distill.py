"""Sequence-level knowledge distillation (Kim & Rush 2016, "Sequence-Level Knowledge
Distillation", section 3.2): an encoder-decoder trained on the beam outputs of trained runs
instead of the references.

``head.distill: {runs: [DIR, ...], beam_width: null}`` names the teacher runs (seq2seq runs with
the same source and target vocabularies, decoded together as ``seqkit evaluate --ensemble`` does:
one beam over their mean log-probabilities, :mod:`seqkit.heads.seq2seq.ensemble`). Every distinct
source of the training split gets ONE target, the teachers' best output (beam width
``beam_width``, default the recipe's ``decoding.beam_width``); a source's later records (its
alternative references) are dropped, the first keeps its place, so the split's order is kept.
Valid and test keep their references. The targets are written into the run directory
(:data:`DISTILLED`, ``source<TAB>symbols`` per line) and read back on resume and evaluation, so a
trained run never needs its teachers again; the file is read as untrusted (every training source
exactly once, bounded size).

TensorFlow is imported by the functions that load the teachers, not by this module.
"""

from __future__ import annotations

import os
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from seqkit import log
from seqkit.data.records import Record
from seqkit.errors import RunDirError, SeqkitError

#: the distilled training targets in a run directory
DISTILLED = "distilled_targets.tsv"
#: the largest such file read back (bytes)
MAX_BYTES = 256 * 1024 * 1024
#: sources handed to one beam-search call (results do not depend on it; memory does)
CHUNK = 2000


class DistillOptions(BaseModel):
    """``head.distill``: the teacher runs and their beam width."""

    model_config = ConfigDict(extra="forbid")
    #: teacher run directories (relative to the current directory, as ``--run-dir`` is)
    runs: list[str] = Field(min_length=1)
    #: beam width of the teachers' decoding [default: the recipe's decoding.beam_width]
    beam_width: Optional[int] = Field(None, gt=0)


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


def decode_teachers(options: DistillOptions, train: list, test: list, beam_width: int) -> dict:
    """``{source: [symbols]}``: the teachers' best output for every source of ``train``.

    Args:
        options: ``head.distill`` (run paths already absolute: the recipe loader reads them from
            the current directory).
        train, test: the student's training and test records.
        beam_width: the beam width of the teachers' decoding.

    Raises:
        SeqkitError: a teacher is not a seq2seq run, its vocabularies differ from the first
            teacher's, or it trained on a source of the student's test split (naming the run).
    """
    from seqkit.runs.run import Run

    test_sources = {r.text for r in test}
    models, head, first = [], None, None
    for path in options.runs:  # every teacher is there before any is loaded
        if not os.path.isdir(path):
            raise SeqkitError(f"head.distill.runs: {path}: no such run directory; name trained seq2seq "
                              f"runs (e.g. the RUN-seed<S> directories of seqkit train --seeds; relative "
                              f"paths are read from the current directory).")
    for path in options.runs:
        where = f"head.distill.runs: {path}"
        prep, model = Run(path)._load(with_data=True)
        if prep.recipe.head.type != "seq2seq":
            raise SeqkitError(f"{where}: a run of the '{prep.recipe.head.type}' head; a teacher must "
                              f"be an encoder-decoder (seq2seq) run.")
        if first is None:
            first, head = path, prep.head
        elif prep.head.vocabularies() != head.vocabularies():
            raise SeqkitError(f"{where}: its vocabularies differ from {first}'s, so the teachers "
                              f"cannot be decoded together; name runs of one recipe and data.")
        leaked = sorted({r.text for r in prep.splits.get("train") or []} & test_sources)
        if leaked:
            raise SeqkitError(f"{where}: it trained on {len(leaked)} source(s) of this recipe's test "
                              f"split ({', '.join(leaked[:5])}{' ...' if len(leaked) > 5 else ''}), so "
                              f"its outputs would carry the test references into training. Use "
                              f"teachers whose test split is this recipe's (the same data section).")
        models.append(model)
    from seqkit.progress import progress

    sources = sorted({r.text for r in train}, key=lambda s: (len(s), s))
    log.info(f"head.distill: decoding {len(sources)} training sources with {len(models)} teacher "
             f"run(s), beam {beam_width}")
    out = {}
    with progress(len(sources), "head.distill: the teachers decoding", "training sources") as bar:
        for i in range(0, len(sources), CHUNK):  # one bar over the chunks (theirs stay silent)
            chunk = sources[i:i + CHUNK]
            hyps = head.decode_texts(models, chunk, beam_width=beam_width)
            out.update({s: list(h[0][0]) for s, h in zip(chunk, hyps)})
            bar.update(len(chunk))
    return out


def write_targets(run_dir: str, train: list) -> None:
    """Write the distilled training records' targets as :data:`DISTILLED` (staged, renamed)."""
    from seqkit.runs.rundir import atomic_write_text

    atomic_write_text(os.path.join(run_dir, DISTILLED),
                      "".join(f"{r.text}\t{' '.join(r.target)}\n" for r in train))


def read_targets(run_dir: str, train: list) -> dict:
    """``{source: [symbols]}`` from a run's :data:`DISTILLED`, checked against ``train``.

    Raises:
        RunDirError: the file is missing, too large, not UTF-8, a line is malformed, or it does
            not hold every training source exactly once.
    """
    path = os.path.join(run_dir, DISTILLED)
    fix = "the run was trained with head.distill and this file is its own; train it again."
    if not os.path.isfile(path):
        raise RunDirError(f"{path}: missing; {fix}")
    if os.path.getsize(path) > MAX_BYTES:
        raise RunDirError(f"{path}: over {MAX_BYTES // 2**20} MiB; {fix}")
    try:
        text = open(path, encoding="utf-8").read()
    except UnicodeDecodeError:
        raise RunDirError(f"{path}: not UTF-8 text; {fix}") from None
    out = {}
    for n, line in enumerate(text.splitlines(), start=1):
        source, tab, symbols = line.partition("\t")
        if not tab or not symbols.split() or source in out:
            raise RunDirError(f"{path}:{n}: expected 'source<TAB>symbols' with a new source; {fix}")
        out[source] = symbols.split()
    sources = {r.text for r in train}
    missing = sources - set(out)
    if missing or len(out) != len(sources):
        raise RunDirError(f"{path}: holds {len(out)} sources for {len(sources)} training sources "
                          f"({len(missing)} missing); {fix}")
    return out
