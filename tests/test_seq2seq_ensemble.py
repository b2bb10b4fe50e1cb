"""Encoder-decoder ensembles: one beam over the members' mean log-probabilities."""

import numpy as np

from seqkit.data.vocab import END_ID, START_ID
from tests.test_seq2seq import build  # noqa: F401  (the module fixture of small untrained models)

SOURCES = [[4, 5, 6, 7], [9, 4], [8], [10, 9, 8, 7, 6]]


def _log_softmax(x):
    x = np.asarray(x, "float64")
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum())


def test_greedy_ensemble_equals_a_hand_loop_over_mean_log_probabilities(tf, build):  # noqa: F811
    from seqkit.heads.seq2seq.decoding import Seq2SeqStepper, transduce

    # two members of different shapes (LSTM + Bahdanau; BiGRU into a 2-layer LSTM + Luong)
    models = [build("bahdanau-lstm")[1], build("luong-bigru-to-2xlstm")[1]]
    got = transduce(models, SOURCES, beam_width=1, max_length=6)
    for src, hyps in zip(SOURCES, got):
        steppers = [Seq2SeqStepper(m) for m in models]
        started = [s.start(np.array([src], "int32")) for s in steppers]
        states = [list(st) for st, _ in started]
        tok, toks, score = START_ID, [], 0.0
        for _ in range(6):
            logps = []
            for i, s in enumerate(steppers):
                logits, states[i] = s.step(tf.constant([tok], tf.int32), states[i], started[i][1])
                logps.append(_log_softmax(logits.numpy()[0]))
            step = _log_softmax(np.mean(logps, axis=0))  # the beam renormalises the mean
            tok = int(np.argmax(step))
            score += step[tok]
            if tok == END_ID:
                break
            toks.append(tok)
        assert hyps[0][0] == toks
        assert abs(hyps[0][1] - score) < 1e-4, (hyps[0][1], score)


def test_an_ensemble_of_one_model_twice_equals_the_model_alone(build):  # noqa: F811
    from seqkit.heads.seq2seq.decoding import transduce

    _, model = build("luong_dot-bilstm")
    alone = transduce(model, SOURCES, beam_width=3, n_best=3, max_length=6)
    twice = transduce([model, model], SOURCES, beam_width=3, n_best=3, max_length=6)
    for a, b in zip(alone, twice):
        assert [t for t, _ in a] == [t for t, _ in b]
        np.testing.assert_allclose([s for _, s in a], [s for _, s in b], atol=1e-5)

