#!/usr/bin/python3
# Data-parallel step time (issue 14): one global batch trained three ways,
# each process single-threaded:
#   - Kiln on 1 rank;
#   - Kiln at dp=2 (mpirun -np 2, --mesh dp=2);
#   - PyTorch DDP (torch.distributed, gloo, 2 processes, bucket 25 MB).
# Two ratios follow:
#   - the speed-up, Kiln 1-rank time over Kiln dp=2 time (target >= 1.8 on
#     the GEMM-bound MLP);
#   - Kiln dp=2 time over DDP's (target <= 0.6).
#
#   /usr/bin/python3 bench/data_parallel.py [--bin build/bin] [--steps 40]
#       [--models mlp_wide,gpt]
#
# Kiln at dp=2 runs once per variant (default 0, 25 and 4: --bucket-mb of
# synchronous all-reduces, DDP's bucket size, smaller buckets; 25z: 25 with
# --zero 1, the optimizer state sharded); "hidden" is the share of
# rank 0's communication time overlapped with compute, from kiln-train
# --profile (steps 10-19; target >= 80%).
# Kiln's time is rank 0's median step_ms (--metrics); DDP's is rank 0's
# median of forward + backward (with its overlapped all-reduce) +
# optimizer.step. The first 10 steps are warm-up. Adam, cross-entropy.
# mlp_wide: 784-2048-2048-10 at global batch 256; gpt: test/Models' decoder,
# dropout 0, global batch 128.
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train as tb  # noqa: E402  (bench/train.py's models and data)

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")


def ddp_worker(rank, world, name, batch, steps, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    m, x, y, _ = tb.model_and_data(name, batch, batch * steps)
    m.train()
    # The GPT's causal mask is a bool buffer, which gloo cannot broadcast
    # (every rank builds the same one); no model here has BatchNorm.
    torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
        m, [n for n, b in m.named_buffers() if b.dtype == torch.bool])
    ddp = torch.nn.parallel.DistributedDataParallel(m, broadcast_buffers=False)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    per = batch // world
    times = []
    for s in range(steps):
        lo = s * batch + rank * per
        dist.barrier()
        t = time.perf_counter()
        logits = ddp(xt[lo:lo + per])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               yt[lo:lo + per].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t) * 1e3)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(times, f)
    dist.destroy_process_group()


def kiln_ms(a, work, name, batch, steps, dp, flags=()):
    """Rank 0's median step ms and, at dp > 1, the share of communication
    hidden behind compute (rank 0's --profile summary, steps 10-19)."""
    torch.manual_seed(0)
    m, x, y, in_name = tb.model_and_data(name, batch, batch * steps)
    m.train()
    onnx_path = os.path.join(work, name + ".onnx")
    torch.onnx.export(m, (torch.from_numpy(x[:batch]),), onnx_path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=[in_name],
                      output_names=["logits"],
                      dynamic_axes={in_name: {0: "batch"}, "logits": {0: "batch"}})
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)
    exe = os.path.join(work, "%s-%d.train" % (name, dp))
    mesh = ["--mesh", "dp=%d" % dp] if dp > 1 else []
    mesh += list(flags)
    subprocess.run([os.path.join(a.bin, "kiln-compile"), onnx_path, "-o", exe,
                    "--batch-size", str(batch), "--loss", "cross-entropy",
                    "--optimizer", "adam", "--lr", "0.001"] + mesh,
                   check=True, capture_output=True)
    met = os.path.join(work, "%s-%d.jsonl" % (name, dp))
    cmd = ([] if dp == 1 else ["mpirun", "--oversubscribe", "-np", str(dp)]) + [
        exe, "--data", "%s=%s" % (in_name, os.path.join(work, "x.npy")),
        "--data", "labels=" + os.path.join(work, "y.npy"), "--steps", str(steps),
        "--metrics", met, "--log-every", "0", "--threads", "1", "--no-shuffle"]
    if dp > 1:
        cmd += ["--profile", os.path.join(work, "trace.json"), "--profile-steps", "10:20"]
    r = subprocess.run(cmd, check=True, capture_output=True, env=ENV, text=True)
    hidden = None
    for line in r.stdout.splitlines():
        if line.startswith("profile: rank 0: communication"):
            hidden = float(line.split(", ")[1].split("%")[0])
    ms = float(np.median([json.loads(l)["step_ms"] for l in open(met)][10:]))
    return ms, hidden


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--models", default="mlp_wide,gpt")
    p.add_argument("--variants", default="0,25,4,25z",
                   help="Kiln dp=2 runs: --bucket-mb values (0: synchronous); a "
                        "trailing z adds --zero 1")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="kiln-bench-dp-")
    print("%-9s %6s %8s %10s %10s %10s %9s %9s" % (
        "model", "batch", "buckets", "kiln 1", "kiln dp=2", "ddp dp=2", "speed-up",
        "kiln/ddp") + "  hidden")
    for i, name in enumerate(a.models.split(",")):
        batch = 256 if name == "mlp_wide" else 128
        one, _ = kiln_ms(a, work, name, batch, a.steps, 1)
        out = os.path.join(work, name + "-ddp.json")
        mp.spawn(ddp_worker, args=(2, name, batch, a.steps, 29500 + i, out), nprocs=2)
        ddp = float(np.median(json.load(open(out))[10:]))
        for mb in a.variants.split(","):
            flags = ["--bucket-mb", mb.rstrip("z")] + (["--zero", "1"] if mb.endswith("z") else [])
            two, hidden = kiln_ms(a, work, name, batch, a.steps, 2, flags)
            print("%-9s %6d %8s %10.2f %10.2f %10.2f %9.2f %9.2f  %s" %
                  (name, batch, mb, one, two, ddp, one / two, two / ddp,
                   "-" if hidden is None else "%.0f%%" % hidden), flush=True)


if __name__ == "__main__":
    main()
