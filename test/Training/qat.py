#!/usr/bin/python3
# Quantization-aware training (kiln-compile --qat int8 [--qat-freeze-step N];
# docs/Compression.md) against the same recipe written in PyTorch: each
# Linear's weight fake-quantized per output channel with
# torch.fake_quantize_per_channel_affine (symmetric int8 [-127, 127], scale
# max|w| / 127, zero point 0), its input per tensor with
# torch.fake_quantize_per_tensor_affine (uint8 [0, 255]) on the scale and
# zero point of a moving-average min/max observer (averaging 0.01, frozen
# after N batches), straight-through gradients.
#
#   /usr/bin/python3 test/Training/qat.py --bin build/bin --work DIR
#
# Checks: per-step losses, final weights and observers against PyTorch;
# the observers stop after --qat-freeze-step; the config lists the sites;
# on the digits example QAT's test accuracy is within 1 point of fp32;
# bad flags and a model with nothing to quantize are refused in one line.
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper
import torch
import torch.nn.functional as F
from safetensors_np import read_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
PY = "/usr/bin/python3"
BATCH, STEPS, LR, FREEZE, SEEDS = 16, 12, 0.05, 8, 20
EPS = float(np.finfo(np.float32).eps)
FAILED = []
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def check(ok, what, detail=""):
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not detail else ": " + str(detail)),
          flush=True)
    if not ok:
        FAILED.append(what)


class SmallMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 24)
        self.fc2 = torch.nn.Linear(24, 16)
        self.fc3 = torch.nn.Linear(16, 10)

    def forward(self, x, q=None):
        q = q or (lambda i, t: t)
        h = F.relu(self.fc1(q(0, x)))
        h = F.relu(self.fc2(q(1, h)))
        return self.fc3(q(2, h))


class SmallCNN(torch.nn.Module):
    """Conv 1->4 3x3 pad 1 on 8x8, ReLU, flatten, Linear 256->10."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.fc = torch.nn.Linear(256, 10)

    def forward(self, x):
        return self.fc(torch.flatten(F.relu(self.conv(x)), 1))


def torch_cnn_run(x, y, steps):
    torch.manual_seed(0)
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    obs = [Observer(FREEZE) for _ in range(2)]

    def q(i, t):
        s, z = obs[i](t)
        return torch.fake_quantize_per_tensor_affine(t, s, z, 0, 255)

    losses = []
    for s in range(steps):
        xb = torch.from_numpy(x[s * BATCH:(s + 1) * BATCH])
        yb = torch.from_numpy(y[s * BATCH:(s + 1) * BATCH])
        h = F.relu(F.conv2d(q(0, xb), fq_weight(model.conv.weight), model.conv.bias, padding=1))
        out = F.linear(q(1, torch.flatten(h, 1)), fq_weight(model.fc.weight), model.fc.bias)
        loss = F.cross_entropy(out, yb)
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return losses


class Observer:
    """A moving-average min/max observer in float32, as Kiln's
    kiln.minmax_observe (PyTorch's MovingAverageMinMaxObserver with
    _calculate_qparams for quint8)."""

    def __init__(self, freeze):
        self.min = torch.zeros((), dtype=torch.float32)
        self.max = torch.zeros((), dtype=torch.float32)
        self.n, self.freeze = 0, freeze

    def __call__(self, x):
        x = x.detach()
        if self.n < self.freeze:
            bmin, bmax = x.min(), x.max()
            if self.n == 0:
                self.min, self.max = bmin, bmax
            else:
                c = torch.tensor(0.01, dtype=torch.float32)
                self.min = self.min + c * (bmin - self.min)
                self.max = self.max + c * (bmax - self.max)
            self.n += 1
        lo = torch.minimum(self.min, torch.zeros(()))
        hi = torch.maximum(self.max, torch.zeros(()))
        scale = torch.clamp((hi - lo) / 255.0, min=EPS)
        zp = int(torch.clamp(0 - torch.round(lo / scale), 0, 255))
        return float(scale), zp


def fq_weight(w):
    amax = w.detach().abs().amax(dim=tuple(range(1, w.dim())))
    scale = torch.clamp(amax / 127.0, min=EPS)
    zp = torch.zeros(scale.shape, dtype=torch.int32)
    return torch.fake_quantize_per_channel_affine(w, scale, zp, 0, -127, 127)


def qdq_forward(path, x):
    """The exported QDQ model's logits, evaluated in NumPy: ONNX's
    QuantizeLinear (round half to even of x / scale, plus the zero point,
    saturated), DequantizeLinear ((q - zero_point) * scale, per axis), Gemm,
    Relu. (onnx 1.12 has no reference evaluator.)"""
    m = onnx.load(path)
    env = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    env[m.graph.input[0].name] = x
    for n in m.graph.node:
        a = {at.name: onnx.helper.get_attribute_value(at) for at in n.attribute}
        i = [env[k] for k in n.input]
        if n.op_type == "QuantizeLinear":
            q = np.rint(i[0] / i[1]) + i[2].astype(np.float32)
            info = np.iinfo(i[2].dtype)
            out = np.clip(q, info.min, info.max).astype(i[2].dtype)
        elif n.op_type == "DequantizeLinear":
            s, z = i[1], i[2].astype(np.float32)
            if s.ndim == 1:
                shape = [1] * i[0].ndim
                shape[a.get("axis", 1)] = -1
                s, z = s.reshape(shape), z.reshape(shape)
            out = ((i[0].astype(np.float32) - z) * s).astype(np.float32)
        elif n.op_type == "Gemm":
            bm = i[1].T if a.get("transB", 0) else i[1]
            out = i[0] @ bm + (i[2] if len(i) > 2 else 0)
        elif n.op_type == "Relu":
            out = np.maximum(i[0], 0)
        else:
            raise SystemExit("qdq_forward: no %s" % n.op_type)
        env[n.output[0]] = out
    return env[m.graph.output[0].name]


def torch_forward(state, obs, x):
    """PyTorch's fake-quantized forward with the trained weights and the
    (frozen) observers."""
    model = SmallMLP()
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})

    def q(i, t):
        s, z = obs[i](t)
        return torch.fake_quantize_per_tensor_affine(t, s, z, 0, 255)

    with torch.no_grad():
        h = F.relu(F.linear(q(0, x), fq_weight(model.fc1.weight), model.fc1.bias))
        h = F.relu(F.linear(q(1, h), fq_weight(model.fc2.weight), model.fc2.bias))
        return F.linear(q(2, h), fq_weight(model.fc3.weight), model.fc3.bias).numpy()


def torch_run(x, y, steps):
    torch.manual_seed(0)
    model = SmallMLP()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    obs = [Observer(FREEZE) for _ in range(3)]

    def q(i, t):
        s, z = obs[i](t)
        return torch.fake_quantize_per_tensor_affine(t, s, z, 0, 255)

    saved = {}
    for layer in (model.fc1, model.fc2, model.fc3):
        saved[layer] = layer.weight
    losses = []
    for s in range(steps):
        xb = torch.from_numpy(x[s * BATCH:(s + 1) * BATCH])
        yb = torch.from_numpy(y[s * BATCH:(s + 1) * BATCH])
        h = F.relu(F.linear(q(0, xb), fq_weight(model.fc1.weight), model.fc1.bias))
        h = F.relu(F.linear(q(1, h), fq_weight(model.fc2.weight), model.fc2.bias))
        out = F.linear(q(2, h), fq_weight(model.fc3.weight), model.fc3.bias)
        loss = F.cross_entropy(out, yb)
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    return losses, state, obs


def payload_config(exe):
    """The config JSON kiln-compile appended to the executable (the 72-byte
    trailer: "KILNTRN1", then (offset, size) u64 pairs; the config is the
    second part)."""
    raw = open(exe, "rb").read()
    t = raw[-72:]
    if t[:8] != b"KILNTRN1":
        return {}
    off = int.from_bytes(t[24:32], "little")
    size = int.from_bytes(t[32:40], "little")
    return json.loads(raw[off:off + size])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    w = os.path.abspath(args.work)
    os.makedirs(w, exist_ok=True)
    torch.set_num_threads(1)
    kc = os.path.join(args.bin, "kiln-compile")

    g = np.random.default_rng(5)
    x = g.standard_normal((BATCH * STEPS, 32)).astype(np.float32)
    y = g.integers(0, 10, size=(BATCH * STEPS,)).astype(np.int64)
    np.save(os.path.join(w, "x.npy"), x)
    np.save(os.path.join(w, "y.npy"), y)
    data = ["--data", "x=" + os.path.join(w, "x.npy"), "--data", "labels=" + os.path.join(w, "y.npy"),
            "--no-shuffle"]
    torch.manual_seed(0)
    model = SmallMLP()
    onnx_path = os.path.join(w, "mlp.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(x[:BATCH]),), onnx_path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})

    def compile_exe(model_path, name, extra):
        out = os.path.join(w, name)
        r = subprocess.run([kc, model_path, "-o", out, "--batch-size", str(BATCH), "--loss",
                            "cross-entropy", "--optimizer", "momentum", "--momentum", "0.9",
                            "--lr", repr(LR)] + extra, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("kiln-compile failed: " + r.stderr)
        return out

    def run(exe, extra, d=data):
        return subprocess.run([exe] + d + extra + ["--threads", "1", "--log-every", "0"],
                              capture_output=True, text=True, env=ENV, timeout=300)

    def losses(path):
        return [json.loads(l)["loss"] for l in open(path) if l.strip()]

    exe = compile_exe(onnx_path, "qat.train", ["--qat", "int8", "--qat-freeze-step", str(FREEZE)])
    met, ck = os.path.join(w, "m.jsonl"), os.path.join(w, "ck")
    r = run(exe, ["--steps", str(STEPS), "--metrics", met, "--checkpoint-dir", ck,
                  "--checkpoint-every", "10"])
    check(r.returncode == 0, "the MLP trains with --qat int8", r.stderr[-400:])
    if r.returncode != 0:
        return 1
    kl = losses(met)
    tl, tstate, tobs = torch_run(x, y, STEPS)
    rel = max((abs(a - b) / abs(b) for a, b in zip(kl, tl)), default=1.0)
    check(len(kl) == STEPS and rel <= 1e-5,
          "losses equal PyTorch's fake-quantized training (max rel %.1e)" % rel, (kl[:4], tl[:4]))
    final = read_safetensors(os.path.join(ck, "step-%08d" % STEPS, "tensors.safetensors"))
    werr = max(float(np.max(np.abs(final[k] - tstate[k]))) / float(np.max(np.abs(tstate[k])))
               for k in tstate)
    check(werr <= 1e-5, "final weights equal PyTorch's straight-through training (max rel %.1e)"
          % werr)
    # The observers: one per Linear input, [min, max, n], n stopping at the freeze.
    obs = sorted(k for k in final if k.endswith("/observer"))
    got = [final[k] for k in obs]
    want = sorted(([float(o.min), float(o.max), float(o.n)] for o in tobs), key=lambda v: v[1])
    got_sorted = sorted((list(map(float, v)) for v in got), key=lambda v: v[1])
    oerr = max((abs(a - b) for gv, wv in zip(got_sorted, want) for a, b in zip(gv, wv)),
               default=1.0)
    check(len(obs) == 3 and oerr <= 1e-5 and all(v[2] == FREEZE for v in got_sorted),
          "3 observers in the checkpoint equal PyTorch's (max diff %.1e), n = %d" % (oerr, FREEZE),
          (obs, got_sorted, want))
    mid = read_safetensors(os.path.join(ck, "step-%08d" % 10, "tensors.safetensors"))
    check(all(np.array_equal(mid[k], final[k]) for k in obs),
          "after %d steps the observers no longer move" % FREEZE)
    # Resume at step 5, observers still observing: the uninterrupted losses.
    ck5 = os.path.join(w, "ck5")
    r = run(exe, ["--steps", "5", "--checkpoint-dir", ck5, "--checkpoint-every", "5"])
    met2 = os.path.join(w, "m2.jsonl")
    r2 = run(exe, ["--steps", str(STEPS), "--metrics", met2, "--checkpoint-dir", ck5, "--resume"])
    l2 = losses(met2) if r2.returncode == 0 else []
    check(r.returncode == 0 and r2.returncode == 0 and l2 == kl[5:],
          "a resume at step 5 continues the uninterrupted losses exactly",
          (r2.stderr[-300:], l2[:3], kl[5:8]))
    config = payload_config(exe)
    qat = config.get("qat", {})
    import jsonschema
    schema = json.load(open(os.path.join(ROOT, "runtime", "schema",
                                         "train-config-v1.schema.json")))
    try:
        jsonschema.validate(config, schema)
        valid = ""
    except jsonschema.ValidationError as e:
        valid = e.message
    check(not valid, "the config with \"qat\" is valid (the schema)", valid)
    check(qat.get("freeze") == FREEZE and len(qat.get("sites", [])) == 3 and
          sorted(s["weight"] for s in qat["sites"]) == ["fc1.weight", "fc2.weight", "fc3.weight"]
          and all(s["axis"] == 0 for s in qat["sites"]),
          "the config lists the 3 sites (weights, axis 0) and the freeze", qat)
    # The QDQ export: int8 weights behind DequantizeLinear, each Linear's
    # input through QuantizeLinear/DequantizeLinear, valid ONNX, and its
    # forward equal to PyTorch's fake-quantized one.
    qdq = os.path.join(w, "qdq.onnx")
    r = run(exe, ["--steps", str(STEPS), "--export-onnx", qdq])
    ok = r.returncode == 0
    try:
        m = onnx.load(qdq)
        onnx.checker.check_model(m, full_check=True)
        kinds = [n.op_type for n in m.graph.node]
        inits = {t.name: t for t in m.graph.initializer}
    except Exception as e:  # noqa: BLE001 - reported as the failure
        ok, kinds, inits = False, [str(e)], {}
    check(ok and kinds.count("QuantizeLinear") == 3 and kinds.count("DequantizeLinear") == 6 and
          all(inits.get(k + "_quantized") is not None and
              inits[k + "_quantized"].data_type == onnx.TensorProto.INT8 and k not in inits
              for k in ("fc1.weight", "fc2.weight", "fc3.weight")),
          "--export-onnx writes a QDQ model (3 QuantizeLinear, 6 DequantizeLinear, int8 "
          "weights) that passes onnx.checker", (r.stderr[-300:], kinds))
    xe = x[:BATCH]
    if ok:
        got = qdq_forward(qdq, xe)
        want = torch_forward(tstate, tobs, torch.from_numpy(xe))
        diff = float(np.max(np.abs(got - want)))
        # One activation step of the last layer's input moves a logit by
        # at most its scale times the row's largest |w|.
        s3, _ = tobs[2](torch.zeros(1))
        bound = s3 * float(np.abs(tstate["fc3.weight"]).sum(axis=1).max())
        check(diff <= bound, "the QDQ model's logits equal PyTorch's fake-quantized forward "
              "(max diff %.1e, within one quantization step %.1e)" % (diff, bound))
        # kiln-run imports QuantizeLinear/DequantizeLinear and runs it.
        np.save(os.path.join(w, "xe.npy"), xe)
        od = os.path.join(w, "qdq-out")
        os.makedirs(od, exist_ok=True)
        kr = subprocess.run([os.path.join(args.bin, "kiln-run"), qdq, "--input",
                             "x=" + os.path.join(w, "xe.npy"), "--batch-size", str(BATCH),
                             "--output-dir", od], capture_output=True, text=True)
        kdiff = (float(np.max(np.abs(np.load(os.path.join(od, "output_0.npy")) - got)))
                 if kr.returncode == 0 else float("inf"))
        check(kdiff <= 1e-5, "kiln-run runs the QDQ model: its logits equal the QDQ "
              "model's (max diff %.1e)" % kdiff, kr.stderr[-300:])

    # dp=2: each rank's observers see the whole batch's range (the batch
    # min and max all-reduced), so the run is the 1-rank run.
    exe_dp = compile_exe(onnx_path, "qat-dp2.train", ["--qat", "int8", "--qat-freeze-step",
                                                      str(FREEZE), "--mesh", "dp=2"])
    met_dp, ck_dp = os.path.join(w, "m-dp.jsonl"), os.path.join(w, "ck-dp")
    r = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", exe_dp] + data +
                       ["--steps", str(STEPS), "--metrics", met_dp, "--checkpoint-dir", ck_dp,
                        "--checkpoint-every", str(STEPS), "--threads", "1", "--log-every", "0"],
                       capture_output=True, text=True, timeout=300,
                       env=dict(ENV, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    ld = losses(met_dp) if r.returncode == 0 else []
    rel = max((abs(a - b) / abs(b) for a, b in zip(ld, kl)), default=1.0)
    fd = read_safetensors(os.path.join(ck_dp, "step-%08d" % STEPS, "tensors.safetensors")) \
        if r.returncode == 0 else {}
    check(len(ld) == STEPS and rel <= 1e-5 and
          all(np.array_equal(fd.get(k), final[k]) for k in obs),
          "dp=2 gives the 1-rank losses (max rel %.1e) and observers" % rel, r.stderr[-300:])

    # Without the freeze the observers keep observing.
    exe2 = compile_exe(onnx_path, "qat-nofreeze.train", ["--qat", "int8"])
    ck2 = os.path.join(w, "ck2")
    r = run(exe2, ["--steps", str(STEPS), "--checkpoint-dir", ck2, "--checkpoint-every", str(STEPS)])
    f2 = read_safetensors(os.path.join(ck2, "step-%08d" % STEPS, "tensors.safetensors")) \
        if r.returncode == 0 else {}
    check(r.returncode == 0 and all(f2[k][2] == STEPS for k in obs),
          "without --qat-freeze-step the observers count every step", r.stderr[-300:])

    # A convolution: its weight per output channel (axis 0).
    xc = g.standard_normal((BATCH * STEPS, 1, 8, 8)).astype(np.float32)
    np.save(os.path.join(w, "xc.npy"), xc)
    torch.manual_seed(0)
    cnn = SmallCNN()
    cnn_path = os.path.join(w, "cnn.onnx")
    with torch.no_grad():
        torch.onnx.export(cnn, (torch.from_numpy(xc[:BATCH]),), cnn_path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    cexe = compile_exe(cnn_path, "cnn-qat.train", ["--qat", "int8", "--qat-freeze-step",
                                                   str(FREEZE)])
    cmet = os.path.join(w, "cnn.jsonl")
    r = run(cexe, ["--steps", str(STEPS), "--metrics", cmet],
            d=["--data", "x=" + os.path.join(w, "xc.npy"), "--data",
               "labels=" + os.path.join(w, "y.npy"), "--no-shuffle"])
    cl = losses(cmet) if r.returncode == 0 else []
    ctl = torch_cnn_run(xc, y, STEPS)
    rel = max((abs(a - b) / abs(b) for a, b in zip(cl, ctl)), default=1.0)
    sites = payload_config(cexe).get("qat", {}).get("sites", [])
    check(len(cl) == STEPS and rel <= 1e-5 and
          sorted((s["weight"], s["axis"]) for s in sites) == [("conv.weight", 0), ("fc.weight", 0)],
          "a Conv and a Gemm: losses equal PyTorch's (max rel %.1e), sites per output channel"
          % rel, (r.stderr[-300:], cl[:3], ctl[:3], sites))

    # The digits example: QAT's test accuracy within 1 point of fp32.
    for script in ("make_data.py", "model.py"):
        subprocess.run([PY, os.path.join(ROOT, "examples", "digits", script), w], check=True,
                       capture_output=True)
    digits = os.path.join(w, "digits_mlp.onnx")
    ddata = ["--data", "x=" + os.path.join(w, "train_x.npy"),
             "--data", "labels=" + os.path.join(w, "train_y.npy")]
    evald = ["--eval-data", "x=" + os.path.join(w, "test_x.npy"),
             "--eval-data", "labels=" + os.path.join(w, "test_y.npy")]

    def accuracy(r):
        for line in r.stdout.splitlines():
            if line.startswith("eval: "):
                return float(line.split("accuracy ")[1].split()[0])
        return 0.0

    # One run's accuracy moves by 3 points with the seed (359 test samples):
    # the mean over SEEDS seeds each.
    acc = {}
    for name, extra in (("fp32", []), ("qat", ["--qat", "int8", "--qat-freeze-step", "100"])):
        out = os.path.join(w, "digits-%s.train" % name)
        rc = subprocess.run([kc, digits, "-o", out, "--batch-size", "32", "--loss",
                             "cross-entropy", "--optimizer", "adam", "--lr", "0.01"] + extra,
                            capture_output=True, text=True)
        acc[name] = [accuracy(run(out, ["--epochs", "10", "--seed", str(s)] + evald, d=ddata))
                     if rc.returncode == 0 else 0.0 for s in range(1, SEEDS + 1)]
    fp, qa = float(np.mean(acc["fp32"])), float(np.mean(acc["qat"]))
    check(fp >= 0.9 and qa >= fp - 0.01,
          "digits: QAT test accuracy %.3f, fp32 %.3f (mean of %d seeds; within 1 point)"
          % (qa, fp, SEEDS), acc)

    # Bad input: one line, exit 1.
    def refused(cmd, why):
        r = subprocess.run(cmd, capture_output=True, text=True)
        err = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(err) == 1 and why in err[0], "refused: " + why, r.stderr)

    base = [kc, onnx_path, "-o", os.path.join(w, "bad.train"), "--batch-size", "16", "--loss",
            "cross-entropy"]
    refused(base + ["--qat", "int4"], "--qat needs int8, got 'int4'")
    refused(base + ["--qat-freeze-step", "5"], "--qat-freeze-step needs --qat int8")
    refused(base + ["--qat", "int8", "--qat-freeze-step", "0"], "--qat-freeze-step needs a step >= 1")
    # A model with no MatMul, Gemm or Conv: y = x * s.
    mul = oh.make_model(oh.make_graph(
        [oh.make_node("Mul", ["x", "s"], ["y"], name="scale")], "mul",
        [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 4])],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 4])],
        [onnx.numpy_helper.from_array(np.ones(4, np.float32), "s")]),
        opset_imports=[oh.make_opsetid("", 17)])
    mul_path = os.path.join(w, "mul.onnx")
    onnx.save(mul, mul_path)
    refused([kc, mul_path, "-o", os.path.join(w, "bad.train"), "--batch-size", "4", "--loss",
             "mse", "--logits", "y", "--qat", "int8"], "has no quantizable op")

    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
