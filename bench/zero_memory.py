#!/usr/bin/python3
"""Per-rank memory of ZeRO 0/1/2/3 at dp=4 on a GPT decoder (issue 14).

  /usr/bin/python3 bench/zero_memory.py [--bin build/bin] [--dp 4]

The decoder (test/Models' GPT: vocab 512, 4 layers, d_model 256, context
64, dropout 0) at global batch 16, Adam. For each stage, kiln-compile
builds a --mesh dp=N executable, which runs one step under
`mpirun --oversubscribe -np N` and logs what each rank holds:
`memory per rank: parameters P MiB, optimizer state S MiB, activations and
gradients (arena) A MiB`. The theory for Adam with P0 bytes of weights:
state 2 P0 without ZeRO and 2 P0 / N from stage 1; weights P0 until stage 3
and P0 / N there (weights smaller than N elements stay whole). The arena
holds activations, gradients and the whole copies ZeRO-3 gathers.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "Models"))
import export_models as em  # noqa: E402

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")
BATCH, T, VOCAB = 16, 64, 512


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--dp", type=int, default=4)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="kiln-zero-mem-")
    torch.manual_seed(0)
    model = em.GPT(vocab=VOCAB, block_size=T, n_layer=4, n_head=4, d_model=256, dropout=0.0)
    p0 = sum(t.numel() * 4 for t in model.parameters())
    onnx_path = os.path.join(work, "gpt.onnx")
    g = np.random.default_rng(0)
    x = g.integers(0, VOCAB, size=(4 * BATCH, T)).astype(np.int64)
    y = g.integers(0, VOCAB, size=(4 * BATCH, T)).astype(np.int64)
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)
    model.train()
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(x[:BATCH]),), onnx_path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["idx"],
                          output_names=["logits"], dynamic_axes={"idx": {0: "batch"}})
    mib = 1024.0 * 1024.0
    n = args.dp
    print("GPT decoder, %.2f MiB of weights, Adam, global batch %d, dp=%d (per rank, MiB)"
          % (p0 / mib, BATCH, n))
    print("| --zero | weights | theory | optimizer state | theory | arena | total |")
    print("|---|---|---|---|---|---|---|")
    for stage in range(4):
        exe = os.path.join(work, "gpt-z%d.train" % stage)
        r = subprocess.run([os.path.join(args.bin, "kiln-compile"), onnx_path, "-o", exe,
                            "--batch-size", str(BATCH), "--loss", "cross-entropy",
                            "--optimizer", "adam", "--mesh", "dp=%d" % n,
                            "--zero", str(stage)], capture_output=True, text=True)
        if r.returncode:
            sys.exit("kiln-compile --zero %d: %s" % (stage, r.stderr.strip()))
        r = subprocess.run(["mpirun", "--oversubscribe", "-np", str(n), exe,
                            "--data", "idx=" + os.path.join(work, "x.npy"),
                            "--data", "labels=" + os.path.join(work, "y.npy"),
                            "--steps", "1", "--threads", "1"],
                           capture_output=True, text=True, env=ENV, timeout=600)
        m = re.search(r"memory per rank: parameters ([\d.]+) MiB.*optimizer state ([\d.]+) MiB"
                      r".*\(arena\) ([\d.]+) MiB", r.stdout)
        if r.returncode or not m:
            sys.exit("--zero %d run: %s" % (stage, (r.stdout + r.stderr)[-500:]))
        w, s, a = (float(v) for v in m.groups())
        tw = p0 / mib / (n if stage == 3 else 1)
        ts = 2 * p0 / mib / (n if stage >= 1 else 1)
        print("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |" % (stage, w, tw, s, ts, a, w + s + a))


if __name__ == "__main__":
    main()
