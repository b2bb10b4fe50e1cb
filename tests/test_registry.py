import importlib.metadata
import textwrap

import pytest

from seqkit.errors import RegistryError, SeqkitError
from seqkit.registry import CELLS, Registry, load_plugin


def test_decorator_registers_and_get_returns_object():
    reg = Registry("widget", "seqkit.test-widgets")

    @reg.register("alpha")
    class Alpha:
        pass

    assert reg.get("alpha") is Alpha
    assert reg.names() == ["alpha"]
    assert reg.entries()[0].origin  # where it came from is recorded


def test_same_object_twice_is_harmless_different_object_is_an_error():
    reg = Registry("widget", "seqkit.test-widgets")

    class A:
        pass

    class B:
        pass

    reg.register("a", A)
    reg.register("a", A)  # importing the same plugin twice
    with pytest.raises(RegistryError, match=r"widget 'a'.*already taken"):
        reg.register("a", B)


def test_unknown_name_lists_known_names_and_closest_match():
    with pytest.raises(RegistryError) as info:
        CELLS.get("lstn")
    msg = str(info.value)
    assert "Did you mean 'lstm'?" in msg
    known = msg.split("Known cells: ")[1].split(".")[0].split(", ")
    assert {"gru", "lstm", "simple_rnn"} <= set(known) and known == sorted(known)  # plugins may add more


def test_builtins_are_registered():
    assert {"lstm", "gru", "simple_rnn"} <= set(CELLS.names())


def test_entry_point_discovery(monkeypatch, tmp_path):
    mod = tmp_path / "ep_cells_mod.py"
    mod.write_text("from seqkit.registry import Registry\n")
    reg = Registry("cell", "seqkit.test-ep")
    calls = []

    class FakeEP:
        name, value = "fake", "ep_cells_mod"

        def load(self):
            calls.append(1)
            reg.register("fake_cell", FakeEP)

    def fake_entry_points(group=None):
        return [FakeEP()] if group == "seqkit.test-ep" else []

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    assert reg.get("fake_cell") is FakeEP
    reg.get("fake_cell")
    assert calls == [1]  # entry points are loaded once


def test_load_plugin_file_registers_cell_and_is_idempotent(tmp_path):
    p = tmp_path / "my_cells.py"
    p.write_text(textwrap.dedent("""
        import seqkit
        from seqkit.cells.simple_rnn import SimpleRNNPlugin

        @seqkit.register_cell("test_plugin_cell")
        class MyCell(SimpleRNNPlugin):
            '''A test cell.'''
    """))
    load_plugin(str(p))
    load_plugin(str(p))  # twice: harmless
    assert CELLS.get("test_plugin_cell").__name__ == "MyCell"


def test_load_plugin_errors_are_clear(tmp_path):
    with pytest.raises(SeqkitError, match="no such file"):
        load_plugin(str(tmp_path / "missing.py"))
    with pytest.raises(SeqkitError, match="cannot import module 'no_such_module_xyz'"):
        load_plugin("no_such_module_xyz")
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(SeqkitError, match="boom"):
        load_plugin(str(bad))
    leaves = tmp_path / "leaves.py"  # `seqkit list --plugin leaves.py` exited 0 with no output
    leaves.write_text("import sys\nsys.exit(0)\n")
    with pytest.raises(SeqkitError, match=r"leaves.py: importing the file failed: SystemExit: 0"):
        load_plugin(str(leaves))
    notes = tmp_path / "notes.txt"  # any existing file that is not Python source (was an AttributeError)
    notes.write_text("x = 1\n")
    with pytest.raises(SeqkitError, match=r"--plugin .*notes.txt: not a .py file"):
        load_plugin(str(notes))


def test_only_a_class_with_the_plugins_method_registers():
    """A lambda, a function or a class without make_cell() registered as a cell was listed by
    `seqkit list` and failed later inside model building (TypeError: P() takes no arguments)."""
    from seqkit.registry import RegistryError, register_cell, register_head

    class NotACell:
        pass

    for obj, shown in ((lambda: None, "<lambda>"), (NotACell, "NotACell"), (len, "len")):
        with pytest.raises(RegistryError, match=rf"cannot register cell 'plain_x': a cell plugin is a class with "
                                                rf"make_cell\(\) \(subclass seqkit.cells.base.CellPlugin\); got .*{shown}"):
            register_cell("plain_x")(obj)
    with pytest.raises(RegistryError, match=r"a head plugin is a class with build_model\(\)"):
        register_head("plain_x")(NotACell)
    assert "plain_x" not in CELLS.names()
