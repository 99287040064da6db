#!/usr/bin/python3
# Tensor-parallel step time (issue 17): the decoder of the issue (d_model
# 512, 8 layers, 8 heads, T = 256, vocabulary 2048) trained with momentum
# on one global batch, the same threads in total:
#   - Kiln on 1 rank with --threads 2;
#   - Kiln at tp=2 (--mesh tp=2 --tp megatron, mpirun -np 2, 1 thread each),
#     without and with --sequence-parallel.
# Printed: each one's median step (the first --warmup steps dropped), the
# speed-up, the parameter bytes per rank, and rank 0's communication per
# step from kiln-train --profile (the all-reduces' time while compute
# waits, and their share of the step).
#
#   /usr/bin/python3 bench/tensor_parallel.py [--bin build/bin] [--steps 8]
#       [--batch 4] [--layers 8] [--d-model 512]
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "Models"))
import export_models as em  # noqa: E402

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--vocab", type=int, default=2048)
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="kiln-tp-bench-")
    torch.manual_seed(0)
    m = em.GPT(vocab=a.vocab, block_size=a.seq, n_layer=a.layers, n_head=8,
               d_model=a.d_model, dropout=0.0)
    m.train()
    g = np.random.default_rng(0)
    n = a.batch * (a.steps + 1)
    x = g.integers(0, a.vocab, size=(n, a.seq)).astype(np.int64)
    y = g.integers(0, a.vocab, size=(n, a.seq)).astype(np.int64)
    onnx_path = os.path.join(work, "decoder.onnx")
    with torch.no_grad():
        torch.onnx.export(m, (torch.from_numpy(x[:a.batch]),), onnx_path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["idx"],
                          output_names=["logits"],
                          dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}})
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)
    data = ["--data", "idx=" + os.path.join(work, "x.npy"), "--data",
            "labels=" + os.path.join(work, "y.npy"), "--steps", str(a.steps),
            "--log-every", "0", "--no-shuffle"]
    params = sum(t.numel() for t in m.parameters())
    print("decoder: d_model %d, %d layers, T %d, vocab %d, %.1fM parameters, global batch %d"
          % (a.d_model, a.layers, a.seq, a.vocab, params / 1e6, a.batch))
    rows = []
    for tp, sp in ((1, False), (2, False), (2, True)):
        exe = os.path.join(work, "tp%d%s.train" % (tp, "sp" if sp else ""))
        mesh = ["--mesh", "tp=%d" % tp, "--tp", "megatron"] if tp > 1 else []
        mesh += ["--sequence-parallel"] if sp else []
        r = subprocess.run([os.path.join(a.bin, "kiln-compile"), onnx_path, "-o", exe,
                            "--batch-size", str(a.batch), "--loss", "cross-entropy",
                            "--optimizer", "momentum", "--lr", "0.01"] + mesh,
                           capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(r.stderr)
        met = os.path.join(work, "tp%d%s.jsonl" % (tp, "sp" if sp else ""))
        trace = os.path.join(work, "tp%d%s.json" % (tp, "sp" if sp else ""))
        cmd = ([exe] if tp == 1 else ["mpirun", "--oversubscribe", "-np", str(tp), exe]) + \
            data + ["--metrics", met, "--threads", str(2 // tp), "--profile", trace,
                    "--profile-steps", "%d:%d" % (a.warmup, a.steps)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
        if r.returncode:
            raise SystemExit(r.stderr)
        ms = float(np.median([json.loads(l)["step_ms"] for l in open(met)][a.warmup:]))
        held = re.search(r"this rank holds ([0-9.]+) MiB of the model's ([0-9.]+) MiB", r.stdout)
        comm = re.search(r"profile: rank 0: communication ([0-9.]+) ms per step", r.stdout)
        rows.append((tp if not sp else "sp", ms, held.group(1) if held else "all",
                     float(comm.group(1)) if comm else 0.0))
    print("| run | step ms | parameters + state per rank (MiB) | communication ms/step (share) |")
    print("|---|---|---|---|")
    names = {1: "1 rank, 2 threads", 2: "tp=2, 1 thread each",
             "sp": "tp=2 --sequence-parallel, 1 thread each"}
    for tp, ms, held, comm in rows:
        print("| %s | %.0f | %s | %s |" % (names[tp], ms, held,
                                        "%.0f (%.0f%%)" % (comm, 100 * comm / ms)
                                        if tp != 1 else "-"))
    print("speed-up over 1 rank: tp=2 %.2fx, tp=2 with sequence parallelism %.2fx"
          % (rows[0][1] / rows[1][1], rows[0][1] / rows[2][1]))


if __name__ == "__main__":
    main()
