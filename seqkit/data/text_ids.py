"""Raw strings -> token ids inside the TensorFlow graph, equal to the Python readers' ids.

The Python side splits and looks up text with :func:`seqkit.data.vocab.tokenize` and
:meth:`seqkit.data.vocab.Vocabulary.encode`; a served model (:mod:`seqkit.inference.serving`) has to do
the same with ``tf.strings`` ops so that a SavedModel takes plain text. Every step copies a
Python rule exactly:

* ``"char"``: ``list(text)``, one token per Unicode code point = ``tf.strings.unicode_split``.
* ``"whitespace"``: ``str.split()``, which splits on every character with ``str.isspace()``
  (no-break space U+00A0, ideographic space U+3000, U+2028, the ASCII separators ``\\x1c``-``\\x1f``,
  ...), while ``tf.strings.split`` splits on ASCII white space only: those characters are
  replaced by a space first (:data:`PY_SPACE`).
* ``str.strip()`` (seq2seq sources): the same set of characters, at both ends.
* ``str.lower()`` (``data.lowercase``): Python's *full* case mapping, which ``tf.strings.lower``
  (ICU simple case mapping) does not give: U+0130 ``İ`` becomes ``i`` + U+0307 (two code
  points), and a capital sigma ``Σ`` at the end of a word becomes the final form ``ς``
  (Unicode 15, section 3.13, *Final_Sigma*: preceded by a cased letter and zero or more
  case-ignorable characters, not followed by case-ignorable characters and a cased letter).
  Here: the Final_Sigma rule as one RE2 replacement (its character classes read from this
  Python's ``str.lower``), then every code point through a table of the 1,433 code points whose
  ``lower()`` differs from themselves (the mapping of this Python's Unicode database).
* Lookup: a ``tf.lookup.StaticHashTable`` from the vocabulary (token -> position; unknown ->
  ``UNK_ID``), what :meth:`Vocabulary.encode` does.

Heads lower at different points: the language model and the seq2seq head lower the whole text
and then split it (``tokenize(text, mode, lowercase)``); the acceptor and tagger split first
and lower each token (:meth:`seqkit.heads.sequence.inputs.SequenceInputs.encode`). They differ
for ``İ`` in ``"char"`` mode (one token ``"i̇"`` against two tokens), so
:class:`TextEncoder` takes ``lower_tokens``.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import functools
import sys

from seqkit.data.vocab import UNK_ID


def _re2_class(codes: list[int]) -> str:
    """``[...]`` RE2 character class of the code points ``codes`` (sorted), as ranges."""
    parts, i = [], 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        parts.append(f"\\x{{{codes[i]:x}}}" + (f"-\\x{{{codes[j]:x}}}" if j > i else ""))
        i = j + 1
    return "[" + "".join(parts) + "]"


#: Every character ``str.isspace()`` accepts (what ``str.split()`` and ``str.strip()`` use), as
#: an RE2 class (tests/test_serving.py checks it against ``str.isspace``).
PY_SPACE = r"[\x{9}-\x{d}\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}-\x{2029}\x{202f}\x{205f}\x{3000}]"


@functools.lru_cache(maxsize=1)
def lower_mapping() -> dict:
    """``{character: character.lower()}`` for every code point that ``lower()`` changes."""
    out = {}
    for c in range(sys.maxunicode + 1):
        if 0xD800 <= c < 0xE000:
            continue
        ch = chr(c)
        low = ch.lower()
        if low != ch:
            out[ch] = low
    return out


@functools.lru_cache(maxsize=1)
def final_sigma_pattern() -> str:
    """The RE2 pattern whose group 1 + ``ς`` + group 2 + group 3 replaces a final ``Σ``.

    ``(C I*)Σ(I*)(X|$)`` with ``C`` a cased character that is not case-ignorable, ``I`` a
    case-ignorable one, ``X`` one that is neither. The classes are read from ``str.lower``
    itself: ``x`` is cased-not-ignorable when ``(" " + x + "Σ").lower()`` ends in ``ς``, and
    case-ignorable when ``("Α" + x + "Σ").lower()`` does and the first test failed (CPython's
    ``handle_capital_sigma`` skips ignorable characters first, so a character that is both
    counts as ignorable).
    """
    cased, ignorable = [], []
    for c in range(sys.maxunicode + 1):
        if 0xD800 <= c < 0xE000:
            continue
        x = chr(c)
        if (" " + x + "Σ").lower()[-1] == "ς":
            cased.append(c)
        elif ("Α" + x + "Σ").lower()[-1] == "ς":
            ignorable.append(c)
    C, I = _re2_class(cased), _re2_class(ignorable)  # noqa: E741
    neither = "[^" + C[1:-1] + I[1:-1] + "]"
    return f"({C}{I}*)\u03a3({I}*)({neither}|$)"


def needs_final_sigma(vocab) -> bool:
    """Whether the Final_Sigma rule can change an id: only when a token holds ``σ`` or ``ς``
    (otherwise both forms are read as ``[UNK]`` alike and the rule is skipped)."""
    return any("\u03c3" in t or "\u03c2" in t for t in vocab.tokens)


class TextEncoder:
    """In-graph tokenizer + vocabulary lookup of one run (see the module docstring).

    Args:
        vocab: the :class:`~seqkit.data.vocab.Vocabulary`.
        tokenizer: ``"char"`` or ``"whitespace"``.
        lowercase: apply ``str.lower()`` as the run does.
        lower_tokens: lower each token after splitting (acceptor, tagger); else the whole text
            before splitting (language model, seq2seq).
        strip: strip white space at both ends first (seq2seq sources, ``str.strip()``).

    Attributes:
        tables: the ``tf.lookup`` tables to track in a SavedModel.
    """

    def __init__(self, vocab, *, tokenizer: str, lowercase: bool, lower_tokens: bool, strip: bool = False):
        import tensorflow as tf

        self.tokenizer, self.lowercase, self.lower_tokens, self.strip = tokenizer, lowercase, lower_tokens, strip
        self.ids = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(vocab.tokens, tf.string),
                                                tf.range(len(vocab.tokens), dtype=tf.int32)),
            default_value=UNK_ID)
        self.tables = [self.ids]
        self.sigma = None
        if lowercase:
            low = lower_mapping()
            self.lower_table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(tf.constant(list(low), tf.string),
                                                    tf.constant(list(low.values()), tf.string)),
                default_value="")
            self.tables.append(self.lower_table)
            # a single character token never sees a context: list(text) then .lower() per token
            if needs_final_sigma(vocab) and not (lower_tokens and tokenizer == "char"):
                self.sigma = final_sigma_pattern()

    def lower(self, strings):
        """``str.lower()`` of each string of a ``[N]`` tf.string tensor."""
        import tensorflow as tf

        if self.sigma is not None:
            strings = tf.strings.regex_replace(strings, self.sigma, "\\1\u03c2\\2\\3")
        chars = tf.strings.unicode_split(strings, "UTF-8")
        mapped = self.lower_table.lookup(chars.flat_values)
        low = chars.with_flat_values(tf.where(tf.equal(mapped, ""), chars.flat_values, mapped))
        return tf.strings.reduce_join(low, axis=-1)

    def _split(self, text):
        import tensorflow as tf

        if self.tokenizer == "char":
            return tf.strings.unicode_split(text, "UTF-8")
        return tf.strings.split(tf.strings.regex_replace(text, PY_SPACE, " "))

    def encode(self, text):
        """``text [B] tf.string -> (tokens [B, (T)] tf.string, ids [B, (T)] int32)``, ragged.

        ``tokens`` are the tokens before lowering when the run lowers tokens (acceptor, tagger:
        what ``seqkit predict`` prints beside the tags); after it otherwise.
        """
        import tensorflow as tf

        text = tf.convert_to_tensor(text, tf.string)
        if self.strip:
            text = tf.strings.regex_replace(text, f"^{PY_SPACE}+|{PY_SPACE}+$", "")
        if self.lowercase and not self.lower_tokens:
            text = self.lower(text)
        tokens = self._split(text)
        keys = tokens
        if self.lowercase and self.lower_tokens:
            keys = tokens.with_flat_values(self.lower(tokens.flat_values))
        return tokens, keys.with_flat_values(self.ids.lookup(keys.flat_values))
