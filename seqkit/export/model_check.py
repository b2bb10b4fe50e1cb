"""A ``.tflite`` a user hands seqkit is untrusted: read bounded, checked before LiteRT sees it.

LiteRT's interpreter trusts its flatbuffer: a damaged file (one changed byte is enough) can make it
read or write out of bounds and kill the process with a segmentation fault instead of raising an
error. Before any seqkit runtime, ``seqkit inspect``, ``stream`` or ``bench-step`` hands a model
to LiteRT (:func:`seqkit.export.tflite.interpreter`), :func:`check` runs:

1. :func:`read_model`: a regular file (not a device, pipe or folder) of at most
   :data:`MAX_MODEL_BYTES`;
2. :func:`check_structure`: the flatbuffer against the TFLite schema (``schema.fbs``) read with
   the schema's Python bindings (which raise Python errors on garbage, never crash): every
   index in range (operator codes, tensors, buffers, subgraphs, signatures), each tensor's type
   and shape, no operator reading another op's options table, and the output counts that
   ``SPLIT`` / ``SPLIT_V`` / ``UNPACK`` / ``PACK`` take from their options;
3. :func:`probe`: the model loaded, its tensors allocated and each signature invoked once on
   zeros (``reset`` first) by LiteRT in a child process, so a crash the structure check does not
   foresee (an op's kernel reading options the schema allows but the graph contradicts) ends the
   child, and seqkit reports it.

A model passes the two checks once per process (its SHA-256 is remembered); the exporter's
runtimes over its freshly converted bytes are checked like any other model (once each).

No seqkit imports beyond :mod:`seqkit.errors`; LiteRT's schema bindings are imported inside the
functions that use them.
"""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import sys

from seqkit.errors import SeqkitError

#: Largest ``.tflite`` seqkit reads: the flatbuffer format's 2 GiB (seqkit writes no model whose
#: buffers live after the flatbuffer).
MAX_MODEL_BYTES = (2 << 30) - 1
#: Seconds the child process may take to load a model and invoke each signature once.
PROBE_SECONDS = 300
#: Largest tensor rank accepted (TFLite kernels support up to 6; 16 leaves room for any real model).
MAX_RANK = 16

_PROBED: set[str] = set()

#: Ops whose options table is not named after the op (``schema.fbs``, LiteRT's
#: ``flatbuffer_conversions``). An op may carry ``NONE``, its own table (``<OpName>Options`` or the one
#: listed here), or a table no op is named after; a table named after *another* op (SPLIT reading
#: UnsortedSegmentSumOptions: a crash) is refused.
_SHARED_OPTIONS = {
    **{op: "ReducerOptions" for op in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD",
                                       "REDUCE_ANY", "REDUCE_ALL")},
    "MAXIMUM": "MaximumMinimumOptions", "MINIMUM": "MaximumMinimumOptions",
    **{op: "Pool2DOptions" for op in ("MAX_POOL_2D", "AVERAGE_POOL_2D", "L2_POOL_2D")},
    "L2_NORMALIZATION": "L2NormOptions", "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "CONV_3D_TRANSPOSE": "Conv3DOptions",
    **{op: "RandomOptions" for op in ("RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL", "MULTINOMIAL")},
}


def _fix(where: str, problem: str) -> SeqkitError:
    return SeqkitError(f"{where}: a damaged TFLite model ({problem}); `seqkit export` writes no such "
                       f"file, so it was damaged or edited after the export. Export the run again.")


def read_model(path) -> bytes:
    """The bytes of the ``.tflite`` at ``path``, refused unless it is a regular file (also behind a
    symbolic link) of at most :data:`MAX_MODEL_BYTES`.

    Raises:
        SeqkitError: unreadable, not a regular file, or too large (the message names the file).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise SeqkitError(f"a TFLite model is a path or its bytes; got {type(path).__name__} {str(path)[:40]!r}.")
    try:
        # a FIFO without a writer: no wait; O_BINARY: no newline translation on Windows
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise SeqkitError(f"{path}: cannot read the TFLite model ({exc.strerror}).") from exc
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = ("not a regular file (a device, a pipe or a folder); pass the .tflite file an export "
                   "wrote, or its export directory")
    elif st.st_size > MAX_MODEL_BYTES:
        problem = (f"{st.st_size:,} bytes, more than a TFLite flatbuffer holds ({MAX_MODEL_BYTES:,}); "
                   f"not a model `seqkit export` wrote")
    if problem:
        os.close(fd)
        raise SeqkitError(f"{path}: {problem}.")
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read(MAX_MODEL_BYTES + 1)
        except OSError as exc:
            raise SeqkitError(f"{path}: cannot read the TFLite model ({exc.strerror}).") from exc


def _names(enum) -> dict[int, str]:
    return {v: k for k, v in vars(enum).items() if not k.startswith("_")}


def _options_table(op, cls):
    table = op.BuiltinOptions()
    obj = cls()
    obj.Init(table.Bytes, table.Pos)
    return obj


def _check_operator(schema, op, where_op: str, code_name: str, n_tensors: int, n_subgraphs: int,
                    options: dict[int, str], own_options: dict[str, str], owner: dict[str, str]) -> str | None:
    """The first problem of one operator, or None."""
    for kind, length, get, low in (("input", op.InputsLength, op.Inputs, -1),
                                   ("output", op.OutputsLength, op.Outputs, -1),
                                   ("intermediate", op.IntermediatesLength, op.Intermediates, -1)):
        for i in range(length()):
            t = get(i)
            if not low <= t < n_tensors:
                return f"{where_op}: {kind} {i} names tensor {t}, outside its subgraph's {n_tensors}"
    kind = op.BuiltinOptionsType()
    if kind not in options:
        return f"{where_op} ({code_name}): options of unknown type {kind}"
    own = _SHARED_OPTIONS.get(code_name) or own_options.get(code_name.replace("_", "").lower() + "options")
    other = owner.get(options[kind])  # the op this table is named after, if any
    if kind != schema.BuiltinOptions.NONE and options[kind] != own and other not in (None, code_name):
        return (f"{where_op} ({code_name}): options of type {options[kind]} (the {other} op's), where the "
                f"op reads {own or 'its own'}")
    if kind == schema.BuiltinOptions.NONE:
        return None
    outputs, inputs = op.OutputsLength(), op.InputsLength()
    if code_name in ("SPLIT", "SPLIT_V"):
        cls = schema.SplitOptions if code_name == "SPLIT" else schema.SplitVOptions
        n = _options_table(op, cls).NumSplits()
        if n != outputs:
            return f"{where_op} ({code_name}): num_splits {n} for {outputs} outputs"
    elif code_name == "UNPACK":
        n = _options_table(op, schema.UnpackOptions).Num()
        if n != outputs:
            return f"{where_op} (UNPACK): num {n} for {outputs} outputs"
    elif code_name == "PACK":
        n = _options_table(op, schema.PackOptions).ValuesCount()
        if n != inputs:
            return f"{where_op} (PACK): values_count {n} for {inputs} inputs"
    refs = {"WHILE": (schema.WhileOptions, ("CondSubgraphIndex", "BodySubgraphIndex")),
            "IF": (schema.IfOptions, ("ThenSubgraphIndex", "ElseSubgraphIndex")),
            "CALL_ONCE": (schema.CallOnceOptions, ("InitSubgraphIndex",))}.get(code_name)
    if refs:
        table = _options_table(op, refs[0])
        for field in refs[1]:
            k = getattr(table, field)()
            if not 0 <= k < n_subgraphs:
                return f"{where_op} ({code_name}): {field} {k}, outside the model's {n_subgraphs} subgraphs"
    return None


def _structure_problem(data: bytes) -> str | None:
    """The first structural problem of a TFLite flatbuffer, or None (see :func:`check_structure`)."""
    from ai_edge_litert import schema_py_generated as schema

    m = schema.Model.GetRootAs(data, 0)
    if m.Version() != 3:
        return f"schema version {m.Version()}, where LiteRT reads 3"
    ops, types, options = _names(schema.BuiltinOperator), _names(schema.TensorType), _names(schema.BuiltinOptions)
    own_options = {n.lower(): n for n in options.values()}  # "splitoptions" -> "SplitOptions"
    owner = {own_options[o.replace("_", "").lower() + "options"]: o for o in ops.values()
             if o.replace("_", "").lower() + "options" in own_options}  # "SplitOptions" -> "SPLIT"
    n_codes, n_buffers, n_subgraphs = m.OperatorCodesLength(), m.BuffersLength(), m.SubgraphsLength()
    if n_subgraphs < 1:
        return "no subgraph"
    codes = []
    for i in range(n_codes):
        oc = m.OperatorCodes(i)
        code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
        if code not in ops:
            return f"operator code {i} is builtin op {code}, which LiteRT does not know"
        codes.append(ops[code])
    for i in range(n_buffers):
        b = m.Buffers(i)
        if b.Offset() and (b.Offset() < 8 or b.Offset() + b.Size() > len(data)):
            return f"buffer {i} lies outside the file (offset {b.Offset()}, {b.Size()} bytes)"
    for i in range(m.MetadataLength()):
        if not 0 <= m.Metadata(i).Buffer() < n_buffers:
            return f"metadata entry {i} names buffer {m.Metadata(i).Buffer()} of {n_buffers}"
    sizes = []
    for s in range(n_subgraphs):
        g = m.Subgraphs(s)
        n_tensors = g.TensorsLength()
        sizes.append(n_tensors)
        for t in range(n_tensors):
            tensor = g.Tensors(t)
            if not 0 <= tensor.Buffer() < n_buffers:
                return f"subgraph {s} tensor {t} names buffer {tensor.Buffer()} of {n_buffers}"
            if tensor.Type() not in types:
                return f"subgraph {s} tensor {t} has type {tensor.Type()}, which LiteRT does not know"
            rank = max(tensor.ShapeLength(), tensor.ShapeSignatureLength())
            if rank > MAX_RANK:
                return f"subgraph {s} tensor {t} has rank {rank}, above {MAX_RANK}"
            if any(tensor.Shape(d) < 0 for d in range(tensor.ShapeLength())):
                return f"subgraph {s} tensor {t} has a negative dimension"
            if any(tensor.ShapeSignature(d) < -1 for d in range(tensor.ShapeSignatureLength())):
                return f"subgraph {s} tensor {t} has a dimension below -1 in its shape signature"
        for kind, length, get in (("input", g.InputsLength, g.Inputs), ("output", g.OutputsLength, g.Outputs)):
            for i in range(length()):
                if not 0 <= get(i) < n_tensors:
                    return f"subgraph {s} {kind} {i} names tensor {get(i)} of {n_tensors}"
        for j in range(g.OperatorsLength()):
            op = g.Operators(j)
            if not 0 <= op.OpcodeIndex() < n_codes:
                return f"subgraph {s} operator {j} names operator code {op.OpcodeIndex()} of {n_codes}"
            problem = _check_operator(schema, op, f"subgraph {s} operator {j}", codes[op.OpcodeIndex()],
                                      n_tensors, n_subgraphs, options, own_options, owner)
            if problem:
                return problem
    for i in range(m.SignatureDefsLength()):
        sig = m.SignatureDefs(i)
        s = sig.SubgraphIndex()
        if not 0 <= s < n_subgraphs:
            return f"signature {i} names subgraph {s} of {n_subgraphs}"
        for kind, length, get in (("input", sig.InputsLength, sig.Inputs), ("output", sig.OutputsLength, sig.Outputs)):
            for k in range(length()):
                if not 0 <= get(k).TensorIndex() < sizes[s]:
                    return f"signature {i} {kind} {k} names tensor {get(k).TensorIndex()} of {sizes[s]}"
    return None


def check_structure(data: bytes, where: str = "this model") -> None:
    """Check a ``.tflite`` flatbuffer against the TFLite schema before LiteRT reads it.

    Args:
        data: the model's bytes.
        where: how messages name it (the file's path).

    Raises:
        SeqkitError: the first problem found (an index out of range, an unknown op, type or
            options table, a count that contradicts the op's outputs, a flatbuffer that does not
            parse), naming the subgraph, operator or tensor.
    """
    data = bytes(data)
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise SeqkitError(f"{where}: not a TFLite model (no TFL3 file identifier); pass the "
                          f"model.tflite an export wrote, or its export directory.")
    try:
        problem = _structure_problem(data)
    except Exception as exc:  # noqa: BLE001  (the bindings raise struct / index / unicode errors on garbage)
        problem = f"the flatbuffer does not parse: {type(exc).__name__}: {exc}"
    if problem:
        raise _fix(where, problem)


#: The child process of :func:`probe`: the model's bytes on standard input; exit 0 when LiteRT
#: loaded and ran it, 3 when it raised an error (the caller's own load reports it), 4 when LiteRT
#: cannot be imported there (no verdict); killed by a signal when LiteRT crashed.
_PROBE = """
import sys
try:
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter
except Exception:
    sys.exit(4)
try:
    it = Interpreter(model_content=sys.stdin.buffer.read())
    it.allocate_tensors()
    sigs = it.get_signature_list()
    if not sigs:
        for d in it.get_input_details():
            it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        it.invoke()
    for key in sorted(sigs, key=lambda k: k != "reset"):
        r = it.get_signature_runner(key)
        r(**{n: (np.ones if n == "rows" else np.zeros)(d["shape"], d["dtype"])
             for n, d in r.get_input_details().items()})
except Exception:
    sys.exit(3)
"""


def probe(data: bytes, where: str = "this model", *, digest: str | None = None) -> None:
    """Load ``data`` in LiteRT's default interpreter in a child process and invoke each signature
    once on zeros; do nothing when the child finishes (an error it raised is raised again by the
    caller's own load).

    Raises:
        SeqkitError: the child was killed by a signal (LiteRT crashed on the model: the message
            names the signal) or took more than :data:`PROBE_SECONDS`. A child that exits any other
            way (it could not import LiteRT, say) or is killed by SIGKILL (the out-of-memory killer,
            for a large model in a small container) gives no verdict: the caller's load goes ahead.
    """
    digest = digest or hashlib.sha256(data).hexdigest()
    if digest in _PROBED:
        return
    # the child imports what this process imports (a path added at run time included); -P keeps the
    # child's own current folder off its sys.path (it is there only if this process has it)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        done = subprocess.run([sys.executable, "-P", "-c", _PROBE], input=bytes(data), capture_output=True,
                              timeout=PROBE_SECONDS, check=False, env=env)
    except subprocess.TimeoutExpired:
        raise SeqkitError(f"{where}: LiteRT took more than {PROBE_SECONDS} s to load this model and run it "
                          f"once on zeros; seqkit does not open it. A model `seqkit export` wrote loads in "
                          f"seconds: export the run again.") from None
    except OSError:  # no child process possible here: the structure check is all there is
        return
    rc = done.returncode
    if rc in (0, 3):
        _PROBED.add(digest)
        return
    crashed = rc < 0 or rc >= 0xC0000000  # a POSIX signal, or a Windows exception code (NTSTATUS)
    if not crashed or rc == -getattr(signal, "SIGKILL", 9):  # killed from outside (out of memory?): no verdict
        return
    how = (f"signal {signal.Signals(-rc).name}" if rc < 0 and -rc in signal.valid_signals()
           else f"signal {-rc}" if rc < 0 else f"exception code 0x{rc:08X}")
    said = [ln for ln in done.stderr.decode("utf-8", "replace").splitlines() if ln and not ln.startswith("INFO:")]
    raise SeqkitError(f"{where}: LiteRT crashed loading this model ({how}, in the child process seqkit "
                      f"tries every model in first{': ' + said[-1][:300] if said else ''}). The file was "
                      f"damaged, or was not written by `seqkit export`; export the run again.")


def check(data: bytes, where: str = "this model") -> None:
    """:func:`check_structure`, then :func:`probe`; nothing for a model that passed both before in
    this process (a runtime opened again on the same bytes is not checked again).

    Raises:
        SeqkitError: as those.
    """
    digest = hashlib.sha256(data).hexdigest()
    if digest in _PROBED:
        return
    check_structure(data, where)
    probe(data, where, digest=digest)
