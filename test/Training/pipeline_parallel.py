#!/usr/bin/python3
# Pipeline parallelism and gradient accumulation (issue 18): the
# N-rank = 1-rank invariant with microbatches.
#   - --microbatches M on 1 rank (gradient accumulation: forward and
#     backward per microbatch, the gradients averaged) computes the
#     M = 1 run's losses and weights (1e-5) for the MLP and the GPT decoder;
#   - --mesh pp=S --microbatches M: S ranks, each running its stage's
#     program, exchanging activations and gradients by send/recv, compute
#     the 1-rank run's losses and final weights (1e-5 relative, 1e-5) for
#     every schedule (gpipe, 1f1b, interleaved with 2 chunks per rank, zb)
#     on the MLP at pp=2 and the GPT at pp=2 and pp=4, and pp=2,dp=2,
#     pp=2,tp=2 (the MLP annotated, the GPT with --tp megatron) and
#     pp=2,dp=2,tp=2 (8 ranks), ZeRO-1 and ZeRO-3 over dp at pp=2,dp=2 and
#     ZeRO-1 at pp=2,dp=2,tp=2;
#   - tied weights across stages (the GPT's embedding and LM head);
#   - checkpoints hold the whole model and resume across meshes;
#   - --stage-boundaries pins the cut by ONNX value name;
#   - bad input: more stages than ops, a boundary that does not exist or
#     does not cut the graph, microbatches that do not divide the batch,
#     --schedule without pp, and composition not built yet: one line each.
#
# Usage: /usr/bin/python3 test/Training/pipeline_parallel.py --bin build/bin --work DIR
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Models"))
sys.path.insert(0, HERE)
import export_models as em  # noqa: E402
from rank_runs import (FAILED, check, close_losses, close_weights, export_samples,  # noqa: E402
                       harness_args, losses, run, weights)
from safetensors_np import read_safetensors  # noqa: E402

BATCH = 16
STEPS = 8
# The MLP's tensor-parallel annotations: fc1 column-parallel, fc2 row-parallel.
MLP_SHARD = ["--shard", "fc1.weight=tp,-", "--shard", "fc2.weight=-,tp"]
SAMPLES = 64


def export(work, name):
    g = np.random.default_rng(3)
    torch.manual_seed(0)
    if name == "gpt_tied":  # the LM head reads the token embedding
        model, in_name = em.GPT(dropout=0.0, tied=True), "idx"
        x = g.integers(0, 64, size=(SAMPLES, 16)).astype(np.int64)
        y = g.integers(0, 64, size=(SAMPLES, 16)).astype(np.int64)
        flags = ["--optimizer", "momentum", "--momentum", "0.9", "--lr", "0.05"]
    elif name == "mlp":
        model, in_name = em.MLP(), "x"
        x = g.standard_normal((SAMPLES, 784)).astype(np.float32)
        y = g.integers(0, 10, size=(SAMPLES,)).astype(np.int64)
        flags = ["--optimizer", "adam", "--lr", "0.003"]
    else:
        model, in_name = em.GPT(dropout=0.0), "idx"
        x = g.integers(0, 64, size=(SAMPLES, 16)).astype(np.int64)
        y = g.integers(0, 64, size=(SAMPLES, 16)).astype(np.int64)
        flags = ["--optimizer", "momentum", "--momentum", "0.9", "--lr", "0.05"]
    path, data = export_samples(work, name, model, in_name, x, y, BATCH)
    return path, flags, data


def compile_exe(args, onnx_path, out, flags):
    r = subprocess.run([os.path.join(args.bin, "kiln-compile"), onnx_path, "-o", out,
                        "--batch-size", str(BATCH), "--loss", "cross-entropy"] + flags,
                       capture_output=True, text=True)
    return r


def schedule_case(pp, m, kind):
    """(label, ranks, compile flags) of `kind` at pp stages, m microbatches
    (interleaved: 2 chunks per rank)."""
    flags = ["--mesh", "pp=%d" % pp, "--microbatches", str(m)]
    if kind != "1f1b":
        flags += ["--schedule", kind]
    if kind == "interleaved":
        flags += ["--virtual-stages", "2"]
    return ("pp=%d %s%s M=%d" % (pp, kind, " V=2" if kind == "interleaved" else "", m),
            pp, flags)


def train_pair(args, w, onnx_path, base, what, tag, flags, pipe):
    """Trains `flags` on 1 rank and as `pipe` (label, ranks, extra flags);
    returns {ranks: (losses, final weights, per-step skipped flags)}."""
    runs = {}
    for label, ranks, extra in (("1 rank", 1, []), pipe):
        exe = os.path.join(w, "%s-%d" % (tag, ranks))
        r = compile_exe(args, onnx_path, exe, flags + extra)
        r = r if r.returncode else run(exe, ranks, base + ["--metrics", exe + ".jsonl",
                                                           "--export-onnx", exe + "-w.onnx"])
        check(r.returncode == 0, "%s %s trains" % (what, label), r.stderr.strip()[-600:])
        if r.returncode == 0:
            recs = [json.loads(l) for l in open(exe + ".jsonl") if l.strip()]
            runs[ranks] = (losses(exe + ".jsonl"), weights(exe + "-w.onnx"),
                           [rec.get("skipped", False) for rec in recs])
    return runs


def checkpoints(args, w):
    def ckpt(exe, ranks, base, d, steps):
        shutil.rmtree(d, ignore_errors=True)
        r = run(exe, ranks, base + ["--steps", str(steps), "--seed", "7", "--log-every", "0",
                                    "--checkpoint-dir", d])
        path = os.path.join(d, "step-%08d" % steps)
        if r.returncode or not os.path.isdir(path):
            return None, r.stderr.strip()[-600:]
        return read_safetensors(os.path.join(path, "tensors.safetensors")), ""

    def resume(exe, ranks, base, src, tag, ref):
        d = os.path.join(w, "resume-" + tag)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(src, d)
        met = os.path.join(w, "resume-%s.jsonl" % tag)
        r = run(exe, ranks, base + ["--steps", str(STEPS), "--seed", "7", "--log-every", "0",
                                    "--resume", "--checkpoint-dir", d, "--metrics", met])
        if r.returncode:
            return False, r.stderr.strip()[-600:]
        ok, why = close_losses(ref, losses(met))
        return ok and "resumed from" in r.stdout, why

    half = STEPS // 2
    for name, pp, extra in (("mlp", 2, ["--microbatches", "4"]),
                            ("gpt", 4, ["--microbatches", "8"])):
        onnx_path, flags, data = export(w, name)
        ref_l = losses(os.path.join(w, name + "-ref.jsonl"))
        exes = {}
        for label, ranks, mesh in (("1 rank", 1, []), ("dp=2", 2, ["--mesh", "dp=2"]),
                                   ("pp=%d" % pp, pp, ["--mesh", "pp=%d" % pp] + extra),
                                   ("pp=2,dp=2", 4, ["--mesh", "pp=2,dp=2",
                                                     "--microbatches", "2"]),
                                   ("pp=2,tp=2", 4, ["--mesh", "pp=2,tp=2",
                                                     "--microbatches", "4"] + MLP_SHARD),
                                   ("pp=2,dp=2 --zero 1", 4, ["--mesh", "pp=2,dp=2",
                                                              "--microbatches", "2",
                                                              "--zero", "1"]),
                                   ("pp=2,dp=2 --zero 3", 4, ["--mesh", "pp=2,dp=2",
                                                              "--microbatches", "2",
                                                              "--zero", "3"])):
            if name == "gpt" and label not in ("1 rank", "pp=4"):
                continue
            exe = os.path.join(w, "%s-ck-%s" % (name, label.replace(" ", "").replace(",", "-")))
            r = compile_exe(args, onnx_path, exe, flags + mesh)
            check(r.returncode == 0, "%s %s compiles (checkpoints)" % (name, label),
                  r.stderr.strip())
            exes[label] = (exe, ranks)
        one, pipe = exes["1 rank"], exes["pp=%d" % pp]
        t1, err1 = ckpt(one[0], 1, data, os.path.join(w, name + "-ck1"), half)
        tp, errp = ckpt(pipe[0], pp, data, os.path.join(w, name + "-ckpp"), half)
        if t1 is None or tp is None:
            check(False, "%s pp=%d writes a checkpoint" % (name, pp), err1 + errp)
            continue
        same = sorted(t1) == sorted(tp) and all(t1[k].shape == tp[k].shape for k in t1)
        worst = max((float(np.max(np.abs(t1[k].astype(np.float64) - tp[k]) /
                                  np.maximum(1.0, np.abs(t1[k]))))
                     for k in t1 if k in tp and t1[k].size and t1[k].dtype.kind == "f"),
                    default=0.0)
        check(same and worst <= 1e-5,
              "%s pp=%d checkpoint holds the 1-rank checkpoint's %d tensors (every stage's "
              "parameters and optimizer state, whole; worst difference %.1e)"
              % (name, pp, len(t1), worst),
              "names %s vs %s" % (sorted(set(t1) ^ set(tp))[:6], ""))
        for label, (exe, ranks) in exes.items():
            src = os.path.join(w, name + "-ckpp")
            ok, why = resume(exe, ranks, data, src, "%s-pp-on-%s" % (name, label), ref_l[half:])
            check(ok, "%s: a pp=%d checkpoint resumes on %s with the uninterrupted losses (%s)"
                  % (name, pp, label, why))
        targets = [("pp=%d" % pp, pipe)] + ([("pp=2,tp=2", exes["pp=2,tp=2"])]
                                             if "pp=2,tp=2" in exes else [])
        for label, (exe, ranks) in targets:
            ok, why = resume(exe, ranks, data, os.path.join(w, name + "-ck1"),
                             "%s-1-on-%s" % (name, label), ref_l[half:])
            check(ok, "%s: a 1-rank checkpoint resumes on %s with the uninterrupted losses "
                  "(%s)" % (name, label, why))
        # A pp=2,tp=2 checkpoint (the split tensors joined) and a ZeRO one
        # (the dp blocks joined) hold the whole tensors and resume on 1
        # rank; the ZeRO-1 one also on ZeRO-3.
        for label, tag, also in (("pp=2,tp=2", "ck3", None),
                                 ("pp=2,dp=2 --zero 1", "ckz", "pp=2,dp=2 --zero 3")):
            if label not in exes:
                continue
            t3, err3 = ckpt(exes[label][0], 4, data, os.path.join(w, name + "-" + tag), half)
            same = t3 is not None and sorted(t1) == sorted(t3) and \
                all(t1[k].shape == t3[k].shape for k in t1)
            check(same, "%s %s checkpoint holds the 1-rank checkpoint's tensors whole"
                  % (name, label), err3)
            if not same:
                continue
            for on, (exe, ranks) in [("1 rank", one)] + ([(also, exes[also])] if also else []):
                ok, why = resume(exe, ranks, data, os.path.join(w, name + "-" + tag),
                                 "%s-%s-on-%d" % (name, tag, ranks), ref_l[half:])
                check(ok, "%s: a %s checkpoint resumes on %s with the uninterrupted losses "
                      "(%s)" % (name, label, on, why))


def main():
    args, w = harness_args()

    for name in ("mlp", "gpt"):
        onnx_path, flags, data = export(w, name)
        base = data + ["--steps", str(STEPS), "--seed", "7", "--log-every", "0"]
        one = os.path.join(w, name + "-ref")
        r = compile_exe(args, onnx_path, one, flags)
        if r.returncode:
            check(False, name + ": compiles", r.stderr.strip())
            continue
        r = run(one, 1, base + ["--metrics", one + ".jsonl", "--export-onnx", one + "-w.onnx"])
        if r.returncode:
            check(False, name + " 1 rank trains", r.stderr.strip())
            continue
        ref_l, ref_w = losses(one + ".jsonl"), weights(one + "-w.onnx")
        # pp x dp against dp alone: the MLP's dp=2 Adam run itself ends
        # 1.2e-5 from the 1-rank weights (Adam divides near-zero gradients'
        # round-off by their root mean square), and the pipeline adds none.
        dp_w = None
        if name == "mlp":
            dpx = os.path.join(w, name + "-dp2")
            r = compile_exe(args, onnx_path, dpx, flags + ["--mesh", "dp=2"])
            r = r if r.returncode else run(dpx, 2, base + ["--export-onnx", dpx + "-w.onnx"])
            check(r.returncode == 0, "mlp dp=2 trains (the pp=2,dp=2 reference)",
                  r.stderr.strip()[-600:])
            dp_w = weights(dpx + "-w.onnx") if r.returncode == 0 else {}

        # (label, ranks, extra compile flags)
        cases = [("microbatches=4 (1 rank)", 1, ["--microbatches", "4"])]
        if name == "mlp":
            # Every schedule at pp=2 and pp=4, M=4 (pp=4 1f1b at M=8 ends
            # 1.15e-5 from the 1-rank weights: as at dp=2, Adam divides
            # near-zero gradients' round-off by their RMS).
            cases += [schedule_case(pp, 4, k) for pp in (2, 4)
                      for k in ("gpipe", "1f1b", "interleaved", "zb")]
            cases += [("pp=2,dp=2 1f1b M=2", 4, ["--mesh", "pp=2,dp=2",
                                                 "--microbatches", "2"]),
                      ("pp=2,tp=2 1f1b M=4", 4, ["--mesh", "pp=2,tp=2", "--microbatches",
                                                 "4"] + MLP_SHARD),
                      ("pp=2,dp=2,tp=2 1f1b M=2 (8 ranks)", 8,
                       ["--mesh", "pp=2,dp=2,tp=2", "--microbatches", "2"] + MLP_SHARD),
                      ("pp=2,dp=2 --zero 1 M=2", 4, ["--mesh", "pp=2,dp=2", "--microbatches",
                                                     "2", "--zero", "1"]),
                      ("pp=2,dp=2 --zero 3 M=2", 4, ["--mesh", "pp=2,dp=2", "--microbatches",
                                                     "2", "--zero", "3"]),
                      ("pp=2,dp=2,tp=2 --zero 1 M=2 (8 ranks)", 8,
                       ["--mesh", "pp=2,dp=2,tp=2", "--microbatches", "2", "--zero", "1"]
                       + MLP_SHARD)]
        else:
            cases += [("pp=2 gpipe M=4", 2, ["--mesh", "pp=2", "--microbatches", "4",
                                             "--schedule", "gpipe"]),
                      ("pp=2 1f1b M=4", 2, ["--mesh", "pp=2", "--microbatches", "4"]),
                      ("pp=4 interleaved V=2 M=4", 4,
                       ["--mesh", "pp=4", "--microbatches", "4", "--schedule",
                        "interleaved", "--virtual-stages", "2"]),
                      ("pp=4 1f1b M=8", 4, ["--mesh", "pp=4", "--microbatches", "8"]),
                      ("pp=4 gpipe M=4", 4, ["--mesh", "pp=4", "--microbatches", "4",
                                             "--schedule", "gpipe"]),
                      ("pp=2 zb M=4", 2, ["--mesh", "pp=2", "--microbatches", "4",
                                          "--schedule", "zb"]),
                      ("pp=4 zb M=8", 4, ["--mesh", "pp=4", "--microbatches", "8",
                                          "--schedule", "zb"]),
                      ("pp=2 interleaved V=2 M=4", 2,
                       ["--mesh", "pp=2", "--microbatches", "4", "--schedule",
                        "interleaved", "--virtual-stages", "2"]),
                      ("pp=2,tp=2 --tp megatron M=4", 4,
                       ["--mesh", "pp=2,tp=2", "--microbatches", "4", "--tp", "megatron"])]
        # The receives posted when the step begins (the default where each
        # rank's communication thread has a core; not on this machine).
        if name == "gpt":
            cases += [("pp=4 zb M=8, receives posted early", 4,
                       ["--mesh", "pp=4", "--microbatches", "8", "--schedule", "zb"]),
                      ("pp=2 interleaved V=2 M=4, receives posted early", 2,
                       ["--mesh", "pp=2", "--microbatches", "4", "--schedule",
                        "interleaved", "--virtual-stages", "2"])]
        for k, (label, ranks, extra) in enumerate(cases):
            exe = os.path.join(w, "%s-%d" % (name, k))
            r = compile_exe(args, onnx_path, exe, flags + extra)
            if r.returncode:
                check(False, "%s %s: compiles" % (name, label), r.stderr.strip())
                continue
            env = {"KILN_RECV_PREPOST": "1"} if "posted early" in label else None
            r = run(exe, ranks, base + ["--metrics", exe + ".jsonl",
                                        "--export-onnx", exe + "-w.onnx"], env=env)
            if r.returncode:
                check(False, "%s %s: trains" % (name, label), r.stderr.strip()[-600:])
                continue
            ok, why = close_losses(ref_l, losses(exe + ".jsonl"))
            check(ok, "%s %s: %d step losses match the 1-rank run" % (name, label, STEPS), why)
            if "dp=2" in label:
                ok, why = close_weights(dp_w, weights(exe + "-w.onnx"))
                check(ok, "%s %s: final weights match the dp=2 run" % (name, label), why)
            else:
                ok, why = close_weights(ref_w, weights(exe + "-w.onnx"))
                check(ok, "%s %s: final weights match the 1-rank run" % (name, label), why)

    # Checkpoints keep the whole model: a pp=2 checkpoint after 4 steps holds
    # the 1-rank run's tensors (every stage's parameters and optimizer
    # state, the model's shapes, the same values to 1e-5) and resumes on 1
    # rank, on dp=2, on pp=2 and on pp=2,dp=2; a 1-rank checkpoint resumes
    # on pp=2; a GPT pp=4 one on 1 rank. Each logs the uninterrupted run's
    # later losses.
    checkpoints(args, w)

    # Tied weights across stages: the GPT whose LM head reads the token
    # embedding, at pp=2 and pp=4 (the embedding on stage 0, the head on the
    # last): both stages hold the weight, the last sums the partial
    # gradients and sends the update to the first.
    onnx_path, flags, data = export(w, "gpt_tied")
    base = data + ["--steps", str(STEPS), "--seed", "7", "--log-every", "0"]
    exe = os.path.join(w, "tied-pp4.mlir")
    r = compile_exe(args, onnx_path, exe, flags + ["--mesh", "pp=4", "--microbatches", "4",
                                                   "--emit", "mlir"])
    text = open(exe).read() if r.returncode == 0 else ""
    first = text[text.find("@train_step_pp0"):text.find("@train_step_pp1")]
    last = text[text.find("@train_step_pp3"):]
    check(r.returncode == 0 and '"tok_emb.weight"' in first and '"tok_emb.weight"' in last,
          "gpt with tied embedding pp=4: stage 0 and stage 3 both hold tok_emb.weight",
          r.stderr.strip())
    for label, ranks, extra in (("pp=2 zb M=4", 2, ["--mesh", "pp=2", "--microbatches", "4",
                                                    "--schedule", "zb"]),
                                ("pp=4 1f1b M=4", 4, ["--mesh", "pp=4", "--microbatches",
                                                      "4"])):
        runs = train_pair(args, w, onnx_path, base, "gpt tied", "gpt-tied-" + str(ranks),
                          flags, (label, ranks, extra))
        if len(runs) == 2:
            ok, why = close_losses(runs[1][0], runs[ranks][0])
            ok2, why2 = close_weights(runs[1][1], runs[ranks][1])
            check(ok and ok2, "gpt tied %s: losses and final weights match the 1-rank run"
                  % label, why + "; " + why2)

    # --clip-grad-norm: the global norm's sum runs down the stages, the
    # coefficient comes back to each; pp=4 against the 1-rank clipped run.
    onnx_path, flags, data = export(w, "gpt")
    base = data + ["--steps", str(STEPS), "--seed", "7", "--log-every", "0"]
    clip = flags + ["--clip-grad-norm", "0.5"]
    runs = train_pair(args, w, onnx_path, base, "gpt --clip-grad-norm 0.5", "gpt-clip", clip,
                      ("pp=4 1f1b M=4", 4, ["--mesh", "pp=4", "--microbatches", "4"]))
    if len(runs) == 2:
        ok, why = close_losses(runs[1][0], runs[4][0])
        ok2, why2 = close_weights(runs[1][1], runs[4][1])
        check(ok and ok2, "gpt --clip-grad-norm 0.5 pp=4 1f1b M=4: losses and final weights "
              "match the 1-rank clipped run", why + "; " + why2)

    # fp16 with dynamic loss scaling: the finite check reads every stage's
    # gradients (their sums of squares go down the stages like the norm's),
    # and every rank skips the same steps. From 1e7 the scale overflows
    # fp16 on some steps and not others. pp=4 zb against 1 rank with the
    # same microbatches (fp16 rounds each microbatch's own sums).
    fp16 = flags + ["--precision", "fp16", "--loss-scale", "dynamic", "--init-scale", "1e7",
                    "--microbatches", "4"]
    runs = train_pair(args, w, onnx_path, base, "gpt fp16 --loss-scale dynamic M=4",
                      "gpt-fp16", fp16, ("pp=4 zb", 4, ["--mesh", "pp=4", "--schedule", "zb"]))
    if len(runs) == 2:
        ok, why = close_losses(runs[1][0], runs[4][0])
        ok2, why2 = close_weights(runs[1][1], runs[4][1])
        mixed = any(runs[1][2]) and not all(runs[1][2])
        check(ok and ok2 and runs[1][2] == runs[4][2] and mixed,
              "gpt fp16 --loss-scale dynamic pp=4 zb M=4: the 1-rank run's skipped steps "
              "(%d of %d), losses and final weights" % (sum(runs[1][2]), len(runs[1][2])),
              "%s; %s; skipped %s vs %s" % (why, why2, runs[1][2], runs[4][2]))

    # pp x dp: a stage's gradient all-reduces start during its last
    # microbatch's backward (each bucket once its gradient sum exists) and
    # are waited for only before the optimizer.
    onnx_path, flags, data = export(w, "mlp")
    exe = os.path.join(w, "mlp-overlap.mlir")
    r = compile_exe(args, onnx_path, exe, flags + ["--mesh", "pp=2,dp=2", "--microbatches", "2",
                                                   "--emit", "mlir"])
    text = open(exe).read() if r.returncode == 0 else ""
    last_stage = text[text.find("@train_step_pp1"):].splitlines()
    starts = [i for i, l in enumerate(last_stage) if "dist.all_reduce_start" in l
              and "tensor<f32>" not in l.split("->")[0]]
    backward = [i for i, l in enumerate(last_stage) if "kiln.backward" in l]
    waits = [i for i, l in enumerate(last_stage) if "dist.all_reduce_wait" in l]
    check(r.returncode == 0 and len(starts) >= 2 and backward and waits and
          starts[0] < backward[-1] and min(waits) > backward[-1],
          "pp=2,dp=2: the last stage's gradient all-reduces start inside its last backward "
          "(%d of %d before its last backward op) and wait after it"
          % (sum(1 for i in starts if backward and i < backward[-1]), len(starts)),
          r.stderr.strip())

    # --stage-boundaries: the MLP cut after its first ReLU.
    onnx_path, flags, data = export(w, "mlp")
    exe = os.path.join(w, "mlp-bound")
    r = compile_exe(args, onnx_path, exe, flags + ["--mesh", "pp=2", "--microbatches", "2",
                                                   "--stage-boundaries", "/Relu_output_0",
                                                   "--emit", "mlir"])
    text = open(exe).read() if r.returncode == 0 else ""
    stage1 = text[text.find("@train_step_pp1"):] if text else ""
    check(r.returncode == 0 and "fc1.weight" not in stage1 and "fc2.weight" in stage1,
          "--stage-boundaries /Relu_output_0: fc1 on stage 0, fc2 on stage 1",
          r.stderr.strip())

    # --stage-costs: the 1-rank run's --profile trace (its kernels' times
    # per ONNX node) balances the GPT's stages; the pipeline still computes
    # the 1-rank run's losses.
    onnx_path_g, flags_g, data_g = export(w, "gpt")
    base_g = data_g + ["--steps", str(STEPS), "--seed", "7", "--log-every", "0"]
    trace = os.path.join(w, "gpt-profile.json")
    r = run(os.path.join(w, "gpt-ref"), 1, base_g + ["--profile", trace,
                                                     "--profile-steps", "1:5"])
    exe = os.path.join(w, "gpt-costs")
    r = r if r.returncode else compile_exe(args, onnx_path_g, exe, flags_g + [
        "--mesh", "pp=2", "--microbatches", "4", "--stage-costs", trace])
    r = r if r.returncode else run(exe, 2, base_g + ["--metrics", exe + ".jsonl"])
    ok, why = (close_losses(losses(os.path.join(w, "gpt-ref.jsonl")), losses(exe + ".jsonl"))
               if r.returncode == 0 else (False, r.stderr.strip()[-400:]))
    check(ok, "--stage-costs (a --profile trace) balances gpt pp=2; losses match the 1-rank "
          "run (%s)" % why)

    # Bad input: one line, exit 1.
    def refused(what, extra, expect, model=onnx_path):
        r = compile_exe(args, model, os.path.join(w, "bad"), flags + extra)
        msg = r.stderr.strip()
        check(r.returncode == 1 and expect in msg and msg.count("\n") == 0,
              "refused: " + what, msg)
    refused("more stages than ops", ["--mesh", "pp=64", "--microbatches", "2"],
            "pipeline stages")
    refused("a boundary that does not exist",
            ["--mesh", "pp=2", "--stage-boundaries", "/nope"], "no value is named '/nope'")
    # In the GPT the residual stream passes beside the first block's
    # attention.
    refused("a boundary that does not cut the graph",
            ["--mesh", "pp=2", "--stage-boundaries", "/blocks.0/attn/c_attn/Add_output_0"],
            "does not cut the graph", model=os.path.join(w, "gpt.onnx"))
    refused("microbatches that do not divide the batch",
            ["--mesh", "pp=2", "--microbatches", "3"], "does not divide the batch")
    refused("--schedule without pp", ["--schedule", "gpipe"], "needs --mesh pp=S")
    refused("--stage-costs without pp", ["--stage-costs", "x.json"], "needs --mesh pp=S")
    refused("--stage-costs that is no trace",
            ["--mesh", "pp=2", "--stage-costs", os.path.join(w, "mlp_y.npy")], "is not JSON")
    refused("pp with ep", ["--mesh", "pp=2,ep=2", "--microbatches", "2"], "not supported yet")
    refused("interleaved with M not a multiple of S",
            ["--mesh", "pp=2", "--microbatches", "1", "--schedule", "interleaved",
             "--virtual-stages", "2", "--emit", "schedule"], "multiple")

    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
