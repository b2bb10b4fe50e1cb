"""A user's .tflite is untrusted: damage is named before LiteRT reads it, and a crash stays in a child."""

import os
import subprocess
import sys

import pytest

from seqkit.errors import SeqkitError


@pytest.fixture(scope="module")
def model(tiny_lm_export):
    """The session's tiny LM step export (read only): its model.tflite bytes."""
    out, _ = tiny_lm_export("lstm")
    with open(os.path.join(out, "model.tflite"), "rb") as f:
        return f.read()


def _edit(data: bytes, change) -> bytes:
    """``data`` unpacked with the TFLite schema's object API, ``change(model)`` applied, repacked."""
    from ai_edge_litert.tools import flatbuffer_utils

    m = flatbuffer_utils.convert_bytearray_to_object(bytearray(data))
    change(m)
    return bytes(flatbuffer_utils.convert_object_to_bytearray(m))


def _op(m, name: str):
    """``(subgraph, operator)`` of the first operator whose builtin op is ``name``."""
    from ai_edge_litert import schema_py_generated as schema

    code = getattr(schema.BuiltinOperator, name)
    for g in m.subgraphs:
        for op in g.operators:
            oc = m.operatorCodes[op.opcodeIndex]
            if max(oc.builtinCode, oc.deprecatedBuiltinCode) == code:
                return g, op
    raise AssertionError(f"no {name} op")


def _write(tmp_path, data: bytes) -> str:
    path = str(tmp_path / "model.tflite")
    with open(path, "wb") as f:
        f.write(data)
    return path


def _raw_litert(path: str) -> int:
    """Exit status of a child that loads ``path`` in LiteRT directly (no seqkit checks)."""
    code = ("import sys; from ai_edge_litert.interpreter import Interpreter; "
            "it = Interpreter(model_path=sys.argv[1]); it.allocate_tensors(); "
            "r = it.get_signature_runner('step'); "
            "import numpy as np; r(**{n: np.zeros(d['shape'], d['dtype']) for n, d in r.get_input_details().items()})")
    return subprocess.run([sys.executable, "-c", code, path], capture_output=True, timeout=120).returncode


def test_a_split_count_that_crashes_litert_is_named_before_litert_reads_it(model, tmp_path):
    """One changed count (the gates' SPLIT: 4 outputs, num_splits 11468804) kills a process that
    hands the file to LiteRT; seqkit names the operator and loses no process."""
    from seqkit.export.tflite import interpreter

    def damage(m):
        _, op = _op(m, "SPLIT")
        assert op.builtinOptions.numSplits == len(op.outputs) == 4
        op.builtinOptions.numSplits = 11468804

    path = _write(tmp_path, _edit(model, damage))
    assert _raw_litert(path) < 0  # LiteRT alone: killed by a signal
    with pytest.raises(SeqkitError, match=r"damaged TFLite model \(subgraph 0 operator \d+ \(SPLIT\): "
                                          r"num_splits 11468804 for 4 outputs\).*Export the run again"):
        interpreter(path)
    from click.testing import CliRunner

    from seqkit.cli import main

    for argv in (["inspect", path], ["stream", path, "--prompt", "a", "--greedy"]):
        res = CliRunner().invoke(main, argv)
        assert res.exit_code != 0 and "num_splits 11468804 for 4 outputs" in res.output, argv


@pytest.mark.parametrize("damage, message", [
    (lambda m: setattr(_op(m, "FULLY_CONNECTED")[1], "inputs", [0, 10_000, -1]),
     r"operator \d+: input 1 names tensor 10000, outside its subgraph's \d+"),
    (lambda m: setattr(_op(m, "FULLY_CONNECTED")[1], "opcodeIndex", 99),
     r"operator \d+ names operator code 99 of \d+"),
    (lambda m: setattr(m.subgraphs[0].tensors[0], "buffer", 4_000),
     r"subgraph 0 tensor 0 names buffer 4000 of \d+"),
    (lambda m: setattr(m.subgraphs[0], "outputs", [7_777]),
     r"subgraph 0 output 0 names tensor 7777 of \d+"),
    (lambda m: setattr(m.signatureDefs[0], "subgraphIndex", 3),
     r"signature 0 names subgraph 3 of 1"),
    (lambda m: setattr(m.subgraphs[0].tensors[0], "type", 100),
     r"tensor 0 has type 100, which LiteRT does not know"),
    (lambda m: setattr(m, "version", 2), r"schema version 2, where LiteRT reads 3"),
])
def test_each_kind_of_damage_is_named(model, damage, message):
    from seqkit.export.model_check import check_structure

    with pytest.raises(SeqkitError, match=message):
        check_structure(_edit(model, damage), "m.tflite")


def test_options_of_another_op_are_refused(model):
    """An operator whose options table is another op's (LiteRT would read the wrong struct)."""
    from ai_edge_litert import schema_py_generated as schema

    from seqkit.export.model_check import check_structure

    def damage(m):
        _, op = _op(m, "SPLIT")
        op.builtinOptionsType = schema.BuiltinOptions.UnsortedSegmentSumOptions

    with pytest.raises(SeqkitError, match=r"\(SPLIT\): options of type UnsortedSegmentSumOptions \(the "
                                          r"UNSORTED_SEGMENT_SUM op's\), where the op reads SplitOptions"):
        check_structure(_edit(model, damage), "m.tflite")


def test_ops_that_read_a_shared_options_table_pass(tf, tmp_path):
    """MAX_POOL_2D reads Pool2DOptions and L2_NORMALIZATION L2NormOptions, tables not named after
    them: a model LiteRT runs is not called damaged."""
    from seqkit.export.model_check import check_structure
    from seqkit.export.tflite import interpreter, op_names

    @tf.function(input_signature=[tf.TensorSpec([1, 4, 4, 2], tf.float32)])
    def f(x):
        return tf.math.l2_normalize(tf.nn.max_pool2d(x, 2, 2, "VALID"), axis=-1)

    data = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f).convert()
    assert {"MAX_POOL_2D", "L2_NORMALIZATION"} <= set(op_names(data))
    check_structure(data, "pool.tflite")
    assert interpreter(data) is not None


def test_garbage_and_the_exports_own_bytes(model):
    from seqkit.export.model_check import check_structure

    check_structure(model, "model.tflite")  # an export passes
    for bad, why in ((b"", "m.tflite: not a TFLite model"), (model[:4] + b"XXXX" + model[8:], "no TFL3"),
                     (model[:200], "the flatbuffer does not parse")):
        with pytest.raises(SeqkitError, match=why):
            check_structure(bad, "m.tflite")


def test_litert_refusing_a_model_the_schema_allows_is_a_clear_error(model, tmp_path):
    """A constant whose shape no longer matches its bytes passes the schema; LiteRT refuses it
    with its own reason, which seqkit passes on with the file's name (no internal error)."""
    from seqkit.export.tflite import interpreter

    def damage(m):
        g, op = _op(m, "FULLY_CONNECTED")
        weights = g.tensors[op.inputs[1]]
        assert len(m.buffers[weights.buffer].data) > 0
        weights.shape[0] *= 2

    path = _write(tmp_path, _edit(model, damage))
    with pytest.raises(SeqkitError, match=r"model.tflite: LiteRT cannot load this model \(.+\)\. The file "
                                          r"was damaged"):
        interpreter(path)


def test_a_crash_in_the_child_is_reported_and_a_passed_model_is_not_tried_again(model, monkeypatch):
    from seqkit.export import model_check

    monkeypatch.setattr(model_check, "_PROBED", set())
    monkeypatch.setattr(model_check, "_PROBE", "import ctypes; ctypes.string_at(0)")  # a real SIGSEGV
    with pytest.raises(SeqkitError, match=r"m.tflite: LiteRT crashed loading this model \(signal SIGSEGV, "
                                          r"in the child process"):
        model_check.probe(model, "m.tflite")
    calls = []
    real = subprocess.run
    monkeypatch.setattr(model_check.subprocess, "run", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(model_check, "_PROBE", "pass")
    model_check.probe(model, "m.tflite")
    model_check.probe(model, "m.tflite")
    assert len(calls) == 1


def test_only_a_bounded_regular_file_is_read(model, tmp_path, monkeypatch):
    from seqkit.export import model_check

    with pytest.raises(SeqkitError, match="not a regular file"):
        model_check.read_model(str(tmp_path))  # a folder
    fifo = tmp_path / "pipe.tflite"
    os.mkfifo(fifo)
    with pytest.raises(SeqkitError, match="pipe.tflite: not a regular file"):
        model_check.read_model(str(fifo))  # no writer: refused without waiting for one
    path = _write(tmp_path, model)
    monkeypatch.setattr(model_check, "MAX_MODEL_BYTES", len(model) - 1)
    with pytest.raises(SeqkitError, match=f"{len(model):,} bytes, more than a TFLite flatbuffer holds"):
        model_check.read_model(path)


def test_a_child_that_cannot_run_litert_gives_no_verdict(model, monkeypatch, tmp_path):
    """The real child, where LiteRT does not import (a package of that name that raises, first on
    the path the child inherits): neither passed nor refused, and not remembered; the caller's
    own load decides. A child killed by SIGKILL (out of memory) gives no verdict either."""
    from seqkit.export import model_check

    fake = tmp_path / "shadow" / "ai_edge_litert"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no LiteRT here')\n")
    monkeypatch.setattr(model_check, "_PROBED", set())
    monkeypatch.setattr(sys, "path", [str(tmp_path / "shadow"), *sys.path])
    model_check.probe(model, "m.tflite")
    assert not model_check._PROBED
    monkeypatch.setattr(sys, "path", sys.path[1:])
    monkeypatch.setattr(model_check, "_PROBE", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    model_check.probe(model, "m.tflite")
    assert not model_check._PROBED


def test_a_model_is_a_path_or_bytes(model):
    """memoryview bytes load as bytes; anything else is named (an int was a TypeError)."""
    from seqkit.export.tflite import interpreter

    assert interpreter(memoryview(model)) is not None
    with pytest.raises(SeqkitError, match="a TFLite model is a path or its bytes; got int"):
        interpreter(5)


def test_opening_an_export_writes_nothing_to_stderr(tiny_lm_export, capfd):
    """LiteRT writes 'INFO: Created TensorFlow Lite XNNPACK delegate for CPU.' to fd 2 on every
    interpreter; seqkit's library calls print nothing, so it is held back (other lines pass)."""
    import os
    import sys

    from seqkit._quiet import litert_quietly
    from seqkit.export.tflite import interpreter

    export, _ = tiny_lm_export()
    capfd.readouterr()
    it = interpreter(os.path.join(export, "model.tflite"))
    assert "step" in it.get_signature_list()
    assert capfd.readouterr().err == ""
    with litert_quietly():
        os.write(2, b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\nERROR: a real one\n")
    sys.stderr.flush()
    assert capfd.readouterr().err == "ERROR: a real one\n"
