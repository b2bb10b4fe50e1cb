"""A consumer outside Python: examples/litertjs/ (LiteRT.js, ``@litertjs/core`` from npm) runs a
seqkit step model in headless Chromium and gives what LiteRT's Python interpreter and ``seqkit
stream`` give on the same inputs.

Needs Chromium (``chromium``, ``chromium-browser`` or ``google-chrome`` on PATH, or
``SEQKIT_CHROMIUM``) and the npm package: it is installed once with ``npm ci`` from
examples/litertjs/package-lock.json into ``SEQKIT_LITERTJS_CACHE`` (default
``~/.cache/seqkit-tests/litertjs``) and reused while the lock file is unchanged. Without them the
tests skip, saying which is missing."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

APP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "litertjs")

# LiteRT.js's CPU path is XNNPACK compiled to WebAssembly; the Python interpreter's is native
# XNNPACK: the same kernels with other SIMD widths, so sums are ordered differently. Logits agree
# to float32 rounding of a few dozen terms: |js - py| <= ATOL + RTOL * |py|.
ATOL, RTOL = 1e-5, 1e-4


def _chromium():
    for name in (os.environ.get("SEQKIT_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _litertjs_modules():
    """The ``node_modules`` folder holding ``@litertjs/core`` as the lock file pins it, installed
    by ``npm ci`` the first time (the npm registry is the only download); None and the reason
    when it cannot be had."""
    import fcntl

    with open(os.path.join(APP, "package-lock.json"), "rb") as f:
        key = hashlib.sha256(f.read()).hexdigest()[:16]
    base = os.environ.get("SEQKIT_LITERTJS_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "seqkit-tests", "litertjs")
    where = os.path.join(base, key)
    modules = os.path.join(where, "node_modules")
    done = os.path.join(where, "installed")
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(done):
            return modules, None
        if not shutil.which("npm"):
            return None, "npm is not installed (Node.js), so @litertjs/core cannot be installed"
        for name in ("package.json", "package-lock.json"):
            shutil.copy(os.path.join(APP, name), where)
        try:
            res = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts",
                                  "--fetch-retries=1", "--fetch-timeout=60000"],
                                 cwd=where, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            return None, "npm ci of @litertjs/core took over 10 minutes"
        if res.returncode != 0:
            return None, f"npm ci of @litertjs/core failed (no npm registry?): {res.stderr[-500:]}"
        open(done, "w").close()
    return modules, None


@pytest.fixture(scope="module")
def node_modules():
    """The installed ``node_modules`` (skips without npm or the registry)."""
    modules, why = _litertjs_modules()
    if modules is None:
        pytest.skip(why)
    return modules


@pytest.fixture(scope="module")
def browser(node_modules):
    """``run(model_dir, tmp_path, **params) -> dict``: serve examples/litertjs/ with the
    installed ``node_modules`` and ``model_dir`` under ``/m/``, open index.html with ``params``
    (``model``, ``prompt`` / ``text``, ``max``, ``metadata``) in headless Chromium, and return what
    the page reported (a screenshot of the page is left in ``tmp_path/page.png``)."""
    chromium = _chromium()
    if chromium is None:
        pytest.skip("no Chromium (chromium / chromium-browser / google-chrome, or SEQKIT_CHROMIUM) to run LiteRT.js in")
    modules = node_modules
    state = {}

    class Handler(SimpleHTTPRequestHandler):
        def translate_path(self, path):
            path = path.split("?", 1)[0]
            for prefix, root in (("/node_modules/", modules), ("/m/", state["models"])):
                if path.startswith(prefix):
                    return os.path.join(root, *path[len(prefix):].split("/"))
            return os.path.join(APP, *path.lstrip("/").split("/"))

        def do_POST(self):
            state["result"] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(204)
            self.end_headers()
            state["done"].set()

        def log_message(self, *args):
            pass

    Handler.extensions_map = {**SimpleHTTPRequestHandler.extensions_map, ".js": "text/javascript",
                              ".wasm": "application/wasm"}
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]

    def run(models, tmp_path, **params):
        from urllib.parse import urlencode

        state.update(models=models, done=threading.Event(), result=None)
        url = f"http://127.0.0.1:{port}/index.html?" + urlencode({**params, "report": "/result"})
        shot = tmp_path / "page.png"
        # --virtual-time-budget: Chromium exits once the page is idle (the page's fetches hold
        # the virtual clock), taking a screenshot of the page as it then is
        res = subprocess.run(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", f"--user-data-dir={tmp_path / 'chromium'}",
             "--window-size=900,700", "--virtual-time-budget=120000", f"--screenshot={shot}", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
        assert state["done"].wait(10), ("the page reported nothing; Chromium exited with "
                                        f"{res.returncode} and said: {res.stderr[-2000:]}")
        result = state["result"]
        assert result and "error" not in result, result
        with open(shot, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"  # the page as the user sees it
        return result

    yield run
    server.shutdown()


def _python_logits(path, feeds):
    """LiteRT's Python interpreter in its default configuration on the same ids: one list of
    logits per sequence in ``feeds`` (states zeroed at each)."""
    from ai_edge_litert.interpreter import Interpreter

    from seqkit.export.embedded_metadata import read

    meta = read(path)
    runner = Interpreter(model_path=path).get_signature_runner("step")
    out = []
    for ids in feeds:
        states = {s["name"]: np.zeros((1, int(s["size"])), np.float32) for s in meta["state_layout"]}
        seq = []
        for i in ids:
            res = runner(**{meta["input"]["name"]: np.array([i], np.int32)}, **states)
            states = {name: res[name] for name in states}
            seq.append(res["logits"][0])
        out.append(np.array(seq))
    return out


def _assert_close(js, py):
    js = np.asarray(js, np.float32)
    assert js.shape == py.shape
    np.testing.assert_allclose(js, py, rtol=RTOL, atol=ATOL)


def _seqkit_stream(args, stdin=""):
    from click.testing import CliRunner

    from seqkit.cli import main

    res = CliRunner().invoke(main, ["stream", *args], input=stdin)
    assert res.exit_code == 0, res.output
    return res.stdout


def test_web_page_generates_what_seqkit_stream_generates(tiny_lm_export, tmp_path, browser):
    export, _ = tiny_lm_export("lstm")
    models = tmp_path / "m"
    models.mkdir()
    shutil.copy(os.path.join(export, "model.tflite"), models / "lm.tflite")  # metadata inside
    got = browser(str(models), tmp_path, model="m/lm.tflite", prompt="The ", max=30)
    assert got["head"] == "language_model"
    (py,) = _python_logits(str(models / "lm.tflite"), [got["fed"]])
    _assert_close(got["logits"], py)
    primed = 1 + len("The ")  # <s> and the prompt's characters
    assert got["fed"][:primed] == [2] + [_vocab_index(models / "lm.tflite")[c] for c in "The "]
    # each id fed after the prompt is the arg-max of the Python logits one step before
    assert got["fed"][primed:] == [int(i) for i in np.argmax(py, -1)[primed - 1:-1]]
    assert len(got["fed"]) > primed + 5  # some generated text to compare
    assert got["text"] + "\n" == _seqkit_stream([str(models / "lm.tflite"), "--prompt", "The ",
                                                 "--greedy", "--max-length", "30"])


def _vocab_index(path):
    from seqkit.export.embedded_metadata import read

    return {tok: i for i, tok in enumerate(read(str(path))["vocab"])}


def test_web_page_tags_what_seqkit_stream_tags(tmp_path, browser, tiny_tagger):
    """A tiny GRU tagger (conftest's session run; read only), exported here."""
    from seqkit.export.writer import export_run

    export_run(tiny_tagger, str(tmp_path / "e"), parity_examples=4)
    models = tmp_path / "m"
    models.mkdir()
    shutil.copy(tmp_path / "e" / "model.tflite", models / "tagger.tflite")
    shutil.copy(tmp_path / "e" / "metadata.json", models / "metadata.json")
    text = "the dog runs\n\na cat sleeps fast\nthe zebra runs"
    got = browser(str(models), tmp_path, model="m/tagger.tflite", metadata="m/metadata.json", text=text)
    assert got["head"] == "tagger"
    meta = json.loads((models / "metadata.json").read_text(encoding="utf-8"))
    index = {tok: i for i, tok in enumerate(meta["vocab"])}
    assert got["fed"] == [[index.get(w, 1) for w in line.split()] for line in text.split("\n") if line]
    py = _python_logits(str(models / "tagger.tflite"), got["fed"])
    for js_seq, py_seq in zip(got["logits"], py):
        _assert_close(js_seq, py_seq)
    assert got["text"] + "\n" == _seqkit_stream([str(models / "tagger.tflite")], text + "\n")
    assert [len(line.split()) for line in got["text"].splitlines()] == [3, 4, 3]


NODE_SCRIPT = """
import {readFileSync, writeFileSync} from 'node:fs';
import {readMetadata, pinDynamicDimensions, tokenize} from './seqkit_litert.js';
const [model, pinnedPath, textsPath] = process.argv.slice(2);
const bytes = new Uint8Array(readFileSync(model));
const {bytes: pinned, pinned: count} = pinDynamicDimensions(bytes);
writeFileSync(pinnedPath, pinned);
const texts = JSON.parse(readFileSync(textsPath, 'utf8'));
const tokens = Object.fromEntries(['char', 'whitespace'].map(
    (mode) => [mode, texts.map((t) => tokenize(t, {tokenization: mode, lowercase: mode === 'whitespace'}))]));
console.log(JSON.stringify({metadata: readMetadata(bytes), pinned: count, tokens}));
"""

TEXTS = ["The dog  runs.\n", "  héllo\twörld ", "𝒳 is 🙂 wide", "", "ÉTÉ Straße"]


def test_module_reads_metadata_tokenizes_and_pins_the_batch_as_python_does(tiny_lm_export, tmp_path,
                                                                           node_modules):
    """The page's module under Node.js (no browser): the embedded metadata it reads by hand is
    seqkit's; its tokens are Python's ``list(text)`` / ``text.lower().split()``; the model with
    its batch pinned runs in LiteRT's Python interpreter with static shapes and gives the same
    logits as the original."""
    from ai_edge_litert.interpreter import Interpreter

    from seqkit.export.embedded_metadata import read

    if not shutil.which("node"):
        pytest.skip("node (Node.js) is not installed")
    export, _ = tiny_lm_export("lstm")
    for name in ("seqkit_litert.js", "package.json"):  # package.json: "type": "module"
        shutil.copy(os.path.join(APP, name), tmp_path)
    os.symlink(node_modules, tmp_path / "node_modules")
    (tmp_path / "run.mjs").write_text(NODE_SCRIPT, encoding="utf-8")
    (tmp_path / "texts.json").write_text(json.dumps(TEXTS), encoding="utf-8")
    model = os.path.join(export, "model.tflite")
    res = subprocess.run(["node", "run.mjs", model, str(tmp_path / "pinned.tflite"), "texts.json"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout)
    assert got["metadata"] == read(model)
    assert got["tokens"]["char"] == [list(t) for t in TEXTS]
    assert got["tokens"]["whitespace"] == [t.lower().split() for t in TEXTS]

    def step_io(path):
        it = Interpreter(model_path=path)
        runner = it.get_signature_runner("step")
        details = {**runner.get_input_details(), **runner.get_output_details()}
        return runner, {k: list(d["shape_signature"]) for k, d in details.items()}

    original, shapes = step_io(model)
    pinned, pinned_shapes = step_io(str(tmp_path / "pinned.tflite"))
    assert shapes["token"] == [-1] and shapes["rnn_0_h"] == [-1, 16]
    assert pinned_shapes == {k: [1 if d == -1 else d for d in v] for k, v in shapes.items()}
    assert got["pinned"] >= len(shapes)
    feed = {"token": np.array([5], np.int32),
            **{k: np.full((1, 16), 0.25, np.float32) for k in shapes if k.startswith("rnn_")}}
    a, b = original(**feed), pinned(**feed)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
