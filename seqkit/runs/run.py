"""A trained run directory as a Python object: :class:`Run` (``seqkit.load(path)``).

Every method calls the functions the command line calls (``seqkit evaluate``, ``generate``,
``predict``, ``attention``, ``export`` are thin layers over this class), so results, checks and
error messages are the CLI's. Nothing is printed: warnings (unknown tokens, skipped lines) go to
the ``seqkit`` logger (see :mod:`seqkit.log`). TensorFlow is imported on first use.

NumPy is imported inside the functions that use it, so importing this module does not load it;
:mod:`seqkit.arguments` (no NumPy) is imported here under its short name ``a``.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from seqkit import arguments as a  # the same checks and messages as the CLI's options
from seqkit._quiet import import_tensorflow_quietly
from seqkit.data.records import records_fingerprint
from seqkit.data.table import is_table_input
from seqkit.errors import RunDirError, SeqkitError
from seqkit.export.options import FORMATS, ExportOptions
from seqkit.export.portable import export_portable_keras
from seqkit.export.writer import export_run
from seqkit.guards import check_model_matches, check_writable
from seqkit.heads.contract import checked_baselines
from seqkit.inference.decoding import check_beam_args
from seqkit.inference.decoding_overrides import with_decoding
from seqkit.inference.serving import serving_model, text_unsupported
from seqkit.outputs import check_export_folder, export_lock
from seqkit.recipe import load_recipe
from seqkit.registry import HEADS
from seqkit.runs.lifecycle import RunLock, Staging, check_target, remove_stale, split_run_path
from seqkit.runs.provenance import write_provenance
from seqkit.runs.rundir import (BEST, HISTORY, METRICS, RECIPE, STATE, RunDir, atomic_save_model,
                                atomic_write_json, atomic_write_text, read_json)
from seqkit.training.train import (compile_model, count_parameters, evaluate_model, load_model, load_run,
                                   prepare)


class Alignment(NamedTuple):
    """What :meth:`Run.attention` returns.

    Attributes:
        source: the source symbols, ``[S]`` (symbols never seen in training shown as ``[UNK]``).
        target: the best beam-search output symbols followed by ``"</s>"``, ``[T]``.
        weights: float32 array ``[T, S]``; row ``t`` is the decoder's attention over the source
            when it wrote ``target[t]`` (each row sums to 1).
    """

    source: list
    target: list
    weights: object


def _texts(inputs, what: str) -> str:
    """``inputs`` (one string, or a list of strings: one sequence per item) as one text."""
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, (list, tuple)) and all(isinstance(s, str) for s in inputs):
        return "\n".join(inputs)
    raise SeqkitError(f"{what}: give a string (the whole input, one sequence per line) or a list "
                      f"of strings (one sequence each); got {type(inputs).__name__}.")


def _is_frame(obj) -> bool:
    """True for a ``pandas.DataFrame`` (pandas is not imported when the caller did not)."""
    import sys

    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(obj, pd.DataFrame)


#: The most new tokens one ``generate`` call may ask for (the in-graph loop's buffers grow with it).
MAX_NEW_TOKENS = 1_000_000
#: Most continuations one generate call samples (they are sampled as one batch).
MAX_SAMPLES = 10_000


def check_decoding_options(*, greedy: bool, beam_width: int | None, length_penalty: float | None,
                           n_best: int | None, min_length: int | None, adaptive: bool = False) -> None:
    """Refuse contradictory decoding options before any run is loaded (CLI and API alike).

    Args:
        adaptive: ``--cache`` / ``--mix`` asked (sampling and greedy decoding only).

    Raises:
        SeqkitError: ``greedy`` together with a beam-search option, or ``n_best`` above
            ``beam_width`` and other bad beam values (:func:`seqkit.inference.decoding.check_beam_args`);
            ``adaptive`` with a beam-search option.
    """
    beam_asked = beam_width is not None or length_penalty is not None or n_best is not None \
        or min_length is not None
    if adaptive and beam_asked:
        raise SeqkitError("--cache / --mix mix the network with adaptive models token by token while "
                          "sampling or greedy decoding; beam search does not use them: drop the beam "
                          "options (--beam-width, --length-penalty, --n-best, --min-length), or drop "
                          "--cache / --mix.")
    if greedy and beam_asked:
        raise SeqkitError("--greedy and beam-search options (--beam-width, --length-penalty, "
                          "--n-best, --min-length) exclude each other; drop --greedy for beam search "
                          "(--beam-width 1 with length penalty 0 is greedy).")
    if beam_width is not None and n_best is not None:
        check_beam_args(beam_width, n_best, length_penalty or 0.0, 0, 1)


def empty_split_cause(recipe, split: str) -> str:
    """Why ``recipe``'s ``split`` (``valid`` / ``test``) holds no record, as a fix to make: its own
    file is not given (a source with ``data.{split}_path`` read without one ``data.path``), or its
    fraction ``data.split.{split}`` is 0."""
    from seqkit.registry import DATA

    extra = recipe.data.model_extra or {}
    options = getattr(DATA.get(recipe.data.source), "Options", None) if recipe.data.source in DATA else None
    fields = getattr(options, "model_fields", {})
    if f"{split}_path" in fields and not extra.get("path"):
        return f"the recipe gives no data.{split}_path; add a {split} file there"
    return f"data.split.{split} is 0"


def _baseline_shape(figs) -> bool:
    """Whether a ``metrics.json`` baseline has the shape training writes: ``{split: number}`` or
    ``{split: {figure: number}}``."""
    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    return isinstance(figs, dict) and all(
        number(v) or (isinstance(v, dict) and all(isinstance(k, str) and number(x) for k, x in v.items()))
        for v in figs.values())


def _data_section(recipe) -> dict:
    """``recipe``'s data section without ``split.seed``: whether two runs' seeds split alike is
    asked of ``recipe.split_seed`` (``null`` reads as the recipe's seed) and, where they differ,
    of the split's records."""
    data = recipe.data.model_dump()
    data["split"].pop("seed", None)
    return data


class Run:
    """A run directory made by ``seqkit train``, :func:`seqkit.train` or :meth:`Run.from_model`.

    The model and the head's assets are loaded on first use (and kept); the data source is read
    only by :meth:`evaluate`.

    Args:
        path: the run directory.

    Raises:
        RunDirError: not a run directory (missing ``recipe.yaml`` or ``model.keras``), or it needs
            a plugin that is not available (named).
    """

    def __init__(self, path):
        if not isinstance(path, (str, os.PathLike)) or isinstance(os.fspath(path), bytes):
            raise SeqkitError(f"a run directory is a path (str or pathlib.Path), e.g. seqkit.load(\"runs/lm\"); "
                              f"got {path!r} ({type(path).__name__}).")
        self.path = os.fspath(path)
        RunDir(self.path).check()
        self._prep = self._model = None
        self._has_data = False

    def __repr__(self) -> str:
        return f"Run({self.path!r})"

    # ------------------------------------------------------------ loading

    def _load(self, with_data: bool = False):
        """``(prep, model)`` as :func:`seqkit.training.train.load_run` gives them (kept after the first call)."""
        self._still_there()
        if self._model is None:
            import_tensorflow_quietly()  # TF's C++ start-up lines are not ours to print

            self._prep, self._model = load_run(self.path, with_data=with_data)
            self._has_data = with_data
        elif with_data and not self._has_data:
            self._prep = prepare(self._prep.recipe, run_dir=self.path, read_data=True)
            self._has_data = True
        return self._prep, self._model

    def _still_there(self) -> None:
        """Refuse a run directory moved or deleted since this Run was opened (by name)."""
        if not os.path.isdir(self.path):
            raise RunDirError(f"{self.path}: no such run directory (it was moved or deleted since it "
                              f"was opened). Open the run where it is now: seqkit.load(PATH).")

    @property
    def recipe(self):
        """The run's resolved :class:`seqkit.Recipe` (its ``plugins:`` are not imported)."""
        if self._prep is not None:
            return self._prep.recipe
        self._still_there()

        return load_recipe(os.path.join(self.path, RECIPE), load_plugins=False)

    @property
    def head(self) -> str:
        """The head type (``head.type``): a built-in head's name or a plugin head's."""
        return self.recipe.head.type

    @property
    def model(self):
        """The best model (``model.keras``), a compiled ``keras.Model``, loaded once and kept:
        :meth:`evaluate`, :meth:`predict` and :meth:`generate` use it as it is (weights changed
        in memory included); :meth:`export` reads the run directory and refuses while this model
        differs from ``model.keras`` (make a changed model a run with :meth:`from_model`)."""
        return self._load()[1]

    @property
    def prepared(self):
        """The run's :class:`seqkit.training.train.Prepared` (recipe, head with its vocabularies/labels)."""
        return self._load()[0]

    @property
    def tokenizer(self):
        """How the run splits text and joins tokens back: a
        :class:`seqkit.data.subword.TextTokenizer` (``split(text) -> tokens``, ``join(tokens) -> text``;
        ``data.tokenizer: sentencepiece``: the run's ``subword.model``). A seq2seq run's target side
        is ``run.prepared.head.target_tokenizer`` (``None`` unless it is sentencepiece)."""
        return self._load()[0].head.tokenizer

    @property
    def metrics(self) -> dict:
        """``metrics.json``: what training reported (``{}`` when missing).

        Raises:
            RunDirError: the file is not JSON.
        """
        saved = read_json(os.path.join(self.path, METRICS), default={})
        return saved if isinstance(saved, dict) else {}

    def _need(self, prep, verb: str, command: str | None = None) -> None:
        """Refuse a run whose head does not answer with ``verb`` (``Head.answers``), naming the
        heads that do and the command this run's head answers with."""
        if prep.head.answers == verb:
            return

        titles = [getattr(HEADS.get(n), "title", None) or n for n in HEADS.names()
                  if HEADS.get(n).answers == verb]
        which = (", ".join(titles[:-1]) + " or " + titles[-1]) if len(titles) > 1 else \
            (titles[0] if titles else "no registered")
        article = "an" if which[0] in "aeiou" else "a"
        own = prep.head.answers
        raise SeqkitError(f"{self.path}: {command or verb} needs {article} {which} run; this run's head "
                          f"is '{prep.recipe.head.type}'"
                          + (f" (use `seqkit {own}`)." if own and own != verb else "."))

    # ------------------------------------------------------------ evaluate

    def evaluate(self, split: str = "test", *, confusion_matrix: bool = False, dynamic: bool = False,
                 dynamic_lr: float | None = None, dynamic_rule: str | None = None,
                 dynamic_decay: float | None = None, dynamic_chunk: int | None = None,
                 cache: bool = False, mix: bool = False, ensemble=(), decoding: dict | None = None) -> dict:
        """Exact metrics on a held-out split, the dict ``seqkit evaluate --json`` prints.

        Args:
            split: ``"test"``, ``"valid"`` or ``"train"`` (the recipe's split, re-made from the data).
            confusion_matrix: also report the confusion matrix (acceptor, tagger).
            dynamic: language model trained with ``data.layout: stream``: also score with dynamic
                evaluation (Krause et al. 2018: one update on each chunk after scoring it,
                :mod:`seqkit.heads.language_model.dynamic_eval`; the run's files are not changed, except that the
                ``rms`` rule keeps its statistics in ``dynamic_stats.npz``). The figures
                then come as ``{"static": {...}, "dynamic": {..., "rule", "learning_rate",
                "decay", "chunk"}}``.
            dynamic_lr, dynamic_rule, dynamic_decay, dynamic_chunk: the step size, the update rule
                (``"sgd"`` or ``"rms"``), the decay towards the trained weights and the chunk
                length of ``dynamic`` (any of them implies it) [default: the recipe's
                ``evaluation.dynamic_*``]. The ``rms`` rule first takes gradient statistics on
                the training split, stored in ``RUN/dynamic_stats.npz`` and reused by later calls
                while the weights, training data, chunk and ``dynamic_stat_chunks`` are unchanged
                (:mod:`seqkit.heads.language_model.dynamic_stats_cache`).
            cache: language model, data.layout stream: also score the network mixed with a
                continuous cache of its hidden states (Grave et al. 2017).
            mix: also score the network mixed with an online n-gram and a longest-match model
                over the training text and the split read so far.
            ensemble: other run directories of the same recipe data, vocabularies and ``split``
                records (e.g. the seeds of ``--seeds`` on a fixed test list). A stream-layout
                language model's distribution is the mean of this run's and theirs (with the
                modes below). An encoder-decoder decodes them together (one beam over the runs'
                mean log-probabilities, :mod:`seqkit.heads.seq2seq.ensemble`) and the figures
                come as ``{"single": <this run's>, "ensemble": {"wer", "per", ..., "members",
                "runs"}}``.
                A stream language model: with any of ``cache``, ``mix``, ``ensemble``, the
                settings and mixture weights are chosen on the valid split, the split is then
                scored once, and the figures come as ``{"static": {...}, "static+cache": {...,
                "settings": {...}}, ...}`` (with ``dynamic`` also ``"dynamic"``, ``"dynamic+cache"``, ...;
                :mod:`seqkit.heads.language_model.adaptive_eval`), and ``"compressors"`` gives the
                marginal bits per token of the standard library's compressors and of zpaq / PPMd
                (or why each is absent) on the split after the training text. Nothing is written
                to the runs.
            decoding: ``{"beam_width": 10, "length_penalty": 0.6, ...}``: keys of the recipe's
                ``decoding`` section to use instead of the run's for this evaluation, validated
                as the recipe key is (heads whose evaluation decodes outputs, e.g. the
                encoder-decoder's WER and PER; choose them on ``split="valid"``). The report
                then names them under ``"decoding"``.

        Returns:
            ``{"split": split, <the head's figures>, "baselines": {...}}``; e.g. a language model's
            ``cross_entropy`` (nats/token) and ``perplexity``, an acceptor's ``accuracy`` and
            ``macro_f1``, a tagger's ``token_accuracy`` and ``per_tag``, a seq2seq run's ``wer``
            and ``per``. ``baselines`` are those training recorded in ``metrics.json``.

        Raises:
            SeqkitError: an unknown or empty split; the data source cannot be read (DataError);
                ``metrics.json`` is damaged (RunDirError); ``dynamic`` on a run that is not a
                stream-layout language model; a ``dynamic_*`` value the recipe key would refuse;
                ``ensemble`` on a head that cannot average runs, or with a run whose data section,
                vocabularies or ``split`` records differ; ``decoding`` on a head whose
                evaluation does not decode, or with a key or value the recipe would refuse.
        """
        if split not in ("test", "valid", "train"):
            raise SeqkitError(f"split {split!r}: expected 'test', 'valid' or 'train'.")
        decoded = with_decoding(self.recipe, decoding, self.path) if decoding else None
        given = {"dynamic_lr": dynamic_lr, "dynamic_rule": dynamic_rule, "dynamic_decay": dynamic_decay,
                 "dynamic_chunk": dynamic_chunk}
        ev = None
        if dynamic or any(v is not None for v in given.values()):  # checked before anything loads
            resolve = getattr(HEADS.get(self.recipe.head.type), "resolve_dynamic", None)
            if resolve is None:
                raise SeqkitError(f"{self.path}: --dynamic needs a language model trained with "
                                  f"data.layout: stream.")
            ev = resolve(self.recipe.evaluation, **given)
        ensemble = [ensemble] if isinstance(ensemble, (str, os.PathLike)) else list(ensemble or ())
        head_cls = HEADS.get(self.recipe.head.type)
        # a head averages runs either inside its adaptive modes or in its own decoding
        averaged = bool(ensemble) and not (cache or mix) and not hasattr(head_cls, "evaluate_adaptive")
        adaptive = (cache or mix or bool(ensemble)) and not averaged
        if adaptive and not hasattr(head_cls, "evaluate_adaptive"):
            raise SeqkitError(f"{self.path}: --cache / --mix need a language model trained with "
                              f"data.layout: stream.")
        if averaged and not hasattr(head_cls, "evaluate_ensemble"):
            raise SeqkitError(f"{self.path}: --ensemble averages the distributions of a language model "
                              f"trained with data.layout: stream, or decodes encoder-decoder runs "
                              f"together; the '{self.recipe.head.type}' head does neither.")
        prep, model = self._load(with_data=True)
        if not prep.splits.get(split):
            raise SeqkitError(f"{self.path}: the recipe's {split} split is empty ({empty_split_cause(self.recipe, split)}).")
        if adaptive and not getattr(prep.head, "stream", False):
            raise SeqkitError(f"{self.path}: --cache / --mix / --ensemble need a language model "
                              f"trained with data.layout: stream.")
        real = [os.path.realpath(p) for p in ensemble]
        twice = next((p for i, p in enumerate(ensemble) if real[i] in real[:i]), None)
        if twice is not None:
            raise SeqkitError(f"--ensemble {twice}: named twice; each run counts once in the mean, "
                              f"so name every other run once.")
        mine: list = []  # this run's split fingerprint, taken once when a member of another seed needs it
        members = [(model, self.path)] + [self._ensemble_member(p, prep, split, mine) for p in ensemble]
        opts = prep.head.options
        before = getattr(opts, "confusion_matrix", None)
        if confusion_matrix and hasattr(opts, "confusion_matrix"):
            opts.confusion_matrix = True
        trained = prep.head.recipe
        if decoded is not None:  # this evaluation's decoding; the run's recipe is put back after
            prep.head.recipe = decoded
        try:
            res = evaluate_model(prep, model, split)
            if averaged:
                ens = prep.head.evaluate_ensemble([m for m, _ in members], prep.splits[split])
                res = {"single": res, "ensemble": {**ens, "runs": [os.fspath(p) for _, p in members]}}
        finally:
            prep.head.recipe = trained
            if before is not None:
                opts.confusion_matrix = before
        if ev is not None and not adaptive:  # with adaptive modes, their pass gives the dynamic figures
            if not getattr(prep.head, "stream", False):
                raise SeqkitError(f"{self.path}: --dynamic needs a language model trained with "
                                  f"data.layout: stream.")
            dyn = prep.head.evaluate_dynamic(model, prep.splits[split], options=ev,
                                             train_records=prep.splits.get("train"), run_dir=self.path)
            dyn.update({"rule": ev.dynamic_rule, "learning_rate": ev.dynamic_lr,
                        "decay": ev.dynamic_decay, "chunk": ev.dynamic_chunk})
            res = {"static": res, "dynamic": dyn}
        if adaptive:
            modes = prep.head.evaluate_adaptive(
                members, prep.splits[split], valid_records=prep.splits.get("valid"),
                train_records=prep.splits.get("train"), split=split, cache=cache, mix=mix, dynamic=ev)
            compressors = modes.pop("compressors", None)
            res = {"static": res, **{k: v for k, v in modes.items() if k != "static"}}
            if ev is not None:
                for label in ("dynamic", "dynamic+ensemble"):
                    if label in res:
                        res[label].update({"rule": ev.dynamic_rule, "learning_rate": ev.dynamic_lr,
                                           "decay": ev.dynamic_decay, "chunk": ev.dynamic_chunk})
        saved = read_json(os.path.join(self.path, METRICS), default={})  # not JSON: a RunDirError names it
        baselines = saved.get("baselines") if isinstance(saved, dict) else None
        baselines = {k: v for k, v in baselines.items() if _baseline_shape(v)} if isinstance(baselines, dict) else {}
        # (a baseline of the wrong shape, edited by hand: shown without it)
        report = {"split": split, **res, "baselines": baselines}
        if decoded is not None:
            report["decoding"] = {k: getattr(decoded.decoding, k) for k in decoding}
        if adaptive and compressors:
            report["compressors"] = compressors
        return report

    def _ensemble_member(self, path, prep, split: str, mine: list) -> tuple:
        """``(model, run dir)`` of another run for ``ensemble``, checked against this run's data:
        the same data section (``split.seed`` aside) and vocabularies, and, where the runs' split
        seeds differ, the same records in ``split`` (runs whose seeds drew different splits would
        each have trained on part of the others' split).
        ``mine`` caches this run's split fingerprint across members (empty until first needed)."""
        if os.path.realpath(path) == os.path.realpath(self.path):
            raise SeqkitError(f"--ensemble {path}: that is the evaluated run itself; name the other "
                              f"runs (e.g. the RUN-seed<S> directories of --seeds).")
        other = Run(path)
        differs = (f"--ensemble {path}: its recipe's data section or vocabulary differs from "
                   f"{self.path}'s, so their distributions cannot be averaged token by token; "
                   f"ensemble runs of the same recipe (e.g. seqkit train --seeds).")
        if _data_section(other.recipe) != _data_section(prep.recipe):  # before any model loads
            raise SeqkitError(differs)
        other_prep, other_model = other._load()
        # the same data section and split seed split the data the same way; another seed may not
        if other_prep.recipe.split_seed != prep.recipe.split_seed:
            other_prep, _ = other._load(with_data=True)
            if not mine:
                mine.append(records_fingerprint(prep.splits[split]))
            if records_fingerprint(other_prep.splits.get(split) or []) != mine[0]:
                raise SeqkitError(f"--ensemble {path}: its {split} split holds other records than "
                                  f"{self.path}'s (its seed, {other_prep.recipe.split_seed}, drew another "
                                  f"split), so each run trained on part of the split the ensemble "
                                  f"would be scored on. Score the ensemble on a split that does not "
                                  f"follow the seed (one read from its own file, such as data.test_path, "
                                  f"or an unshuffled split), or train the runs with one data.split.seed.")
        if other_prep.head.vocabularies() != prep.head.vocabularies():
            raise SeqkitError(differs)
        return other_model, path

    # ------------------------------------------------------------ generate (language model)

    def generate(self, prompt: str = "", *, max_length: int | None = None,
                 temperature: float | None = None, top_k: int | None = None,
                 top_p: float | None = None, greedy: bool = False, beam_width: int | None = None,
                 length_penalty: float | None = None, n_best: int | None = None,
                 min_length: int | None = None, num: int = 1, seed: int = 0,
                 cache: bool = False, mix: bool = False) -> list:
        """Continue ``prompt`` with a language-model run, as ``seqkit generate`` does.

        Sampling (the default, or ``greedy=True``) unless a beam option is given or the recipe's
        ``decoding.strategy`` is ``beam``. ``None`` takes the recipe's ``decoding`` value.

        Args:
            prompt: text tokenized like the training data (unknown tokens are read as ``[UNK]``
                and counted in a logged warning). A run trained with ``data.layout: stream``:
                the prompt's lines prime the state and sampling goes on past line ends (printed
                as line breaks) to ``max_length`` tokens (:func:`seqkit.heads.language_model.generate.generate_text`).
            max_length: most new tokens.
            temperature / top_k / top_p / num / seed: sampling (``top_k`` 0 and ``top_p`` 1 = all
                tokens; ``num`` continuations; the same ``seed`` gives the same text).
            greedy: arg-max decoding.
            beam_width / length_penalty / n_best / min_length: beam search (GNMT length penalty).
            cache, mix: language model, data.layout stream, sampling or greedy: draw each token
                from the network mixed with a continuous cache of its hidden states (Grave et al.
                2017) / an online n-gram and longest-match model, the mixture
                ``evaluate(cache=, mix=)`` scores, its settings chosen on the valid split (the
                data is read). The n-gram and match models read the training text, then the
                prompt; the cache holds the prompt's and the continuation's hidden states.
                ``temperature`` applies to the network's distribution before it is mixed,
                ``top_k`` / ``top_p`` to the mixture; ``greedy`` is the mixture's arg-max
                (:mod:`seqkit.heads.language_model.adaptive_generate`).

        Returns:
            Sampling/greedy: ``num`` strings (the prompt and its continuation). Beam search:
            ``n_best`` ``(text, score)`` pairs, best first (score: log-probability of the
            continuation over the length penalty, nats).

        Raises:
            SeqkitError: not a language-model run; ``greedy`` with beam options; sampling options
                with beam search; ``n_best > beam_width`` and other bad values; ``cache`` / ``mix``
                with beam search, for a run that is not a stream-layout language model (both
                checked before the run loads), or with an empty valid split.
        """
        prompt = a.text("prompt", prompt, option="--prompt")
        max_length = a.whole("max_length", max_length, 1, MAX_NEW_TOKENS, optional=True)
        temperature = a.real("temperature", temperature, 0, low_open=True, optional=True)
        top_k = a.whole("top_k", top_k, 0, optional=True)
        top_p = a.real("top_p", top_p, 0, 1, low_open=True, optional=True)
        num, seed = a.whole("num", num, 1, MAX_SAMPLES), a.whole("seed", seed)
        for name in ("beam_width", "n_best", "min_length"):
            a.whole(name, locals()[name], 0, optional=True)
        length_penalty = a.real("length_penalty", length_penalty, optional=True)
        adaptive = bool(cache or mix)
        check_decoding_options(greedy=greedy, beam_width=beam_width, length_penalty=length_penalty,
                               n_best=n_best, min_length=min_length, adaptive=adaptive)
        beam_asked = beam_width is not None or length_penalty is not None or n_best is not None \
            or min_length is not None
        if adaptive:  # from the recipe alone, before the model and the data load
            check = getattr(HEADS.get(self.recipe.head.type), "check_adaptive_generation", None)
            if check is None:
                raise SeqkitError(f"{self.path}: --cache / --mix need a language model trained with "
                                  f"data.layout: stream (this run's head is "
                                  f"'{self.recipe.head.type}'); generate without them.")
            try:
                check(self.recipe)
            except SeqkitError as e:
                raise SeqkitError(f"{self.path}: {e}") from None
            if self.recipe.decoding.strategy == "beam" and not greedy:
                raise SeqkitError(f"{self.path}: --cache / --mix sample or decode greedily, but the "
                                  f"recipe's decoding.strategy is beam; add --greedy (greedy=True), "
                                  f"or set decoding.strategy to sample.")
        prep, model = self._load(with_data=adaptive)
        self._need(prep, "generate")
        dec = prep.recipe.decoding
        max_length = max_length or dec.max_length
        if beam_asked or (dec.strategy == "beam" and not greedy):
            sampling = [o for o, v in (("--temperature", temperature), ("--top-k", top_k), ("--top-p", top_p))
                        if v is not None] + (["--num"] if num != 1 else [])
            if sampling:
                raise SeqkitError(f"{', '.join(sampling)}: sampling options, which beam search does not use; drop "
                                  f"them, or drop the beam options to sample. Beam search returns "
                                  f"several hypotheses with --n-best.")
            return prep.head.generate_beam(prep, model, prompt, beam_width=dec.beam_width if beam_width is None else beam_width,
                                 n_best=dec.n_best if n_best is None else n_best,
                                 length_penalty=dec.length_penalty if length_penalty is None else length_penalty,
                                 max_length=max_length,
                                 min_length=dec.min_length if min_length is None else min_length)
        return prep.head.generate_text(prep, model, prompt, num=num, max_length=max_length,
                             greedy=greedy or dec.strategy == "greedy",
                             temperature=temperature or dec.temperature,
                             top_k=dec.top_k if top_k is None else top_k,
                             top_p=dec.top_p if top_p is None else top_p, seed=seed,
                             **({"cache": cache, "mix": mix} if adaptive else {}))

    # ------------------------------------------------------------ predict / transduce

    def predict(self, inputs, *, input_format: str = "auto", beam_width: int | None = None,
                n_best: int | None = None, length_penalty: float | None = None,
                name: str = "<input>", plot=None, overwrite: bool = False):
        """Label (acceptor), tag (tagger) or transduce (seq2seq) sequences, as ``seqkit predict``;
        a plugin head answers in its own way (e.g. forecasts).

        Args:
            inputs: one string (the whole input, as a file holds it: one sequence per line, or
                CoNLL / ``.ts`` text) or a list of strings (one sequence each; empty ones skipped).
                Text is tokenized as in training. A ``pandas.DataFrame`` (the columns of the
                training table) for a head that reads tables (``Head.read_frame``); the result is
                then a ``pandas.DataFrame`` too (``Head.results_frame``).
            input_format: ``"auto"`` (``ts`` for a frames run or a ``name`` ending ``.ts``,
                ``table`` for one ending ``.csv``, ``.tsv``, ``.tab``, ``.jsonl`` or ``.ndjson``,
                ``conll`` for one ending ``.conll``, ``.conllu``, ``.iob`` or ``.bio``, else
                ``text``), ``"text"``, ``"conll"``, ``"ts"`` or ``"table"`` (a CSV / TSV / JSON
                lines table: the run's text column, or a tagger's tokens column, is read; see
                :mod:`seqkit.heads.sequence.predict`).
            beam_width / n_best / length_penalty: seq2seq runs only (see :meth:`transduce`).
            name: how messages name the input (``<input>:LINE``).
            plot: also draw the answers into this PNG (``seqkit predict --plot``), for a head that
                draws them (``Head.draw_prediction``). The path is checked before the run loads
                (:mod:`seqkit.outputs`): never a run's own file or the input; a file seqkit did
                not write only with ``overwrite``; written staged, then renamed.
            overwrite: ``plot`` may replace a file seqkit did not write.

        Returns:
            One dict per sequence. Acceptor: ``{"where", "label", "probability",
            "probabilities": {label: p}}``. Tagger: ``{"where", "tokens": [T], "tags": [T],
            "probability": [T], "probabilities": [T x {tag: p}]}`` (+ ``"untagged_steps"`` when
            ``head.too_long: truncate`` cut it). seq2seq: as :meth:`transduce`. A plugin head:
            its ``Head.predict`` dicts (a DataFrame input: its ``Head.results_frame``).

        Raises:
            SeqkitError: a language-model run (use :meth:`generate`); beam options for a head
                other than seq2seq; empty or malformed input, or input of the wrong kind; a
                DataFrame or ``plot`` for a head that reads or draws none; a ``plot`` path seqkit
                may not write (OutputPathError); matplotlib missing.
        """
        name = a.text("name", name)
        if plot is not None and not isinstance(plot, (str, os.PathLike)):
            raise a.ArgumentTypeError(f"plot={plot!r}: must be the path of a PNG to write (--plot in "
                                              f"the CLI); got a {type(plot).__name__}.")
        table = _is_frame(inputs)
        if table:
            self._refuse_unless("read_frame", "a pandas DataFrame input", "reads tables",
                                "Give the input as a string (one sequence per line) or a list of strings.")
        outputs = None
        if plot is not None:  # checked before the run loads: nothing is lost to a bad path
            outputs = self._plot_outputs(os.fspath(plot), overwrite, name)
        if table:
            prep, model = self._load()
            self._need(prep, "predict")
            records = prep.head.read_frame(inputs, "<DataFrame>" if name == "<input>" else name)
            results = prep.head.predict(model, records)
            if outputs is not None:
                prep.head.draw_prediction(results, records, os.fspath(plot), outputs)
            return prep.head.results_frame(results)
        text = _texts(inputs, "predict")
        if not isinstance(inputs, str) and input_format == "auto" and is_table_input(name, "auto"):
            input_format = "text"  # a list holds one sequence each, whatever `name` says
        prep, model = self._load()
        if prep.head.answers == "transduce":
            return self.transduce(text, beam_width=beam_width, n_best=1 if n_best is None else n_best,
                                  length_penalty=length_penalty, name=name, input_format=input_format)
        if beam_width is not None or n_best is not None or length_penalty is not None:
            which = " or ".join(n for n in HEADS.names() if HEADS.get(n).answers == "transduce")
            raise SeqkitError(f"{self.path}: --beam-width/--n-best/--length-penalty are for {which} runs; "
                              f"this run's head is '{prep.recipe.head.type}'.")
        self._need(prep, "predict")
        if input_format not in ("auto", "text", "conll", "ts", "table"):
            raise SeqkitError(f"input_format {input_format!r}: expected auto, text, conll, ts or table.")
        records = prep.head.read_inputs(text, name, input_format)
        results = prep.head.predict(model, records)
        if outputs is not None:
            prep.head.draw_prediction(results, records, os.fspath(plot), outputs)
        return results

    def _refuse_unless(self, hook: str, what: str, does: str, fix: str) -> None:
        """Refuse, before the run loads, a request that needs the optional head hook ``hook``
        (``Head.offers``) when this run's head lacks it, naming the registered heads that have it."""
        own = self.recipe.head.type
        if HEADS.get(own).offers(hook):
            return
        titles = [getattr(HEADS.get(n), "title", None) or n for n in HEADS.names() if HEADS.get(n).offers(hook)]
        which = ", ".join(titles) if titles else "none is registered here"
        raise SeqkitError(f"{self.path}: {what} needs a run whose head {does} ({which}); this run's "
                          f"head is '{own}'. {fix}")

    def _plot_outputs(self, plot: str, overwrite: bool, name: str):
        """The checked :class:`seqkit.outputs.FileOutputs` of ``predict(plot=)``'s PNG (before the
        run loads): the head draws predictions, matplotlib is there, the path is seqkit's to write."""
        from seqkit.diagnostics.plots import pyplot
        from seqkit.outputs import picture_outputs, protected_by_runs

        self._refuse_unless("draw_prediction", "--plot", "draws its predictions",
                            "Drop --plot; the predictions are printed (returned) as they are.")
        pyplot()  # matplotlib missing: said before the prediction
        return picture_outputs(plot, overwrite=overwrite, with_json=False, option="--plot",
                               protect=protected_by_runs([self.path]) + [("the prediction input", name)])

    # ------------------------------------------------------------ pictures

    def plot(self, out, *, overwrite: bool = False) -> list:
        """Draw the run's training curves into the PNG ``out`` (+ a JSON beside it), and each
        picture its head draws for a run (``Head.run_figures``, e.g. a forecasting run's
        backtest) into ``OUT-NAME.png`` (+ ``.json``) beside it, as ``seqkit plot RUN --out OUT``.

        Every path is checked before anything is drawn (:mod:`seqkit.outputs`: never a run's own
        file; a file seqkit did not write only with ``overwrite``); each is staged, then renamed.

        Returns:
            The paths written, ``[out, its JSON, OUT-NAME.png, its JSON, ...]``.

        Raises:
            RunDirError: no ``history.json``. OutputPathError: a path seqkit may not write.
            SeqkitError: matplotlib missing; a picture the head cannot draw (e.g. an empty split).
        """
        from seqkit.diagnostics.run_plots import plot_runs

        out = a.path("out", out, option="--out")
        return plot_runs([self.path], out, overwrite=overwrite, opened={self.path: self})

    def transduce(self, sources, *, beam_width: int | None = None, n_best: int = 1,
                  length_penalty: float | None = None, name: str = "<input>",
                  input_format: str = "auto") -> list:
        """Beam-search each source of a seq2seq run (e.g. words to pronunciations).

        Args:
            sources: a string (one source per line) or a list of strings; empty ones are skipped
                (counted in a logged warning).
            beam_width / length_penalty: ``None`` takes the recipe's ``decoding`` value.
            n_best: hypotheses per source (``<= beam_width``).
            name: how messages name the input.
            input_format: ``"auto"`` (a table when ``name`` ends ``.csv``, ``.tsv``, ``.tab``,
                ``.jsonl`` or ``.ndjson``, else a source a line), ``"text"`` or ``"table"`` (the
                run's ``data.source_column``, or the column ``source``).

        Returns:
            One ``{"where", "input", "hypotheses": [{"output": [symbols], "score": float}]}``
            per source, hypotheses best first (score: log-probability over the length penalty).

        Raises:
            SeqkitError: not a seq2seq run; ``n_best > beam_width``; no source; a source longer
                than the run's ``data.max_length``.
        """
        text = _texts(sources, "transduce")
        if not isinstance(sources, str) and input_format == "auto" and is_table_input(name, "auto"):
            input_format = "text"  # a list holds one source each, whatever `name` says
        name = a.text("name", name)
        prep, model = self._load()
        self._need(prep, "transduce")
        dec = prep.recipe.decoding
        width = dec.beam_width if beam_width is None else beam_width
        alpha = dec.length_penalty if length_penalty is None else length_penalty
        check_beam_args(width, n_best, alpha, 0, 1)
        return prep.head.transduce_texts(prep, model, text, name, beam_width=width, n_best=n_best,
                                         length_penalty=alpha, input_format=input_format)

    def attention(self, text: str, *, beam_width: int | None = None, name: str = "<input>") -> Alignment:
        """The attention weights of a seq2seq run for one source (what ``seqkit attention`` draws).

        Args:
            text: the source (e.g. a word).
            beam_width: of the beam search whose best output is scored [default: recipe].
            name: how messages name the input.

        Returns:
            :class:`Alignment` ``(source [S], target [T], weights [T, S])``.

        Raises:
            SeqkitError: not a seq2seq run; the run has ``head.attention: none``; an empty or
                too long source.
        """
        import numpy as np

        text, name = a.text("text", text), a.text("name", name)
        if beam_width is not None:
            check_beam_args(beam_width, 1, None, 0, 1)
        prep, model = self._load()
        self._need(prep, "transduce", "`seqkit attention`")
        source, target, w = prep.head.attention(prep, model, text, name,
                                                beam_width=beam_width or prep.recipe.decoding.beam_width)
        return Alignment(source, target, np.asarray(w, "float32"))

    # ------------------------------------------------------------ text in, text out

    def serving_model(self, *, greedy: bool = False, max_length: int | None = None):
        """The run as a ``keras.Model`` that takes raw strings: tokenization, lowercasing and the
        vocabulary lookup run inside the graph (the ids ``predict`` / ``generate`` use), so
        ``model.predict(["some text"])`` needs no seqkit preprocessing. It computes what the
        SavedModel signature ``predict_text`` (``generate_text`` for a language model, or with
        ``greedy``) of ``seqkit export --format saved_model`` computes.

        Args:
            greedy: seq2seq: greedy decoding instead of the recipe's beam search.
            max_length: language model: most new tokens [default: ``decoding.max_length``].

        Returns:
            A ``keras.Model``: ``text [B] tf.string`` (one sequence per string; ``predict`` also
            takes a list of str) -> a dict. Acceptor: ``label [B]``, ``probability [B]``,
            ``probabilities [B, C]``. Tagger: ``tokens [B, T]``, ``tags [B, T]`` (padded with
            ``""``), ``lengths [B]``, ``probabilities [B, T, C]``. Language model: ``text [B]``,
            prompt + greedy continuation (``generate(prompt, greedy=True)``). seq2seq:
            ``output [B]`` (symbols joined by spaces), ``hypotheses [B, N]``, ``scores [B, N]``
            (``transduce``); with ``greedy``: ``output`` alone. See :mod:`seqkit.inference.serving`.

        Raises:
            SeqkitError: the run reads frames, not text, or has a plugin head; ``greedy`` for a
                head other than seq2seq; ``max_length`` for a head other than the language model.
        """
        prep, model = self._load()
        why = text_unsupported(prep)
        if why is not None:
            raise SeqkitError(f"{self.path}: serving_model needs a run that reads text; {why}.")
        return serving_model(prep, model, greedy=greedy, max_length=max_length)

    # ------------------------------------------------------------ export

    def export(self, out: str | None = None, *, format: str = "tflite", quantize: str = "none",
               tolerance: float | None = None, min_agreement: float | None = None,
               parity_examples: int = 32, overwrite: bool = False, full_sequence: bool | None = None,
               batch: int = 1, length: int | None = None, state: str = "explicit",
               io_type: str = "float", calibration_examples: int = 128,
               cell_scaling: bool = True, calibration: str | None = None,
               parity: str | None = None, int16_cell: bool = False) -> dict:
        """Export the run, checked against Keras before anything is written (``seqkit export``).

        Args:
            out: the export directory [default: ``exports/NAME``].
            format: ``"tflite"`` (step model), ``"saved_model"``, ``"all"``, or ``"keras"`` (a
                portable ``model.keras`` with stock Keras layers only).
            quantize: TFLite precision: ``"none"``, ``"float16"``, ``"dynamic-range"`` (weights
                only), or full integer ``"int8"`` / ``"int16x8"`` (activations too, calibrated on
                ``calibration_examples`` training records; :mod:`seqkit.export.calibration`).
            io_type: full integer: ``"float"`` or ``"int"`` model inputs and outputs (token ids
                stay int32; :class:`seqkit.runtime.StreamingModel` and the other runtimes convert
                with each tensor's scale and zero point).
            tolerance / min_agreement: parity limits (defaults depend on ``quantize``); below
                ``min_agreement`` (the gate) nothing is written. ``format="keras"``: the largest
                relative output difference (default 1e-5, :func:`seqkit.export.portable.export_portable_keras`).
            parity_examples: held-out examples streamed through the export for the check.
            overwrite: replace an existing export directory.
            full_sequence / batch / length: a whole-sequence TFLite model for a pinned
                ``[batch, length]`` input; ``length`` also pins a seq2seq encoder. ``None``
                (default): whole-sequence for a bidirectional acceptor or tagger (it has no step
                model; ``length`` then defaults to the run's ``data.max_length``), the step
                model otherwise; False asks for the step model.
            state: ``"explicit"`` (the TFLite step model takes and returns its states) or
                ``"internal"`` (it keeps them in resource variables, signatures ``step`` and
                ``reset``, ``batch`` rows fixed at export; language model, acceptor, tagger; see
                :mod:`seqkit.export.stateful`). :class:`seqkit.runtime.StreamingModel` runs both.
            cell_scaling: ``int8`` step models: LSTM cell states carried divided by a per-unit
                scale (:mod:`seqkit.export.cell_scaling`); False: the plain cell state.
            int16_cell: ``int8`` explicit-state step models of LSTM runs: int8 products, int16
                element-wise cell ops (:mod:`seqkit.export.int16_cell`; needs ai-edge-quantizer).
            calibration / parity: JSON Lines files of records for calibration / the parity
                check; without them the run's data, or where it is missing the run's
                ``export_sample.json`` (:mod:`seqkit.export.sample`).

        Returns:
            The parity report: per artefact (``"tflite"``, ``"saved_model"``, ...)
            ``{"max_abs_diff", "argmax_agreement", "positions", ...}`` (TFLite also ``bytes`` and
            ``ops``; seq2seq also ``"<kind>_decoding"``). ``format="keras"``: ``{"path",
            "max_abs_diff", "rewritten"}``. The report also holds ``"out"``: the directory.

        Raises:
            SeqkitError: bad arguments; ``out`` exists (without ``overwrite``) or is not writable;
                an op TFLite lacks; a parity failure (nothing is written then).
        """
        import_tensorflow_quietly()

        if format not in FORMATS + ("keras",):
            raise SeqkitError(f"--format {format}: expected one of {', '.join(FORMATS + ('keras',))}.")
        options = ExportOptions(fmt=format, quantize=quantize, tolerance=tolerance,
                                min_agreement=min_agreement, parity_examples=parity_examples,
                                overwrite=overwrite, full_sequence=full_sequence, batch=batch,
                                length=length, state=state, io_type=io_type,
                                calibration_examples=calibration_examples, cell_scaling=cell_scaling,
                                calibration=calibration, parity=parity, int16_cell=int16_cell)
        if format != "keras":
            options.check()  # before anything loads
        out = os.fspath(out) if out is not None else os.path.join("exports", self.recipe.name)
        check_writable(out, "export")  # before the conversion, which takes a while

        check_export_folder(out)  # not inside a run directory, not a symbolic link
        with export_lock(out):  # a second export into the same folder fails at once
            return {**self._export(out, options), "out": out}

    def _changed_in_memory(self) -> bool:
        """True when :attr:`model` was loaded and its weights no longer equal ``model.keras``'s."""
        if self._model is None:
            return False
        import keras
        import numpy as np

        saved = keras.saving.load_model(os.path.join(self.path, BEST), compile=False)
        mine, theirs = self._model.get_weights(), saved.get_weights()
        return len(mine) != len(theirs) or any(a.shape != b.shape or not np.array_equal(a, b)
                                               for a, b in zip(mine, theirs))

    def _export(self, out: str, options) -> dict:
        """:meth:`export`'s work, under the export folder's lock."""
        if self._changed_in_memory():
            raise SeqkitError(f"{self.path}: run.model was changed in memory since it was loaded (its "
                              f"weights differ from {BEST}), and an export reads the run directory, so "
                              f"it would not hold the model you are using. Write the changed model as "
                              f"a run first -- _, pre = seqkit.build(run.recipe); "
                              f"seqkit.Run.from_model(run.model, pre, run_dir=NEW) -- and export "
                              f"that, or seqkit.load() the run again to export what it holds.")
        if options.fmt == "keras":
            report = export_portable_keras(self.path, out, overwrite=options.overwrite,
                                           tolerance=options.tolerance)
        else:
            report = export_run(self.path, out, options)
        return report

    # ------------------------------------------------------------ from a model you trained

    @classmethod
    def from_model(cls, model, pre, run_dir, *, overwrite: bool = False) -> "Run":
        """Write a run directory for a model trained outside ``seqkit train`` (e.g. your own
        ``model.fit`` on :func:`seqkit.build`'s datasets), so it evaluates, predicts and exports
        like any run.

        Writes ``recipe.yaml``, the head's assets (vocabulary, labels, normaliser),
        ``model.keras`` (the model as given), ``history.json`` (from ``model.history`` when it
        has one), ``metrics.json`` (valid/test metrics of the saved model, baselines) and
        ``state.json``. It has no ``last.keras``, so ``seqkit train --resume`` does not apply.

        Args:
            model: the ``keras.Model`` (built by :func:`seqkit.build`, trained by you).
            pre: the :class:`seqkit.api.Preprocessing` :func:`seqkit.build` returned with it.
            run_dir: the run directory to write (replaced only with ``overwrite`` and only when it
                is a seqkit run, as ``seqkit train --overwrite``).

        Returns:
            The new :class:`Run`.

        Raises:
            RunDirError: ``run_dir`` exists (without ``overwrite``) or is not a folder seqkit may
                replace; another process is writing it.
            SeqkitError: ``pre`` holds no data, or the model does not fit its vocabulary/labels.
        """
        prep = getattr(pre, "prepared", pre)
        if not getattr(prep, "splits", None):
            raise SeqkitError("Run.from_model: the preprocessing holds no data; pass the one "
                              "seqkit.build(recipe) returned with the model.")
        run_dir = os.fspath(run_dir)
        recipe = prep.recipe
        check_model_matches(prep, model, run_dir, given="Run.from_model")  # before anything is written
        with RunLock(run_dir):
            remove_stale(*split_run_path(run_dir))
            check_target(run_dir, recipe, overwrite)
            stage = Staging(run_dir)
            stage.create()
            try:
                path = stage.path
                atomic_write_text(os.path.join(path, RECIPE), recipe.to_yaml())
                prep.head.save_assets(path)
                write_provenance(path, recipe)
                atomic_save_model(model, os.path.join(path, BEST))
                best = load_model(os.path.join(path, BEST))  # the saved model, as a run loads it
                check_model_matches(prep, best, os.path.join(path, BEST))
                compile_model(prep, best)
                logs = getattr(getattr(model, "history", None), "history", None) or {}
                epochs = max((len(v) for v in logs.values()), default=0)
                history = [{"epoch": i + 1, **{k: float(v[i]) for k, v in logs.items() if i < len(v)}}
                           for i in range(epochs)]
                metrics = {"recipe": recipe.name, "source": prep.source, "epochs": epochs,
                           "parameters": count_parameters(best),
                           "vocabulary": len(prep.vocab) if prep.vocab is not None else None,
                           "replicas": 1, "examples": {k: len(v) for k, v in prep.splits.items()},
                           "trained_by": "Run.from_model"}
                for split in ("valid", "test"):
                    if prep.splits.get(split):
                        metrics[split] = evaluate_model(prep, best, split)
                metrics["baselines"] = checked_baselines(prep)
                atomic_write_json(os.path.join(path, HISTORY), history)
                atomic_write_json(os.path.join(path, METRICS), metrics)
                atomic_write_json(os.path.join(path, STATE), {"epoch": epochs, "best": None,
                                                              "status": "finished"})
                stage.promote()
            except BaseException:
                stage.discard()
                raise
        return cls(run_dir)
