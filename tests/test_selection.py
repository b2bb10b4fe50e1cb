"""``training.monitor``: keeping the epoch of the lowest decoded validation error (seq2seq
``val_wer``), and the recipe keys and splits it refuses."""

import json

import pytest

LETTERS = {"a": "AE", "b": "B", "c": "K", "d": "D"}


def _words():
    """Every 2-4 letter word over a, b, c, d without a repeated neighbour; one phone per letter."""
    import itertools

    out = []
    for n in (2, 3, 4):
        for w in itertools.product("abcd", repeat=n):
            if all(x != y for x, y in zip(w, w[1:])):
                out.append("".join(w))
    return out[::3]  # 52 of the 156


def _recipe(d, **training):
    lines = [f"{w} {' '.join(LETTERS[c] for c in w)}" for w in _words()]
    (d / "letters.dict").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"name": "monitor-g2p", "seed": 3,
            "data": {"source": "cmudict", "path": str(d / "letters.dict"), "max_length": 6,
                     "split": {"valid": 0.25, "test": 0.1, "shuffle": True}},
            "model": {"units": 16, "embedding_dim": 8, "bidirectional": True},
            "head": {"type": "seq2seq", "attention": "bahdanau", "decoder_units": 16},
            "training": {"epochs": 8, "batch_size": 4, "learning_rate": 0.03, "early_stopping": None,
                         "monitor": "val_wer", **training},
            "decoding": {"strategy": "greedy", "max_length": 6}}


@pytest.fixture(scope="module")
def run(tmp_path_factory, keras):
    import seqkit

    d = tmp_path_factory.mktemp("monitor")
    return seqkit.train(_recipe(d), run_dir=str(d / "run"))


def test_history_logs_the_decoded_figures_of_every_epoch(run):
    history = json.load(open(f"{run.path}/history.json"))
    assert [h["epoch"] for h in history] == list(range(1, 9))
    n = run.evaluate(split="valid")["words"]  # validation words: every WER is a whole number of them
    assert n >= 10
    for h in history:
        assert 0.0 <= h["val_per"] <= h["val_wer"] <= 1.0  # a wrong phoneme makes a wrong word
        assert abs(h["val_wer"] * n - round(h["val_wer"] * n)) < 1e-9
    assert len({h["val_wer"] for h in history}) > 1  # the figure moves as the model learns


def test_the_kept_model_is_the_epoch_of_the_lowest_val_wer_and_scores_it_again(run):
    history = json.load(open(f"{run.path}/history.json"))
    wers = [h["val_wer"] for h in history]
    best = min(wers)
    state = json.load(open(f"{run.path}/state.json"))
    assert state["monitor"] == "val_wer" and state["best"] == pytest.approx(best, abs=0)
    assert run.metrics["kept"] == {"epoch": wers.index(best) + 1, "monitor": "val_wer", "value": best}
    # the kept model.keras, decoded again by `evaluate`, gives the figure its epoch logged
    figures = run.evaluate(split="valid")
    assert figures["wer"] == pytest.approx(best, abs=1e-12)
    assert figures["per"] == pytest.approx(history[wers.index(best)]["val_per"], abs=1e-12)


def test_monitor_a_head_does_not_offer_is_refused_naming_the_key_and_the_offer(tmp_path):
    import seqkit
    from seqkit.errors import RecipeError

    for name in ("val_bleu", "wer"):  # a figure it lacks; its own figure without the val_ prefix
        with pytest.raises(RecipeError) as e:
            seqkit.validate(_recipe(tmp_path, monitor=name), data=False)
        msg = str(e.value)
        assert "training.monitor" in msg and "val_wer" in msg and "val_per" in msg

    lm = {"name": "lm", "data": {"source": "text_lines", "path": str(tmp_path / "x.txt")},
          "head": {"type": "language_model"}, "training": {"monitor": "val_wer"}}
    with pytest.raises(RecipeError) as e:
        seqkit.validate(lm, data=False)
    assert "training.monitor" in str(e.value) and "offers none" in str(e.value)


def test_monitor_without_a_validation_split_is_refused_and_writes_nothing(tmp_path, keras):
    import seqkit
    from seqkit.errors import SeqkitError

    r = _recipe(tmp_path)
    r["data"]["split"] = {"valid": 0.0, "test": 0.1, "shuffle": True}
    with pytest.raises(SeqkitError) as e:
        seqkit.train(r, run_dir=str(tmp_path / "run"))
    assert "validation split" in str(e.value) and "training.monitor" in str(e.value)
    assert not (tmp_path / "run").exists()


def test_resume_refuses_another_decoding_for_a_decoded_monitor(run):
    import os

    import seqkit
    from seqkit.errors import RunDirError

    before = {f: os.path.getmtime(os.path.join(run.path, f)) for f in os.listdir(run.path)}
    with pytest.raises(RunDirError) as e:  # the run's own recipe, only the decoding changed
        seqkit.train(None, run_dir=run.path, resume=True,
                     overrides=["training.epochs=9", "decoding.strategy=beam", "decoding.beam_width=3"])
    msg = str(e.value)
    assert "decoding.strategy ('greedy' -> 'beam')" in msg and "training.monitor" in msg
    assert "training.epochs (" not in msg and "data.path (" not in msg
    assert {f: os.path.getmtime(os.path.join(run.path, f)) for f in os.listdir(run.path)} == before
