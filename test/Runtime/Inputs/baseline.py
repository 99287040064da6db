#!/usr/bin/python3
# The portable baseline (runtime/CMakeLists.txt: -march=x86-64-v3 plus
# KILN_DISPATCH clones for AVX-512) on a CPU without AVX-512: the training
# executable and the runtime's unit tests under qemu-user's Haswell model.
# The same executable is run natively and under qemu; an instruction the
# emulated CPU lacks is SIGILL, and the losses must agree with the native
# run's (not bit for bit: oneDNN and the cloned loops pick other vector
# widths there, which reorders float sums).
#
# Usage: /usr/bin/python3 baseline.py --bin build/bin --models DIR --work DIR
#            [--qemu "qemu-x86_64 -cpu Haswell"]
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys

import numpy as np

BATCH = 8
STEPS = 6
SAMPLES = 64
RTOL = 1e-5
FAILED = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def losses(path):
    out = {}
    for line in open(path):
        if line.strip():
            j = json.loads(line)
            out[j["step"]] = j["loss"]
    return [out.get(s) for s in range(STEPS)]


def run(cmd):
    # One thread: emulated OpenMP spin-waits only cost time.
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    # qemu warns about host CPU features its TCG cannot model; not ours.
    err = "\n".join(l for l in r.stderr.splitlines()
                    if not l.startswith("qemu-x86_64: warning"))
    return r.returncode, err


def train_case(args, qemu, name, shape, flags):
    work = os.path.join(args.work, name)
    os.makedirs(work)
    g = np.random.default_rng(5)
    np.save(os.path.join(work, "x.npy"),
            g.standard_normal((SAMPLES,) + shape).astype(np.float32))
    np.save(os.path.join(work, "y.npy"),
            g.integers(0, 10, size=(SAMPLES,)).astype(np.int64))
    exe = os.path.join(work, "model.train")
    rc, err = run([os.path.join(args.bin, "kiln-compile"),
                   os.path.join(args.models, name + ".onnx"), "-o", exe,
                   "--batch-size", str(BATCH), "--loss", "cross-entropy"] + flags)
    if rc != 0:
        check(False, "%s: kiln-compile: %s" % (name, err))
        return
    base = [exe, "--data", "x=" + os.path.join(work, "x.npy"),
            "--data", "labels=" + os.path.join(work, "y.npy"),
            "--steps", str(STEPS), "--seed", "3", "--log-every", "0",
            "--threads", "1"]
    got = {}
    for where, prefix in (("native", []), ("qemu", qemu)):
        m = os.path.join(work, where + ".jsonl")
        rc, err = run(prefix + base + ["--metrics", m])
        if rc != 0:
            check(False, "%s under %s: exit %d: %s" % (name, where, rc, err[-300:]))
            return
        got[where] = losses(m)
    a, b = got["native"], got["qemu"]
    ok = None not in a and None not in b and all(
        abs(x - y) <= RTOL * max(abs(x), abs(y)) for x, y in zip(a, b))
    check(ok, "%s: %d/%d step losses under %s match the native run (rtol %g)"
          % (name, STEPS, STEPS, " ".join(qemu), RTOL))
    if not ok:
        print("  native: %s\n  qemu:   %s" % (a, b))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--models", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--qemu", default="qemu-x86_64 -cpu Haswell")
    p.add_argument("--gtest", default="Device*:Elementwise*:Executor*")
    args = p.parse_args()
    qemu = shlex.split(args.qemu)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)

    # The vector loops against their scalar references, and the seam.
    rc, err = run(qemu + [os.path.join(args.bin, "kiln-runtime-tests"),
                          "--gtest_brief=1", "--gtest_filter=" + args.gtest])
    check(rc == 0, "kiln-runtime-tests --gtest_filter=%s under %s%s"
          % (args.gtest, " ".join(qemu), "" if rc == 0 else ": " + err[-500:]))

    train_case(args, qemu, "mlp", (784,), ["--optimizer", "adam", "--lr", "0.001"])
    train_case(args, qemu, "cnn", (1, 28, 28),
               ["--optimizer", "momentum", "--momentum", "0.9", "--lr", "0.05"])
    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
