#!/usr/bin/python3
# What watching a run costs (issue 20): the median step time of one
# executable trained with nothing on, and with --profile (every step traced:
# --profile-steps 0:N), --tensorboard (every step's scalars, histograms of
# every parameter and gradient every 100 steps) and --metrics together;
# target: within 3% of off. Runs alternate (off, on, off, on, ...) so that
# drift of a shared machine hits both; each is single-threaded.
#
#   /usr/bin/python3 bench/observe.py [--bin build/bin] [--steps 300] [--reps 3]
#       [--models mlp,gpt,cnn]
#
# mlp, gpt, cnn: test/Models' MLP, GPT decoder and CNN (batch 16), the
# models of test/Training/data_parallel.py.
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "Training"))
import data_parallel as dpt  # noqa: E402


def median_step(met, skip):
    ms = [json.loads(l)["step_ms"] for l in open(met) if l.strip()][skip:]
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--models", default="mlp,gpt,cnn")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kiln-observe-")
    print("%-5s %10s %10s %8s" % ("model", "off ms", "on ms", "on/off"))
    for name in args.models.split(","):
        onnx_path, flags, data = dpt.export(work, name)
        exe = dpt.compile_exe(args, onnx_path, os.path.join(work, name + ".train"), flags, 1)
        off, on = [], []
        for rep in range(args.reps):
            for watch in (False, True):
                met = os.path.join(work, "m.jsonl")
                extra = ["--steps", str(args.steps), "--log-every", "50", "--metrics", met]
                if watch:
                    extra += ["--profile", os.path.join(work, "t.json"), "--profile-steps",
                              "0:%d" % args.steps, "--tensorboard",
                              os.path.join(work, "tb%d" % rep), "--histogram-every", "100"]
                r = dpt.run(exe, 1, data + extra)
                if r.returncode != 0:
                    raise SystemExit(r.stderr)
                (on if watch else off).append(median_step(met, 20))
        a, b = statistics.median(off), statistics.median(on)
        print("%-5s %10.3f %10.3f %8.3f" % (name, a, b, b / a), flush=True)


if __name__ == "__main__":
    main()
