"""Plugins end to end: the guide's example cell, the three ways in, reload in a fresh process,
the missing-plugin error, a custom head, and broken / conflicting installed plugins."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from seqkit.cli import main
from tests.conftest import make_recipe

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "cells.md"


def guide_example() -> str:
    """The ```python block after ``<!-- example: my_cells.py -->`` in docs/cells.md."""
    text = GUIDE.read_text(encoding="utf-8")
    m = re.search(r"<!-- example: my_cells.py -->\s*```python\n(.*?)```", text, re.S)
    assert m, "docs/cells.md lost its example block"
    return m.group(1)


def run_python(args, **kw):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT)] + kw.pop("extra_path", [])),
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, **kw)


@pytest.fixture(scope="module")
def guide_run(tmp_path_factory, keras):
    d = tmp_path_factory.mktemp("guide")
    plugin = d / "my_cells.py"
    plugin.write_text(guide_example(), encoding="utf-8")
    recipe = d / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(make_recipe(data={"limit": 160}, training={"epochs": 1},
                                                 model={"cell": "indrnn", "units": 16, "embedding_dim": 8,
                                                        "layers": 2, "activation": "tanh"})))
    run = d / "run"
    res = CliRunner().invoke(main, ["train", str(recipe), "--run-dir", str(run), "--quiet",
                                    "--plugin", str(plugin)])
    assert res.exit_code == 0, res.output
    return d, plugin, run


def test_guide_cell_one_step_by_hand(guide_run):
    from seqkit.registry import CELLS

    cell = CELLS.get("indrnn").__module__  # the guide's module, loaded by --plugin
    IndRNNCell = sys.modules[cell].IndRNNCell
    c = IndRNNCell(2, activation="relu")
    c.build((None, 1))
    c.set_weights([np.array([[1.0, -1.0]], np.float32), np.array([0.5, 0.25], np.float32),
                   np.array([0.1, 0.0], np.float32)])
    # h = relu(W x + u * h_prev + b): x = 2, h_prev = [1, 4] -> [2 + 0.5 + 0.1, relu(-2 + 1)] = [2.6, 0]
    h, _ = c(np.array([[2.0]], np.float32), [np.array([[1.0, 4.0]], np.float32)])
    np.testing.assert_allclose(np.asarray(h), [[2.6, 0.0]], atol=1e-6)


def test_plugin_flag_run_records_the_plugin_file(guide_run):
    _, plugin, run = guide_run
    recorded = json.load(open(run / "plugins.json"))
    assert recorded == [{"kind": "cell", "name": "indrnn", "module": "seqkit_plugin_my_cells",
                         "package": None, "version": None, "file": str(plugin)}]


X = np.array([[2, 10, 11, 12, 5, 0, 0], [2, 7, 8, 0, 0, 0, 0]], np.int32)


@pytest.fixture(scope="module")
def fresh_process(guide_run, tmp_path_factory):
    """One fresh process (each imports TensorFlow): ``seqkit evaluate RUN`` without the plugin
    first (through the CLI's click entry), then ``load_plugin`` and ``load_run``, whose logits on
    ``X`` it saves. Returns ``(process result, {"exit": ..., "stderr": ...} of the evaluate, folder)``."""
    _, plugin, run = guide_run
    d = tmp_path_factory.mktemp("fresh")
    np.save(d / "x.npy", X)
    script = textwrap.dedent("""
        import json, sys, numpy as np
        from click.testing import CliRunner
        from seqkit.cli import main
        res = CliRunner().invoke(main, ["evaluate", sys.argv[1]])
        json.dump({"exit": res.exit_code, "stderr": res.stderr}, open(sys.argv[3] + "/evaluate.json", "w"))
        from seqkit.registry import load_plugin
        load_plugin(sys.argv[2])
        from seqkit.training.train import load_run
        prep, model = load_run(sys.argv[1])
        np.save(sys.argv[3] + "/y.npy", np.asarray(model(np.load(sys.argv[3] + "/x.npy"), training=False)))
    """)
    res = run_python(["-c", script, str(run), str(plugin), str(d)])
    evaluate = json.load(open(d / "evaluate.json")) if (d / "evaluate.json").exists() else {}
    return res, evaluate, d


def test_reload_in_a_fresh_process_predicts_identically(guide_run, fresh_process):
    from seqkit.training.train import load_run

    _, plugin, run = guide_run
    prep, model = load_run(str(run))
    res, _, d = fresh_process
    assert res.returncode == 0, res.stderr[-3000:]
    np.testing.assert_array_equal(np.load(d / "y.npy"), np.asarray(model(X, training=False)))


def test_reload_without_the_plugin_names_it_and_how_to_pass_it(guide_run, fresh_process):
    """In the fresh process of the test above, before the plugin is loaded."""
    _, plugin, run = guide_run
    res, evaluate, _ = fresh_process
    assert evaluate.get("exit") == 2, (evaluate, res.stderr[-3000:])
    msg = evaluate["stderr"]
    assert "trained with the cell 'indrnn'" in msg and f"--plugin {plugin}" in msg
    assert "Traceback" not in msg


def test_missing_installed_plugin_names_the_package_and_the_install_command(tmp_path):
    from seqkit.errors import RunDirError
    from seqkit.runs.rundir import RunDir

    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.yaml").write_text(yaml.safe_dump(make_recipe(model={"cell": "ghost_cell"})))
    (run / "vocab.json").write_text("[]")
    (run / "plugins.json").write_text(json.dumps([
        {"kind": "cell", "name": "ghost_cell", "module": "seqkit_ghost", "package": "seqkit-ghost",
         "version": "0.2.0", "file": None}]))
    with pytest.raises(RunDirError) as info:
        RunDir(str(run)).check(need_model=False)
    msg = str(info.value)
    assert "trained with the cell 'ghost_cell' from the package seqkit-ghost 0.2.0 (module seqkit_ghost)" in msg
    assert "pip install seqkit-ghost" in msg and "--plugin seqkit_ghost" in msg


def test_keras_classes_of_a_saved_model_are_named(guide_run):
    from seqkit.plugins import keras_classes_needed

    _, _, run = guide_run
    # the --plugin file was imported as module seqkit_plugin_my_cells; Keras names its own package
    assert keras_classes_needed(str(run / "model.keras")) == [
        "my_cells>IndRNNCell (module seqkit_plugin_my_cells)"]


def test_guide_cell_exports_to_tflite_with_parity(guide_run, tmp_path):
    from seqkit.export.writer import export_run

    _, _, run = guide_run
    report = export_run(str(run), str(tmp_path / "export"), parity_examples=4)
    assert report["tflite"]["max_abs_diff"] <= 1e-4 and report["tflite"]["argmax_agreement"] >= 0.999


def test_recipe_plugins_key_is_read_from_the_recipe_folder(guide_run, tmp_path):
    from seqkit.recipe import load_recipe

    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "more_cells.py").write_text(guide_example().replace('"indrnn"', '"indrnn_copy"'))
    raw = make_recipe(plugins=["cells/more_cells.py"], model={"cell": "indrnn_copy", "recurrent_max": 0.5})
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(raw))
    rec = load_recipe(str(path))
    assert rec.cell_options.recurrent_max == 0.5
    assert rec.to_dict()["plugins"] == [str(tmp_path / "cells" / "more_cells.py")]  # absolute in the run's copy
    res = CliRunner().invoke(main, ["validate", str(path), "--no-data", "--set", "model.recurrent_max=-1"])
    assert res.exit_code == 2 and "model.recurrent_max" in res.output


def test_decorator_registers_a_tiny_custom_head_that_trains(tmp_path, keras):
    import tensorflow as tf

    import seqkit
    from seqkit.heads.language_model.head import LanguageModelHead
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train

    @seqkit.register_head("test_reverse_lm")
    class ReverseLM(LanguageModelHead):
        """Predicts each character from the ones after it: a language model of the reversed line."""

        def to_pair(self, ids):
            return super().to_pair(tf.reverse(tf.cast(ids, tf.int32), [0]))

    rec = recipe_from_dict(make_recipe(head={"type": "test_reverse_lm"}, data={"limit": 120},
                                       training={"epochs": 1}, model={"units": 8, "embedding_dim": 4}))
    metrics = train(rec, str(tmp_path / "run"), verbose=0)
    x, y = ReverseLM(rec, None).to_pair(tf.constant([4, 8, 9]))
    assert x.numpy().tolist() == [2, 9, 8, 4] and y.numpy().tolist() == [9, 8, 4, 3]
    assert 1 < metrics["test"]["perplexity"] < metrics["vocabulary"]
    assert json.load(open(tmp_path / "run" / "plugins.json"))[0]["name"] == "test_reverse_lm"


def test_same_plugin_loaded_three_ways_is_harmless():
    seqkit_peephole = pytest.importorskip("seqkit_peephole")
    from seqkit.registry import CELLS, load_plugin

    first = CELLS.entry("peephole_lstm")  # via its entry point
    load_plugin("seqkit_peephole")
    load_plugin(seqkit_peephole.__file__)  # the same source as a file: another module, same class
    assert CELLS.entry("peephole_lstm").origin == first.origin


def test_list_shows_installed_plugin_packages():
    pytest.importorskip("seqkit_peephole")
    pytest.importorskip("seqkit_mingru")
    res = CliRunner().invoke(main, ["list", "cells"])
    assert res.exit_code == 0, res.output
    assert re.search(r"peephole_lstm\s+seqkit-peephole 0\.1\.0", res.output)
    assert re.search(r"mingru\s+seqkit-mingru 0\.1\.0", res.output)


def _fake_dist(site: Path, dist: str, version: str, module: str, code: str):
    """An installed distribution as pip leaves it: a dist-info with an entry point, and a module."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[seqkit.cells]\n{module} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(code))


CELL = """
    import seqkit
    from seqkit.cells.simple_rnn import SimpleRNNPlugin

    @seqkit.register_cell("{name}")
    class {cls}(SimpleRNNPlugin):
        '''A test cell.'''
"""


def test_conflicting_and_broken_installed_plugins(tmp_path):
    site = tmp_path / "site"
    _fake_dist(site, "conflict-a", "1.0", "conflict_a", CELL.format(name="dup_cell", cls="A")
               + CELL.format(name="alpha_cell", cls="Alpha"))
    _fake_dist(site, "conflict-b", "2.0", "conflict_b", CELL.format(name="dup_cell", cls="B")
               + CELL.format(name="beta_cell", cls="Beta"))
    _fake_dist(site, "broken-pkg", "0.3", "broken_mod", "raise RuntimeError('boom: needs libxyz')\n")
    _fake_dist(site, "greedy-pkg", "0.1", "greedy_mod", CELL.format(name="lstm", cls="MyLSTM"))

    # one fresh process (a TensorFlow import each): `seqkit list cells` through the CLI's own entry,
    # then the registry and a recipe that names the contested cell
    script = textwrap.dedent("""
        import json
        from click.testing import CliRunner
        from seqkit.cli import main
        listed = CliRunner().invoke(main, ["list", "cells"])
        from seqkit.recipe import recipe_from_dict
        from seqkit.registry import CELLS
        from tests.conftest import make_recipe
        out = {"list_exit": listed.exit_code, "list": listed.stdout,
               "lstm": CELLS.get("lstm").__module__, "alpha": CELLS.get("alpha_cell").__name__}
        try:
            recipe_from_dict(make_recipe(model={"cell": "dup_cell"}))
        except Exception as exc:
            out["error"] = str(exc)
        print(json.dumps(out))
    """)
    res = run_python(["-c", script], extra_path=[str(site)])
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["list_exit"] == 0, got["list"]
    out = got["list"]
    assert re.search(r"dup_cell\s+CONFLICT: claimed by conflict-a 1\.0 and conflict-b 2\.0", out)
    assert re.search(r"BROKEN broken_mod = broken_mod \(broken-pkg 0\.3\): RuntimeError: boom: needs libxyz", out)
    assert re.search(r"BROKEN lstm = greedy_mod \(greedy-pkg 0\.1\)", out) or "claims the built-in cell name 'lstm'" in out
    for name, origin in (("alpha_cell", "conflict-a 1.0"), ("beta_cell", "conflict-b 2.0"),
                         ("lstm", "seqkit (built in)"), ("gru", "seqkit (built in)")):
        assert re.search(rf"{name}\s+{re.escape(origin)}", out), out

    assert got["lstm"] == "seqkit.cells.lstm" and got["alpha"] == "Alpha"
    assert "model.cell: cell 'dup_cell' is claimed by 2 installed plugins: conflict-a 1.0 (conflict_a.A) " \
           "and conflict-b 2.0 (conflict_b.B)" in got["error"]
