#!/usr/bin/python3
# The N-rank = 1-rank invariant for tensor parallelism
# (../shared/design/DISTRIBUTION.md; issue 17). `kiln-compile --mesh tp=M`
# (or dp=N,tp=M) with `--shard REGEX=SPEC` annotations holds the matching
# parameters split over the tp ranks; the sharding rules put the
# all-reduces of partial sums, the all-gathers and the local slices where
# the split computation needs them. Under `mpirun --oversubscribe` every
# case must give, against the 1-rank run on the same global batch:
#   - the per-step losses within 1e-5 relative;
#   - the final weights (exported whole) within 1e-5 (absolute, or relative
#     above 1): only the summation order differs.
# Cases:
#   - an MLP with annotations on both dimensions: fc1 column-parallel
#     (weight dim 0, bias), fc2 row-parallel (weight dim 1), at tp=2, tp=4
#     and dp=2,tp=2 (momentum, clipping by the global norm, which sums the
#     split gradients' squares over tp); Adam at tp=2 (losses);
#   - the GPT decoder with its MLP blocks, QKV and output projections and
#     LM head annotated, at tp=2 and dp=2,tp=2;
#   - memory: at tp=4 each rank holds 1/4 of every split tensor;
#   - checkpoints keep whole tensors: a tp=2 checkpoint resumes on 1 rank,
#     on dp=2 and on dp=2,tp=2, and a 1-rank one on tp=2, each with the
#     uninterrupted losses;
#   - bad input: an axis the mesh lacks, a dimension that does not divide,
#     the wrong number of dimensions, --shard without tp, a regex that
#     matches nothing (a warning naming it), a tp=2
#     executable on 1 rank: one line each.
#
# Usage: /usr/bin/python3 test/Training/tensor_parallel.py --bin build/bin --work DIR
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
from rank_runs import (FAILED, check, close_losses, close_weights, export_samples,  # noqa: E402
                       losses, run, weights)
from safetensors_np import read_safetensors  # noqa: E402

BATCH = 16
STEPS = 16
SAMPLES = 100

MLP_SHARD = ["--shard", "fc1.weight=tp,-", "--shard", "fc1.bias=tp",
             "--shard", "fc2.weight=-,tp"]
GPT_SHARD = ["--shard", r"blocks\..*\.mlp\.0\.weight=tp,-", "--shard", r"blocks\..*\.mlp\.0\.bias=tp",
             "--shard", r"blocks\..*\.mlp\.2\.weight=-,tp",
             "--shard", r"blocks\..*\.c_attn\.weight=tp,-", "--shard", r"blocks\..*\.c_attn\.bias=tp",
             "--shard", r"blocks\..*\.c_proj\.weight=-,tp", "--shard", "head.weight=tp,-"]


def export(work, name):
    g = np.random.default_rng(5)
    torch.manual_seed(0)
    if name in ("mlp", "linear"):
        model = em.MLP() if name == "mlp" else torch.nn.Linear(784, 10)
        in_name = "x"
        x = g.standard_normal((SAMPLES, 784)).astype(np.float32)
        y = g.integers(0, 10, size=(SAMPLES,)).astype(np.int64)
    else:
        # gpt4: 4 heads, so tp=4 splits them one per rank.
        model = em.GPT(dropout=0.1, n_head=4 if name == "gpt4" else 2)
        in_name = "idx"
        x = g.integers(0, 64, size=(SAMPLES, 16)).astype(np.int64)
        y = g.integers(0, 64, size=(SAMPLES, 16)).astype(np.int64)
    return export_samples(work, name, model, in_name, x, y, BATCH)


def compile_exe(args, onnx_path, out, flags):
    r = subprocess.run([os.path.join(args.bin, "kiln-compile"), onnx_path, "-o", out,
                        "--batch-size", str(BATCH), "--loss", "cross-entropy"] + flags,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("kiln-compile %s failed: %s" % (" ".join(flags), r.stderr.strip()))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    w = args.work
    kc = os.path.join(args.bin, "kiln-compile")

    mom = ["--optimizer", "momentum", "--lr", "0.05", "--clip-grad-norm", "1.0"]
    adam = ["--optimizer", "adam", "--lr", "0.003"]
    refs = {}
    for name, shard in (("mlp", MLP_SHARD), ("gpt", GPT_SHARD)):
        onnx_path, data = export(w, name)
        base = data + ["--steps", str(STEPS), "--seed", "7", "--log-every", "0"]
        cases = [("tp=2", 2, mom), ("dp=2,tp=2", 4, mom)]
        # ZeRO over dp with tp: the optimizer state (stage 3: and the
        # weights) of each tp block sharded over the dp ranks.
        if name == "mlp":
            cases += [("dp=2,tp=2", 4, mom + ["--zero", "1"]),
                      ("dp=2,tp=2", 4, mom + ["--zero", "2"]),
                      ("dp=2,tp=2", 4, mom + ["--zero", "3"])]
        if name == "mlp":
            cases += [("tp=4", 4, mom), ("tp=2", 2, adam)]
        for opt in (mom, adam) if name == "mlp" else (mom,):
            tag1 = "%s-1%s" % (name, "a" if opt is adam else "")
            one = compile_exe(args, onnx_path, os.path.join(w, tag1 + ".train"), opt)
            r = run(one, 1, base + ["--metrics", os.path.join(w, tag1 + ".jsonl"),
                                    "--export-onnx", os.path.join(w, tag1 + ".onnx")])
            if r.returncode != 0:
                raise SystemExit("1-rank run failed: " + r.stderr.strip())
            refs[tag1] = (losses(os.path.join(w, tag1 + ".jsonl")),
                          weights(os.path.join(w, tag1 + ".onnx")))
        for mesh, ranks, opt in cases:
            adam_case = opt is adam
            zero = opt[opt.index("--zero") + 1] if "--zero" in opt else ""
            tag = "%s %s%s%s" % (name, mesh, " adam" if adam_case else "",
                                 " --zero " + zero if zero else "")
            stem = "%s-%s%s%s" % (name, mesh.replace("=", "").replace(",", "-"),
                                  "a" if adam_case else "", "-z" + zero if zero else "")
            exe = compile_exe(args, onnx_path, os.path.join(w, stem + ".train"),
                              opt + ["--mesh", mesh] + shard)
            met, out = os.path.join(w, stem + ".jsonl"), os.path.join(w, stem + ".onnx")
            r = run(exe, ranks, base + ["--metrics", met, "--export-onnx", out])
            if r.returncode != 0:
                check(False, "%s: exit %d: %s" % (tag, r.returncode, r.stderr.strip()[-400:]))
                continue
            ref_l, ref_w = refs["%s-1%s" % (name, "a" if adam_case else "")]
            ok, why = close_losses(ref_l, losses(met))
            check(ok, "%s: %d step losses match the 1-rank run (%s)" % (tag, STEPS, why))
            if not adam_case:
                # Adam divides by each element's gradient scale, so a
                # summation-order difference in a near-zero gradient moves
                # its update by more than 1e-5 (dp=2 does the same); the
                # weights are compared under momentum.
                ok, why = close_weights(ref_w, weights(out))
                check(ok, "%s: final weights match the 1-rank run (%s)" % (tag, why))
            if name == "mlp" and mesh == "tp=4":
                # Each rank holds 1/4 of each split tensor: fc1 (weight,
                # bias) and fc2's weight, with their momentum buffers.
                init = weights(onnx_path)
                split = sum(init[k].nbytes for k in ("fc1.weight", "fc1.bias", "fc2.weight"))
                whole = sum(v.nbytes for v in init.values())
                want = 2 * ((whole - split) + split / 4) / 2 ** 20
                m = re.search(r"this rank holds ([0-9.]+) MiB of the model's ([0-9.]+) MiB",
                              r.stdout)
                got = float(m.group(1)) if m else -1
                check(m is not None and abs(got - want) < 0.01 and
                      abs(float(m.group(2)) - 2 * whole / 2 ** 20) < 0.01,
                      "mlp tp=4: each rank holds %.2f MiB of parameters and momentum, "
                      "1/4 of the split tensors (%.2f MiB expected, %.2f MiB whole)"
                      % (got, want, 2 * whole / 2 ** 20), r.stdout[-300:])

    # An activation annotated by its ONNX value name against what the
    # weights imply: fc1's output is split on its features (column-
    # parallel), the annotation holds the ReLU's output split on the batch
    # instead; the partition reshards between them (one all-to-all each
    # way) and the run still computes the 1-rank losses and weights.
    onnx_path, data = export(w, "mlp")
    act = MLP_SHARD[:4] + ["--shard", "/Relu_output_0=tp,-"]
    mlir = os.path.join(w, "mlp-act.mlir")
    compile_exe(args, onnx_path, mlir, mom + ["--mesh", "tp=2", "--emit", "mlir"] + act)
    a2a = open(mlir).read().count("shard.all_to_all")
    exe = compile_exe(args, onnx_path, os.path.join(w, "mlp-act.train"),
                      mom + ["--mesh", "tp=2"] + act)
    met, out = os.path.join(w, "mlp-act.jsonl"), os.path.join(w, "mlp-act.onnx")
    r = run(exe, 2, data + ["--steps", str(STEPS), "--seed", "7", "--log-every", "0",
                            "--metrics", met, "--export-onnx", out])
    ok1, why1 = close_losses(refs["mlp-1"][0], losses(met)) if r.returncode == 0 else (False, r.stderr[-300:])
    ok2, why2 = close_weights(refs["mlp-1"][1], weights(out)) if r.returncode == 0 else (False, "")
    check(a2a == 2 and ok1 and ok2,
          "mlp tp=2 with an activation annotated by ONNX value name against the weights' "
          "split: resharded by %d all-to-alls, the 1-rank losses (%s) and weights (%s)"
          % (a2a, why1, why2))

    # --tp megatron: the decoder's attention and MLP blocks found by
    # structure (4 heads; dropout 0.1, whose masks each rank draws for its
    # heads' elements as numbered in the whole tensor), against the 1-rank
    # run: tp=2, tp=4 (one head per rank), dp=2,tp=2.
    onnx_path, data = export(w, "gpt4")
    base = data + ["--steps", str(STEPS), "--seed", "7", "--log-every", "0"]
    one = compile_exe(args, onnx_path, os.path.join(w, "gpt4-1.train"), mom)
    r = run(one, 1, base + ["--metrics", os.path.join(w, "gpt4-1.jsonl"),
                            "--export-onnx", os.path.join(w, "gpt4-1.onnx")])
    if r.returncode != 0:
        raise SystemExit("1-rank run failed: " + r.stderr.strip())
    g_l, g_w = losses(os.path.join(w, "gpt4-1.jsonl")), weights(os.path.join(w, "gpt4-1.onnx"))
    for mesh, ranks, sp in (("tp=2", 2, False), ("tp=4", 4, False), ("dp=2,tp=2", 4, False),
                            ("tp=2", 2, True), ("tp=4", 4, True), ("dp=2,tp=2", 4, True)):
        tag = "gpt --tp megatron %s%s" % (mesh, " --sequence-parallel" if sp else "")
        stem = "gpt4-m%s%s" % (mesh.replace("=", "").replace(",", "-"), "-sp" if sp else "")
        exe = os.path.join(w, stem + ".train")
        rc = subprocess.run([kc, onnx_path, "-o", exe, "--batch-size", str(BATCH), "--loss",
                             "cross-entropy", "--mesh", mesh, "--tp", "megatron"] + mom +
                            (["--sequence-parallel"] if sp else []),
                            capture_output=True, text=True)
        if rc.returncode != 0:
            check(False, "%s compiles" % tag, rc.stderr[-300:])
            continue
        if mesh == "tp=2":
            check("--tp megatron: 2 attention blocks, 2 MLP blocks, the token embedding "
                  "and the LM head split over tp=2 (vocab-parallel)" in rc.stderr,
                  "--tp megatron finds the decoder's 2 attention and 2 MLP blocks, its "
                  "token embedding and LM head", rc.stderr[-300:])
        met, out = os.path.join(w, stem + ".jsonl"), os.path.join(w, stem + ".onnx")
        r = run(exe, ranks, base + ["--metrics", met, "--export-onnx", out])
        if r.returncode != 0:
            check(False, "%s: exit %d: %s" % (tag, r.returncode, r.stderr.strip()[-400:]))
            continue
        ok, why = close_losses(g_l, losses(met))
        check(ok, "%s: %d step losses match the 1-rank run (%s)" % (tag, STEPS, why))
        ok, why = close_weights(g_w, weights(out))
        check(ok, "%s: final weights match the 1-rank run (%s)" % (tag, why))
        m = re.search(r"this rank holds ([0-9.]+) MiB of the model's ([0-9.]+) MiB", r.stdout)
        if mesh == "tp=4" and m and not sp:
            # The blocks' weights, the token embedding and the LM head split
            # 4 ways; the position embedding, LayerNorms and the biases of
            # row-parallel projections stay whole.
            print("INFO gpt --tp megatron tp=4: a rank holds %s MiB of %s MiB "
                  "(parameters and momentum)" % (m.group(1), m.group(2)))
            check(float(m.group(1)) < 0.35 * float(m.group(2)),
                  "gpt --tp megatron tp=4: a rank holds under 35% of the model",
                  m.group(0))
    # A megatron checkpoint (the fused QKV weight split as [3, C, Cin])
    # holds the model's shapes and resumes on 1 rank and on tp=4.
    ckm = os.path.join(w, "ck-gpt4")
    r = run(os.path.join(w, "gpt4-mtp2.train"), 2, data + [
        "--steps", "8", "--seed", "7", "--log-every", "0", "--checkpoint-dir", ckm])
    ok = r.returncode == 0
    if ok:
        t = read_safetensors(os.path.join(ckm, "step-00000008", "tensors.safetensors"))
        init = weights(onnx_path)
        ok = all(t[k].shape == init[k].shape and
                 t[k + "/momentum_buffer"].shape == init[k].shape
                 for k in init if init[k].dtype.kind == "f")
    check(ok, "a --tp megatron checkpoint holds the model's shapes (the fused QKV "
          "weight and its momentum [96, 32])", r.stderr[-300:])
    for exe, ranks, what in ((os.path.join(w, "gpt4-1.train"), 1, "on 1 rank"),
                             (os.path.join(w, "gpt4-mtp4.train"), 4, "on --tp megatron tp=4")):
        d = os.path.join(w, "ckm-%d" % ranks)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(ckm, d)
        met = os.path.join(w, "resumed-gpt4-%d.jsonl" % ranks)
        r = run(exe, ranks, data + ["--steps", str(STEPS), "--log-every", "0", "--resume",
                                    "--checkpoint-dir", d, "--metrics", met])
        ok, why = (close_losses(g_l[8:], losses(met)) if r.returncode == 0
                   else (False, r.stderr[-300:]))
        check(ok and "resumed from" in r.stdout,
              "a --tp megatron tp=2 checkpoint %s resumes with the uninterrupted "
              "losses (%s)" % (what, why))
    # A loss inside the model with ignore_index (every fifth label -100):
    # the MLP's classes are its LM head, and the vocab-parallel
    # cross-entropy averages over the valid labels as the 1-rank run.
    ce_path, _ = em.export("mlp_ce", w)
    mlp_x = os.path.join(w, "mlp_x.npy")
    ce_y = np.load(os.path.join(w, "mlp_y.npy")).copy()
    ce_y[::5] = -100
    np.save(os.path.join(w, "mlp_ce_y.npy"), ce_y)
    ce_data = ["--data", "x=" + mlp_x, "--data", "labels=" + os.path.join(w, "mlp_ce_y.npy"),
               "--steps", str(STEPS), "--seed", "7", "--log-every", "0"]
    ce_flags = ["--loss", "output", "--loss-output", "loss", "--optimizer", "sgd", "--lr", "0.1",
                "--batch-size", str(BATCH)]
    ce = {}
    for mesh, ranks in ((None, 1), ("tp=2", 2)):
        exe = os.path.join(w, "mlp_ce-%d.train" % ranks)
        extra = ["--mesh", mesh, "--tp", "megatron"] if mesh else []
        rc = subprocess.run([kc, ce_path, "-o", exe] + ce_flags + extra,
                            capture_output=True, text=True)
        met = os.path.join(w, "mlp_ce-%d.jsonl" % ranks)
        r = run(exe, ranks, ce_data + ["--metrics", met]) if rc.returncode == 0 else rc
        ce[ranks] = losses(met) if r.returncode == 0 else []
        if mesh:
            said = "the LM head split over tp=2 (vocab-parallel)" in rc.stderr
    ok, why = close_losses(ce[1], ce[2]) if ce[1] and ce[2] else (False, "a run failed")
    check(ok and said, "mlp_ce (ignore_index) --tp megatron tp=2: the vocab-parallel "
          "cross-entropy gives the 1-rank losses (%s)" % why)

    # A model with no block (its LM head's 10 classes do not split 4 ways):
    # said so, and the ranks train as data parallelism.
    lin_path, lin_data = export(w, "linear")
    lin1 = compile_exe(args, lin_path, os.path.join(w, "lin-1.train"), mom)
    r1 = run(lin1, 1, lin_data + ["--steps", "8", "--seed", "7", "--log-every", "0",
                                  "--metrics", os.path.join(w, "lin-1.jsonl")])
    rc = subprocess.run([kc, lin_path, "-o", os.path.join(w, "lin-m.train"), "--batch-size",
                         str(BATCH), "--loss", "cross-entropy", "--mesh", "tp=4", "--tp",
                         "megatron"] + mom, capture_output=True, text=True)
    said = ("kiln-compile: warning: --tp megatron: the LM head of 10 classes (4 ranks do "
            "not divide them) stays whole" in rc.stderr and
            "kiln-compile: warning: --tp megatron found no attention or MLP block to "
            "split; the 4 ranks train as data parallelism (dp=4)" in rc.stderr)
    r2 = run(os.path.join(w, "lin-m.train"), 4, lin_data + [
        "--steps", "8", "--seed", "7", "--log-every", "0",
        "--metrics", os.path.join(w, "lin-m.jsonl")]) if rc.returncode == 0 else None
    ok, why = (close_losses(losses(os.path.join(w, "lin-1.jsonl")),
                            losses(os.path.join(w, "lin-m.jsonl")))
               if r2 is not None and r2.returncode == 0 and r1.returncode == 0
               else (False, rc.stderr[-300:]))
    check(said and ok, "--tp megatron on a model with no block says so and trains "
          "as data parallelism (%s)" % why, rc.stderr[-300:])

    # Checkpoints keep whole tensors: a tp=2 checkpoint at step 8 holds the
    # model's shapes, and resumes on 1 rank, on dp=2 and on dp=2,tp=2; a
    # 1-rank checkpoint resumes on tp=2. Each logs the uninterrupted run's
    # later losses.
    onnx_path, data = export(w, "mlp")
    ref_l = refs["mlp-1"][0]
    init = weights(onnx_path)
    tp2 = os.path.join(w, "mlp-tp2.train")
    ck = os.path.join(w, "ck-tp2")
    r = run(tp2, 2, data + ["--steps", "8", "--seed", "7", "--log-every", "0",
                            "--checkpoint-dir", ck])
    files = sorted(os.listdir(os.path.join(ck, "step-00000008"))) if r.returncode == 0 else []
    ok = files == ["manifest.json", "tensors.safetensors"]
    if ok:
        t = read_safetensors(os.path.join(ck, "step-00000008", "tensors.safetensors"))
        ok = all(t[k].shape == init[k].shape for k in init) and \
            t["fc1.weight/momentum_buffer"].shape == init["fc1.weight"].shape
    check(ok, "a tp=2 checkpoint holds the whole tensors (one file, the model's shapes)",
          r.stderr[-300:] + str(files))
    ck1 = os.path.join(w, "ck-1")
    r = run(os.path.join(w, "mlp-1.train"), 1, data + ["--steps", "8", "--seed", "7",
                                                       "--log-every", "0",
                                                       "--checkpoint-dir", ck1])
    dp2 = compile_exe(args, onnx_path, os.path.join(w, "mlp-dp2.train"), mom + ["--mesh", "dp=2"])
    for exe, ranks, src, what in (
            (os.path.join(w, "mlp-1.train"), 1, ck, "a tp=2 checkpoint on 1 rank"),
            (dp2, 2, ck, "a tp=2 checkpoint on dp=2"),
            (os.path.join(w, "mlp-dp2-tp2.train"), 4, ck, "a tp=2 checkpoint on dp=2,tp=2"),
            (tp2, 2, ck1, "a 1-rank checkpoint on tp=2")):
        d = os.path.join(w, "ckr-%d-%s" % (ranks, os.path.basename(src)))
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(src, d)
        met = os.path.join(w, "resumed-%d-%s.jsonl" % (ranks, os.path.basename(src)))
        r = run(exe, ranks, data + ["--steps", str(STEPS), "--log-every", "0", "--resume",
                                    "--checkpoint-dir", d, "--metrics", met])
        ok, why = (close_losses(ref_l[8:], losses(met)) if r.returncode == 0
                   else (False, r.stderr[-300:]))
        check(ok and "resumed from" in r.stdout,
              "%s resumes with the uninterrupted losses (%s)" % (what, why))

    # Bad input: one line each, naming the thing at fault.
    def compile_err(flags):
        r = subprocess.run([kc, onnx_path, "-o", os.path.join(w, "bad.train"),
                            "--batch-size", str(BATCH)] + flags, capture_output=True,
                           text=True)
        lines = r.stderr.strip().splitlines()
        return r.returncode, lines[-1] if lines else ""
    for flags, want, what in (
            (["--mesh", "tp=2", "--shard", "fc1.weight=ep,-"],
             "names mesh axis 'ep', which the mesh (tp=2) does not have",
             "an axis the mesh lacks"),
            (["--mesh", "tp=4", "--shard", "fc3.weight=tp,-"],
             "does not divide", "a dimension that does not divide"),
            (["--mesh", "tp=2", "--shard", "fc1.weight=tp"],
             "gives 1 dimensions to argument 'fc1.weight'", "the wrong number of dimensions"),
            (["--shard", "fc1.weight=tp,-"], "it needs --mesh tp=M (or dp=N,tp=M) with M > 1",
             "--shard without a tp axis"),
            (["--mesh", "tp=2,xp=2"], "mesh axes are pp (pipeline stages), dp (data", "an unknown mesh axis"),
            (["--mesh", "tp=2", "--shard", "fc1.weight=tp,-", "--shard", "fc.*weight=-,tp"],
             "'fc1.weight' and 'fc.*weight' both match argument 'fc1.weight' and shard it "
             "differently", "conflicting annotations, naming both"),
            (["--mesh", "tp=2", "--sequence-parallel"], "--sequence-parallel splits the "
             "regions between Megatron's blocks: it needs --tp megatron",
             "--sequence-parallel without --tp megatron")):
        rc, line = compile_err(flags)
        check(rc == 1 and want in line and line.startswith("kiln-compile: "),
              "refused with one line: %s" % what, line)
    r = subprocess.run([kc, onnx_path, "-o", os.path.join(w, "warn.train"), "--batch-size",
                        str(BATCH), "--mesh", "tp=2", "--shard", "fc9.weight=tp,-"] + MLP_SHARD,
                       capture_output=True, text=True)
    check(r.returncode == 0 and "kiln-compile: warning: --shard 'fc9.weight' matches no "
          "parameter, input or value name; it is ignored" in r.stderr,
          "a --shard that matches nothing is a warning naming it", r.stderr[-300:])
    r = run(tp2, 1, data + ["--steps", "2"], timeout=60)
    check(r.returncode == 1 and r.stderr.strip().endswith(
        "this executable trains on 2 ranks (compiled with --mesh tp=2): run it with "
        "mpirun -np 2; it was started as 1 rank"),
        "a tp=2 executable refused on 1 rank", r.stderr[-300:])

    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
