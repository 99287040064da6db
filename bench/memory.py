#!/usr/bin/python3
"""Peak activation memory of a forward pass: Kiln's plan against PyTorch.

  /usr/bin/python3 bench/memory.py [--build build] [NAME ...]  (mlp resnet18 gpt)

Kiln: the arena of the forward plan (`--kiln-assign-buffers=statistics`
prints `peak-bytes`; parameters and inputs are not in the arena). PyTorch
1.13 on CPU: the high-water mark of the allocations made during one
inference forward pass (eval, no_grad), from the profiler's memory events
(`profile_memory=True`: the running sum of every event's self memory in
time order, at op granularity), i.e. what its allocator had to hold at once beyond
the parameters and inputs. Both exclude parameters and inputs.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import warnings

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from forward import MODELS  # noqa: E402


def torch_peak(model, args):
    with torch.no_grad():
        model(*args)  # warm-up: lazy initialisation out of the way
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                    profile_memory=True) as prof:
            model(*args)
    # Every allocation and free is in exactly one event's self memory (an
    # op's, or a "[memory]" event's when no op was running): their running
    # sum in time order is the bytes held.
    events = [(e.time_range.start, e.self_cpu_memory_usage) for e in prof.events()]
    events.sort()
    cur = peak = 0
    for _, delta in events:
        cur += delta
        peak = max(peak, cur)
    return peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("names", nargs="*")
    opts = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(2)
    work = tempfile.mkdtemp(prefix="kiln-mem-")
    bin_ = os.path.join(opts.build, "bin")
    print("| model | input | PyTorch peak MiB | Kiln arena MiB | Kiln/PyTorch |")
    print("|---|---|---:|---:|---:|")
    for name in opts.names or list(MODELS):
        build, make_args, in_names = MODELS[name]
        torch.manual_seed(0)
        model = build().eval()
        args = make_args()
        path = os.path.join(work, name + ".onnx")
        torch.onnx.export(model, args, path, opset_version=17,
                          training=torch.onnx.TrainingMode.EVAL,
                          input_names=in_names)
        imp = subprocess.run([os.path.join(bin_, "kiln-translate"), "--import-onnx", path],
                             stdout=subprocess.PIPE, check=True)
        opt = subprocess.run([os.path.join(bin_, "kiln-opt"), "--convert-onnx-to-kiln",
                              "--canonicalize", "--cse", "--kiln-lower-to-runtime",
                              "--kiln-assign-buffers=statistics", "-o", "/dev/null"],
                             input=imp.stdout, stderr=subprocess.PIPE, check=True)
        m = re.search(rb"peak-bytes (\d+)", opt.stderr)
        kiln = int(m.group(1))
        pt = torch_peak(model, args)
        print("| %s | %s | %.2f | %.2f | %.2f |" % (
            name, "x".join(map(str, args[0].shape)), pt / 2**20, kiln / 2**20,
            kiln / pt if pt else float("nan")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
