#!/usr/bin/python3
# ===- kiln-gradcheck - a whole model's gradients against finite differences -===
# SPDX-License-Identifier: Apache-2.0
#
#   kiln-gradcheck MODEL.onnx [--input NAME=FILE.npy]... [--batch N]
#                  [--samples K] [--tol T] [--h H] [--seed S] [--jobs J]
#                  [--work DIR] [--json]
#
# Converts MODEL.onnx to float64 at the ONNX level (initializers, typed
# values, Constant tensors, Cast targets, ConstantOfShape values, every
# attribute tensor; integer tensors stay integer), appends the loss
# sum_k sum(out_k * R_k) over its floating-point outputs for fixed random
# R_k (no labels needed), and compiles it with kiln-compile --optimizer none
# --emit plan, a plan whose outputs are the loss and every parameter's
# gradient (run by kiln-exec). Each float parameter is then checked against
# central differences of the forward pass: K sampled elements and one random
# direction for the whole tensor. The forward plan is compiled once (kiln-run
# --emit-plan); kiln-exec --param-sets runs up to 64 forward passes with
# moved parameters in one process, J processes at a time.
#
# When a parameter is beyond tolerance, the op at fault is looked for: every
# node downstream of a failing parameter is evaluated alone on its actual
# input values (read from a kiln-run of the float64 model), its VJP checked
# as test/Training/gradcheck.py checks one op, and the worst node is named.
#
# docs/Training.md ("kiln-gradcheck") gives the tolerance, the flags and the
# exit status: 0 every parameter within tolerance, 1 beyond it (the worst op
# named) or any error, reported as one line "kiln-gradcheck: <message>".
# kiln-compile, kiln-run and kiln-exec are found next to this file.
# ===------------------------------------------------------------------------===
import argparse
import json
import math
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time
import warnings
import zlib
from concurrent.futures import ThreadPoolExecutor

TOOL = "kiln-gradcheck"


class Error(Exception):
    """A one-line error: printed as "kiln-gradcheck: <message>", exit 1."""


try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover - depends on the interpreter
    sys.stderr.write("%s: needs numpy and onnx (Debian's /usr/bin/python3): %s\n" % (TOOL, e))
    sys.exit(1)

F64 = TensorProto.DOUBLE
# The floating-point element types converted to float64.
FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16}
# float8 (ONNX 1.14+): quantised formats, refused rather than widened.
FLOAT8_TYPES = {getattr(TensorProto, n) for n in
                ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ")
                if hasattr(TensorProto, n)}
# Ops whose ONNX type constraints have no float64: a float64 model cannot
# hold them.
NO_FLOAT64_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
                  "QLinearConv", "QLinearMatMul"}
# Ops an integer input passes through unchanged on its way to a Gather or a
# loss, for guessing the range of ids to draw.
PASS_THROUGH = {"Cast", "Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten",
                "Transpose", "Expand"}
PREFIX = "kiln_gradcheck"
# The largest random input (2^28 elements, 2 GiB in float64); a larger one
# is given with --input.
MAX_INPUT_ELEMENTS = 1 << 28
CONTROL = "(the loss term alone)"


# ---------------------------------------------------------------- helpers ---

def type_name(t):
    return TensorProto.DataType.Name(t) if t in TensorProto.DataType.values() else str(t)


def np_dtype(t):
    try:
        if hasattr(helper, "tensor_dtype_to_np_dtype"):  # onnx >= 1.13
            return helper.tensor_dtype_to_np_dtype(t)
        return onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t]
    except (KeyError, ValueError):
        raise Error("element type %s has no NumPy form" % type_name(t))


def first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


class Tools:
    """kiln-compile, kiln-run and kiln-exec next to this file; each run is
    one subprocess with one OpenMP thread (runs go in parallel instead, and
    every run sums in the same order)."""

    def __init__(self, break_vjp):
        # The build puts them next to this file; a copy elsewhere finds
        # nothing and says so.
        here = os.path.dirname(os.path.realpath(__file__))
        self.paths = {}
        for name in ("kiln-compile", "kiln-run", "kiln-exec"):
            p = os.path.join(here, name)
            if not os.access(p, os.X_OK):
                raise Error("%s is missing next to %s (build it: cmake --build BUILD "
                            "--target %s)" % (name, here, name))
            self.paths[name] = p
        self.env = dict(os.environ, OMP_NUM_THREADS="1")
        self.break_vjp = break_vjp
        self.runs = 0

    def run(self, name, args, what):
        """Runs tool `name`; its error becomes "<what>: <its first line>"."""
        self.runs += 1
        r = subprocess.run([self.paths[name]] + args, capture_output=True, text=True,
                           env=self.env)
        if r.returncode != 0:
            msg = first_line(r.stderr) or first_line(r.stdout)
            if r.returncode < 0:
                msg = "%s crashed (signal %d)%s" % (name, -r.returncode,
                                                    ": " + msg if msg else "")
            elif msg.startswith(name + ": "):
                msg = msg[len(name) + 2:]
            # The file is one of ours (a work folder's): its name says nothing.
            while args and msg.startswith(args[0] + ":"):
                msg = re.sub(r"^:(\d+:)?\s*", "", msg[len(args[0]):])
            raise Error("%s: %s" % (what, msg or "%s exited with %d" % (name, r.returncode)))
        return r.stdout

    def compile_grad_plan(self, model_path, loss_name, plan_path, what):
        args = [model_path, "-o", plan_path, "--emit", "plan", "--optimizer", "none",
                "--loss", "output", "--loss-output", loss_name]
        if self.break_vjp:
            args += ["--test-break-vjp", self.break_vjp]
        self.run("kiln-compile", args, what)

    def forward(self, model_path, inputs, out_dir, what, emit_plan=None):
        """kiln-run: the outputs by name (and the plan, with emit_plan)."""
        args = [model_path, "--output-dir", out_dir]
        for name, path in inputs.items():
            args += ["--input", "%s=%s" % (name, path)]
        if emit_plan:
            args += ["--emit-plan", emit_plan]
        out = self.run("kiln-run", args, what)
        outputs = {}
        for m in re.finditer(r"^output (\d+) '(.*)': .* -> (.*)$", out, re.M):
            outputs[m.group(2)] = np.load(m.group(3), allow_pickle=False)
        return outputs

    def exec_plan(self, plan, input_files, out_dir, what, param_sets=None):
        """kiln-exec: the outputs in order (with param_sets, each stacked
        over the runs)."""
        args = [plan, "--output-dir", out_dir]
        for f in input_files:
            args += ["--input", f]
        if param_sets:
            args += ["--param-sets", param_sets]
        out = self.run("kiln-exec", args, what)
        n = len(re.findall(r"^output \d+ ", out, re.M))
        return [np.load(os.path.join(out_dir, "output_%d.npy" % k), allow_pickle=False)
                for k in range(n)]


class Plan:
    """A plan file's header (docs/PlanFormat.md): its inputs, outputs and
    parameters."""

    def __init__(self, path):
        with open(path, "rb") as f:
            head = f.read(32)
            if head[:8] != b"KILNPLAN" or len(head) < 32:
                raise Error("%s: not a Kiln plan" % path)
            j = struct.unpack_from("<Q", head, 16)[0]
            self.header = json.loads(f.read(j).decode())
        values = self.header["values"]
        self.input_names = [values[v].get("name", "input_%d" % k)
                            for k, v in enumerate(self.header["inputs"])]
        self.output_names = self.header.get(
            "output_names", ["output_%d" % k for k in range(len(self.header["outputs"]))])
        self.params = {v["name"]: v for v in values if v.get("kind") == "param"}

    def can_set(self, name, shape):
        """Whether kiln-exec --param-sets can give parameter `name` a float64
        value of `shape`."""
        v = self.params.get(name)
        # A name the list's syntax cannot hold goes through a recompile.
        if any(c in name for c in "=\t\r\n"):
            return False
        return (v is not None and v.get("dtype") == "f64" and v.get("blocks", 1) == 1
                and list(v.get("shape", [])) == list(shape))


def move_shapes(move):
    if isinstance(move, tuple):
        return move[0]
    return {n: a.shape for n, a in move.items()}


def materialize(move):
    return move[1]() if isinstance(move, tuple) else move


class Evaluator:
    """Evaluates a forward plan with some parameters moved: kiln-exec
    --param-sets runs many evaluations in one process (each line sets the
    moved parameters for one run), `jobs` processes at a time."""

    # Runs per process at most: the moved parameters of a batch are on disk
    # together.
    BATCH = 64

    def __init__(self, tools, plan_path, input_files, work, jobs, what, fallback=None):
        self.tools, self.plan_path, self.work, self.jobs = tools, plan_path, work, jobs
        self.plan = Plan(plan_path)
        self.what, self.fallback = what, fallback
        missing = [n for n in self.plan.input_names if n not in input_files]
        if missing:
            raise Error("%s: the plan takes input '%s', which the model does not have"
                        % (what, missing[0]))
        self.inputs = [input_files[n] for n in self.plan.input_names]
        self.batches = 0

    def _batch(self, b, repls):
        """One kiln-exec for a list of moves (see run): each run's
        outputs."""
        d = os.path.join(self.work, "sets%d" % b)
        os.makedirs(d, exist_ok=True)
        try:
            lines = []
            for k, repl in enumerate(repls):
                repl = materialize(repl)
                entries = []
                for j, (name, arr) in enumerate(repl.items()):
                    f = os.path.join(d, "%d_%d.npy" % (k, j))
                    np.save(f, np.ascontiguousarray(arr, np.float64))
                    entries.append("%s=%s" % (name, f))
                lines.append("\t".join(entries))
            lst = os.path.join(d, "sets.txt")
            with open(lst, "w") as f:
                f.write("\n".join(lines) + "\n")
            outs = self.tools.exec_plan(self.plan_path, self.inputs, os.path.join(d, "out"),
                                        self.what, param_sets=lst)
            return [[o[k] for o in outs] for k in range(len(repls))]
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def run(self, repls):
        """The outputs of one evaluation per element of `repls`: a move, a
        dict name -> array, or a pair (dict name -> shape, callable returning
        that dict) that makes the arrays only when their batch runs."""
        direct = [k for k, r in enumerate(repls)
                  if all(self.plan.can_set(n, shape) for n, shape in move_shapes(r).items())]
        results = [None] * len(repls)
        for k in sorted(set(range(len(repls))) - set(direct)):
            r = materialize(repls[k])
            if self.fallback is None:
                raise Error("%s: '%s' is not a float64 parameter of the plan"
                            % (self.what, next(iter(r))))
            results[k] = self.fallback(r)
        if direct:
            n = max(min(self.jobs, len(direct)), -(-len(direct) // self.BATCH))
            chunks = [direct[i::n] for i in range(n)]
            first = self.batches
            self.batches += n

            def batch(i):
                return self._batch(first + i, [repls[k] for k in chunks[i]])
            if n == 1:
                done = [batch(0)]
            else:
                with ThreadPoolExecutor(min(self.jobs, n)) as ex:
                    done = list(ex.map(batch, range(n)))
            for chunk, outs in zip(chunks, done):
                for k, o in zip(chunk, outs):
                    results[k] = o
        return results


# ------------------------------------------------------- the ONNX model ---

def load_model(path):
    if not os.path.exists(path):
        raise Error("%s: no such file" % path)
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise Error("%s: not a regular file" % path)
    try:
        m = onnx.load(path, load_external_data=False)
    except Exception as e:
        raise Error("%s: not an ONNX model (%s)" % (path, first_line(str(e)) or type(e).__name__))
    if not m.HasField("graph") or not m.graph.output:
        raise Error("%s: not an ONNX model (no graph with outputs)" % path)
    load_external(m, path)
    return m


def load_external(m, path):
    """Reads external tensor data from files inside the model's folder only."""
    base = os.path.dirname(os.path.realpath(path))
    tensors = []

    def visit(g):
        tensors.extend(g.initializer)
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR:
                    tensors.append(a.t)
                tensors.extend(a.tensors)
                if a.type == onnx.AttributeProto.GRAPH:
                    visit(a.g)
                for sub in a.graphs:
                    visit(sub)
    visit(m.graph)
    for t in tensors:
        if t.data_location != TensorProto.EXTERNAL:
            continue
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        full = os.path.realpath(os.path.join(base, loc))
        if not loc or os.path.isabs(loc) or not full.startswith(base + os.sep):
            raise Error("%s: tensor '%s' keeps its data at '%s', outside the model's folder"
                        % (path, t.name, loc))
        if not os.path.isfile(full):
            raise Error("%s: tensor '%s': external data file '%s' is missing"
                        % (path, t.name, loc))
        try:
            offset, length = int(info.get("offset", 0)), info.get("length")
            with open(full, "rb") as f:
                f.seek(offset)
                t.raw_data = f.read(int(length)) if length is not None else f.read()
        except (OSError, ValueError) as e:
            raise Error("%s: tensor '%s': cannot read external data (%s)" % (path, t.name, e))
        del t.external_data[:]
        t.data_location = TensorProto.DEFAULT


def to_array(t, where):
    try:
        return numpy_helper.to_array(t)
    except Exception as e:
        raise Error("%s: tensor '%s' cannot be read (%s)" % (where, t.name,
                                                            first_line(str(e)) or type(e).__name__))


class Converter:
    """Converts a model to float64 in place, recording what it changed and
    refusing (by name) what it cannot convert."""

    def __init__(self, keep):
        self.counts = {}
        self.refused = []
        # Values an op takes in float32 only (Resize's scales): kept.
        self.keep = keep

    def note(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def tensor(self, t, where):
        if t.data_type in FLOAT8_TYPES:
            self.refused.append("%s: tensor '%s' is %s" % (where, t.name, type_name(t.data_type)))
            return
        if t.data_type not in FLOAT_TYPES:
            return
        a = to_array(t, where).astype(np.float64)
        name = t.name
        t.CopyFrom(numpy_helper.from_array(a, name))
        return True

    def type_proto(self, tp, where):
        kind = tp.WhichOneof("value")
        if kind in ("tensor_type", "sparse_tensor_type"):
            tt = getattr(tp, kind)
            if tt.elem_type in FLOAT8_TYPES:
                self.refused.append("%s is %s" % (where, type_name(tt.elem_type)))
            elif tt.elem_type in FLOAT_TYPES:
                tt.elem_type = F64
                return True
        elif kind == "sequence_type":
            return self.type_proto(tp.sequence_type.elem_type, where)
        elif kind == "optional_type":
            return self.type_proto(tp.optional_type.elem_type, where)
        elif kind == "map_type":
            return self.type_proto(tp.map_type.value_type, where)
        return False

    def graph(self, g):
        for t in g.initializer:
            if t.name not in self.keep and self.tensor(t, "initializer"):
                self.note("initializers")
        for st in g.sparse_initializer:
            if self.tensor(st.values, "sparse initializer"):
                self.note("initializers")
        for what, vis in (("input", g.input), ("output", g.output), ("value_info", g.value_info)):
            for vi in vis:
                if vi.name in self.keep:
                    continue
                if self.type_proto(vi.type, "%s '%s'" % (what, vi.name)):
                    self.note("typed values")
        for n in g.node:
            self.node(n)

    def node(self, n):
        where = "node '%s' (%s)" % (n.name or (n.output[0] if n.output else "?"), n.op_type)
        if n.domain in ("", "ai.onnx") and n.op_type in NO_FLOAT64_OPS:
            self.refused.append("%s has no float64 form in ONNX" % where)
        attrs = {a.name for a in n.attribute}
        # Float32 by default: the default made explicit, in float64.
        if n.op_type == "ConstantOfShape" and "value" not in attrs:
            n.attribute.append(helper.make_attribute(
                "value", numpy_helper.from_array(np.zeros(1, np.float64), "")))
            self.note("ConstantOfShape values")
        if n.op_type in ("RandomNormal", "RandomUniform") and "dtype" not in attrs:
            n.attribute.append(helper.make_attribute("dtype", F64))
            self.note("%s dtype" % n.op_type)
        if n.op_type == "Constant" and any(o in self.keep for o in n.output):
            return
        if n.op_type == "Constant":
            for a in list(n.attribute):
                if a.name in ("value_float", "value_floats"):
                    v = np.array(a.f if a.name == "value_float" else list(a.floats), np.float64)
                    n.attribute.remove(a)
                    n.attribute.append(helper.make_attribute(
                        "value", numpy_helper.from_array(v, "")))
                    self.note("Constant values")
        AT = onnx.AttributeProto
        for a in n.attribute:
            if a.type == AT.TENSOR:
                if self.tensor(a.t, where):
                    self.note("Constant values" if n.op_type == "Constant" else
                              "%s %s" % (n.op_type, a.name))
            elif a.type == AT.TENSORS:
                for t in a.tensors:
                    if self.tensor(t, where):
                        self.note("%s %s" % (n.op_type, a.name))
            elif a.type == AT.SPARSE_TENSOR:
                if self.tensor(a.sparse_tensor.values, where):
                    self.note("%s %s" % (n.op_type, a.name))
            elif a.type == AT.GRAPH:
                self.graph(a.g)
            elif a.type == AT.GRAPHS:
                for sub in a.graphs:
                    self.graph(sub)
            elif a.type == AT.TYPE_PROTO:
                self.type_proto(a.tp, where)
            elif a.type == AT.INT and ((n.op_type == "Cast" and a.name == "to")
                                       or a.name == "dtype"):
                if a.i in FLOAT8_TYPES:
                    self.refused.append("%s: %s=%s" % (where, a.name, type_name(a.i)))
                elif a.i in FLOAT_TYPES:
                    a.i = F64
                    self.note("Cast targets" if n.op_type == "Cast" else "%s dtype" % n.op_type)

    def summary(self):
        return ", ".join("%d %s" % (v, k) for k, v in sorted(self.counts.items()))


# (op type, input index) that ONNX types float32 whatever the data's type.
FLOAT32_INPUTS = {("Resize", 2), ("Upsample", 1)}


def to_float64(model):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep = set()

    def scan(nodes):
        for n in nodes:
            for k, i in enumerate(n.input):
                if (n.op_type, k) in FLOAT32_INPUTS and i:
                    keep.add(i)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    scan(a.g.node)
                for sub in a.graphs:
                    scan(sub.node)
    scan(m.graph.node)
    for f in m.functions:
        scan(f.node)
    c = Converter(keep)
    c.graph(m.graph)
    # Model-local functions (IR 8) hold nodes too.
    for f in m.functions:
        for n in f.node:
            c.node(n)
    if c.refused:
        raise Error("cannot compute in float64: %s%s" % (
            "; ".join(c.refused[:3]), " (and %d more)" % (len(c.refused) - 3)
            if len(c.refused) > 3 else ""))
    return m, c.summary()


def elem_type(vi):
    tp = vi.type
    return tp.tensor_type.elem_type if tp.WhichOneof("value") == "tensor_type" else None


def graph_inputs(g):
    inits = {t.name for t in g.initializer} | {t.values.name for t in g.sparse_initializer}
    return [vi for vi in g.input if vi.name not in inits]


def constant_arrays(g):
    """Initializers and Constant node outputs, by name."""
    out = {t.name: t for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.output:
            for a in n.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    out[n.output[0]] = a.t
    return out


def infer(m):
    """ONNX shape inference, with data propagation (a Reshape's shape made by
    Concat of constants is known); None when it fails. It runs in a forked
    child: libonnx's inference can crash on a malformed model, which must
    not take this process with it."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the inferred model down the pipe, or nothing
        os.close(r)
        try:
            data = b""
            for kw in ({"data_prop": True}, {}):
                try:
                    data = onnx.shape_inference.infer_shapes(m, **kw).SerializeToString()
                    break
                except Exception:
                    pass
            with os.fdopen(w, "wb") as f:
                f.write(data)
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    if not data:
        return None
    im = onnx.ModelProto()
    try:
        im.ParseFromString(data)
    except Exception:
        return None
    return im


def inferred_shapes(m):
    """Static shapes ONNX shape inference finds, by value name (may be none)."""
    im = infer(m)
    if im is None:
        return {}
    shapes = {}
    for vi in list(im.graph.value_info) + list(im.graph.input) + list(im.graph.output):
        if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.HasField("shape"):
            dims = vi.type.tensor_type.shape.dim
            if all(d.HasField("dim_value") for d in dims):
                shapes[vi.name] = [d.dim_value for d in dims]
    return shapes


def inferred_infos(m):
    """The typed and shaped values ONNX shape inference finds, by name."""
    im = infer(m)
    if im is None:
        return {}
    return {vi.name: vi for vi in list(im.graph.value_info) + list(im.graph.output)
            if vi.type.WhichOneof("value") == "tensor_type"
            and vi.type.tensor_type.elem_type and vi.type.tensor_type.HasField("shape")}


def id_range(m, name, shapes):
    """(high, why) for the integer input `name`: ids are drawn from
    [0, high). The bound comes from what the input indexes: a Gather's table
    along its axis (an embedding), a loss's classes, a OneHot's depth."""
    consts = constant_arrays(m.graph)
    users = {}
    for n in m.graph.node:
        for k, i in enumerate(n.input):
            users.setdefault(i, []).append((n, k))
    bounds = []
    seen, todo = set(), [name]
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        for n, k in users.get(v, []):
            if n.op_type in PASS_THROUGH and k == 0:
                todo.extend(n.output)
            elif n.op_type == "Gather" and k == 1:
                axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
                shape = (list(consts[n.input[0]].dims) if n.input[0] in consts
                         else shapes.get(n.input[0]))
                if shape and -len(shape) <= axis < len(shape):
                    bounds.append((shape[axis], "rows of %s" % n.input[0]))
            elif n.op_type in ("SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss") and k == 1:
                shape = shapes.get(n.input[0])
                if shape and len(shape) >= 2:
                    bounds.append((shape[1], "classes of %s" % n.op_type))
            elif n.op_type == "OneHot" and k == 0 and len(n.input) > 1 and n.input[1] in consts:
                depth = to_array(consts[n.input[1]], "OneHot depth").reshape(-1)
                if depth.size:
                    bounds.append((int(depth[0]), "OneHot depth"))
    bounds = [b for b in bounds if b[0] > 0]
    if not bounds:
        return 2, "nothing bounds it: [0, 2)"
    return min(bounds, key=lambda b: b[0])


# ----------------------------------------------------------------- inputs ---

def parse_input_flags(flags, names):
    given = {}
    for spec in flags:
        if "=" not in spec:
            raise Error("--input needs NAME=FILE.npy, got '%s'" % spec)
        name, path = spec.split("=", 1)
        if name not in names:
            raise Error("--input %s=...: the model has no input '%s' (inputs: %s)"
                        % (name, name, ", ".join(names) or "none"))
        if name in given:
            raise Error("--input %s is given twice" % name)
        if not os.path.exists(path):
            raise Error("%s: no such file" % path)
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise Error("%s: not a regular file" % path)
        try:
            a = np.load(path, allow_pickle=False)
        except Exception as e:
            raise Error("%s: not a .npy file (%s)" % (path, first_line(str(e)) or type(e).__name__))
        if not isinstance(a, np.ndarray):
            raise Error("%s: not a .npy file (an archive of several arrays)" % path)
        given[name] = a
    return given


def make_inputs(m, args, rng):
    """The value of every graph input (given or random), and a description of
    each. Sets the model's input shapes to the values' shapes."""
    ins = graph_inputs(m.graph)
    names = [vi.name for vi in ins]
    given = parse_input_flags(args.input or [], names)
    dims = {}
    wants = {}
    for vi in ins:
        et = elem_type(vi)
        if et is None:
            raise Error("input '%s' is not a tensor" % vi.name)
        tt = vi.type.tensor_type
        shape = None
        if tt.HasField("shape"):
            shape = [d.dim_value if d.HasField("dim_value") else
                     (d.dim_param or None) for d in tt.shape.dim]
        wants[vi.name] = (et, shape)
    # Given inputs first: they fix the symbolic dims they carry.
    for name, a in given.items():
        et, shape = wants[name]
        want = "[%s]" % ", ".join(str(d) if d is not None else "?" for d in shape) \
            if shape is not None else "any shape"
        if shape is not None and (a.ndim != len(shape) or any(
                isinstance(d, int) and d != s for d, s in zip(shape, a.shape))):
            raise Error("--input %s: %s has shape [%s], the model expects %s"
                        % (name, args_file(args, name), ", ".join(map(str, a.shape)), want))
        if shape is not None:
            for d, s in zip(shape, a.shape):
                if isinstance(d, str):
                    if dims.setdefault(d, s) != s:
                        raise Error("--input %s: dimension '%s' is %d here and %d in another "
                                    "input" % (name, d, s, dims[d]))
        if et == F64 and a.dtype.kind not in "fiub":
            raise Error("--input %s: %s holds %s, the model expects numbers"
                        % (name, args_file(args, name), a.dtype))
        if et != F64 and et != TensorProto.BOOL and a.dtype.kind not in "iub":
            raise Error("--input %s: %s holds %s, the model expects %s"
                        % (name, args_file(args, name), a.dtype, type_name(et)))
    shapes = None
    values, notes = {}, []
    for vi in ins:
        name = vi.name
        et, shape = wants[name]
        if name in given:
            a = given[name]
            values[name] = np.ascontiguousarray(a.astype(np_dtype(et)))
            notes.append("%s %s from %s" % (name, list(a.shape), args_file(args, name)))
            continue
        if shape is None:
            raise Error("input '%s' has no shape in the model: give it with --input %s=FILE.npy"
                        % (name, name))
        concrete = [d if isinstance(d, int) else dims.get(d, args.batch) for d in shape]
        size = 1
        for d in concrete:
            size *= d
        if size > MAX_INPUT_ELEMENTS:
            raise Error("input '%s' of shape [%s] would hold %d elements, more than the %d a "
                        "random input may: give it with --input %s=FILE.npy"
                        % (name, ", ".join(map(str, concrete)), size, MAX_INPUT_ELEMENTS, name))
        if et == F64:
            values[name] = rng.standard_normal(concrete)
            notes.append("%s %s normal" % (name, concrete))
        elif et == TensorProto.BOOL:
            values[name] = rng.integers(0, 2, concrete).astype(bool)
            notes.append("%s %s random bool" % (name, concrete))
        elif et in (TensorProto.INT64, TensorProto.INT32, TensorProto.INT16, TensorProto.INT8,
                    TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32,
                    TensorProto.UINT64):
            if shapes is None:
                shapes = inferred_shapes(m)
            high, why = id_range(m, name, shapes)
            values[name] = rng.integers(0, high, concrete).astype(np_dtype(et))
            notes.append("%s %s ids in [0, %d) (%s)" % (name, concrete, high, why))
        else:
            raise Error("input '%s' is %s: give it with --input %s=FILE.npy"
                        % (name, type_name(et), name))
    # The model's inputs take the values' shapes: nothing symbolic is left
    # for the compiler to ask about.
    for vi in ins:
        tt = vi.type.tensor_type
        tt.ClearField("shape")
        for s in values[vi.name].shape:
            tt.shape.dim.add().dim_value = s
    return values, notes


def args_file(args, name):
    for spec in args.input or []:
        if spec.startswith(name + "="):
            return spec[len(name) + 1:]
    return "?"


# ------------------------------------------------------------- the loss ---

def unique_names(g):
    names = {vi.name for vi in list(g.input) + list(g.output) + list(g.value_info)}
    names |= {t.name for t in g.initializer}
    for n in g.node:
        names |= set(n.input) | set(n.output)
    return names


def opset(m):
    return next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 17)


def loss_nodes(terms, prefix, out):
    """Nodes for sum_k sum(value_k * R_k) into `out`, with terms a list of
    (value name, R): the terms' partial sums are named prefix/term<k>."""
    nodes, parts = [], []
    for k, (v, r) in enumerate(terms):
        rn, prod, part = "%s/R%d" % (prefix, k), "%s/yr%d" % (prefix, k), "%s/term%d" % (prefix, k)
        nodes.append(helper.make_node("Constant", [], [rn], name=rn,
                                      value=numpy_helper.from_array(r, rn)))
        nodes.append(helper.make_node("Mul", [v, rn], [prod], name=prod))
        nodes.append(helper.make_node("ReduceSum", [prod], [part], name=part, keepdims=0))
        parts.append(part)
    acc = parts[0]
    for k, p in enumerate(parts[1:]):
        nxt = "%s/sum%d" % (prefix, k)
        nodes.append(helper.make_node("Add", [acc, p], [nxt], name=nxt))
        acc = nxt
    nodes.append(helper.make_node("Identity", [acc], [out], name=out))
    return nodes, parts


def scalar_output(name):
    return helper.make_tensor_value_info(name, F64, [])


# -------------------------------------------------- finite differences ---

# The rounding noise of a finite difference: a forward pass that sums the
# terms t_k of its loss is off by about EPS * sum|t_k|, its difference
# quotient by that over h. NOISE_FACTOR of it is the floor under which a
# difference is rounding noise (a gradient that is exactly zero, as a
# convolution bias's in front of a BatchNorm, against a difference of 1e-10).
EPS = 2.0 ** -52
# The steps, as fractions of --h, at which a failed check is tried again.
RETRY_STEPS = (0.1, 0.01)
NOISE_FACTOR = 16


def flat(outputs):
    """A plan's outputs as one vector (Spec.out indexes it)."""
    return np.concatenate([np.asarray(o, np.float64).reshape(-1) for o in outputs])


def rms(a):
    """The root mean square of the finite elements (a masked attention
    score is -inf)."""
    a = a[np.isfinite(a)]
    return float(np.sqrt(np.mean(np.square(a)))) if a.size else 0.0


class Spec:
    """One derivative to check: of output `out` of a forward plan, with
    respect to parameter `param` (value v), along one element (`index`,
    flat) or a direction; `a` is autodiff's value, `scale` the gradient's
    scale (its RMS for an element, its norm for a direction: the spread of
    the directional derivative), `noise` the loss's sum|t_k|."""

    def __init__(self, param, v, a, scale, noise, what, out=0, index=None, direction=None):
        self.param, self.v, self.a, self.scale, self.noise = param, v, a, scale, noise
        self.what, self.out, self.index, self.direction = what, out, index, direction

    def step(self, H):
        if self.index is not None:
            return H * max(1.0, abs(float(self.v.flat[self.index])))
        return H * max(1.0, rms(self.v))

    def moved(self, s):
        if self.index is not None:
            w = self.v.copy()
            w.flat[self.index] += s
            return w
        return self.v + s * self.direction


class Check:
    """A Spec's analytic value a against the central difference f at step h
    (and the one-sided differences, which tell a kink from a wrong
    gradient)."""

    def __init__(self, spec, lp, lm, l0, h, tol):
        self.spec, self.h, self.a = spec, h, spec.a
        self.f = (lp - lm) / (2 * h)
        fwd, bwd = (lp - l0) / h, (l0 - lm) / h
        self.floor = NOISE_FACTOR * EPS * spec.noise / h
        self.abs = abs(self.a - self.f)
        # rel <= tol is the test: below the noise floor, or within tol of
        # the larger of |a|, |f| and the gradient's scale.
        self.rel = self.abs / max(abs(self.a), abs(self.f), spec.scale, self.floor / tol, 1e-300)
        self.ok, self.kink, self.retried = self.rel <= tol, False, False
        if not self.ok:
            # A kink (ReLU, max, a tie) inside [-h, h]: the difference on one
            # side is the analytic derivative, much closer than the central
            # one. A wrong gradient matches neither side.
            s = max(abs(self.a), abs(fwd), abs(bwd), spec.scale)
            one_sided = min(abs(self.a - fwd), abs(self.a - bwd))
            if one_sided <= max(1e-3 * s, 2 * self.floor) and one_sided <= 0.1 * self.abs:
                self.ok = self.kink = True

    def row(self):
        return {"at": self.spec.what, "autodiff": self.a, "finite_difference": self.f,
                "h": self.h, "rel_err": self.rel, "abs_err": self.abs}


def summarize(checks):
    """max errors over the checks that are not kinks, and the worst one."""
    counted = [c for c in checks if not c.kink]
    worst = max(counted, key=lambda c: c.rel) if counted else None
    return {"max_abs_err": max((c.abs for c in counted), default=0.0),
            "max_rel_err": max((c.rel for c in counted), default=0.0),
            "kinks": len(checks) - len(counted),
            "retried": sum(c.retried for c in checks),
            "pass": all(c.ok for c in checks),
            "worst": worst.row() if worst else None}


# ------------------------------------------------------------ main check ---

class GradCheck:
    def __init__(self, args):
        self.args = args
        self.tools = Tools(args.test_break_vjp)
        self.rng = np.random.default_rng(args.seed)
        self.notes = []

    def run(self):
        args = self.args
        t0 = time.time()
        model = load_model(args.model)
        m64, converted = to_float64(model)
        self.m64 = m64
        if not any(t.data_type == F64 for t in m64.graph.initializer):
            raise Error("%s: the model has no floating-point parameter (initializer) to check"
                        % args.model)
        self.inputs, input_notes = make_inputs(m64, args, self.rng)
        self.input_files = {}
        for k, (name, v) in enumerate(self.inputs.items()):
            p = os.path.join(self.work, "input%d.npy" % k)
            np.save(p, v)
            self.input_files[name] = p
        g = m64.graph
        self.outputs = self.forward_values(m64, [o.name for o in g.output], "model")
        float_outs = [o.name for o in g.output if o.name in self.outputs
                      and self.outputs[o.name].dtype == np.float64]
        if not float_outs:
            raise Error("%s: the model has no floating-point output to differentiate"
                        % args.model)
        self.R = {}
        for o in float_outs:
            r = np.random.default_rng([args.seed, zlib.crc32(o.encode())])
            self.R[o] = r.standard_normal(self.outputs[o].shape)
        self.float_outs = float_outs
        self.noise = sum(float(np.sum(np.abs(self.outputs[o] * self.R[o]))) for o in float_outs)
        if not math.isfinite(self.noise):
            bad = next(o for o in float_outs if not np.all(np.isfinite(self.outputs[o])))
            raise Error("output '%s' is not finite on these inputs: no derivative to check"
                        % bad)
        self.header = {
            "model": args.model,
            "converted": converted or "nothing (already float64)",
            "inputs": input_notes,
            "loss": " + ".join("sum(%s * R)" % o for o in float_outs),
            "noise_floor": NOISE_FACTOR * EPS * self.noise / args.h,
        }

        dropout_off = False
        while True:
            self.loss_m, loss_name = self.loss_model(m64)
            grads, gloss = self.gradients(self.loss_m, loss_name)
            self.evaluator = self.forward_plan(self.loss_m, "fwd", "the float64 model",
                                               fallback=self.recompiled)
            base = self.evaluator.run([{}])[0]
            l0 = float(base[0])
            if abs(l0 - gloss) <= 1e-9 * max(1.0, abs(l0)):
                break
            if dropout_off or not self.disable_dropout(m64):
                raise Error("the gradient plan's loss %.17g and the forward pass's %.17g "
                            "differ: the model is not deterministic" % (gloss, l0))
            dropout_off = True
            self.notes.append("dropout turned off (ratio 0): the gradient plan and the "
                              "forward passes drew different masks (loss %.10g vs %.10g)"
                              % (gloss, l0))
        if not dropout_off and any(n.op_type == "Dropout" for n in g.node):
            self.notes.append("dropout stays on: the gradient plan and the forward passes "
                              "draw the same masks (same loss %.10g)" % l0)
        results = self.check_params(grads, base)
        failing = [r for r in results if not r["pass"]]
        report = {"model": args.model, "header": self.header, "notes": self.notes,
                  "tolerance": args.tol, "h": args.h, "samples": args.samples,
                  "loss": l0, "parameters": results, "pass": not failing}
        if failing:
            report["localization"] = self.localize([r["name"] for r in failing])
        report["seconds"] = round(time.time() - t0, 2)
        report["runs"] = self.tools.runs
        return report

    # -- plumbing ------------------------------------------------------

    def path(self, name):
        return os.path.join(self.work, name)

    def forward_values(self, m, names, what):
        """The values `names` (outputs or intermediates) of the float64
        model on the inputs, from one kiln-run."""
        mm = onnx.ModelProto()
        mm.CopyFrom(m)
        have = {o.name for o in mm.graph.output}
        extra = [n for n in names if n not in have]
        if extra:
            # An output needs a type and a shape: ONNX shape inference's.
            infos = inferred_infos(mm)
            for n in extra:
                if n in infos:
                    mm.graph.output.append(infos[n])
        p = self.path("%s.onnx" % what)
        onnx.save(mm, p)
        return self.tools.forward(p, self.model_inputs(mm), self.path(what + ".out"),
                                  "running the float64 %s" % what)

    def loss_model(self, m64):
        g = m64.graph
        taken = unique_names(g)
        prefix = PREFIX
        while any(n.startswith(prefix) for n in taken):
            prefix += "_"
        loss_name = prefix + "/loss"
        nodes, _ = loss_nodes([(o, self.R[o]) for o in self.float_outs], prefix, loss_name)
        lm = onnx.ModelProto()
        lm.CopyFrom(m64)
        lm.graph.node.extend(nodes)
        del lm.graph.output[:]
        lm.graph.output.append(scalar_output(loss_name))
        return lm, loss_name

    def model_inputs(self, m):
        """The input files of the graph inputs `m` has."""
        names = {vi.name for vi in graph_inputs(m.graph)}
        return {n: f for n, f in self.input_files.items() if n in names}

    def gradients(self, lm, loss_name, tag="grad", what="compiling the float64 model"):
        files = self.model_inputs(lm)
        p = self.path(tag + ".onnx")
        onnx.save(lm, p)
        plan_path = self.path(tag + ".plan")
        self.tools.compile_grad_plan(p, loss_name, plan_path, what)
        plan = Plan(plan_path)
        missing = [n for n in plan.input_names if n not in files]
        if missing:
            raise Error("%s: the gradient plan takes input '%s', which the model does not have"
                        % (what, missing[0]))
        outs = self.tools.exec_plan(plan_path, [files[n] for n in plan.input_names],
                                    self.path(tag + ".out"), "running the gradient plan")
        grads = {n[:-5]: o for n, o in zip(plan.output_names, outs) if n.endswith("/grad")}
        return grads, float(outs[0])

    def forward_plan(self, lm, tag, what, fallback=None):
        files = self.model_inputs(lm)
        p = self.path(tag + ".onnx")
        onnx.save(lm, p)
        plan_path = self.path(tag + ".plan")
        self.tools.forward(p, files, self.path(tag + ".out"),
                           "compiling the forward pass of " + what, emit_plan=plan_path)
        return Evaluator(self.tools, plan_path, files, self.work, self.args.jobs,
                         "running the forward pass of " + what, fallback)

    def recompiled(self, repl):
        """The loss with the parameters in `repl` moved, by compiling the
        moved model: for a parameter the forward plan does not hold as one
        (not expected; kept correct all the same)."""
        mm = onnx.ModelProto()
        mm.CopyFrom(self.loss_m)
        for t in mm.graph.initializer:
            if t.name in repl:
                t.CopyFrom(numpy_helper.from_array(repl[t.name], t.name))
        p = self.path("moved.onnx")
        onnx.save(mm, p)
        outs = self.tools.forward(p, self.model_inputs(mm), self.path("moved.out"),
                                  "running the moved float64 model")
        return [outs[o.name] for o in mm.graph.output]

    def disable_dropout(self, m):
        """Dropout becomes the identity (its input alone: training_mode
        false); False when the model has none to turn off."""
        changed = False
        for n in m.graph.node:
            if n.op_type == "Dropout" and len(n.input) > 1:
                del n.input[1:]
                changed = True
        return changed

    def run_specs(self, ev, specs, base):
        """Checks each Spec. A parameter with at most half of its checks
        failing has those checked again at h/10, then h/100, and they pass
        if they pass there: kinks the larger step crossed (a random
        direction through a deep ReLU network crosses some; fewer as h
        shrinks), while a wrong gradient is wrong at every step and in most
        of a parameter's checks."""
        checks = self.eval_specs(ev, specs, base, self.args.h)
        total, failed = {}, {}
        for sp, c in zip(specs, checks):
            total[sp.param] = total.get(sp.param, 0) + 1
            failed[sp.param] = failed.get(sp.param, 0) + (not c.ok)
        bad = [k for k, (sp, c) in enumerate(zip(specs, checks))
               if not c.ok and 2 * failed[sp.param] <= total[sp.param]]
        for shrink in RETRY_STEPS:
            if not bad:
                break
            again = self.eval_specs(ev, [specs[k] for k in bad], base, self.args.h * shrink)
            for k, c in zip(bad, again):
                if c.ok:
                    c.retried = True
                    checks[k] = c
            bad = [k for k in bad if not checks[k].ok]
        return checks

    def eval_specs(self, ev, specs, base, H):
        """Two forward passes per round of specs: a round moves at most one
        parameter per output (the ops checked alone are independent, so one
        pass moves one input of every op)."""
        rounds = []
        for k, sp in enumerate(specs):
            for r in rounds:
                if sp.out not in r and all(specs[j].param != sp.param for j in r.values()):
                    r[sp.out] = k
                    break
            else:
                rounds.append({sp.out: k})
        jobs = []
        for r in rounds:
            shapes = {specs[k].param: specs[k].v.shape for k in r.values()}
            for sign in (1, -1):
                jobs.append((shapes, lambda r=r, sign=sign: {
                    specs[k].param: specs[k].moved(sign * specs[k].step(H)) for k in r.values()}))
        outs = [flat(o) for o in ev.run(jobs)]
        base = flat(base)
        checks = [None] * len(specs)
        for j, r in enumerate(rounds):
            for k in r.values():
                sp = specs[k]
                checks[k] = Check(sp, float(outs[2 * j][sp.out]), float(outs[2 * j + 1][sp.out]),
                                  float(base[sp.out]), sp.step(H), self.args.tol)
        return checks

    def sample(self, v_flat, g_flat, k):
        """Up to k indices of finite elements: half among those with a
        non-zero gradient, the rest from all (a gradient that should not be
        zero)."""
        finite = np.flatnonzero(np.isfinite(v_flat))
        if finite.size <= k:
            return [int(i) for i in finite]
        nz = np.intersect1d(finite, np.flatnonzero(g_flat))
        take = min(len(nz), (k + 1) // 2)
        chosen = [int(i) for i in self.rng.choice(nz, take, replace=False)] if take else []
        rest = np.setdiff1d(finite, chosen)
        chosen += [int(i) for i in self.rng.choice(rest, k - take, replace=False)]
        return sorted(chosen)

    def element_specs(self, name, v, g, k, noise, out=0):
        gf = g.reshape(-1)
        G = rms(gf)
        return [Spec(name, v, float(gf[i]), G, noise,
                     "element [%s]" % ", ".join(map(str, np.unravel_index(i, v.shape))),
                     out=out, index=i) for i in self.sample(v.reshape(-1), gf, k)]

    def direction_spec(self, name, v, g, noise, out=0):
        """A random normal direction; zero on non-finite elements (-inf stays
        -inf)."""
        d = np.random.default_rng([self.args.seed, zlib.crc32(name.encode())]) \
            .standard_normal(v.shape)
        d[~np.isfinite(v)] = 0.0
        g = np.where(d != 0, g, 0.0)
        return Spec(name, v, float(np.sum(g * d)), float(np.linalg.norm(g)), noise,
                    "a random direction", out=out, direction=d)

    # -- the parameters ------------------------------------------------

    def check_params(self, grads, base):
        params = [(t.name, to_array(t, "initializer").astype(np.float64))
                  for t in self.m64.graph.initializer if t.data_type == F64]
        specs, owner = [], []
        for name, v in params:
            g = grads.get(name)
            g = np.zeros_like(v) if g is None else g.reshape(v.shape)
            mine = self.element_specs(name, v, g, self.args.samples, self.noise)
            mine.append(self.direction_spec(name, v, g, self.noise))
            specs += mine
            owner += [name] * len(mine)
        checks = self.run_specs(self.evaluator, specs, base)
        results = []
        for name, v in params:
            cs = [c for c, o in zip(checks, owner) if o == name]
            r = {"name": name, "shape": list(v.shape), "elements": int(v.size),
                 "checked": len(cs) - 1, "gradient": name in grads}
            r.update(summarize(cs))
            results.append(r)
        return results

    # -- localization --------------------------------------------------

    def localize(self, failing):
        """Checks, alone on their actual inputs, the nodes downstream of a
        failing parameter that reach an output; returns each one's error and
        the worst."""
        g = self.m64.graph
        nodes = list(g.node)
        # Values the outputs depend on.
        useful = set(self.float_outs)
        for n in reversed(nodes):
            if any(o in useful for o in n.output):
                useful.update(i for i in n.input if i)
        # Values depending on a failing parameter, and on any float source.
        down = set(failing)
        floats = {t.name for t in g.initializer if t.data_type == F64}
        floats |= {vi.name for vi in graph_inputs(g) if elem_type(vi) == F64}
        for n in nodes:
            if any(i in down for i in n.input):
                down.update(n.output)
            if any(i in floats for i in n.input):
                floats.update(o for o in n.output if o)
        cands, skipped = [], []
        for k, n in enumerate(nodes):
            if not any(i in down for i in n.input) or not any(o in useful for o in n.output):
                continue
            if n.op_type == "Constant":
                continue
            if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                   for a in n.attribute):
                skipped.append((n, "holds a subgraph"))
                continue
            cands.append(k)
        need = set()
        for k in cands:
            need.update(i for i in nodes[k].input if i)
            need.update(o for o in nodes[k].output if o in useful)
        known = dict(self.inputs)
        for t in g.initializer:
            known[t.name] = to_array(t, "initializer")
        values = self.forward_values(self.m64, sorted(v for v in need if v not in known),
                                     "intermediates")
        values.update(known)
        units = []
        for k in cands:
            n = nodes[k]
            if any(i and i not in values for i in n.input):
                skipped.append((n, "an input's value could not be read back"))
                continue
            live = [i for i in dict.fromkeys(n.input)
                    if i and i in floats and values[i].dtype == np.float64]
            outs = [o for o in n.output if o in useful and o in values
                    and values[o].dtype == np.float64]
            if not live or not outs:
                continue
            units.append((k, n, live, outs))
        control = PREFIX + "/control"
        values[control] = np.random.default_rng([self.args.seed, 2]).standard_normal((4, 5))
        results = self.check_units(units + [(-1, None, [control], None)], values, skipped)
        controls = [r for r in results if r["index"] < 0]
        results = [r for r in results if r["index"] >= 0]
        failed = sorted((r for r in results if not r["pass"]), key=lambda r: -r["max_rel_err"])
        return {"failing_parameters": failing, "checked": len(results),
                "control_pass": all(r["pass"] for r in controls) if controls else None,
                "nodes": results, "worst": failed[0] if failed else None,
                "skipped": [{"name": n.name, "op_type": n.op_type, "why": why}
                            for n, why in skipped]}

    def unit_model(self, units, values):
        """One model holding each unit (a node alone, its float inputs as
        parameters, the rest constants) and each unit's loss term
        sum(out * R); returns (gradient model, forward model whose outputs
        are the terms, the gradient model's loss, each unit's parameters
        as (name, original input) pairs, each unit's sum|out * R|)."""
        m = onnx.ModelProto()
        m.CopyFrom(self.m64)
        g = m.graph
        del g.node[:], g.initializer[:], g.input[:], g.output[:], g.value_info[:]
        del g.sparse_initializer[:]
        terms, params, noise = [], [], []
        for u, (k, n, live, outs) in enumerate(units):
            pre = "%s/%d" % (PREFIX, u)
            ren, ps = {"": ""}, []
            if n is None:
                # The control: the loss term on a parameter, no op between.
                # It fails when the VJPs of the term's own ops (Mul,
                # ReduceSum) are wrong, which would fail every op alone.
                pn = pre + "/in0"
                g.initializer.append(numpy_helper.from_array(values[live[0]], pn))
                ps.append((pn, live[0]))
                onames = {live[0]: pn}
                outs = live
            for j, i in enumerate(dict.fromkeys(x for x in (n.input if n else []) if x)):
                if i in live:
                    pn = "%s/in%d" % (pre, j)
                    g.initializer.append(numpy_helper.from_array(values[i], pn))
                    ps.append((pn, i))
                else:
                    pn = "%s/c%d" % (pre, j)
                    g.node.append(helper.make_node(
                        "Constant", [], [pn], name=pn,
                        value=numpy_helper.from_array(np.asarray(values[i]), pn)))
                ren[i] = pn
            if n is not None:
                nn = onnx.NodeProto()
                nn.CopyFrom(n)
                del nn.input[:], nn.output[:]
                nn.input.extend(ren[i] for i in n.input)
                onames = {o: ("%s/out%d" % (pre, j) if o else "") for j, o in enumerate(n.output)}
                nn.output.extend(onames[o] for o in n.output)
                g.node.append(nn)
            rs = []
            for j, o in enumerate(outs):
                r = np.random.default_rng([self.args.seed, u, j]).standard_normal(values[o].shape)
                finite = np.isfinite(values[o])
                name = onames[o]
                if not finite.all():
                    # -inf where a score is masked: the term sums the finite
                    # elements (those stay finite under small moves).
                    mk, zero, name = pre + "/finite%d" % j, pre + "/zero%d" % j, pre + "/kept%d" % j
                    g.node.append(helper.make_node("Constant", [], [mk], name=mk,
                                                   value=numpy_helper.from_array(finite, mk)))
                    g.node.append(helper.make_node(
                        "Constant", [], [zero], name=zero,
                        value=numpy_helper.from_array(np.array(0.0), zero)))
                    g.node.append(helper.make_node("Where", [mk, onames[o], zero], [name],
                                                   name=name))
                    r = np.where(finite, r, 0.0)
                rs.append((name, r))
            nodes, _ = loss_nodes(rs, pre + "/loss", pre + "/term")
            g.node.extend(nodes)
            terms.append(pre + "/term")
            params.append(ps)
            noise.append(sum(float(np.sum(np.abs(np.where(np.isfinite(values[o]), values[o], 0)
                                                 * r))) for o, (_, r) in zip(outs, rs)))
        # The forward model returns the terms as one vector: one output
        # file per run instead of one per op.
        fwd = onnx.ModelProto()
        fwd.CopyFrom(m)
        one = PREFIX + "/one"
        fwd.graph.node.append(helper.make_node(
            "Constant", [], [one], name=one,
            value=numpy_helper.from_array(np.array([1], np.int64), one)))
        for t in terms:
            fwd.graph.node.append(helper.make_node("Reshape", [t, one], [t + "1"],
                                                   name=t + "1"))
        vec = PREFIX + "/terms"
        fwd.graph.node.append(helper.make_node("Concat", [t + "1" for t in terms], [vec],
                                               name=vec, axis=0))
        fwd.graph.output.append(helper.make_tensor_value_info(vec, F64, [len(terms)]))
        total = PREFIX + "/total"
        acc = terms[0]
        for j, t in enumerate(terms[1:]):
            nxt = "%s/acc%d" % (PREFIX, j)
            g.node.append(helper.make_node("Add", [acc, t], [nxt], name=nxt))
            acc = nxt
        g.node.append(helper.make_node("Identity", [acc], [total], name=total))
        g.output.append(scalar_output(total))
        return m, fwd, total, params, noise

    def check_units(self, units, values, skipped):
        """Each unit's VJP; units compiled together, or one by one when
        together they do not compile."""
        if not units:
            return []
        try:
            return self.check_unit_group(units, values)
        except Error as e:
            if len(units) == 1:
                if units[0][1] is None:
                    raise
                skipped.append((units[0][1], "does not compile alone: %s" % e))
                return []
        results = []
        for u in units:
            results += self.check_units([u], values, skipped)
        return results

    def check_unit_group(self, units, values):
        """Each unit input in one random direction; where that fails, in K
        elements too: an input fails when both do. (Alone, an op sees its
        actual inputs, ties included: a max pool of ReLU outputs has windows
        of exact zeros, which any direction crosses, while one element at a
        time crosses one, as a kink.)"""
        gm, fm, total, params, noise = self.unit_model(units, values)
        grads, _ = self.gradients(gm, total, "units_grad", "compiling ops alone")
        ev = self.forward_plan(fm, "units_fwd", "ops alone")
        base = ev.run([{}])[0]
        arrays, specs = {}, []
        for u, ps in enumerate(params):
            for pn, orig in ps:
                v = np.asarray(values[orig], np.float64)
                gr = grads.get(pn)
                arrays[pn] = (v, np.zeros_like(v) if gr is None else gr.reshape(v.shape))
                specs.append(self.direction_spec(pn, v, arrays[pn][1], noise[u], out=u))
        checks = self.run_specs(ev, specs, base)
        fails = [sp for sp, c in zip(specs, checks) if not c.ok]
        per_elements = {}
        if fails:
            el = []
            for sp in fails:
                v, gr = arrays[sp.param]
                el += self.element_specs(sp.param, v, gr, self.args.samples, sp.noise, out=sp.out)
            for sp, c in zip(el, self.run_specs(ev, el, base)):
                per_elements.setdefault(sp.param, []).append(c)
        results = []
        for u, (k, n, live, outs) in enumerate(units):
            mine = [(sp, c) for sp, c in zip(specs, checks) if sp.out == u]
            cs, notes = [], []
            for sp, c in mine:
                cs.append(c)
                els = per_elements.get(sp.param)
                if els is not None:
                    cs.extend(els)
                    if all(e.ok for e in els):
                        c.ok = c.kink = True  # a tie the direction crossed
                        notes.append("the direction on %s crossed a tie; its elements pass"
                                     % dict(params[u])[sp.param])
            if n is None:
                r = {"name": CONTROL, "op_type": "Mul, ReduceSum", "index": -1}
            else:
                r = {"name": n.name or n.output[0], "op_type": n.op_type, "index": k}
            r.update(summarize(cs))
            worst = max((c for c in cs if not c.kink), key=lambda c: c.rel, default=None)
            if worst is not None and n is not None:
                orig = dict(params[u])[worst.spec.param]
                r["worst_input"] = "%d ('%s')" % (list(n.input).index(orig), orig)
            r["notes"] = notes
            results.append(r)
        return results


# ---------------------------------------------------------------- report ---

def fmt(x):
    return "%.1e" % x


def print_report(r, out):
    w = out.write
    h = r["header"]
    w("kiln-gradcheck: %s in float64 (converted: %s)\n" % (h["model"], h["converted"]))
    w("  inputs: %s\n" % ("; ".join(h["inputs"]) or "none"))
    w("  loss: %s, R fixed random\n" % h["loss"])
    for n in r["notes"]:
        w("  note: %s\n" % n)
    w("  pass: |autodiff - fd| <= %g * max(|autodiff|, |fd|, gradient scale), or below the "
      "rounding noise %s; h = %g * max(1, |p|)\n"
      % (r["tolerance"], fmt(h["noise_floor"]), r["h"]))
    params = r["parameters"]
    width = max([len("parameter")] + [len(p["name"]) for p in params])
    w("%-*s  %10s  %8s  %11s  %11s  %s\n" % (width, "parameter", "elements", "checked",
                                            "max abs err", "max rel err", "result"))
    for p in params:
        extra = []
        if not p["gradient"]:
            extra.append("no gradient: checked against 0")
        if p["kinks"]:
            extra.append("%d at a kink" % p["kinks"])
        if p["retried"]:
            extra.append("%d passed at a smaller h" % p["retried"])
        w("%-*s  %10d  %8s  %11s  %11s  %s%s\n" % (
            width, p["name"], p["elements"], "%d+dir" % p["checked"], fmt(p["max_abs_err"]),
            fmt(p["max_rel_err"]), "PASS" if p["pass"] else "FAIL",
            " (%s)" % ", ".join(extra) if extra else ""))
    bad = [p for p in params if not p["pass"]]
    if not bad:
        w("PASS: all %d parameters within tolerance (%.1f s, %d tool runs)\n"
          % (len(params), r["seconds"], r["runs"]))
        return
    for p in bad:
        wst = p["worst"]
        if wst:
            w("  %s along %s: autodiff %.10g, finite difference %.10g\n"
              % (p["name"], wst["at"], wst["autodiff"], wst["finite_difference"]))
    loc = r["localization"]
    w("FAIL: %d of %d parameters beyond tolerance; %d ops downstream of them checked alone\n"
      % (len(bad), len(params), loc["checked"]))
    failed = [n for n in loc["nodes"] if not n["pass"]]
    if failed:
        wn = max([len("op")] + [len(n["name"]) for n in failed[:10]])
        w("  %-*s  %-20s  %11s  %s\n" % (wn, "op", "type", "max rel err", "result"))
        for n in failed[:10]:
            w("  %-*s  %-20s  %11s  FAIL\n" % (wn, n["name"], n["op_type"],
                                               fmt(n["max_rel_err"])))
        if len(failed) > 10:
            w("  (and %d more)\n" % (len(failed) - 10))
    for s in loc["skipped"]:
        w("  not checked alone: node '%s' (%s): %s\n" % (s["name"], s["op_type"], s["why"]))
    wst = loc["worst"]
    if loc["control_pass"] is False:
        w("worst op: unknown: the check's own loss term sum(out * R) fails with no op in it, "
          "so the VJP of Mul or ReduceSum is wrong and every op alone fails with it\n")
    elif wst:
        e = wst["worst"]
        w("worst op: node '%s' (%s), rel error %s on input %s along %s: autodiff %.10g, "
          "finite difference %.10g\n" % (wst["name"], wst["op_type"], fmt(wst["max_rel_err"]),
                                         wst["worst_input"], e["at"], e["autodiff"],
                                         e["finite_difference"]))
    elif loc["checked"]:
        w("worst op: none: each of the %d ops passes alone, so the wrong gradient comes from "
          "how the ops compose (a rewrite or fusion across ops)\n" % loc["checked"])
    else:
        w("worst op: unknown: no op could be checked alone\n")
    w("(%.1f s, %d tool runs)\n" % (r["seconds"], r["runs"]))


# ------------------------------------------------------------------ main ---

class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Error(message + " (see --help)")


def positive_int(lo, hi):
    def parse(s):
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError("needs an integer in [%d, %d], got '%s'" % (lo, hi, s))
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError("needs an integer in [%d, %d], got '%s'" % (lo, hi, s))
        return v
    return parse


def open_float(lo, hi):
    def parse(s):
        try:
            v = float(s)
        except ValueError:
            v = float("nan")
        if not lo < v < hi:
            raise argparse.ArgumentTypeError("needs a number in (%g, %g), got '%s'" % (lo, hi, s))
        return v
    return parse


def parse_args(argv):
    p = Parser(prog=TOOL, description="Check a model's autodiff gradients against central "
               "finite differences, in float64 (docs/Training.md, kiln-gradcheck).")
    p.add_argument("model", metavar="MODEL.onnx")
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="a graph input's value (default: random; normal for float inputs, "
                   "valid ids for integer ones)")
    p.add_argument("--batch", type=positive_int(1, 1 << 16), default=2, metavar="N",
                   help="the size of the inputs' symbolic dimensions (default 2)")
    p.add_argument("--samples", type=positive_int(1, 1 << 20), default=8, metavar="K",
                   help="elements checked per parameter, besides one random direction "
                   "(default 8)")
    p.add_argument("--tol", type=open_float(0, 1), default=1e-5, metavar="T",
                   help="relative tolerance (default 1e-5)")
    p.add_argument("--h", type=open_float(0, 1), default=1e-6, metavar="H",
                   help="finite-difference step, times max(1, |element|) (default 1e-6)")
    p.add_argument("--seed", type=positive_int(0, (1 << 31) - 1), default=0, metavar="S",
                   help="seed of the inputs, R, the samples and the directions (default 0)")
    p.add_argument("--jobs", type=positive_int(1, 256), default=min(8, os.cpu_count() or 1),
                   metavar="J", help="forward passes run at a time (default: the CPUs, "
                   "at most 8)")
    p.add_argument("--work", metavar="DIR",
                   help="keep the models, plans and inputs in DIR (default: a temporary "
                   "folder, removed)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    # Testing aid: kiln-compile --test-break-vjp OP (a deliberately wrong VJP).
    p.add_argument("--test-break-vjp", metavar="OP", default="", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv):
    # protobuf and numpy warn on what is reported as one line instead.
    warnings.filterwarnings("ignore")
    try:
        args = parse_args(argv)
        check = GradCheck(args)
        if args.work:
            if any(c in args.work for c in "\t\r\n"):
                raise Error("--work: a folder name with a tab or a line break is not "
                            "supported (kiln-exec's --param-sets lists hold its paths)")
            os.makedirs(args.work, exist_ok=True)
            check.work = args.work
            report = check.run()
        else:
            with tempfile.TemporaryDirectory(prefix="kiln-gradcheck.") as d:
                check.work = d
                report = check.run()
    except Error as e:
        sys.stderr.write("%s: %s\n" % (TOOL, e))
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted\n" % TOOL)
        return 1
    except Exception as e:  # a bug here, or a model no check above foresaw
        sys.stderr.write("%s: internal error: %s: %s\n" % (TOOL, type(e).__name__,
                                                          first_line(str(e))))
        return 1
    if args.json:
        json.dump(report, sys.stdout, indent=1, default=float)
        sys.stdout.write("\n")
    else:
        print_report(report, sys.stdout)
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
