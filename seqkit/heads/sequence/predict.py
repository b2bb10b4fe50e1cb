"""What ``Run.predict`` and ``seqkit predict`` compute: raw input -> records -> labels or tags (printed
as text or JSON lines by :mod:`seqkit.cli.decode`).

Input formats (``--input-format``; ``auto`` picks ``ts`` for a frames run or a file named
``*.ts``, ``conll`` for a file named ``*.conll`` / ``*.conllu`` / ``*.iob`` / ``*.bio``, ``table``
for a file named ``*.csv`` / ``*.tsv`` / ``*.tab`` / ``*.jsonl`` / ``*.ndjson``, and ``text``
otherwise):

* ``text``: one sequence per non-empty line (empty lines are skipped, with a warning that counts
  them), tokenized as in training
  (``data.tokenizer`` for sources that tokenize raw text, e.g. TSV; white space
  for pre-tokenized corpora such as CoNLL or ``word/TAG``);
* ``conll``: one token per line (first column), blank lines between sequences;
* ``ts``: a ``.ts`` file, labelled or not;
* ``table``: a CSV / TSV / JSON lines table like the training table: its input column (the run's
  ``data.text_column`` -- ``data.tokens_column`` for a tagger -- or the column ``text`` /
  ``tokens`` where the run was not trained from a table), read with the run's ``data.delimiter``,
  ``data.header`` and ``data.quotes``; other columns (ids, labels) are ignored.

The run's saved vocabulary / normaliser / label list are applied; inputs longer
than the run's ``data.max_length`` follow its ``head.too_long``.
"""

from __future__ import annotations

import numpy as np

from seqkit import log
from seqkit.data.base import text_tokenizer
from seqkit.data.conll import parse_conll
from seqkit.data.lines import split_lines
from seqkit.data.records import Record
from seqkit.data.table import is_table_input
from seqkit.data.ts_file import parse_ts
from seqkit.data.vocab import tokenize
from seqkit.errors import SeqkitError
from seqkit.runs.rundir import json_line


#: File-name endings that ``auto`` reads as CoNLL columns (one token per line).
CONLL_SUFFIXES = (".conll", ".conllu", ".iob", ".bio")


def auto_format(name: str, kind: str) -> str:
    """The format ``auto`` reads: ``ts`` for a frames run (``kind``) or a ``*.ts`` file,
    ``table`` for a file named with one of :data:`seqkit.data.table.TABLE_SUFFIXES`, ``conll`` for one of
    :data:`CONLL_SUFFIXES`, else ``text``."""
    low = name.lower()
    if kind == "frames" or low.endswith(".ts"):
        return "ts"
    if is_table_input(name, "auto"):
        return "table"
    return "conll" if low.endswith(CONLL_SUFFIXES) else "text"


def read_records(text: str, name: str, fmt: str, prep) -> list[Record]:
    """Parse prediction input into records without targets.

    Args:
        text: the whole input.
        name: its file name (or ``<stdin>``), for messages.
        fmt: ``auto`` (:func:`auto_format`), ``text``, ``conll`` or ``ts``.
        prep: the loaded run (:func:`seqkit.training.train.load_run`).

    Raises:
        SeqkitError: an input of the wrong kind for the run, or malformed input.
    """
    head = prep.head
    kind = head.inputs.kind
    if fmt == "auto":
        fmt = auto_format(name, kind)
    if (fmt == "ts") != (kind == "frames"):
        raise SeqkitError(f"{name}: this run reads {kind}; --input-format {fmt} gives "
                          f"{'frames' if fmt == 'ts' else 'tokens'}. Use "
                          f"{'ts' if kind == 'frames' else 'text or conll'}.")
    if fmt == "ts":
        records = parse_ts(text, name, need_labels=False)
    elif fmt == "conll":
        records = parse_conll(text, name, token_column=0, tag_column=None)
    elif fmt == "table":
        records = table_records(text, name, prep)
    else:
        mode = text_tokenizer(prep.recipe)
        lines = split_lines(text)
        records = [Record(tokens=tokenize(line, mode), where=f"{name}:{n}")
                   for n, line in enumerate(lines, start=1) if line.strip()]
        empty = len(lines) - len(records)
        if empty and records:  # as seq2seq's input: skipped, and said, so no one pairs lines blindly
            log.warn(f"{name}: {empty} empty line(s) skipped; each result names its input line "
                     f"('where', --format jsonl).")
    if not records:
        raise SeqkitError(f"{name}: no input sequences (empty input).")
    unk, total = head.inputs.unknown_count(records)
    if unk:
        log.warn(f"{unk} of {total} input tokens are not in the run's vocabulary and were read as [UNK]"
                 + (" (their characters are still read: model.char_embedding)." if head.inputs.chars else "."))
    return records


def table_records(text: str, name: str, prep) -> list[Record]:
    """The records of a prediction table (the ``table`` format of the module docstring;
    :func:`seqkit.data.table.input_rows`).

    Raises:
        SeqkitError: a malformed table, or one without the input column (the columns it has named).
    """
    from seqkit.data.table import input_rows

    key, rows = input_rows(text, name, prep.recipe.data_options, type(prep.head).table_columns)
    mode = text_tokenizer(prep.recipe)
    return [Record(tokens=row.tokens(key) if key == "tokens_column" else tokenize(row.text(key), mode),
                   where=row.where) for row in rows]


def predict(prep, model, records: list[Record]) -> list[dict]:
    """Predict every record.

    Returns:
        One dict per record: acceptor ``{"where", "label", "probability", "probabilities"}``;
        tagger ``{"where", "tokens", "tags", "probability" [T], "probabilities" [T]}``
        plus ``"untagged_steps"`` when ``head.too_long: truncate`` cut the input
        (``probabilities``: class name -> probability; a CRF tagger's ``tags`` are the Viterbi
        path and its probabilities the per-step CRF marginals).
    """
    head = prep.head
    names = head.labels.names
    out = []
    if hasattr(head, "predict_paths") or hasattr(head, "predict_tags"):  # one class per step
        paths = (head.predict_paths(model, records) if hasattr(head, "predict_paths") else
                 [(np.argmax(p, axis=-1), p) for p in head.predict_tags(model, records)])
        for r, (ids, p) in zip(records, paths):  # ids: arg-max, or a CRF tagger's Viterbi path
            res = {"where": r.where, "tokens": list(r.tokens)[:len(ids)] if r.tokens is not None else None,
                   "tags": [names[i] for i in ids]}
            if len(ids) < len(r):  # head.too_long: truncate -- say so in every output line
                res["untagged_steps"] = len(r) - len(ids)
            out.append({**res,
                        "probability": [round(float(p[t, i]), 6) for t, i in enumerate(ids)],
                        "probabilities": [{n: round(float(v), 6) for n, v in zip(names, row)} for row in p]})
        return out
    records = head.check_predict_length(records)
    for r, p in zip(records, head.predict_proba(model, records)):
        i = int(np.argmax(p))
        out.append({"where": r.where, "label": names[i], "probability": round(float(p[i]), 6),
                    "probabilities": {n: round(float(v), 6) for n, v in zip(names, p)}})
    return out


def format_result(res: dict, fmt: str, probabilities: bool) -> str:
    """One output line: ``text`` (``label`` / ``word/TAG ...``; with ``probabilities``,
    ``label<TAB>p`` / ``word/TAG/p``) or ``jsonl``."""
    if fmt == "jsonl":
        d = {k: v for k, v in res.items() if probabilities or k not in ("probability", "probabilities")}
        if d.get("tokens") is None:
            d.pop("tokens", None)
        return json_line(d)
    if "label" in res:
        return f"{res['label']}\t{res['probability']:.4f}" if probabilities else res["label"]
    words = res["tokens"] or [str(i) for i in range(len(res["tags"]))]
    more = f" ... ({res['untagged_steps']} more steps, not tagged)" if res.get("untagged_steps") else ""
    if probabilities:
        return " ".join(f"{w}/{t}/{p:.4f}" for w, t, p in zip(words, res["tags"], res["probability"])) + more
    return " ".join(f"{w}/{t}" for w, t in zip(words, res["tags"])) + more
