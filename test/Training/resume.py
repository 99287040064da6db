#!/usr/bin/python3
# Crash safety of the training executable: a run killed with SIGKILL at
# random moments and resumed with --resume must log the same losses, bit for
# bit, and end with the same weights as an uninterrupted run; a damaged
# newest checkpoint is refused with a message and the previous good one is
# used; a checkpoint of another model is refused.
#
# Usage: /usr/bin/python3 test/Training/resume.py --bin build/bin --work DIR
#            [--seed S] [--kills N]
#
# Cases: a GPT decoder with dropout 0.1 and Adam (the dropout masks and the
# optimizer moments must come back), a CNN with BatchNorm and Nesterov
# momentum with a cosine schedule (running statistics, momentum buffers, the
# schedule position). Both shuffle every epoch, so the data order must be
# restored too. Prints one line per check and exits 1 if any fails.
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import onnx.numpy_helper
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Models"))
import export_models as em  # noqa: E402

BATCH = 8
STEPS = 36      # 3 epochs of 12 steps
SAMPLES = 100   # 12 steps per epoch, the last 4 samples dropped
FAILED = []


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def prepare(args, name):
    work = os.path.join(args.work, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    torch.manual_seed(0)
    g = np.random.default_rng(3)
    if name == "gpt":
        model, in_name = em.GPT(dropout=0.1), "idx"
        x = g.integers(0, 64, size=(SAMPLES, 16)).astype(np.int64)
        y = g.integers(0, 64, size=(SAMPLES, 16)).astype(np.int64)
        flags = ["--optimizer", "adam", "--lr", "0.003"]
    else:
        model, in_name = em.CNN(), "x"
        x = g.standard_normal((SAMPLES, 1, 28, 28)).astype(np.float32)
        y = g.integers(0, 10, size=(SAMPLES,)).astype(np.int64)
        flags = ["--optimizer", "momentum", "--momentum", "0.9", "--nesterov",
                 "--lr", "0.05", "--lr-schedule", "cosine", "--warmup-steps", "4"]
    model.train()
    onnx_path = os.path.join(work, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(x[:BATCH]),), onnx_path,
                          opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=[in_name],
                          output_names=["logits"])
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)
    exe = os.path.join(work, "model.train")
    r = subprocess.run([os.path.join(args.bin, "kiln-compile"), onnx_path, "-o", exe,
                        "--batch-size", str(BATCH), "--loss", "cross-entropy"] + flags,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("kiln-compile failed: " + r.stderr.strip())
    base = [exe, "--data", "%s=%s" % (in_name, os.path.join(work, "x.npy")),
            "--data", "labels=" + os.path.join(work, "y.npy"),
            "--steps", str(STEPS), "--seed", "11", "--log-every", "0"]
    return work, base


def losses(path):
    # The loss as written (17 significant digits): equal text is equal bits.
    out = {}
    for line in open(path):
        if line.strip():
            j = json.loads(line)
            out[j["step"]] = repr(j["loss"])
    return [out.get(s) for s in range(STEPS)]


def weights(path):
    return {t.name: onnx.numpy_helper.to_array(t).tobytes()
            for t in onnx.load(path).graph.initializer}


def run_case(args, name, rng):
    work, base = prepare(args, name)
    ref_m = os.path.join(work, "ref.jsonl")
    ref_o = os.path.join(work, "ref.onnx")
    r = subprocess.run(base + ["--metrics", ref_m, "--export-onnx", ref_o],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("%s: reference run failed: %s" % (name, r.stderr.strip()))
    ref = losses(ref_m)

    ck = os.path.join(work, "ck")
    met = os.path.join(work, "run.jsonl")
    out = os.path.join(work, "run.onnx")
    cmd = base + ["--metrics", met, "--export-onnx", out, "--checkpoint-dir", ck,
                  "--checkpoint-every", "5", "--keep-checkpoints", "2", "--resume"]
    kills = 0
    for attempt in range(args.kills):
        # Kill once the run has done a random number of steps of those left,
        # plus a random fraction of a few milliseconds: mid-step,
        # mid-checkpoint or between. (The CNN's whole run can take less than
        # 20 ms on a fast machine: a longer delay let it finish unkilled.)
        done_before = sum(1 for l in open(met)) if os.path.exists(met) else 0
        target = rng.randint(1, max(1, (STEPS - done_before) // 2))
        delay = rng.random() * 0.003
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        t0 = time.time()
        while p.poll() is None and time.time() - t0 < 120:
            n = sum(1 for l in open(met)) if os.path.exists(met) else 0
            if n >= done_before + target:
                break
            time.sleep(0.001)
        time.sleep(delay)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            kills += 1
        p.wait()
        p.stderr.close()
    r = subprocess.run(cmd, capture_output=True, text=True)
    check(r.returncode == 0, "%s: final resume exits 0 (%s)" % (name, r.stderr.strip()[-200:]))
    got = losses(met)
    same = sum(1 for a, b in zip(got, ref) if a == b and a is not None)
    check(same == STEPS, "%s: %d SIGKILLs, %d/%d step losses bit-identical to the "
          "uninterrupted run" % (name, kills, same, STEPS))
    check(os.path.exists(out) and weights(out) == weights(ref_o),
          "%s: exported weights bit-identical to the uninterrupted run" % name)
    leftovers = [d for d in os.listdir(ck) if not d.startswith("step-")]
    check(not leftovers, "%s: no partial checkpoint left in %s (%s)" % (name, ck, leftovers))
    return work, base, ck, ref


def damaged_newest(args, name, work, base, ref):
    # Train all the steps with a checkpoint every 5 (kept: 30, 35, 36), flip a
    # byte of the newest one's tensors and cut the next one's manifest short,
    # resume: both must be named and skipped, step 30 used, and the last six
    # steps logged again with the uninterrupted run's losses.
    ck = os.path.join(work, "ck2")
    met = os.path.join(work, "dmg.jsonl")
    cmd = base + ["--metrics", met, "--checkpoint-dir", ck, "--checkpoint-every", "5"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("%s: run failed: %s" % (name, r.stderr.strip()))
    newest = os.path.join(ck, "step-00000036", "tensors.safetensors")
    with open(newest, "r+b") as f:
        f.seek(os.path.getsize(newest) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    manifest = os.path.join(ck, "step-00000035", "manifest.json")
    with open(manifest, "r+b") as f:
        f.truncate(os.path.getsize(manifest) // 2)
    r = subprocess.run(cmd + ["--resume"], capture_output=True, text=True)
    notes = [l for l in r.stderr.splitlines() if "checkpoint" in l]
    check(r.returncode == 0 and any("step-00000036" in l and "checksum" in l for l in notes)
          and any("step-00000035" in l and "manifest" in l for l in notes)
          and "step-00000030" in r.stderr,
          "%s: a corrupted and a partial checkpoint are named and skipped: %s"
          % (name, " | ".join(notes)[:400]))
    check(losses(met) == ref, "%s: the run resumed from the previous good checkpoint "
          "logs the uninterrupted run's losses" % name)
    return ck


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--kills", type=int, default=3)
    args = p.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    print("kill schedule seed %d (rerun with --seed %d)" % (seed, seed), flush=True)
    rng = random.Random(seed)
    os.makedirs(args.work, exist_ok=True)
    cks = {}
    for name in ("gpt", "cnn"):
        work, base, ck, ref = run_case(args, name, rng)
        cks[name] = (base, damaged_newest(args, name, work, base, ref))
    # The GPT's executable pointed at the CNN's checkpoints.
    base, _ = cks["gpt"]
    _, cnn_ck = cks["cnn"]
    r = subprocess.run(base + ["--checkpoint-dir", cnn_ck, "--resume"],
                       capture_output=True, text=True)
    check(r.returncode == 1 and "another model" in r.stderr
          and len(r.stderr.strip().splitlines()) == 1,
          "a checkpoint of another model is refused: %s" % r.stderr.strip())
    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
