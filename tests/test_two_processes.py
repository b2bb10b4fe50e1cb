"""Writers in real separate processes: two ``seqkit export`` into one ``--out`` at once, one in a
child process and one in the test's own (one wins, the other is refused at once with a clear error
and touches nothing), and writes that fail on a file-size limit (``RLIMIT_FSIZE``: writes past it
fail with EFBIG, as on a full disk) leaving the previous run exactly as it was."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
import time

import yaml
from click.testing import CliRunner

from seqkit.cli import main
from tests.conftest import tiny_lm_recipe

ROOT = pathlib.Path(__file__).resolve().parent.parent
WAIT_S = 600  # a bound on waiting for a child process, never a measured time


def seqkit_command(*args: str, prelude: str = "") -> list[str]:
    """The command line of ``seqkit ARGS`` in a fresh Python process, ``prelude`` run first."""
    code = prelude + "\nfrom seqkit.cli import main\nmain(prog_name='seqkit')\n"
    return [sys.executable, "-c", code, *args]


def child_env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def digest(folder) -> dict:
    """``{relative path: sha256}`` of every file under ``folder`` (folders as ``None``)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), folder)] = None
        for name in filenames:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, folder)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def test_two_exports_into_one_folder_one_wins_the_other_is_refused(tmp_path, tiny_lm):
    run = tiny_lm("lstm")
    parent = tmp_path / "exports"
    out = parent / "tiny"
    out.mkdir(parents=True)  # an earlier export, which both replace with --overwrite
    (out / "metadata.json").write_text('{"seqkit_version": "0.2.0", "schema_version": 1}', encoding="utf-8")
    (out / "model.tflite").write_bytes(b"the earlier export")
    before = digest(out)
    ready, go = tmp_path / "first-holds-the-lock", tmp_path / "first-may-go-on"
    # the first export stops right after it took the folder's lock (where the conversion would run)
    # until the test lets it go on: the second export surely meets the held lock
    prelude = textwrap.dedent(f"""
        import os, time
        import seqkit.runs.run as run_module
        _export = run_module.Run._export
        def held(self, out, options):
            open({str(ready)!r}, "w").close()
            while not os.path.exists({str(go)!r}):
                time.sleep(0.05)
            return _export(self, out, options)
        run_module.Run._export = held
    """)
    args = ("export", run, "--out", str(out), "--overwrite", "--parity-examples", "4")
    first = subprocess.Popen(seqkit_command(*args, prelude=prelude), cwd=tmp_path, env=child_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + WAIT_S
        while not ready.exists():
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < deadline, "the first export never took the lock"
            time.sleep(0.1)
        # the second export runs in this test's own process (another process than the first's;
        # a fresh one would only add a TensorFlow import), through the CLI's click entry
        second = CliRunner().invoke(main, list(args))
        assert second.exit_code == 2, (second.output, second.exception)
        msg = second.stderr
        assert (f"--out {out}: another seqkit export is writing this folder (PID {first.pid} on "
                in msg), msg
        assert "choose another --out" in msg and "Traceback" not in msg and "internal error" not in msg
        assert digest(out) == before  # the refused export touched nothing
        go.touch()
        output, _ = first.communicate(timeout=WAIT_S)
    finally:
        go.touch()
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, output
    assert f"export directory: {out}" in output
    # the winner's export is complete and replaced the earlier one; nothing else is left beside it
    meta = json.loads((out / "metadata.json").read_text(encoding="utf-8"))
    assert meta.get("head") == "language_model" and "earlier" not in meta
    assert (out / "model.tflite").read_bytes()[4:8] == b"TFL3"
    assert sorted(os.listdir(parent)) == ["tiny"]  # no lock file, no staging folder


def test_a_write_past_the_file_size_limit_leaves_the_previous_run_intact(tmp_path, tiny_lm):
    """``train --overwrite`` of an existing run under a file-size limit its checkpoint exceeds: the
    write fails with EFBIG (SIGXFSZ ignored, as a shell's ``ulimit -f`` with a handler would), the
    command ends with one named error, and the previous run is byte for byte what it was."""
    runs = tmp_path / "runs"
    run = runs / "tiny"
    shutil.copytree(tiny_lm("lstm"), run)
    before = digest(run)
    checkpoint = os.path.getsize(run / "last.keras")
    small = max(os.path.getsize(run / name) for name in os.listdir(run) if os.path.isfile(run / name)
                and name not in ("model.keras", "last.keras"))
    limit = (checkpoint + small) // 2  # the metadata files fit, a checkpoint does not
    assert small < limit < checkpoint, (small, checkpoint)
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump(tiny_lm_recipe("lstm"), sort_keys=False), encoding="utf-8")
    # one fresh process under the limit (each imports TensorFlow, ~8 CPU-s) runs both commands
    # through the CLI's click entry, and records the run's digest and the folder's listing after each
    child = textwrap.dedent(f"""
        import hashlib, json, os, resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        from click.testing import CliRunner
        from seqkit.cli import main
    """) + inspect.getsource(digest) + textwrap.dedent(f"""
        out = {{}}
        for key, args in (("overwrite", ["train", {str(recipe)!r}, "--run-dir", {str(run)!r}, "--overwrite", "-q"]),
                          ("resume", ["train", "--resume", {str(run)!r}, "--set", "training.epochs=2", "-q"])):
            res = CliRunner().invoke(main, args)
            out[key] = {{"returncode": res.exit_code, "stdout": res.stdout, "stderr": res.stderr,
                        "exception": repr(res.exception) if res.exit_code not in (0, 2) else None,
                        "digest": digest({str(run)!r}), "listing": sorted(os.listdir({str(runs)!r}))}}
        print(json.dumps(out))
    """)
    done = subprocess.run([sys.executable, "-c", child], cwd=tmp_path, env=child_env(), capture_output=True,
                          text=True, timeout=WAIT_S)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    res = got["overwrite"]
    msg = res["stderr"]
    assert res["returncode"] == 2 and res["exception"] is None, (res, done.stderr)
    assert "file-size limit" in msg and "internal error" not in msg and "Traceback" not in msg, msg
    # names the file it could not write: a checkpoint of the new run, in its staging folder
    assert re.search(re.escape(str(runs)) + r"/\.tiny\.staging-\d+/(model|last)\.tmp\.keras: cannot write it: "
                     r"the file would pass this process's file-size limit", msg), msg
    assert res["digest"] == before  # the previous run is untouched
    assert res["listing"] == ["tiny"]  # no staging folder, no lock file

    # resuming must first load last.keras, which Keras unpacks into temporary files: under the same
    # limit that fails, named as such (not as a damaged model or a missing plugin); the run is as it was
    res = got["resume"]
    assert res["returncode"] == 2 and res["exception"] is None, (res, done.stderr)
    assert (f"{run / 'last.keras'}: cannot load the model: Keras unpacks it into temporary files, and "
            f"writing them failed: the file would pass this process's file-size limit") in res["stderr"], res
    assert "plugin" not in res["stderr"] and "internal error" not in res["stderr"]
    assert res["digest"] == before
    assert res["listing"] == ["tiny"]
    assert digest(run) == before and sorted(os.listdir(runs)) == ["tiny"]
