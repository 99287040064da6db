#!/usr/bin/python3
# Expert-parallel step time (issue 17): a MoE decoder (test/Models
# export_models.py MoEGPT: every MLP a mixture of E experts, top-2 gating,
# capacity factor 1.25, the load-balancing loss) trained with momentum on one
# global batch, the same threads in total:
#   - PyTorch (eager, float32, torch.set_num_threads(2)) on the same batches;
#   - Kiln on 1 rank with --threads 2;
#   - Kiln at ep=2 (--mesh ep=2, mpirun -np 2, 1 thread each): each rank
#     holds E/2 experts and half the batch, the tokens moved by all-to-all.
# Printed: each one's median step (the first --warmup steps dropped), the
# ratios, the parameter bytes per rank, and rank 0's communication per step
# from kiln-train --profile.
#
#   /usr/bin/python3 bench/expert_parallel.py [--bin build/bin] [--steps 8]
#       [--batch 8] [--layers 4] [--d-model 256] [--experts 8]
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
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--experts", type=int, default=8)
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="kiln-ep-bench-")

    def model():
        torch.manual_seed(0)
        return em.MoEGPT(vocab=a.vocab, block_size=a.seq, n_layer=a.layers, n_head=8,
                         d_model=a.d_model, n_expert=a.experts, hidden=4 * a.d_model)
    m = model()
    m.train()
    g = np.random.default_rng(0)
    n = a.batch * (a.steps + 1)
    x = g.integers(0, a.vocab, size=(n, a.seq)).astype(np.int64)
    y = g.integers(0, a.vocab, size=(n, a.seq)).astype(np.int64)
    onnx_path = os.path.join(work, "moe.onnx")
    with torch.no_grad():
        torch.onnx.export(m, (torch.from_numpy(x[:a.batch]), torch.from_numpy(y[:a.batch])),
                          onnx_path, opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["idx", "labels"],
                          output_names=["loss"])
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)
    data = ["--data", "idx=" + os.path.join(work, "x.npy"), "--data",
            "labels=" + os.path.join(work, "y.npy"), "--steps", str(a.steps),
            "--log-every", "0", "--no-shuffle"]
    params = sum(t.numel() for t in m.parameters())
    print("MoE decoder: d_model %d, %d layers, %d experts (top-2), T %d, vocab %d, "
          "%.1fM parameters, global batch %d"
          % (a.d_model, a.layers, a.experts, a.seq, a.vocab, params / 1e6, a.batch))

    # PyTorch on 2 threads, the same batches.
    torch.set_num_threads(2)
    m = model()
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    times = []
    for s in range(a.steps):
        xb = torch.from_numpy(x[s * a.batch:(s + 1) * a.batch])
        yb = torch.from_numpy(y[s * a.batch:(s + 1) * a.batch])
        t0 = time.perf_counter()
        loss = m(xb, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t0) * 1e3)
    torch_ms = float(np.median(times[a.warmup:]))

    rows = []
    for ep in (1, 2):
        exe = os.path.join(work, "ep%d.train" % ep)
        r = subprocess.run([os.path.join(a.bin, "kiln-compile"), onnx_path, "-o", exe,
                            "--batch-size", str(a.batch), "--loss", "output",
                            "--loss-output", "loss", "--optimizer", "momentum", "--lr", "0.01"]
                           + (["--mesh", "ep=%d" % ep] if ep > 1 else []),
                           capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(r.stderr)
        met = os.path.join(work, "ep%d.jsonl" % ep)
        trace = os.path.join(work, "ep%d.json" % ep)
        cmd = ([exe] if ep == 1 else ["mpirun", "--oversubscribe", "-np", str(ep), exe]) + \
            data + ["--metrics", met, "--threads", str(2 // ep), "--profile", trace,
                    "--profile-steps", "%d:%d" % (a.warmup, a.steps)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
        if r.returncode:
            raise SystemExit(r.stderr)
        ms = float(np.median([json.loads(l)["step_ms"] for l in open(met)][a.warmup:]))
        held = re.search(r"this rank holds ([0-9.]+) MiB of the model's ([0-9.]+) MiB", r.stdout)
        comm = re.search(r"profile: rank 0: communication ([0-9.]+) ms per step", r.stdout)
        rows.append((ep, ms, held.group(1) if held else "all", float(comm.group(1)) if comm else 0.0))
    print("| run | step ms | parameters + state per rank (MiB) | communication ms/step (share) |")
    print("|---|---|---|---|")
    print("| PyTorch 1.13 eager, 2 threads | %.0f | - | - |" % torch_ms)
    names = {1: "Kiln 1 rank, 2 threads", 2: "Kiln ep=2, 1 thread each"}
    for ep, ms, held, comm in rows:
        print("| %s | %.0f | %s | %s |" % (names[ep], ms, held,
                                        "%.0f (%.0f%%)" % (comm, 100 * comm / ms)
                                        if ep != 1 else "-"))
    print("Kiln 1 rank / PyTorch step time: %.2fx; ep=2 speed-up over Kiln 1 rank: %.2fx"
          % (rows[0][1] / torch_ms, rows[0][1] / rows[1][1]))


if __name__ == "__main__":
    main()
