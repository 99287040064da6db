#!/usr/bin/python3
# Finite-difference check, in float64, of the vector-Jacobian product of every
# op autodiff differentiates.
#
# Usage: /usr/bin/python3 test/Training/gradcheck.py --bin build/bin --work DIR [--only NAME]
#
# Each case is a small ONNX graph in double precision whose differentiable
# operands are initializers (so Kiln trains them) and whose output is the
# scalar loss = sum(op(...) * R) for a fixed random R. kiln-compile
# --optimizer none --emit plan gives a plan whose outputs are the loss and
# the gradient of every parameter; kiln-exec runs it. For each parameter P
# and a random direction D, the directional derivative grad·D must match the
# central difference (L(P + hD) - L(P - hD)) / 2h of the forward pass (kiln-run
# on the model with P moved), to a relative 1e-6. Prints PASS/FAIL per case.
import argparse
import json
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

D = TensorProto.DOUBLE
rng = np.random.default_rng(0)


def rand(*shape, lo=None):
    a = rng.standard_normal(shape)
    if lo is not None:
        a = np.abs(a) + lo
    return a


class Case:
    def __init__(self, name, nodes, params, out_shape, inputs=None,
                 out="y", opset=17, extra_inits=None, h=1e-5, tol=None):
        self.h, self.tol = h, tol
        self.name, self.nodes, self.params = name, nodes, params
        self.out_shape, self.inputs, self.out = out_shape, inputs or {}, out
        self.opset, self.extra_inits = opset, extra_inits or {}

    def model(self, params):
        r = rng_r(self.name, self.out_shape)
        nodes = list(self.nodes) + [
            helper.make_node("Constant", [], ["R"], value=numpy_helper.from_array(r, "R")),
            helper.make_node("Mul", [self.out, "R"], ["yr"]),
            helper.make_node("ReduceSum", ["yr"], ["loss"], keepdims=0),
        ]
        inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in params.items()]
        inits += [numpy_helper.from_array(np.asarray(v), k) for k, v in self.extra_inits.items()]
        ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
               for k, v in self.inputs.items()]
        g = helper.make_graph(nodes, self.name, ins,
                              [helper.make_tensor_value_info("loss", D, [])], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)],
                                 ir_version=8)


def rng_r(name, shape):
    # A seed from the name that is the same in every process (Python's
    # str hash is salted per process, which made the data, and now and then
    # a case's finite-difference error, change from run to run).
    g = np.random.default_rng(zlib.crc32(name.encode()))
    return g.standard_normal(shape)


def N(op, ins, outs=("y",), **attrs):
    return helper.make_node(op, list(ins), list(outs), **attrs)


def cases():
    c = []
    A, B = rand(3, 4), rand(4, 5)
    c.append(Case("matmul", [N("MatMul", ["a", "b"])], {"a": A, "b": B}, (3, 5)))
    c.append(Case("matmul_batched_bcast", [N("MatMul", ["a", "b"])],
                  {"a": rand(2, 3, 4), "b": rand(4, 5)}, (2, 3, 5)))
    c.append(Case("gemm_transB", [N("Gemm", ["a", "b", "c"], transB=1, alpha=0.5, beta=2.0)],
                  {"a": rand(3, 4), "b": rand(5, 4), "c": rand(5)}, (3, 5)))
    c.append(Case("gemm_transA", [N("Gemm", ["a", "b"], transA=1)],
                  {"a": rand(4, 3), "b": rand(4, 5)}, (3, 5)))
    for op in ["Add", "Sub", "Mul", "Div"]:
        p = {"a": rand(2, 3, 4), "b": rand(3, 1) + (3.0 if op == "Div" else 0.0)}
        c.append(Case(op.lower() + "_bcast", [N(op, ["a", "b"])], p, (2, 3, 4)))
    c.append(Case("pow", [N("Pow", ["a", "b"])], {"a": rand(3, 4, lo=0.5), "b": rand(3, 4)}, (3, 4)))
    c.append(Case("max", [N("Max", ["a", "b"])], {"a": rand(3, 4), "b": rand(3, 4)}, (3, 4)))
    c.append(Case("min", [N("Min", ["a", "b"])], {"a": rand(3, 4), "b": rand(4)}, (3, 4)))
    unary = {"Neg": None, "Abs": None, "Exp": None, "Log": 0.5, "Tanh": None,
             "Sigmoid": None, "Relu": None, "Sqrt": 0.5, "Reciprocal": 0.5, "Erf": None,
             "Softplus": None, "Sin": None, "Cos": None}
    for op, lo in unary.items():
        c.append(Case(op.lower(), [N(op, ["a"])], {"a": rand(3, 5, lo=lo)}, (3, 5)))
    c.append(Case("leaky_relu", [N("LeakyRelu", ["a"], alpha=0.2)], {"a": rand(3, 5)}, (3, 5)))
    c.append(Case("elu", [N("Elu", ["a"], alpha=0.7)], {"a": rand(3, 5)}, (3, 5)))
    c.append(Case("where", [N("Where", ["m", "a", "b"])], {"a": rand(3, 4), "b": rand(4)}, (3, 4),
                  extra_inits={"m": rng.integers(0, 2, (3, 4)).astype(bool)}))
    c.append(Case("conv", [N("Conv", ["x", "w", "bias"], pads=[1, 1, 1, 1])],
                  {"x": rand(2, 3, 5, 5), "w": rand(4, 3, 3, 3), "bias": rand(4)}, (2, 4, 5, 5)))
    c.append(Case("conv_stride_dil_groups",
                  [N("Conv", ["x", "w"], strides=[2, 1], dilations=[1, 2], group=2, pads=[1, 0, 0, 2])],
                  {"x": rand(2, 4, 7, 6), "w": rand(6, 2, 3, 2)}, (2, 6, 3, 6)))
    c.append(Case("conv1d", [N("Conv", ["x", "w"], strides=[2], pads=[1, 1])],
                  {"x": rand(2, 3, 9), "w": rand(4, 3, 3)}, (2, 4, 5)))
    c.append(Case("max_pool", [N("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                  {"x": rand(2, 3, 7, 7)}, (2, 3, 4, 4)))
    c.append(Case("avg_pool", [N("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
                  {"x": rand(2, 3, 7, 7)}, (2, 3, 4, 4)))
    c.append(Case("avg_pool_include_pad",
                  [N("AveragePool", ["x"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 0, 0],
                     count_include_pad=1)], {"x": rand(1, 2, 5, 5)}, (1, 2, 3, 3)))
    c.append(Case("global_avg_pool", [N("GlobalAveragePool", ["x"])], {"x": rand(2, 3, 4, 4)}, (2, 3, 1, 1)))
    c.append(Case("batch_norm_train",
                  [N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1, epsilon=1e-3)],
                  {"x": rand(4, 3, 2, 2), "s": rand(3), "b": rand(3)}, (4, 3, 2, 2),
                  extra_inits={"m": rand(3), "v": rand(3, lo=0.5)}))
    # Planes of >= 64 elements take the kernel's per-channel path, smaller
    # ones the channel-blocked one: both are checked.
    c.append(Case("batch_norm_train_large_plane",
                  [N("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1, epsilon=1e-3)],
                  {"x": rand(2, 2, 8, 8), "s": rand(2), "b": rand(2)}, (2, 2, 8, 8),
                  extra_inits={"m": rand(2), "v": rand(2, lo=0.5)}))
    c.append(Case("layer_norm", [N("LayerNormalization", ["x", "s", "b"], axis=-1, epsilon=1e-3)],
                  {"x": rand(2, 3, 6), "s": rand(6), "b": rand(6)}, (2, 3, 6)))
    c.append(Case("layer_norm_2axes", [N("LayerNormalization", ["x", "s", "b"], axis=1)],
                  {"x": rand(2, 3, 4), "s": rand(3, 4), "b": rand(3, 4)}, (2, 3, 4)))
    c.append(Case("softmax", [N("Softmax", ["x"], axis=-1)], {"x": rand(3, 6)}, (3, 6)))
    c.append(Case("softmax_axis1", [N("Softmax", ["x"], axis=1)], {"x": rand(2, 5, 3)}, (2, 5, 3)))
    c.append(Case("log_softmax", [N("LogSoftmax", ["x"], axis=1)], {"x": rand(3, 6)}, (3, 6)))
    c.append(Case("reduce_sum", [N("Constant", [], ["ax"], value=numpy_helper.from_array(np.array([1], np.int64))),
                                 N("ReduceSum", ["x", "ax"], keepdims=0)], {"x": rand(2, 3, 4)}, (2, 4)))
    c.append(Case("reduce_mean", [N("ReduceMean", ["x"], axes=[0, 2], keepdims=1)], {"x": rand(2, 3, 4)}, (1, 3, 1)))
    c.append(Case("reduce_sum_square", [N("ReduceSumSquare", ["x"], axes=[0, 2], keepdims=1)], {"x": rand(2, 3, 4)}, (1, 3, 1)))
    shape = numpy_helper.from_array(np.array([4, 6], np.int64))
    c.append(Case("reshape", [N("Constant", [], ["s"], value=shape), N("Reshape", ["x", "s"])],
                  {"x": rand(2, 3, 4)}, (4, 6)))
    c.append(Case("transpose", [N("Transpose", ["x"], perm=[2, 0, 1])], {"x": rand(2, 3, 4)}, (4, 2, 3)))
    c.append(Case("slice_step", [
        N("Constant", [], ["st"], value=numpy_helper.from_array(np.array([1, 0], np.int64))),
        N("Constant", [], ["en"], value=numpy_helper.from_array(np.array([5, 4], np.int64))),
        N("Constant", [], ["ax"], value=numpy_helper.from_array(np.array([0, 1], np.int64))),
        N("Constant", [], ["sp"], value=numpy_helper.from_array(np.array([2, 1], np.int64))),
        N("Slice", ["x", "st", "en", "ax", "sp"])], {"x": rand(6, 4)}, (2, 4)))
    c.append(Case("concat", [N("Concat", ["a", "b"], axis=1)], {"a": rand(2, 3), "b": rand(2, 4)}, (2, 7)))
    c.append(Case("pad", [N("Constant", [], ["p"], value=numpy_helper.from_array(np.array([0, 1, 2, 0], np.int64))),
                          N("Pad", ["x", "p"])], {"x": rand(3, 4)}, (5, 5)))
    c.append(Case("gather", [N("Gather", ["t", "i"], axis=0)], {"t": rand(7, 3)}, (2, 4, 3),
                  extra_inits={"i": np.array([[0, 3, 3, 6], [1, -1, 0, 3]], np.int64)}))
    c.append(Case("gather_axis1", [N("Gather", ["t", "i"], axis=1)], {"t": rand(2, 5, 3)}, (2, 3, 3),
                  extra_inits={"i": np.array([4, 0, 4], np.int64)}))
    # The MoE ops: topk's values (distinct inputs, so the choice is stable
    # under the finite differences), cumsum both ways, gather_elements and
    # scatter_elements (none: the overwritten data gets no gradient; add).
    c.append(Case("topk", [N("Constant", [], ["k"], value=numpy_helper.from_array(np.array([2], np.int64))),
                           N("TopK", ["x", "k"], ["y", "yi"], axis=-1)],
                  {"x": np.arange(12.0).reshape(3, 4)[:, [2, 0, 3, 1]] + 0.1 * rand(3, 4)}, (3, 2)))
    for ex, rev in ((0, 0), (1, 1)):
        c.append(Case("cumsum_%d%d" % (ex, rev),
                      [N("Constant", [], ["a"], value=numpy_helper.from_array(np.array(1, np.int64))),
                       N("CumSum", ["x", "a"], exclusive=ex, reverse=rev)], {"x": rand(3, 5)}, (3, 5)))
    c.append(Case("gather_elements", [N("GatherElements", ["x", "i"], axis=1)], {"x": rand(3, 4)}, (3, 3),
                  extra_inits={"i": np.array([[0, 3, 3], [1, 1, 0], [2, -1, 0]], np.int64)}))
    for red in ("none", "add"):
        c.append(Case("scatter_elements_" + red, [N("ScatterElements", ["x", "i", "u"], axis=1, reduction=red)],
                      {"x": rand(3, 4), "u": rand(3, 2)}, (3, 4), opset=16,
                      extra_inits={"i": np.array([[0, 3], [1, 2], [3, 0]], np.int64)}))
    c.append(Case("expand", [N("Constant", [], ["s"], value=numpy_helper.from_array(np.array([3, 2, 4], np.int64))),
                             N("Expand", ["x", "s"])], {"x": rand(2, 1)}, (3, 2, 4)))
    c.append(Case("dropout", [
        N("Constant", [], ["r"], value=numpy_helper.from_array(np.array(0.3))),
        N("Constant", [], ["t"], value=numpy_helper.from_array(np.array(True))),
        N("Dropout", ["x", "r", "t"], ["y", "mask"])], {"x": rand(4, 6)}, (4, 6)))
    c.append(Case("cross_entropy", [N("SoftmaxCrossEntropyLoss", ["z", "l"], ["y"], reduction="mean")],
                  {"z": rand(5, 4)}, (), extra_inits={"l": np.array([0, 3, 1, 1, 2], np.int64)}))
    c.append(Case("cross_entropy_ignore_weight",
                  [N("SoftmaxCrossEntropyLoss", ["z", "l", "w"], ["y"], reduction="mean", ignore_index=1)],
                  {"z": rand(2, 4, 3)}, (), extra_inits={"l": np.array([[0, 3, 1], [1, 2, 0]], np.int64),
                                                          "w": rand(4, lo=0.1)}))
    c.append(Case("nll_loss", [N("NegativeLogLikelihoodLoss", ["z", "l"], ["y"], reduction="sum")],
                  {"z": rand(5, 4)}, (), extra_inits={"l": np.array([0, 3, 1, 1, 2], np.int64)}))
    c.append(Case("cast_f32_roundtrip", [N("Cast", ["x"], ["c"], to=TensorProto.FLOAT),
                                          N("Cast", ["c"], ["y"], to=TensorProto.DOUBLE)],
                  {"x": rand(3, 4)}, (3, 4), h=1e-2, tol=1e-4))  # linear; f32 rounding
    return c


def plan_header(path):
    data = open(path, "rb").read()
    j = struct.unpack_from("<Q", data, 16)[0]
    return json.loads(data[32:32 + j].decode())


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(" ".join(os.path.basename(c) for c in cmd[:1]) + ": " +
                           (r.stderr.strip() or r.stdout.strip()))
    return r


def check(args, case):
    work = os.path.join(args.work, case.name)
    os.makedirs(work, exist_ok=True)
    params = {k: np.asarray(v, np.float64) for k, v in case.params.items()}
    path = os.path.join(work, "model.onnx")
    onnx.save(case.model(params), path)
    plan = os.path.join(work, "grad.plan")
    run([os.path.join(args.bin, "kiln-compile"), path, "-o", plan, "--emit", "plan",
         "--optimizer", "none", "--loss", "output", "--loss-output", "loss"])
    hdr = plan_header(plan)
    out_dir = os.path.join(work, "grads")
    run([os.path.join(args.bin, "kiln-exec"), plan, "--output-dir", out_dir])
    names = hdr.get("output_names", [])
    grads = {n[:-5]: np.load(os.path.join(out_dir, "output_%d.npy" % k))
             for k, n in enumerate(names) if n.endswith("/grad")}
    missing = sorted(set(params) - set(grads))
    if missing:
        return False, "no gradient for " + ", ".join(missing)
    worst = 0.0
    for name, p in params.items():
        d = np.random.default_rng(len(name)).standard_normal(p.shape)
        h = case.h * max(1.0, float(np.max(np.abs(p))))
        losses = []
        for sign in (1, -1):
            moved = dict(params)
            moved[name] = p + sign * h * d
            mp = os.path.join(work, "moved.onnx")
            onnx.save(case.model(moved), mp)
            od = os.path.join(work, "fd")
            run([os.path.join(args.bin, "kiln-run"), mp, "--output-dir", od])
            losses.append(float(np.load(os.path.join(od, "output_0.npy"))))
        fd = (losses[0] - losses[1]) / (2 * h)
        an = float(np.sum(grads[name] * d))
        err = abs(fd - an) / max(abs(fd), abs(an), 1e-8)
        worst = max(worst, err)
        if err > (case.tol or args.tol):
            return False, "%s: grad·d %.10g, finite difference %.10g (rel %.2e)" % (name, an, fd, err)
    return True, "max rel %.1e over %d params" % (worst, len(params))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--only", default="")
    p.add_argument("--tol", type=float, default=1e-6)
    args = p.parse_args()
    failed = 0
    for case in cases():
        if args.only and case.name not in args.only.split(","):
            continue
        try:
            ok, msg = check(args, case)
        except RuntimeError as e:
            ok, msg = False, str(e)
        print("%s %s: %s" % ("PASS" if ok else "FAIL", case.name, msg), flush=True)
        failed += not ok
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
