"""Subword tokenizers: SentencePiece (Kudo & Richardson 2018) unigram or BPE models trained on
the training split, and :class:`TextTokenizer`, the one object that turns text into token strings
and back for every ``data.tokenizer``.

Models (``data.subword.model_type``):

* ``unigram``: the unigram language model of Kudo (2018), "Subword Regularization", pieces
  pruned by EM from a large seed set; text is segmented by its most probable (Viterbi) split.
* ``bpe``: byte-pair encoding (Sennrich et al. 2016), merges of the most frequent adjacent pair.

Training is deterministic (one thread, no sentence sampling or shuffling) and reads the
*training split only*; the model is written into the run directory as ``subword.model`` (the
target side of a seq2seq run: ``target_subword.model``) and copied into every export, so
loading a run or an export never needs the training data.

Lossless text: the model uses the ``identity`` normalization (no NFKC) and keeps white space
as it is (``remove_extra_whitespaces: false``), so ``detokenize(pieces(x)) == x`` for any
``x`` whose characters all are pieces (every character of the training text with
``character_coverage: 1.0``; with ``byte_fallback: true`` any UTF-8 text).

Ids: seqkit's :class:`~seqkit.data.vocab.Vocabulary` keeps its special ids (0 padding,
1 ``[UNK]``, 2 ``<s>``, 3 ``</s>``) and lists the model's pieces after them in the model's
order; SentencePiece's own ``<unk>`` (its id 0) is seqkit's ``[UNK]``. So
``data.subword.vocab_size`` pieces (``<unk>`` included) make a vocabulary of
``vocab_size + 3`` ids; ``data.min_count`` and ``data.max_vocab`` do not apply.

How records reach it: data sources split raw text by ``tokenize(text, "sentencepiece")``
into its characters (lossless: the pieces need the model, which needs the split), and the
heads re-segment the joined characters with the trained model (:meth:`TextTokenizer.split`).
Length limits read before training (``data.max_length`` in ``head.too_long`` checks and
language-model line chunking) therefore count characters, an upper bound of the pieces.

The optional package sentencepiece is imported where used, so seqkit works without it.
"""

from __future__ import annotations

import io
import os

from seqkit.data.vocab import SPECIALS, Vocabulary, tokenize
from seqkit.errors import DataError, RunDirError, SeqkitError
from seqkit.export import embedded_metadata
from seqkit.export.embedded_metadata import tokenization
from seqkit.recipe import SubwordConfig
from seqkit.runs.rundir import SUBWORD_MODEL, TARGET_SUBWORD_MODEL  # noqa: F401  (the model files' names)

MAX_MODEL_BYTES = 1 << 30  # a sentencepiece model file is read whole; a 10^6-piece model is ~20 MiB


def _spm():
    """The ``sentencepiece`` module.

    Raises:
        SeqkitError: it is not installed (the ``subword`` extra).
    """
    try:
        import sentencepiece
    except ImportError as exc:
        raise SeqkitError("data.tokenizer sentencepiece needs the sentencepiece package: "
                          "pip install \"seqkit[subword]\".") from exc
    return sentencepiece


class SubwordModel:
    """A trained SentencePiece model.

    Args:
        proto: the serialized model (the bytes of a ``.model`` file).

    Raises:
        ValueError: ``proto`` is no SentencePiece model.
    """

    def __init__(self, proto: bytes):
        spm = _spm()
        self.proto = bytes(proto)
        self.sp = spm.SentencePieceProcessor()
        self.sp.LoadFromSerializedProto(self.proto)  # raises on bad bytes

    # ---------------------------------------------------------------- train
    @classmethod
    def train(cls, texts, *, model_type: str = "unigram", vocab_size: int = 1000,
              character_coverage: float = 1.0, byte_fallback: bool = False,
              key: str = "data.subword") -> "SubwordModel":
        """Train on ``texts`` (the training split's strings; iterated once, in order).

        Args:
            texts: the training strings (empty ones are skipped).
            model_type: ``"unigram"`` or ``"bpe"``.
            vocab_size: pieces of the model, its ``<unk>`` included.
            character_coverage: share of the training characters that must be pieces (rarer
                ones are ``<unk>``); 1.0 keeps every character.
            byte_fallback: spell characters outside the pieces as UTF-8 byte pieces (256 of
                them, counted in ``vocab_size``) instead of ``<unk>``.
            key: the recipe key named in errors.

        Returns:
            The model.

        Raises:
            DataError: no training text, or ``vocab_size`` does not suit the text (too high
                for it, or below the distinct characters it must keep), naming ``key``.
        """
        spm = _spm()
        lines = [t for t in texts if t]
        if not lines:
            raise DataError(f"{key}: no training text to learn the sentencepiece model from.")
        buf = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(lines), model_writer=buf, model_type=model_type,
                vocab_size=vocab_size, character_coverage=character_coverage, byte_fallback=byte_fallback,
                normalization_rule_name="identity", remove_extra_whitespaces=False,
                unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1, num_threads=1, minloglevel=2,
                shuffle_input_sentence=False, input_sentence_size=0, max_sentence_length=1 << 20,
                split_digits=False, hard_vocab_limit=True)
        except RuntimeError as exc:
            why = str(exc).split("] ", 1)[-1]
            raise DataError(f"{key}.vocab_size {vocab_size}: sentencepiece ({model_type}) cannot "
                            f"make that many pieces from the training split ({len(lines)} lines): "
                            f"{why} Set {key}.vocab_size within the bound it names.") from exc
        return cls(buf.getvalue())

    # ---------------------------------------------------------------- io
    def save(self, path: str) -> None:
        """Write the ``.model`` bytes (staged: a temporary file renamed into place)."""
        tmp = path + ".tmp"  # the temporary name a run directory allows (seqkit.runs.rundir.is_run_name)
        try:
            with open(tmp, "wb") as f:
                f.write(self.proto)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise

    @classmethod
    def load(cls, path: str) -> "SubwordModel":
        """Read a ``.model`` file.

        Raises:
            RunDirError: missing or not a SentencePiece model.
        """
        try:
            if not os.path.isfile(path) or os.path.getsize(path) > MAX_MODEL_BYTES:
                raise ValueError(f"not a regular file of at most {MAX_MODEL_BYTES:,} bytes")
            with open(path, "rb") as f:
                return cls(f.read(MAX_MODEL_BYTES + 1))
        except (OSError, ValueError, RuntimeError) as exc:
            raise RunDirError(f"{path}: cannot read the sentencepiece model ({exc}); the run "
                              f"directory or export is incomplete, train or export again.") from exc

    # ---------------------------------------------------------------- pieces
    @property
    def model_type(self) -> str:
        from sentencepiece import sentencepiece_model_pb2 as pb

        m = pb.ModelProto()
        m.ParseFromString(self.proto)
        return pb.TrainerSpec.ModelType.Name(m.trainer_spec.model_type).lower()

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def vocabulary_tokens(self) -> list[str]:
        """The model's pieces in its id order, without ``<unk>`` and control pieces (and any
        piece spelled like a seqkit special)."""
        return [self.sp.id_to_piece(i) for i in range(len(self))
                if not (self.sp.is_unknown(i) or self.sp.is_control(i))
                and self.sp.id_to_piece(i) not in SPECIALS]

    def pieces(self, text: str) -> list[str]:
        """``text`` -> piece strings (a character outside the pieces comes back as itself, which
        seqkit's vocabulary reads as ``[UNK]``)."""
        return self.sp.encode(text, out_type=str)

    def detokenize(self, pieces: list[str]) -> str:
        """Piece strings -> text (``▁`` back to spaces; a string that is no piece, e.g.
        ``[UNK]``, decodes as SentencePiece's `` ⁇ ``)."""
        return self.sp.decode([self.sp.piece_to_id(p) for p in pieces])

    def describe(self) -> str:
        return f"sentencepiece {self.model_type}, {len(self)} pieces"


class TextTokenizer:
    """Text -> token strings and back, as ``data.tokenizer`` says.

    Args:
        mode: ``"char"`` (code points), ``"whitespace"`` (``str.split()``) or
            ``"sentencepiece"`` (pieces of ``model``).
        lowercase: lower-case text before splitting (``data.lowercase``).
        model: the :class:`SubwordModel` (``sentencepiece`` only).
    """

    def __init__(self, mode: str, lowercase: bool = False, model: SubwordModel | None = None):
        if mode == "sentencepiece" and model is None:
            raise ValueError("the sentencepiece tokenizer needs its trained model")
        self.mode, self.lowercase, self.model = mode, lowercase, model

    @classmethod
    def fit(cls, mode: str, lowercase: bool, texts, subword=None, *, key: str = "data.subword") -> "TextTokenizer":
        """The tokenizer for ``mode``; ``sentencepiece`` trains its model on ``texts`` (the
        training split only) with the recipe's ``subword`` settings (:class:`seqkit.recipe.SubwordConfig`)."""
        if mode != "sentencepiece":
            return cls(mode, lowercase)

        s = subword or SubwordConfig()
        texts = (t.lower() if lowercase else t for t in texts)
        return cls(mode, lowercase, SubwordModel.train(
            texts, model_type=s.model_type, vocab_size=s.vocab_size,
            character_coverage=s.character_coverage, byte_fallback=s.byte_fallback, key=key))

    def split(self, text: str) -> list[str]:
        """A string -> its tokens."""
        if self.mode != "sentencepiece":
            return tokenize(text, self.mode, self.lowercase)
        return self.model.pieces(text.lower() if self.lowercase else text)

    def join(self, tokens: list[str]) -> str:
        """Tokens -> text: concatenated (char), spaced (whitespace) or decoded (sentencepiece)."""
        if self.mode == "sentencepiece":
            return self.model.detokenize(list(tokens))
        return ("" if self.mode == "char" else " ").join(tokens)

    def vocabulary(self):
        """The seqkit :class:`~seqkit.data.vocab.Vocabulary` of the model's pieces (sentencepiece)."""
        return Vocabulary(list(SPECIALS) + self.model.vocabulary_tokens())

    def save(self, folder: str, name: str = SUBWORD_MODEL) -> None:
        """Write the model into ``folder`` (nothing for char/whitespace)."""
        if self.model is not None:
            self.model.save(os.path.join(folder, name))

    @classmethod
    def load(cls, folder: str, mode: str, lowercase: bool, name: str = SUBWORD_MODEL,
             vocab: list | None = None) -> "TextTokenizer":
        """The tokenizer a run directory or export folder saved (:meth:`save`). ``folder`` may
        also be an export's ``.tflite`` (or a folder without the model file): the file embedded in
        the model (:mod:`seqkit.export.embedded_metadata`, ``seqkit_file:NAME``) is read then.

        Args:
            vocab: the token list the model's ids index (``vocab.json``, an export's ``vocab``):
                every token but seqkit's specials must be a piece of a sentencepiece model.

        Raises:
            RunDirError: ``sentencepiece`` and the model file is missing or unreadable, or it lacks
                pieces ``vocab`` lists (a cut or replaced file: its text would be split into
                other pieces, read as other ids, silently).
        """
        tok = cls._load(folder, mode, lowercase, name)
        if vocab is not None and tok.model is not None:
            pieces = {tok.model.sp.id_to_piece(i) for i in range(len(tok.model))}
            missing = [t for t in vocab if t not in pieces and t not in SPECIALS]
            if missing:
                raise RunDirError(f"{os.path.join(folder, name) if os.path.isdir(folder) else folder}: the "
                                  f"sentencepiece model ({len(tok.model)} pieces) lacks {len(missing)} of the "
                                  f"vocabulary's tokens (e.g. {missing[0]!r}): the model file or the vocabulary "
                                  f"was cut, damaged or replaced. Train or export again.")
        return tok

    @classmethod
    def _load(cls, folder: str, mode: str, lowercase: bool, name: str) -> "TextTokenizer":
        if mode != "sentencepiece":
            return cls(mode, lowercase)
        if not isinstance(name, str) or os.path.basename(name) != name or name in ("", ".", ".."):
            raise RunDirError(f"{folder}: the sentencepiece model is named {name!r}, not a file name "
                              f"inside it; seqkit reads a tokenizer only from the run or export itself. "
                              f"Export or train again.")
        path = os.path.join(folder, name)
        if not os.path.isfile(path):  # an export's .tflite carries the model file inside
            model = folder if os.path.isfile(folder) else os.path.join(folder, "model.tflite")
            if os.path.isfile(model) and model.endswith(".tflite"):
                inside = embedded_metadata.read_files(model).get(name)
                if inside:
                    return cls(mode, lowercase, SubwordModel(inside))
        return cls(mode, lowercase, SubwordModel.load(path))

    @classmethod
    def from_export(cls, folder: str, metadata: dict, side: str = "source") -> "TextTokenizer":
        """The tokenizer of an export (``metadata.json``'s ``tokenizer``/``subword_model``, or for
        ``side="target"`` ``target_tokenizer``/``target_subword_model``)."""
        if side == "target":
            mode = tokenization(metadata, "target")
            return cls.load(folder, mode, False, metadata.get("target_subword_model") or TARGET_SUBWORD_MODEL,
                            vocab=metadata.get("target_vocab"))
        mode = tokenization(metadata)
        return cls.load(folder, mode, bool(metadata.get("lowercase")),
                        metadata.get("subword_model") or SUBWORD_MODEL, vocab=metadata.get("vocab"))

    def describe(self) -> str:
        return self.model.describe() if self.model is not None else self.mode
