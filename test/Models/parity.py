#!/usr/bin/python3
"""Forward parity of kiln-run against PyTorch (float32).

  /usr/bin/python3 test/Models/parity.py --kiln-run build/bin/kiln-run \
      --workdir /tmp/parity [--rtol 1e-4] [NAME ...]

Exports each model in inference mode (opset 17, TrainingMode.EVAL), runs it
in PyTorch and through `kiln-run`, and compares every output elementwise:
|kiln - torch| <= rtol * |torch| + atol, with atol = rtol * max|torch| * 1e-2
so that elements that cancel to ~0 are judged relative to the output's scale.
Prints one line per model with the largest relative error; exits 1 if any
model differs.
"""
import argparse
import os
import subprocess
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models as em  # noqa: E402

MODELS = {
    "mlp": (em.MLP, lambda: (torch.randn(8, 784),), ["x"], ["logits"]),
    "cnn": (em.CNN, lambda: (torch.randn(4, 1, 28, 28),), ["x"], ["logits"]),
    "resnet18": (lambda: __import__("torchvision").models.resnet18(weights=None),
                 lambda: (torch.randn(1, 3, 224, 224),), ["x"], ["logits"]),
    "gpt": (lambda: em.GPT(vocab=256, block_size=64, n_layer=4, n_head=4,
                           d_model=128),
            lambda: (torch.randint(0, 256, (2, 64), dtype=torch.int64),),
            ["idx"], ["logits"]),
    "tiny_ops": (em.TinyOps, lambda: (torch.randn(2, 3, 8, 8),), ["x"],
                 ["out", "flat"]),
}


def randomize_bn(model):
    """Non-trivial running statistics, so inference BatchNorm is tested."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln-run", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("names", nargs="*")
    opts = ap.parse_args()
    warnings.filterwarnings("ignore")
    os.makedirs(opts.workdir, exist_ok=True)
    bad = 0
    for name in opts.names or list(MODELS):
        build, make_args, in_names, out_names = MODELS[name]
        torch.manual_seed(0)
        model = build()
        randomize_bn(model)
        model.eval()
        args = make_args()
        path = os.path.join(opts.workdir, name + ".onnx")
        torch.onnx.export(model, args, path, opset_version=17,
                          training=torch.onnx.TrainingMode.EVAL,
                          input_names=in_names, output_names=out_names)
        with torch.no_grad():
            want = model(*args)
        if not isinstance(want, tuple):
            want = (want,)
        cmd = [opts.kiln_run, path, "--output-dir",
               os.path.join(opts.workdir, name + ".out")]
        for n, a in zip(in_names, args):
            f = os.path.join(opts.workdir, "%s.%s.npy" % (name, n))
            np.save(f, a.numpy())
            cmd += ["--input", "%s=%s" % (n, f)]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if r.returncode != 0:
            print("FAIL %s: kiln-run failed: %s" % (name, r.stdout.strip()))
            bad += 1
            continue
        worst = 0.0
        ok = True
        for k, w in enumerate(want):
            w = w.numpy()
            g = np.load(os.path.join(opts.workdir, name + ".out",
                                     "output_%d.npy" % k))
            if g.shape != w.shape or g.dtype != w.dtype:
                print("FAIL %s: output %d is %s %s, torch gives %s %s" %
                      (name, k, g.dtype, g.shape, w.dtype, w.shape))
                ok = False
                break
            atol = opts.rtol * float(np.abs(w).max()) * 1e-2
            err = np.abs(g.astype(np.float64) - w.astype(np.float64))
            rel = err / (np.abs(w) + atol / opts.rtol)
            worst = max(worst, float(rel.max()))
            if not np.all(err <= opts.rtol * np.abs(w) + atol):
                i = np.unravel_index(np.argmax(rel), w.shape)
                print("FAIL %s: output %d differs at %s: kiln %.9g, torch %.9g" %
                      (name, k, i, g[i], w[i]))
                ok = False
                break
        if ok:
            print("PASS %s: max relative error %.2e (rtol %.0e)" %
                  (name, worst, opts.rtol))
        else:
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
