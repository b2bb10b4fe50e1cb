"""Autoregressive language-model head.

Training (teacher forcing): a recorded sequence ``w_1..w_n`` becomes inputs
``[<s>, w_1, .., w_n]`` and targets ``[w_1, .., w_n, </s>]``, so the logits
produced after reading ``w_i`` are scored against ``w_{i+1}``. The model maps
``tokens [B, T] int32 -> logits [B, T, V] float32``; generation takes one
step at a time, ``(token [B], states) -> (logits [B, V], states)``.

TensorFlow, Keras and the seqkit modules that import them and NumPy are imported inside the
functions that use them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import math
import os
import types
from functools import partial

from pydantic import BaseModel, ConfigDict

from seqkit import log
from seqkit.data.lazy_corpus import LazyCorpus, LazyStreamData, read_vocab_file
from seqkit.data.markers import add_markers, drop_last
from seqkit.data.pipeline import make_dataset
from seqkit.data.records import Record
from seqkit.data.stream import StreamData, batchify, decode_lines, prompt_ids, token_stream
from seqkit.data.subword import TextTokenizer
from seqkit.data.vocab import END_ID, START_ID, UNK_ID, Vocabulary, tokenize
from seqkit.errors import DataError, RecipeError, SeqkitError
from seqkit.export.embedded_metadata import tokenization
from seqkit.export.parity import padded_pairs
from seqkit.heads.base import Head
from seqkit.heads.language_model.adaptive_generate import generate_adaptive
from seqkit.heads.language_model.dynamic_stats_cache import cached_gradient_stats
from seqkit.heads.language_model.generate import check_adaptive_generation, generate_beam, generate_text
from seqkit.layers.stack import apply_stack, make_plugin, recurrent_layers
from seqkit.metrics.baselines import NGramLM, compression_perplexities
from seqkit.metrics.perplexity import perplexity
from seqkit.registry import CELLS, register_head
from seqkit.runs.rundir import VOCAB
from seqkit.runtime.streaming import StreamingModel


def chunk_long(examples: list[str], max_tokens: int, tokenizer: str) -> tuple[list[str], int]:
    """Split examples longer than ``max_tokens`` tokens into consecutive pieces.

    Returns:
        ``(examples, n_split)`` where ``n_split`` counts examples that were cut.
    """
    out, n = [], 0
    for ex in examples:
        chars = tokenizer in ("char", "sentencepiece")  # sentencepiece: characters, before the model
        toks = list(ex) if chars else ex.split()
        if len(toks) <= max_tokens:
            out.append(ex)
            continue
        n += 1
        sep = "" if chars else " "
        out.extend(sep.join(toks[i:i + max_tokens]) for i in range(0, len(toks), max_tokens))
    return out, n


def _lazy(records) -> bool:
    """True for a :class:`~seqkit.data.lazy_corpus.LazyCorpus` (source ``text_corpus``)."""
    return isinstance(records, LazyCorpus)


class LanguageModelOptions(BaseModel):
    """Recipe keys of the ``language_model`` head (under ``head``)."""

    model_config = ConfigDict(extra="forbid")


def teacher_forcing_pair(ids, start_id: int = START_ID):
    """Teacher forcing: recorded ``ids`` -> ``(inputs, targets)`` of the same shape.

    ``inputs = [start] + ids[:-1]``, ``targets = ids``: recorded ``[4, 8, 9]``
    gives inputs ``[start, 4, 8]`` and targets ``[4, 8, 9]``, so the logits
    produced after reading 4 are scored against 8.

    Args:
        ids: one sequence ``[T]`` or a ragged batch ``tf.RaggedTensor [N, (T)]``; int.

    Returns:
        int32 ``(inputs, targets)``, each shaped like ``ids``.
    """
    import tensorflow as tf

    ids = tf.cast(ids, tf.int32)
    return add_markers(drop_last(ids), start=start_id), ids


@register_head("language_model")
class LanguageModelHead(Head):
    """Next-token prediction; logits ``[B, T, V]``; step logits ``[B, V]``."""

    Options = LanguageModelOptions
    causal = True
    answers = "generate"
    logits_index = "vocab"
    text_role = "generate"
    starter_task = "lm"
    stream_layout = True
    internal_state = True
    diagnostics = "per_step"
    diagnostic_offset = 0
    table_columns = {"text_column": ("text", 0)}

    @classmethod
    def starter(cls, paths, rel):
        """``seqkit init --task lm`` (:func:`seqkit.heads.language_model.starter.lm_starter`)."""
        from seqkit.heads.language_model.starter import lm_starter

        return lm_starter(paths, rel)

    @classmethod
    def table_record(cls, row, data, options):
        """A row's text (one example)."""
        return Record(text=row.text("text_column"), where=row.where)

    def check_records(self, records, split):
        """Lines longer than ``data.max_length - 1`` tokens are split into pieces (counted warning)."""
        d = self.recipe.data
        if _lazy(records):  # text_corpus: read as it goes, never cut (stream layout only)
            return records
        if any(r.text is None for r in records):
            raise DataError(f"data: the language_model head reads text lines; the source "
                            f"'{d.source}' gives tokens/frames. Use a text source (text_lines, "
                            f"pydoc_topics, or table with data.text_column).")
        if self.stream:  # one continuous stream: lines are never cut (data.max_length unused)
            return records
        texts, n_cut = chunk_long([r.text for r in records], d.max_length - 1, d.tokenizer)
        self.chunked = getattr(self, "chunked", 0) + n_cut
        if n_cut:
            log.warn(f"{n_cut} examples were longer than data.max_length - 1 = {d.max_length - 1} "
                     f"tokens and were split into pieces; raise data.max_length to keep them whole.")
        return [Record(text=t) for t in texts] if n_cut else records

    def fit(self, train):
        """The vocabulary of the training split (sentencepiece: the model trained on it, and its pieces)."""
        d = self.recipe.data
        if _lazy(train):  # data.vocab_file, or one bounded counting pass over the files
            self.fit_tokenizer(())  # char / whitespace (text_corpus refuses sentencepiece)

            if train.vocab_file:
                self.vocab = read_vocab_file(train.vocab_file)
                return
            self.vocab = train.vocabulary(d.min_count, d.max_vocab)
            s = train.scan()
            log.info(f"vocabulary: one counting pass over {len(train.paths)} file(s), {s['lines']:,} lines, "
                     f"{s['length']:,} stream tokens, {s['seconds']:.1f} s"
                     + (f"; the counter was pruned {s['counter'].pruned} time(s) (more than "
                        f"{train.capacity:,} distinct tokens: rare counts are approximate)"
                        if s["counter"].pruned else ""))
            return
        self.fit_tokenizer(r.text for r in train)
        if d.tokenizer == "sentencepiece":
            self.vocab = self.tokenizer.vocabulary()
            return
        self.vocab = Vocabulary.build((self.tokenizer.split(r.text) for r in train),
                                      min_count=d.min_count, max_size=d.max_vocab)

    def save_assets(self, run_dir):
        self.vocab.save(os.path.join(run_dir, VOCAB))
        self.save_tokenizer(run_dir)

    def load_assets(self, run_dir):
        self.vocab = Vocabulary.load(os.path.join(run_dir, VOCAB))
        self.load_tokenizer(run_dir)

    def describe_assets(self):
        tok = f" ({self.tokenizer.describe()})" if self.recipe.data.tokenizer == "sentencepiece" else ""
        return f"vocabulary {len(self.vocab)}{tok}"

    @property
    def stream(self) -> bool:
        """``data.layout: stream``: train and score over continuous text (:mod:`seqkit.heads.language_model.stream`)."""
        return self.recipe.data.layout == "stream"

    def stream_data(self, records, *, columns: int, bptt: int | None = None):
        """``records`` as one token stream in ``columns`` columns (:class:`seqkit.data.stream.StreamData`)."""
        bptt = bptt or self.recipe.training.bptt or 128
        if _lazy(records):
            return LazyStreamData(records, self.vocab, columns, bptt)
        ids = [self.vocab.encode(self.tokenizer.split(r.text)) for r in records]
        return StreamData(batchify(token_stream(ids), columns), bptt)

    def dataset(self, records, *, training, first_epoch=0):
        r = self.recipe
        if self.stream:  # training: B = batch_size columns; scoring: one column (every token scored)
            if training and r.training.distribute.strategy != "none":
                raise RecipeError("data.layout: stream trains with its own truncated-BPTT loop, "
                                  "which does not run under training.distribute; set "
                                  "training.distribute.strategy: none.")
            return self.stream_data(records, columns=r.training.batch_size if training else 1)
        return make_dataset([x.text for x in records], self.vocab, self.to_pairs,
                            tokenizer=r.data.tokenizer, lowercase=r.data.lowercase,
                            batch_size=r.training.batch_size, max_length=r.data.max_length,
                            shuffle=training, seed=r.seed, bucket=r.data.bucket, first_epoch=first_epoch,
                            steps_per_epoch=r.training.steps_per_epoch if training else None,
                            split=self.tokenizer.split if r.data.tokenizer == "sentencepiece" else None)

    def to_pair(self, ids):
        """A line's token ids plus the end marker are the recorded sequence.

        Args:
            ids: one line's token ids ``[T]`` int (this class's also takes a ragged ``[N, (T)]``).

        Returns:
            int32 ``(inputs [T + 1], targets [T + 1])`` (:func:`teacher_forcing_pair`).
        """
        return teacher_forcing_pair(add_markers(ids, end=END_ID))

    def to_pairs(self, ids):
        """Every line's training pair at once: ragged ``ids [N, (T)]`` -> ``(inputs, targets)``
        ragged ``[N, (T + 1)]`` int32, what :meth:`to_pair` gives line by line.

        Vectorized when :meth:`to_pair` is this class's; a subclass that overrides
        :meth:`to_pair` gets it mapped over the lines (``tf.map_fn``, about 20 µs a
        line when the dataset is built) unless it also overrides this method.
        """
        import tensorflow as tf

        if type(self).to_pair is LanguageModelHead.to_pair:  # it works on ragged batches as they are
            return self.to_pair(ids)
        spec = tf.RaggedTensorSpec([None], tf.int32, ragged_rank=0)
        run = tf.function(lambda rt: tf.map_fn(
            lambda row: tuple(tf.cast(t, tf.int32) for t in self.to_pair(row)), rt,
            fn_output_signature=(spec, spec)))
        return run(tf.cast(ids, tf.int32))

    def build_model(self):
        import keras

        cfg = self.recipe.model
        plugin = make_plugin(cfg, self.recipe.cell_options)
        tokens = keras.Input(shape=(None,), dtype="int32", name="tokens")
        x = keras.layers.Embedding(len(self.vocab), cfg.embedding_dim, mask_zero=True,
                                   name="embedding")(tokens)
        x = apply_stack(x, plugin, cfg, causal=True, return_state=self.stream)
        if self.stream:  # the layers also return their final states (seqkit.heads.language_model.stream)
            x = x[0]
        if cfg.dropout > 0:
            x = keras.layers.Dropout(cfg.dropout, name="output_dropout")(x)
        logits = keras.layers.Dense(len(self.vocab), name="logits")(x)
        return keras.Model(tokens, logits, name="language_model")

    def stepper(self, model) -> "LanguageModelStepper":
        """The one-token-at-a-time view of ``model`` used by generation and export."""
        return LanguageModelStepper(model, CELLS.get(self.recipe.model.cell).state_names)

    # ---------------------------------------------------------------- answers (Run.generate)
    @classmethod
    def resolve_dynamic(cls, evaluation, **given):
        """Dynamic-evaluation options (:func:`seqkit.heads.language_model.dynamic_eval.resolve_options`)."""
        from seqkit.heads.language_model.dynamic_eval import resolve_options

        return resolve_options(evaluation, **given)

    def generate_text(self, prep, model, prompt, *, cache: bool = False, mix: bool = False, **options):
        """Sampled or greedy continuations (:func:`seqkit.heads.language_model.generate.generate_text`);
        with ``cache`` / ``mix`` (a stream run, ``prep`` holding the data splits) from the network
        mixed with the adaptive models of ``seqkit evaluate --cache / --mix``
        (:func:`seqkit.heads.language_model.adaptive_generate.generate_adaptive`).

        Raises:
            SeqkitError: ``cache`` / ``mix`` for a line-layout run, or with an empty valid split.
        """
        if cache or mix:
            check_adaptive_generation(prep.recipe)
            return generate_adaptive(prep, model, prompt, cache=cache, mix=mix, **options)
        return generate_text(prep, model, prompt, **options)

    @classmethod
    def check_adaptive_generation(cls, recipe):
        """Refuse ``cache`` / ``mix`` generation from the recipe alone, before the run loads
        (:func:`seqkit.heads.language_model.generate.check_adaptive_generation`)."""
        check_adaptive_generation(recipe)

    def generate_beam(self, prep, model, prompt, **options):
        """Beam-search continuations (:func:`seqkit.heads.language_model.generate.generate_beam`)."""
        return generate_beam(prep, model, prompt, **options)

    # ---------------------------------------------------------------- streaming an export
    @classmethod
    def stream_export(cls, export, metadata, request):
        """Continue ``request.prompt`` with the exported step model (sampling, or ``greedy``) and
        yield the prompt and its continuation as one line; a model trained with ``data.layout:
        stream`` primes its state with the prompt's lines and generates past line ends
        (:mod:`seqkit.data.stream`). ``max_length`` default: 80 new tokens.

        Raises:
            SeqkitError: ``input`` or ``beam_width`` given (a language model continues a prompt).
        """
        if request.beam_width is not None:
            raise SeqkitError("--beam-width is for encoder-decoder exports; this export streams one "
                              "step model.")
        if request.input_path or request.text is not None:
            raise SeqkitError("--input is for exports that read sequences; a language model "
                              "continues --prompt TEXT.")
        prompt = request.prompt
        rt = StreamingModel(export)
        meta = rt.metadata
        vocab = Vocabulary(meta["vocab"])
        tok = TextTokenizer.from_export(export, meta)  # a lone .tflite carries its subword model
        across = meta.get("layout") == "stream"  # a stream-trained model: the state goes on across lines
        encode = lambda text: vocab.encode(tok.split(text))  # noqa: E731
        if across:  # a prompt's lines prime the state, line breaks read as <s> (seqkit.data.stream)
            ids = prompt_ids(prompt, encode)
        else:
            ids = [START_ID] + encode(prompt)
        if UNK_ID in ids:
            log.warn("prompt tokens outside the vocabulary were read as [UNK].")
        new = rt.generate(ids, max_length=request.max_length or 80, greedy=request.greedy,
                          temperature=request.temperature, top_k=request.top_k, seed=request.seed)
        if tok.mode == "sentencepiece":  # decoded with the prompt: a piece's "▁" is the space before it
            toks = tok.split(prompt)
            full, pre = tok.join(toks + vocab.decode_tokens(new)), tok.join(toks)
            yield (prompt + full[len(pre):] if full.startswith(pre) else full) + "\n"
            return
        join = "" if tokenization(meta) == "char" else " "
        if across:
            cont = decode_lines(vocab, new, join=join)
            sep = join if prompt and cont and join and not prompt.endswith(("\n", " ")) \
                and not cont.startswith("\n") else ""
            yield prompt + sep + cont + "\n"
            return
        yield prompt + (join if prompt and join else "") + vocab.decode(new, join=join) + "\n"

    # ---------------------------------------------------------------- export parity
    def parity_inputs(self, records, length=None):
        """Teacher-forced inputs of held-out lines (:func:`seqkit.export.parity.padded_pairs`),
        ``tokens [N, T] int32``, cut to ``length`` steps when given."""
        x, valid = padded_pairs(types.SimpleNamespace(head=self, recipe=self.recipe, vocab=self.vocab),
                                records)
        x, valid = x[:, :length], valid[:, :length]
        return x, valid.sum(axis=1)

    def parity_targets(self, records, T):
        """Next-token ids ``[N, T]`` (0: padding)."""
        import numpy as np

        d = self.recipe.data
        y = np.zeros((len(records), T), np.int32)
        for i, ex in enumerate(records):
            ids = self.vocab.encode(tokenize(getattr(ex, "text", ex), d.tokenizer, d.lowercase))
            t = np.asarray(self.to_pair(np.asarray(ids, np.int32))[1])[: min(d.max_length, T)]
            y[i, : len(t)] = t
        return y

    @staticmethod
    def task_metric(logits, targets, valid):
        """``{"perplexity": exp(mean over valid positions of -log softmax(z)[y]), "scored"}``."""
        import numpy as np

        keep = valid & (targets > 0)
        z, y = logits[keep].astype(np.float64), targets[keep]
        m = z.max(-1, keepdims=True)
        lse = (m + np.log(np.exp(z - m).sum(-1, keepdims=True)))[:, 0]
        nll = lse - z[np.arange(len(y)), y] if len(y) else np.zeros(0)
        # perplexity(): inf, not an overflow warning, above 709.78 nats
        return {"perplexity": perplexity(nll.mean()) if len(y) else float("nan"), "scored": int(len(y))}

    def fit_stream(self, model):
        """``model.fit``'s stand-in for ``data.layout: stream`` (:func:`seqkit.heads.language_model.stream.fit_stream`)."""
        from seqkit.heads.language_model.stream import fit_stream

        return partial(fit_stream, model)

    def evaluate(self, model, records):
        """Exact figures on ``records``; stream layout: over the continuous split, state carried."""
        if not self.stream:
            return super().evaluate(model, records)
        from seqkit.heads.language_model.stream import score_stream

        return score_stream(model, self.dataset(records, training=False))

    def evaluate_dynamic(self, model, records, lr: float | None = None, chunk: int | None = None, *,
                         options=None, train_records=None, run_dir=None):
        """Dynamic evaluation (Krause et al. 2018) over the continuous split: each chunk of
        ``chunk`` tokens is scored, then one update of the rule ``options.dynamic_rule`` is taken on
        it (:mod:`seqkit.heads.language_model.dynamic_eval`); the weights are restored after.

        Args:
            model: the language model.
            records: the split scored (one column).
            lr, chunk: override ``options.dynamic_lr`` / ``options.dynamic_chunk``.
            options: an :class:`~seqkit.recipe.EvaluationConfig` (default: the recipe's ``evaluation``).
            train_records: the training split; the ``rms`` rule's gradient statistics are taken on
                it, ``training.batch_size`` columns of ``chunk`` tokens.
            run_dir: the run directory: the ``rms`` rule's statistics are kept in it and reused
                while weights, data and settings are unchanged
                (:mod:`seqkit.heads.language_model.dynamic_stats_cache`); None: computed every time.

        Returns:
            The figures of :func:`seqkit.heads.language_model.dynamic_eval.dynamic_score`.

        Raises:
            ValueError: the ``rms`` rule without ``train_records``; a bad value (dynamic_score).
        """
        from seqkit.heads.language_model.dynamic_eval import dynamic_score

        ev = options or self.recipe.evaluation
        ev = ev.model_copy(update={k: v for k, v in (("dynamic_lr", lr), ("dynamic_chunk", chunk or None))
                                   if v is not None})
        data = self.stream_data(records, columns=1, bptt=ev.dynamic_chunk)
        return dynamic_score(model, data, **self.dynamic_update_options(model, ev, train_records, run_dir))

    def dynamic_update_options(self, model, ev, train_records=None, run_dir=None) -> dict:
        """The keyword arguments of :class:`~seqkit.heads.language_model.dynamic_eval.DynamicUpdate`
        (``lr``, ``rule``, ``decay``, ``epsilon``, ``stats``) for the options ``ev`` (an
        :class:`~seqkit.recipe.EvaluationConfig`); the ``rms`` rule's statistics are taken on
        ``train_records`` (:meth:`evaluate_dynamic`).

        Raises:
            ValueError: the ``rms`` rule without ``train_records``.
        """
        stats = None
        if ev.dynamic_rule == "rms":
            if train_records is None:
                raise ValueError("dynamic evaluation: the rms rule needs the training split "
                                 "(its gradient statistics).")
            train = self.stream_data(train_records, columns=self.recipe.training.batch_size,
                                     bptt=ev.dynamic_chunk)
            stats = cached_gradient_stats(model, train, ev.dynamic_stat_chunks, run_dir)
        return {"lr": ev.dynamic_lr, "rule": ev.dynamic_rule, "decay": ev.dynamic_decay,
                "epsilon": ev.dynamic_epsilon, "stats": stats}

    def evaluate_adaptive(self, members, records, *, valid_records, train_records, split: str,
                          cache: bool = False, mix: bool = False, dynamic=None) -> dict:
        """The network with a continuous cache, an online n-gram / match mixture and ensembles
        (:func:`seqkit.heads.language_model.adaptive_eval.evaluate_adaptive`: the arguments,
        the returned ``{mode label: figures}`` and the errors)."""
        from seqkit.heads.language_model.adaptive_eval import evaluate_adaptive

        if not self.stream:
            raise SeqkitError("--cache / --mix / --ensemble need a language model trained with "
                              "data.layout: stream.")
        return evaluate_adaptive(self, members, records, valid_records, train_records, split=split,
                                 cache=cache, mix=mix, dynamic=dynamic)

    def metrics(self):
        from seqkit.training.losses import MaskedAccuracy, MaskedCrossEntropy, MaskedPerplexity

        ce = MaskedCrossEntropy()
        return [ce, MaskedAccuracy(), MaskedPerplexity(of=ce)]

    def summarize(self, results):
        """Exact ``cross_entropy`` (nats/token), ``perplexity``, ``accuracy``, plus ``bits_per_token``."""
        out = {k: float(v) for k, v in results.items() if k != "loss"}  # loss: a mean of batch means
        if "perplexity" in out:  # float64 from the exact cross-entropy: the metric's float32 exp overflows at 88.7
            out["perplexity"] = perplexity(out["cross_entropy"])
        out["bits_per_token"] = out["cross_entropy"] / math.log(2.0)
        return out

    def format_metrics(self, figures):
        """``name value`` pairs; counts (the stream layout's ``tokens``) print as integers."""
        return [", ".join(f"{k} {v}" if isinstance(v, int) else f"{k} {v:.4f}"
                          for k, v in figures.items() if isinstance(v, (int, float)))]

    def baselines(self, prep):
        """Per-token perplexity of interpolated absolute-discounting n-gram models (n = 1, 3, 5),
        trained on the train split with the same vocabulary, and of the compressors ``xz -9e``,
        ``bzip2 -9`` and ``zlib -9`` (marginal code length of each held-out split after the
        training text; :func:`seqkit.metrics.baselines.compression_perplexities`), on valid and test."""
        d = self.recipe.data
        if _lazy(prep.splits["train"]):
            log.info("baselines: skipped for a text_corpus (the n-grams and compressors hold the "
                     "training text in memory).")
            return {}
        enc = lambda xs: [self.vocab.encode(self.tokenizer.split(x)) for x in xs]  # noqa: E731
        texts = {k: [r.text for r in v] for k, v in prep.splits.items()}
        train = enc(texts["train"])
        out = {}
        for order in (1, 3, 5):
            lm = NGramLM(order, vocab_size=len(self.vocab) - 2).fit(train)
            out[f"{order}-gram"] = {s: round(lm.perplexity(enc(texts[s])), 4)
                                    for s in ("valid", "test") if prep.splits[s]}
        held = {s: texts[s] for s in ("valid", "test") if prep.splits[s]}
        if held:  # general-purpose compressors, as per-token perplexities (compression_perplexities)
            lower = (lambda xs: [x.lower() for x in xs]) if d.lowercase else (lambda xs: xs)  # noqa: E731
            counts = {s: sum(len(ids) + 1 for ids in enc(texts[s])) for s in held}
            out.update(compression_perplexities(lower(texts["train"]),
                                                {s: lower(v) for s, v in held.items()}, counts))
        return out


class LanguageModelStepper:
    """One-token-at-a-time view of a trained language model (shares its weights).

    Args:
        model: the training model built by :class:`LanguageModelHead`.

    State layout: for each recurrent layer in order, its cell's states
    (``[B, H]`` each; LSTM ``h, c``), flattened into one list.
    """

    def __init__(self, model, cell_state_names: tuple[str, ...] | None = None):
        self.embedding = model.get_layer("embedding")
        self.logits = model.get_layer("logits")
        self.layers = recurrent_layers(model)
        self.cells = [layer.cell for layer in self.layers]
        self.cell_state_names = cell_state_names

    def input_spec(self):
        """The step input: ``token [B] int32``."""
        import tensorflow as tf

        return tf.TensorSpec([None], tf.int32, name="token")

    def state_names(self) -> list[str]:
        """``rnn_{layer}_{state}`` in state order, e.g. ``rnn_0_h, rnn_0_c`` for an LSTM."""
        names = []
        for i, cell in enumerate(self.cells):
            s = cell.state_size
            n = len(s) if isinstance(s, (list, tuple)) else 1
            own = self.cell_state_names if self.cell_state_names and len(self.cell_state_names) == n \
                else tuple(f"s{j}" for j in range(n))
            names.extend(f"rnn_{i}_{nm}" for nm in own)
        return names

    def state_sizes(self) -> list[int]:
        sizes = []
        for cell in self.cells:
            s = cell.state_size
            sizes.extend(s if isinstance(s, (list, tuple)) else [s])
        return sizes

    def initial_state(self, batch_size: int) -> list:
        """Zero states, ``[B, H]`` float32 each."""
        import tensorflow as tf

        return [tf.zeros([batch_size, n], tf.float32) for n in self.state_sizes()]

    def step(self, token, states):
        """``(token [B] int32, states) -> (logits [B, V] float32, new_states)``."""
        _, logits, out = self.step_hidden(token, states)
        return logits, out

    def step_hidden(self, token, states):
        """:meth:`step` that also returns the top layer's output (what the logits layer reads).

        Returns:
            ``(hidden [B, H] float32, logits [B, V] float32, new_states)``; ``hidden`` is the
            cache key of :mod:`seqkit.heads.language_model.adaptive` (the one-step counterpart of
            :meth:`seqkit.heads.language_model.stream.StreamRunner.forward_hidden`).
        """
        import tensorflow as tf

        x = tf.gather(self.embedding.embeddings, token)  # [B, E]: a plain GATHER, no padding mask
        out, k = [], 0
        for cell in self.cells:
            s = cell.state_size
            n = len(s) if isinstance(s, (list, tuple)) else 1
            x, new = cell(x, list(states[k:k + n]), training=False)
            new = list(new) if isinstance(new, (list, tuple)) else [new]
            out.extend(new)
            k += n
        return x, self.logits(x), out
