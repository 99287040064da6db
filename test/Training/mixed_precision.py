#!/usr/bin/python3
# Mixed precision against PyTorch: Kiln's --precision bf16 training
# executable and torch.autocast(device_type="cpu", dtype=torch.bfloat16) with
# float32 master weights, same model, same initial weights, same batches.
#
# Usage: /usr/bin/python3 test/Training/mixed_precision.py --bin build/bin --work DIR
#            [--models mlp,cnn,gpt] [--steps 20]
#
# For each model (Adam, lr 1e-3, batch 8):
#   * the loss of every step within 2e-2 relative of autocast's;
#   * the final loss within 1% of Kiln's own float32 run's;
#   * master weights: every parameter and optimizer state stays f32 in
#     @train_step, each parameter has at most one bf16 copy (one cast), and
#     every update op takes an f32 gradient; the exported model is f32;
#   * the plan computes its matmuls/convolutions in bf16 (it is not an f32
#     plan in disguise).
# --fp32-ops MatMul,Gemm (MLP) puts every matmul back in f32.
# Prints one line per check and exits 1 if any fails.
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import parity  # noqa: E402  (the models and data of the parity harness)

make_data = parity.make_data

LR = 1e-3
BATCH = 8


def build(name):
    """The parity harness's models (parity.py), as trained with Adam: the
    CNN's convs without the bias BatchNorm cancels."""
    return parity.build(name, "adam")


def compile_and_train(args, work, onnx_path, in_name, tag, extra, steps):
    exe = os.path.join(work, tag + ".train")
    cmd = [os.path.join(args.bin, "kiln-compile"), onnx_path, "-o", exe,
           "--batch-size", str(BATCH), "--loss", "cross-entropy",
           "--optimizer", "adam", "--lr", repr(LR)] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("kiln-compile %s failed: %s" % (tag, r.stderr.strip()))
    r = subprocess.run(cmd[:3] + [os.path.join(work, tag + ".mlir")] + cmd[4:] + ["--emit", "mlir"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("kiln-compile --emit mlir %s failed: %s" % (tag, r.stderr.strip()))
    metrics = os.path.join(work, tag + ".jsonl")
    out_onnx = os.path.join(work, tag + ".onnx")
    r = subprocess.run([exe, "--data", "%s=%s" % (in_name, os.path.join(work, "x.npy")),
                        "--data", "labels=" + os.path.join(work, "y.npy"),
                        "--steps", str(steps), "--no-shuffle", "--metrics", metrics,
                        "--export-onnx", out_onnx, "--log-every", "1000"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s training failed: %s" % (tag, r.stderr.strip()))
    losses = [json.loads(l)["loss"] for l in open(metrics) if l.strip()]
    return losses, open(os.path.join(work, tag + ".mlir")).read(), out_onnx


def torch_autocast_losses(model, x, y, steps):
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    losses = []
    for s in range(steps):
        xb = torch.from_numpy(x[s * BATCH:(s + 1) * BATCH])
        yb = torch.from_numpy(y[s * BATCH:(s + 1) * BATCH])
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            logits = model(xb)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.reshape(-1))
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return losses


def master_weight_checks(mlir):
    """Problems with @train_step's master weights, as strings."""
    problems = []
    head = mlir[mlir.index("func.func @train_step"):]
    sig = head[:head.index("{\n")]
    params = re.findall(r"(%arg\d+): tensor<([^>]*)> \{[^}]*kiln\.param", sig)
    if not params:
        problems.append("no parameters found in @train_step")
    for name, ty in params:
        if not ty.endswith("f32") and not ty.endswith("i64"):
            problems.append("parameter %s is %s, not f32" % (name, ty))
        casts = len(re.findall(r"kiln\.cast %s : " % re.escape(name) + r"[^\n]*bf16", mlir))
        if casts > 1:
            problems.append("parameter %s has %d bf16 copies" % (name, casts))
    for line in re.findall(r"kiln\.adam_update[^\n]*", mlir):
        if "bf16" in line:
            problems.append("an update takes bf16: " + line[:120])
    return problems


def run_model(args, name):
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    model, shape, classes, kind = build(name)
    model.train()
    x, y = make_data(shape, classes, kind, BATCH * args.steps, seed=1)
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)
    in_name = "idx" if kind == "i" else "x"
    onnx_path = os.path.join(work, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(x[:BATCH]),), onnx_path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=[in_name],
                          output_names=["logits"])
    results = []
    try:
        bf16, mlir, out_onnx = compile_and_train(args, work, onnx_path, in_name, "bf16",
                                                 ["--precision", "bf16"], args.steps)
        fp32, _, _ = compile_and_train(args, work, onnx_path, in_name, "fp32", [], args.steps)
    except RuntimeError as e:
        return [(False, "%s: %s" % (name, e))]
    ref = torch_autocast_losses(model, x, y, args.steps)

    n = min(len(bf16), len(ref))
    err = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(bf16, ref)) if n else 1.0
    results.append((n == args.steps and err <= 2e-2,
                    "%s losses vs torch.autocast bf16: %d steps, max rel %.2e "
                    "(kiln %s, torch %s)" % (name, n, err,
                                             " ".join("%.4f" % v for v in bf16[:3]),
                                             " ".join("%.4f" % v for v in ref[:3]))))
    final = abs(bf16[-1] - fp32[-1]) / abs(fp32[-1])
    results.append((final <= 1e-2, "%s final loss bf16 %.5f vs Kiln fp32 %.5f: rel %.2e"
                    % (name, bf16[-1], fp32[-1], final)))
    problems = master_weight_checks(mlir)
    trained = onnx.load(out_onnx).graph.initializer
    for t in trained:
        if t.data_type in (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16):
            problems.append("exported %s has ONNX type %d" % (t.name, t.data_type))
    low = len(re.findall(r"kiln\.(?:matmul|conv)[^\n]*-> tensor<[^>]*bf16>", mlir))
    if low == 0:
        problems.append("no matmul or convolution computes in bf16")
    results.append((not problems, "%s master weights f32, one bf16 copy each, %d bf16 "
                    "matmuls/convolutions%s" % (name, low,
                                               ": " + "; ".join(problems[:3]) if problems else "")))
    return results


def fp32_ops_check(args):
    work = os.path.join(args.work, "mlp")
    r = subprocess.run([os.path.join(args.bin, "kiln-compile"), os.path.join(work, "model.onnx"),
                        "-o", os.path.join(work, "ops.mlir"), "--emit", "mlir",
                        "--batch-size", str(BATCH), "--precision", "bf16",
                        "--fp32-ops", "Gemm,MatMul"], capture_output=True, text=True)
    if r.returncode != 0:
        return False, "--fp32-ops: kiln-compile failed: " + r.stderr.strip()
    mlir = open(os.path.join(work, "ops.mlir")).read()
    mm = re.findall(r"kiln\.matmul[^\n]*", mlir)
    low = [l for l in mm if "bf16" in l]
    return (mm and not low,
            "--fp32-ops Gemm,MatMul: %d matmuls, %d in bf16" % (len(mm), len(low)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--models", default="mlp,cnn,gpt")
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    torch.set_num_threads(1)
    results = []
    for m in args.models.split(","):
        results += run_model(args, m)
    if "mlp" in args.models.split(","):
        results.append(fp32_ops_check(args))
    failed = 0
    for ok, detail in results:
        print("%s %s" % ("PASS" if ok else "FAIL", detail))
        failed += not ok
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
