#!/usr/bin/python3
# Pipeline parallelism (issue 18): the measured bubble of each schedule and
# the stages' activation memory.
#   - A decoder (8 layers, d_model 128, 4 heads, T = 64, vocabulary 256)
#     trained with momentum at --mesh pp=S for gpipe, 1f1b, interleaved
#     (--virtual-stages 2) and zb, M in {4, 8, 16} microbatches of one
#     global batch. Each rank's bubble is measured from kiln-train
#     --profile's trace: 1 - (its kernels' time, the send/recv waits
#     excluded) / (the step's wall time), averaged over the ranks and the
#     profiled steps. Beside it the textbook bubble ((S-1)/(M+S-1), divided
#     by V for interleaved, 0 for ZB-H1) and the schedule simulator's
#     (kiln-compile --emit schedule, unit-cost forward/backward).
#   - The per-stage arena (kiln-compile's plan: activations, gradients,
#     temporaries) of GPipe and 1F1B at M = 16, with and without
#     --recompute full.
# One thread per rank; with more ranks than cores the ranks share them, so
# the measured bubble is a lower bound of what S free cores would show (a
# rank waiting frees its core for the others).
#
#   /usr/bin/python3 bench/pipeline.py [--bin build/bin] [--stages 4]
#       [--steps 6] [--batch 32]
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "Models"))
sys.path.insert(0, os.path.join(HERE, "..", "test", "Training"))
import export_models as em  # noqa: E402
from rank_runs import ENV, export_samples  # noqa: E402

COMM_KERNELS = ("recv", "send")


def measured_bubble(trace_path):
    """Mean over ranks of 1 - busy / step, from the Chrome trace."""
    events = json.load(open(trace_path))["traceEvents"]
    per_rank = {}
    for e in events:
        if "dur" not in e or "pid" not in e:
            continue
        r = per_rank.setdefault(e["pid"], {"step": 0.0, "busy": 0.0})
        if e.get("cat") == "step":
            r["step"] += e["dur"]
        elif e.get("cat") == "kernel" and e["name"] not in COMM_KERNELS:
            r["busy"] += e["dur"]
    fr = [1.0 - r["busy"] / r["step"] for r in per_rank.values() if r["step"] > 0]
    return sum(fr) / len(fr) if fr else float("nan"), len(fr)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
    p.add_argument("--stages", type=int, default=4)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d-model", type=int, default=128)
    args = p.parse_args()
    S = args.stages
    work = tempfile.mkdtemp(prefix="kiln-pipeline-bench-")
    g = np.random.default_rng(1)
    torch.manual_seed(0)
    T = 64
    x = g.integers(0, 256, size=(4 * args.batch, T)).astype(np.int64)
    y = g.integers(0, 256, size=(4 * args.batch, T)).astype(np.int64)
    model = em.GPT(vocab=256, block_size=T, n_layer=args.layers, n_head=4,
                   d_model=args.d_model, dropout=0.0)
    onnx_path, data = export_samples(work, "gpt", model, "idx", x, y, args.batch)
    flags = ["--batch-size", str(args.batch), "--loss", "cross-entropy", "--optimizer",
             "momentum", "--momentum", "0.9", "--lr", "0.05"]

    def compile_exe(name, extra):
        exe = os.path.join(work, name)
        r = subprocess.run([os.path.join(args.bin, "kiln-compile"), onnx_path, "-o", exe]
                           + flags + extra, capture_output=True, text=True)
        if r.returncode:
            raise SystemExit("kiln-compile %s: %s" % (" ".join(extra), r.stderr.strip()))
        return exe, r.stderr

    print("pipeline bench: %d-layer decoder d=%d T=%d, global batch %d, S=%d ranks "
          "(1 thread each, %d cores)" % (args.layers, args.d_model, T, args.batch, S,
                                         os.cpu_count()))
    print()
    print("| schedule | M | textbook bubble | simulated | measured | step ms |")
    print("|---|---|---|---|---|---|")
    for sched, extra, V in (("gpipe", [], 1), ("1f1b", [], 1),
                            ("interleaved", ["--virtual-stages", "2"], 2), ("zb", [], 1)):
        for M in (4, 8, 16):
            if args.batch % M:
                continue
            mesh = ["--mesh", "pp=%d" % S, "--microbatches", str(M), "--schedule", sched] + extra
            sim = subprocess.run([os.path.join(args.bin, "kiln-compile"), onnx_path, "-o",
                                  os.path.join(work, "s.txt")] + flags + mesh
                                 + ["--emit", "schedule"], capture_output=True, text=True)
            text = open(os.path.join(work, "s.txt")).read() if sim.returncode == 0 else ""
            m = re.search(r"bubble=([0-9.]+)", text)
            simulated = float(m.group(1)) if m else float("nan")
            theory = 0.0 if sched == "zb" else (S - 1) / (V * M + S - 1)
            exe, _ = compile_exe("gpt-%s-%d" % (sched, M), mesh)
            trace = exe + ".json"
            metrics = exe + ".jsonl"
            r = subprocess.run(["mpirun", "--oversubscribe", "-np", str(S), exe] + data
                               + ["--steps", str(args.steps), "--threads", "1",
                                  "--log-every", "0", "--profile", trace, "--profile-steps",
                                  "2:%d" % args.steps, "--metrics", metrics],
                               capture_output=True, text=True, env=ENV, timeout=600)
            if r.returncode:
                print("| %s | %d | run failed: %s |" % (sched, M, r.stderr.strip()[-200:]))
                continue
            bubble, ranks = measured_bubble(trace)
            steps = [json.loads(l)["step_ms"] for l in open(metrics) if l.strip()][2:]
            print("| %s%s | %d | %.3f | %.3f | %.3f | %.0f |"
                  % (sched, " V=2" if V > 1 else "", M, theory, simulated, bubble,
                     sorted(steps)[len(steps) // 2] if steps else float("nan")))

    print()
    print("| M=16 | stage arenas (MiB) | largest |")
    print("|---|---|---|")
    for sched in ("gpipe", "1f1b"):
        for rc in ("none", "full"):
            exe, log = compile_exe("mem-%s-%s" % (sched, rc),
                                   ["--mesh", "pp=%d" % S, "--microbatches", "16",
                                    "--schedule", sched, "--recompute", rc])
            m = re.search(r"train arena ([0-9.]+) MiB; per stage ([0-9. ]+)", log)
            print("| %s%s | %s | %s |" % (sched, " --recompute full" if rc == "full" else "",
                                         m.group(2).strip() if m else "?",
                                         m.group(1) if m else "?"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
