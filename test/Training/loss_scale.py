#!/usr/bin/python3
# Dynamic loss scaling (kiln-compile --loss-scale dynamic) against
# torch.cuda.amp.GradScaler's rule.
#
# Usage: /usr/bin/python3 test/Training/loss_scale.py --bin build/bin --work DIR
#
# PyTorch 1.13 has no CPU GradScaler (its unscale and update kernels are
# CUDA-only), so the reference is the rule of torch/amp/grad_scaler.py,
# transcribed below (unscale_: grads *= 1/scale in float32 and found_inf
# from every gradient; step: optimizer.step() only without Inf/NaN;
# update: scale *= backoff on found_inf, *= growth after growth_interval
# clean steps), driving torch.autocast("cpu", bfloat16) on the same model.
#
#  * bf16 (the exponent range of float32 on both sides), inputs of 1e4 and
#    an initial scale of 2^127: the weight gradients overflow float32 until
#    the scale backs off, and again each time it grows back (growth interval
#    3); Kiln's per-step skipped flags and scales
#    must equal PyTorch's exactly, the losses within 2e-2, and the trained
#    weights within 2e-2 (Adam: skipped steps do not advance its step count).
#  * fp16, initial scale 2^24: the steps skipped while the scale is too large
#    leave the weights and optimizer state bit-identical (a run of only
#    those steps exports the initial weights); each skip halves the scale;
#    every --scale-growth-interval clean steps double it; the sequence is
#    the rule's given the skipped flags; a run resumed from a checkpoint in
#    the middle continues the same losses and scales.
#  * fp16 under --mesh dp=2: ZeRO-3 (whose finite check reads all-reduced
#    shard sums) skips exactly the steps ZeRO-0 skips, with the same scales
#    and losses;
#  * a scale that collapses below its minimum (an input that overflows fp16
#    at any scale) stops the run with one line naming the step.
# Prints one line per check and exits 1 if any fails.
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

BATCH = 8
LR = 1e-3


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def setup(work, scale_x=1.0):
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    model = MLP()
    g = np.random.default_rng(3)
    x = (g.standard_normal((BATCH * 40, 32)) * scale_x).astype(np.float32)
    y = g.integers(0, 10, (BATCH * 40,)).astype(np.int64)
    np.save(os.path.join(work, "x.npy"), x)
    np.save(os.path.join(work, "y.npy"), y)
    path = os.path.join(work, "model.onnx")
    torch.onnx.export(model, (torch.from_numpy(x[:BATCH]),), path, opset_version=17,
                      input_names=["x"], output_names=["logits"])
    return model, x, y, path


def kiln(args, work, onnx_path, tag, compile_flags, run_flags, steps):
    exe = os.path.join(work, tag + ".train")
    r = subprocess.run([os.path.join(args.bin, "kiln-compile"), onnx_path, "-o", exe,
                        "--batch-size", str(BATCH), "--optimizer", "adam", "--lr", repr(LR)]
                       + compile_flags, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("kiln-compile %s: %s" % (tag, r.stderr.strip()))
    metrics = os.path.join(work, tag + ".jsonl")
    r = subprocess.run([exe, "--data", "x=" + os.path.join(work, "x.npy"),
                        "--data", "labels=" + os.path.join(work, "y.npy"),
                        "--steps", str(steps), "--no-shuffle", "--metrics", metrics,
                        "--log-every", "1000"] + run_flags, capture_output=True, text=True)
    rows = [json.loads(l) for l in open(metrics) if l.strip()] if os.path.exists(metrics) else []
    return r, rows


def exported(path):
    return {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def grad_scaler_reference(model, x, y, steps, init, interval, clip=0.0):
    """torch.autocast bf16 training under GradScaler's rule (with clipping
    after unscale_, PyTorch's recipe); per step (loss, scale used, skipped)."""
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    scale = torch.tensor(init, dtype=torch.float32)
    tracker = 0
    out = []
    for s in range(steps):
        xb = torch.from_numpy(x[s * BATCH:(s + 1) * BATCH])
        yb = torch.from_numpy(y[s * BATCH:(s + 1) * BATCH])
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        (loss * scale).backward()
        inv = scale.double().reciprocal().float()          # GradScaler.unscale_
        found_inf = False
        for p in model.parameters():
            p.grad.mul_(inv)
            found_inf |= not bool(torch.isfinite(p.grad).all())
        used = float(scale)
        if not found_inf:                                    # GradScaler.step
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
        if found_inf:                                        # _amp_update_scale_
            scale = scale * 0.5
            tracker = 0
        else:
            tracker += 1
            if tracker == interval:
                scale = scale * 2.0
                tracker = 0
        out.append((float(loss), used, found_inf))
    return out


def rule_problems(rows, init, interval):
    """Where the metrics' scales depart from the rule given their skips."""
    scale, tracker = np.float32(init), 0
    for r in rows:
        if np.float32(r["loss_scale"]) != scale:
            return "step %d ran at scale %g, the rule says %g" % (r["step"], r["loss_scale"], scale)
        if r["skipped"]:
            scale, tracker = np.float32(scale * 0.5), 0
        else:
            tracker += 1
            if tracker == interval:
                scale, tracker = np.float32(scale * 2.0), 0
    return ""


def check_bf16(args):
    work = os.path.join(args.work, "bf16")
    model, x, y, path = setup(work, scale_x=1e4)
    init, interval, steps = 2.0 ** 127, 3, 24
    try:
        r, rows = kiln(args, work, path, "k", ["--precision", "bf16", "--loss-scale", "dynamic",
                                               "--init-scale", repr(init),
                                               "--scale-growth-interval", str(interval)],
                       ["--export-onnx", os.path.join(work, "k.onnx")], steps)
    except RuntimeError as e:
        return [(False, "bf16: %s" % e)]
    if r.returncode != 0 or len(rows) != steps:
        return [(False, "bf16: training failed: " + r.stderr.strip())]
    ref = grad_scaler_reference(model, x, y, steps, init, interval)
    # The metrics print float32 scales with 9 digits: exact as float32.
    ks = [(row["skipped"], np.float32(row["loss_scale"])) for row in rows]
    ts = [(skip, np.float32(scale)) for _, scale, skip in ref]
    res = [(ks == ts and any(k for k, _ in ks) and not all(k for k, _ in ks),
            "bf16 skipped steps and scales equal GradScaler's: kiln %s, torch %s"
            % ("".join("S" if k else "." for k, _ in ks),
               "".join("S" if k else "." for k, _ in ts)))]
    err = max(abs(row["loss"] - l) / abs(l) for row, (l, _, _) in zip(rows, ref))
    res.append((err <= 2e-2, "bf16 losses vs torch.autocast + GradScaler: max rel %.2e" % err))
    got = exported(os.path.join(work, "k.onnx"))
    werr = max(float(np.max(np.abs(got[k] - v.detach().numpy()))) /
               max(float(np.max(np.abs(v.detach().numpy()))), 1e-12)
               for k, v in model.state_dict().items() if k in got)
    res.append((werr <= 2e-2, "bf16 trained weights vs torch: max rel %.2e" % werr))

    # Clipping by the global norm composes with the scaler: the plan clips
    # the unscaled gradients, as clip_grad_norm_ after unscale_ does.
    model, x, y, path = setup(os.path.join(work, "clip"), scale_x=1e4)
    try:
        r, rows = kiln(args, work, path, "clip",
                       ["--precision", "bf16", "--loss-scale", "dynamic",
                        "--init-scale", repr(init), "--scale-growth-interval",
                        str(interval), "--clip-grad-norm", "0.5"],
                       ["--export-onnx", os.path.join(work, "clip.onnx")], steps)
    except RuntimeError as e:
        return res + [(False, "bf16 clip: %s" % e)]
    ref = grad_scaler_reference(model, x, y, steps, init, interval, clip=0.5)
    ok = r.returncode == 0 and len(rows) == steps
    err = max(abs(row["loss"] - l) / abs(l) for row, (l, _, _) in zip(rows, ref)) if ok else 1
    got = exported(os.path.join(work, "clip.onnx")) if ok else {}
    werr = max([float(np.max(np.abs(got[k] - v.detach().numpy()))) /
                max(float(np.max(np.abs(v.detach().numpy()))), 1e-12)
                for k, v in model.state_dict().items() if k in got] or [1.0])
    norms = [row["grad_norm"] for row in rows if ok and not row["skipped"]]
    res.append((ok and err <= 2e-2 and werr <= 2e-2 and norms and max(norms) > 0.5,
                "bf16 + --clip-grad-norm 0.5 (unscaled norms up to %.3g): losses max rel "
                "%.2e, weights max rel %.2e" % (max(norms or [0]), err, werr)))
    return res


def check_fp16(args):
    work = os.path.join(args.work, "fp16")
    _, x, y, path = setup(work)
    init, interval, steps = 2.0 ** 24, 2, 24
    flags = ["--precision", "fp16", "--init-scale", repr(init),
             "--scale-growth-interval", str(interval)]
    try:
        r, rows = kiln(args, work, path, "k", flags, [], steps)
    except RuntimeError as e:
        return [(False, "fp16: %s" % e)]
    if r.returncode != 0 or len(rows) != steps:
        return [(False, "fp16: training failed: " + r.stderr.strip())]
    res = []
    lead = 0
    while lead < steps and rows[lead]["skipped"]:
        lead += 1
    sc = [np.float32(r["loss_scale"]) for r in rows]
    halves = all(sc[i + 1] == sc[i] / 2 for i in range(lead))
    res.append((0 < lead < steps and halves,
                "fp16 scale 2^24: the first %d steps skipped, each halving the scale (to %g)"
                % (lead, sc[lead] if lead < steps else 0)))
    grew = [rows[i]["step"] for i in range(1, steps) if sc[i] == 2 * sc[i - 1]]
    why = rule_problems(rows, init, interval)
    res.append((not why and grew, "fp16 scales follow the rule (doubled at steps %s)%s"
                % (grew[:6], ": " + why if why else "")))
    # The skipped prefix leaves every weight bit-identical.
    r2, _ = kiln(args, work, path, "prefix", flags,
                 ["--export-onnx", os.path.join(work, "prefix.onnx")], lead)
    init_w = exported(path)
    after = exported(os.path.join(work, "prefix.onnx")) if r2.returncode == 0 else {}
    same = after and all(np.array_equal(after[k], init_w[k]) for k in init_w if k in after)
    res.append((bool(same), "fp16: %d skipped steps leave the weights bit-identical" % lead))
    # Resume mid-run: the same losses and scales as the uninterrupted run.
    ck = os.path.join(work, "ckpt")
    cut = lead + 3
    subprocess.run(["rm", "-rf", ck])
    ra, _ = kiln(args, work, path, "a", flags,
                 ["--checkpoint-dir", ck, "--checkpoint-every", str(cut)], cut)
    rb, rows_b = kiln(args, work, path, "a", flags,
                      ["--checkpoint-dir", ck, "--resume"], steps)
    ok = ra.returncode == 0 and rb.returncode == 0 and len(rows_b) == steps
    same = ok and all(a["loss"] == b["loss"] and a["loss_scale"] == b["loss_scale"]
                      and a["skipped"] == b["skipped"] for a, b in zip(rows, rows_b))
    res.append((bool(same), "fp16: resumed at step %d, losses and scales equal the "
                "uninterrupted run's%s" % (cut, "" if ok else ": " + (ra.stderr + rb.stderr).strip())))
    return res


def check_ranks(args):
    """fp16 under --mesh dp=2: each rank computes its half batch's fp16
    gradients, which are summed over the ranks in f32 (as PyTorch DDP sums
    autocast's f32 gradients), so a step overflows where the ranks' sum
    does, not where the 1-rank run's whole-batch fp16 gradient does. What
    must hold: every rank makes the same decision (ZeRO-3's finite check,
    from all-reduced shard sums, skips exactly the steps ZeRO-0's does, with
    the same losses), and the run skips while the scale is too large and
    then trains."""
    work = os.path.join(args.work, "ranks")
    _, _, _, path = setup(work)
    flags = ["--precision", "fp16", "--init-scale", repr(2.0 ** 24),
             "--scale-growth-interval", "2"]
    steps = 20
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1")
    runs, errs = {}, []
    for zero in (0, 3):
        tag = "dp2z%d" % zero
        exe = os.path.join(work, tag + ".train")
        r = subprocess.run([os.path.join(args.bin, "kiln-compile"), path, "-o", exe,
                            "--batch-size", str(BATCH), "--optimizer", "adam", "--lr", repr(LR),
                            "--mesh", "dp=2", "--zero", str(zero)] + flags,
                           capture_output=True, text=True)
        metrics = os.path.join(work, tag + ".jsonl")
        if r.returncode == 0:
            r = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", exe,
                                "--data", "x=" + os.path.join(work, "x.npy"),
                                "--data", "labels=" + os.path.join(work, "y.npy"),
                                "--steps", str(steps), "--no-shuffle", "--metrics", metrics,
                                "--log-every", "1000"], capture_output=True, text=True,
                               env=env, timeout=300)
        if r.returncode == 0:
            runs[zero] = [json.loads(l) for l in open(metrics)]
        else:
            errs.append(r.stderr.strip()[-300:])
    if len(runs) != 2:
        return [(False, "fp16 dp=2: " + " | ".join(errs))]
    flags0 = "".join("S" if x["skipped"] else "." for x in runs[0])
    flags3 = "".join("S" if x["skipped"] else "." for x in runs[3])
    scales = [x["loss_scale"] for x in runs[0]] == [x["loss_scale"] for x in runs[3]]
    err = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(runs[0], runs[3]))
    ok = (len(runs[0]) == steps and flags0 == flags3 and scales and err <= 1e-5 and
          flags0.startswith("S") and "." in flags0)
    return [(ok, "fp16 dp=2: ZeRO-3 skips exactly ZeRO-0's steps (%s vs %s, same scales), "
             "losses max rel %.1e" % (flags3, flags0, err))]


def check_collapse(args):
    work = os.path.join(args.work, "collapse")
    _, _, _, path = setup(work, scale_x=1e6)  # overflows fp16 in forward
    try:
        r, rows = kiln(args, work, path, "k", ["--precision", "fp16", "--init-scale", "4"], [], 10)
    except RuntimeError as e:
        return [(False, "collapse: %s" % e)]
    err = r.stderr.strip()
    ok = (r.returncode == 1 and len(err.splitlines()) == 1 and "step 2: the loss scale fell to 0.5"
          in err and "not finite at any scale" in err)
    return [(ok, "a collapsing scale stops the run: " + err)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    results = check_bf16(args) + check_fp16(args) + check_ranks(args) + check_collapse(args)
    failed = 0
    for ok, detail in results:
        print("%s %s" % ("PASS" if ok else "FAIL", detail))
        failed += not ok
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
