"""Acceptor/tagger step models: stepping equals the full-sequence Keras model (every prefix for
the acceptor's running answer), bidirectional refused with the full-sequence offer."""

import numpy as np
import pytest

from tests.seqhelp import fitted_head, frame_records, seq_recipe, token_records

WORDS = list("abcdefgh")


def _stream(st, xs):
    states = st.initial_state(xs.shape[0])
    out = []
    for t in range(xs.shape[1]):
        logits, states = st.step(xs[:, t], states)
        out.append(np.asarray(logits))
    return np.stack(out, axis=1)


@pytest.mark.parametrize("cell,layers", [("lstm", 2), ("gru", 1), ("simple_rnn", 1)])
def test_tagger_token_steps_equal_full_sequence(keras, cell, layers):
    keras.utils.set_random_seed(2)
    recs = token_records([WORDS[:5], WORDS[2:6]], tags=[list("NVNVN"), list("VVNN")])
    head = fitted_head(seq_recipe("tagger", cell=cell, layers=layers), recs)
    model = head.build_model()
    x = np.array([[4, 5, 6, 7, 8], [9, 3, 2, 4, 5]], "int32")
    st = head.stepper(model)
    assert st.input_spec().name == "token" and st.state_sizes() == [4] * len(st.state_names())
    np.testing.assert_allclose(_stream(st, x), model(x).numpy(), atol=1e-5)


@pytest.mark.parametrize("pooling", ["final", "mean", "max"])
def test_acceptor_running_answer_equals_every_prefix(keras, pooling):
    """Raw frames in (normaliser inside the step); after t steps the answer is the Keras
    acceptor's on the first t frames."""
    keras.utils.set_random_seed(4)
    rng = np.random.default_rng(1)
    arrs = [rng.normal(3.0, 2.0, size=(n, 2)) for n in (5, 4, 6)]
    head = fitted_head(seq_recipe("acceptor", layers=2, head_opts={"pooling": pooling}),
                       frame_records(arrs, ["p", "q", "p"]))
    model = head.build_model()
    st = head.stepper(model)
    assert st.input_spec().name == "frame" and st.input_spec().shape.as_list() == [None, 2]
    extra = {"final": [], "mean": ["pool_sum", "pool_count"], "max": ["pool_max", "pool_count"]}[pooling]
    assert st.state_names() == ["rnn_0_h", "rnn_0_c", "rnn_1_h", "rnn_1_c"] + extra
    raw = np.asarray(arrs[0], "float32")[None]  # [1, 5, 2], not normalised
    streamed = _stream(st, raw)[0]
    norm = head.inputs.encode(frame_records([arrs[0]], ["p"])[0])
    for t in range(1, 6):
        np.testing.assert_allclose(streamed[t - 1], model(norm[None, :t]).numpy()[0], atol=1e-5)


def test_bidirectional_step_refused_offering_full_sequence(keras):
    recs = token_records([WORDS[:3]], labels=["x"])
    head = fitted_head(seq_recipe("acceptor", bi=True), recs)
    from seqkit.errors import SeqkitError

    with pytest.raises(SeqkitError, match=r"bidirectional.*whole-sequence model.*--batch B --length T"):
        head.stepper(head.build_model())
