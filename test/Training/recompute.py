#!/usr/bin/python3
# Activation recompute (issue 18): --recompute selective|full and
# --memory-budget MB rebuild forward activations in backward instead of
# keeping them.
#   - on 1 rank the GPT decoder (dropout 0.1: the copies draw the same
#     masks) trains with bit-identical losses and final weights under
#     selective, full and a budget, and the plan's arena shrinks (selective
#     and full below none; a budget met by the arena the buffers take);
#   - under pp=2 GPipe with 8 microbatches (each stage holds 8 microbatches'
#     activations at the end of the forwards) full recompute shrinks every
#     stage's arena and the losses stay bit-identical to the same pipeline
#     without it, and within 1e-5 of the 1-rank run;
#   - bad input: a budget below the smallest peak recompute reaches (the
#     line names that minimum), an unknown mode: one line, exit 1.
#
# Usage: /usr/bin/python3 test/Training/recompute.py --bin build/bin --work DIR
import os
import re
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Models"))
sys.path.insert(0, HERE)
import export_models as em  # noqa: E402
from rank_runs import (FAILED, check, close_losses, export_samples,  # noqa: E402
                       harness_args, losses, run, weights)

BATCH = 16
SAMPLES = 64
STEPS = 6


def main():
    args, w = harness_args()

    g = np.random.default_rng(11)
    torch.manual_seed(0)
    x = g.integers(0, 64, size=(SAMPLES, 32)).astype(np.int64)
    y = g.integers(0, 64, size=(SAMPLES, 32)).astype(np.int64)
    onnx_path, data = export_samples(w, "gpt", em.GPT(block_size=32, d_model=48, n_head=2,
                                                     dropout=0.1), "idx", x, y, BATCH)
    flags = ["--batch-size", str(BATCH), "--loss", "cross-entropy", "--optimizer", "momentum",
             "--momentum", "0.9", "--lr", "0.05"]
    base = data + ["--steps", str(STEPS), "--seed", "5", "--log-every", "0"]

    def compile_exe(name, extra):
        exe = os.path.join(w, name)
        r = subprocess.run([os.path.join(args.bin, "kiln-compile"), onnx_path, "-o", exe]
                           + flags + extra, capture_output=True, text=True)
        m = re.search(r"train arena ([0-9.]+) MiB(?:; per stage ([0-9. ]+))?", r.stderr)
        stages = [float(v) for v in m.group(2).split()] if m and m.group(2) else []
        return r, exe, (float(m.group(1)) if m else None), stages

    def train(exe, ranks):
        r = run(exe, ranks, base + ["--metrics", exe + ".jsonl", "--export-onnx", exe + "-w.onnx"])
        if r.returncode:
            return None, None, r.stderr.strip()[-600:]
        return losses(exe + ".jsonl"), weights(exe + "-w.onnx"), ""

    def identical(a, b):
        return set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a)

    # 1 rank: every mode computes the same bits with a smaller arena.
    runs = {}
    for label, extra in (("none", []), ("selective", ["--recompute", "selective"]),
                         ("full", ["--recompute", "full"])):
        r, exe, arena, _ = compile_exe("gpt-" + label, extra)
        if r.returncode or arena is None:
            check(False, "--recompute %s compiles" % label, r.stderr.strip())
            continue
        l, wt, err = train(exe, 1)
        check(l is not None, "--recompute %s trains" % label, err)
        if l is not None:
            runs[label] = (l, wt, arena, r.stderr)
    if "none" in runs:
        ref_l, ref_w, ref_arena, _ = runs["none"]
        for label in ("selective", "full"):
            if label not in runs:
                continue
            l, wt, arena, log = runs[label]
            said = re.search(r"recompute: @train_step: (\d+) activations recomputed", log)
            check(l == ref_l and identical(ref_w, wt) and arena < ref_arena and said
                  and int(said.group(1)) > 0,
                  "--recompute %s on 1 rank: %d losses and the final weights bit-identical "
                  "to no recompute, arena %.2f < %.2f MiB (%s activations recomputed)"
                  % (label, STEPS, arena, ref_arena, said.group(1) if said else "no"),
                  "losses %s vs %s" % (l, ref_l))
        # A budget between full's arena and none's.
        if "full" in runs:
            budget = round((runs["full"][2] + ref_arena) / 2, 2)
            r, exe, arena, _ = compile_exe("gpt-budget", ["--memory-budget", str(budget)])
            l, wt, err = train(exe, 1) if r.returncode == 0 else (None, None, r.stderr)
            check(l is not None and arena is not None and arena <= budget and l == ref_l
                  and identical(ref_w, wt),
                  "--memory-budget %.2f MiB: arena %s MiB within it, losses and weights "
                  "bit-identical" % (budget, arena), err)
            # Below what recompute can reach: the line names the minimum.
            r, _, _, _ = compile_exe("gpt-tiny", ["--memory-budget", "0.01"])
            msg = r.stderr.strip()
            m = re.search(r"below the smallest peak recompute reaches: ([0-9.]+) MiB", msg)
            check(r.returncode == 1 and m and msg.count("\n") == 0,
                  "--memory-budget 0.01: refused, naming the smallest peak (%s MiB)"
                  % (m.group(1) if m else "?"), msg)

    # pp=2 GPipe with 8 microbatches: full recompute keeps only what a
    # stage receives and the ops with side effects.
    pipe = ["--mesh", "pp=2", "--microbatches", "8", "--schedule", "gpipe"]
    r0, exe0, _, st0 = compile_exe("gpt-pp", pipe)
    r1, exe1, _, st1 = compile_exe("gpt-pp-full", pipe + ["--recompute", "full"])
    if r0.returncode or r1.returncode or len(st0) != 2 or len(st1) != 2:
        check(False, "pp=2 gpipe M=8 compiles with and without --recompute full",
              r0.stderr.strip() + r1.stderr.strip())
    else:
        l0, w0, e0 = train(exe0, 2)
        l1, w1, e1 = train(exe1, 2)
        ok = l0 is not None and l1 is not None
        check(ok and l0 == l1 and identical(w0, w1) and all(b < a for a, b in zip(st0, st1)),
              "pp=2 gpipe M=8 --recompute full: every stage's arena smaller (%s -> %s MiB), "
              "losses and weights bit-identical to the pipeline without it" % (st0, st1),
              e0 + e1 + ("losses %s vs %s" % (l0, l1) if ok else ""))
        # Against 1 rank with the same microbatches (each draws its own
        # dropout masks, as the pipeline's do).
        r2, exe2, _, _ = compile_exe("gpt-m8", ["--microbatches", "8"])
        l2, _, e2 = train(exe2, 1) if r2.returncode == 0 else (None, None, r2.stderr)
        if ok:
            good, why = close_losses(l2, l1) if l2 is not None else (False, e2)
            check(good, "pp=2 gpipe M=8 --recompute full: losses match the 1-rank run with 8 "
                  "microbatches (%s)" % why)

    r, _, _, _ = compile_exe("gpt-bad", ["--recompute", "some"])
    msg = r.stderr.strip()
    check(r.returncode == 1 and "--recompute must be none, selective or full" in msg
          and msg.count("\n") == 0, "refused: an unknown --recompute mode", msg)

    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
