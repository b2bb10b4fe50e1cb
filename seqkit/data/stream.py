"""Continuous-text layout for language models: one token stream, B columns, chunks of K steps.

``data.layout: stream`` (language_model head) reads a split as one stream of
token ids instead of independent lines:

* :func:`token_stream`: ``</s> line_1 </s> line_2 </s> ...`` -- every line is
  preceded and followed by the end marker, so a split of ``n`` lines with
  ``T_i`` tokens each yields exactly ``sum(T_i + 1)`` targets, the same token
  count as the line layout (and as the compressor baselines).
* :func:`batchify`: the stream cut into ``B`` contiguous columns, ``[B, N // B]``
  (the layout of the PyTorch ``word_language_model`` example's ``batchify``);
  the last ``N mod B`` tokens, which do not fill a column, are dropped.
* :func:`chunk_spans` / :func:`stream_chunks`: consecutive chunks of ``K`` steps
  along the columns; inputs are ``columns[:, i : i + k]`` and targets
  ``columns[:, i + 1 : i + 1 + k]``, so the targets are the inputs shifted by
  one *across* chunk boundaries: every token of a column except its first is a
  target exactly once, and no token is lost or repeated. The last chunk is
  shorter (``k = L - 1 - i``) when ``L - 1`` is not a multiple of ``K``
  (PyTorch's ``get_batch``).

* :func:`prompt_ids` / :func:`decode_lines`: generation from a stream-trained model
  (:mod:`seqkit.heads.language_model.generate`, ``seqkit stream``): a prompt's line breaks read as ``<s>``,
  a generated ``</s>`` written as a line break.

A corpus larger than memory gives the same columns and chunks without the arrays
(:mod:`seqkit.data.lazy_corpus`, source ``text_corpus``).

The state at the end of chunk ``n`` of a column is the initial state of chunk
``n + 1`` of the same column (:mod:`seqkit.heads.language_model.stream`), with the gradient
stopped there: truncated backpropagation through time (Williams & Peng 1990).

On the input side the end marker is shown as the start marker (``</s>`` ->
``<s>``): the model reads ``<s>`` at the start of every line, as in the line
layout, so ``seqkit generate`` (which starts from ``<s>``) works unchanged; the
targets keep ``</s>``.
"""

from __future__ import annotations

import numpy as np

from seqkit.data.vocab import END_ID, START_ID
from seqkit.errors import DataError


def token_stream(lines: list, end_id: int = END_ID) -> np.ndarray:
    """Concatenate encoded lines into one stream, each line preceded and followed by ``end_id``.

    Args:
        lines: encoded lines, each a sequence of int ids ``[T_i]``.
        end_id: the end-of-line marker.

    Returns:
        int32 ``[1 + sum(T_i + 1)]``: ``[end, *line_1, end, *line_2, end, ...]``.
    """
    parts = [np.asarray([end_id], np.int32)]
    for ids in lines:
        parts.append(np.asarray(ids, np.int32).reshape(-1))
        parts.append(np.asarray([end_id], np.int32))
    return np.concatenate(parts)



class StreamTooShort(DataError, ValueError):
    """A token stream too short for the columns asked of it (a user's data or batch size)."""

def batchify(stream, n_columns: int) -> np.ndarray:
    """Cut a stream into ``n_columns`` contiguous columns (row ``b`` is the ``b``-th piece).

    Args:
        stream: int ``[N]``.
        n_columns: ``B`` > 0.

    Returns:
        int32 ``[B, N // B]``: ``out[b] = stream[b * L : (b + 1) * L]`` with
        ``L = N // B``; the trailing ``N mod B`` tokens are dropped.

    Raises:
        ValueError: ``B`` < 1.
        StreamTooShort: (a :class:`~seqkit.errors.DataError` and a ``ValueError``) the
            stream is too short to give each column two tokens (one input and one target).
    """
    stream = np.asarray(stream, np.int32).reshape(-1)
    if n_columns < 1:
        raise ValueError(f"batchify: need at least one column, got {n_columns}.")
    length = len(stream) // n_columns
    if length < 2:
        raise StreamTooShort(f"data.layout stream: a stream of {len(stream)} tokens cannot fill "
                             f"{n_columns} columns of at least 2 tokens; use fewer columns "
                             f"(training.batch_size) or more text.")
    return stream[: n_columns * length].reshape(n_columns, length)


def chunk_spans(length: int, bptt: int) -> list[tuple[int, int]]:
    """``(start, steps)`` of each chunk over columns of ``length`` tokens, ``bptt`` steps each.

    Starts are ``0, K, 2K, ...`` while ``start < length - 1``; ``steps = min(K, length - 1 - start)``.
    """
    if bptt < 1:
        raise ValueError(f"chunk_spans: bptt must be positive, got {bptt}.")
    return [(i, min(bptt, length - 1 - i)) for i in range(0, length - 1, bptt)]


def stream_chunks(columns, bptt: int, *, start_id: int = START_ID, end_id: int = END_ID):
    """Yield ``(inputs, targets)`` chunks of ``columns`` in order (see the module docstring).

    Args:
        columns: int ``[B, L]`` from :func:`batchify`.
        bptt: ``K``, steps per chunk.
        start_id, end_id: on the input side ``end_id`` is replaced by ``start_id``
            (pass ``start_id=end_id`` to keep inputs verbatim).

    Yields:
        int32 ``(inputs [B, k], targets [B, k])``, ``k = K`` except possibly for the last chunk.
    """
    columns = np.asarray(columns, np.int32)
    for i, k in chunk_spans(columns.shape[1], bptt):
        x = columns[:, i: i + k]
        if start_id != end_id:
            x = np.where(x == end_id, start_id, x).astype(np.int32)
        yield x, columns[:, i + 1: i + 1 + k]


class StreamData:
    """A split laid out for stream training or scoring (what the head's ``dataset`` gives).

    Attributes:
        columns: int32 ``[B, L]`` (:func:`batchify` of :func:`token_stream`).
        bptt: steps per chunk.
        tokens: number of targets, ``B * (L - 1)``.
    """

    def __init__(self, columns, bptt: int):
        self.columns = np.asarray(columns, np.int32)
        self.bptt = int(bptt)

    @property
    def batch_size(self) -> int:
        return int(self.columns.shape[0])

    @property
    def tokens(self) -> int:
        return int(self.columns.shape[0] * (self.columns.shape[1] - 1))

    def __len__(self) -> int:
        return len(chunk_spans(self.columns.shape[1], self.bptt))

    def __iter__(self):
        return stream_chunks(self.columns, self.bptt)

    def epoch_chunks(self, epoch: int, steps: int | None = None):
        """The chunks of pass ``epoch`` (0-based): all of them in order, or with ``steps``
        (``training.steps_per_epoch``) the ``steps`` chunks after the previous passes' ones,
        wrapping round at the end of the stream (each pass still starts from zero states)."""
        chunks = list(self)
        if steps is None or steps >= len(chunks):
            return chunks
        first = (epoch * steps) % len(chunks)
        return [chunks[(first + j) % len(chunks)] for j in range(steps)]


def prompt_ids(prompt: str, encode, *, start_id: int = START_ID) -> list[int]:
    """The input ids of a (multi-line) prompt for a stream-trained model, as training read text.

    ``<s>`` first, then each line's ids, a line break read as ``<s>`` (the input side of the
    ``</s>`` that ends a line in training, see the module docstring). As in training, the
    complete lines (all but the last) lose trailing white space and empty ones are skipped;
    the last line, the one being continued, is kept as typed (``"ab\\n"`` ends with ``<s>``:
    the continuation starts a new line).

    Args:
        prompt: the text; ``\\n`` or ``\\r\\n`` break lines.
        encode: ``str -> list[int]``, one line's token ids (the run's tokenizer and vocabulary).

    Returns:
        ``[<s>, *line_1, <s>, *line_2, ..., *last]``.
    """
    *done, last = prompt.split("\n")
    ids = [start_id]
    for line in done:
        line = line.rstrip()
        if line.strip():
            ids.extend(encode(line))
            ids.append(start_id)
    ids.extend(encode(last))
    return ids


def decode_lines(vocab, ids, join: str = "") -> str:
    """Generated ids -> text for a stream-trained model: ``</s>`` is a line break (generation goes
    on past it); padding and ``<s>`` are skipped; tokens within a line are joined by ``join``."""
    lines, cur = [], []
    for i in ids:
        i = int(i)
        if i == END_ID:
            lines.append(join.join(cur))
            cur = []
        elif i not in (0, START_ID):
            cur.append(vocab.tokens[i] if 0 <= i < len(vocab.tokens) else "[UNK]")
    return "\n".join(lines + [join.join(cur)])
