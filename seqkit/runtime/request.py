"""``seqkit stream`` as one Python call: :class:`StreamRequest` (what to run an export on) and
:func:`stream_export` (find the export's head, let it run the export, yield what it prints).

The export's metadata names its head (``metadata["head"]``); the head class registered under that
name (built in, installed by entry point, or given with ``--plugin``) owns the runtime
(:meth:`seqkit.heads.base.Head.stream_export`). Nothing the file names is imported: a head that is
not registered is refused, naming it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterator

from seqkit.data.base import read_input
from seqkit.errors import SeqkitError
from seqkit.registry import HEADS, RegistryError
from seqkit.runtime.streaming import read_export_metadata


@dataclasses.dataclass
class StreamRequest:
    """What to stream an export on (``seqkit stream``'s options by the same names).

    Attributes:
        prompt: text to continue (generating heads).
        text: the input, one sequence per line (or ``.ts`` text); None: read ``input_path``.
        input_path: a file to read when ``text`` is None; ``"-"``: standard input.
        name: how messages name the input (default: ``input_path`` or ``<input>``).
        max_length: most new tokens (None: the head's default).
        temperature: sampling temperature (> 0, finite); top_k: 0 = all tokens.
        greedy: arg-max decoding; beam_width: beam search (encoder-decoders).
        seed: sampling seed.
    """

    prompt: str = ""
    text: str | None = None
    input_path: str | None = None
    name: str | None = None
    max_length: int | None = None
    temperature: float = 0.8
    top_k: int = 0
    greedy: bool = False
    beam_width: int | None = None
    seed: int = 0

    def check(self) -> "StreamRequest":
        """Refuse values out of range before an export is opened.

        Raises:
            SeqkitError: a non-finite or non-positive temperature, a negative ``top_k``, a
                ``max_length`` or ``beam_width`` below 1, text that is not a string.
        """
        if not isinstance(self.prompt, str) or (self.text is not None and not isinstance(self.text, str)):
            raise SeqkitError("stream: prompt and text are strings.")
        if not (isinstance(self.temperature, (int, float)) and math.isfinite(self.temperature)
                and self.temperature > 0):
            raise SeqkitError(f"--temperature {self.temperature}: a finite number > 0.")
        for key, low in (("top_k", 0), ("max_length", 1), ("beam_width", 1)):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < low):
                raise SeqkitError(f"--{key.replace('_', '-')} {v!r}: a whole number >= {low}.")
        return self

    def read(self) -> tuple[str, str]:
        """``(name, text)`` of the input: ``text`` itself, else ``input_path`` (``-``: stdin).

        Raises:
            SeqkitError: an unreadable or non-UTF-8 file.
        """
        if self.text is not None:
            return self.name or "<input>", self.text

        name, text = read_input(self.input_path or "-")
        return self.name or name, text

    def lines(self) -> Iterator[str]:
        """The input's lines, without line breaks, as they arrive: standard input is read a line
        at a time (a head can answer each line before the next is written); ``text`` or a file is
        read whole, then split.

        Raises:
            SeqkitError: a line over :data:`MAX_LINE` bytes or not UTF-8 (named by number), an
                unreadable file.
        """
        return _lines_of(self)


#: the longest line :meth:`StreamRequest.lines` reads from standard input (bytes)
MAX_LINE = 1 << 20


def _lines_of(request: "StreamRequest") -> Iterator[str]:
    if request.text is not None or (request.input_path or "-") != "-":
        yield from request.read()[1].splitlines()
        return
    import sys

    stream = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else sys.stdin
    number = 0
    while True:
        raw = stream.readline(MAX_LINE + 1)
        if not raw:  # b"" or "": the end of the input
            return
        number += 1
        if len(raw) > MAX_LINE:
            raise SeqkitError(f"<stdin>:{number}: a line longer than {MAX_LINE} bytes; a stream reads "
                              f"one record a line.")
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SeqkitError(f"<stdin>:{number}: not UTF-8 (byte {exc.start}: {exc.reason}); "
                                  f"convert the input first, e.g. `iconv -f GBK -t UTF-8`.") from exc
        yield raw.rstrip("\r\n")


def stream_export(export: str, request: StreamRequest) -> Iterator[str]:
    """Run an exported ``.tflite`` (an export directory, or the file alone) on ``request``; yield
    the text it prints, piece by piece (each piece printed as it is, line breaks included).

    Raises:
        SeqkitError: no export or invalid metadata (:func:`seqkit.runtime.streaming.read_export_metadata`),
            a head that is not registered here (named, with how to provide it), or a request the
            head refuses.
    """
    request.check()
    metadata = read_export_metadata(export)
    name = metadata.get("head")
    try:
        head = HEADS.get(name)
    except RegistryError as exc:
        raise SeqkitError(f"{export}: its metadata names the head '{name}', which is not registered "
                          f"here ({exc}). Install the plugin that provides it, or pass its file "
                          f"(`--plugin path/to/head.py`) or module (`--plugin package.module`).") from exc
    yield from head.stream_export(export, metadata, request)


def stream(export: str, **options) -> str:
    """:func:`stream_export` as one string (what ``seqkit stream`` prints): ``options`` are
    :class:`StreamRequest`'s fields (``prompt=``, ``text=``, ``max_length=``, ``greedy=`` ...).

    Raises:
        SeqkitError: as :func:`stream_export`; an unknown option.
    """
    fields = {f.name for f in dataclasses.fields(StreamRequest)}
    bad = sorted(set(options) - fields)
    if bad:
        raise SeqkitError(f"stream: unknown option(s) {', '.join(bad)}; expected {', '.join(sorted(fields))}.")
    return "".join(stream_export(export, StreamRequest(**options)))
