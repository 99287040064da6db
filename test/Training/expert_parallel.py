#!/usr/bin/python3
# Expert parallelism (issue 17): `kiln-compile --mesh ep=E` (or dp=N,ep=E)
# splits a mixture of experts' stacked expert weights by expert over the ep
# ranks, which are data-parallel everywhere else; the tokens travel to
# their experts' ranks and back by all-to-all. The model is the GPT decoder
# with every MLP a MoE layer (test/Models/export_models.py MoEGPT: E=4
# experts, top-2 gating renormalised, per-sequence capacity
# ceil(2 T / 4 x 1.25), GShard's first-choices-first priority, the Switch
# load-balancing loss x 0.01), exported from PyTorch as TopK, OneHot,
# CumSum and batched MatMuls, trained with --loss output. Checks:
#   - the 1-rank run against PyTorch (torch.optim.SGD momentum 0.9 on the
#     same batches): losses within 1e-4 relative, weights within 1e-4
#     (the new ops' forward and gradients in training);
#   - N-rank = 1-rank (losses 1e-5 relative, final weights 1e-5) at ep=2,
#     ep=4 (one expert per rank) and dp=2,ep=2;
#   - the plan: 8 all-to-alls over ep (2 layers x dispatch and combine x
#     forward and backward), expert gradients summed over dp only, and each
#     rank holds 1/ep of the expert weights;
#   - checkpoints hold whole tensors: an ep=2 checkpoint resumes on 1 rank
#     and on dp=2,ep=2 with the uninterrupted losses;
#   - ZeRO over dp (stages 1, 2, 3) at dp=2,ep=2: the same losses and
#     weights, half the optimizer state per rank, and a ZeRO-1 and a
#     ZeRO-3 checkpoint resume on 1 rank (an ep=2 one on ZeRO-1 and -3);
#   - bad input: ep with tp, a global batch that does not
#     divide over dp x ep: one line each; a model with no expert layer says
#     so and trains as data parallelism.
#
# Usage: /usr/bin/python3 test/Training/expert_parallel.py --bin build/bin --work DIR
import argparse
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Models"))
sys.path.insert(0, HERE)
import export_models as em  # noqa: E402
from rank_runs import FAILED, check, close_losses, close_weights, losses, run, weights  # noqa: E402,E501
from safetensors_np import read_safetensors  # noqa: E402

BATCH = 8
STEPS = 12
SAMPLES = 64
LR = 0.05
EXPERT_PARAMS = ("moe.w1", "moe.b1", "moe.w2", "moe.b2")


def export(work):
    g = np.random.default_rng(5)
    torch.manual_seed(0)
    model = em.MoEGPT()
    model.train()
    x = g.integers(0, 64, size=(SAMPLES, 16)).astype(np.int64)
    y = g.integers(0, 64, size=(SAMPLES, 16)).astype(np.int64)
    path = os.path.join(work, "moe.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(x[:BATCH]), torch.from_numpy(y[:BATCH])),
                          path, opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["idx", "labels"],
                          output_names=["loss"])
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)
    data = ["--data", "idx=" + os.path.join(work, "x.npy"),
            "--data", "labels=" + os.path.join(work, "y.npy")]
    return path, model, x, y, data


def torch_reference(x, y):
    """The same module trained by torch.optim on the same batches (in
    order, --no-shuffle); returns per-step losses and final parameters."""
    torch.manual_seed(0)
    model = em.MoEGPT()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    out = []
    for s in range(STEPS):
        rows = [(s * BATCH + i) % SAMPLES for i in range(BATCH)]
        loss = model(torch.from_numpy(x[rows]), torch.from_numpy(y[rows]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(float(loss))
    return out, {k: v.detach().numpy() for k, v in model.state_dict().items()}


def compile_exe(kc, onnx_path, out, flags):
    r = subprocess.run([kc, onnx_path, "-o", out, "--batch-size", str(BATCH), "--loss",
                        "output", "--loss-output", "loss", "--optimizer", "momentum",
                        "--lr", str(LR)] + flags, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("kiln-compile %s failed: %s" % (" ".join(flags), r.stderr.strip()))
    return out, r.stderr


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    w = args.work
    kc = os.path.join(args.bin, "kiln-compile")
    onnx_path, _, x, y, data = export(w)
    base = data + ["--steps", str(STEPS), "--no-shuffle", "--log-every", "0"]

    # The 1-rank run against PyTorch.
    one, _ = compile_exe(kc, onnx_path, os.path.join(w, "moe-1.train"), [])
    r = run(one, 1, base + ["--metrics", os.path.join(w, "moe-1.jsonl"),
                            "--export-onnx", os.path.join(w, "moe-1.onnx")])
    if r.returncode != 0:
        raise SystemExit("1-rank run failed: " + r.stderr.strip())
    ref_l = losses(os.path.join(w, "moe-1.jsonl"))
    ref_w = weights(os.path.join(w, "moe-1.onnx"))
    t_l, t_w = torch_reference(x, y)
    rel = max(abs(a - b) / abs(b) for a, b in zip(ref_l, t_l))
    worst = max(float(np.max(np.abs(ref_w[k] - t_w[k]))) / max(float(np.max(np.abs(t_w[k]))), 1e-12)
                for k in t_w if k in ref_w and t_w[k].dtype.kind == "f")
    check(len(ref_l) == STEPS and rel <= 1e-4 and worst <= 1e-4,
          "moe 1 rank: %d step losses and the final weights match PyTorch (loss %.1e, "
          "weights %.1e relative)" % (STEPS, rel, worst))
    check(ref_l[-1] < ref_l[0], "moe 1 rank learns (loss %.4f -> %.4f)" % (ref_l[0], ref_l[-1]))

    # N ranks against the 1-rank run.
    exes = {}
    for mesh, ranks, zero in (("ep=2", 2, ""), ("ep=4", 4, ""), ("dp=2,ep=2", 4, ""),
                              ("dp=2,ep=2", 4, "1"), ("dp=2,ep=2", 4, "2"),
                              ("dp=2,ep=2", 4, "3")):
        stem = "moe-" + mesh.replace("=", "").replace(",", "-") + ("-z" + zero if zero else "")
        exe, err = compile_exe(kc, onnx_path, os.path.join(w, stem + ".train"),
                               ["--mesh", mesh] + (["--zero", zero] if zero else []))
        exes[mesh + (" --zero " + zero if zero else "")] = exe
        mesh_tag = mesh + (" --zero " + zero if zero else "")
        if mesh == "ep=2" and not zero:
            check("--mesh ep=2: 4 expert projections (8 parameters) split by expert, "
                  "2 of 4 experts per rank" in err,
                  "--mesh ep=2 finds the decoder's expert weights and biases", err[-300:])
        met, out = os.path.join(w, stem + ".jsonl"), os.path.join(w, stem + ".onnx")
        r = run(exe, ranks, base + ["--metrics", met, "--export-onnx", out])
        if r.returncode != 0:
            check(False, "moe %s: exit %d: %s" % (mesh_tag, r.returncode, r.stderr.strip()[-400:]))
            continue
        ok, why = close_losses(ref_l, losses(met))
        check(ok, "moe %s: %d step losses match the 1-rank run (%s)" % (mesh_tag, STEPS, why))
        ok, why = close_weights(ref_w, weights(out))
        check(ok, "moe %s: final weights match the 1-rank run (%s)" % (mesh_tag, why))
        if mesh == "ep=4":
            # Each rank holds 1/4 of the expert tensors (and their momentum).
            init = weights(onnx_path)
            split = sum(v.nbytes for k, v in init.items() if k.endswith(EXPERT_PARAMS))
            whole = sum(v.nbytes for v in init.values())
            want = 2 * ((whole - split) + split / 4) / 2 ** 20
            m = re.search(r"this rank holds ([0-9.]+) MiB of the model's ([0-9.]+) MiB",
                          r.stdout)
            got = float(m.group(1)) if m else -1
            check(m is not None and abs(got - want) < 0.01,
                  "moe ep=4: each rank holds %.2f MiB of parameters and momentum, 1/4 of "
                  "the expert tensors (%.2f MiB expected)" % (got, want), r.stdout[-300:])

    # ZeRO-1 over dp under dp x ep: each rank holds half of its block of
    # every optimizer state (momentum), the parameters as without ZeRO.
    r = run(exes["dp=2,ep=2 --zero 1"], 4, data + ["--steps", "1", "--log-every", "0"])
    m = re.search(r"optimizer state ([0-9.]+) MiB \(ZeRO-1: 1/2 of it\)", r.stdout)
    r0 = run(exes["dp=2,ep=2"], 4, data + ["--steps", "1", "--log-every", "0"])
    m0 = re.search(r"optimizer state ([0-9.]+) MiB", r0.stdout)
    ok = m is not None and m0 is not None and \
        abs(float(m.group(1)) - float(m0.group(1)) / 2) < 0.011
    check(ok, "moe dp=2,ep=2 --zero 1: a rank holds half its optimizer state (%s of %s MiB)"
          % (m.group(1) if m else "?", m0.group(1) if m0 else "?"), r.stdout[-400:])
    r3 = run(exes["dp=2,ep=2 --zero 3"], 4, data + ["--steps", "1", "--log-every", "0"])
    m3 = re.search(r"parameters ([0-9.]+) MiB \(ZeRO-3: ", r3.stdout)
    p0 = re.search(r"memory per rank: parameters ([0-9.]+) MiB", r0.stdout)
    ok = m3 is not None and p0 is not None and \
        abs(float(m3.group(1)) - float(p0.group(1)) / 2) < 0.011
    check(ok, "moe dp=2,ep=2 --zero 3: a rank holds half its parameters (%s of %s MiB)"
          % (m3.group(1) if m3 else "?", p0.group(1) if p0 else "?"), r3.stdout[-400:])

    # The plan's collectives.
    for mesh in ("ep=2", "dp=2,ep=2"):
        mlir = os.path.join(w, "moe-%s.mlir" % mesh)
        compile_exe(kc, onnx_path, mlir, ["--mesh", mesh, "--emit", "mlir"])
        text = open(mlir).read()
        ep_axis = "0" if mesh == "ep=2" else "1"
        a2a = len(re.findall(r"shard\.all_to_all .*grid_axes = \[%s\]" % ep_axis, text))
        gathers = len(re.findall(r"shard\.all_gather", text))
        ok = a2a == 8 and gathers == 0
        detail = "%d all-to-alls, %d all-gathers" % (a2a, gathers)
        if mesh == "dp=2,ep=2":
            # Expert gradients are summed over dp alone (their bucket holds
            # the [2, ...] expert blocks), the others over dp and ep.
            starts = [l for l in text.splitlines() if "dist.all_reduce_start" in l]
            init = weights(onnx_path)
            expert = sum(v.size for k, v in init.items() if k.endswith(EXPERT_PARAMS)) // 2
            dp_only = [l for l in starts if "grid_axes = [0]" in l]
            ok = ok and len(dp_only) == 1 and "bucket<%d x f32>" % expert in dp_only[0]
            both = [l for l in starts if "grid_axes = [0, 1]" in l]
            ok = ok and len(both) >= 1
            detail += ", %d gradient buckets over dp alone, %d over dp and ep" % (
                len(dp_only), len(both))
        check(ok, "moe %s: the plan moves tokens by 8 all-to-alls over ep and gathers "
              "nothing (%s)" % (mesh, detail))

    # Checkpoints hold whole tensors and resume on other meshes.
    ck = os.path.join(w, "ck-ep2")
    r = run(exes["ep=2"], 2, data + ["--steps", "6", "--no-shuffle", "--log-every", "0",
                                     "--checkpoint-dir", ck])
    ok = r.returncode == 0
    if ok:
        t = read_safetensors(os.path.join(ck, "step-00000006", "tensors.safetensors"))
        init = weights(onnx_path)
        ok = all(t[k].shape == init[k].shape for k in init if init[k].dtype.kind == "f") and \
            t["blocks.0.moe.w1/momentum_buffer"].shape == init["blocks.0.moe.w1"].shape
    check(ok, "an ep=2 checkpoint holds the whole expert tensors", r.stderr[-300:])
    ckz = os.path.join(w, "ck-zero")
    r = run(exes["dp=2,ep=2 --zero 1"], 4, data + ["--steps", "6", "--no-shuffle",
                                                     "--log-every", "0", "--checkpoint-dir", ckz])
    check(r.returncode == 0, "a dp=2,ep=2 --zero 1 run writes a checkpoint", r.stderr[-300:])
    ckz3 = os.path.join(w, "ck-zero3")
    r = run(exes["dp=2,ep=2 --zero 3"], 4, data + ["--steps", "6", "--no-shuffle",
                                                     "--log-every", "0", "--checkpoint-dir", ckz3])
    check(r.returncode == 0, "a dp=2,ep=2 --zero 3 run writes a checkpoint", r.stderr[-300:])
    for exe, ranks, what, src in (
            (one, 1, "an ep=2 checkpoint on 1 rank", ck),
            (exes["dp=2,ep=2"], 4, "an ep=2 checkpoint on dp=2,ep=2", ck),
            (exes["dp=2,ep=2 --zero 1"], 4, "an ep=2 checkpoint on dp=2,ep=2 --zero 1", ck),
            (one, 1, "a dp=2,ep=2 --zero 1 checkpoint on 1 rank", ckz),
            (exes["dp=2,ep=2 --zero 3"], 4, "an ep=2 checkpoint on dp=2,ep=2 --zero 3", ck),
            (one, 1, "a dp=2,ep=2 --zero 3 checkpoint on 1 rank", ckz3)):
        d = os.path.join(w, "ckr-%d-%s" % (ranks, what.replace(" ", "_").replace(",", "")))
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(src, d)
        met = d + ".jsonl"
        r = run(exe, ranks, base + ["--resume", "--checkpoint-dir", d, "--metrics", met])
        ok, why = (close_losses(ref_l[6:], losses(met)) if r.returncode == 0
                   else (False, r.stderr[-300:]))
        check(ok and "resumed from" in r.stdout,
              "%s resumes with the uninterrupted losses (%s)" % (what, why))

    # Bad input: one line each.
    def compile_err(flags, model=onnx_path, batch=BATCH):
        r = subprocess.run([kc, model, "-o", os.path.join(w, "bad.train"), "--batch-size",
                            str(batch), "--loss", "output", "--loss-output", "loss"] + flags,
                           capture_output=True, text=True)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        return r.returncode, lines
    for flags, batch, want, what in (
            (["--mesh", "ep=2,tp=2"], BATCH, "both ep and tp", "ep with tp"),
            (["--mesh", "dp=2,ep=2"], 6, "does not divide", "a batch that does not divide "
             "over dp x ep")):
        rc, lines = compile_err(flags, batch=batch)
        check(rc != 0 and len(lines) == 1 and want in lines[0],
              "refused with one line: " + what, " | ".join(lines)[-300:])
    # A model with no expert layer: said, and trained as dp=2.
    g = np.random.default_rng(1)
    mlp = os.path.join(w, "mlp_ce.onnx")
    torch.manual_seed(0)
    xm = g.standard_normal((32, 784)).astype(np.float32)
    ym = g.integers(0, 10, size=(32,)).astype(np.int64)
    torch.onnx.export(em.MLPWithLoss(), (torch.from_numpy(xm[:BATCH]), torch.from_numpy(ym[:BATCH])),
                      mlp, opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["x", "labels"],
                      output_names=["loss"])
    np.save(os.path.join(w, "xm.npy"), xm)
    np.save(os.path.join(w, "ym.npy"), ym)
    exe = os.path.join(w, "mlp-ep2.train")
    rc = subprocess.run([kc, mlp, "-o", exe, "--batch-size", str(BATCH), "--loss", "output",
                         "--loss-output", "loss", "--mesh", "ep=2"], capture_output=True,
                        text=True)
    said = "found no expert layer" in rc.stderr and "train as data parallelism" in rc.stderr
    r = run(exe, 2, ["--data", "x=" + os.path.join(w, "xm.npy"), "--data",
                     "labels=" + os.path.join(w, "ym.npy"), "--steps", "2"]) \
        if rc.returncode == 0 else None
    check(said and r is not None and r.returncode == 0,
          "--mesh ep=2 on a model with no expert layer says so and trains as data "
          "parallelism", rc.stderr[-300:] + ("" if r is None else r.stderr[-300:]))

    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
