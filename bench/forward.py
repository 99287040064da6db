#!/usr/bin/python3
"""Forward-pass time of Kiln against PyTorch 1.13, same machine and threads.

  /usr/bin/python3 bench/forward.py [--kiln-run build/bin/kiln-run]
      [--threads 2] [--repeat 20] [NAME ...]      (names: mlp resnet18 gpt)

Each model is exported in inference mode, timed in PyTorch (eval, no_grad,
after warm-up; the median of `repeat` runs) and in Kiln (`kiln-run --repeat`,
the mean of `repeat` runs after one warm-up run; compile time excluded), in
the same process tree with OMP_NUM_THREADS = torch threads. Prints a table
with the ratio kiln/torch (below 1: Kiln is faster).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "Models"))
import export_models as em  # noqa: E402


class BenchMLP(nn.Module):
    """GEMM-bound: 784 -> 2048 -> 2048 -> 10 on a batch of 256."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 2048)
        self.fc2 = nn.Linear(2048, 2048)
        self.fc3 = nn.Linear(2048, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


MODELS = {
    "mlp": (BenchMLP, lambda: (torch.randn(256, 784),), ["x"]),
    "resnet18": (lambda: __import__("torchvision").models.resnet18(weights=None),
                 lambda: (torch.randn(8, 3, 224, 224),), ["x"]),
    "gpt": (lambda: em.GPT(vocab=512, block_size=128, n_layer=4, n_head=8,
                           d_model=256),
            lambda: (torch.randint(0, 512, (8, 128), dtype=torch.int64),),
            ["idx"]),
}


def time_torch(model, args, repeat):
    with torch.no_grad():
        for _ in range(3):
            model(*args)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            model(*args)
            times.append(time.perf_counter() - t0)
    return 1000 * float(np.median(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln-run", default=os.path.join(ROOT, "build/bin/kiln-run"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("names", nargs="*")
    opts = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(opts.threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(opts.threads))
    work = tempfile.mkdtemp(prefix="kiln-bench-")
    rows = []
    for name in opts.names or list(MODELS):
        build, make_args, in_names = MODELS[name]
        torch.manual_seed(0)
        model = build().eval()
        args = make_args()
        path = os.path.join(work, name + ".onnx")
        torch.onnx.export(model, args, path, opset_version=17,
                          training=torch.onnx.TrainingMode.EVAL,
                          input_names=in_names)
        cmd = [opts.kiln_run, path, "--output-dir", os.path.join(work, name),
               "--repeat", str(opts.repeat)]
        for n, a in zip(in_names, args):
            f = os.path.join(work, "%s.%s.npy" % (name, n))
            np.save(f, a.numpy())
            cmd += ["--input", "%s=%s" % (n, f)]
        torch_ms = time_torch(model, args, opts.repeat)
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, env=env)
        m = re.search(r"forward: ([0-9.]+) ms", r.stdout)
        if r.returncode != 0 or not m:
            print("%s: kiln-run failed: %s" % (name, r.stdout.strip()))
            return 1
        kiln_ms = float(m.group(1))
        rows.append((name, tuple(args[0].shape), torch_ms, kiln_ms))
    print("threads %d, torch %s, %s" % (opts.threads, torch.__version__,
                                        torch.__config__.parallel_info().splitlines()[0]))
    print("| model | input | PyTorch ms | Kiln ms | Kiln/PyTorch |")
    print("|---|---|---:|---:|---:|")
    for name, shape, t, k in rows:
        print("| %s | %s | %.2f | %.2f | %.2f |" % (name, "x".join(map(str, shape)),
                                                    t, k, k / t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
