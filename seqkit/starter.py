"""``seqkit init``: a starter recipe for the user's own file, with the format and columns it found.

:func:`starter_recipe` asks the head whose ``starter_task`` is the ``--task`` word to look at the
data (:meth:`seqkit.heads.base.Head.starter`, a few hundred lines at most) and returns the recipe
as a dict; :func:`write_starter` writes it as commented YAML that ``seqkit validate`` accepts. The
helpers here (:func:`sample_table`, :func:`classify_columns`, :func:`tag_file_format`,
:func:`tokenizer_for`, ...) are what the heads' starters use. What the built-in heads detect:

* ``classify`` (acceptor): a table (``.csv``, ``.tsv``, ``.jsonl``, ``.parquet``); the label column
  is one named like a label (``label``, ``class``, ``stars``...) or else the column with the fewest
  distinct values, the text column the one with the longest values.
* ``tag`` (tagger): a CoNLL column file (a token and a tag a line, blank lines between sentences;
  first and last column), a ``word/TAG`` file (a sentence a line), or a table with token and tag
  columns.
* ``lm`` (language model): one text file (``text_lines``, a line an example) or a folder of text
  files (``text_corpus``, read as one stream; its last two files, when it has three or more, are
  valid and test).
* ``seq2seq``: two aligned files (source, target) or a table with two text columns.

Label-bearing data gets a shuffled split (``data.split.shuffle: true``), so a file sorted by label
still puts every class in valid and test.

PyYAML is imported inside the functions that use it, so importing this module does not load it; the
optional package pandas is imported where used, so seqkit works without it.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import re

from seqkit.errors import SeqkitError
from seqkit.registry import HEADS


def tasks() -> dict:
    """``{task: head name}``: each registered head's ``starter_task`` (the words of ``--task``)."""
    return {HEADS.get(n).starter_task: n for n in HEADS.names() if getattr(HEADS.get(n), "starter_task", None)}


TABLE_EXT = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".parquet": "parquet"}
LABEL_NAMES = ("label", "labels", "class", "category", "categories", "target", "y", "stars", "rating",
               "sentiment", "intent", "topic", "tag")
HEADER = "# Starter recipe written by `seqkit init`"
SAMPLE = 500  # rows or lines looked at


class InitError(SeqkitError):
    """``seqkit init`` cannot make a recipe of this data (the message says what it found and the fix)."""


def sample_table(path: str) -> tuple[list[str], list[dict]]:
    """``(column names, up to SAMPLE rows)`` of a table file.

    Raises:
        InitError: a file that is not UTF-8 (naming the byte, and UTF-16 when its mark says so),
            malformed CSV, or a header that names a column twice.
    """
    from seqkit.data.base import iconv_source
    from seqkit.data.table import no_field_limit
    from seqkit.data.vocab import first_duplicate

    try:
        with no_field_limit():  # a long text is no error (as when the data is read for training)
            cols, rows = read_table_sample(path)
    except UnicodeDecodeError as exc:
        with open(path, "rb") as f:
            source = iconv_source(f.read(2))
        enc = source if source == "UTF-16" else "another encoding (Latin-1? GBK?)"
        raise InitError(f"{path}: not UTF-8 (byte {exc.start}: {exc.reason}); it looks like {enc}. "
                        f"Convert it first, e.g. `iconv -f {source} -t utf-8 {path} > utf8.csv`.") from None
    except csv.Error as exc:
        raise InitError(f"{path}: not a readable CSV ({exc}); check its quoting.") from None
    dup = first_duplicate(cols)
    if dup is not None:
        raise InitError(f"{path}: the header names the column {dup!r} twice; give every column its own name.")
    return cols, rows


def read_table_sample(path: str) -> tuple[list[str], list[dict]]:
    ext = os.path.splitext(path)[1].lower()
    fmt = TABLE_EXT[ext]
    if fmt == "parquet":
        try:
            import pandas as pd
        except ImportError as exc:
            raise InitError(f"{path}: reading Parquet needs pandas and pyarrow: "
                            f"pip install \"seqkit[parquet]\".") from exc
        frame = pd.read_parquet(path).head(SAMPLE)
        return [str(c) for c in frame.columns], frame.astype(str).to_dict("records")
    with open(path, encoding="utf-8-sig", newline="") as f:
        if fmt == "jsonl":
            rows = []
            for i, line in enumerate(f):
                if i >= SAMPLE:
                    break
                if line.strip():
                    try:
                        row = json.loads(line)
                    except RecursionError:
                        raise InitError(f"{path}:{i + 1}: JSON nested too deep to read; a JSON Lines table "
                                        f"holds one flat object a line.") from None
                    except ValueError as exc:  # not JSON, or a number past Python's 4,300 digits
                        raise InitError(f"{path}:{i + 1}: not readable JSON ({exc}); a JSON Lines table "
                                        f"holds one object a line, e.g. {{\"text\": \"...\", \"label\": "
                                        f"\"...\"}}.") from None
                    if not isinstance(row, dict):
                        raise InitError(f"{path}:{i + 1}: a JSON Lines table holds one object a line "
                                        f"({{\"text\": ..., \"label\": ...}}); found a {type(row).__name__}.")
                    rows.append(row)
            cols = list(rows[0]) if rows else []
            return cols, rows
        delimiter = "\t" if fmt == "tsv" else csv_delimiter(f)
        reader = csv.DictReader(f, delimiter=delimiter)
        rows = []
        for i, row in enumerate(reader):
            if i >= SAMPLE:
                break
            rows.append(row)
        return list(reader.fieldnames or []), rows


#: Field delimiters a ``.csv`` file may use besides ``,`` (spreadsheets of some locales write ``;``).
CSV_DELIMITERS = ";|\t"


def csv_delimiter(f) -> str:
    """The delimiter of a ``.csv`` file open at its start (left there): ``,`` unless the first
    line has none and another of :data:`CSV_DELIMITERS` splits the first lines into the same
    number (two or more) of fields."""
    head = [f.readline() for _ in range(5)]
    f.seek(0)
    lines = [ln.rstrip("\r\n") for ln in head if ln.strip()]
    if not lines or "," in lines[0]:
        return ","
    for d in CSV_DELIMITERS:
        counts = {len(next(csv.reader([ln], delimiter=d))) for ln in lines}
        if len(counts) == 1 and counts.pop() >= 2:
            return d
    return ","


def mean_length(rows, col) -> float:
    vals = [r.get(col) for r in rows]
    vals = [v if isinstance(v, str) else " ".join(map(str, v)) if isinstance(v, list) else str(v)
            for v in vals if v is not None]
    return sum(len(v) for v in vals) / max(1, len(vals))


def tokenizer_for(samples: list[str]) -> str:
    """``whitespace`` when the text has spaces between words (about one every 12 characters or
    more often), else ``char`` (e.g. Chinese or Japanese text, codes, single words)."""
    spaces = sum(t.count(" ") for t in samples)  # inside the texts: joining them adds spaces
    return "whitespace" if spaces * 12 >= max(1, sum(len(t) for t in samples)) else "char"


def classify_columns(path: str, rows: list[dict], cols: list[str]) -> dict:
    if len(cols) < 2 or not rows:
        raise InitError(f"{path}: a classification table needs a header and at least two columns "
                        f"(a text and a label) and one row; found columns {cols} and {len(rows)} rows.")
    named = [c for c in cols if c.strip().lower() in LABEL_NAMES]
    # the column with the fewest distinct values, then the shortest values (a label, not a text
    # that repeats as often), then the first (linear in the columns)
    label = named[0] if named else cols[min(range(len(cols)),
                                            key=lambda i: (len({str(r.get(cols[i])) for r in rows}),
                                                           mean_length(rows, cols[i]), i))]
    text = max((c for c in cols if c != label), key=lambda c: mean_length(rows, c))
    return {"text_column": text, "label_column": label,
            "tokenizer": tokenizer_for([str(r.get(text, "")) for r in rows])}


def headerless(cols: list[str], rows: list[dict]) -> bool:
    """True when the first line reads as data, not names (at least three rows to look at): one
    of its cells recurs as a value of its own column below (a label), **and** its cell over the
    text column (the longest values) is as long as a text there (at least half the median): a
    header ``message,spam`` whose name ``spam`` is also a label still reads as names, since
    ``message`` is far shorter than the messages."""
    if len(rows) < 3 or not any(sum(str(r.get(c)) == c for r in rows) >= 1 for c in cols if c):
        return False
    text = max(cols, key=lambda c: mean_length(rows, c))
    lengths = sorted(len(str(r.get(text) or "")) for r in rows)
    return len(text) >= 0.5 * lengths[len(lengths) // 2]


def headerless_classify(path: str, rel_path: str, fmt: str) -> dict:
    """The data section for a table without a header: ``tsv_text_label`` for ``text<TAB>label``
    lines, else the ``table`` source with numbered columns (``header: false``)."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        delimiter = "\t" if fmt == "tsv" else csv_delimiter(f)
        rows = [r for _, r in zip(range(SAMPLE), csv.reader(f, delimiter=delimiter)) if any(c.strip() for c in r)]
    width = max((len(r) for r in rows), default=0)
    if width < 2:
        raise InitError(f"{path}: a classification table needs a text and a label column; its lines "
                        f"have {width} field(s).")
    named = {i: [r[i] if i < len(r) else "" for r in rows] for i in range(width)}
    label = min(range(width), key=lambda i: (len(set(named[i])), sum(len(v) for v in named[i]), i))
    text = max((i for i in range(width) if i != label), key=lambda i: sum(len(v) for v in named[i]))
    tokenizer = tokenizer_for(named[text])
    if fmt == "tsv" and width == 2 and (text, label) == (0, 1):
        return {"source": "tsv_text_label", "path": rel_path, "tokenizer": tokenizer}
    return {"source": "table", "path": rel_path, "header": False, "text_column": text,
            "label_column": label, "tokenizer": tokenizer}


def sniff_lines(path: str, n: int = SAMPLE) -> list[str]:
    """The first ``n`` lines of a text file (line ends dropped; undecodable bytes replaced).

    Raises:
        InitError: lines ending in a carriage return alone, which training refuses too.
    """
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    if head.count(b"\r") > 1 and b"\n" not in head:
        raise InitError(f"{path}: its lines end in a carriage return alone (\\r, classic Mac OS line "
                        f"ends); seqkit reads lines ending in \\n (or \\r\\n). Convert the file, e.g. "
                        f"`tr '\\r' '\\n' < {path} > fixed{os.path.splitext(path)[1]}`, and run init on it.")
    out = []
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        for i, line in enumerate(f):
            if i >= n:
                break
            out.append(line.rstrip("\r\n"))
    return out


def tag_file_format(path: str) -> dict:
    lines = sniff_lines(path)
    filled = [ln for ln in lines if ln.strip() and not ln.startswith("-DOCSTART-")]
    if not filled:
        raise InitError(f"{path}: no tokens found; a tagging file is CoNLL columns (a token and its tag "
                        f"a line, blank lines between sentences) or word/TAG sentences (one a line).")
    columns = [len(ln.split()) for ln in filled]
    slash = sum(1 for ln in filled for tok in ln.split() if re.match(r".+/[^/]+$", tok))
    if slash >= 0.9 * sum(columns):  # word/TAG tokens (a CoNLL token column rarely holds '/')
        return {"source": "word_tag"}
    if all(c >= 2 for c in columns) and any(not ln.strip() for ln in lines) or \
            (all(c >= 2 for c in columns) and max(columns) <= 6 and min(columns) == max(columns)):
        return {"source": "conll", "ncols": max(columns)}
    raise InitError(f"{path}: neither CoNLL columns (every non-blank line: a token and a tag) nor word/TAG "
                    f"sentences; the first lines have {sorted(set(columns))[:5]} fields. Convert it, or "
                    f"write the recipe by hand (docs: 'Your own data').")


def text_files(folder: str) -> list[str]:
    files = sorted(p for p in glob.glob(os.path.join(folder, "*"))
                   if os.path.isfile(p) and not os.path.basename(p).startswith("."))
    if not files:
        raise InitError(f"{folder}: the folder holds no files; give a folder of text files (.txt, .gz).")
    exts = {os.path.splitext(p)[1] for p in files}
    if len(exts) > 1:  # keep the most common kind only
        ext = max(exts, key=lambda e: sum(p.endswith(e) for p in files))
        files = [p for p in files if p.endswith(ext)]
    return files


def starter_recipe(task: str, data: "str | list[str]", *, out: str | None = None,
                   with_notes: bool = False):
    """A starter recipe (a dict, the YAML's content) for ``task`` on the user's ``data``.

    The head whose ``starter_task`` is ``task`` looks at the files (:meth:`Head.starter
    <seqkit.heads.base.Head.starter>`: the ``data`` and ``head`` sections, and what differs from
    the default ``model`` and ``training`` keys); the rest is the same for every head.

    Args:
        task: a registered head's ``starter_task`` (built in: ``classify``, ``tag``, ``lm``,
            ``seq2seq``; a plugin head may add its own, e.g. ``forecast``).
        data: a file or a folder; as many paths as the head's ``starter_files`` allows.
        out: where the recipe will be written (data paths are made relative to its folder;
            default: the current folder).

    Returns:
        The recipe as a dict (``name``, ``seed``, ``data``, ``model``, ``head``, ``training``);
        with ``with_notes``, ``(recipe, notes)``: the head's remarks for the file's header
        (``"notes"`` of :meth:`Head.starter <seqkit.heads.base.Head.starter>`).

    Raises:
        InitError: an unknown task, a missing file, or data whose format is not recognised
            (the message names the file and what was found).
    """
    found = tasks()
    if task not in found:
        raise InitError(f"unknown task {task!r}; choose one of {', '.join(sorted(found))} (a head "
                        f"plugin may add its own: `seqkit list heads`).")
    head_cls = HEADS.get(found[task])
    paths = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    paths = [os.fspath(p) for p in paths]
    most = int(getattr(head_cls, "starter_files", 1))
    if not paths or len(paths) > most:
        raise InitError(f"--task {task} takes {'one data path' if most == 1 else f'one to {most} data paths'}; "
                        f"got {len(paths)}.")
    for p in paths:
        if not os.path.exists(p):
            raise InitError(f"{p}: no such file or folder.")
    base = os.path.dirname(os.path.abspath(out)) if out else os.getcwd()

    def rel(p: str) -> str:
        return os.path.relpath(os.path.abspath(p), base)

    sections = head_cls.starter(paths, rel)
    notes = sections.get("notes") or []
    first = paths[0]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", os.path.splitext(os.path.basename(first.rstrip("/\\")))[0]).strip("-.")
    model = {"cell": "lstm", "units": 128, "layers": 1, "embedding_dim": 64, "dropout": 0.1,
             **sections.get("model", {})}
    model = {k: v for k, v in model.items() if v is not None}  # a head's None drops a default
    training = {"epochs": 10, "batch_size": 32, "learning_rate": 0.002, "clipnorm": 1.0,
                "early_stopping": {"patience": 2}, **sections.get("training", {})}
    recipe = {"name": f"{stem or 'data'}-{task}", "seed": 1234, "data": sections["data"], "model": model,
              "head": {"type": found[task], **sections.get("head", {})}, "training": training}
    return (recipe, [str(n) for n in notes]) if with_notes else recipe


def one_file(paths: list[str], task: str, what: str) -> str:
    """The one file ``--task`` reads (a folder refused, naming ``what`` the task reads)."""
    if os.path.isdir(paths[0]):
        raise InitError(f"{paths[0]}: a folder; --task {task} reads one file ({what}).")
    return paths[0]


def held_out_split(shuffle: bool) -> dict:
    """The starter's ``data.split``: 10% valid, 10% test; ``shuffle`` for label-bearing data, so a
    file sorted by label still puts every class in valid and test."""
    return {"valid": 0.1, "test": 0.1, "shuffle": shuffle}


def write_starter(task: str, data: "str | list[str]", out: str | None = None, *,
                  overwrite: bool = False) -> str:
    """Write :func:`starter_recipe`'s recipe as YAML (staged, then renamed into place).

    Args:
        task, data: as :func:`starter_recipe`.
        out: the recipe file to write (default ``NAME.yaml`` in the current folder, NAME being
            the recipe's name, e.g. ``reviews-classify.yaml``).
        overwrite: replace ``out`` if it exists, only when ``seqkit init`` wrote it (its first line
            is seqkit's header); any other file is never replaced.

    Returns:
        The path written.

    Raises:
        InitError: as :func:`starter_recipe`; ``out`` exists (without ``overwrite``, or not
            written by ``seqkit init``).
    """
    import yaml

    recipe, notes = starter_recipe(task, data, out=out, with_notes=True)
    out = out or recipe["name"] + ".yaml"
    if os.path.exists(out):
        with open(out, encoding="utf-8", errors="replace") as f:
            mine = f.readline().startswith(HEADER)
        if not overwrite or not mine:
            raise InitError(f"{out}: the file exists; " + (
                "pass --overwrite to replace it (seqkit init wrote it)." if mine else
                "it was not written by seqkit init, so it is never replaced: choose another --out."))
    d = recipe["data"]
    no_held_out = d.get("source") == "text_corpus" and not d.get("test_path")
    note = ("# No valid or test file: training watches the training loss and `seqkit evaluate` has nothing\n"
            "# to score. Add data.valid_path and data.test_path (held-out text files), or put three or\n"
            "# more files in the folder and run init again (its last two become valid and test).\n"
            if no_held_out else "")
    text = (f"{HEADER} for {', '.join(data) if isinstance(data, list) else data}.\n"
            f"# Check the detected columns/format below, then: seqkit validate {out} && seqkit train {out}\n"
            f"# Every key: see the recipe reference of the documentation, or `seqkit validate {out} --show`\n"
            f"# for this recipe with every default filled in.\n"
            + note + "".join(f"# {n}\n" for n in notes)
            + yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True))
    tmp = f"{out}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, out)
    if no_held_out:
        from seqkit import log

        log.warn(f"{out}: the folder has fewer than three files, so all of them train and there is "
                 f"no valid or test file; add data.valid_path / data.test_path to measure the model "
                 f"(the recipe's header says how).")
    return out
