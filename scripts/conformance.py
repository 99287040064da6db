#!/usr/bin/env python3
"""ONNX backend conformance of kiln-run.

Runs `kiln-run --onnx-test` over the four groups of libonnx-testdata (node,
simple, pytorch-converted, pytorch-operator) and writes docs/Conformance.md:
counts per group, and the reason for every failure. Also writes the list of
node tests of the ops Kiln claims (the foundation issue's list) to
test/Conformance/claimed-node-tests.txt, which check-kiln runs.

  /usr/bin/python3 scripts/conformance.py [--kiln-run build/bin/kiln-run]
      [--jobs 2] [--out docs/Conformance.md] [--groups node,simple,...]
"""
import argparse
import collections
import concurrent.futures
import os
import re
import subprocess
import sys
import time

DATA = "/usr/share/libonnx-testdata/data"
GROUPS = ["node", "simple", "pytorch-converted", "pytorch-operator"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The op list of the foundation issue: every node test of these ops must pass.
CLAIMED = """Gemm MatMul Add Sub Mul Div Pow Sqrt Reciprocal Neg Abs Exp Log Tanh
Sigmoid Relu LeakyRelu Elu Erf Softplus Clip Softmax LogSoftmax Conv ConvTranspose
BatchNormalization LayerNormalization MaxPool AveragePool GlobalAveragePool
Flatten Reshape Transpose Squeeze Unsqueeze Concat Split Slice Gather Expand Tile
Where Equal Less Greater Not Cast Constant ConstantOfShape Shape Identity Dropout
Pad ReduceMean ReduceSum ReduceMax ReduceMin ArgMax Sum Max Min Mean Range
SoftmaxCrossEntropyLoss NegativeLogLikelihoodLoss QuantizeLinear DequantizeLinear Round
TopK CumSum OneHot ScatterElements Scatter ScatterND""".split()


def op_types(folder):
    """The op types of a test model's main graph (needs python3-onnx)."""
    try:
        import onnx
        m = onnx.load(os.path.join(folder, "model.onnx"), load_external_data=False)
        return [n.op_type for n in m.graph.node]
    except Exception:  # noqa: BLE001 - a broken model has no ops to report
        return []


def classify(reason):
    if reason.startswith("unsupported op"):
        return "unsupported op"
    if reason.startswith("wrong result"):
        return "wrong result"
    return "error"


def run_chunk(kiln_run, folders):
    out = subprocess.run([kiln_run, "--onnx-test"] + folders,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, errors="replace")
    results = {}
    for line in out.stdout.splitlines():
        m = re.match(r"^(PASS|FAIL) (\S+?)(?:: (.*))?$", line)
        if m:
            results[m.group(2)] = (m.group(1) == "PASS", m.group(3) or "")
    for f in folders:
        name = os.path.basename(f)
        results.setdefault(name, (False, "error: kiln-run gave no result"))
    return results


# Failures whose cause is the test's own data, each checked by a lit test.
KNOWN_BAD_DATA = {
    "test_adam_multiple": "the expected outputs were computed with epsilon = 0.01, "
                          "but the model's Adam node has no epsilon attribute (default 1e-6); "
                          "with epsilon = 0.01 set on the node it passes "
                          "(test/Conformance/training-ops.test)",
}


def md_escape(s):
    s = s.replace("|", "\\|").replace("\n", " ")
    return s if len(s) < 600 else s[:600] + "..."


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln-run", default=os.path.join(ROOT, "build/bin/kiln-run"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs/Conformance.md"))
    ap.add_argument("--claimed-list",
                    default=os.path.join(ROOT, "test/Conformance/claimed-node-tests.txt"))
    ap.add_argument("--groups", default=",".join(GROUPS))
    opts = ap.parse_args()

    t0 = time.time()
    groups = opts.groups.split(",")
    tests = []  # (group, folder)
    for g in groups:
        d = os.path.join(DATA, g)
        for name in sorted(os.listdir(d)):
            if os.path.isdir(os.path.join(d, name)):
                tests.append((g, os.path.join(d, name)))
    chunks = [tests[i:i + 16] for i in range(0, len(tests), 16)]
    results = {}
    with concurrent.futures.ThreadPoolExecutor(opts.jobs) as ex:
        futs = [ex.submit(run_chunk, opts.kiln_run, [f for _, f in c]) for c in chunks]
        for fut in futs:
            results.update(fut.result())
    elapsed = time.time() - t0

    per_group = collections.OrderedDict((g, [0, 0]) for g in groups)
    bound = collections.defaultdict(list)  # group -> [(name, note)]
    kinds = collections.Counter()
    failures = collections.defaultdict(list)
    by_op = collections.defaultdict(list)  # claimed op -> [(name, ok, reason)]
    for g, f in tests:
        name = os.path.basename(f)
        ok, reason = results[name]
        per_group[g][0 if ok else 1] += 1
        if ok and reason:
            bound[g].append((name, reason))
        if not ok:
            kinds[classify(reason)] += 1
            failures[g].append((name, reason))
        if g == "node":
            for op in set(op_types(f)):
                if op in CLAIMED:
                    by_op[op].append((name, ok, reason))

    total_pass = sum(p for p, _ in per_group.values())
    total = sum(p + q for p, q in per_group.values())
    lines = []
    lines.append("# ONNX backend conformance")
    lines.append("")
    lines.append("Generated by `/usr/bin/python3 scripts/conformance.py` (runs "
                 "`build/bin/kiln-run --onnx-test` over every folder of "
                 "`/usr/share/libonnx-testdata/data/{%s}`; %.0f s with %d jobs). "
                 "A test passes when every output of every `test_data_set_*` "
                 "matches with ONNX's backend tolerances (rtol 1e-3, atol 1e-7; "
                 "integers exactly)." % (",".join(groups), elapsed, opts.jobs))
    lines.append("")
    lines.append("| group | passed | of which with inputs bound | failed | total |")
    lines.append("|---|---:|---:|---:|---:|")
    for g, (p, q) in per_group.items():
        lines.append("| %s | %d | %d | %d | %d |" % (g, p, len(bound[g]), q, p + q))
    nb = sum(len(v) for v in bound.values())
    lines.append("| **all** | **%d** | **%d** | **%d** | **%d** |"
                 % (total_pass, nb, total - total_pass, total))
    lines.append("")
    lines.append("Kiln compiles static shapes: an op whose shape, axes, count or "
                 "ratio is a graph input needs that value at compile time. For "
                 "such tests `kiln-run --onnx-test` binds, smallest first, as "
                 "many of the test's integer, boolean and scalar inputs as "
                 "conversion needs to their value (`ImportOptions::boundInputs`, "
                 "ahead-of-time specialisation, as `kiln-run --bind` does; the "
                 "value must be the same in every data set) and feeds the rest; "
                 "they are listed at the end.")
    lines.append("")
    lines.append("Failures by kind: " + ", ".join(
        "%s %d" % (k, v) for k, v in sorted(kinds.items())) + ".")
    lines.append("")
    lines.append("## Node tests of the claimed ops")
    lines.append("")
    lines.append("The ops of the foundation issue's list and their node tests "
                 "(a test counts for every claimed op its graph uses).")
    lines.append("")
    lines.append("| op | passed | failed | failing tests |")
    lines.append("|---|---:|---:|---|")
    for op in CLAIMED:
        rows = by_op.get(op, [])
        p = [r for r in rows if r[1]]
        q = [r for r in rows if not r[1]]
        lines.append("| %s | %d | %d | %s |" % (op, len(p), len(q),
                                               ", ".join(r[0] for r in q)))
    lines.append("")
    for g in groups:
        if not failures[g]:
            continue
        lines.append("## Failures: %s" % g)
        lines.append("")
        lines.append("| test | reason |")
        lines.append("|---|---|")
        for name, reason in failures[g]:
            if name in KNOWN_BAD_DATA:
                reason = "%s. Test data defect: %s" % (reason, KNOWN_BAD_DATA[name])
            lines.append("| %s | %s |" % (name, md_escape(reason)))
        lines.append("")
    if nb:
        lines.append("## Passed with inputs bound at compile time")
        lines.append("")
        lines.append("| test | bound |")
        lines.append("|---|---|")
        for g in groups:
            for name, note in bound[g]:
                lines.append("| %s | %s |" % (name, md_escape(note)))
        lines.append("")
    with open(opts.out, "w") as fh:
        fh.write("\n".join(lines))
    # Every node test of a claimed op: check-kiln runs them all, except those
    # test/Conformance/excluded-node-tests.txt names with a reason.
    all_claimed = sorted({r[0] for rows in by_op.values() for r in rows})
    os.makedirs(os.path.dirname(opts.claimed_list), exist_ok=True)
    with open(opts.claimed_list, "w") as fh:
        fh.write("# Node tests of the claimed ops (written by scripts/conformance.py);\n"
                 "# test/Conformance/claimed-ops.test runs every one not excluded.\n")
        for name in all_claimed:
            fh.write(name + "\n")
    print("%d of %d passed (%s); wrote %s" % (
        total_pass, total, ", ".join("%s %d/%d" % (g, p, p + q)
                                     for g, (p, q) in per_group.items()),
        opts.out))


if __name__ == "__main__":
    sys.exit(main())
