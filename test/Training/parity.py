#!/usr/bin/python3
# Training parity against PyTorch: Kiln's training executable and
# torch.optim, same model, same initial weights, same batches.
#
# Usage: /usr/bin/python3 test/Training/parity.py --bin build/bin --work DIR
#            [--models mlp,cnn,gpt] [--optimizers sgd,momentum,adam,adamw]
#            [--steps 5]
#
# For each model and optimizer: export the PyTorch model (training mode,
# opset 17), compile it with kiln-compile, train --steps steps with the
# executable (--no-shuffle, --metrics, --export-onnx), train the same module
# with torch.optim on the same batches, and compare
#   * the loss of every step: relative difference <= 1e-4,
#   * every trained initializer in the exported model against the module's
#     final parameter: max |kiln - torch| / max(|torch|) <= 1e-3 per tensor,
#   * BatchNorm running statistics likewise (PyTorch's unbiased variance).
# Where float32 round-off blurs the comparison (an element whose Adam step
# amplifies PyTorch's own float32 rounding: on one machine PyTorch's float32
# bn1.bias is 1.3e-3 of the tensor from its float64 run, Kiln's 1.2e-6), a
# tensor also passes when it is within the bound of the same training in
# float64 (the module and the batches in double, same initial weights); the
# line says which tensors needed the float64 reference.
# Prints one line per case and exits 1 if any fails.
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Models"))
import export_models as em  # noqa: E402

LR = {"sgd": 0.1, "momentum": 0.05, "adam": 1e-3, "adamw": 1e-3}


def build(name, opt="sgd"):
    torch.manual_seed(0)
    if name == "mlp":
        return em.MLP(), (784,), 10, "f"
    if name == "cnn":
        model = em.CNN()
        if opt in ("adam", "adamw"):
            # A conv bias feeding BatchNorm has an exact gradient of 0, so
            # Adam turns its round-off gradient into lr-sized steps whose
            # sign neither side controls (and the BatchNorm running mean
            # inherits them). Under Adam the convs go without bias, as
            # torchvision's ResNets do; sgd and momentum keep it.
            model.conv1.register_parameter("bias", None)
            model.conv2.register_parameter("bias", None)
        return model, (1, 28, 28), 10, "f"
    if name == "gpt":
        # Dropout off: PyTorch's and Kiln's random streams differ by design.
        return em.GPT(dropout=0.0), (16,), 64, "i"
    raise SystemExit("unknown model " + name)


def make_data(shape, classes, kind, n, seed):
    g = np.random.default_rng(seed)
    if kind == "f":
        x = g.standard_normal((n,) + shape).astype(np.float32)
        y = g.integers(0, classes, size=(n,)).astype(np.int64)
    else:
        x = g.integers(0, classes, size=(n,) + shape).astype(np.int64)
        y = g.integers(0, classes, size=(n,) + shape).astype(np.int64)
    return x, y


def torch_optimizer(name, params):
    if name == "sgd":
        return torch.optim.SGD(params, lr=LR[name])
    if name == "momentum":
        return torch.optim.SGD(params, lr=LR[name], momentum=0.9)
    if name == "adam":
        return torch.optim.Adam(params, lr=LR[name])
    if name == "adamw":
        return torch.optim.AdamW(params, lr=LR[name], weight_decay=0.01)
    raise SystemExit("unknown optimizer " + name)


def run_case(args, model_name, opt, batch):
    work = os.path.join(args.work, "%s_%s" % (model_name, opt))
    os.makedirs(work, exist_ok=True)
    model, shape, classes, kind = build(model_name, opt)
    model.train()
    n = batch * args.steps
    x, y = make_data(shape, classes, kind, n, seed=1)
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)
    in_name = "idx" if kind == "i" else "x"
    onnx_path = os.path.join(work, "model.onnx")
    example = torch.from_numpy(x[:batch])
    with torch.no_grad():
        torch.onnx.export(model, (example,), onnx_path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=[in_name],
                          output_names=["logits"])
    exe = os.path.join(work, "model.train")
    cmd = [os.path.join(args.bin, "kiln-compile"), onnx_path, "-o", exe,
           "--batch-size", str(batch), "--loss", "cross-entropy",
           "--optimizer", opt, "--lr", repr(LR[opt])]
    if opt == "momentum":
        cmd += ["--momentum", "0.9"]
    if opt == "adamw":
        cmd += ["--weight-decay", "0.01"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return False, "kiln-compile failed: " + r.stderr.strip()
    metrics = os.path.join(work, "metrics.jsonl")
    out_onnx = os.path.join(work, "trained.onnx")
    r = subprocess.run([exe, "--data", "%s=%s" % (in_name, os.path.join(work, "x.npy")),
                        "--data", "labels=" + os.path.join(work, "y.npy"),
                        "--steps", str(args.steps), "--no-shuffle",
                        "--metrics", metrics, "--export-onnx", out_onnx,
                        "--log-every", "1000"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return False, "training executable failed: " + r.stderr.strip()
    kiln_losses = [json.loads(l)["loss"] for l in open(metrics) if l.strip()]

    optimizer = torch_optimizer(opt, model.parameters())
    torch_losses = []
    # Per element, the smallest |gradient| over the steps relative to that
    # step's largest in the model: an element whose gradient is round-off at
    # some step (a conv bias feeding BatchNorm has an exact gradient of 0; a
    # weight's can cancel to ~1e-9) gets from Adam's normalisation a step of
    # up to lr in a direction the round-off picks, in Kiln and PyTorch alike
    # (at step 0, m / sqrt(v) is just the gradient's sign). Those elements
    # are held to |diff| <= lr * steps instead of the 1e-3 bound.
    min_ratio = {k: torch.full_like(p, float("inf")) for k, p in model.named_parameters()}
    for s in range(args.steps):
        xb = torch.from_numpy(x[s * batch:(s + 1) * batch])
        yb = torch.from_numpy(y[s * batch:(s + 1) * batch])
        logits = model(xb)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.reshape(-1))
        torch_losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        step_max = max(float(p.grad.abs().max()) for p in model.parameters()
                       if p.grad is not None)
        for k, p in model.named_parameters():
            if p.grad is not None:
                min_ratio[k] = torch.minimum(min_ratio[k],
                                             p.grad.detach().abs() / max(step_max, 1e-30))
        optimizer.step()

    # The same training in float64: the reference where float32 blurs.
    model64, _, _, _ = build(model_name, opt)
    model64 = model64.double()
    model64.train()
    optimizer64 = torch_optimizer(opt, model64.parameters())
    for s in range(args.steps):
        xb = torch.from_numpy(x[s * batch:(s + 1) * batch])
        if xb.is_floating_point():
            xb = xb.double()
        yb = torch.from_numpy(y[s * batch:(s + 1) * batch])
        logits = model64(xb)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.reshape(-1))
        optimizer64.zero_grad()
        loss.backward()
        optimizer64.step()
    state64 = {k: v.detach().numpy() for k, v in model64.state_dict().items()}

    if len(kiln_losses) != args.steps:
        return False, "kiln logged %d steps, expected %d" % (len(kiln_losses), args.steps)
    loss_err = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(kiln_losses, torch_losses))
    trained = {t.name: onnx.numpy_helper.to_array(t)
               for t in onnx.load(out_onnx).graph.initializer}
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    weight_err, compared, roundoff, bound_ok = 0.0, 0, 0, True
    by64 = []  # tensors within the bound of the float64 run only
    worst = ""
    adaptive = opt in ("adam", "adamw")
    for k, v in state.items():
        if k not in trained or v.dtype.kind != "f":
            continue
        if trained[k].shape != v.shape:
            return False, "%s: exported shape %s, torch %s" % (k, trained[k].shape, v.shape)
        scale = max(float(np.max(np.abs(v))), 1e-12)
        noise = None
        if adaptive and k in min_ratio:
            # Round-off (below 1e-6 of the step's largest gradient) at some step.
            noise = min_ratio[k].numpy() <= 1e-6
            roundoff += int(noise.sum())

        def rel(ref):
            diff = np.abs(trained[k] - ref)
            if noise is not None:
                if noise.any() and float(diff[noise].max()) > 1.01 * LR[opt] * args.steps:
                    return None
                diff = np.where(noise, 0.0, diff)
            return float(np.max(diff)) / scale

        d = rel(v)
        if (d is None or d > 1e-3) and k in state64:
            d64 = rel(state64[k].astype(np.float64))
            if d64 is not None and d64 <= 1e-3:
                by64.append("%s %.1e vs float64" % (k, d64))
                d = d64
        if d is None:
            bound_ok = False
            worst = k + " (round-off elements beyond lr*steps)"
            d = 0.0
        compared += 1
        if d > weight_err:
            weight_err, worst = d, k
    # The exported model runs under kiln-run and gives the trained module's
    # outputs (dropout is off; BatchNorm models export in training mode, so
    # the batch statistics of this batch are used on both sides).
    xb = os.path.join(work, "xb.npy")
    np.save(xb, x[:batch])
    outdir = os.path.join(work, "run")
    r = subprocess.run([os.path.join(args.bin, "kiln-run"), out_onnx,
                        "--input", "%s=%s" % (in_name, xb), "--output-dir", outdir],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return False, "kiln-run on the exported model failed: " + r.stderr.strip()
    with torch.no_grad():
        want = model(torch.from_numpy(x[:batch])).numpy()
    got = np.load(os.path.join(outdir, "output_0.npy"))
    run_err = float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-12)
    ok = (loss_err <= 1e-4 and weight_err <= 1e-3 and compared > 0 and bound_ok
          and run_err <= 1e-4)
    detail = ("losses %s vs torch %s: max rel %.2e; %d tensors, max rel %.2e (%s)"
              % (" ".join("%.5f" % l for l in kiln_losses[:3]) + " ...",
                 " ".join("%.5f" % l for l in torch_losses[:3]) + " ...",
                 loss_err, compared, weight_err, worst))
    detail += "; kiln-run of the export: max rel %.2e" % run_err
    if roundoff:
        detail += "; %d round-off-gradient elements within lr*steps" % roundoff
    if by64:
        detail += "; against PyTorch float64: " + ", ".join(by64)
    return ok, detail


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--models", default="mlp,cnn,gpt")
    p.add_argument("--optimizers", default="sgd,momentum,adam,adamw")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    failed = 0
    for m in args.models.split(","):
        for o in args.optimizers.split(","):
            ok, detail = run_case(args, m, o, args.batch)
            print("%s %s/%s: %s" % ("PASS" if ok else "FAIL", m, o, detail))
            failed += not ok
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
