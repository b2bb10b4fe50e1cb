"""Corpora larger than memory for the stream layout: text files read lazily, one bounded counting pass.

A :class:`LazyCorpus` is the lines of one or more UTF-8 text files (paths, globs,
``.gz`` files read through :mod:`gzip`), in the order given (a glob's matches
sorted), with the line rules of ``text_lines`` (:func:`~seqkit.data.text_lines.split_lines`:
lines end at ``\\n`` only, trailing white space dropped, empty lines skipped). Nothing holds the corpus or its
encoding: files are read a buffered line at a time.

* :meth:`LazyCorpus.scan` is the one counting pass: the number of lines, the length
  ``N`` of the token stream (:func:`seqkit.data.stream.token_stream`'s
  ``1 + sum(T_i + 1)``), the token counts (a :class:`BoundedCounter`; skipped when the
  vocabulary comes from ``data.vocab_file``), and a *seek table*: every
  ``seek_bytes`` (1 MiB) of a file, the byte offset of the next line start and the
  stream position of that line's first token.
* :class:`LazyStreamData` is :class:`seqkit.data.stream.StreamData` without the array:
  the same ``batchify`` columns (``B`` contiguous pieces of ``L = N // B`` tokens,
  column ``b`` from stream position ``b * L``) and the same chunks, chunk for chunk
  (tested), produced by ``B`` readers, each of which seeks to the seek-table entry at or
  before its column start and skips the rest (at most ``seek_bytes`` of text). On a
  plain file the seek is ``O(1)``; a ``.gz`` file cannot be entered in the middle, so
  :mod:`gzip` decompresses from the file start up to the offset: reaching column ``b``
  costs decompressing ``b / B`` of that file, about ``B / 2`` decompressions of the
  file per pass in all (split a large corpus into several ``.gz`` files, or
  decompress it, to avoid that).

Memory: the seek table (a few numbers per MiB of text), the counter (at most
``capacity`` entries), and ``B`` readers with one encoded line each.
"""

from __future__ import annotations

import bisect
import collections
import glob
import gzip
import json
import os
import time
import zlib

import numpy as np

from seqkit.data.lines import split_lines
from seqkit.data.stream import StreamTooShort
from seqkit.data.vocab import END_ID, SPECIALS, START_ID, Vocabulary, first_duplicate, tokenize
from seqkit.errors import DataError

#: Default spacing of the seek table, in bytes of (uncompressed) text.
SEEK_BYTES = 1 << 20
#: Default most distinct tokens the counting pass keeps (:class:`BoundedCounter`).
COUNTER_CAPACITY = 2_000_000


def expand_paths(patterns, key: str = "data.train_path", resolve=None) -> list[str]:
    """Files named by ``patterns`` (a path or glob, or a list of them), in order; a glob's
    matches sorted, each file once.

    Raises:
        DataError: a pattern matches no file (naming ``key``).
    """
    pats = [patterns] if isinstance(patterns, str) else list(patterns or [])
    out = []
    for pat in pats:
        p = resolve(pat) if resolve is not None else pat
        found = sorted(f for f in glob.glob(p) if os.path.isfile(f)) if glob.has_magic(p) else \
            ([p] if os.path.isfile(p) else [])
        if not found:
            raise DataError(f"{key}: '{pat}' names no file. Fix the path or glob in the recipe "
                            f"(relative paths are read from the recipe's folder; given with --set, from the "
                            f"current directory).")
        out.extend(f for f in found if f not in out)
    return out


class _NamedGzip(gzip.GzipFile):
    """A ``.gz`` file whose damage (truncated, corrupt: ``EOFError``, ``zlib.error``,
    ``BadGzipFile``) is a :class:`DataError` naming the file and the uncompressed offset."""

    def _damaged(self, exc: BaseException) -> DataError:
        try:
            at = f" at uncompressed byte {self.tell():,}"
        except Exception:  # the stream is broken: the offset is unknown
            at = ""
        return DataError(f"{self.name}: the gzip file is damaged{at} ({type(exc).__name__}: {exc or 'truncated'}); "
                         f"it was cut off or corrupted while copied. Copy or compress it again "
                         f"(`gzip -t {self.name}` checks it), or leave it out of the recipe.")

    def read(self, *args):
        try:
            return super().read(*args)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise self._damaged(exc) from None

    def readline(self, *args):
        try:
            return super().readline(*args)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise self._damaged(exc) from None

    def seek(self, *args):
        try:
            return super().seek(*args)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise self._damaged(exc) from None


def _open(path: str):
    """A corpus file for reading bytes (a ``.gz`` one decompressed; damage named, see :class:`_NamedGzip`)."""
    return _NamedGzip(path, "rb") if path.endswith(".gz") else open(path, "rb")


#: Longest line of a corpus file (bytes); None: an eighth of this machine's memory (a line of N bytes
#: took about 6 N of memory to read and count: a 510 KB ``.gz`` of one 512 MiB line, 2.9 GB), 1 GiB
#: where the memory is unknown. text8 (one line of 100 MB) fits.
MAX_LINE_BYTES: int | None = None


def max_line_bytes() -> int:
    """The longest corpus line read (:data:`MAX_LINE_BYTES`)."""
    if MAX_LINE_BYTES is not None:
        return MAX_LINE_BYTES
    from seqkit.guards import memory_bytes

    memory = memory_bytes()
    return max(64 << 20, memory // 8) if memory else 1 << 30


def _raw_lines(f, path: str, first: int = 1):
    """The raw lines of the open corpus file ``f`` (numbered from ``first``, for messages), each at
    most :func:`max_line_bytes`.

    Raises:
        DataError: a longer line, named by file and line.
    """
    n, bound = first, max_line_bytes()
    while True:
        raw = f.readline(bound + 1)
        if not raw:
            return
        if len(raw) > bound:
            raise DataError(f"{path}:{n}: a line longer than {bound:,} bytes (an eighth of this machine's "
                            f"memory); a text corpus is read a line at a time, so each line (a sentence, a "
                            f"paragraph, a document) must be shorter. Break the text into lines.")
        yield raw
        n += 1


def _lines_of(raw: bytes, path: str, line_no: int, file_start: bool = False) -> list[str]:
    """The ``text_lines`` line of one physical line (``[]`` if it is empty): ``\\n`` and a ``\\r``
    before it dropped, and a byte-order mark if it is the file's first line (``file_start``)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}:{line_no}: not UTF-8 (byte 0x{raw[exc.start]:02x}). Convert the "
                        f"file to UTF-8, e.g. `iconv -f latin1 -t utf-8`.") from exc
    return _block_lines(text, file_start)


def _block_lines(text: str, file_start: bool) -> list[str]:
    """:func:`~seqkit.data.text_lines.split_lines` of whole physical lines decoded (a byte-order
    mark is dropped only at the start of a file, as when the file is read whole)."""
    # split_lines drops a U+FEFF only at the text's start: behind a "\n" a mid-file one is kept
    lines = split_lines(text) if file_start else split_lines("\n" + text)[1:]
    return [ln.rstrip() for ln in lines if ln.strip()]


def read_lines(paths, start: tuple[int, int] = (0, 0)):
    """Yield the lines of ``paths`` lazily, from byte ``start[1]`` of file ``start[0]`` on.

    The offset must be a line start (a seek-table entry). Same lines as reading each
    file whole with :func:`~seqkit.data.text_lines.split_lines`.
    """
    first, offset = start
    for i in range(first, len(paths)):
        with _open(paths[i]) as f:
            if i == first and offset:
                f.seek(offset)
            for n, raw in enumerate(_raw_lines(f, paths[i]), 1):
                yield from _lines_of(raw, paths[i], n, file_start=n == 1 and not (i == first and offset))


class BoundedCounter:
    """Token counts in at most ``capacity`` entries (a lossy counter).

    While no more than ``capacity`` distinct tokens have been seen the counts are exact
    and in first-appearance order, so :meth:`vocabulary` equals
    :meth:`~seqkit.data.vocab.Vocabulary.build` on the same text. Past ``capacity`` the
    rarer half of the entries is dropped (a pruning step in the spirit of Manku &
    Motwani 2002, "lossy counting"); a dropped token that comes back starts again
    from zero, so rare tokens may be under-counted. Frequent ones are kept: a token
    kept in the vocabulary of ``max_size`` << ``capacity`` is one that survived every
    pruning with a count above the dropped half's.

    Args:
        capacity: most entries held (>= 2).
    """

    def __init__(self, capacity: int = COUNTER_CAPACITY):
        if capacity < 2:
            raise ValueError(f"BoundedCounter: capacity must be at least 2, got {capacity}.")
        self.capacity = int(capacity)
        self.counts = collections.Counter()
        self.pruned = 0  # pruning steps taken (0: the counts are exact)

    def update(self, tokens) -> None:
        """Count ``tokens`` (a list of strings, or a string for characters)."""
        self.counts.update(tokens)
        if len(self.counts) > self.capacity:
            keep = sorted(self.counts.items(), key=lambda kv: -kv[1])[: self.capacity // 2]
            kept = {t for t, _ in keep}
            self.counts = collections.Counter({t: c for t, c in self.counts.items() if t in kept})
            self.pruned += 1

    def vocabulary(self, min_count: int = 1, max_size: int | None = None) -> Vocabulary:
        """The vocabulary of :meth:`Vocabulary.build` (falling count, ties by first appearance)."""
        counts = dict(self.counts)
        for s in SPECIALS:
            counts.pop(s, None)
        kept = [t for t, c in sorted(counts.items(), key=lambda kv: -kv[1]) if c >= min_count]
        if max_size is not None:
            kept = kept[: max(0, max_size - len(SPECIALS))]
        return Vocabulary(list(SPECIALS) + kept)


def read_vocab_file(path: str, key: str = "data.vocab_file") -> Vocabulary:
    """A vocabulary from ``path``: seqkit's ``vocab.json`` (a JSON list starting with the four
    specials) or plain text, one token per line (the line without its line break; empty lines
    skipped; the specials are put first when the file does not start with them).

    Raises:
        DataError: missing or unreadable file, a JSON vocabulary without the specials, or a
            token listed twice.
    """
    if not os.path.isfile(path):
        raise DataError(f"{key}: no such file '{path}'. Give a vocabulary file (one token per line, "
                        f"or a run's vocab.json) or remove {key} to count the training text.")
    try:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read the vocabulary ({exc}); {key} must be UTF-8.") from exc
    if path.endswith(".json") or text.lstrip().startswith("["):
        try:
            tokens = json.loads(text)
            if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
                raise ValueError("expected a JSON list of strings")
            dup = first_duplicate(tokens)
            if dup is not None:  # a run trained with it could not be loaded again
                raise ValueError(f"the token {dup!r} is listed twice; each token is listed once")
            return Vocabulary(tokens)
        except ValueError as exc:
            raise DataError(f"{path}: not a seqkit vocabulary ({exc}); {key} takes a JSON list "
                            f"starting with {list(SPECIALS)} or one token per line.") from exc
    tokens = [ln.rstrip("\r") for ln in text.split("\n")]
    tokens = [t for t in tokens if t]
    if tuple(tokens[:3]) != SPECIALS[1:]:  # the pad token "" cannot be written as a line
        tokens = [t for t in tokens if t not in SPECIALS]
    else:
        tokens = tokens[3:]
    dup = first_duplicate(tokens)
    if dup is not None:
        raise DataError(f"{path}: the token {dup!r} is listed twice; {key} needs each token once.")
    return Vocabulary(list(SPECIALS) + tokens)


class LazyCorpus:
    """The lines of text files, read lazily (see the module docstring).

    Args:
        paths: the files, in stream order (:func:`expand_paths`).
        tokenizer, lowercase: ``data.tokenizer`` / ``data.lowercase``.
        seek_bytes: spacing of the seek table.
        capacity: :class:`BoundedCounter` capacity of the counting pass.

    ``len()`` is the number of lines (runs :meth:`scan` once); iterating yields the lines
    as strings.
    """

    lazy = True  # prepare() keeps the splits as the source gives them (nothing is carved)

    def __init__(self, paths: list[str], tokenizer: str = "char", lowercase: bool = False, *,
                 seek_bytes: int = SEEK_BYTES, capacity: int = COUNTER_CAPACITY):
        self.paths = list(paths)
        self.tokenizer, self.lowercase = tokenizer, lowercase
        self.seek_bytes, self.capacity = int(seek_bytes), int(capacity)
        self.vocab_file = None  # data.vocab_file (text_corpus): the vocabulary instead of counting
        self._scan = None

    def __iter__(self):
        return read_lines(self.paths)

    def __len__(self) -> int:
        return self.scan()["lines"]

    def __bool__(self) -> bool:
        return True

    def records(self, lines) -> list:
        """The :class:`~seqkit.data.records.Record` of each line number in ``lines`` (0-based,
        increasing), ``where`` ``"train line N"``: one pass that stops after the last one.
        Numbers past the corpus's end are left out."""
        from seqkit.data.records import Record

        wanted = sorted(set(int(i) for i in lines))
        out, k = [], 0
        if not wanted:
            return out
        for n, line in enumerate(self):
            if n == wanted[k]:
                out.append(Record(text=line, where=f"train line {n + 1}"))
                k += 1
                if k == len(wanted):
                    break
        return out

    def tokens(self, line: str):
        """A line's tokens (a string for characters: :class:`collections.Counter` counts it fast)."""
        if self.tokenizer == "char":
            return line.lower() if self.lowercase else line
        return tokenize(line, self.tokenizer, self.lowercase)

    def scan(self, count: bool = True) -> dict:
        """The counting pass (once; cached): ``{"lines", "length", "seek", "counter", "seconds"}``.

        ``length``: tokens of the stream, ``1 + sum(T_i + 1)``; ``seek``: sorted
        ``(stream position, file index, byte offset)`` of line starts, one per block of about
        ``seek_bytes`` of each file (the files are read in such blocks of whole lines); ``counter``: the :class:`BoundedCounter` (None when ``count`` is False).

        Raises:
            DataError: a file is not UTF-8, or the files hold no line.
        """
        if self._scan is not None and (self._scan["counter"] is not None or not count):
            return self._scan

        t0 = time.time()
        counter = BoundedCounter(self.capacity) if count else None
        pos, lines, seek = 1, 0, []
        for i, path in enumerate(self.paths):
            offset, n = 0, 0
            with _open(path) as f:
                lines_of_file = _raw_lines(f, path)
                while True:  # a block of whole lines, about seek_bytes long: a seek entry at its start
                    raws, size = [], 0
                    for raw in lines_of_file:
                        raws.append(raw)
                        size += len(raw)
                        if size >= self.seek_bytes:
                            break
                    if not raws:
                        break
                    seek.append((pos, i, offset))
                    raw = b"".join(raws)
                    try:
                        block = _block_lines(raw.decode("utf-8"), offset == 0)
                    except UnicodeDecodeError:  # name the line
                        for k, r in enumerate(raws):
                            _lines_of(r, path, n + k + 1)
                        raise
                    offset, n = offset + len(raw), n + len(raws)
                    if self.tokenizer == "char":
                        toks = "".join(ln.lower() for ln in block) if self.lowercase else "".join(block)
                    else:
                        toks = [t for ln in block for t in tokenize(ln, self.tokenizer, self.lowercase)]
                    if counter is not None:
                        counter.update(toks)
                    pos += len(toks) + len(block)
                    lines += len(block)
        if not lines:
            raise DataError(f"{', '.join(self.paths[:3])}: no non-empty line in the files; a text "
                            f"corpus needs text.")
        self._scan = {"lines": lines, "length": pos, "seek": seek, "counter": counter,
                      "seconds": round(time.time() - t0, 2)}
        return self._scan

    def vocabulary(self, min_count: int = 1, max_size: int | None = None) -> Vocabulary:
        """The vocabulary of the counting pass (:meth:`BoundedCounter.vocabulary`)."""
        return self.scan(count=True)["counter"].vocabulary(min_count, max_size)

    def ids_from(self, vocab: Vocabulary, position: int):
        """Yield the token stream's ids (int32 arrays, one line and its end marker at a time) from
        stream ``position`` on; the first array starts exactly at ``position``."""
        s = self.scan(count=False)
        if position == 0:
            yield np.asarray([END_ID], np.int32)
            position = 1
        seek = s["seek"]
        k = bisect.bisect_right(seek, (position, len(self.paths), 0)) - 1
        pos, i, offset = seek[k]
        for line in read_lines(self.paths, (i, offset)):
            ids = vocab.encode(list(self.tokens(line)))
            ids.append(END_ID)
            nxt = pos + len(ids)
            if nxt > position:
                yield np.asarray(ids[max(0, position - pos):], np.int32)
            pos = nxt


class _Reader:
    """Consecutive ids of one column: :meth:`take` ``n`` at a time."""

    def __init__(self, ids):
        self.ids, self.buf = ids, np.zeros(0, np.int32)

    def take(self, n: int) -> np.ndarray:
        parts, have = [self.buf], len(self.buf)
        while have < n:
            nxt = next(self.ids)
            parts.append(nxt)
            have += len(nxt)
        whole = np.concatenate(parts) if len(parts) > 1 else self.buf
        self.buf = whole[n:]
        return whole[:n]


class LazyStreamData:
    """:class:`~seqkit.data.stream.StreamData` of a :class:`LazyCorpus`, read as it goes.

    Same attributes (``batch_size``, ``bptt``, ``tokens``), ``len()`` (chunks), iteration and
    :meth:`epoch_chunks`, with chunks equal to ``StreamData(batchify(token_stream(ids), B))``'s;
    nothing but the current chunk and ``B`` line buffers is held (not even the chunk list:
    :meth:`span` computes a chunk's place).

    Raises:
        StreamTooShort: the stream cannot give each of the ``B`` columns two tokens.
    """

    def __init__(self, corpus: LazyCorpus, vocab: Vocabulary, columns: int, bptt: int):
        if columns < 1:
            raise ValueError(f"LazyStreamData: need at least one column, got {columns}.")
        self.corpus, self.vocab, self.bptt, self.columns_n = corpus, vocab, int(bptt), int(columns)
        n = corpus.scan(count=False)["length"]
        self.length = n // columns
        if self.length < 2:
            raise StreamTooShort(f"data.layout stream: a stream of {n} tokens cannot fill {columns} "
                                 f"columns of at least 2 tokens; use fewer columns "
                                 f"(training.batch_size) or more text.")
        self.n_chunks = -(-(self.length - 1) // self.bptt)  # chunk_spans' count, without its list

    def span(self, j: int) -> tuple[int, int]:
        """``(start, steps)`` of chunk ``j`` (:func:`~seqkit.data.stream.chunk_spans`' ``j``-th)."""
        start = j * self.bptt
        return start, min(self.bptt, self.length - 1 - start)

    @property
    def batch_size(self) -> int:
        return self.columns_n

    @property
    def tokens(self) -> int:
        return self.columns_n * (self.length - 1)

    def __len__(self) -> int:
        return self.n_chunks

    def __iter__(self):
        return self.chunks_from(0)

    def chunks_from(self, first: int):
        """Yield ``(inputs [B, k], targets [B, k])`` int32 from chunk ``first`` to the last one."""
        if first >= self.n_chunks:
            return
        start = self.span(first)[0]
        readers = [_Reader(self.corpus.ids_from(self.vocab, b * self.length + start))
                   for b in range(self.columns_n)]
        prev = np.stack([r.take(1) for r in readers])
        for j in range(first, self.n_chunks):
            k = self.span(j)[1]
            window = np.concatenate([prev, np.stack([r.take(k) for r in readers])], axis=1)
            x = np.where(window[:, :-1] == END_ID, START_ID, window[:, :-1]).astype(np.int32)
            yield x, window[:, 1:]
            prev = window[:, -1:]

    def epoch_chunks(self, epoch: int, steps: int | None = None):
        """As :meth:`seqkit.data.stream.StreamData.epoch_chunks`, as a generator."""
        n = self.n_chunks
        if steps is None or steps >= n:
            yield from self.chunks_from(0)
            return
        first, left = (epoch * steps) % n, steps
        while left:
            for chunk in self.chunks_from(first):
                yield chunk
                left -= 1
                if not left:
                    return
            first = 0
