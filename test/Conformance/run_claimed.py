#!/usr/bin/env python3
"""Runs the ONNX node tests of every op Kiln claims; fails if any fails.

The list (claimed-node-tests.txt) is written by scripts/conformance.py; the
exclusions (excluded-node-tests.txt) say, one per line, `test_name: reason`.
"""
import argparse
import os
import subprocess
import sys

DATA = "/usr/share/libonnx-testdata/data/node"


def read_list(path):
    out = []
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--list", required=True)
    ap.add_argument("--excluded", required=True)
    opts = ap.parse_args()
    excluded = {}
    for line in read_list(opts.excluded):
        name, sep, reason = line.partition(":")
        if not sep or not reason.strip():
            print("excluded test without a reason: %r" % line)
            return 1
        excluded[name.strip()] = reason.strip()
    tests = [t for t in read_list(opts.list) if t not in excluded]
    missing = [t for t in tests if not os.path.isdir(os.path.join(DATA, t))]
    if missing:
        print("missing test folders: " + ", ".join(missing))
        return 1
    folders = [os.path.join(DATA, t) for t in tests]
    # Two processes share the work (the machine has 2 cores).
    half = (len(folders) + 1) // 2
    procs = [subprocess.Popen([opts.kiln_run, "--onnx-test"] + part,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace",
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
             for part in (folders[:half], folders[half:]) if part]
    lines = []
    for p in procs:
        out, _ = p.communicate()
        lines += out.splitlines()
    passed = [l for l in lines if l.startswith("PASS ")]
    failed = [l for l in lines if l.startswith("FAIL ")]
    for l in failed:
        print(l)
    print("%d claimed node tests passed, %d failed, %d excluded" %
          (len(passed), len(failed), len(excluded)))
    return 0 if not failed and len(passed) == len(tests) else 1


if __name__ == "__main__":
    sys.exit(main())
