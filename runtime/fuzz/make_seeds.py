#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the fuzzers' seed corpora under runtime/fuzz/corpus/ (committed;
each file is at most a few KiB). Rerun after changing a format:
    /usr/bin/python3 runtime/fuzz/make_seeds.py [--kiln-compile BIN]
plan/  small plans (docs/PlanFormat.md) of real CPU kernels, each loads and runs;
       with --kiln-compile, also training-step plans that kiln-compile
       --emit plan writes for small ONNX models (compiled_*.plan: MLP, CNN
       with batch norm and pooling, layer norm, transposed convolution; SGD,
       momentum, Adam, AdamW and no optimizer)
npy/   .npy files written by numpy (dtypes, format 1.0/2.0, Fortran order,
       0-d, empty), TensorProto .pb files and safetensors files
manifest/  not written here: kiln-manifest-seeds (ManifestSeeds.cpp, built
       with the fuzzers) writes kiln-train checkpoints' manifest.json files
       through writeCheckpointManifest, with variants (real0-2.json: a
       linear model with momentum, and test/Training/resume.test's CNN (momentum)
       and GPT (Adam) checkpoints)
"""

import json
import os
import shutil
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
TESTDATA = os.path.join(HERE, "..", "test", "data")


def container(header, blob=b""):
    j = json.dumps(header, separators=(",", ":")).encode()
    out = b"KILNPLAN" + struct.pack("<IIQQ", 1, 0, len(j), len(blob)) + j
    if blob:
        out += b"\0" * (-len(out) % 64) + blob
    return out


class Plan:
    SIZES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i64": 8, "i32": 4,
             "i16": 2, "i8": 1, "u8": 1, "u16": 2, "u32": 4, "u64": 8,
             "i1": 1}

    def __init__(self):
        self.values, self.inputs, self.outputs, self.steps = [], [], [], []
        self.arena = 0
        self.blob = b""

    def _add(self, v):
        self.values.append(v)
        return len(self.values) - 1

    @staticmethod
    def _bytes(dtype, shape):
        n = Plan.SIZES[dtype]
        for d in shape:
            n *= d
        return n

    def input(self, dtype, shape, name=None):
        v = self._add({"dtype": dtype, "shape": shape, "kind": "input",
                       "index": len(self.inputs),
                       "name": name or "in%d" % len(self.inputs)})
        self.inputs.append(v)
        return v

    def data(self, kind, dtype, shape, array, name=None, role=None):
        raw = np.asarray(array).astype(
            {"f32": "<f4", "i64": "<i8", "i32": "<i4", "i1": "u1"}[dtype]
        ).tobytes()
        assert len(raw) == self._bytes(dtype, shape)
        self.blob += b"\0" * (-len(self.blob) % 64)
        v = {"dtype": dtype, "shape": shape, "kind": kind,
             "data_offset": len(self.blob), "data_bytes": len(raw)}
        if name:
            v["name"] = name
        if role:
            v["role"] = role
        self.blob += raw
        return self._add(v)

    def arena_value(self, dtype, shape):
        self.arena += -self.arena % 64
        v = self._add({"dtype": dtype, "shape": shape, "kind": "arena",
                       "offset": self.arena})
        self.arena += self._bytes(dtype, shape)
        return v

    def view(self, src, dtype, shape):
        return self._add({"dtype": dtype, "shape": shape, "kind": "view",
                          "source": src})

    def step(self, kernel, ins, out_specs, attrs=None):
        outs = [self.arena_value(d, s) for d, s in out_specs]
        st = {"kernel": kernel, "inputs": ins, "outputs": outs,
              "loc": "/%s_%d" % (kernel, len(self.steps))}
        if attrs is not None:
            st["attrs"] = attrs
        self.steps.append(st)
        return outs[0] if len(outs) == 1 else outs

    def bytes(self, outputs):
        header = {"format": "kiln-plan", "version": 1, "producer": "seed",
                  "function": "forward", "target": "cpu", "alignment": 64,
                  "arena_bytes": self.arena + (-self.arena % 64),
                  "values": self.values, "inputs": self.inputs,
                  "outputs": outputs,
                  "output_names": ["out%d" % i for i in range(len(outputs))],
                  "steps": self.steps}
        return container(header, self.blob)


def unary(kernel, attrs=None, dtype="f32"):
    p = Plan()
    x = p.input(dtype, [2, 3])
    y = p.step(kernel, [x], [(dtype, [2, 3])], attrs)
    return p.bytes([y])


def binary(kernel, out="f32", dtype="f32"):
    p = Plan()
    x = p.input(dtype, [2, 3])
    c = p.data("constant", "f32", [1, 3], [1, 2, 3]) if dtype == "f32" else p.input(dtype, [1, 3])
    y = p.step(kernel, [x, c], [(out, [2, 3])])
    return p.bytes([y])


def plans():
    out = {}
    out["add"] = binary("add")
    out["mul_view"] = None
    p = Plan()
    x = p.input("f32", [2, 3])
    w = p.data("param", "f32", [2, 3], np.ones(6), name="w", role="weight")
    t = p.step("mul", [x, w], [("f32", [2, 3])])
    v = p.view(t, "f32", [6])
    y = p.step("relu", [v], [("f32", [6])])
    out["mul_view"] = p.bytes([y, t])
    out["less_bool"] = binary("less", out="i1")
    out["leaky_relu"] = unary("leaky_relu", {"alpha": 0.1})
    out["gelu_tanh"] = unary("gelu", {"approximate": "tanh"})
    out["softmax"] = unary("softmax", {"axis": 1})
    out["log_softmax"] = unary("log_softmax", {"axis": -1})
    out["transpose"] = None
    p = Plan()
    x = p.input("f32", [2, 3])
    y = p.step("transpose", [x], [("f32", [3, 2])], {"perm": [1, 0]})
    out["transpose"] = p.bytes([y])
    # matmul with a parameter, bias add
    p = Plan()
    x = p.input("f32", [2, 4])
    w = p.data("param", "f32", [4, 3], np.arange(12) * 0.1, name="fc.w")
    b = p.data("param", "f32", [3], [0.1, 0.2, 0.3], name="fc.b")
    h = p.step("matmul", [x, w], [("f32", [2, 3])], {"transpose_rhs": False})
    y = p.step("add", [h, b], [("f32", [2, 3])])
    out["linear"] = p.bytes([y])
    # conv + max_pool
    p = Plan()
    x = p.input("f32", [1, 1, 4, 4])
    w = p.data("param", "f32", [2, 1, 3, 3], np.ones(18) / 9, name="conv.w")
    c = p.step("conv", [x, w], [("f32", [1, 2, 4, 4])],
               {"strides": [1, 1], "dilations": [1, 1],
                "padding": [1, 1, 1, 1], "groups": 1})
    m = p.step("max_pool", [c], [("f32", [1, 2, 2, 2])],
               {"kernel": [2, 2], "strides": [2, 2], "dilations": [1, 1],
                "padding": [0, 0, 0, 0]})
    out["conv_pool"] = p.bytes([m])
    p = Plan()
    x = p.input("f32", [1, 2, 4, 4])
    y = p.step("avg_pool", [x], [("f32", [1, 2, 2, 2])],
               {"kernel": [3, 3], "strides": [2, 2], "dilations": [1, 1],
                "padding": [1, 1, 0, 0], "count_include_pad": False})
    out["avg_pool"] = p.bytes([y])
    # reductions
    p = Plan()
    x = p.input("f32", [2, 3, 4])
    s = p.step("reduce_sum", [x], [("f32", [2, 1, 4])], {"axes": [1], "keepdims": True})
    m = p.step("reduce_max", [x], [("f32", [2])], {"axes": [1, 2], "keepdims": False})
    a = p.step("argmax", [x], [("i64", [2, 3])], {"axis": 2, "keepdims": False})
    out["reduce"] = p.bytes([s, m, a])
    # gather with constant indices, slice, pad, concat
    p = Plan()
    x = p.input("f32", [4, 3])
    idx = p.data("constant", "i64", [2], [3, 0])
    g = p.step("gather", [x, idx], [("f32", [2, 3])], {"axis": 0})
    s = p.step("slice", [x], [("f32", [2, 2])],
               {"starts": [0, 1], "limits": [4, 3], "strides": [2, 1]})
    q = p.step("pad", [s], [("f32", [3, 4])],
               {"low": [1, 1], "high": [0, 1], "mode": "constant", "value": 0.5})
    c = p.step("concat", [g, g], [("f32", [4, 3])], {"axis": 0})
    out["gather_slice_pad_concat"] = p.bytes([g, q, c])
    # gather with an index input (run checks the indices)
    p = Plan()
    x = p.input("f32", [3, 2])
    i = p.input("i64", [4])
    g = p.step("gather", [x, i], [("f32", [4, 2])], {"axis": 0})
    out["gather_input"] = p.bytes([g])
    # layer norm, batch norm
    p = Plan()
    x = p.input("f32", [2, 4])
    sc = p.data("param", "f32", [4], np.ones(4), name="ln.scale")
    bi = p.data("param", "f32", [4], np.zeros(4), name="ln.bias")
    y = p.step("layer_norm", [x, sc, bi], [("f32", [2, 4]), ("f32", [2, 1]), ("f32", [2, 1])],
               {"axis": 1, "epsilon": 1e-5})
    out["layer_norm"] = p.bytes([y[0]])
    p = Plan()
    x = p.input("f32", [2, 3, 2, 2])
    prm = [p.data("param", "f32", [3], v, name=n) for n, v in
           [("bn.scale", np.ones(3)), ("bn.bias", np.zeros(3)),
            ("bn.mean", np.zeros(3)), ("bn.var", np.ones(3))]]
    y = p.step("batch_norm", [x] + prm, [("f32", [2, 3, 2, 2])], {"epsilon": 1e-5})
    out["batch_norm"] = p.bytes([y])
    # losses
    p = Plan()
    x = p.input("f32", [2, 3])
    t = p.input("i64", [2])
    l = p.step("softmax_cross_entropy", [x, t, -1], [("f32", [])],
               {"reduction": "mean", "ignore_index": -100})
    out["cross_entropy"] = p.bytes([l])
    p = Plan()
    x = p.input("f32", [2, 3])
    t = p.input("f32", [2, 3])
    l = p.step("mse_loss", [x, t], [("f32", [])], {"reduction": "sum"})
    out["mse"] = p.bytes([l])
    # a training step: sgd on a parameter
    p = Plan()
    g = p.input("f32", [3])
    w = p.data("param", "f32", [3], [1, 2, 3], name="w", role="weight")
    lr = p.data("constant", "f32", [], [0.1])
    p.steps.append({"kernel": "sgd_update", "inputs": [w, g, lr], "outputs": [w],
                    "attrs": {"weight_decay": 0.0}, "loc": "/sgd"})
    out["sgd"] = p.bytes([])
    # cast, broadcast, select, where-like, dropout
    p = Plan()
    x = p.input("f32", [1, 3])
    b = p.step("broadcast", [x], [("f32", [2, 3])])
    i = p.step("cast", [b], [("i32", [2, 3])])
    z = p.step("greater", [b, b], [("i1", [2, 3])])
    s = p.step("select", [z, b, b], [("f32", [2, 3])])
    d = p.step("dropout", [s], [("f32", [2, 3]), ("i1", [2, 3])],
               {"ratio": 0.5, "seed": 7})
    out["cast_broadcast_select_dropout"] = p.bytes([i, d[0]])
    # an empty plan, f16 and zero-size values
    out["empty"] = Plan().bytes([])
    p = Plan()
    x = p.input("f16", [2, 0])
    y = p.step("neg", [x], [("f16", [2, 0])])
    out["zero_size"] = p.bytes([y])
    # Issue 21's findings (refused or run at once now): overflowing window
    # arithmetic, a pad map sized by an attribute, a slice_grad stride near
    # 2^62, a pooling window of 2^40 taps.
    big = 2 ** 62

    def one(kernel, ins, outs, attrs):
        p = Plan()
        vals = [p.input(d, s) for d, s in ins]
        y = p.step(kernel, vals, outs, attrs)
        return p.bytes([y])
    out["regress_conv_dilation"] = one(
        "conv", [("f32", [1, 1, 4]), ("f32", [1, 1, 3])], [("f32", [1, 1, 4])],
        {"strides": [1], "dilations": [big], "padding": [1, 1], "groups": 1})
    out["regress_pad_map"] = one(
        "pad", [("f32", [4, 3])], [("f32", [4, 3])],
        {"low": [2 ** 40, 0], "high": [0, 0]})
    out["regress_slice_grad"] = one(
        "slice_grad", [("f32", [4, 3])], [("f32", [4, 3])],
        {"starts": [0, 0], "limits": [4, 3], "strides": [big, 1]})
    out["regress_pool_window"] = one(
        "avg_pool", [("f32", [1, 1, 4])], [("f32", [1, 1, 2])],
        {"kernel": [2 ** 40], "strides": [2 ** 40], "dilations": [1],
         "padding": [2 ** 40, 2 ** 40], "count_include_pad": True})
    return out


def npys():
    out = {}
    dts = ["<f4", "<f8", "<f2", "<i8", "<i4", "<i2", "|i1", "|u1", "<u2",
           "<u4", "<u8", "|b1"]
    for dt in dts:
        a = (np.arange(6) % 2 if dt == "|b1" else np.arange(6)).astype(dt).reshape(2, 3)
        out["c_%s.npy" % dt[1:]] = a
    out["scalar.npy"] = np.array(3.5, dtype="<f4")
    out["empty.npy"] = np.zeros((0, 3), dtype="<f4")
    out["bigendian.npy"] = np.arange(3, dtype=">i4")
    out["fortran.npy"] = np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3))
    out["vec.npy"] = np.arange(5, dtype="<i8")
    return out


def npy_bytes(a, version=None):
    import io
    from numpy.lib import format as fmt
    buf = io.BytesIO()
    if version is None:
        np.save(buf, a)
    else:
        fmt.write_array(buf, a, version=version)
    return buf.getvalue()


def safetensors(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


# Small ONNX models for kiln-compile (--kiln-compile).
def onnx_init(name, shape, rng):
    from onnx import numpy_helper
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)
def onnx_model(nodes, inputs, outputs, inits):
    from onnx import helper
    g = helper.make_graph(nodes, "m", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
def onnx_models():
    from onnx import TensorProto, helper, numpy_helper
    F = TensorProto.FLOAT
    rng = np.random.default_rng(0)
    vi = helper.make_tensor_value_info
    out = {}
    out["mlp"] = onnx_model(
        [helper.make_node("Gemm", ["x", "W1", "b1"], ["h"]),
         helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Gemm", ["r", "W2", "b2"], ["logits"])],
        [vi("x", F, [4, 6])], [vi("logits", F, [4, 3])],
        [onnx_init("W1", [6, 8], rng), onnx_init("b1", [8], rng), onnx_init("W2", [8, 3], rng), onnx_init("b2", [3], rng)])
    out["cnn"] = onnx_model(
        [helper.make_node("Conv", ["x", "Wc", "bc"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c", "g", "beta", "mean", "var"], ["n", "rm", "rv"], training_mode=1),
         helper.make_node("Relu", ["n"], ["r"]),
         helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("AveragePool", ["p"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
         helper.make_node("Flatten", ["a"], ["f"]),
         helper.make_node("Gemm", ["f", "Wf", "bf"], ["logits"])],
        [vi("x", F, [2, 1, 6, 6])], [vi("logits", F, [2, 3])],
        [onnx_init("Wc", [2, 1, 3, 3], rng), onnx_init("bc", [2], rng),
         numpy_helper.from_array(np.ones(2, np.float32), "g"), onnx_init("beta", [2], rng),
         numpy_helper.from_array(np.zeros(2, np.float32), "mean"),
         numpy_helper.from_array(np.ones(2, np.float32), "var"),
         onnx_init("Wf", [18, 3], rng), onnx_init("bf", [3], rng)])
    out["ln"] = onnx_model(
        [helper.make_node("LayerNormalization", ["x", "s", "b"], ["l"], axis=-1),
         helper.make_node("MatMul", ["l", "W"], ["m"]),
         helper.make_node("Tanh", ["m"], ["y"])],
        [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 3, 4])],
        [numpy_helper.from_array(np.ones(4, np.float32), "s"), onnx_init("b", [4], rng), onnx_init("W", [4, 4], rng)])
    out["deconv"] = onnx_model(
        [helper.make_node("ConvTranspose", ["x", "Wt"], ["t"], strides=[2, 2]),
         helper.make_node("Add", ["t", "bt"], ["u"]),
         helper.make_node("Sigmoid", ["u"], ["y"])],
        [vi("x", F, [1, 2, 3, 3])], [vi("y", F, [1, 1, 7, 7])],
        [onnx_init("Wt", [2, 1, 3, 3], rng), onnx_init("bt", [1, 1, 1, 1], rng)])
    return out

# kiln-compile flags per compiled plan: (model, loss, optimizer, extra flags).
COMPILED = {
    "mlp_sgd": ("mlp", "cross-entropy", "sgd", []),
    "mlp_grad": ("mlp", "cross-entropy", "none", []),
    "cnn_adam": ("cnn", "cross-entropy", "adam", []),
    "ln_momentum": ("ln", "mse", "momentum",
                    ["--lr-schedule", "cosine", "--total-steps", "10"]),
    # conv_transpose has no gradient rule: its weight is frozen.
    "deconv_adamw": ("deconv", "mse", "adamw",
                     ["--clip-grad-norm", "1", "--freeze", "Wt"]),
}


def compiled_plans(kiln_compile):
    import subprocess
    import tempfile
    import onnx
    with tempfile.TemporaryDirectory() as tmp:
        for name, m in onnx_models().items():
            onnx.save(m, os.path.join(tmp, name + ".onnx"))
        for name, (m, loss, opt, extra) in COMPILED.items():
            subprocess.run([kiln_compile, os.path.join(tmp, m + ".onnx"),
                            "--emit", "plan", "--loss", loss, "--optimizer", opt,
                            "-o", os.path.join(CORPUS, "plan", "compiled_%s.plan" % name)]
                           + extra, check=True)


def write(sub, name, data):
    d = os.path.join(CORPUS, sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    for sub in ("plan", "npy"):
        shutil.rmtree(os.path.join(CORPUS, sub), ignore_errors=True)
    for name, data in plans().items():
        write("plan", name + ".plan", data)
    shutil.copy(os.path.join(TESTDATA, "export.plan"),
                os.path.join(CORPUS, "plan", "export.plan"))
    for name, a in npys().items():
        write("npy", name, npy_bytes(a))
    write("npy", "v2_f4.npy", npy_bytes(np.arange(4, dtype="<f4"), (2, 0)))
    write("npy", "v3_i4.npy", npy_bytes(np.arange(4, dtype="<i4"), (3, 0)))
    for f in sorted(os.listdir(TESTDATA)):
        if f.startswith("pb_"):
            shutil.copy(os.path.join(TESTDATA, f), os.path.join(CORPUS, "npy", f))
    write("npy", "basic.safetensors", safetensors({
        "w": ("F32", [2, 2], np.arange(4, dtype="<f4").tobytes()),
        "b": ("I64", [2], np.arange(2, dtype="<i8").tobytes()),
        "e": ("BF16", [0], b"")}, {"format": "pt"}))
    write("npy", "scalar.safetensors", safetensors({
        "s": ("F16", [], np.array(1.5, dtype="<f2").tobytes()),
        "m": ("BOOL", [3], bytes([0, 1, 1]))}))
    if "--kiln-compile" in sys.argv:
        compiled_plans(sys.argv[sys.argv.index("--kiln-compile") + 1])

if __name__ == "__main__":
    main()
