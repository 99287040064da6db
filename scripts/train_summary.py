#!/usr/bin/python3
"""One-line summary of a Kiln training run (used by scripts/run-*.sh).

Usage: train_summary.py NAME LOG [METRICS.jsonl] [--seconds S]

Losses come from the --metrics file ({"step": s, "loss": L} per line); when
it is missing or empty, from the LOG's lines that mention "loss" (the eval
line excepted). The eval line, when present, is
"eval: loss L  accuracy A  (N samples)". Prints

  NAME: loss FIRST -> LAST over N steps, test accuracy A (eval loss L), S s

and exits 1 when no loss was found or the last loss is not below the first.
"""
import argparse
import json
import math
import os
import re
import sys

NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"


def from_metrics(path):
    steps = []
    if not path or not os.path.exists(path):
        return steps
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if "loss" in rec:
                steps.append((rec.get("step", len(steps)), float(rec["loss"])))
    return steps


def from_log(lines):
    steps = []
    for line in lines:
        if line.lstrip().startswith("eval"):
            continue
        m = re.search(r"\bloss\b[\s=:]*" + NUM, line)
        if m:
            s = re.search(r"\bstep\b[\s=:]*(\d+)", line)
            steps.append((int(s.group(1)) if s else len(steps), float(m.group(1))))
    return steps


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name")
    ap.add_argument("log")
    ap.add_argument("metrics", nargs="?")
    ap.add_argument("--seconds", type=float)
    opts = ap.parse_args(argv)
    with open(opts.log, errors="replace") as f:
        lines = f.read().splitlines()
    steps = from_metrics(opts.metrics) or from_log(lines)
    if not steps:
        print("%s: no loss found in %s%s" % (opts.name, opts.log,
              " or " + opts.metrics if opts.metrics else ""))
        return 1
    steps.sort()
    first, last = steps[0][1], steps[-1][1]
    n = steps[-1][0] - steps[0][0] + 1
    text = "%s: loss %.4f -> %.4f over %d steps" % (opts.name, first, last, n)
    for line in lines:
        m = re.match(r"\s*eval:\s*loss\s+" + NUM + r"\s+accuracy\s+" + NUM + r"(%?)", line)
        if m:
            acc = float(m.group(2))
            pct = acc if m.group(3) or acc > 1 else 100 * acc
            text += ", test accuracy %.1f%% (eval loss %.4f)" % (pct, float(m.group(1)))
    if opts.seconds is not None:
        text += ", %.0f s" % opts.seconds
    ok = math.isfinite(last) and last < first
    if not ok:
        text += "  FAILED: the loss did not fall"
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
