"""LM generation with beam search and top-p: library parity and the CLI options."""

import numpy as np
import pytest
from click.testing import CliRunner

from seqkit.cli import main


@pytest.fixture(scope="module")
def lm_run(tiny_lm):
    """The session's tiny 2-layer LSTM LM on pydoc text (conftest ``tiny_lm``; read only)."""
    return tiny_lm("lstm")


def test_beam_width_1_generation_equals_greedy_generation(lm_run):
    from seqkit.heads.language_model.generate import generate_beam, generate_text
    from seqkit.training.train import load_run

    prep, model = load_run(str(lm_run))
    greedy = generate_text(prep, model, "The ", greedy=True, max_length=25)
    beam = generate_beam(prep, model, "The ", beam_width=1, max_length=25)
    assert [t for t, _ in beam] == greedy


def test_beam_scores_are_length_penalised_log_probs_of_the_printed_text(lm_run):
    """Re-score each n-best continuation with the full-sequence model: log P / lp(|Y|)."""
    import tensorflow as tf

    from seqkit.data.vocab import END_ID, START_ID
    from seqkit.heads.language_model.generate import generate_beam
    from seqkit.training.train import load_run

    prep, model = load_run(str(lm_run))
    out = generate_beam(prep, model, "de", beam_width=3, n_best=3, length_penalty=0.6, max_length=6)
    scores = [s for _, s in out]
    assert scores == sorted(scores, reverse=True) and len(out) == 3
    for text, score in out:
        cont = prep.vocab.encode(list(text[2:]))
        ended = len(cont) < 6  # shorter than max_length: it stopped with </s>
        ids = [START_ID] + prep.vocab.encode(list("de")) + cont + ([END_ID] if ended else [])
        logp = tf.nn.log_softmax(model(np.array([ids[:-1]], "int32"))).numpy()[0]
        total = sum(logp[i, ids[i + 1]] for i in range(2, len(ids) - 1))
        assert score == pytest.approx(total / ((5 + len(cont)) / 6) ** 0.6, abs=1e-4)


def test_cli_beam_prints_n_best_with_scores(lm_run):
    res = CliRunner().invoke(main, ["generate", str(lm_run), "--beam-width", "4", "--length-penalty",
                                    "0.6", "--n-best", "3", "--prompt", "def ", "--max-length", "20"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert len(lines) == 3
    scores = [float(line.split("\t", 1)[0]) for line in lines]
    assert scores == sorted(scores, reverse=True)
    assert all(line.split("\t", 1)[1].startswith("def ") for line in lines)


@pytest.mark.parametrize("args,needle", [
    (["--beam-width", "2", "--n-best", "3"], "n-best (3) is larger than the beam width (2)"),
    (["--beam-width", "2", "--greedy"], "--greedy and beam-search options"),
    (["--beam-width", "2", "--top-p", "0.9"], "--top-p: sampling options"),
    (["--beam-width", "2", "--length-penalty", "-1"], "length penalty must be >= 0"),
    (["--top-p", "0"], "--top-p"),
    # a beam of 10^8 took 15 GB before failing inside TensorFlow
    (["--beam-width", "100000000", "--max-length", "3"], "beam width 100,000,000 is more than seqkit searches (1,000)"),
])
def test_cli_bad_decoding_options_exit_2_with_a_clear_message(lm_run, args, needle):
    res = CliRunner().invoke(main, ["generate", str(lm_run), *args])
    assert res.exit_code == 2 and needle in res.output, res.output


def test_cli_top_p_sampling_is_seeded(lm_run):
    args = ["generate", str(lm_run), "--top-p", "0.8", "--num", "2", "--max-length", "20", "--seed", "3"]
    a, b = CliRunner().invoke(main, args), CliRunner().invoke(main, args)
    assert a.exit_code == 0, a.output
    assert a.output == b.output and len(a.output.splitlines()) == 2


def test_repeated_generate_text_reuses_one_traced_loop_with_the_same_outputs(lm_run):
    """The sampling loop is traced once per (model, configuration): later calls do not retrace, and
    give what a fresh model's first call gives for the same seed."""
    from seqkit.heads.language_model.generate import TRACED_ATTR, generate_text
    from seqkit.training.train import load_run

    prep, model = load_run(str(lm_run))
    first = generate_text(prep, model, "The ", num=2, max_length=20, top_k=5, seed=3)
    (key, fn), = getattr(model, TRACED_ATTR).items()
    assert key == ("sample", 2, False, 5, 1.0) and fn.experimental_get_tracing_count() == 1
    other = [generate_text(prep, model, "The ", num=2, max_length=20, top_k=5, seed=s) for s in (4, 5, 3)]
    assert other[-1] == first and fn.experimental_get_tracing_count() == 1
    assert len(getattr(model, TRACED_ATTR)) == 1
    prep2, fresh = load_run(str(lm_run))
    assert generate_text(prep2, fresh, "The ", num=2, max_length=20, top_k=5, seed=3) == first
    generate_text(prep, model, "The ", num=2, max_length=20, greedy=True)  # another configuration
    assert len(getattr(model, TRACED_ATTR)) == 2
