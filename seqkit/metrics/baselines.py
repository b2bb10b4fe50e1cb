"""Count-based baselines: n-gram language models, the baseline every neural LM must beat, and
(:class:`MostFrequentTargetPerSymbol`) the per-symbol lookup an aligned transducer must beat.

Interpolated absolute discounting (Ney, Essen & Kneser 1994, eq. 8; Chen &
Goodman 1998, sec. 2.6)::

    P(w | h) = max(c(h w) - D, 0) / c(h) + D * N1+(h .) / c(h) * P(w | h')

with ``h'`` the history without its oldest token, and the recursion ending
in the uniform distribution over the vocabulary ``1 / V``. Histories never
seen fall straight through to ``P(w | h')``. Sequences are padded on the left
with the start id and scored on every token plus the end id, exactly the
positions a seqkit language model is scored on.
"""

from __future__ import annotations

import bz2
import collections
import lzma
import math
import os
import shutil
import subprocess
import tempfile
import zlib
from typing import Iterable, Sequence

from seqkit.data.vocab import END_ID, START_ID
from seqkit.metrics.perplexity import perplexity


class NGramLM:
    """An order-``n`` interpolated absolutely discounted n-gram model over ids.

    Args:
        order: n (1 = unigram).
        vocab_size: V, the number of predictable ids (the uniform floor is 1/V).
        discount: D in ``(0, 1)``; 0.75 is the customary value.
    """

    def __init__(self, order: int, vocab_size: int, discount: float = 0.75):
        if order < 1:
            raise ValueError("order must be >= 1")
        self.n, self.V, self.D = order, vocab_size, discount
        # counts[k][history tuple of length k][token] for k = 0..n-1
        self.counts = [collections.defaultdict(collections.Counter) for _ in range(order)]
        self._totals = None

    def fit(self, sequences: Iterable[Sequence[int]]) -> "NGramLM":
        """Count n-grams of ``[<s>]*(n-1) + seq + [</s>]`` for each id sequence."""
        for seq in sequences:
            padded = [START_ID] * (self.n - 1) + list(seq) + [END_ID]
            for i in range(self.n - 1, len(padded)):
                w = padded[i]
                for k in range(self.n):
                    self.counts[k][tuple(padded[i - k:i])][w] += 1
        self._totals = [{h: (sum(c.values()), len(c)) for h, c in level.items()} for level in self.counts]
        return self

    def prob(self, history: Sequence[int], w: int) -> float:
        """``P(w | history)`` (the last ``n - 1`` ids of history are used)."""
        p = 1.0 / self.V
        hist = tuple(history[len(history) - (self.n - 1):]) if self.n > 1 else ()
        for k in range(0, self.n):  # from unigram up to the full order
            h = hist[len(hist) - k:] if k else ()
            tot = self._totals[k].get(h)
            if tot is None:
                continue
            total, types = tot
            c = self.counts[k][h].get(w, 0)
            p = max(c - self.D, 0.0) / total + self.D * types / total * p
        return p

    def nll(self, sequences: Iterable[Sequence[int]]) -> tuple[float, int]:
        """Total negative log-likelihood (nats) and token count, end ids included."""
        total, count = 0.0, 0
        for seq in sequences:
            padded = [START_ID] * (self.n - 1) + list(seq) + [END_ID]
            for i in range(self.n - 1, len(padded)):
                total -= math.log(self.prob(padded[i - self.n + 1:i] if self.n > 1 else [], padded[i]))
                count += 1
        return total, count

    def perplexity(self, sequences: Iterable[Sequence[int]]) -> float:
        """``exp(NLL / tokens)`` (:func:`seqkit.metrics.perplexity.perplexity`: ``inf``, not an
        ``OverflowError``, above 709.78 nats)."""
        total, count = self.nll(sequences)
        return perplexity(total / max(count, 1))


def _xz(data: bytes) -> bytes:
    return lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)


def _bzip2(data: bytes) -> bytes:
    return bz2.compress(data, 9)


def _zlib(data: bytes) -> bytes:
    return zlib.compress(data, 9)


#: The standard library's compressors at their strongest settings, by the name a report shows.
COMPRESSORS = {"xz -9e": _xz, "bzip2 -9": _bzip2, "zlib -9": _zlib}


def _with_binary(argv, suffix: str):
    """``bytes -> bytes`` through an archiver on the path: ``argv`` with ``{out}`` / ``{inp}`` filled
    with an archive and an input file in a fresh temporary folder; the archive's bytes come back."""
    def compress(data: bytes) -> bytes:
        with tempfile.TemporaryDirectory() as d:
            inp, out = os.path.join(d, "text.txt"), os.path.join(d, "text" + suffix)
            with open(inp, "wb") as f:
                f.write(data)
            subprocess.run([a.format(out=out, inp=inp) for a in argv], check=True, cwd=d,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(out, "rb") as f:
                return f.read()
    return compress


def external_compressors() -> dict:
    """The context-mixing and PPM compressors found on the path, by the name a report shows.

    ``zpaq -m5`` (``zpaq``) and ``PPMd order 8`` (``7z``, ``7za`` or ``7zz``, ``-m0=PPMd:o=8``).

    Returns:
        ``{name: bytes -> bytes}`` for a binary found, ``{name: str}`` (why it is absent) otherwise.
    """
    out: dict = {}
    zpaq = shutil.which("zpaq")
    out["zpaq -m5"] = _with_binary([zpaq, "a", "{out}", "text.txt", "-m5"], ".zpaq") if zpaq \
        else "absent: no zpaq binary on PATH (Debian package zpaq)"
    seven = next((b for b in ("7zz", "7z", "7za") if shutil.which(b)), None)
    out["PPMd order 8"] = _with_binary([shutil.which(seven), "a", "-t7z", "-m0=PPMd:o=8:mem=256m",
                                        "{out}", "text.txt"], ".7z") if seven \
        else "absent: no 7z / 7za / 7zz binary on PATH (Debian package 7zip)"
    return out


def compressor_bits(train_text: str, held_out_text: str, tokens: int) -> dict:
    """Marginal bits per token of every compressor: the standard library's (:data:`COMPRESSORS`)
    and those on the path (:func:`external_compressors`).

    Args:
        train_text: the text read first.
        held_out_text: the text scored.
        tokens: the tokens a model is scored on for it (the divisor).

    Returns:
        ``{name: bits per token (float, 4 decimals) or the reason it is absent (str)}``.
    """
    out: dict = {}
    for name, compress in {**COMPRESSORS, **external_compressors()}.items():
        if isinstance(compress, str):
            out[name] = compress
            continue
        try:
            bits = marginal_compressed_bits(train_text, held_out_text, compress)
        except (OSError, subprocess.CalledProcessError) as exc:
            out[name] = f"failed: {exc}"
            continue
        out[name] = round(bits / max(tokens, 1), 4)
    return out


def marginal_compressed_bits(train_text: str, held_out_text: str, compress) -> int:
    """Bits a compressor spends on ``held_out_text`` once it has read ``train_text``.

    ``8 * (len(compress(train + held_out)) - len(compress(train)))`` over the UTF-8 bytes:
    the marginal code length of the held-out text given the training text, the usual way to
    put a compressor beside a language model (a compressor adapts as it reads, so it is
    "trained" on the text before the held-out part).

    Args:
        train_text: the training text (``str``).
        held_out_text: the text to score (``str``), appended directly after ``train_text``.
        compress: ``bytes -> bytes``, e.g. a value of :data:`COMPRESSORS`.

    Returns:
        The marginal size in bits (``int``; can be 0 or, for tiny texts, slightly negative
        through block-boundary effects).
    """
    a = train_text.encode("utf-8")
    b = held_out_text.encode("utf-8")
    return 8 * (len(compress(a + b)) - len(compress(a)))


def compression_perplexities(train_lines: Sequence[str], held_out: dict[str, Sequence[str]],
                             token_counts: dict[str, int]) -> dict[str, dict[str, float]]:
    """Per-token perplexity that each compressor's marginal code length implies.

    Each split's text is its lines joined with ``"\\n"`` plus a final ``"\\n"`` (the newline
    standing for the end-of-line marker a line model scores), appended to the training text
    made the same way. A code of ``B`` bits for ``N`` scored tokens is a per-token perplexity
    ``2 ** (B / N)``, directly comparable to a language model's perplexity on the same tokens
    (for a character model, ``B / N`` is also bits per character, newlines counted).

    Args:
        train_lines: the training split's lines.
        held_out: ``{split: lines}`` to score.
        token_counts: ``{split: N}``, the number of tokens (end markers included) the model
            is scored on for that split.

    Returns:
        ``{compressor name: {split: perplexity}}``, rounded to 4 decimals.
    """
    train = "\n".join(train_lines) + "\n"
    out: dict[str, dict[str, float]] = {}
    for name, compress in COMPRESSORS.items():
        out[name] = {}
        for split, lines in held_out.items():
            bits = marginal_compressed_bits(train, "\n".join(lines) + "\n", compress)
            out[name][split] = round(2.0 ** (bits / max(token_counts[split], 1)), 4)
    return out


class MostFrequentTargetPerSymbol:
    """Baseline transducer for *aligned* pairs (one target symbol per source symbol, e.g. a
    Chinese character and its pinyin syllable): each source symbol's most frequent target symbol
    in training; an unseen source symbol gets the most frequent target symbol overall (ties: the
    one seen first). The per-word most-frequent-tag baseline of tagging (e.g. Manning &
    Schuetze 1999, sec. 10.1) applied position by position.

    Args:
        pairs: ``(source symbols, target symbols)`` training pairs of equal lengths.

    Raises:
        ValueError: no pairs, or a pair of unequal lengths.
    """

    def __init__(self, pairs: Iterable[tuple[Sequence[str], Sequence[str]]]):
        per_symbol: dict = collections.defaultdict(collections.Counter)
        overall: collections.Counter = collections.Counter()
        for src, tgt in pairs:
            if len(src) != len(tgt):
                raise ValueError(f"an unaligned pair: {len(src)} source but {len(tgt)} target symbols")
            for s, t in zip(src, tgt):
                per_symbol[s][t] += 1
                overall[t] += 1
        if not overall:
            raise ValueError("no training pairs")
        self.table = {s: c.most_common(1)[0][0] for s, c in per_symbol.items()}
        self.default = overall.most_common(1)[0][0]

    def __call__(self, source: Sequence[str]) -> list:
        """Target symbols for source symbols (one each)."""
        return [self.table.get(s, self.default) for s in source]
