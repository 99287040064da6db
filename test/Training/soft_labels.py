#!/usr/bin/python3
# Soft-label cross-entropy (kiln-compile --soft-labels): a small MLP trained
# 3 steps of SGD
#   * on one-hot float labels gives the losses of the integer-label run to
#     float32 rounding, and the same eval loss and accuracy (the eval's
#     label is the row's argmax);
#   * on random probability rows gives PyTorch 1.13's F.cross_entropy with
#     probability targets, trained in float64 from the same weights, to
#     float32 rounding;
#   * with mpirun: compiled for 2 ranks (--mesh dp=2), the 1-rank losses.
#
# Usage: /usr/bin/python3 test/Training/soft_labels.py --bin build/bin --work DIR
# Prints one line per check and exits 1 if any fails.
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

STEPS, BATCH, CLASSES, FEATURES, LR = 3, 8, 5, 20, 0.5


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(FEATURES, 32)
        self.fc2 = torch.nn.Linear(32, CLASSES)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def compile_and_train(args, onnx_path, name, labels_path, x_path, soft, ranks=1):
    exe = os.path.join(args.work, name + ".train")
    cmd = [os.path.join(args.bin, "kiln-compile"), onnx_path, "-o", exe,
           "--batch-size", str(BATCH), "--loss", "cross-entropy",
           "--optimizer", "sgd", "--lr", repr(LR)]
    if soft:
        cmd.append("--soft-labels")
    if ranks > 1:
        cmd += ["--mesh", "dp=%d" % ranks]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("kiln-compile failed: " + r.stderr.strip())
    metrics = os.path.join(args.work, name + ".jsonl")
    run = [exe, "--data", "x=" + x_path, "--data", "labels=" + labels_path,
           "--steps", str(STEPS), "--no-shuffle", "--metrics", metrics,
           "--log-every", "1000", "--threads", "1"]
    if ranks > 1:
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
        r = subprocess.run(["mpirun", "--oversubscribe", "-np", str(ranks)] + run,
                           capture_output=True, text=True, env=env, timeout=300)
    else:
        r = subprocess.run(run + ["--eval-data", "x=" + x_path,
                                  "--eval-data", "labels=" + labels_path],
                           capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(name + " training failed: " + r.stderr.strip())
    losses = [json.loads(l)["loss"] for l in open(metrics) if l.strip()]
    # The end-of-run evaluation: "eval: loss L  accuracy A  (N samples)".
    m = re.search(r"eval: loss (\S+)\s+accuracy (\S+)", r.stdout)
    return losses, ({"eval_loss": float(m.group(1)), "eval_accuracy": float(m.group(2))}
                    if m else {})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Net()
    n = BATCH * STEPS
    g = np.random.default_rng(3)
    x = g.standard_normal((n, FEATURES)).astype(np.float32)
    y = g.integers(0, CLASSES, size=(n,)).astype(np.int64)
    onehot = np.eye(CLASSES, dtype=np.float32)[y]
    probs = g.dirichlet(np.ones(CLASSES) * 0.7, size=n).astype(np.float32)
    paths = {}
    for name, a in (("x", x), ("y", y), ("onehot", onehot), ("probs", probs)):
        paths[name] = os.path.join(args.work, name + ".npy")
        np.save(paths[name], a)
    onnx_path = os.path.join(args.work, "net.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(x[:BATCH]),), onnx_path,
                          opset_version=17, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING,
                          input_names=["x"], output_names=["logits"])

    failed = 0

    def report(ok, what):
        nonlocal failed
        print("%s %s" % ("PASS" if ok else "FAIL", what))
        failed += not ok

    try:
        hard, hard_eval = compile_and_train(args, onnx_path, "hard", paths["y"], paths["x"], False)
        one, one_eval = compile_and_train(args, onnx_path, "onehot", paths["onehot"], paths["x"], True)
        soft, _ = compile_and_train(args, onnx_path, "soft", paths["probs"], paths["x"], True)
    except RuntimeError as e:
        report(False, str(e))
        return 1

    # One-hot rows: the integer-label losses to float32 rounding.
    err = max(abs(a - b) / abs(b) for a, b in zip(one, hard)) if len(one) == len(hard) == STEPS else 1
    report(err <= 1e-6, "one-hot soft labels = integer labels: losses %s vs %s, max rel %.1e"
           % (" ".join("%.7f" % v for v in one), " ".join("%.7f" % v for v in hard), err))
    eval_ok = (one_eval and hard_eval and
               abs(one_eval["eval_loss"] - hard_eval["eval_loss"]) <= 1e-6 * abs(hard_eval["eval_loss"])
               and one_eval.get("eval_accuracy") == hard_eval.get("eval_accuracy"))
    report(eval_ok, "eval with one-hot rows: loss %s accuracy %s, integer labels: loss %s accuracy %s"
           % (one_eval.get("eval_loss"), one_eval.get("eval_accuracy"),
              hard_eval.get("eval_loss"), hard_eval.get("eval_accuracy")))

    # Probability rows: PyTorch's cross_entropy with probability targets in
    # float64 from the same initial weights.
    ref = Net().double()
    ref.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    opt = torch.optim.SGD(ref.parameters(), lr=LR)
    want = []
    for s in range(STEPS):
        xb = torch.from_numpy(x[s * BATCH:(s + 1) * BATCH]).double()
        pb = torch.from_numpy(probs[s * BATCH:(s + 1) * BATCH]).double()
        loss = F.cross_entropy(ref(xb), pb)
        want.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    err = max(abs(a - b) / abs(b) for a, b in zip(soft, want)) if len(soft) == STEPS else 1
    report(err <= 1e-5, "probability rows = torch F.cross_entropy (float64): losses %s vs %s, max rel %.1e"
           % (" ".join("%.7f" % v for v in soft), " ".join("%.7f" % v for v in want), err))
    # Two ranks (the loss's mean over the positions splits over them).
    if shutil.which("mpirun"):
        try:
            dp, _ = compile_and_train(args, onnx_path, "soft_dp2", paths["probs"], paths["x"],
                                      True, ranks=2)
            err = max(abs(a - b) / abs(b) for a, b in zip(dp, soft)) if len(dp) == STEPS else 1
            report(err <= 1e-6, "2 ranks = 1 rank with probability rows: losses %s, max rel %.1e"
                   % (" ".join("%.7f" % v for v in dp), err))
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            report(False, "2 ranks: " + str(e))
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
