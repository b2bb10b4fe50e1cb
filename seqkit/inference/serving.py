"""Text in, text out: a run as a model whose input is raw strings (``Run.serving_model()``, and
the SavedModel signatures ``predict_text`` / ``generate_text`` of ``seqkit export``).

Tokenization, lowercasing and the vocabulary lookup run in the graph
(:class:`seqkit.data.text_ids.TextEncoder`, the same ids as ``seqkit predict``), so
``model.predict(["some text"])`` and TF Serving need none of seqkit's Python. One string is one
sequence (line breaks inside it are not split, unlike a file given to ``seqkit predict``).
``B`` = strings, ``T`` = tokens (the longest of the batch; shorter rows padded), ``C`` = classes,
``N`` = ``decoding.n_best``. Outputs per head:

* acceptor, ``predict_text(text [B])``: ``label [B]`` string, ``probability [B]`` float32 (of
  that label), ``probabilities [B, C]`` float32 (softmax, classes in ``labels.json`` order);
  an empty string (no token) gets label ``""`` and zero probabilities.
* tagger, ``predict_text``: ``tokens [B, T]`` and ``tags [B, T]`` strings (padded with ``""``),
  ``lengths [B]`` int32 (tagged steps), ``probabilities [B, T, C]`` (softmax; a CRF tagger:
  Viterbi tags and the CRF marginals, as ``seqkit predict``).
* language model, ``generate_text(text [B])``: ``text [B]``, the prompt and its greedy
  continuation of at most ``max_length`` tokens (``decoding.max_length``), as
  ``run.generate(prompt, greedy=True)`` (each prompt decoded on its own, so rows of different
  lengths need no padding).
* seq2seq, ``predict_text(text [B])``: beam search with the recipe's ``decoding`` (beam width,
  n-best, length penalty): ``output [B]`` (the best hypothesis, symbols joined by spaces),
  ``hypotheses [B, N]``, ``scores [B, N]`` float32, as ``run.transduce``; ``generate_text``:
  greedy ``output [B]``. An empty source gives ``""`` (score 0).

Inputs longer than the run's ``data.max_length`` follow ``head.too_long`` (``truncate``;
``split``: tagged in pieces; ``refuse``: the call fails with ``InvalidArgumentError`` naming
the limit); a seq2seq source that long is refused, as by ``seqkit predict``.

TensorFlow, Keras and the seqkit modules that import them and NumPy are imported inside the
functions that use them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import functools

from seqkit.data.base import text_tokenizer
from seqkit.data.text_ids import TextEncoder
from seqkit.data.vocab import END_ID, PAD_ID, START_ID
from seqkit.errors import SeqkitError
from seqkit.inference.decoding import decode
from seqkit.registry import HEADS

def text_unsupported(prep) -> str | None:
    """Why the run cannot take raw text (a sentence for messages), or None when it can: the
    head's own answer (:meth:`seqkit.heads.base.Head.text_unsupported`)."""
    return prep.head.text_unsupported()


def text_reason(head) -> str | None:
    """The reasons shared by the text signatures below: inputs that are not tokens of a vocabulary
    the graph can look up (frames, character-aware words, sentencepiece pieces), or None."""
    inputs = getattr(head, "inputs", None)
    if inputs is not None and inputs.kind != "tokens":
        return (f"it reads {inputs.width}-channel frames, not text (feed frames to the `predict` "
                f"signature of `seqkit export --format saved_model` instead)")
    if inputs is not None and inputs.chars is not None:
        return ("it reads each word's characters too (model.char_embedding), which the text "
                "signatures do not look up: use run.predict, `seqkit stream` (it packs the "
                "characters itself) or the id signatures (tokens [B, T, 1 + max_chars])")
    d = head.recipe.data
    if d.tokenizer == "sentencepiece" or getattr(head, "target_subword", False):
        return ("its tokenizer is sentencepiece, whose pieces the graph cannot cut with tf.strings "
                "alone (TensorFlow Text's SentencepieceTokenizer would; seqkit does not depend on it): "
                "use run.predict / run.generate / run.transduce, or the id signatures of the export")
    return None


#: the text signatures of each role: ``{role: {signature name: TextFunctions method}}``
ROLES = {"classify": {"predict_text": "classify"}, "tag": {"predict_text": "tag"},
         "generate": {"generate_text": "generate"}}


def _names(values):
    import tensorflow as tf

    return tf.constant(list(values), tf.string)


def _dense(ids):
    """Ragged ``[B, (T)]`` ids -> ``[B, max(T, 1)]`` padded with 0 (a recurrent layer needs a step)."""
    import tensorflow as tf

    x = ids.to_tensor(default_value=0)
    return tf.pad(x, [[0, 0], [0, tf.maximum(0, 1 - tf.shape(x)[1])]])


class TextFunctions:
    """The text signatures of one loaded run (see the module docstring).

    Args:
        prep, model: the loaded run (:func:`seqkit.training.train.load_run`).
        role: what the head's signatures do (:data:`ROLES`, or a subclass's own, e.g. an
            encoder-decoder's ``"transduce"``): ``"classify"`` (one label per string), ``"tag"``
            (one tag per token), ``"generate"`` (continue the string).
        max_length: ``generate``'s most new tokens [default: ``decoding.max_length``].

    Attributes:
        signatures: ``{"predict_text" | "generate_text": fn(text [B] tf.string) -> dict}``.
        tables: the lookup tables to track in a SavedModel.

    Raises:
        SeqkitError: the run cannot take text (:func:`text_unsupported`).
    """

    roles = ROLES

    def __init__(self, prep, model, *, role: str, max_length: int | None = None):
        why = text_unsupported(prep)
        if why is not None:
            raise SeqkitError(f"this run cannot serve text: {why}.")
        self.prep, self.model, self.role = prep, model, role
        r = prep.recipe
        d = r.data
        if role in ("classify", "tag"):
            self.encoder = TextEncoder(prep.head.vocab, tokenizer=text_tokenizer(r), lowercase=d.lowercase,
                                       lower_tokens=True)
        else:
            self.encoder = TextEncoder(prep.head.vocab, tokenizer=d.tokenizer, lowercase=d.lowercase,
                                       lower_tokens=False, strip=role == "transduce")
        self.max_length = int(max_length or r.decoding.max_length)
        self.signatures = {name: getattr(self, method) for name, method in self.roles[role].items()}
        self.tables = list(self.encoder.tables)

    # ---------------------------------------------------------------- acceptor / tagger
    def _limit(self, ids, *, allow_split: bool):
        """``head.too_long`` on ragged ids: ``(ids, split)``, ``split`` True when rows must be
        tagged in pieces (``truncate`` keeps the first ``data.max_length``)."""
        import tensorflow as tf

        limit, policy = self.prep.recipe.data.max_length, self.prep.head.options.too_long
        if policy == "truncate":
            return ids[:, :limit], False
        if policy == "split" and allow_split:
            return ids, True
        check = tf.debugging.assert_less_equal(
            ids.row_lengths(), tf.cast(limit, tf.int64),
            message=f"an input is longer than the run's data.max_length = {limit} tokens "
                    f"(head.too_long: refuse); shorten it")
        with tf.control_dependencies([check]):
            return tf.identity(ids), False

    def classify(self, text):
        """``predict_text`` of an acceptor: ``{label [B], probability [B], probabilities [B, C]}``."""
        import tensorflow as tf

        _, ids = self.encoder.encode(text)
        ids, _ = self._limit(ids, allow_split=False)
        p = tf.nn.softmax(tf.cast(self.model(_dense(ids), training=False), tf.float32), axis=-1)
        some = ids.row_lengths() > 0
        p = tf.where(some[:, None], p, tf.zeros_like(p))
        best = tf.argmax(p, axis=-1, output_type=tf.int32)
        label = tf.where(some, tf.gather(_names(self.prep.head.labels.names), best), "")
        return {"label": label, "probability": tf.reduce_max(p, axis=-1), "probabilities": p}

    def _tag_rows(self, ids):
        """Dense ``ids [P, L]`` -> ``(tag ids [P, L] int32, probabilities [P, L, C])``."""
        import tensorflow as tf

        from seqkit.layers.crf import crf_layer

        z = tf.cast(self.model(ids, training=False), tf.float32)
        crf = crf_layer(self.model)
        if crf is None:
            p = tf.nn.softmax(z, axis=-1)
            return tf.argmax(p, axis=-1, output_type=tf.int32), p
        mask = tf.not_equal(ids, 0)
        return tf.cast(crf.decode(z, mask), tf.int32), crf.marginals(z, mask)

    def tag(self, text):
        """``predict_text`` of a tagger: ``{tokens, tags [B, T], lengths [B], probabilities [B, T, C]}``."""
        import tensorflow as tf

        tokens, ids = self.encoder.encode(text)
        ids, split = self._limit(ids, allow_split=True)
        lengths = ids.row_lengths()
        if split:  # head.too_long: split -- rows of at most data.max_length tokens, tagged apart
            limit = self.prep.recipe.data.max_length
            n = (lengths + limit - 1) // limit
            starts = tf.ragged.range(n) * limit
            piece_len = tf.minimum(tf.cast(limit, tf.int64), lengths[:, None] - starts).flat_values
            rows = tf.RaggedTensor.from_row_lengths(ids.flat_values, piece_len)
        else:
            rows, piece_len = ids, lengths
        tag, p = self._tag_rows(_dense(rows))
        width = tf.shape(tag)[1]
        valid = tf.sequence_mask(piece_len, width)
        tag = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(tag, valid), lengths)
        p = tf.RaggedTensor.from_row_lengths(tf.boolean_mask(p, valid), lengths)
        names = tf.RaggedTensor.from_row_lengths(tf.gather(_names(self.prep.head.labels.names), tag.flat_values),
                                                 lengths)
        if self.prep.head.options.too_long == "truncate":
            tokens = tokens[:, :self.prep.recipe.data.max_length]
        return {"tokens": tokens.to_tensor(default_value=""),
                "tags": names.to_tensor(default_value=""), "lengths": tf.cast(lengths, tf.int32),
                "probabilities": p.to_tensor(default_value=0.0)}

    # ---------------------------------------------------------------- language model
    def _vocab_text(self, ids, join: str):
        """Continuation ids ``[L]`` -> text: stop at ``</s>``, skip padding and ``<s>``
        (:meth:`Vocabulary.decode`)."""
        import tensorflow as tf

        ids = ids[:tf.reduce_min(tf.concat([tf.where(tf.equal(ids, END_ID))[:, 0],
                                            [tf.size(ids, out_type=tf.int64)]], 0))]
        ids = tf.boolean_mask(ids, tf.logical_and(ids != PAD_ID, ids != START_ID))
        return tf.strings.reduce_join(tf.gather(_names(self.prep.head.vocab.tokens), ids), separator=join)

    def generate(self, text):
        """``generate_text`` of a language model: ``{text [B]}``, prompt + greedy continuation."""
        import tensorflow as tf

        text = tf.convert_to_tensor(text, tf.string)
        tokens, ids = self.encoder.encode(text)
        st = self.prep.head.stepper(self.model)
        char = self.prep.recipe.data.tokenizer == "char"
        join = "" if char else " "

        def one(i):
            prompt = tf.concat([[START_ID], ids[i]], 0)[None, :]
            out, _ = decode(st.step, st.initial_state(1), prompt, max_length=self.max_length, greedy=True)
            cont = self._vocab_text(out[0], join)
            prefix = text[i] if char else tf.strings.reduce_join(tokens[i], separator=" ")
            glue = tf.where(tf.logical_and(tf.strings.length(prefix) > 0, tf.strings.length(cont) > 0),
                            join, "")
            return tf.strings.join([prefix, glue, cont])

        out = tf.map_fn(one, tf.range(tf.shape(text)[0]), fn_output_signature=tf.TensorSpec([], tf.string))
        return {"text": out}


def text_spec():
    """The input of every text signature: ``text [B] tf.string``."""
    import tensorflow as tf

    return tf.TensorSpec([None], tf.string, name="text")


def add_text_endpoints(archive, prep, model) -> list[str]:
    """Add ``predict_text`` / ``generate_text`` to a ``keras.export.ExportArchive`` tracking
    ``model``; nothing for a run that cannot take text. Returns the names added."""
    if text_unsupported(prep) is not None:
        return []
    fns = prep.head.text_functions(prep, model)
    for table in fns.tables:
        archive.track(table)
    for name, fn in fns.signatures.items():
        archive.add_endpoint(name, fn, input_signature=[text_spec()])
    return list(fns.signatures)


def serving_model(prep, model, *, greedy: bool = False, max_length: int | None = None):
    """A ``keras.Model`` from ``text [B]`` strings to the head's outputs (see :class:`ServingModel`).

    Args:
        prep, model: the loaded run.
        greedy: seq2seq only: greedy decoding (``generate_text``) instead of beam search.
        max_length: language model only: most new tokens [default: ``decoding.max_length``].

    Raises:
        SeqkitError: the run cannot take text; ``greedy`` or ``max_length`` for a head that does
            not use it.
    """
    kind = prep.recipe.head.type
    fns = prep.head.text_functions(prep, model, max_length=max_length)
    names = list(fns.signatures)
    if greedy and "generate_text" not in names[1:]:
        which = " or ".join(n for n in HEADS.names() if HEADS.get(n).text_role == "transduce")
        raise SeqkitError(f"serving_model(greedy=True) is for runs with a greedy signature beside their "
                          f"beam search ({which}; a generating head's text model is always greedy); "
                          f"this run's head is '{kind}'.")
    if max_length is not None and (names != ["generate_text"] or max_length < 1):
        raise SeqkitError(f"serving_model(max_length={max_length}): the most new tokens of a "
                          f"generating head, a positive integer; this run's head is '{kind}'.")
    return _serving_class()(fns, "generate_text" if greedy else names[0])


@functools.lru_cache(maxsize=1)
def _serving_class():
    import keras
    import numpy as np
    import tensorflow as tf

    class ServingModel(keras.Model):
        """``text [B] tf.string -> dict`` of the head's outputs (the module docstring of
        :mod:`seqkit.inference.serving`); ``predict`` also takes a list of Python strings, returns numpy
        arrays padded to the longest row of all batches (``""`` / 0), and prints no progress bar
        unless ``verbose=1`` (a library call prints nothing).

        Attributes:
            signature: ``"predict_text"`` or ``"generate_text"``: the SavedModel signature it equals.
        """

        def __init__(self, fns, signature):
            super().__init__(name=f"seqkit_{signature}")
            self.net = fns.model
            self.signature = signature
            self._fn = fns.signatures[signature]
            self._fns = fns

        def call(self, text):
            return self._fn(text)

        def predict(self, x, batch_size=None, verbose=0, steps=None, callbacks=None):
            if isinstance(x, str):
                x = [x]
            if isinstance(x, (list, tuple)):
                x = np.asarray(list(x), dtype=object)
            out = super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps,
                                  callbacks=callbacks)
            # batches of different T come back ragged: one padded array, as one batch gives
            return {k: v.to_tensor(default_value="" if v.dtype == tf.string else 0).numpy()
                    if isinstance(v, tf.RaggedTensor) else v for k, v in out.items()}

    return ServingModel
