#!/usr/bin/python3
# --augment in training (issue 20 item 7), on the bundled digits example
# (examples/digits: sklearn's 8x8 digits as 1x8x8 images, the 64-128-64-10
# MLP):
#   - crop with padding + jitter trains to a test accuracy like the plain
#     run's, on batches that differ from the plain run's (the losses differ
#     from the first step);
#   - mixup with soft labels (kiln-compile --soft-labels, integer label files
#     turned into one-hot rows by the loader) learns too;
#   - a run resumed mid-epoch from a checkpoint logs the uninterrupted run's
#     losses bit for bit (the augmentation is a function of seed, epoch and
#     sample alone);
#   - a dp=2 run (mpirun) logs the 1-rank run's losses (1e-5): every rank
#     sees exactly the 1-rank run's augmented samples;
#   - more loader threads give the same losses bit for bit;
#   - a spec that does not fit the input is refused with one line.
#
# Usage: /usr/bin/python3 test/Training/augment_runs.py --bin build/bin --work DIR
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
FAILED = []
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")
PY = "/usr/bin/python3"


def check(ok, what, detail=""):
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not detail else ": " + str(detail)),
          flush=True)
    if not ok:
        FAILED.append(what)


def losses(path):
    return [json.loads(l)["loss"] for l in open(path) if l.strip()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    w = os.path.abspath(args.work)
    os.makedirs(w, exist_ok=True)
    for script in ("make_data.py", "model.py"):
        subprocess.run([PY, os.path.join(ROOT, "examples", "digits", script), w], check=True,
                       capture_output=True)
    model = os.path.join(w, "digits_mlp.onnx")

    def compile_exe(name, extra):
        out = os.path.join(w, name)
        r = subprocess.run([os.path.join(args.bin, "kiln-compile"), model, "-o", out,
                            "--batch-size", "32", "--loss", "cross-entropy", "--optimizer",
                            "adam", "--lr", "0.01"] + extra, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("kiln-compile failed: " + r.stderr)
        return out

    hard = compile_exe("hard.train", [])
    soft = compile_exe("soft.train", ["--soft-labels"])
    data = ["--data", "x=" + os.path.join(w, "train_x.npy"),
            "--data", "labels=" + os.path.join(w, "train_y.npy")]
    evald = ["--eval-data", "x=" + os.path.join(w, "test_x.npy"),
             "--eval-data", "labels=" + os.path.join(w, "test_y.npy")]

    def run(exe, extra, ranks=1):
        cmd = ([exe] if ranks == 1 else
               ["mpirun", "--oversubscribe", "-np", str(ranks), exe]) + data + extra + [
                   "--threads", "1", "--log-every", "0"]
        return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600)

    def accuracy(r):
        for line in r.stdout.splitlines():
            if line.startswith("eval: "):
                return float(line.split("accuracy ")[1].split()[0])
        return 0.0

    # No flip: a mirrored digit is often another digit (or none).
    geo = "image=1x8x8,crop=8,pad=1,jitter=0.2,0.2"
    plain = os.path.join(w, "plain.jsonl")
    r0 = run(hard, ["--epochs", "4", "--metrics", plain, "--seed", "3"] + evald)
    aug = os.path.join(w, "aug.jsonl")
    r1 = run(hard, ["--epochs", "4", "--metrics", aug, "--seed", "3", "--augment", geo] + evald)
    check(r0.returncode == 0 and r1.returncode == 0, "the digits MLP trains with and without "
          "--augment", (r0.stderr + r1.stderr)[-300:])
    a0, a1 = accuracy(r0), accuracy(r1)
    l0, l1 = losses(plain), losses(aug)
    check(l0[0] != l1[0] and "augment: x: image 1x8x8" in r1.stdout,
          "crop+jitter changes the batches from the first step", (l0[0], l1[0]))
    check(a1 >= 0.85 and a1 >= a0 - 0.08 and np.mean(l1[-10:]) < 0.5 * np.mean(l1[:10]),
          "crop+jitter learns: test accuracy %.3f (plain %.3f)" % (a1, a0))

    mix = "image=1x8x8,crop=8,pad=1,mixup=0.4"
    sm = os.path.join(w, "soft.jsonl")
    r = run(soft, ["--epochs", "4", "--metrics", sm, "--seed", "3", "--augment", mix] + evald)
    check(r.returncode == 0 and accuracy(r) >= 0.8,
          "mixup with soft labels learns: test accuracy %.3f" % accuracy(r), r.stderr[-300:])

    # Resume mid-epoch (44 steps per epoch): 70 steps at once, against 25 +
    # a resumed run to 70.
    full = os.path.join(w, "full.jsonl")
    r = run(soft, ["--steps", "70", "--metrics", full, "--seed", "4", "--augment", mix])
    ck = os.path.join(w, "ck")
    shutil.rmtree(ck, ignore_errors=True)
    part = os.path.join(w, "part.jsonl")
    ra = run(soft, ["--steps", "25", "--metrics", part, "--seed", "4", "--augment", mix,
                    "--checkpoint-dir", ck])
    rb = run(soft, ["--steps", "70", "--metrics", part, "--seed", "4", "--augment", mix,
                    "--checkpoint-dir", ck, "--resume"])
    ok = r.returncode == 0 and ra.returncode == 0 and rb.returncode == 0
    check(ok and losses(full) == losses(part) and len(losses(full)) == 70,
          "a run resumed at step 25 (mid-epoch) with mixup logs the uninterrupted 70 losses "
          "bit for bit", (r.stderr + ra.stderr + rb.stderr)[-300:])

    # Loader threads do not change what a step sees.
    t4 = os.path.join(w, "t4.jsonl")
    r = run(soft, ["--steps", "70", "--metrics", t4, "--seed", "4", "--augment", mix,
                   "--loader-threads", "4"])
    check(r.returncode == 0 and losses(t4) == losses(full),
          "4 loader threads give the 2-thread run's losses bit for bit")

    # dp=2: each rank augments its half of every global batch as the 1-rank
    # run did (global batch 32 on both).
    one = os.path.join(w, "one.jsonl")
    two = os.path.join(w, "two.jsonl")
    r1 = run(soft, ["--steps", "30", "--metrics", one, "--seed", "5", "--augment", mix])
    # --batch-size is the global batch whatever the mesh: 32, 16 per rank.
    soft2 = compile_exe("soft2.train", ["--soft-labels", "--mesh", "dp=2"])
    r2 = run(soft2, ["--steps", "30", "--metrics", two, "--seed", "5", "--augment", mix],
             ranks=2)
    ok = r1.returncode == 0 and r2.returncode == 0
    a, b = (losses(one), losses(two)) if ok else ([], [1])
    rel = max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b)) if ok and len(a) == len(
        b) else 1
    check(ok and len(a) == 30 and rel <= 1e-5,
          "dp=2 with mixup: 30 losses match the 1-rank run (worst %.1e)" % rel,
          (r1.stderr + r2.stderr)[-300:])

    r = run(hard, ["--steps", "2", "--augment", "image=1x8x8,crop=12"])
    err = r.stderr.strip().splitlines()
    check(r.returncode == 1 and len(err) == 1 and err[0].endswith("crop 12 is larger than input x's 8x8 images"),
          "a crop larger than the image is refused with one line", r.stderr)
    r = run(hard, ["--steps", "2", "--augment", "mixup=0.2"])
    err = r.stderr.strip().splitlines()
    check(r.returncode == 1 and len(err) == 1 and "--soft-labels" in err[0],
          "mixup without soft labels says to compile with --soft-labels", r.stderr)

    for f in FAILED:
        print("FAILED: " + f)
    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
