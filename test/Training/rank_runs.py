# What the multi-rank harnesses (data_parallel.py, tensor_parallel.py,
# pipeline_parallel.py, recompute.py) share: their PASS/FAIL lines,
# exporting a model with its samples, running
# an executable on N CPU ranks under mpirun, reading its per-step losses
# and exported weights, and the N-rank = 1-rank comparisons (losses
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


# The harness's failed checks (each harness prints their count last).
FAILED = []


def harness_args():
    """--bin and --work (emptied and created); returns (args, work dir)."""
    import argparse
    import shutil
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    return args, args.work


def check(ok, what, detail=""):
    """Prints PASS or FAIL and what was checked (with `detail` on failure)."""
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not detail else ": " + detail),
          flush=True)
    if not ok:
        FAILED.append(what)


def run(exe, ranks, argv, timeout=300, env=None):
    cmd = ([exe] if ranks == 1 else
           ["mpirun", "--oversubscribe", "-np", str(ranks), exe]) + argv + ["--threads", "1"]
    return subprocess.run(cmd, capture_output=True, text=True,
                          env=dict(ENV, **(env or {})), timeout=timeout)


def export_samples(work, name, model, in_name, x, y, batch):
    """Exports `model` (training mode, batch axis dynamic) to WORK/NAME.onnx
    and saves its samples; returns the ONNX path and kiln-train's --data
    flags for them."""
    import torch
    model.train()
    path = os.path.join(work, name + ".onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(x[:batch]),), path,
                          opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=[in_name],
                          output_names=["logits"],
                          dynamic_axes={in_name: {0: "batch"}, "logits": {0: "batch"}})
    np.save(os.path.join(work, name + "_x.npy"), x)
    np.save(os.path.join(work, name + "_y.npy"), y)
    return path, ["--data", "%s=%s" % (in_name, os.path.join(work, name + "_x.npy")),
                  "--data", "labels=" + os.path.join(work, name + "_y.npy")]


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
