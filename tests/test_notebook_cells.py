"""Cells defined in a script or notebook (module ``__main__``) or in a module of the working folder.

One training process (a script run as ``python train_here.py`` from its folder) registers one cell
in ``__main__`` and imports another from ``work_cells.py`` beside it, trains a run with each and
evaluates both in the same process. A new process then fails with an instruction naming the
``--plugin`` to pass (never ``--plugin __main__``, nor a module name that needs ``PYTHONPATH``);
running the command with exactly that flag, from another folder, evaluates to the same figures.
A notebook cell (``__main__`` without a file) is told to move into a ``.py`` file.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from seqkit.cli import main
from tests.conftest import make_recipe
from tests.test_plugins import guide_example

ROOT = Path(__file__).resolve().parents[1]


def _cell_code(name: str, package: str) -> str:
    """The guide's IndRNN cell registered as ``name`` (Keras package ``package``)."""
    return (guide_example().replace('"indrnn"', f'"{name}"')
            .replace('package="my_cells"', f'package="{package}"'))


SCRIPT = '''
import json, sys
import seqkit
import work_cells  # a module of the working folder: registers the cell "work_indrnn"

{cell}

if __name__ == "__main__":
    out = {{}}
    for cell, run in (("main_indrnn", "run_main"), ("work_indrnn", "run_work")):
        recipe = json.loads(sys.argv[1])
        recipe["model"]["cell"] = cell
        seqkit.train(recipe, run)
        out[run] = seqkit.load(run).evaluate("test")["perplexity"]  # the same process reloads it
    json.dump(out, open("same_process.json", "w"))
'''


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}


@pytest.fixture(scope="module")
def cell_runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cells_here")
    (d / "work_cells.py").write_text(_cell_code("work_indrnn", "work_cells"), encoding="utf-8")
    (d / "train_here.py").write_text(SCRIPT.format(cell=_cell_code("main_indrnn", "train_here")),
                                     encoding="utf-8")
    recipe = make_recipe(data={"limit": 80}, training={"epochs": 1},
                         model={"units": 8, "embedding_dim": 4, "activation": "tanh"})
    # run from its own folder, as a user does: `import work_cells` finds the module there
    res = subprocess.run([sys.executable, "train_here.py", json.dumps(recipe)], cwd=d, env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout == ""  # library calls print nothing (stderr: TensorFlow's own start-up lines)
    return d, json.load(open(d / "same_process.json"))


def _printed_flags(run: Path) -> list[str]:
    """The ``--plugin X`` that ``seqkit evaluate RUN`` prints when the cell is not registered."""
    res = CliRunner().invoke(main, ["evaluate", str(run)])
    assert res.exit_code == 2, res.output
    assert "--plugin __main__" not in res.output and "--plugin work_cells" not in res.output
    found = re.findall(r"--plugin (\S+?)[ )]", res.output)
    assert found, res.output
    return ["--plugin", shlex.split(found[0])[0]]


def _follow(d, run, source):
    flags = _printed_flags(d / run)
    assert flags[1] == str(d / source)  # the file that defined the cell, absolute
    plugins = json.load(open(d / run / "plugins.json"))
    assert plugins[0]["file"] == str(d / source)
    return flags


@pytest.mark.slow  # the working-folder module cell's reload stays in the default run: -m slow (suite time)
def test_script_cell_reloads_in_a_new_process_by_following_the_instruction(cell_runs):
    """The script is not to be passed (importing it runs its top-level code): the message says to
    move the cell into a module of its own first, and the run reloads from that module."""
    d, same = cell_runs
    flags = _printed_flags(d / "run_main")
    assert flags == ["--plugin", "my_cells.py"]
    assert json.load(open(d / "run_main" / "plugins.json"))[0]["file"] == str(d / "train_here.py")
    # as told: the class, its registration and imports, moved beside the script
    (d / "my_cells.py").write_text(_cell_code("main_indrnn", "train_here"), encoding="utf-8")
    res = subprocess.run([sys.executable, "-m", "seqkit.cli", "evaluate", str(d / "run_main"), "--json",
                          "--plugin", str(d / "my_cells.py")], cwd=ROOT, env=_env(), capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert json.loads(res.stdout)["perplexity"] == pytest.approx(same["run_main"], rel=1e-6)


def test_working_folder_module_cell_reloads_by_following_the_instruction(cell_runs):
    """Not ``--plugin work_cells`` (this process's import path does not hold its folder)."""
    d, same = cell_runs
    assert "work_cells" not in sys.modules and str(d) not in sys.path
    flags = _follow(d, "run_work", "work_cells.py")
    res = CliRunner().invoke(main, ["evaluate", str(d / "run_work"), "--json", *flags])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["perplexity"] == pytest.approx(same["run_work"], rel=1e-6)


def test_notebook_cell_is_told_to_move_into_a_file(tmp_path, monkeypatch, keras):
    """``__main__`` without ``__file__`` (Jupyter, ``python -c``): no flag could import it."""
    from seqkit.plugins import how_to_get, provenance
    from seqkit.recipe import recipe_from_dict

    notebook = types.ModuleType("__main__")  # what a notebook kernel's __main__ looks like
    monkeypatch.setitem(sys.modules, "__main__", notebook)
    exec(compile(textwrap.dedent(_cell_code("nb_indrnn", "nb_cells")), "<cell>", "exec"),
         notebook.__dict__)
    rec = recipe_from_dict(make_recipe(model={"cell": "nb_indrnn"}))
    item = provenance(rec)[0]
    assert (item["module"], item["file"], item["package"]) == ("__main__", None, None)
    how = how_to_get(item)
    assert "--plugin __main__" not in how
    assert "notebook" in how and "--plugin my_cells.py" in how and "seqkit.load_plugin(" in how
