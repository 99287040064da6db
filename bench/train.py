#!/usr/bin/python3
# Training step time of Kiln's executable against PyTorch 1.13 in the same
# run: same model, batch, optimizer (Adam) and thread count.
#
#   /usr/bin/python3 bench/train.py [--bin build/bin] [--batch 128]
#       [--threads 2] [--steps 60] [--models mlp,mlp_wide,cnn,resnet18,gpt]
#       [--precision fp32,bf16]
#
# --precision bf16 compiles with `kiln-compile --precision bf16` and runs
# PyTorch under torch.autocast("cpu", bfloat16); with both precisions the
# table adds Kiln's fp32 / bf16 step-time speed-up per model. "arena MiB" is
# the training plan's peak memory beyond parameters, optimizer state and
# inputs (kiln-compile's buffer assignment).
#
# gpt_wide (the decoder at d_model 256, 4 heads, 64 tokens, vocab 512, batch
# 32) is a decoder whose GEMMs dominate its step, unlike gpt's (d_model 32).
#
# mlp_wide (784-2048-2048-10, batch 256) is the GEMM-bound one: for the MLPs
# the table adds Kiln's achieved GFLOP/s (forward, weight and input
# gradients of every Linear), and the run ends with the GEMM library's own
# rate on this machine: oneDNN's sgemm through Kiln's matmul kernel
# (kiln-runtime-tests' Matmul.DISABLED_Bench2048) and PyTorch's (OpenBLAS)
# torch.mm, both 2048^3 on the same threads.
#
# resnet18 is torchvision's, 10 classes, on 3x32x32 input, at batch
# --resnet-batch (32 unless given) for a quarter of --steps (its step is
# ~100x the others').
#
# Kiln's time is the median step_ms of its --metrics (the step alone, data
# prefetched on another thread); PyTorch's is the median of forward +
# backward + optimizer.step. The first 10 steps of each (3 of
# resnet18's) are warm-up.
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "Models"))
import export_models as em  # noqa: E402


def model_and_data(name, batch, n):
    g = np.random.default_rng(0)
    if name == "mlp":
        m, shape, kind, classes = em.MLP(), (784,), "f", 10
    elif name == "mlp_wide":
        m = torch.nn.Sequential(torch.nn.Linear(784, 2048), torch.nn.ReLU(),
                                torch.nn.Linear(2048, 2048), torch.nn.ReLU(),
                                torch.nn.Linear(2048, 10))
        shape, kind, classes = (784,), "f", 10
    elif name == "cnn":
        m, shape, kind, classes = em.CNN(), (1, 28, 28), "f", 10
    elif name == "resnet18":
        import torchvision
        m = torchvision.models.resnet18(weights=None, num_classes=10)
        shape, kind, classes = (3, 32, 32), "f", 10
    elif name == "gpt":
        m, shape, kind, classes = em.GPT(dropout=0.0), (16,), "i", 64
    elif name == "gpt_wide":
        # A decoder whose GEMMs dominate: d_model 256, 4 heads, 64 tokens.
        m = em.GPT(vocab=512, block_size=64, n_layer=2, n_head=4, d_model=256,
                   dropout=0.0)
        shape, kind, classes = (64,), "i", 512
    else:
        raise SystemExit("unknown model " + name)
    if kind == "f":
        x = g.standard_normal((n,) + shape).astype(np.float32)
        y = g.integers(0, classes, (n,)).astype(np.int64)
    else:
        x = g.integers(0, classes, (n,) + shape).astype(np.int64)
        y = g.integers(0, classes, (n,) + shape).astype(np.int64)
    return m, x, y, ("idx" if kind == "i" else "x")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--resnet-batch", type=int, default=32)
    p.add_argument("--models", default="mlp,mlp_wide,cnn,resnet18,gpt")
    p.add_argument("--precision", default="fp32",
                   help="comma-separated: fp32, bf16 (kiln-compile --precision "
                        "bf16 against torch.autocast bfloat16)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    work = tempfile.mkdtemp(prefix="kiln-bench-train-")
    print("%-9s %5s %6s %10s %10s %7s %12s %10s %10s" % ("model", "prec", "batch", "kiln ms",
                                                       "torch ms", "ratio", "kiln GFLOP/s",
                                                       "fp32/bf16", "arena MiB"))
    for name in a.models.split(","):
        kiln_fp32 = None
        for prec in a.precision.split(","):
            k = run_model(a, work, name, prec, kiln_fp32)
            if prec == "fp32":
                kiln_fp32 = k
    gemm_rates(a)


def run_model(a, work, name, prec, kiln_fp32):
    """One model at one precision: prints its row, returns Kiln's step ms."""
    torch.manual_seed(0)
    batch, steps = a.batch, a.steps
    if name == "resnet18":
        batch, steps = a.resnet_batch, max(12, a.steps // 4)
    if name == "mlp_wide":
        batch, steps = 256, max(20, a.steps // 2)
    if name == "gpt_wide":
        batch, steps = 32, max(20, a.steps // 2)
    warm = 10 if steps >= 30 else 3
    m, x, y, in_name = model_and_data(name, batch, batch * steps)
    m.train()
    onnx_path = os.path.join(work, name + ".onnx")
    torch.onnx.export(m, (torch.from_numpy(x[:batch]),), onnx_path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=[in_name],
                      output_names=["logits"])
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)
    exe = os.path.join(work, name + "." + prec + ".train")
    r = subprocess.run([os.path.join(a.bin, "kiln-compile"), onnx_path, "-o", exe,
                        "--batch-size", str(batch), "--loss", "cross-entropy",
                        "--optimizer", "adam", "--lr", "0.001", "--precision", prec],
                       check=True, capture_output=True, text=True)
    # The plan's peak memory beyond parameters and inputs: its arena.
    arena = re.search(r"train arena ([0-9.]+) MiB", r.stdout + r.stderr)
    met = os.path.join(work, name + "." + prec + ".jsonl")
    subprocess.run([exe, "--data", "%s=%s" % (in_name, os.path.join(work, "x.npy")),
                    "--data", "labels=" + os.path.join(work, "y.npy"),
                    "--steps", str(steps), "--metrics", met, "--log-every", "0",
                    "--threads", str(a.threads), "--no-shuffle"],
                   check=True, capture_output=True)
    kiln = [json.loads(l)["step_ms"] for l in open(met)][warm:]
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    times = []
    for s in range(steps):
        t = time.perf_counter()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
            logits = m(xt[s * batch:(s + 1) * batch])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                   yt[s * batch:(s + 1) * batch].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t) * 1e3)
    k, t = float(np.median(kiln)), float(np.median(times[warm:]))
    gf = ""
    if name.startswith("mlp"):
        lins = [l for l in m.modules() if isinstance(l, torch.nn.Linear)]
        flops = sum(2 * batch * l.in_features * l.out_features * (2 if i == 0 else 3)
                    for i, l in enumerate(lins))
        gf = "%.1f" % (flops / (k * 1e-3) / 1e9)
    speedup = "%.2f" % (kiln_fp32 / k) if kiln_fp32 and prec != "fp32" else ""
    print("%-9s %5s %6d %10.2f %10.2f %7.2f %12s %10s %10s" % (
        name, prec, batch, k, t, k / t, gf, speedup, arena.group(1) if arena else "?"),
        flush=True)
    return k


def gemm_rates(a):
    """The GEMM libraries' own 2048^3 f32 rates on the same threads."""
    r = subprocess.run([os.path.join(a.bin, "kiln-runtime-tests"), "--gtest_also_run_disabled_tests",
                        "--gtest_filter=Matmul.DISABLED_Bench2048"],
                       capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS=str(a.threads)))
    for line in r.stdout.splitlines():
        if "GFLOP/s" in line:
            print("oneDNN (Kiln's matmul kernel), " + line.strip())
    n = 2048
    x, y = torch.rand(n, n), torch.rand(n, n)
    torch.mm(x, y)
    t = time.perf_counter()
    for _ in range(5):
        torch.mm(x, y)
    s = time.perf_counter() - t
    print("PyTorch torch.mm 2048^3 f32: %.1f GFLOP/s" % (2.0 * n ** 3 * 5 / s / 1e9))


if __name__ == "__main__":
    main()
