"""Every ``--out`` goes through one writer (seqkit.outputs): staged and renamed, never a run's own
file, never a file seqkit did not write unless --overwrite, companions named before writing,
and exports locked like training."""

from __future__ import annotations

import errno
import json
import os

import pytest
from click.testing import CliRunner

from seqkit.cli import main
from seqkit.errors import SeqkitError


def fake_run(folder) -> str:
    """A run directory as `seqkit plot` reads it (recipe.yaml, state.json, history.json, a model)."""
    folder.mkdir()
    (folder / "recipe.yaml").write_text("name: fake\n", encoding="utf-8")
    (folder / "state.json").write_text('{"epoch": 2, "best": 1.5}', encoding="utf-8")
    (folder / "model.keras").write_bytes(b"the best model")
    hist = [{"epoch": 1, "loss": 2.0, "val_loss": 1.8}, {"epoch": 2, "loss": 1.6, "val_loss": 1.5}]
    (folder / "history.json").write_text(json.dumps(hist), encoding="utf-8")
    return str(folder)


def plot(*args):
    return CliRunner().invoke(main, ["plot", *map(str, args)])


def test_plot_into_the_run_is_refused_even_with_overwrite(tmp_path):
    run = fake_run(tmp_path / "run")
    for extra in ([], ["--overwrite"]):
        res = plot(run, "--out", os.path.join(run, "model.keras"), *extra)
        assert res.exit_code == 2, res.output
        assert "inside the seqkit run directory" in res.output and "Traceback" not in res.output
        assert (tmp_path / "run" / "model.keras").read_bytes() == b"the best model"
    res = plot(run, "--out", os.path.join(run, "curves.png"))  # a new file there: also refused
    assert res.exit_code == 2 and not (tmp_path / "run" / "curves.png").exists()


def test_plot_refuses_a_users_file_unless_overwrite(tmp_path):
    run = fake_run(tmp_path / "run")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("name: mine\n", encoding="utf-8")
    res = plot(run, "--out", recipe)
    assert res.exit_code == 2 and "was not written by seqkit" in res.output and "--overwrite" in res.output
    assert recipe.read_text(encoding="utf-8") == "name: mine\n"
    res = plot(run, "--out", recipe, "--overwrite")
    assert res.exit_code == 0, res.output
    assert recipe.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_names_the_companion_json_and_keeps_a_users_one(tmp_path):
    run = fake_run(tmp_path / "run")
    mine = tmp_path / "curves.json"
    mine.write_text('{"mine": true}', encoding="utf-8")
    res = plot(run, "--out", tmp_path / "curves.png")
    assert res.exit_code == 2
    assert str(mine) in res.output and "curves.png writes" in res.output  # both files named
    assert mine.read_text(encoding="utf-8") == '{"mine": true}'
    assert not (tmp_path / "curves.png").exists()
    assert sorted(os.listdir(tmp_path)) == ["curves.json", "run"]  # no temporary left


def test_plot_replaces_its_own_files_and_marks_them(tmp_path):
    from seqkit.outputs import written_by_seqkit

    run = fake_run(tmp_path / "run")
    out = tmp_path / "curves.png"
    assert plot(run, "--out", out).exit_code == 0
    data = json.loads((tmp_path / "curves.json").read_text(encoding="utf-8"))
    assert data["written_by"] == "seqkit plot" and data["runs"][run]["epoch"] == [1, 2]
    assert written_by_seqkit(str(out)) and written_by_seqkit(str(tmp_path / "curves.json"))
    first = out.stat().st_ino
    res = plot(run, "--out", out)  # the second drawing replaces seqkit's own files without --overwrite
    assert res.exit_code == 0, res.output
    assert out.stat().st_ino != first  # renamed into place, not written over
    assert sorted(os.listdir(tmp_path)) == ["curves.json", "curves.png", "run"]


def test_plot_makes_the_folders_its_out_names(tmp_path):
    run = fake_run(tmp_path / "run")
    res = plot(run, "--out", tmp_path / "pics" / "new" / "curves.png")
    assert res.exit_code == 0, res.output
    assert sorted(os.listdir(tmp_path / "pics" / "new")) == ["curves.json", "curves.png"]


def test_plot_names_a_history_nested_too_deep(tmp_path):
    run = fake_run(tmp_path / "run")
    (tmp_path / "run" / "history.json").write_text("[" * 100_000 + "]" * 100_000)
    res = plot(run, "--out", tmp_path / "curves.png")
    assert res.exit_code == 2 and "history.json: cannot read it as JSON (nested too deep)" in res.output


def test_a_folder_or_a_symbolic_link_is_never_replaced(tmp_path):
    run = fake_run(tmp_path / "run")
    (tmp_path / "pics").mkdir()
    target = tmp_path / "target.png"
    target.write_bytes(b"not mine")
    (tmp_path / "link.png").symlink_to(target)
    for out in ("pics", "link.png"):
        res = plot(run, "--out", tmp_path / out, "--overwrite")
        assert res.exit_code == 2, res.output
    assert target.read_bytes() == b"not mine" and os.listdir(tmp_path / "pics") == []


def test_protected_paths_are_refused_even_with_overwrite(tmp_path):
    from seqkit.outputs import FileOutputs, OutputPathError

    data = tmp_path / "train.tsv"
    data.write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(OutputPathError, match="the data file"):
        FileOutputs([str(data)], overwrite=True, protect=[("the data file (data.path)", str(data))])
    assert data.read_text(encoding="utf-8") == "a\tb\n"


def test_protected_by_runs_names_the_recipes_data(tmp_path, write_recipe, recipe_dict):
    from seqkit.outputs import protected_by_runs

    data = tmp_path / "lines.txt"
    data.write_text("hello\nworld\n", encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    raw = recipe_dict(data={"source": "text_lines", "path": str(data), "limit": None})
    os.replace(write_recipe(raw), run / "recipe.yaml")
    found = dict((p, w) for w, p in protected_by_runs([str(run)]))
    assert found.get(str(data), "").startswith("the data file")


def test_a_failed_write_changes_nothing_and_leaves_no_temporary(tmp_path):
    from seqkit.guards import ResourceError
    from seqkit.outputs import FileOutputs

    png, js = tmp_path / "a.png", tmp_path / "a.json"
    outputs = FileOutputs([str(png), str(js)])

    def full(tmp):
        with open(tmp, "wb") as f:
            f.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device", tmp)

    def fine(tmp):
        with open(tmp, "w") as f:
            f.write("{}")

    with pytest.raises(ResourceError, match="disk is full") as exc:
        outputs.write({str(png): fine, str(js): full})
    assert isinstance(exc.value, SeqkitError)
    assert os.listdir(tmp_path) == []


def test_a_path_that_appears_meanwhile_is_not_replaced(tmp_path):
    from seqkit.outputs import FileOutputs, OutputPathError

    out = tmp_path / "x.png"
    outputs = FileOutputs([str(out)])
    out.write_bytes(b"someone else's")
    with pytest.raises(OutputPathError, match="changed while"):
        outputs.write({str(out): lambda tmp: open(tmp, "wb").close()})
    assert out.read_bytes() == b"someone else's" and os.listdir(tmp_path) == ["x.png"]


def test_export_overwrite_keeps_a_folder_with_other_files(tmp_path):
    from seqkit.export.writer import check_out
    from seqkit.outputs import OutputPathError

    run = fake_run(tmp_path / "run")
    old = tmp_path / "exp"
    old.mkdir()
    (old / "metadata.json").write_text("{}", encoding="utf-8")
    (old / "model.tflite").write_bytes(b"x")
    (old / "notes.txt").write_text("my notes", encoding="utf-8")
    with pytest.raises(OutputPathError, match="notes.txt"):
        check_out(str(old), run, overwrite=True)
    with pytest.raises(OutputPathError, match="inside the seqkit run directory"):
        check_out(os.path.join(run, "export"), run, overwrite=True)


def test_a_second_export_into_one_folder_fails_at_once(tmp_path):
    from seqkit.outputs import OutputPathError, export_lock

    out = str(tmp_path / "exports" / "tiny")
    with export_lock(out):  # another export holds the folder (flock: a second open conflicts)
        with pytest.raises(OutputPathError, match="another seqkit export is writing") as exc:
            export_lock(out).acquire()
        assert str(os.getpid()) in str(exc.value)
    second = export_lock(out).acquire()  # free again once the first ends
    second.release()
    assert not os.path.exists(tmp_path / "exports")  # the lock's folder is removed again


def test_export_cli_reports_the_held_lock(tmp_path, tiny_lm):
    from seqkit.outputs import export_lock

    out = str(tmp_path / "exp")
    with export_lock(out):
        res = CliRunner().invoke(main, ["export", tiny_lm("lstm"), "--out", out])
    assert res.exit_code == 2 and "another seqkit export is writing" in res.output, res.output
    assert not os.path.exists(out)
