"""The wheel as a user installs it: built from the repository, installed into a fresh virtualenv
with nothing of the repository on the path, it lists the shipped recipes, validates one by name and
trains one by name for a tiny epoch.

Marked slow: building the wheel, making the virtualenv and two TensorFlow start-ups take about
one to two minutes on 2 cores. The virtualenv sees the machine's site-packages (TensorFlow, Keras,
... are not downloaded again) but gets seqkit itself only from the wheel.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _run(args, cwd, env=None):
    res = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env=env)
    assert res.returncode == 0, f"{' '.join(map(str, args))} exited {res.returncode}:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    return res


def test_wheel_installs_and_runs_shipped_recipes_by_name(tmp_path):
    import seqkit

    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
          str(ROOT)], cwd=tmp_path)
    wheels = list(dist.glob("seqkit-*.whl"))
    assert [w.name.split("-")[1] for w in wheels] == [seqkit.__version__]
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], cwd=tmp_path)
    py, exe = venv / "bin" / "python", venv / "bin" / "seqkit"
    _run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheels[0])], cwd=tmp_path)

    work = tmp_path / "work"  # no recipes/ here, and the repository is not on the path
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    where = _run([str(py), "-c", "import seqkit, json; print(json.dumps([seqkit.__file__, seqkit.__version__]))"],
                 cwd=work, env=env)
    file, version = json.loads(where.stdout)
    assert file.startswith(str(venv)) and version == seqkit.__version__

    listed = _run([str(exe), "recipes", "--json"], cwd=work, env=env)
    names = [r["name"] for r in json.loads(listed.stdout)]
    shipped = sorted(p.stem for p in (ROOT / "seqkit" / "recipes").glob("*.yaml"))
    assert names == shipped and "lm-pydoc-chars" in names
    assert all(r["path"].startswith(str(venv)) for r in json.loads(listed.stdout))
    listed_words = _run([str(py), "-c", "from seqkit.data.cmudict import TEST_LISTS; import os; "
                         "p = TEST_LISTS['cmudict-0.7b']; print(p, os.path.getsize(p), "
                         "os.path.isfile(os.path.join(os.path.dirname(p), 'README.md')))"], cwd=work, env=env)
    path, size, note = listed_words.stdout.split()
    assert path.startswith(str(venv)) and int(size) == 321_219 and note == "True"  # shipped with its licence

    ok = _run([str(exe), "validate", "lm-pydoc-chars"], cwd=work, env=env)
    assert "lm-pydoc-chars: OK" in ok.stdout + ok.stderr

    _run([str(exe), "train", "lm-pydoc-chars", "-q", "--set", "training.epochs=1", "--set", "model.units=8",
          "--set", "model.embedding_dim=8", "--set", "data.limit=300", "--set", "training.early_stopping=null"],
         cwd=work, env=env)
    metrics = json.loads((work / "runs" / "lm-pydoc-chars" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["test"]["perplexity"] > 1.0
