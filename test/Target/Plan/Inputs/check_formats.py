#!/usr/bin/env python3
# ===- check_formats.py - writer -> schema -> loader round trip ------------===#
# SPDX-License-Identifier: Apache-2.0
#
# Compiles a small model whose data inputs are u8 and u64 (dtypes the config
# writer used to miss or misname) with kiln-compile, validates the plan's JSON
# header and the training config against runtime/schema/*.json, then runs the
# executable on data of those dtypes. The negative cases check that the
# schemas refuse what the runtime refuses: an unknown dtype, an unknown role,
# a config without batch_size or with a key outside the field table.
# Prints one "PASS name" or "FAIL name: why" per check.
# ===----------------------------------------------------------------------===#
import argparse
import copy
import json
import os
import struct
import subprocess
import sys

import jsonschema
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

failures = 0


def report(name, ok, why=""):
    global failures
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
    failures += 0 if ok else 1


def plan_json(data):
    """The JSON header of a KILNPLAN container (docs/PlanFormat.md)."""
    assert data[:8] == b"KILNPLAN", data[:8]
    j = struct.unpack_from("<Q", data, 16)[0]
    return json.loads(data[32:32 + j])


def payload_parts(data):
    """plan, config, model, eval of a training executable's payload."""
    assert data[-72:-64] == b"KILNTRN1", data[-72:-64]
    v = struct.unpack_from("<8Q", data, len(data) - 64)
    return [data[v[2 * k]:v[2 * k] + v[2 * k + 1]] for k in range(4)]


def make_model(path, batch):
    # y = (float(xa) + float(xb)) @ W + b
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2) / 10, "W")
    b = numpy_helper.from_array(np.zeros(2, np.float32), "b")
    nodes = [
        helper.make_node("Cast", ["xa"], ["fa"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["xb"], ["fb"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["fa", "fb"], ["h"]),
        helper.make_node("MatMul", ["h", "W"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "formats",
        [helper.make_tensor_value_info("xa", TensorProto.UINT8, [batch, 3]),
         helper.make_tensor_value_info("xb", TensorProto.UINT64, [batch, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 2])],
        [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def rejects(validator, doc):
    errors = list(validator.iter_errors(doc))
    return bool(errors), (errors[0].message if errors else "accepted")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--schemas", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    batch = 4
    model = os.path.join(a.work, "formats.onnx")
    make_model(model, batch)
    plan_schema = jsonschema.Draft202012Validator(
        json.load(open(os.path.join(a.schemas, "plan-v1.schema.json"))))
    config_schema = jsonschema.Draft202012Validator(
        json.load(open(os.path.join(a.schemas, "train-config-v1.schema.json"))))

    compile_ = [os.path.join(a.bin, "kiln-compile"), model, "--loss", "mse",
                "--batch-size", str(batch), "--optimizer", "momentum",
                "--lr", "0.01"]
    exe = os.path.join(a.work, "formats.exe")
    plan_file = os.path.join(a.work, "formats.plan")
    for extra in (["-o", exe], ["-o", plan_file, "--emit", "plan"]):
        r = subprocess.run(compile_ + extra, capture_output=True, text=True)
        if r.returncode:
            report("kiln-compile " + " ".join(extra), False, r.stderr.strip())
            return 1

    header = plan_json(open(plan_file, "rb").read())
    errors = [e.message for e in plan_schema.iter_errors(header)]
    report("--emit plan header matches plan-v1.schema.json", not errors, "; ".join(errors))
    roles = sorted({v.get("role", "-") for v in header["values"] if v["kind"] == "param"})
    report("train plan parameters have roles: " + ",".join(roles),
           roles == ["optimizer", "weight"], str(roles))

    plan, config_text, onnx_bytes, eval_plan = payload_parts(open(exe, "rb").read())
    config = json.loads(config_text)
    for name, part in (("payload plan", plan), ("payload eval plan", eval_plan)):
        errors = [e.message for e in plan_schema.iter_errors(plan_json(part))]
        report(name + " header matches plan-v1.schema.json", not errors, "; ".join(errors))
    errors = [e.message for e in config_schema.iter_errors(config)]
    report("payload config matches train-config-v1.schema.json", not errors, "; ".join(errors))
    report("payload model is the input model", onnx_bytes == open(model, "rb").read())
    dtypes = {d["name"]: d["dtype"] for d in config["data"]}
    report("config data dtypes: " + json.dumps(dtypes, sort_keys=True),
           dtypes == {"xa": "u8", "xb": "u64", "labels": "f32"}, str(dtypes))

    # The loader: the executable reads the config and plans and trains on
    # arrays of exactly those dtypes.
    rng = np.random.default_rng(0)
    arrays = {"xa": rng.integers(0, 4, (8, 3)).astype(np.uint8),
              "xb": rng.integers(0, 4, (8, 3)).astype(np.uint64),
              "labels": rng.standard_normal((8, 2)).astype(np.float32)}
    args = [exe, "--steps", "3", "--no-shuffle"]
    for k, v in arrays.items():
        f = os.path.join(a.work, k + ".npy")
        np.save(f, v)
        args += ["--data", k + "=" + f]
    metrics = os.path.join(a.work, "metrics.jsonl")
    r = subprocess.run(args + ["--metrics", metrics], capture_output=True, text=True)
    losses = []
    if r.returncode == 0:
        losses = [json.loads(l)["loss"] for l in open(metrics)]
    report("the executable trains 3 steps on u8/u64 data",
           r.returncode == 0 and len(losses) == 3 and all(np.isfinite(losses)),
           (r.stderr.strip() or str(losses)))

    # Negative cases: the schemas refuse what the loaders refuse.
    bad = copy.deepcopy(header)
    bad["values"][0]["dtype"] = "u65"
    ok, why = rejects(plan_schema, bad)
    report("plan schema rejects dtype u65 (" + why + ")", ok)
    bad = copy.deepcopy(header)
    param = next(v for v in bad["values"] if v["kind"] == "param")
    param["role"] = "bias"
    ok, why = rejects(plan_schema, bad)
    report("plan schema rejects role bias (" + why + ")", ok)
    bad = copy.deepcopy(config)
    bad["data"][0]["dtype"] = "u65"
    ok, why = rejects(config_schema, bad)
    report("config schema rejects data dtype u65 (" + why + ")", ok)
    bad = copy.deepcopy(config)
    del bad["batch_size"]
    ok, why = rejects(config_schema, bad)
    report("config schema rejects a config without batch_size (" + why + ")", ok)
    bad = copy.deepcopy(config)
    bad["optimizer"]["betas"] = [0.9, 0.999]
    ok, why = rejects(config_schema, bad)
    report("config schema rejects an unknown optimizer key (" + why + ")", ok)
    print("%d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
