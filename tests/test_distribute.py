"""training.distribute: mirrored on logical CPU devices and multi-worker on 127.0.0.1 reproduce
single-device training; TF_CONFIG errors are clear. Each run is a fresh process (logical devices
and TF_CONFIG must be set before TensorFlow starts), bounded by a timeout."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from seqkit.training.distribute import parse_tf_config
from seqkit.errors import SeqkitError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})
    from tests.conftest import make_recipe
    from seqkit.recipe import recipe_from_dict
    from seqkit.training.train import train
    out = {{}}
    for name, dist, path, *more in {runs!r}:
        epochs, resume = more if more else (2, False)
        r = recipe_from_dict(make_recipe(data={{"limit": 160}}, model={{"units": 16}},
                                         training={{"epochs": epochs, "batch_size": 16, "clipnorm": 0.05,
                                                    "distribute": dist}}))
        m = train(r, path, verbose=0, resume=resume)
        out[name] = m.get("history") or json.load(open(path + "/history.json"))
    print("RESULT" + json.dumps(out))
""")


def run_script(runs, env=None, timeout=240):
    code = SCRIPT.format(root=ROOT, runs=runs)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "PYTHONPATH": ROOT, **(env or {})})
    assert p.returncode == 0, p.stderr[-3000:]
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("RESULT"))
    return json.loads(line[len("RESULT"):])


def exact(history):
    return [(h["perplexity"], h["val_cross_entropy"]) for h in history]


def test_tf_config_errors_are_clear():
    assert parse_tf_config("") is None
    for bad, msg in (("{nope", "not valid JSON"), ('{"cluster": {}}', "needs a 'cluster'"),
                     ('{"cluster": {"worker": ["localhost"]}, "task": {"type": "worker", "index": 0}}',
                      "not host:port"),
                     ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}',
                      "not a member of the cluster")):
        with pytest.raises(SeqkitError, match=msg):
            parse_tf_config(bad)


@pytest.mark.slow  # a mirrored run with a backup resumes in the default run: -m slow (suite time)
def test_mirrored_on_two_logical_cpus_matches_one_device(tmp_path):
    # mirrored first: logical devices must be set before TensorFlow starts in that process
    res = run_script([("two", {"strategy": "mirrored", "cpu_devices": 2}, str(tmp_path / "two")),
                      ("one", {"strategy": "none"}, str(tmp_path / "one"))])
    for (p1, v1), (p2, v2) in zip(exact(res["one"]), exact(res["two"])):
        assert p1 == pytest.approx(p2, rel=1e-5) and v1 == pytest.approx(v2, rel=1e-5)
    assert json.load(open(tmp_path / "two" / "metrics.json"))["replicas"] == 2


@pytest.mark.slow  # heavy; the default run stays under 15 min on 2 cores (run with -m slow)
def test_resume_under_mirrored_with_backup(tmp_path):
    mirrored = {"strategy": "mirrored", "cpu_devices": 2, "backup": True}
    res = run_script([("first", mirrored, str(tmp_path / "r"), 1, False),
                      ("again", mirrored, str(tmp_path / "r"), 2, True),
                      ("straight", {"strategy": "none"}, str(tmp_path / "s"), 2, False)])
    assert [h["epoch"] for h in res["again"]] == [1, 2]
    # resuming (weights, optimizer state and the epoch-2 data order) equals training straight through
    for (p1, v1), (p2, v2) in zip(exact(res["again"]), exact(res["straight"])):
        assert p1 == pytest.approx(p2, rel=1e-5) and v1 == pytest.approx(v2, rel=1e-5)
    assert not os.path.exists(tmp_path / "r" / "backup")  # BackupAndRestore cleans up after success


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # heavy; the default run stays under 15 min on 2 cores (run with -m slow)
def test_multi_worker_on_localhost_matches_single_process(tmp_path):
    single = run_script([("single", {"strategy": "none"}, str(tmp_path / "single"))])["single"]
    ports = [free_port(), free_port()]
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    try:
        for i in range(2):
            env = {**os.environ, "PYTHONPATH": ROOT,
                   "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})}
            code = SCRIPT.format(root=ROOT, runs=[("w", {"strategy": "multi_worker", "timeout_seconds": 60},
                                                   str(tmp_path / "mw"))])
            procs.append(subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    chief = json.loads(next(ln for ln in outs[0][0].splitlines() if ln.startswith("RESULT"))[6:])["w"]
    worker = json.loads(next(ln for ln in outs[1][0].splitlines() if ln.startswith("RESULT"))[6:])["w"]
    for (p1, v1), (p2, v2) in zip(exact(single), exact(chief)):
        assert p1 == pytest.approx(p2, rel=1e-5) and v1 == pytest.approx(v2, rel=1e-5)
    assert exact(worker) == exact(chief)
    # only the chief wrote the run directory; the worker's scratch copy is gone
    assert os.path.isfile(tmp_path / "mw" / "metrics.json")
    assert not [d for d in os.listdir(tmp_path) if d.startswith("seqkit-worker")]


def test_bad_tf_config_fails_fast_from_the_cli(tmp_path, write_recipe):
    from tests.conftest import make_recipe

    path = write_recipe(make_recipe(training={"distribute": {"strategy": "multi_worker"}}))
    p = subprocess.run([sys.executable, "-m", "seqkit.cli", "train", path, "--run-dir", str(tmp_path / "r")],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": ROOT, "TF_CONFIG": '{"cluster": {"worker": ["x"]}}'})
    assert p.returncode == 2
    assert "TF_CONFIG" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "r").exists()
