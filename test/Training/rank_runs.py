# What the multi-rank harnesses (data_parallel.py, tensor_parallel.py) share:
# running an executable on N CPU ranks under mpirun, reading its per-step
# losses and exported weights, and the N-rank = 1-rank comparisons (losses
# within 1e-5 relative; floating-point weights within 1e-5, absolute or
# relative above 1).
import json
import os
import subprocess

import numpy as np
import onnx
import onnx.numpy_helper

# Open MPI as root, one thread per rank.
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")


def run(exe, ranks, argv, timeout=300):
    cmd = ([exe] if ranks == 1 else
           ["mpirun", "--oversubscribe", "-np", str(ranks), exe]) + argv + ["--threads", "1"]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout)


def losses(path):
    return [json.loads(l)["loss"] for l in open(path) if l.strip()]


def weights(path):
    return {t.name: onnx.numpy_helper.to_array(t)
            for t in onnx.load(path).graph.initializer}


def close_losses(a, b):
    if len(a) != len(b) or not a:
        return False, "%d vs %d steps" % (len(a), len(b))
    rel = max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b))
    return rel <= 1e-5, "worst relative difference %.2e" % rel


def close_weights(a, b):
    if set(a) != set(b):
        return False, "different initializers"
    worst = 0.0
    for k in a:
        if a[k].dtype.kind != "f":
            continue
        d = np.abs(a[k].astype(np.float64) - b[k].astype(np.float64))
        worst = max(worst, float(np.max(d / np.maximum(1.0, np.abs(a[k])))) if d.size else 0)
    return worst <= 1e-5, "worst weight difference %.2e" % worst
