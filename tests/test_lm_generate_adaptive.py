"""Generation from a stream language model mixed with its continuous cache and online n-gram /
match models (``seqkit generate --cache / --mix``, ``Run.generate(cache=, mix=)``)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from conftest import REPEATED_LINE
from seqkit.heads.language_model import adaptive as A


def _loaded(path):
    from seqkit.heads.language_model.adaptive_eval import training_stream
    from seqkit.runs.run import Run

    run = Run(path)
    prep, model = run._load(with_data=True)
    return run, prep, model, training_stream(prep.head, prep.splits["train"])


def _all_components(**kw) -> A.Settings:
    """Settings with every component (cache, n-gram orders, match), built by hand."""
    names = ("model", "cache", *(f"ngram{k}" for k in A.ORDERS), "match")
    base = dict(components=names, weights=((1.0,) + (0.0,) * (len(names) - 1),) * A.N_BUCKETS,
                theta=0.4, window=500, orders=A.ORDERS, discount=0.8, min_length=A.MIN_LENGTH, rate=0.0)
    return A.Settings(**{**base, **kw})


def test_sampling_distribution_cuts_like_filter_logits(tf):
    from seqkit.heads.language_model.adaptive_generate import sampling_distribution
    from seqkit.inference.decoding import filter_logits

    # by hand: [.5, .2, .2, .1]; top_k 2 keeps the tie at .2; top_p .6: mass above is 0, .5, .7, .9
    p = np.array([0.5, 0.2, 0.2, 0.1])
    np.testing.assert_allclose(sampling_distribution(p, 2), [5 / 9, 2 / 9, 2 / 9, 0])
    np.testing.assert_allclose(sampling_distribution(p, 0, 0.6), [5 / 9, 2 / 9, 2 / 9, 0])
    np.testing.assert_allclose(sampling_distribution(p, 0, 0.5), [1, 0, 0, 0])
    np.testing.assert_allclose(sampling_distribution(p, 3, 0.95), [*p[:3] / 0.9, 0])
    rng = np.random.default_rng(0)
    for k, top_p in ((0, 1.0), (1, 1.0), (5, 1.0), (0, 0.3), (0, 0.9), (7, 0.8)):
        q = rng.dirichlet(np.full(20, 0.3))
        ref = tf.nn.softmax(filter_logits(tf.constant(np.log(q)[None], tf.float32), 1.0, k, top_p))[0]
        np.testing.assert_allclose(sampling_distribution(q, k, top_p), ref.numpy(), atol=1e-6)


def test_all_weight_on_the_network_generates_what_plain_greedy_generates(tiny_stream_lm):
    from seqkit.heads.language_model.adaptive_generate import generate_adaptive

    run, prep, model, history = _loaded(tiny_stream_lm)
    settings = _all_components()  # weights [1, 0, ...] in every bucket
    for prompt in ("quick brown", "alpha beta\ngam", ""):
        plain = run.generate(prompt, greedy=True, max_length=30)
        mixed = generate_adaptive(prep, model, prompt, greedy=True, max_length=30, settings=settings,
                                  history=history)
        assert mixed == plain, prompt


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_generation_mixes_what_the_adaptive_stream_gives_over_the_whole_text(tiny_stream_lm, tf,
                                                                            temperature):
    """The loop's mixture at every generated position equals the network read over prompt +
    continuation in one pass, tempered, then :class:`AdaptiveStream` fed that text."""
    from seqkit.data.vocab import END_ID, START_ID
    from seqkit.heads.language_model.adaptive_generate import generate_adaptive, softmax
    from seqkit.heads.language_model.generate import _encode_stream_prompt
    from seqkit.heads.language_model.stream import StreamRunner

    _, prep, model, history = _loaded(tiny_stream_lm)
    # every component weighted, online steps on: each reading of the text matters
    settings = _all_components(theta=1.6, window=40, rate=0.1,
                               weights=((0.4, 0.1, *(0.05,) * len(A.ORDERS), 0.1),) * A.N_BUCKETS)
    prompt = "alpha beta\nquick br"
    trace: list = []
    generate_adaptive(prep, model, prompt, max_length=40, seed=2, temperature=temperature,
                      settings=settings, history=history, trace=trace)
    ids = _encode_stream_prompt(prep, prompt)
    gen = [int(step["tokens"][0]) for step in trace]
    inputs = ids + [START_ID if g == END_ID else g for g in gen[:-1]]
    targets = [END_ID if i == START_ID else i for i in ids[1:]] + gen
    runner = StreamRunner(model)
    h, logits, _ = runner.forward_hidden(tf.constant([inputs], tf.int32), runner.zero_states(1),
                                         truncate=False)
    h, p = h.numpy()[0].astype(np.float64), softmax(logits.numpy()[0], temperature)
    whole = A.AdaptiveStream(settings, len(prep.vocab), history=history)
    first = len(ids) - 1
    for t in range(len(inputs)):
        d = whole.distribution(p[t], h[t])
        if t >= first:
            np.testing.assert_allclose(trace[t - first]["mixed"][0], d, rtol=1e-4, atol=1e-8)
        whole.update(h[t], targets[t])
    assert END_ID in gen  # the continuation crossed a line end (read back as <s>)


def test_top_k_and_top_p_cut_the_mixture(tiny_stream_lm):
    """top_k = 1 (or a tiny top_p) samples the mixture's arg-max: the cut applies to the mixture,
    not to the network before mixing."""
    from seqkit.heads.language_model.adaptive_generate import generate_adaptive

    _, prep, model, history = _loaded(tiny_stream_lm)
    settings = _all_components(weights=((0.3, 0.1, *(0.05,) * len(A.ORDERS), 0.2),) * A.N_BUCKETS)
    kw = dict(max_length=25, settings=settings, history=history)
    greedy = generate_adaptive(prep, model, "beta ", greedy=True, **kw)
    assert generate_adaptive(prep, model, "beta ", top_k=1, seed=3, **kw) == greedy
    assert generate_adaptive(prep, model, "beta ", top_p=1e-6, seed=4, **kw) == greedy
    trace: list = []
    generate_adaptive(prep, model, "beta ", top_k=3, seed=5, trace=trace, **kw)
    for step in trace:  # every sampled token is among the mixture's 3 most likely
        mixed, tok = step["mixed"][0], int(step["tokens"][0])
        assert mixed[tok] >= np.sort(mixed)[-3]


def test_mix_continues_the_repeated_training_line(tiny_stream_lm):
    """The training text repeats one line whose words occur nowhere else: once the prompt has
    read its first seven characters, the match and n-gram models know the rest; the network alone
    (one epoch, 16 units) does not."""
    from seqkit.runs.run import Run

    run = Run(tiny_stream_lm)
    rest = len(REPEATED_LINE) - len("quick brown") + 1  # the line's other characters and </s>
    for prompt in ("quick brown", "alpha beta\nquick brown"):
        out, = run.generate(prompt, greedy=True, mix=True, max_length=rest)
        assert out == prompt[:-len("quick brown")] + REPEATED_LINE + "\n"
        plain, = run.generate(prompt, greedy=True, max_length=rest)
        assert plain != out


def test_settings_are_those_evaluate_chooses(tiny_stream_lm):
    from seqkit.heads.language_model.adaptive_generate import choose_generation_settings

    run, prep, model, history = _loaded(tiny_stream_lm)
    chosen = choose_generation_settings(prep, model, cache=True, mix=True, history=history)
    report = run.evaluate("test", cache=True, mix=True)
    assert chosen.as_dict() == report["static+cache+ngram"]["settings"]


def test_cli_prints_what_the_api_returns(tiny_stream_lm):
    from seqkit.cli import main
    from seqkit.runs.run import Run

    args = dict(max_length=30, seed=7, temperature=0.8, top_p=0.95, num=2)
    api = Run(tiny_stream_lm).generate("kappa ", cache=True, mix=True, **args)
    res = CliRunner().invoke(main, ["generate", tiny_stream_lm, "--prompt", "kappa ", "--cache", "--mix",
                                    "--max-length", "30", "--seed", "7", "--temperature", "0.8",
                                    "--top-p", "0.95", "--num", "2"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert res.stdout == "".join(t + "\n" for t in api)
    assert len(api) == 2 and api[0] != api[1]  # two draws from one seeded generator
    assert "adaptive models: reading" in res.stderr  # the slow part is logged
    other = Run(tiny_stream_lm).generate("kappa ", cache=True, mix=True, **{**args, "seed": -7})
    assert other != api


def _copy_run(src, dst, **edits):
    """A copy of the run whose recipe.yaml has ``section.key`` values replaced (``edits``)."""
    shutil.copytree(src, dst)
    path = dst / "recipe.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    for dotted, value in edits.items():
        *parents, key = dotted.split(".")
        node = raw
        for p in parents:
            node = node[p]
        node[key] = value
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return str(dst)


def test_refusals_are_one_paragraph_from_api_and_cli(tiny_stream_lm, tmp_path, monkeypatch):
    from seqkit.cli import main
    from seqkit.errors import SeqkitError
    from seqkit.runs.run import Run

    line = _copy_run(tiny_stream_lm, tmp_path / "line", **{"data.layout": "line"})
    beam = _copy_run(tiny_stream_lm, tmp_path / "beam", **{"decoding.strategy": "beam"})
    no_valid = _copy_run(tiny_stream_lm, tmp_path / "novalid", **{"data.split.valid": 0.0})

    def no_load(self, with_data=False):
        raise AssertionError("the run was loaded before the options were checked")

    cases = [  # (run, API kwargs, CLI flags, words of the message, checked before loading)
        (line, {"cache": True}, ["--cache"], "data.layout: stream", True),
        (tiny_stream_lm, {"mix": True, "beam_width": 3}, ["--mix", "--beam-width", "3"],
         "beam search does not use them", True),
        (beam, {"mix": True}, ["--mix"], "decoding.strategy is beam; add --greedy", True),
        (no_valid, {"mix": True}, ["--mix"], "valid split, which is empty", False),
    ]
    for run, kwargs, flags, words, early in cases:
        with monkeypatch.context() as m:
            if early:
                m.setattr(Run, "_load", no_load)
            with pytest.raises(SeqkitError) as exc:
                Run(run).generate("ab", **kwargs)
            msg = str(exc.value)
            assert words in msg and "\n" not in msg
            res = CliRunner().invoke(main, ["generate", run, "--prompt", "ab", *flags])
        assert res.exit_code != 0 and msg in res.output and "Traceback" not in res.output, res.output

