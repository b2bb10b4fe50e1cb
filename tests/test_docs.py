"""The documentation as a user meets it: README's tour and the tutorials run as written on tiny data,
every other code block is checked or says why it cannot run, the words speak to users, and the
recipe reference covers the schema.

Rules for a fenced block in README.md and docs/**/*.md (the line before it may hold a marker):

* ``<!-- not-run: REASON -->``: not run; the reason must be given.
* ``<!-- file: NAME -->``: the block's text is written to NAME (data the next blocks use).
* ``text``: output or data shown, nothing to run.
* ``yaml``: every key must be a recipe key (the schema of :mod:`seqkit.recipe` and the registered
  plugins' ``Options``).
* ``python``: executed (docs/python-api.md's blocks are run by tests/test_api.py, docs/cells.md's
  example by tests/test_plugins.py).
* ``sh`` (and an unlabelled block): every line is a ``seqkit`` command (optionally fed by
  ``echo "..." |``), run through the CLI in a fresh folder, each must exit 0. ``train`` runs get
  a tiny model and one epoch (``--set``), so a page runs in seconds.
"""

from __future__ import annotations

import pathlib
import re
import shlex

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md"] + sorted((ROOT / "docs").rglob("*.md"))
RUN_ELSEWHERE = {"docs/python-api.md": "tests/test_api.py", "docs/cells.md": "tests/test_plugins.py"}
TINY = ["--set", "training.epochs=1", "--set", "model.units=8", "--set", "model.embedding_dim=8",
        "--set", "training.batch_size=4"]
MARK = re.compile(r"^\s*<!--\s*(not-run|file):\s*(.*?)\s*-->\s*$")


def blocks(path: pathlib.Path) -> list[dict]:
    """Every fenced block of a Markdown file: ``{"lang", "text", "line", "marker", "arg"}``."""
    lines = path.read_text(encoding="utf-8").split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if m:
            ind = len(m.group(1))
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            assert j < len(lines), f"{path}:{i + 1}: a code block is never closed"
            prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            mk = MARK.match(prev)
            out.append({"lang": m.group(2), "text": "\n".join(ln[ind:] for ln in lines[i + 1:j]) + "\n",
                        "line": i + 1, "marker": mk.group(1) if mk else None, "arg": mk.group(2) if mk else None})
            i = j
        i += 1
    return out


def rel(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).as_posix()


# ---------------------------------------------------------------- every block is accounted for

def test_every_block_runs_is_checked_or_says_why_not():
    """A block is runnable (python, sh), checked (yaml), data/output (text) or marked not-run with a
    reason: a new block in another language, or a marker without a reason, fails here."""
    bad = []
    for page in PAGES:
        for b in blocks(page):
            where = f"{rel(page)}:{b['line']}"
            if b["marker"] == "not-run":
                if len(b["arg"]) < 10:
                    bad.append(f"{where}: not-run needs a reason (what it needs, which test covers it)")
            elif b["lang"] not in ("text", "yaml", "python", "sh", ""):
                bad.append(f"{where}: a ```{b['lang']} block must be marked <!-- not-run: REASON -->")
    assert not bad, "\n".join(bad)


def _shell_commands(text: str, where: str) -> list[tuple[list[str], str | None]]:
    cmds = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        toks = shlex.split(line, comments=True)
        stdin = None
        if toks[:1] == ["echo"] and "|" in toks:
            bar = toks.index("|")
            stdin, toks = " ".join(toks[1:bar]) + "\n", toks[bar + 1:]
        assert toks[:1] == ["seqkit"], (f"{where}: `{line.strip()}` is not a seqkit command: mark the "
                                        f"block <!-- not-run: REASON --> or keep to seqkit commands")
        cmds.append((toks[1:], stdin))
    return cmds


def test_marked_shell_blocks_hold_only_seqkit_commands():
    """Every unmarked shell block is made of seqkit commands (so the page runner below can run it)."""
    for page in PAGES:
        for b in blocks(page):
            if b["marker"] is None and b["lang"] in ("sh", ""):
                _shell_commands(b["text"], f"{rel(page)}:{b['line']}")


# ---------------------------------------------------------------- yaml blocks: recipe keys only

def _known_keys():
    from pydantic import BaseModel

    from seqkit.recipe import RecipeModel
    from seqkit.registry import CELLS, DATA, HEADS

    plugin = {}
    for section, reg in (("data", DATA), ("model", CELLS), ("head", HEADS)):
        fields = {}
        for name in reg.names():
            opts = getattr(reg.get(name), "Options", None)
            if opts is not None:
                fields.update(opts.model_fields)
        plugin[section] = fields

    def nested(info):
        import typing

        for a in (info.annotation, *typing.get_args(info.annotation)):
            if isinstance(a, type) and issubclass(a, BaseModel):
                return a
        return None

    return RecipeModel, plugin, nested


def _unknown(d: dict, model, path: tuple, plugin, nested) -> list[str]:
    out = []
    for k, v in d.items():
        info = model.model_fields.get(k) if model is not None else None
        if info is None and len(path) == 1 and path[0] in plugin:
            info = plugin[path[0]].get(k)
        if info is None:
            out.append(".".join(path + (str(k),)))
            continue
        sub = nested(info)
        if sub is not None and isinstance(v, dict):
            out += _unknown(v, sub, path + (k,), plugin, nested)
    return out


def test_yaml_blocks_use_only_recipe_keys():
    """Every key of every ```yaml block is a key seqkit validate knows (a renamed key fails here)."""
    RecipeModel, plugin, nested = _known_keys()
    bad = []
    for page in PAGES:
        for b in blocks(page):
            if b["lang"] != "yaml" or b["marker"] == "not-run":
                continue
            data = yaml.safe_load(b["text"])
            assert isinstance(data, dict), f"{rel(page)}:{b['line']}: a yaml block is a recipe (part)"
            bad += [f"{rel(page)}:{b['line']}: {k}" for k in _unknown(data, RecipeModel, (), plugin, nested)]
    assert not bad, "unknown recipe keys in the docs:\n" + "\n".join(bad)


# ---------------------------------------------------------------- pages run as written

TOUR_DATA = {  # README's tour names the user's files; these stand in for them
    "reviews.csv": "review,stars\n" + "".join(
        f'"{t}",{s}\n' for t, s in [("Great, really great", 5), ("Dull and far too long", 1),
                                     ("Loved every minute", 5), ("Boring and slow", 1)] * 5),
    "new-reviews.csv": 'review,stars\n"Great, just great",\nSlow and dull,\n',
    "train.conll": "the DT\ncat NN\nsat VBD\n\na DT\ndog NN\nran VBD\n\n" * 6,
    "train.en": "the house\na garden\nthe small house\na big garden\n" * 5,
    "train.de": "das Haus\nein Garten\ndas kleine Haus\nein großer Garten\n" * 5,
    "test.en": "the garden\na house\n",
    "texts/a.txt": "hello world this is text\n" * 20,
    "texts/b.txt": "hello text this is world\n" * 20,
    "texts/c.txt": "world hello is this text\n" * 10,
    "texts/d.txt": "text is hello this world\n" * 10,
}

# These pages run with -m slow (suite time); the default suite still runs what they show:
# - seq2seq.md: beam-search decoding graphs take ~40 s to trace on 2 cores; README's tour runs the
#   same seq2seq commands.
# - getting-started.md, tutorials/acceptor.md, tutorials/tagger.md, tutorials/language-model.md: the
#   same init / validate / train / evaluate / predict / generate sequence as README's tour (run
#   below, on the same kind of data); their extra options are checked by their own tests:
#   `seqkit recipes` (test_starter.py), `evaluate --confusion-matrix` (test_diagnose.py),
#   `predict --probabilities` (test_predict_cli.py, test_api.py), `generate --num --seed` and
#   `generate --beam-width` (test_api.py::test_api_results_equal_the_cli, test_generate.py).
SLOW_PAGES = {"docs/tutorials/seq2seq.md", "docs/getting-started.md", "docs/tutorials/acceptor.md",
              "docs/tutorials/tagger.md", "docs/tutorials/language-model.md"}
RUNNABLE = [pytest.param(p, id=rel(p), marks=[pytest.mark.slow] if rel(p) in SLOW_PAGES else [])
            for p in PAGES
            if any(b["marker"] is None and b["lang"] in ("sh", "", "python") and rel(p) not in RUN_ELSEWHERE
                   for b in blocks(p))]


@pytest.mark.parametrize("page", RUNNABLE)
def test_page_runs_as_written(page, tmp_path, monkeypatch, tf):
    """The page's blocks, in order, in a fresh folder: files written, python executed, seqkit
    commands run through the CLI (tiny models, one epoch); each command must succeed."""
    from click.testing import CliRunner

    from seqkit.cli import main

    monkeypatch.chdir(tmp_path)
    if page.name == "README.md":
        for name, text in TOUR_DATA.items():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(text, encoding="utf-8")
    runner = CliRunner()
    ran = 0
    for b in blocks(page):
        where = f"{rel(page)}:{b['line']}"
        if b["marker"] == "file":
            (tmp_path / b["arg"]).write_text(b["text"], encoding="utf-8")
        elif b["marker"] == "not-run":
            continue
        elif b["lang"] == "python":
            exec(compile(b["text"], where, "exec"), {"__name__": "__docs__"})
            ran += 1
        elif b["lang"] in ("sh", ""):
            for args, stdin in _shell_commands(b["text"], where):
                if args[:1] == ["train"]:
                    args = args + TINY
                res = runner.invoke(main, args, input=stdin, catch_exceptions=False)
                assert res.exit_code == 0, f"{where}: seqkit {' '.join(args)} exited {res.exit_code}:\n{res.output}"
                ran += 1
    assert ran > 0


def test_readme_tour_trains_what_init_detected(tmp_path, monkeypatch):
    """The recipes `seqkit init` writes for the tour's files name the columns and formats found."""
    from seqkit.starter import starter_recipe

    monkeypatch.chdir(tmp_path)
    for name, text in TOUR_DATA.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    r = starter_recipe("classify", "reviews.csv")
    assert (r["data"]["source"], r["data"]["text_column"], r["data"]["label_column"]) == ("table", "review", "stars")
    assert r["data"]["tokenizer"] == "whitespace" and r["data"]["split"]["shuffle"] is True
    assert starter_recipe("tag", "train.conll")["data"]["source"] == "conll"
    s = starter_recipe("seq2seq", ["train.en", "train.de"])["data"]
    assert (s["source"], s["source_path"], s["target_path"]) == ("parallel_text", "train.en", "train.de")
    lm = starter_recipe("lm", "texts")["data"]
    assert lm["train_path"] == ["texts/a.txt", "texts/b.txt"] and (lm["valid_path"], lm["test_path"]) == (
        "texts/c.txt", "texts/d.txt")


# ---------------------------------------------------------------- words

PROCESS_WORDS = [r"\bstops? \d+", r"\bissues? #?\d+", r"\bthe issue's\b", r"\bother engineers\b",
                 r"\b(this|previous|earlier|next|work) session\b", r"\bsessions? of work\b"]


def test_docs_and_code_speak_to_users_not_of_how_seqkit_was_built():
    """README, CHANGELOG, docs/ and seqkit/ never speak of work stops, sessions, issue numbers or
    team members (a short denylist; `session` alone stays usable for 'an interactive session')."""
    files = PAGES + [p for p in (ROOT / "seqkit").rglob("*") if p.suffix in (".py", ".yaml", ".md")]
    files += list((ROOT / "tests").glob("*.py"))
    bad = []
    for f in files:
        if f.name == "test_docs.py":
            continue
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            for pat in PROCESS_WORDS:
                if f.parent.name == "tests" and "session" in pat:
                    continue  # pytest's own test session
                if re.search(pat, line, re.I):
                    bad.append(f"{rel(f)}:{n}: {line.strip()[:100]}")
    assert not bad, "words about how seqkit was built, not for its users:\n" + "\n".join(bad)


def test_readme_is_a_front_page_with_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 210
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_cmd = ('pip install -e ".[dev,examples,plot,text,hf,parquet,subword,quantizer]" -e plugins/seqkit-peephole '
                '-e plugins/seqkit-mingru -e plugins/seqkit-forecast && python -m pytest -q')
    assert test_cmd in text
    # CI runs the same install and pytest, then builds the site strictly
    install = test_cmd.split(" && ")[0].replace("pip install", "python -m pip install -q", 1)
    assert install in ci and "\npython -m pytest -q\n" in ci
    assert "mkdocs build --strict" in ci
    assert "seqkit train recipes/lm-pydoc-chars.yaml --overwrite && seqkit evaluate runs/lm-pydoc-chars" in text
    for link in re.findall(r"\]\(((?:docs/)[^)#]+)", text):
        assert (ROOT / link).exists(), f"README links to {link}, which does not exist"


# ---------------------------------------------------------------- the generated recipe reference

def test_recipe_reference_lists_every_schema_key():
    """The reference page is generated from the schema: every key of RecipeModel (nested too) and of
    every registered plugin's Options is in it, with its default."""
    from seqkit.recipe import RecipeModel
    from seqkit.recipe_reference import markdown, rows

    page = markdown()
    for key, typ, default, _ in rows(RecipeModel, ""):
        assert f"| `{key}` |" in page, key
    assert "| `training.epochs` | a positive integer | `20` |" in page or "`training.epochs`" in page
    assert "| `data.tokenizer` | one of 'char', 'whitespace', 'sentencepiece' | `char` |" in page
    assert "### `table`" in page and "| `data.label_column` |" in page
    assert ("| `name` | a string of letters, digits, '_', '-', '.' of at most 100 characters | the recipe "
            "file's stem |") in page


def test_repository_paths_the_pages_name_exist():
    """Every file or folder of the repository a page names in backticks (``seqkit/...py``,
    ``tests/...``, ``bench/...``, ``examples/...``, ``plugins/...``, ``recipes/...``) is there, so
    a module that moves takes its mentions along. CHANGELOG speaks of the past and is left out."""
    pattern = re.compile(r"`((?:seqkit|tests|bench|examples|plugins|recipes)/[\w./-]*(?:\.(?:py|sh|yaml|md)|/))`")
    missing = [f"{rel(page)}: {m}" for page in PAGES if page.name != "CHANGELOG.md"
               for m in pattern.findall(page.read_text(encoding="utf-8")) if not (ROOT / m).exists()]
    assert not missing, missing


def test_mkdocs_nav_names_every_page():
    """Every Markdown page of docs/ is in mkdocs.yml's nav (or excluded on purpose)."""
    cfg = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = set(re.findall(r":\s*([\w/.-]+\.md)\s*$", cfg, re.M))
    excluded = {"pypi.md"}
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages - excluded <= nav, sorted(pages - excluded - nav)
    assert all((ROOT / "docs" / p).exists() for p in nav)


# ---------------------------------------------------------------- the generated command-line reference

def cli_reference_rows() -> dict[str, list[list[str]]]:
    """docs/cli.md as mkdocs-click renders it with docs/hooks.py installed: for each command title,
    the cells of its option table's rows."""
    pytest.importorskip("mkdocs_click")
    import importlib.util

    import markdown

    spec = importlib.util.spec_from_file_location("seqkit_docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    hooks.install_option_defaults()
    md = markdown.Markdown(extensions=["mkdocs-click"])
    lines = md.preprocessors["mk_click"].run((ROOT / "docs" / "cli.md").read_text(encoding="utf-8").splitlines())
    tables, title = {}, None
    for line in lines:
        if line.startswith("#"):
            title = line.lstrip("#").strip().split("{")[0].strip()
        elif line.startswith("| `"):
            tables.setdefault(title, []).append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return tables


def test_cli_reference_shows_real_option_defaults():
    """Options declared without a default show an empty cell, flags show `False`, declared defaults
    show themselves: never click's internal UNSET sentinel, and a '|' in a help text stays in its cell."""
    tables = cli_reference_rows()
    assert {"train", "export", "generate"} <= set(tables), sorted(tables)
    for title, rows in tables.items():
        for cells in rows:
            assert len(cells) == 4, (title, cells)
            assert "Sentinel" not in cells[3] and "UNSET" not in cells[3], (title, cells)
    by_name = {title: {cells[0]: cells for cells in rows} for title, rows in tables.items()}
    train = by_name["train"]
    assert train["`--overwrite`"][3] == "`False`"
    assert train["`--set`"][3] == ""           # repeatable, nothing by default
    assert train["`--run-dir`"][3] == ""       # no default: the recipe decides
    export = by_name["export"]
    assert export["`--format`"][3] == "`tflite`"
    assert export["`--cell-scaling` / `--no-cell-scaling`"][3] == "`True`"
    assert "max &#x7C;logit diff&#x7C;" in export["`--tolerance`"][2]     # "|logit diff|" escaped
    assert by_name["init"]["`--task`"][3] == "_required"
