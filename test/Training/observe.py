#!/usr/bin/python3
# Watching a run (issue 20): the system metrics in the log line and the
# metrics file, --alert's warnings, --profile's trace and summary, and
# --tensorboard's event files, on executables kiln-compile makes from the
# test models (test/Models/export_models.py).
#   - metrics rows carry the Unix time, resident and peak memory and CPU
#     utilisation; the log line shows memory and CPU;
#   - every alert fires once, on the step planted for it (a tiny memory
#     threshold, a step slowed by KILN_FAULT_SLOW, a batch of outliers for a
#     loss spike, a NaN in the data), names the rank and the step, and is
#     named in that step's metrics row; none fires in a clean run; bad
#     --alert values are refused with one line;
#   - the trace is Chrome trace JSON valid against
#     runtime/schema/chrome-trace.schema.json; kernel events carry node,
#     shapes, bytes and (matmuls) FLOPs; the kernels and the data wait sum to
#     within 5% of the profiled steps' time; under mpirun -np 2 every rank is
#     a process whose collectives are on its own communication thread; the
#     summary splits the step and lists GFLOP/s;
#   - TensorBoard event files (read back by tfevents.py, the format's
#     reader) hold every scalar of every logged step with the metrics file's
#     values, and histograms of every parameter and gradient every
#     --histogram-every steps; an unwritable directory is refused at start.
#
# Usage: /usr/bin/python3 test/Training/observe.py --bin build/bin --work DIR
import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import data_parallel as dpt  # noqa: E402

FAILED = []


def check(ok, what, detail=""):
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not detail else ": " + str(detail)),
          flush=True)
    if not ok:
        FAILED.append(what)


def rows(path):
    return [json.loads(l) for l in open(path) if l.strip()]


def linear_model(work, name="lin"):
    """y = x W + b with an MSE loss: its loss follows the data exactly, so a
    batch of outliers is a loss spike."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    g = np.random.default_rng(1)
    w = numpy_helper.from_array((g.standard_normal((8, 4)) * 0.1).astype(np.float32), "w")
    b = numpy_helper.from_array(np.zeros(4, np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["y"])], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = os.path.join(work, name + ".onnx")
    onnx.save(model, path)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    w = os.path.abspath(args.work)
    os.makedirs(w, exist_ok=True)
    kc = os.path.join(args.bin, "kiln-compile")

    # -- System metrics in the log line and the metrics file. ---------------
    onnx_path, flags, data = dpt.export(w, "mlp")
    mlp = dpt.compile_exe(args, onnx_path, os.path.join(w, "mlp.train"), flags, 1)
    met = os.path.join(w, "m.jsonl")
    r = dpt.run(mlp, 1, data + ["--steps", "20", "--log-every", "10", "--metrics", met])
    check(r.returncode == 0, "the MLP trains", r.stderr[-300:])
    m = rows(met)
    import time
    now = time.time()
    times = [x.get("time", 0) for x in m]
    check(len(m) == 20 and all(now - 600 < t <= now + 1 for t in times) and
          times == sorted(times), "metrics rows carry the Unix time, increasing", times[:3])
    check(all(x.get("rss_mib", 0) > 1 and x["peak_mib"] >= x["rss_mib"] and
              0 <= x["cpu_util"] <= 1.5 for x in m),
          "metrics rows carry resident and peak memory and CPU utilisation", m[-1])
    lines = [l for l in r.stdout.splitlines() if l.startswith("step ")]
    check(lines and all(re.search(r"samples/s  mem \d+(\.\d+)? [KMG]iB  cpu \d+%  ETA", l)
                        for l in lines), "the log line shows memory and CPU", lines[:1])
    check("warning:" not in r.stderr, "a clean run raises no alert", r.stderr[-300:])

    # -- Alerts. -------------------------------------------------------------
    r = dpt.run(mlp, 1, data + ["--steps", "12", "--log-every", "0", "--metrics", met,
                                "--alert", "memory=0.0001%"])
    warn = [l for l in r.stderr.splitlines() if l.startswith("warning:")]
    check(r.returncode == 0 and len(warn) == 1 and re.fullmatch(
        r"warning: rank 0 memory at \d+% of [0-9.]+ [KMGT]iB \(alert at 0.0001%\) \(step 0\)",
        warn[0]) is not None, "memory=0.0001%: one warning naming the rank and step 0", warn)
    m = rows(met)
    check(m[0].get("alerts") == ["memory"] and all("alerts" not in x for x in m[1:]),
          "the memory alert is named in step 0's metrics row only", m[0])

    env = dict(dpt.ENV, KILN_FAULT_SLOW="15:1000")
    r = subprocess.run([mlp] + data + ["--steps", "20", "--log-every", "0", "--threads", "1",
                                       "--metrics", met, "--alert", "step-time=100x"],
                       capture_output=True, text=True, env=env, timeout=300)
    warn = [l for l in r.stderr.splitlines() if l.startswith("warning:")]
    check(r.returncode == 0 and len(warn) == 1 and "warning: rank 0 step took" in warn[0] and
          warn[0].endswith("(step 15)"), "step-time=100x: a step slowed by 1 s is named", warn)

    lin = linear_model(w)
    exe = os.path.join(w, "lin.train")
    rc = subprocess.run([kc, lin, "-o", exe, "--batch-size", "8", "--loss", "mse",
                         "--optimizer", "sgd", "--lr", "0.01"], capture_output=True, text=True)
    check(rc.returncode == 0, "kiln-compile the linear model", rc.stderr)
    g = np.random.default_rng(2)
    x = g.standard_normal((400, 8)).astype(np.float32)
    y = g.standard_normal((400, 4)).astype(np.float32) * 0.1
    x[8 * 30:8 * 31] *= 40.0  # the batch of step 30 (file order)
    np.save(os.path.join(w, "lx.npy"), x)
    np.save(os.path.join(w, "ly.npy"), y)
    ldata = ["--data", "x=" + os.path.join(w, "lx.npy"), "--data",
             "labels=" + os.path.join(w, "ly.npy"), "--no-shuffle"]
    r = dpt.run(exe, 1, ldata + ["--steps", "45", "--log-every", "0", "--metrics", met,
                                 "--alert", "loss-spike=5x"])
    warn = [l for l in r.stderr.splitlines() if l.startswith("warning:")]
    check(r.returncode == 0 and len(warn) == 1 and "loss spiked to" in warn[0] and
          warn[0].endswith("(step 30)"), "loss-spike=5x: the batch of outliers at step 30",
          warn or r.stderr[-300:])
    check([x["step"] for x in rows(met) if "alerts" in x] == [30],
          "the spike is named in step 30's metrics row")
    # Gradients that overflow (their norm is infinite) while the loss is still
    # finite: the nan alert names that step; the run stops later, on its
    # own error.
    x[8 * 30:8 * 31] /= 40.0
    x[8 * 20 + 3, 5] = 1e19
    np.save(os.path.join(w, "lx.npy"), x)
    r = dpt.run(exe, 1, ldata + ["--steps", "45", "--log-every", "0", "--metrics", met])
    warn = [l for l in r.stderr.splitlines() if l.startswith("warning:")]
    m = rows(met)
    check(warn == ["warning: rank 0 gradient norm is not finite (step 20)"] and
          m[20].get("alerts") == ["nan"] and m[20]["loss"] is not None,
          "nan (default): gradients overflowing at step 20, the loss still finite",
          r.stderr[-400:])
    x[8 * 20 + 3, 5] = np.nan
    np.save(os.path.join(w, "lx.npy"), x)
    r = dpt.run(exe, 1, ldata + ["--steps", "45", "--log-every", "0"])
    err = r.stderr.strip().splitlines()
    check(r.returncode == 1 and len(err) == 1 and "step 20: loss is NaN" in err[0],
          "a NaN loss stops the run with its one line (no alert besides)", r.stderr[-400:])
    for bad, why in [("memory=120%", "--alert memory=120%: needs a percentage"),
                     ("step-time=0.5x", "--alert step-time=0.5x: needs a factor above 1"),
                     ("bogus=1", "--alert bogus=1: unknown alert")]:
        r = dpt.run(mlp, 1, data + ["--steps", "2", "--alert", bad])
        err = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(err) == 1 and why in err[0],
              "--alert %s is refused with one line" % bad, r.stderr)

    # -- The profiler. -------------------------------------------------------
    import jsonschema
    schema = json.load(open(os.path.join(HERE, "..", "..", "runtime", "schema",
                                         "chrome-trace.schema.json")))
    gonnx, gflags, gdata = dpt.export(w, "gpt")
    # Batch 128: kernels of tens of microseconds. (At the tests' batch 16 most
    # kernels take 2-5 us on a fast machine, and the executor's own ~0.2 us
    # between two traced kernels is several percent of the step.)
    gpt = os.path.join(w, "gpt128.train")
    rc = subprocess.run([kc, gonnx, "-o", gpt, "--batch-size", "128", "--loss",
                         "cross-entropy"] + gflags, capture_output=True, text=True)
    check(rc.returncode == 0, "kiln-compile the GPT at batch 128", rc.stderr)
    g = np.random.default_rng(7)
    np.save(os.path.join(w, "gx.npy"), g.integers(0, 64, size=(512, 16)).astype(np.int64))
    np.save(os.path.join(w, "gy.npy"), g.integers(0, 64, size=(512, 16)).astype(np.int64))
    big = ["--data", "idx=" + os.path.join(w, "gx.npy"),
           "--data", "labels=" + os.path.join(w, "gy.npy")]
    trace = os.path.join(w, "trace.json")

    def covered(x, st):
        """The share of step event `st` its kernels and data wait account for,
        the time the compute thread waited for a CPU (the step's runqueue_us:
        the process did not run, which no profiler can attribute) taken as
        accounted for."""
        inside = sum(e["dur"] for e in x if e["cat"] in ("kernel", "data") and
                     st["ts"] <= e["ts"] and e["ts"] + e["dur"] <= st["ts"] + st["dur"] + 1)
        waited = min(float(st["args"].get("runqueue_us", "0")), st["dur"] - inside)
        return (inside + waited) / st["dur"]

    def quiet(st):
        """A step the operating system took from the compute thread for at most
        5% of it (or, without schedstat, did not preempt at all)."""
        if "runqueue_us" in st["args"]:
            return float(st["args"]["runqueue_us"]) <= 0.05 * st["dur"]
        return st["args"]["preempted"] == "0"

    # The best of the quiet steps, and up to three runs.
    for attempt in range(3):
        r = dpt.run(gpt, 1, big + ["--steps", "34", "--log-every", "0", "--profile", trace,
                                   "--profile-steps", "3:33"])
        if r.returncode != 0:
            break
        doc = json.load(open(trace))
        x = [e for e in doc["traceEvents"] if e["ph"] == "X"]
        steps = [e for e in x if e["cat"] == "step"]
        ratios = [covered(x, st) for st in steps if quiet(st)]
        ratio = max(ratios) if ratios else 0
        if 0.95 <= ratio <= 1.0:
            break
    check(r.returncode == 0, "the GPT trains with --profile", r.stderr[-300:])
    try:
        jsonschema.validate(doc, schema)
        valid = ""
    except jsonschema.ValidationError as e:
        valid = e.message
    check(not valid, "the trace is valid Chrome trace JSON (the schema)", valid)
    kern = [e for e in x if e["cat"] == "kernel"]
    check(kern and all(set(e["args"]) >= {"node", "shapes", "bytes"} for e in kern) and
          all("flops" in e["args"] for e in kern if e["name"] == "matmul"),
          "kernel events carry node, shapes, bytes and (matmul) flops", kern[:1])
    check(len(steps) == 30 and 0.95 <= ratio <= 1.0,
          "the kernels and the data wait are %.1f%% of a profiled step's time "
          "(within 5%%; the best of the %d of 30 steps the machine did not hold up)" % (100 * ratio, len(ratios)),
          ["%.3f" % v for v in ratios])
    check(re.search(r"profile: 30 steps on rank 0, [0-9.]+ ms each: compute [0-9.]+ ms "
                    r"\(\d+%\), waiting for communication [0-9.]+ ms \(\d+%\), waiting for "
                    r"data [0-9.]+ ms \(\d+%\), idle [0-9.]+ ms \(\d+%\)", r.stdout) is not None
          and re.search(r"profile:   matmul +[0-9.]+ ms +[0-9.]+% +\d+ calls +[0-9.]+ GFLOP/s "
                        r"+[0-9.]+ GB/s", r.stdout) is not None,
          "the summary splits the step and gives matmul's GFLOP/s", r.stdout[-800:])

    gpt2 = dpt.compile_exe(args, gonnx, os.path.join(w, "gpt2.train"), gflags, 2)
    r = dpt.run(gpt2, 2, gdata + ["--steps", "8", "--log-every", "0", "--profile", trace,
                                  "--profile-steps", "2:7"])
    check(r.returncode == 0, "dp=2 with --profile", r.stderr[-300:])
    if r.returncode == 0:
        doc = json.load(open(trace))
        try:
            jsonschema.validate(doc, schema)
            valid = ""
        except jsonschema.ValidationError as e:
            valid = e.message
        x = [e for e in doc["traceEvents"] if e["ph"] == "X"]
        names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "thread_name"}
        coll = [e for e in x if e["cat"] == "collective"]
        check(not valid and {e["pid"] for e in x} == {0, 1} and coll and
              all(names.get((e["pid"], e["tid"])) == "communication" for e in coll) and
              {e["pid"] for e in coll} == {0, 1},
              "dp=2: a valid trace, a process per rank, collectives on each rank's "
              "communication thread", valid or names)

    # -- TensorBoard. ----------------------------------------------------------
    import tfevents
    tbd = os.path.join(w, "tb")
    x = g.standard_normal((400, 8)).astype(np.float32)
    np.save(os.path.join(w, "tx.npy"), x)
    ldata = ["--data", "x=" + os.path.join(w, "tx.npy"), "--data",
             "labels=" + os.path.join(w, "ly.npy"), "--no-shuffle"]
    r = dpt.run(exe, 1, ldata + ["--steps", "25", "--log-every", "5", "--metrics", met,
                                 "--tensorboard", tbd, "--histogram-every", "10"])
    check(r.returncode == 0, "the linear model trains with --tensorboard", r.stderr[-300:])
    scal = {}
    hist = {}
    for _, _, _, e in tfevents.events([tbd]):
        for v in e.get("summary", []):
            if "value" in v:
                scal[(v["tag"], e["step"])] = v["value"]
            if "histogram" in v:
                hist[(v["tag"], e["step"])] = v["histogram"]
    m = rows(met)
    f32 = lambda v: float(np.float32(v))
    want = {"loss": "loss", "lr": "lr", "grad_norm": "grad_norm",
            "time/step_ms": "step_ms", "memory/rss_mib": "rss_mib",
            "system/cpu_util": "cpu_util"}
    bad = [(tag, x["step"]) for x in m for tag, key in want.items()
           if (tag, x["step"]) not in scal or
           abs(scal[(tag, x["step"])] - f32(x[key])) >
           1e-6 * max(1, abs(x[key])) + {"rss_mib": 0.06, "step_ms": 1e-3,
                                          "cpu_util": 1e-3}.get(key, 0)]
    check(len(m) == 25 and not bad, "every step's scalars are in the event file with the "
          "metrics file's values", bad[:5])
    check(all(("throughput/samples_per_s", s) in scal and ("memory/arena_mib", s) in scal
              for s in range(25)), "throughput and arena scalars every step")
    check(sorted(k for k in hist) == [("grads/b", 9), ("grads/b", 19), ("grads/w", 9),
                                      ("grads/w", 19), ("params/b", 9), ("params/b", 19),
                                      ("params/w", 9), ("params/w", 19)],
          "histograms of every parameter and gradient at steps 9 and 19", sorted(hist))
    # The oracle for the gradient histogram: plain SGD, so the gradient of
    # step 9 is (w after step 8 - w after step 9) / lr, from two exported runs.
    import onnx
    from onnx import numpy_helper
    ws = []
    for n in (9, 10):
        out = os.path.join(w, "lin%d.onnx" % n)
        r = dpt.run(exe, 1, ldata + ["--steps", str(n), "--log-every", "0",
                                     "--export-onnx", out])
        ws.append({t.name: numpy_helper.to_array(t).astype(np.float64)
                   for t in onnx.load(out).graph.initializer})
    g = (ws[0]["w"] - ws[1]["w"]) / 0.01
    h = hist.get(("grads/w", 9), {})
    p = hist.get(("params/w", 9), {})
    check(h and h["num"] == g.size and abs(h["sum"] - g.sum()) <= 1e-3 * (1 + abs(g).sum()) and
          abs(h["sum_squares"] - (g * g).sum()) <= 1e-3 * (g * g).sum() and
          abs(h["min"] - g.min()) <= 1e-3 * (1 + abs(g).max()) and
          sum(h["bucket"]) == g.size,
          "the gradient histogram of w at step 9 is the SGD step's (w8 - w9) / lr",
          (h.get("sum"), g.sum()))
    check(p and abs(p["sum"] - ws[1]["w"].sum()) <= 1e-5 * (1 + abs(ws[1]["w"]).sum()) and
          p["min"] == float(np.float32(ws[1]["w"].min())),
          "the parameter histogram of w at step 9 is w after step 9")
    open(os.path.join(w, "afile"), "w").close()
    r = dpt.run(exe, 1, ldata + ["--steps", "5", "--metrics", os.path.join(w, "none.jsonl"),
                                 "--tensorboard", os.path.join(w, "afile")])
    err = r.stderr.strip().splitlines()
    none = os.path.join(w, "none.jsonl")
    stepped = os.path.exists(none) and os.path.getsize(none) > 0
    check(r.returncode == 1 and len(err) == 1 and not stepped and
          err[0].endswith("--tensorboard %s: exists and is not a directory" %
                          os.path.join(w, "afile")),
          "an unusable --tensorboard directory is refused before the first step", r.stderr)

    # Outputs written at the end of a run are checked at its start: a
    # directory that does not exist, or a file where a directory should be.
    for flag, path, why in [
            ("--profile", os.path.join(w, "no-such-dir", "t.json"),
             "--profile %s: its directory %s does not exist" %
             (os.path.join(w, "no-such-dir", "t.json"), os.path.join(w, "no-such-dir"))),
            ("--export-onnx", os.path.join(w, "afile", "m.onnx"),
             "--export-onnx %s: %s is not a directory" %
             (os.path.join(w, "afile", "m.onnx"), os.path.join(w, "afile")))]:
        r = dpt.run(exe, 1, ldata + ["--steps", "5", "--metrics", none, flag, path])
        err = r.stderr.strip().splitlines()
        stepped = os.path.exists(none) and os.path.getsize(none) > 0
        check(r.returncode == 1 and len(err) == 1 and not stepped and why in err[0],
              "an unwritable %s path is refused before the first step" % flag, r.stderr)

    for f in FAILED:
        print("FAILED: " + f)
    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
