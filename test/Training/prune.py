#!/usr/bin/python3
# Magnitude pruning (kiln-compile --prune magnitude=S --prune-at A --prune-end B
# --prune-every N; docs/Compression.md) on a small MLP, against the same
# pruning written in PyTorch: after each optimizer.step(), at the cubic
# schedule's points the round(s_t * n) smallest |w| of each Linear weight
# (those pruned before first) are pruned, and every step the pruned weights
# and their optimizer state are set to zero.
#
# The PyTorch comparison trains with SGD and momentum (the momentum buffer
# masked) and with Adam (both moments masked), on a small MLP (SmallMLP says
# why small: pruning is discontinuous at the threshold).
#
#   /usr/bin/python3 test/Training/prune.py --bin build/bin --work DIR
#
# Checks: per-step losses and final weights against PyTorch; the achieved
# sparsity at every schedule point equals the target; the pruned weights and
# their Adam state are zero at the end and the mask does not move after the
# schedule ends; the export has the zeros; a resume mid-schedule continues
# the uninterrupted run's losses; dp=2 gives the 1-rank losses; bad flags.
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
from safetensors_np import read_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))


class SmallMLP(torch.nn.Module):
    """32-24-16-10: a few hundred elements per weight, so that the gap
    between two neighbouring magnitudes (~1e-3 of the range) is far above
    float32 round-off, and which elements are pruned does not depend on
    the rounding of one library or the other (with test/Models' MLP,
    784x128, neighbours are 1e-6 apart and one thread setting of OpenBLAS
    already flips a choice at the threshold)."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 24)
        self.fc2 = torch.nn.Linear(24, 16)
        self.fc3 = torch.nn.Linear(16, 10)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))

BATCH, STEPS, LR, MOM_LR = 16, 12, 0.003, 0.05
SPARSITY, START, END, EVERY = 0.6, 2, 8, 2
FAILED = []
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")


def check(ok, what, detail=""):
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not detail else ": " + str(detail)),
          flush=True)
    if not ok:
        FAILED.append(what)


def target(s):
    """The schedule's sparsity at step index s, or None off its points."""
    if s < START or s > END or (s != END and (s - START) % EVERY):
        return None
    if END == START:
        return SPARSITY
    return SPARSITY * (1 - (1 - (s - START) / (END - START)) ** 3)


def count(t, n):
    return min(n, max(0, int(np.rint(t * n))))


def torch_run(x, y, steps, adam=False):
    """PyTorch SGD with momentum (or Adam) and the same pruning: losses,
    state dict, masks."""
    torch.manual_seed(0)
    model = SmallMLP()
    model.train()
    opt = (torch.optim.Adam(model.parameters(), lr=LR) if adam else
           torch.optim.SGD(model.parameters(), lr=MOM_LR, momentum=0.9))
    pruned = {k: torch.zeros_like(p) for k, p in model.named_parameters() if p.dim() >= 2}
    losses = []
    for s in range(steps):
        xb = torch.from_numpy(x[s * BATCH:(s + 1) * BATCH])
        yb = torch.from_numpy(y[s * BATCH:(s + 1) * BATCH])
        loss = F.cross_entropy(model(xb), yb)
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for k, p in model.named_parameters():
                if k not in pruned:
                    continue
                t = target(s)
                if t is not None:
                    key = torch.where(pruned[k] != 0, torch.full_like(p, -1.0), p.abs())
                    flat = key.flatten().double()
                    # Smallest key first, ties by position (a stable sort).
                    order = np.argsort(flat.numpy(), kind="stable")
                    m = torch.zeros(p.numel(), dtype=p.dtype)
                    m[torch.from_numpy(order[:count(t, p.numel())])] = 1
                    pruned[k] = m.reshape(p.shape)
                keep = 1 - pruned[k]
                p.mul_(keep)
                for name in ("momentum_buffer", "exp_avg", "exp_avg_sq"):
                    if name in opt.state[p]:
                        opt.state[p][name].mul_(keep)
    return losses, {k: v.detach().numpy() for k, v in model.state_dict().items()}, pruned


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    w = os.path.abspath(args.work)
    os.makedirs(w, exist_ok=True)
    torch.set_num_threads(1)
    kc = os.path.join(args.bin, "kiln-compile")

    g = np.random.default_rng(11)
    x = g.standard_normal((BATCH * STEPS, 32)).astype(np.float32)
    y = g.integers(0, 10, size=(BATCH * STEPS,)).astype(np.int64)
    np.save(os.path.join(w, "x.npy"), x)
    np.save(os.path.join(w, "y.npy"), y)
    data = ["--data", "x=" + os.path.join(w, "x.npy"), "--data", "labels=" + os.path.join(w, "y.npy"),
            "--no-shuffle"]
    torch.manual_seed(0)
    model = SmallMLP()
    model.train()
    onnx_path = os.path.join(w, "mlp.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(x[:BATCH]),), onnx_path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    prune = ["--prune", "magnitude=%g" % SPARSITY, "--prune-at", str(START),
             "--prune-end", str(END), "--prune-every", str(EVERY)]

    def compile_exe(name, extra, optimizer=("--optimizer", "adam", "--lr", repr(LR))):
        out = os.path.join(w, name)
        r = subprocess.run([kc, onnx_path, "-o", out, "--batch-size", str(BATCH), "--loss",
                            "cross-entropy"] + list(optimizer) + extra,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit("kiln-compile failed: " + r.stderr)
        return out

    def run(exe, extra, ranks=1):
        cmd = ([exe] if ranks == 1 else
               ["mpirun", "--oversubscribe", "-np", str(ranks), exe]) + data + extra + [
                   "--threads", "1", "--log-every", "0"]
        return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)

    def losses(path):
        return [json.loads(l)["loss"] for l in open(path) if l.strip()]

    def exported(path):
        return {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}

    exe = compile_exe("pruned.train", prune)
    met, out = os.path.join(w, "m.jsonl"), os.path.join(w, "out.onnx")
    ck = os.path.join(w, "ck")
    r = run(exe, ["--steps", str(STEPS), "--metrics", met, "--export-onnx", out,
                  "--checkpoint-dir", ck, "--checkpoint-every", "5"])
    check(r.returncode == 0, "the MLP trains with --prune", r.stderr[-400:])
    if r.returncode != 0:
        return 1
    kl = losses(met)
    ew = exported(out)
    tmask = {k: None for k in ("fc1.weight", "fc2.weight", "fc3.weight")}

    # Against PyTorch: SGD with momentum (the header says why not Adam).
    mexe = compile_exe("pruned-mom.train", prune,
                       ("--optimizer", "momentum", "--momentum", "0.9", "--lr", repr(MOM_LR)))
    mmet, mout = os.path.join(w, "mom.jsonl"), os.path.join(w, "mom.onnx")
    r = run(mexe, ["--steps", str(STEPS), "--metrics", mmet, "--export-onnx", mout])
    ml = losses(mmet) if r.returncode == 0 else []
    tl, tstate, tmask = torch_run(x, y, STEPS)
    rel = max((abs(a - b) / abs(b) for a, b in zip(ml, tl)), default=1.0)
    check(len(ml) == STEPS and rel <= 1e-4,
          "losses equal PyTorch's pruned SGD with momentum (max rel %.1e)" % rel,
          (r.stderr[-200:], ml[:4], tl[:4]))
    mw = exported(mout) if r.returncode == 0 else {}
    # And Adam, on this small model (its moments masked too).
    al, astate, amask = torch_run(x, y, STEPS, adam=True)
    rel = max((abs(a - b) / abs(b) for a, b in zip(kl, al)), default=1.0)
    aerr = max((float(np.max(np.abs(ew[k] - astate[k]))) /
                max(float(np.max(np.abs(astate[k]))), 1e-12) for k in astate if k in ew),
               default=1.0)
    check(len(kl) == STEPS and rel <= 1e-4 and aerr <= 1e-3 and
          all(np.array_equal(ew[k] == 0, amask[k].numpy() != 0) for k in amask),
          "Adam: losses (max rel %.1e), weights (%.1e) and pruned elements equal PyTorch's"
          % (rel, aerr), (kl[:4], al[:4]))
    werr = max((float(np.max(np.abs(mw[k] - tstate[k]))) /
                max(float(np.max(np.abs(tstate[k]))), 1e-12) for k in tstate if k in mw),
               default=1.0)
    check(werr <= 1e-3, "final weights equal PyTorch's (max rel %.1e)" % werr)
    same_mask = bool(mw) and all(np.array_equal(mw[k] == 0, tmask[k].numpy() != 0) for k in tmask)
    check(same_mask, "the exported zeros are PyTorch's pruned elements")
    final = {k: float(np.mean(ew[k] == 0)) for k in tmask}
    want = {k: count(SPARSITY, ew[k].size) / ew[k].size for k in tmask}
    check(final == want and "fc1.bias" in ew and np.count_nonzero(ew["fc1.bias"]) == ew["fc1.bias"].size,
          "the export is %g sparse in each weight, the biases dense" % SPARSITY, (final, want))

    # The achieved sparsity at each schedule point equals the target.
    pts = [s for s in range(STEPS) if target(s) is not None]
    got = []
    for s in pts:
        o = os.path.join(w, "at%d.onnx" % s)
        r = run(exe, ["--steps", str(s + 1), "--export-onnx", o])
        if r.returncode != 0:
            got.append(("failed", r.stderr[-200:]))
            continue
        e = exported(o)
        got.append(all(int(np.sum(e[k] == 0)) == count(target(s), e[k].size) for k in tmask))
    check(got == [True] * len(pts), "the sparsity at steps %s is the schedule's %s" %
          (pts, ["%.3f" % target(s) for s in pts]), got)
    # Up to --prune-at nothing is pruned (the cubic schedule starts at 0).
    o = os.path.join(w, "before.onnx")
    r = run(exe, ["--steps", str(START + 1), "--export-onnx", o])
    check(r.returncode == 0 and all(np.count_nonzero(exported(o)[k] == 0) == 0 for k in tmask),
          "no weight is zero up to --prune-at", r.stderr[-200:])

    # The Adam state of the pruned elements is zero (the last checkpoint,
    # step 10, after the schedule ended) and the mask is the export's.
    last = sorted(d for d in os.listdir(ck) if d.startswith("step-"))[-1]
    st = read_safetensors(os.path.join(ck, last, "tensors.safetensors"))
    ok = True
    for k in tmask:
        mask = st.get(k + "/pruned")
        if mask is None:
            ok = False
            break
        z = mask != 0
        ok &= bool(np.all(st[k][z] == 0) and np.all(st[k + "/exp_avg"][z] == 0) and
                   np.all(st[k + "/exp_avg_sq"][z] == 0) and np.array_equal(z, ew[k] == 0))
    check(ok, "the checkpoint (%s) holds each mask; pruned weights and their exp_avg, "
          "exp_avg_sq are zero; the mask did not move after --prune-end" % last, sorted(st)[:8])

    # Resume at step 5, mid-schedule: the uninterrupted run's losses.
    met2 = os.path.join(w, "m2.jsonl")
    import shutil
    ck5 = os.path.join(w, "ck5")
    shutil.rmtree(ck5, ignore_errors=True)
    r = run(exe, ["--steps", "5", "--checkpoint-dir", ck5, "--checkpoint-every", "5"])
    r2 = run(exe, ["--steps", str(STEPS), "--metrics", met2, "--checkpoint-dir", ck5, "--resume"])
    l2 = losses(met2) if r2.returncode == 0 else []
    check(r.returncode == 0 and r2.returncode == 0 and l2 == kl[5:],
          "a resume at step 5 continues the uninterrupted losses exactly", (r2.stderr[-300:], l2[:3], kl[5:8]))

    # dp=2: the 1-rank losses.
    exe2 = compile_exe("pruned2.train", prune + ["--mesh", "dp=2"])
    met3 = os.path.join(w, "m3.jsonl")
    r = run(exe2, ["--steps", str(STEPS), "--metrics", met3], ranks=2)
    l3 = losses(met3) if r.returncode == 0 else []
    rel = max((abs(a - b) / abs(b) for a, b in zip(l3, kl)), default=1.0)
    check(len(l3) == STEPS and rel <= 1e-5, "dp=2 gives the 1-rank losses (max rel %.1e)" % rel,
          r.stderr[-300:])

    # Bad input: a clear line, exit 1.
    def refused(cmd, why):
        r = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
        err = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(err) == 1 and why in err[0], "refused: " + why, r.stderr)

    base = [kc, onnx_path, "-o", os.path.join(w, "bad.train"), "--batch-size", str(BATCH),
            "--optimizer", "adam"]
    refused(base + ["--prune", "magnitude=1.2"],
            "--prune magnitude=S needs a sparsity S in [0, 1), got '1.2'")
    refused(base + ["--prune", "magnitude=-0.1"],
            "--prune magnitude=S needs a sparsity S in [0, 1), got '-0.1'")
    refused(base + ["--prune", "random=0.3"],
            "--prune needs magnitude=S or l1-channel=R, got 'random=0.3'")
    refused(base + ["--prune", "magnitude=0.5", "--prune-at", "9", "--prune-end", "3"],
            "--prune-end 3 is before --prune-at 9")
    refused(base + ["--prune-at", "3"], "--prune-at, --prune-end and --prune-every need --prune magnitude=S")
    refused(base + ["--prune", "magnitude=0.5", "--mesh", "dp=2", "--zero", "1"],
            "--prune with --zero is not supported yet")
    refused([exe] + data + ["--steps", "2"],
            "the model was compiled with --prune-at 2, past this run's last step 1")

    for f in FAILED:
        print("FAILED: " + f)
    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
