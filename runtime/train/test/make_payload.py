#!/usr/bin/python3
# Builds a training payload by hand, without kiln-compile: a @train_step plan
# in the plan format (docs/PlanFormat.md) made of existing runtime kernels,
# the config, a small ONNX model whose initializers are the plan's params and
# an eval plan, appended with the KILNTRN1 trailer (docs/Training.md) to a
# copy of kiln-train.
#
#   make_payload.py --kiln-train BIN --model linreg|softmax --out DIR
#                   [--batch B] [--lr F] [--samples N] [--dropout R]
#
# Writes DIR/model.train (the executable), DIR/payload.bin (the bare
# payload, for KILN_TRAIN_PAYLOAD), DIR/model.onnx and training/eval data
# (DIR/x.npy, DIR/y.npy, DIR/x_eval.npy, DIR/y_eval.npy).
#
# linreg:  pred = x·w + b, loss = mse(pred, y); plain SGD.
# softmax: logits = dropout(x)·W + b, loss = cross-entropy(logits, labels);
#          SGD with momentum 0.9 (buffers are role "optimizer" params).
import argparse
import hashlib
import json
import os
import shutil
import struct

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DT = {np.dtype("float32"): "f32", np.dtype("int64"): "i64", np.dtype("bool"): "i1"}
SIZE = {"f32": 4, "f64": 8, "i64": 8, "i32": 4, "i1": 1}


class Plan:
    def __init__(self, function):
        self.function = function
        self.values, self.steps, self.blob = [], [], bytearray()
        self.inputs, self.outputs, self.output_names = [], [], []
        self.arena = 0

    def _add(self, v):
        self.values.append(v)
        return len(self.values) - 1

    def _data(self, arr):
        while len(self.blob) % 64:
            self.blob.append(0)
        off = len(self.blob)
        self.blob += np.ascontiguousarray(arr).tobytes()
        return off

    def input(self, name, dtype, shape):
        i = self._add({"dtype": dtype, "shape": list(shape), "kind": "input",
                       "index": len(self.inputs), "name": name})
        self.inputs.append(i)
        return i

    def param(self, name, arr, role=None):
        v = {"dtype": DT[arr.dtype], "shape": list(arr.shape), "kind": "param",
             "name": name, "data_offset": self._data(arr), "data_bytes": arr.nbytes}
        if role:
            v["role"] = role
        return self._add(v)

    def const(self, arr):
        return self._add({"dtype": DT[arr.dtype], "shape": list(arr.shape),
                          "kind": "constant", "data_offset": self._data(arr),
                          "data_bytes": arr.nbytes})

    def tmp(self, dtype, shape):
        n = SIZE[dtype] * int(np.prod(shape, dtype=np.int64))
        off = self.arena
        self.arena += (n + 63) // 64 * 64
        return self._add({"dtype": dtype, "shape": list(shape), "kind": "arena",
                          "offset": off})

    def view(self, src, dtype, shape):
        return self._add({"dtype": dtype, "shape": list(shape), "kind": "view",
                          "source": src})

    def step(self, kernel, ins, outs, loc, **attrs):
        s = {"kernel": kernel, "inputs": ins, "outputs": outs, "loc": loc}
        if attrs:
            s["attrs"] = attrs
        self.steps.append(s)

    def output(self, v, name):
        self.outputs.append(v)
        self.output_names.append(name)

    def bytes(self):
        header = {"format": "kiln-plan", "version": 1, "producer": "make_payload.py",
                  "function": self.function, "target": "cpu", "alignment": 64,
                  "arena_bytes": max(self.arena, 64), "values": self.values,
                  "inputs": self.inputs, "outputs": self.outputs,
                  "output_names": self.output_names, "steps": self.steps}
        j = json.dumps(header).encode()
        out = bytearray(b"KILNPLAN" + struct.pack("<IIQQ", 1, 0, len(j), len(self.blob)))
        out += j
        while len(out) % 64:
            out.append(0)
        out += self.blob
        return bytes(out)


def grad_norm(p, grads, loc="/grad_norm"):
    total = None
    for g, shape in grads:
        sq = p.tmp("f32", shape)
        p.step("mul", [g, g], [sq], loc)
        ss = p.tmp("f32", [])
        p.step("reduce_sum", [sq], [ss], loc, axes=list(range(len(shape))), keepdims=False)
        if total is None:
            total = ss
        else:
            t = p.tmp("f32", [])
            p.step("add", [total, ss], [t], loc)
            total = t
    gn = p.tmp("f32", [])
    p.step("sqrt", [total], [gn], loc)
    return gn


def linreg(args, rng):
    d, b = 4, args.batch
    w0 = (rng.standard_normal((d, 1)) * 0.1).astype(np.float32)
    b0 = np.zeros((1,), np.float32)
    true_w = np.array([[1.5], [-2.0], [0.5], [3.0]], np.float32)

    def data(n):
        x = rng.standard_normal((n, d)).astype(np.float32)
        y = (x @ true_w + 0.25 + 0.01 * rng.standard_normal((n, 1))).astype(np.float32)
        return x, y

    def forward(p, x, w, bb):
        z = p.tmp("f32", [b, 1])
        p.step("matmul", [x, w], [z], "/MatMul")
        pred = p.tmp("f32", [b, 1])
        p.step("add", [z, bb], [pred], "/Add")
        return pred

    p = Plan("train_step")
    x = p.input("x", "f32", [b, d])
    y = p.input("y", "f32", [b, 1])
    w = p.param("w", w0, "weight")
    bb = p.param("b", b0, "weight")
    lr = p.input("kiln.lr", "f32", [])
    p.input("kiln.step", "i64", [])
    pred = forward(p, x, w, bb)
    loss = p.tmp("f32", [])
    p.step("mse_loss", [pred, y], [loss], "/loss", reduction="mean")
    diff = p.tmp("f32", [b, 1])
    p.step("sub", [pred, y], [diff], "/loss_grad")
    dpred = p.tmp("f32", [b, 1])
    p.step("mul", [diff, p.const(np.array(2.0 / b, np.float32))], [dpred], "/loss_grad")
    gw = p.tmp("f32", [d, 1])
    p.step("matmul", [x, dpred], [gw], "/MatMul_grad", transpose_lhs=True)
    gb = p.tmp("f32", [1])
    p.step("reduce_sum", [dpred], [gb], "/Add_grad", axes=[0], keepdims=False)
    gn = grad_norm(p, [(gw, [d, 1]), (gb, [1])])
    for param, g, shape in ((w, gw, [d, 1]), (bb, gb, [1])):
        u = p.tmp("f32", shape)
        p.step("mul", [g, lr], [u], "/sgd")
        p.step("sub", [param, u], [param], "/sgd")
    p.output(loss, "loss")
    p.output(gn, "grad_norm")

    e = Plan("forward")
    ex = e.input("x", "f32", [b, d])
    ey = e.input("y", "f32", [b, 1])
    epred = forward(e, ex, e.param("w", w0), e.param("b", b0))
    eloss = e.tmp("f32", [])
    e.step("mse_loss", [epred, ey], [eloss], "/loss", reduction="mean")
    e.output(eloss, "loss")

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["z"], name="/MatMul"),
         helper.make_node("Add", ["z", "b"], ["pred"], name="/Add")],
        "linreg",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", d])],
        [helper.make_tensor_value_info("pred", TensorProto.FLOAT, ["N", 1])],
        [numpy_helper.from_array(w0, "w"), numpy_helper.from_array(b0, "b")])
    config = {"loss": "mse", "logits": "pred", "labels": "y", "num_classes": None,
              "data": [{"name": "x", "dtype": "f32", "sample_shape": [d]},
                       {"name": "y", "dtype": "f32", "sample_shape": [1]}],
              "optimizer": {"name": "sgd", "lr": args.lr}}
    xs, ys = data(args.samples)
    xe, ye = data(args.batch * 4)
    files = {"x": xs, "y": ys, "x_eval": xe, "y_eval": ye}
    return p, e, graph, config, files


def softmax(args, rng):
    d, c, b = 8, 5, args.batch
    W0 = (rng.standard_normal((d, c)) * 0.1).astype(np.float32)
    b0 = np.zeros((c,), np.float32)
    centers = rng.standard_normal((c, d)).astype(np.float32) * 2

    def data(n):
        lab = rng.integers(0, c, size=(n,)).astype(np.int64)
        x = (centers[lab] + rng.standard_normal((n, d))).astype(np.float32)
        return x, lab

    def forward(p, x, W, bb):
        z = p.tmp("f32", [b, c])
        p.step("matmul", [x, W], [z], "/MatMul")
        logits = p.tmp("f32", [b, c])
        p.step("add", [z, bb], [logits], "/Add")
        return logits

    p = Plan("train_step")
    x = p.input("x", "f32", [b, d])
    labels = p.input("labels", "i64", [b])
    W = p.param("W", W0, "weight")
    bb = p.param("b", b0, "weight")
    mW = p.param("W/momentum_buffer", np.zeros_like(W0), "optimizer")
    mb = p.param("b/momentum_buffer", np.zeros_like(b0), "optimizer")
    lr = p.input("kiln.lr", "f32", [])
    p.input("kiln.step", "i64", [])
    xd = x
    if args.dropout > 0:
        xd = p.tmp("f32", [b, d])
        p.step("dropout", [x], [xd, p.tmp("i1", [b, d])], "/Dropout",
               ratio=args.dropout, seed=7)
    logits = forward(p, xd, W, bb)
    loss = p.tmp("f32", [])
    p.step("softmax_cross_entropy", [logits, labels], [loss], "/loss",
           reduction="mean", class_axis=1)
    prob = p.tmp("f32", [b, c])
    p.step("softmax", [logits], [prob], "/loss_grad", axis=1)
    lab2 = p.view(labels, "i64", [b, 1])
    onehot = p.tmp("i1", [b, c])
    p.step("equal", [lab2, p.const(np.arange(c, dtype=np.int64).reshape(1, c))],
           [onehot], "/loss_grad")
    onehotf = p.tmp("f32", [b, c])
    p.step("cast", [onehot], [onehotf], "/loss_grad")
    diff = p.tmp("f32", [b, c])
    p.step("sub", [prob, onehotf], [diff], "/loss_grad")
    dl = p.tmp("f32", [b, c])
    p.step("mul", [diff, p.const(np.array(1.0 / b, np.float32))], [dl], "/loss_grad")
    gW = p.tmp("f32", [d, c])
    p.step("matmul", [xd, dl], [gW], "/MatMul_grad", transpose_lhs=True)
    gb = p.tmp("f32", [c])
    p.step("reduce_sum", [dl], [gb], "/Add_grad", axes=[0], keepdims=False)
    gn = grad_norm(p, [(gW, [d, c]), (gb, [c])])
    mom = p.const(np.array(0.9, np.float32))
    for param, buf, g, shape in ((W, mW, gW, [d, c]), (bb, mb, gb, [c])):
        p.step("mul", [buf, mom], [buf], "/momentum")
        p.step("add", [buf, g], [buf], "/momentum")
        u = p.tmp("f32", shape)
        p.step("mul", [buf, lr], [u], "/momentum")
        p.step("sub", [param, u], [param], "/momentum")
    p.output(loss, "loss")
    p.output(gn, "grad_norm")

    e = Plan("forward")
    ex = e.input("x", "f32", [b, d])
    elab = e.input("labels", "i64", [b])
    elogits = forward(e, ex, e.param("W", W0), e.param("b", b0))
    eloss = e.tmp("f32", [])
    e.step("softmax_cross_entropy", [elogits, elab], [eloss], "/loss",
           reduction="mean", class_axis=1)
    e.output(eloss, "loss")
    e.output(elogits, "logits")

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["z"], name="/MatMul"),
         helper.make_node("Add", ["z", "b"], ["logits"], name="/Add")],
        "softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", d])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", c])],
        [numpy_helper.from_array(W0, "W"), numpy_helper.from_array(b0, "b")])
    config = {"loss": "cross-entropy", "logits": "logits", "labels": "labels",
              "num_classes": c,
              "data": [{"name": "x", "dtype": "f32", "sample_shape": [d]},
                       {"name": "labels", "dtype": "i64", "sample_shape": []}],
              "optimizer": {"name": "momentum", "lr": args.lr, "momentum": 0.9}}
    xs, ys = data(args.samples)
    xe, ye = data(args.batch * 4 + 3)
    files = {"x": xs, "y": ys, "x_eval": xe, "y_eval": ye}
    return p, e, graph, config, files


def payload(parts, prefix=b""):
    out = bytearray(prefix)
    offs = []
    for part in parts:
        while len(out) % 64:
            out.append(0)
        offs += [len(out) if part else 0, len(part)]
        out += part
    out += b"KILNTRN1" + struct.pack("<8Q", *offs)
    return bytes(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln-train", required=True)
    ap.add_argument("--model", choices=["linreg", "softmax"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--schedule", default="constant")
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--total", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(0)
    plan, evalplan, graph, config, files = (linreg if args.model == "linreg" else softmax)(args, rng)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    mbytes = model.SerializeToString()
    with open(os.path.join(args.out, "model.onnx"), "wb") as f:
        f.write(mbytes)
    opt = {"name": "sgd", "lr": args.lr, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
           "weight_decay": 0.0, "momentum": 0.0, "nesterov": False, "clip_norm": 0.0}
    opt.update(config.pop("optimizer"))
    cfg = {"format": "kiln-train-config", "version": 1, "model": "model.onnx",
           "model_sha256": hashlib.sha256(mbytes).hexdigest(),
           "batch_size": args.batch, "ignore_index": None, "optimizer": opt,
           "schedule": {"kind": args.schedule, "warmup_steps": args.warmup,
                        "total_steps": args.total, "min_lr": 0.0},
           "lr_input": "kiln.lr", "step_input": "kiln.step"}
    cfg.update(config)
    parts = [plan.bytes(), json.dumps(cfg, indent=2).encode(), mbytes, evalplan.bytes()]
    with open(os.path.join(args.out, "payload.bin"), "wb") as f:
        f.write(payload(parts))
    with open(args.kiln_train, "rb") as f:
        exe = f.read()
    target = os.path.join(args.out, "model.train")
    with open(target, "wb") as f:
        f.write(payload(parts, exe))
    shutil.copymode(args.kiln_train, target)
    for name, arr in files.items():
        np.save(os.path.join(args.out, name + ".npy"), arr)


if __name__ == "__main__":
    main()
