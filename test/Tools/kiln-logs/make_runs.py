#!/usr/bin/python3
"""Synthetic training runs for kiln-logs's tests, with a fixed seed.

Usage: make_runs.py DIR

Writes, as `OUT --metrics` would (one JSON object per step, step 0-based,
a non-finite loss as null), with realistic noise: step times jittered +-30%,
a slow first step and warm-up, one step in a hundred 1.5-2.5x slower, the
step after a checkpoint 1.5x slower; a loss falling as 0.25 + 2.05 exp(-s/180)
under a lognormal minibatch noise with occasional harder batches; an eval
every 200 steps and a checkpoint every 100, each a pause in wall time between
two rows; the system metrics (rss_mib, peak_mib, cpu_util, comm_mb).

  clean/            1000 clean steps, metrics.jsonl and train.log
  clean-<k>.jsonl   more clean runs: other seeds, noise and speeds
  clean-notime.jsonl  a clean run in the older format without "time"
  planted/          the three planted events in one run (metrics.jsonl,
                    train.log): the loss null at step 57 (the run went on),
                    a restart at step 300 (killed after step 317, the
                    checkpoint at 300 resumed 41 s later, rows 300-317
                    dropped as --resume does), 3x slower from step 800
  nan.jsonl         a run stopped by a NaN loss at step 57
  concat.jsonl      two attempts' files concatenated: steps 300-317 twice
  scaled.jsonl      loss scaling, no "time": steps 12, 13 and 40 skipped, a
                    loss spike at step 412 (5.3x), a stall at step 640 (with
                    the run's own step-time alert), a memory alert at 700
  diverge.jsonl     the loss rising for good from step 600
  console.log       a stdout log alone: interrupted after step 40, resumed
  bad/              broken inputs
"""
import json
import math
import os
import random
import sys

BATCH = 32
STEPS_PER_EPOCH = 56
T0 = 1.7e9


def loss_at(s):
    return 0.25 + 2.05 * math.exp(-s / 180.0)


def lr_at(s, total, lr=0.01, warmup=50):
    if s < warmup:
        return lr * (s + 1) / warmup
    p = (s - warmup) / max(1, total - warmup)
    return 0.001 + (lr - 0.001) * (1 + math.cos(math.pi * p)) / 2


class Gen:
    """One process's steps: its own warm-up, noise and clock."""

    def __init__(self, seed, total=1000, base_ms=4.0, noise=0.12, jitter=0.3,
                 eval_every=200, ckpt_every=100, time=True, sysmetrics=True):
        self.r = random.Random(seed)
        self.total = total
        self.base_ms = base_ms
        self.noise = noise
        self.jitter = jitter
        self.eval_every = eval_every
        self.ckpt_every = ckpt_every
        self.time = time
        self.sysmetrics = sysmetrics
        self.clock = T0
        self.slow = {}          # step -> factor on the step time
        self.loss_override = {}  # step -> loss (None: non-finite)
        self.loss_trend = loss_at

    def step_ms(self, s, since_start):
        r = self.r
        t = self.base_ms * r.uniform(1 - self.jitter, 1 + self.jitter)
        if since_start == 0:
            t *= r.uniform(25, 35)
        elif since_start in (1, 2):
            t *= r.uniform(1.2, 2.0)
        if r.random() < 0.01:
            t *= r.uniform(1.5, 2.5)
        if self.ckpt_every and s % self.ckpt_every == 0 and since_start > 0:
            t *= 1.5
        for a, f in self.slow.items():
            if s >= a:
                t *= f
        return t

    def row(self, s, since_start):
        r = self.r
        ms = self.step_ms(s, since_start)
        self.clock += ms / 1000.0
        loss = self.loss_trend(s) * math.exp(r.gauss(0, self.noise))
        if r.random() < 0.02:
            loss *= r.uniform(1.2, 1.6)
        if s in self.loss_override:
            loss = self.loss_override[s]
        row = {"step": s, "epoch": s // STEPS_PER_EPOCH,
               "loss": None if loss is None else float("%.9g" % loss),
               "lr": float("%.9g" % lr_at(s, self.total)),
               "grad_norm": float("%.6g" % (0.5 + loss_at(s) * r.uniform(0.5, 1.5))),
               "samples_per_s": round(BATCH * 1000.0 / ms, 1),
               "step_ms": round(ms, 3)}
        more = s + 1 < self.total
        if self.eval_every and (s + 1) % self.eval_every == 0 and more:
            row["eval_loss"] = float("%.9g" % (1.1 * loss_at(s) * math.exp(r.gauss(0, 0.02))))
            row["eval_accuracy"] = round(min(0.99, 1.0 - 0.3 * loss_at(s)), 4)
        if self.time:
            row["time"] = round(self.clock, 3)
        if self.sysmetrics:
            row["rss_mib"] = round(512 + 0.01 * s + r.uniform(0, 2), 1)
            row["peak_mib"] = round(530 + 0.01 * s, 1)
            row["cpu_util"] = round(r.uniform(0.85, 0.97), 3)
            row["comm_mb"] = 0.0
        # What happens after the row: an eval, a checkpoint (wall time that
        # is no step's).
        if "eval_loss" in row:
            self.clock += r.uniform(0.3, 0.4)
        if self.ckpt_every and (s + 1) % self.ckpt_every == 0 and more:
            self.clock += r.uniform(0.12, 0.18)
        return row

    def steps(self, a, b, since_start=0):
        return [self.row(s, since_start + (s - a)) for s in range(a, b)]


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def log_lines(rows, total, head, every=10):
    out = [head]
    for row in rows:
        done = row["step"] + 1
        if done % every == 0 or done == total:
            loss = row["loss"]
            out.append("step %d/%d  loss %s  lr %.3e  grad-norm %.4f  %.1f samples/s  ETA 0:00:%02d"
                       % (done, total, "nan" if loss is None else "%.6f" % loss, row["lr"],
                          row["grad_norm"], row["samples_per_s"], (total - done) // 100))
        if "eval_loss" in row:
            out.append("eval (step %d): loss %.6f  accuracy %.4f  (360 samples)"
                       % (done, row["eval_loss"], row["eval_accuracy"]))
        if done % 100 == 0 and done < total:
            out.append("checkpoint: ckpt/step-%08d" % done)
    return out


HEAD = ("kiln-train: digits.onnx: 1797 samples, batch 32, 56 steps/epoch, "
        "adam lr 0.01")


def main(out):
    os.makedirs(out, exist_ok=True)

    # Clean runs.
    os.makedirs(os.path.join(out, "clean"), exist_ok=True)
    g = Gen(1)
    rows = g.steps(0, 1000)
    write_jsonl(os.path.join(out, "clean", "metrics.jsonl"), rows)
    with open(os.path.join(out, "clean", "train.log"), "w") as f:
        f.write("\n".join(log_lines(rows, 1000, HEAD) +
                          ["eval: loss 0.305121  accuracy 0.9167  (360 samples)"]) + "\n")
    variants = [dict(seed=11, base_ms=0.8, noise=0.05),
                dict(seed=12, base_ms=60.0, noise=0.25),
                dict(seed=13, base_ms=4.0, noise=0.12, total=3000),
                dict(seed=14, base_ms=4.0, noise=0.35, jitter=0.3),
                dict(seed=15, base_ms=15.0, noise=0.08, eval_every=50, ckpt_every=25)]
    for k, v in enumerate(variants, 1):
        total = v.pop("total", 1000)
        g = Gen(total=total, **v)
        write_jsonl(os.path.join(out, "clean-%d.jsonl" % k), g.steps(0, total))
    g = Gen(21, time=False, sysmetrics=False)
    write_jsonl(os.path.join(out, "clean-notime.jsonl"), g.steps(0, 1000))

    # The planted run: NaN at 57 (the run goes on), restart at 300, 3x
    # slower from 800.
    os.makedirs(os.path.join(out, "planted"), exist_ok=True)
    g = Gen(2)
    g.loss_override[57] = None
    g.slow[800] = 3.0
    first = g.steps(0, 318)           # killed after step 317
    kept = first[:300]                # --resume keeps the rows before 300
    g.clock += 38.4 + 2.5             # down, then the relaunch and the load
    second = g.steps(300, 1000)       # a fresh process: its own warm-up
    write_jsonl(os.path.join(out, "planted", "metrics.jsonl"), kept + second)
    lines = log_lines(first, 1000, HEAD)
    lines.insert(12, "warning: rank 0 memory at 93% of 24 GiB (alert at 90%) (step 120)")
    lines += log_lines(second, 1000, HEAD + "; resumed from ckpt/step-00000300 at step 300")
    with open(os.path.join(out, "planted", "train.log"), "w") as f:
        f.write("\n".join(lines) + "\n")

    # A real NaN: the run stops at it.
    g = Gen(3)
    g.loss_override[57] = None
    write_jsonl(os.path.join(out, "nan.jsonl"), g.steps(0, 58))

    # Two attempts' metrics concatenated (not truncated by --resume).
    g = Gen(4)
    first = g.steps(0, 318)
    g.clock += 40.0
    write_jsonl(os.path.join(out, "concat.jsonl"), first + g.steps(300, 1000))

    # Loss scaling, older format (no time): skipped steps, a spike, a stall.
    g = Gen(5, time=False)
    rows = g.steps(0, 1000)
    scale = 65536.0
    for row in rows:
        s = row["step"]
        skipped = s in (12, 13, 40)
        row["loss_scale"] = scale
        row["skipped"] = skipped
        if skipped:
            row["grad_norm"] = None
            scale /= 2
        if s == 412:
            med = sorted(r["loss"] for r in rows[s - 50:s])[25]
            row["loss"] = float("%.9g" % (5.3 * med))
        if s == 700:
            row["alerts"] = ["memory"]
        if s == 640:
            row["alerts"] = ["step-time"]
            row["step_ms"] = 1500.0  # 1.5 s: a blocked read, swapping
            row["samples_per_s"] = round(BATCH * 1000.0 / row["step_ms"], 1)
    write_jsonl(os.path.join(out, "scaled.jsonl"), rows)

    # Diverging: the loss turns and rises from step 600, 4x by the end.
    g = Gen(6)
    g.loss_trend = lambda s: loss_at(s) * (1 if s < 600 else math.exp((s - 600) / 250.0))
    write_jsonl(os.path.join(out, "diverge.jsonl"), g.steps(0, 1000))

    # A stdout log alone: 100 steps, interrupted after 40, resumed.
    g = Gen(7, total=100, eval_every=0, ckpt_every=0)
    rows = g.steps(0, 40)
    lines = log_lines(rows, 100, HEAD)
    lines.append("warning: rank 0 memory at 91% of 24 GiB (alert at 90%) (step 35)")
    lines.append("checkpoint: ckpt/step-00000040")
    lines.append("interrupted after step 40/100; --resume continues from it")
    lines += log_lines(g.steps(40, 100), 100,
                       HEAD + "; resumed from ckpt/step-00000040 at step 40")
    lines.append("eval: loss 0.412345  accuracy 0.8889  (360 samples)")
    with open(os.path.join(out, "console.log"), "w") as f:
        f.write("\n".join(lines) + "\n")

    # Broken inputs.
    bad = os.path.join(out, "bad")
    os.makedirs(bad, exist_ok=True)
    good = [json.dumps(r) for r in Gen(8).steps(0, 6)]
    files = {
        "broken.jsonl": good[:4] + ['{"step": 4, "loss": 1.2'] + good[5:],
        "nostep.jsonl": good[:2] + ['{"loss": 1.5, "lr": 0.01}'] + good[3:],
        "floatstep.jsonl": good[:1] + ['{"step": 1.5, "loss": 1.5}'],
        "strloss.jsonl": good[:3] + ['{"step": 3, "loss": "1.5"}'],
        "notobject.jsonl": good[:1] + ["[1, 2, 3]"],
        "garbage.txt": ["this is not a training log", "nor metrics"],
    }
    for name, lines in files.items():
        with open(os.path.join(bad, name), "w") as f:
            f.write("\n".join(lines) + "\n")
    # A last line cut off by a kill: noted, not an error.
    with open(os.path.join(bad, "cutoff.jsonl"), "w") as f:
        f.write("\n".join(good[:5]) + "\n" + good[5][:20])
    with open(os.path.join(bad, "binary.jsonl"), "wb") as f:
        f.write(b"\x00\x01\x02PK\x03\x04" * 50)
    os.makedirs(os.path.join(bad, "empty-dir"), exist_ok=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_runs.py DIR")
    main(sys.argv[1])
