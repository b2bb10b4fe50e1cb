"""``seqkit init``: a starter recipe for the user's own file, with the format and columns it found.

:func:`starter_recipe` looks at the data (a few hundred lines at most) and returns the recipe as a
dict; :func:`write_starter` writes it as commented YAML that ``seqkit validate`` accepts. What it
detects:

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

def _tasks() -> dict:
    """``{task: head name}``: each registered head's ``starter_task`` (the words of ``--task``)."""
    return {HEADS.get(n).starter_task: n for n in HEADS.names() if getattr(HEADS.get(n), "starter_task", None)}


TASKS = ("classify", "tag", "lm", "seq2seq")  # the --task words; the head of each: _tasks()
TABLE_EXT = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".parquet": "parquet"}
LABEL_NAMES = ("label", "labels", "class", "category", "categories", "target", "y", "stars", "rating",
               "sentiment", "intent", "topic", "tag")
HEADER = "# Starter recipe written by `seqkit init`"
_SAMPLE = 500  # rows or lines looked at


class InitError(SeqkitError):
    """``seqkit init`` cannot make a recipe of this data (the message says what it found and the fix)."""


def _read_table(path: str) -> tuple[list[str], list[dict]]:
    """``(column names, up to _SAMPLE rows)`` of a table file.

    Raises:
        InitError: a file that is not UTF-8 (naming the byte, and UTF-16 when its mark says so),
            malformed CSV, or a header that names a column twice.
    """
    from seqkit.data.base import iconv_source
    from seqkit.data.table import no_field_limit
    from seqkit.data.vocab import first_duplicate

    try:
        with no_field_limit():  # a long text is no error (as when the data is read for training)
            cols, rows = _read_table_sample(path)
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


def _read_table_sample(path: str) -> tuple[list[str], list[dict]]:
    ext = os.path.splitext(path)[1].lower()
    fmt = TABLE_EXT[ext]
    if fmt == "parquet":
        try:
            import pandas as pd
        except ImportError as exc:
            raise InitError(f"{path}: reading Parquet needs pandas and pyarrow: "
                            f"pip install \"seqkit[parquet]\".") from exc
        frame = pd.read_parquet(path).head(_SAMPLE)
        return [str(c) for c in frame.columns], frame.astype(str).to_dict("records")
    with open(path, encoding="utf-8-sig", newline="") as f:
        if fmt == "jsonl":
            rows = []
            for i, line in enumerate(f):
                if i >= _SAMPLE:
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
        delimiter = "\t" if fmt == "tsv" else _csv_delimiter(f)
        reader = csv.DictReader(f, delimiter=delimiter)
        rows = []
        for i, row in enumerate(reader):
            if i >= _SAMPLE:
                break
            rows.append(row)
        return list(reader.fieldnames or []), rows


#: Field delimiters a ``.csv`` file may use besides ``,`` (spreadsheets of some locales write ``;``).
CSV_DELIMITERS = ";|\t"


def _csv_delimiter(f) -> str:
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


def _mean_len(rows, col) -> float:
    vals = [r.get(col) for r in rows]
    vals = [v if isinstance(v, str) else " ".join(map(str, v)) if isinstance(v, list) else str(v)
            for v in vals if v is not None]
    return sum(len(v) for v in vals) / max(1, len(vals))


def _tokenizer(samples: list[str]) -> str:
    """``whitespace`` when the text has spaces between words (about one every 12 characters or
    more often), else ``char`` (e.g. Chinese or Japanese text, codes, single words)."""
    spaces = sum(t.count(" ") for t in samples)  # inside the texts: joining them adds spaces
    return "whitespace" if spaces * 12 >= max(1, sum(len(t) for t in samples)) else "char"


def _classify_table(path: str, rows: list[dict], cols: list[str]) -> dict:
    if len(cols) < 2 or not rows:
        raise InitError(f"{path}: a classification table needs a header and at least two columns "
                        f"(a text and a label) and one row; found columns {cols} and {len(rows)} rows.")
    named = [c for c in cols if c.strip().lower() in LABEL_NAMES]
    # the column with the fewest distinct values, then the shortest values (a label, not a text
    # that repeats as often), then the first (linear in the columns)
    label = named[0] if named else cols[min(range(len(cols)),
                                            key=lambda i: (len({str(r.get(cols[i])) for r in rows}),
                                                           _mean_len(rows, cols[i]), i))]
    text = max((c for c in cols if c != label), key=lambda c: _mean_len(rows, c))
    return {"text_column": text, "label_column": label,
            "tokenizer": _tokenizer([str(r.get(text, "")) for r in rows])}


def _headerless(cols: list[str], rows: list[dict]) -> bool:
    """True when the first line reads as data, not names: one of its cells recurs as a value of
    its own column below (a label), with at least three rows to look at."""
    return len(rows) >= 3 and any(sum(str(r.get(c)) == c for r in rows) >= 1 for c in cols if c)


def _headerless_classify(path: str, rel_path: str, fmt: str) -> dict:
    """The data section for a table without a header: ``tsv_text_label`` for ``text<TAB>label``
    lines, else the ``table`` source with numbered columns (``header: false``)."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        delimiter = "\t" if fmt == "tsv" else _csv_delimiter(f)
        rows = [r for _, r in zip(range(_SAMPLE), csv.reader(f, delimiter=delimiter)) if any(c.strip() for c in r)]
    width = max((len(r) for r in rows), default=0)
    if width < 2:
        raise InitError(f"{path}: a classification table needs a text and a label column; its lines "
                        f"have {width} field(s).")
    named = {i: [r[i] if i < len(r) else "" for r in rows] for i in range(width)}
    label = min(range(width), key=lambda i: (len(set(named[i])), sum(len(v) for v in named[i]), i))
    text = max((i for i in range(width) if i != label), key=lambda i: sum(len(v) for v in named[i]))
    tokenizer = _tokenizer(named[text])
    if fmt == "tsv" and width == 2 and (text, label) == (0, 1):
        return {"source": "tsv_text_label", "path": rel_path, "tokenizer": tokenizer}
    return {"source": "table", "path": rel_path, "header": False, "text_column": text,
            "label_column": label, "tokenizer": tokenizer}


def _sniff_lines(path: str, n: int = _SAMPLE) -> list[str]:
    out = []
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        for i, line in enumerate(f):
            if i >= n:
                break
            out.append(line.rstrip("\r\n"))
    return out


def _tag_file(path: str) -> dict:
    lines = _sniff_lines(path)
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


def _text_files(folder: str) -> list[str]:
    files = sorted(p for p in glob.glob(os.path.join(folder, "*"))
                   if os.path.isfile(p) and not os.path.basename(p).startswith("."))
    if not files:
        raise InitError(f"{folder}: the folder holds no files; give a folder of text files (.txt, .gz).")
    exts = {os.path.splitext(p)[1] for p in files}
    if len(exts) > 1:  # keep the most common kind only
        ext = max(exts, key=lambda e: sum(p.endswith(e) for p in files))
        files = [p for p in files if p.endswith(ext)]
    return files


def starter_recipe(task: str, data: "str | list[str]", *, out: str | None = None) -> dict:
    """A starter recipe (a dict, the YAML's content) for ``task`` on the user's ``data``.

    Args:
        task: ``classify`` | ``tag`` | ``lm`` | ``seq2seq``.
        data: a file or a folder (``lm``); for ``seq2seq`` also two files, source then target.
        out: where the recipe will be written (data paths are made relative to its folder;
            default: the current folder).

    Returns:
        The recipe as a dict (``name``, ``data``, ``model``, ``head``, ``training``).

    Raises:
        InitError: an unknown task, a missing file, or data whose format is not recognised
            (the message names the file and what was found).
    """
    if task not in TASKS:
        raise InitError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}.")
    paths = [data] if isinstance(data, str) else list(data)
    if not paths or len(paths) > (2 if task == "seq2seq" else 1):
        raise InitError(f"--task {task} takes {'one or two data paths' if task == 'seq2seq' else 'one data path'}; "
                        f"got {len(paths)}.")
    for p in paths:
        if not os.path.exists(p):
            raise InitError(f"{p}: no such file or folder.")
    base = os.path.dirname(os.path.abspath(out)) if out else os.getcwd()

    def rel(p: str) -> str:
        return os.path.relpath(os.path.abspath(p), base)

    first = paths[0]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", os.path.splitext(os.path.basename(first.rstrip("/\\")))[0]).strip("-.")
    ext = os.path.splitext(first)[1].lower()
    head = {"type": _tasks()[task]}
    labelled = task in ("classify", "tag")
    data_sec: dict = {}
    if os.path.isdir(first) and task != "lm":
        raise InitError(f"{first}: a folder; --task {task} reads one file (a folder of text is for --task lm).")
    if task == "classify":
        if ext not in TABLE_EXT:
            raise InitError(f"{first}: --task classify reads a table (.csv, .tsv, .jsonl, .parquet) with a "
                            f"text column and a label column; rename or convert the file.")
        cols, rows = _read_table(first)
        if _headerless(cols, rows) and TABLE_EXT[ext] in ("csv", "tsv"):
            data_sec = _headerless_classify(first, rel(first), TABLE_EXT[ext])
        else:
            found = _classify_table(first, rows, cols)
            data_sec = {"source": "table", "path": rel(first), "text_column": found["text_column"],
                        "label_column": found["label_column"], "tokenizer": found["tokenizer"]}
        if TABLE_EXT[ext] == "csv":
            with open(first, encoding="utf-8-sig", newline="") as f:
                delimiter = _csv_delimiter(f)
            if delimiter != ",":
                data_sec["delimiter"] = delimiter
    elif task == "tag":
        if ext in TABLE_EXT:
            cols, rows = _read_table(first)
            tok = next((c for c in cols if c.lower() in ("tokens", "words", "token", "word")), None)
            tags = next((c for c in cols if c.lower() in ("tags", "labels", "ner_tags", "pos_tags", "tag")), None)
            if not tok or not tags:
                raise InitError(f"{first}: a tagging table needs a tokens column and a tags column "
                                f"(named e.g. 'tokens' and 'tags'); found {cols}.")
            data_sec = {"source": "table", "path": rel(first), "tokens_column": tok, "tags_column": tags}
        else:
            found = _tag_file(first)
            data_sec = {"source": found["source"], "path": rel(first)}
    elif task == "lm":
        if os.path.isdir(first):
            files = _text_files(first)
            ext = os.path.splitext(files[0])[1]
            held = files[-2:] if len(files) >= 3 else []
            data_sec = {"source": "text_corpus", "layout": "stream",
                        "train_path": [rel(p) for p in files[:-2]] if held else rel(os.path.join(first, "*" + ext))}
            if held:
                data_sec.update(valid_path=rel(held[0]), test_path=rel(held[1]))
            sample = _sniff_lines(files[0], 50)
        else:
            data_sec = {"source": "text_lines", "path": rel(first)}
            sample = _sniff_lines(first, 200)
        data_sec["tokenizer"] = _tokenizer(sample) if os.path.isdir(first) else "char"
    else:  # seq2seq
        if len(paths) == 2:
            data_sec = {"source": "parallel_text", "source_path": rel(paths[0]), "target_path": rel(paths[1])}
            src, tgt = _sniff_lines(paths[0], 200), _sniff_lines(paths[1], 200)
        elif ext in TABLE_EXT:
            cols, rows = _read_table(first)
            if len(cols) < 2:
                raise InitError(f"{first}: a seq2seq table needs a source and a target column; found {cols}.")
            s = next((c for c in cols if c.lower() in ("source", "src", "input")), cols[0])
            t = next((c for c in cols if c.lower() in ("target", "tgt", "output")), next(c for c in cols if c != s))
            data_sec = {"source": "parallel_text", "path": rel(first), "source_column": s, "target_column": t}
            src, tgt = [str(r.get(s, "")) for r in rows], [str(r.get(t, "")) for r in rows]
        else:
            raise InitError(f"{first}: --task seq2seq reads two aligned files (--data SOURCE --data TARGET, "
                            f"line n of one is the output for line n of the other) or a table "
                            f"(.csv, .tsv, .jsonl) with a source and a target column.")
        data_sec["tokenizer"] = _tokenizer(src)
        data_sec["target_tokenizer"] = _tokenizer(tgt)
        head["attention"] = "bahdanau"
    data_sec["split"] = {"valid": 0.1, "test": 0.1, "shuffle": labelled or task == "seq2seq"}
    if data_sec.get("source") == "text_corpus":
        del data_sec["split"]  # its valid/test are files, never carved from the stream
    elif data_sec.get("source") in ("text_lines",):
        data_sec["max_length"] = max(2, min(512, max((len(s) for s in sample), default=2) + 2))
    model = {"cell": "lstm", "units": 128, "layers": 1, "embedding_dim": 64, "dropout": 0.1}
    if task in ("classify", "tag"):
        model["bidirectional"] = True
    training = {"epochs": 10, "batch_size": 32, "learning_rate": 0.002, "clipnorm": 1.0,
                "early_stopping": {"patience": 2}}
    if data_sec.get("layout") == "stream":
        training["bptt"] = 64
    return {"name": f"{stem or 'data'}-{task}", "seed": 1234, "data": data_sec, "model": model,
            "head": head, "training": training}


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

    recipe = starter_recipe(task, data, out=out)
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
            + note + yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True))
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
