#!/usr/bin/python3
# Drives kiln-train with hand-built payloads (make_payload.py) and checks:
# training lowers the loss; the losses and the data order match a NumPy
# re-implementation; --export-onnx holds the trained values; checkpoint +
# --resume and SIGKILL + --resume reproduce an uninterrupted run's losses bit
# for bit; damaged checkpoints are skipped; every bad input gets its one-line
# message and exit status 1.
#
#   run_tests.py --kiln-train BUILD/bin/kiln-train [--work DIR] [--quick]
#
# Prints "PASS name" / "FAIL name: why" per test, then "N passed, N failed";
# exits 1 if any failed.
import argparse
import json
import hashlib
import stat
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
M64 = (1 << 64) - 1


def epoch_order(n, seed, epoch, shuffle=True):
    """docs/Training.md "Data": SplitMix64-driven Fisher-Yates."""
    order = list(range(n))
    if not shuffle:
        return order
    golden = 0x9E3779B97F4A7C15
    state = (seed ^ (epoch * golden)) & M64
    for i in range(n - 1, 0, -1):
        state = (state + golden) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        j = z % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    dt = {"F32": np.float32, "I64": np.int64, "F64": np.float64}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dt[e["dtype"]]).reshape(e["shape"])
    return out


def metrics(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


class Suite:
    def __init__(self, args):
        self.args = args
        self.bin = os.path.abspath(args.kiln_train)
        self.work = args.work or tempfile.mkdtemp(prefix="kiln-train-test-")
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        self.passed = self.failed = 0

    def make(self, name, model, **kw):
        d = os.path.join(self.work, name)
        cmd = [sys.executable, os.path.join(HERE, "make_payload.py"),
               "--kiln-train", self.bin, "--model", model, "--out", d]
        for k, v in kw.items():
            cmd += ["--" + k.replace("_", "-"), str(v)]
        subprocess.run(cmd, check=True)
        return d

    def run(self, d, *args, env=None, exe=None, timeout=600):
        e = dict(os.environ)
        e.pop("KILN_TRAIN_PAYLOAD", None)
        e.update(env or {})
        return subprocess.run([exe or os.path.join(d, "model.train")] + list(args),
                              cwd=d, capture_output=True, text=True, env=e,
                              timeout=timeout)

    def ok(self, name, fn):
        try:
            why = fn()
        except AssertionError as e:
            why = str(e) or "assertion failed"
        except Exception as e:  # noqa: BLE001
            why = "%s: %s" % (type(e).__name__, e)
        if why:
            self.failed += 1
            print("FAIL %s: %s" % (name, why))
        else:
            self.passed += 1
            print("PASS %s" % name)
        sys.stdout.flush()


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def succeeded(r):
    check(r.returncode == 0, "exit %d: %s" % (r.returncode, r.stderr.strip()[-500:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln-train", required=True)
    ap.add_argument("--work")
    ap.add_argument("--quick", action="store_true", help="shorter SIGKILL test")
    args = ap.parse_args()
    t = Suite(args)
    lin = t.make("lin", "linreg", samples=100, batch=8, lr=0.05)
    sm = t.make("sm", "softmax", samples=100, batch=8, lr=0.05, dropout=0.2)
    lin_data = ["--data", "x=x.npy", "--data", "y=y.npy"]
    sm_data = ["--data", "x=x.npy", "--data", "labels=y.npy"]

    # -- Training lowers the loss; log lines; metrics. --------------------
    def loss_falls():
        for d, data in ((lin, lin_data), (sm, sm_data)):
            r = t.run(d, *data, "--steps", "60", "--metrics", "m.jsonl", "--seed", "1")
            succeeded(r)
            m = metrics(os.path.join(d, "m.jsonl"))
            check(len(m) == 60, "%d metrics lines" % len(m))
            check([x["step"] for x in m] == list(range(60)), "metrics steps")
            for k in ("step", "epoch", "loss", "lr", "grad_norm", "samples_per_s", "step_ms"):
                check(k in m[0], "metrics lack " + k)
            first = np.mean([x["loss"] for x in m[:5]])
            last = np.mean([x["loss"] for x in m[-5:]])
            check(last < 0.2 * first, "%s: loss %g -> %g" % (d, first, last))
            lines = [l for l in r.stdout.splitlines() if l.startswith("step ")]
            want = ["step 1/60", "step 10/60", "step 60/60"]
            for w in want:
                check(any(l.startswith(w + " ") for l in lines), "no log line " + w)
            check(len(lines) == 7, "%d log lines" % len(lines))
            import re
            pat = (r"^step \d+/60  loss \d+\.\d{6}  lr \d\.\d{3}e[-+]\d\d  grad-norm "
                   r"\d+\.\d{4}  \d+\.\d samples/s  mem [0-9.]+ [KMG]iB  cpu \d+%  ETA \d+:\d\d:\d\d$")
            check(all(re.match(pat, l) for l in lines), "log line format: " + lines[0])
    t.ok("loss falls, log and metrics format", loss_falls)

    # -- Losses, data order and lr against NumPy. -----------------------------
    def numpy_reference():
        seed, steps, B = 5, 40, 8
        r = t.run(lin, *lin_data, "--steps", str(steps), "--metrics", "ref.jsonl",
                  "--seed", str(seed), "--export-onnx", "ref.onnx", "--log-every", "0")
        succeeded(r)
        kiln = [x["loss"] for x in metrics(os.path.join(lin, "ref.jsonl"))]
        x = np.load(os.path.join(lin, "x.npy"))
        y = np.load(os.path.join(lin, "y.npy"))
        init = {i.name: numpy_helper.to_array(i)
                for i in onnx.load(os.path.join(lin, "model.onnx")).graph.initializer}
        w, b = init["w"].copy(), init["b"].copy()
        spe = len(x) // B
        lr = np.float32(0.05)
        ref = []
        for s in range(steps):
            order = epoch_order(len(x), seed, s // spe)
            idx = order[(s % spe) * B:(s % spe + 1) * B]
            xb, yb = x[idx], y[idx]
            pred = xb @ w + b
            ref.append(float(np.mean((pred.astype(np.float64) - yb) ** 2)))
            dpred = (pred - yb) * np.float32(2.0 / B)
            w = w - lr * (xb.T @ dpred)
            b = b - lr * dpred.sum(0)
        err = max(abs(a - c) / max(abs(c), 1e-6) for a, c in zip(kiln, ref))
        check(err < 1e-4, "losses differ from NumPy by %g (%s vs %s)" % (err, kiln[:3], ref[:3]))
        out = {i.name: numpy_helper.to_array(i)
               for i in onnx.load(os.path.join(lin, "ref.onnx")).graph.initializer}
        check(np.allclose(out["w"], w, rtol=1e-4, atol=1e-5), "exported w %s vs %s" % (out["w"].ravel(), w.ravel()))
        check(np.allclose(out["b"], b, rtol=1e-4, atol=1e-5), "exported b")
    t.ok("losses and data order match NumPy (shuffled, 3+ epochs)", numpy_reference)

    # -- --export-onnx. -------------------------------------------------------
    def export_onnx():
        r = t.run(sm, *sm_data, "--steps", "30", "--export-onnx", "trained.onnx",
                  "--checkpoint-dir", "ck_export")
        succeeded(r)
        m = onnx.load(os.path.join(sm, "trained.onnx"))
        onnx.checker.check_model(m)
        got = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
        orig = {i.name: numpy_helper.to_array(i)
                for i in onnx.load(os.path.join(sm, "model.onnx")).graph.initializer}
        ck = read_safetensors(os.path.join(sm, "ck_export", "step-00000030",
                                           "tensors.safetensors"))
        check(set(ck) == {"W", "b", "W/momentum_buffer", "b/momentum_buffer"},
              "checkpoint tensors %s" % sorted(ck))
        for k in ("W", "b"):
            check(got[k].shape == orig[k].shape and got[k].dtype == orig[k].dtype, k + " type")
            check(np.array_equal(got[k], ck[k]), k + " is not the trained value")
            check(not np.array_equal(got[k], orig[k]), k + " unchanged")
        check([n.op_type for n in m.graph.node] == ["MatMul", "Add"], "graph changed")
        # The exported model computes the logits the trained weights give.
        xe = np.load(os.path.join(sm, "x_eval.npy"))
        logits = xe @ got["W"] + got["b"]
        ye = np.load(os.path.join(sm, "y_eval.npy"))
        r = t.run(sm, *sm_data, "--steps", "30", "--eval-data", "x=x_eval.npy",
                  "--eval-data", "labels=y_eval.npy")
        succeeded(r)
        line = [l for l in r.stdout.splitlines() if l.startswith("eval: ")]
        check(len(line) == 1, "no eval line: " + r.stdout[-300:])
        parts = line[0].split()
        check(parts[1] == "loss" and parts[3] == "accuracy", "eval line format: " + line[0])
        check(line[0].endswith("(%d samples)" % len(xe)), "eval line: " + line[0])
        n = len(xe)  # every sample, the last partial batch included
        acc = float(np.mean(np.argmax(logits[:n], -1) == ye[:n]))
        check(abs(float(parts[4]) - acc) < 1e-3, "accuracy %s vs NumPy %g" % (parts[4], acc))
        z = logits[:n] - logits[:n].max(-1, keepdims=True)
        ce = -(z[np.arange(n), ye[:n]] - np.log(np.exp(z).sum(-1)))
        check(abs(float(parts[2]) - ce.mean()) < 1e-4 * max(1, ce.mean()),
              "eval loss %s vs NumPy %g" % (parts[2], ce.mean()))

        # Partial last batches (issue 21, defect 10): the 35 above are 4 x 8 + 3;
        # also 1 more than full batches, fewer than one batch; against NumPy.
        def np_eval(k):
            z = logits[:k] - logits[:k].max(-1, keepdims=True)
            ce = -(z[np.arange(k), ye[:k]] - np.log(np.exp(z).sum(-1)))
            return ce.mean(), float(np.mean(np.argmax(logits[:k], -1) == ye[:k]))
        trained = ["--checkpoint-dir", "ck_export", "--resume", "--steps", "30"]
        for k in (33, 9, 5, 1):
            np.save(os.path.join(sm, "xe_%d.npy" % k), xe[:k])
            np.save(os.path.join(sm, "ye_%d.npy" % k), ye[:k])
            r = t.run(sm, *sm_data, *trained, "--eval-data", "x=xe_%d.npy" % k,
                      "--eval-data", "labels=ye_%d.npy" % k)
            succeeded(r)
            line = [l for l in r.stdout.splitlines() if l.startswith("eval: ")]
            check(len(line) == 1, "no eval line: " + r.stdout[-300:])
            parts = line[0].split()
            want_loss, want_acc = np_eval(k)
            check(abs(float(parts[2]) - want_loss) < 1e-4 * max(1, want_loss) and
                  abs(float(parts[4]) - want_acc) < 1e-6 and
                  line[0].endswith("(%d sample%s)" % (k, "" if k == 1 else "s")),
                  "%d samples: %s, NumPy loss %g accuracy %g" % (k, line[0], want_loss,
                                                                  want_acc))
        # A NaN in the very last sample reaches the eval loss.
        xn = xe.copy()
        xn[34, 0] = np.nan
        np.save(os.path.join(sm, "xe_nan.npy"), xn)
        r = t.run(sm, *sm_data, *trained, "--eval-data", "x=xe_nan.npy",
                  "--eval-data", "labels=y_eval.npy")
        succeeded(r)
        line = [l for l in r.stdout.splitlines() if l.startswith("eval: ")]
        check(len(line) == 1 and line[0].split()[2] == "nan",
              "a NaN in the last sample is not in the eval loss: %s" % line)
    t.ok("--export-onnx has the trained values; eval loss/accuracy", export_onnx)

    # -- Checkpoint + resume: identical losses. -------------------------------
    def run_full(d, data, steps, name, *extra):
        r = t.run(d, *data, "--steps", str(steps), "--metrics", name, "--log-every", "0", *extra)
        succeeded(r)
        return [x["loss"] for x in metrics(os.path.join(d, name))]

    def resume_identical():
        ref = run_full(sm, sm_data, 50, "full.jsonl", "--seed", "9")
        shutil.rmtree(os.path.join(sm, "ck"), ignore_errors=True)
        r = t.run(sm, *sm_data, "--steps", "23", "--seed", "9", "--checkpoint-dir", "ck",
                  "--checkpoint-every", "10", "--metrics", "part.jsonl")
        succeeded(r)
        check(sorted(os.listdir(os.path.join(sm, "ck"))) ==
              ["step-00000010", "step-00000020", "step-00000023"],
              "checkpoints %s" % os.listdir(os.path.join(sm, "ck")))
        man = json.load(open(os.path.join(sm, "ck", "step-00000023", "manifest.json")))
        check(man["step"] == 23 and man["epoch"] == 1 and man["position"] == 11 and
              man["seed"] == 9 and man["format"] == "kiln-checkpoint", "manifest %s" % man)
        r = t.run(sm, *sm_data, "--steps", "50", "--checkpoint-dir", "ck", "--resume",
                  "--metrics", "part.jsonl", "--log-every", "1")
        succeeded(r)
        check("resumed from ck/step-00000023" in r.stdout, r.stdout[:300])
        got = [x["loss"] for x in metrics(os.path.join(sm, "part.jsonl"))]
        check(got == ref, "resumed losses differ at %s" %
              [i for i, (a, b) in enumerate(zip(got, ref)) if a != b][:5])
        lines = [l.split("  ")[1] for l in r.stdout.splitlines() if l.startswith("step ")]
        check(lines[0] == "loss %.6f" % ref[23], "first resumed log line %s" % lines[0])
        # Resume with every checkpoint done: nothing to do, still exit 0.
        r = t.run(sm, *sm_data, "--steps", "50", "--checkpoint-dir", "ck", "--resume")
        succeeded(r)
        check("nothing to train" in r.stdout, r.stdout)
        # Keep the newest 3 (default).
        check(len(os.listdir(os.path.join(sm, "ck"))) == 3, os.listdir(os.path.join(sm, "ck")))
    t.ok("checkpoint + --resume reproduce the losses bit for bit", resume_identical)

    def damaged_checkpoint():
        ref = run_full(sm, sm_data, 30, "full2.jsonl")
        ck = os.path.join(sm, "ck2")
        shutil.rmtree(ck, ignore_errors=True)
        succeeded(t.run(sm, *sm_data, "--steps", "20", "--checkpoint-dir", "ck2",
                        "--checkpoint-every", "5", "--keep-checkpoints", "2",
                        "--metrics", "dmg.jsonl"))
        check(sorted(os.listdir(ck)) == ["step-00000015", "step-00000020"],
              "keep 2: %s" % os.listdir(ck))
        p = os.path.join(ck, "step-00000020", "tensors.safetensors")
        raw = bytearray(open(p, "rb").read())
        raw[-1] ^= 0x55
        open(p, "wb").write(raw)
        # A crash mid-write leaves only a .tmp directory: never loaded.
        os.makedirs(os.path.join(ck, ".tmp-step-00000025-999999"))
        r = t.run(sm, *sm_data, "--steps", "30", "--checkpoint-dir", "ck2", "--resume",
                  "--metrics", "dmg.jsonl")
        succeeded(r)
        want = ("checkpoint ck2/step-00000020: tensors.safetensors checksum mismatch; "
                "using ck2/step-00000015")
        check(want in r.stderr, "stderr: " + r.stderr)
        got = [x["loss"] for x in metrics(os.path.join(sm, "dmg.jsonl"))]
        check(got == ref, "losses after fallback differ")
        check(not os.path.exists(os.path.join(ck, ".tmp-step-00000025-999999")),
              "stale .tmp directory kept")
        # Every checkpoint damaged: an error, not a silent restart.
        for e in os.listdir(ck):
            if e.startswith("step-"):
                os.remove(os.path.join(ck, e, "manifest.json"))
        r = t.run(sm, *sm_data, "--steps", "30", "--checkpoint-dir", "ck2", "--resume")
        check(r.returncode == 1 and "no usable checkpoint in ck2" in r.stderr, r.stderr)
    t.ok("damaged checkpoints are reported and skipped", damaged_checkpoint)

    # -- SIGKILL at a random moment, then --resume. ---------------------------
    def sigkill_resume():
        steps = 20000 if args.quick else 150000
        every = 500
        big = t.make("kill", "softmax", samples=1000, batch=8, lr=0.01, dropout=0.1)
        ref = run_full(big, sm_data, steps, "full.jsonl", "--seed", "3")
        t0 = time.time()
        kills = 0
        rng = random.Random(os.getpid())
        ck = os.path.join(big, "ck")
        # Kill the same run several times at random moments, resuming each time.
        while True:
            p = subprocess.Popen(
                [os.path.join(big, "model.train")] + sm_data +
                ["--steps", str(steps), "--seed", "3", "--checkpoint-dir", "ck",
                 "--checkpoint-every", str(every), "--metrics", "killed.jsonl",
                 "--log-every", "0", "--resume"],
                cwd=big, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if kills < 3:
                time.sleep(rng.uniform(0.2, 1.5 if args.quick else 3.0))
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                    kills += 1
                p.wait()
                continue
            _, err = p.communicate()
            check(p.returncode == 0, "final resume: " + err.decode()[-300:])
            break
        check(kills >= 1, "the run ended before it could be killed")
        got = [x["loss"] for x in metrics(os.path.join(big, "killed.jsonl"))]
        check(len(got) == steps, "%d metrics lines after %d kills" % (len(got), kills))
        bad = [i for i, (a, b) in enumerate(zip(got, ref)) if a != b]
        check(not bad, "losses differ from step %s" % bad[:3])
        check(not any(e.startswith(".tmp") for e in os.listdir(ck)), os.listdir(ck))
        print("  (%d kills, %.1f s)" % (kills, time.time() - t0))
    t.ok("SIGKILL mid-run + --resume reproduce the losses bit for bit", sigkill_resume)

    # -- SIGTERM: checkpoint and stop. ----------------------------------------
    def sigterm():
        d = os.path.join(t.work, "kill")
        shutil.rmtree(os.path.join(d, "ckt"), ignore_errors=True)
        p = subprocess.Popen([os.path.join(d, "model.train")] + sm_data +
                             ["--steps", "100000000", "--checkpoint-dir", "ckt",
                              "--log-every", "0"], cwd=d, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(1.0)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        check(p.returncode == 128 + signal.SIGTERM, "exit %d %s" % (p.returncode, err))
        check("terminated after step" in out and "--resume continues" in out, out[-300:])
        check(len([e for e in os.listdir(os.path.join(d, "ckt")) if e.startswith("step-")]) == 1,
              os.listdir(os.path.join(d, "ckt")))
    t.ok("SIGTERM saves a checkpoint and stops", sigterm)

    # -- Other flags. ---------------------------------------------------------
    def epochs_and_noshuffle():
        r = t.run(lin, *lin_data, "--epochs", "3", "--no-shuffle", "--metrics", "e.jsonl")
        succeeded(r)
        m = metrics(os.path.join(lin, "e.jsonl"))
        check(len(m) == 36 and m[-1]["epoch"] == 2, "%d steps, last epoch %s" % (len(m), m[-1]["epoch"]))
        # --no-shuffle == file order: equal to a run with one epoch of data order 0..N-1
        check(epoch_order(10, 0, 0, False) == list(range(10)), "order")
    t.ok("--epochs counts floor(N/B) steps per epoch", epochs_and_noshuffle)

    def schedule():
        d = t.make("warm", "linreg", schedule="linear-warmup", warmup=4, lr=0.04)
        r = t.run(d, *lin_data, "--steps", "8", "--metrics", "w.jsonl")
        succeeded(r)
        lrs = [x["lr"] for x in metrics(os.path.join(d, "w.jsonl"))]
        want = [0.01, 0.02, 0.03, 0.04, 0.04, 0.04, 0.04, 0.04]
        check(np.allclose(lrs, want), "lr %s" % lrs)
        d = t.make("cos", "linreg", schedule="cosine", warmup=2, lr=0.04)
        r = t.run(d, *lin_data, "--steps", "6", "--metrics", "c.jsonl")
        succeeded(r)
        lrs = [x["lr"] for x in metrics(os.path.join(d, "c.jsonl"))]
        want = [0.02, 0.04] + [0.04 * (1 + np.cos(np.pi * (s - 2) / 4)) / 2 for s in range(2, 6)]
        check(np.allclose(lrs, want), "cosine lr %s vs %s" % (lrs, want))
        # A cosine schedule that never leaves warmup is refused (issue 21):
        # over the run's steps, or with total_steps below warmup_steps.
        r = t.run(d, *lin_data, "--steps", "1")
        check(r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and
              "the cosine schedule warms up over 2 steps, more than this run's 1; "
              "train longer or compile with fewer --warmup-steps or a --total-steps"
              in r.stderr, "exit %d: %r" % (r.returncode, r.stderr))
        d = t.make("cos_short", "linreg", schedule="cosine", warmup=5, total=3)
        r = t.run(d, *lin_data, "--steps", "6")
        check(r.returncode == 1 and "the cosine schedule's total_steps 3 is below its "
              "warmup_steps 5" in r.stderr, "exit %d: %r" % (r.returncode, r.stderr))
    t.ok("learning-rate schedules", schedule)

    def payload_env_and_help():
        r = t.run(lin, *lin_data, "--steps", "3", exe=t.bin,
                  env={"KILN_TRAIN_PAYLOAD": os.path.join(lin, "payload.bin")})
        succeeded(r)
        r = t.run(lin, "--help")
        succeeded(r)
        check("--data NAME=FILE.npy" in r.stdout and "--resume" in r.stdout, r.stdout)
        r = t.run(lin, *lin_data, "--steps", "3", "--threads", "1", "--data-x", exe=None)
        check(r.returncode == 1 and "unknown flag '--data-x'" in r.stderr, r.stderr)
        r = t.run(lin, *lin_data, "--steps", "5", "--threads", "1")
        succeeded(r)
    t.ok("KILN_TRAIN_PAYLOAD, --help, --threads", payload_env_and_help)

    def widened_labels():
        y = np.load(os.path.join(sm, "y.npy")).astype(np.int32)
        np.save(os.path.join(sm, "y32.npy"), y)
        a = run_full(sm, ["--data", "x=x.npy", "--data", "labels=y32.npy"], 10, "w32.jsonl")
        b = run_full(sm, sm_data, 10, "w64.jsonl")
        check(a == b, "i32 labels train differently")
    t.ok("integer labels of another dtype are widened", widened_labels)

    # -- Sharded data, loader threads, --drop-nonfinite. ----------------------
    def shard(d, name, arr, sizes, sub):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
        files, at = [], 0
        for k, n in enumerate(sizes):
            f = "%s-%03d.npy" % (name, k)
            np.save(os.path.join(d, sub, f), arr[at:at + n])
            files.append(f)
            at += n
        check(at == len(arr), "shard sizes")
        return files

    def sharded_same_losses():
        x = np.load(os.path.join(sm, "x.npy"))
        y = np.load(os.path.join(sm, "y.npy"))
        # 100 samples: x in 7 shards (one empty), labels in 3, of other sizes.
        xf = shard(sm, "x", x, [30, 1, 0, 20, 9, 33, 7], "shards")
        yf = shard(sm, "y", y, [50, 25, 25], "shards")
        with open(os.path.join(sm, "shards", "manifest.json"), "w") as f:
            json.dump({"inputs": {"x": xf, "labels": yf}}, f)
        ref = run_full(sm, sm_data, 30, "one.jsonl", "--seed", "3")
        got = run_full(sm, ["--data", "x=shards/x-*.npy", "--data", "labels=shards/y-*.npy"],
                       30, "glob.jsonl", "--seed", "3", "--loader-threads", "3")
        check(got == ref, "a glob over shards trains differently than one file")
        got = run_full(sm, ["--data", "x=shards", "--data", "labels=shards/"], 30,
                       "manifest.jsonl", "--seed", "3", "--loader-threads", "1")
        check(got == ref, "a manifest's shards train differently than one file")
        # Resume mid-epoch (12 steps/epoch) from a sharded run.
        ck = os.path.join(sm, "ck_shards")
        shutil.rmtree(ck, ignore_errors=True)
        sd = ["--data", "x=shards/x-*.npy", "--data", "labels=shards"]
        succeeded(t.run(sm, *sd, "--steps", "17", "--seed", "3", "--checkpoint-dir",
                        "ck_shards", "--metrics", "r1.jsonl", "--log-every", "0"))
        succeeded(t.run(sm, *sd, "--steps", "30", "--seed", "3", "--checkpoint-dir",
                        "ck_shards", "--resume", "--metrics", "r1.jsonl", "--log-every",
                        "0", "--loader-threads", "4"))
        got = [m["loss"] for m in metrics(os.path.join(sm, "r1.jsonl"))]
        check(got == ref, "sharded resume at step 17 differs")
        # The eval data may be a glob too.
        r = t.run(sm, *sd, "--steps", "3", "--eval-data", "x=shards/x-00[0-6].npy",
                  "--eval-data", "labels=shards")
        succeeded(r)
        check("eval: loss" in r.stdout and "(100 samples)" in r.stdout, r.stdout)
    t.ok("sharded data (glob, manifest) trains as one file; resume; threads",
         sharded_same_losses)

    def data_line():
        import re
        for threads, word in (([], "2 threads"), (["--loader-threads", "1"], "1 thread")):
            r = t.run(lin, *lin_data, "--steps", "20", "--log-every", "0", *threads)
            succeeded(r)
            lines = [l for l in r.stdout.splitlines() if l.startswith("data: ")]
            check(len(lines) == 1, "data lines %r" % lines)
            pat = (r"^data: \d+ samples/s loaded on %s, the step waited on data "
                   r"\d+\.\d%% of the time$" % word)
            check(re.match(pat, lines[0]), "data line %r" % lines[0])
    t.ok("the end-of-run data line", data_line)

    def drop_nonfinite():
        x = np.load(os.path.join(sm, "x.npy"))
        y = np.load(os.path.join(sm, "y.npy"))
        xn = x.copy()
        xn[3, 2] = np.nan
        xn[40, 0] = np.inf
        xn[77, 7] = -np.inf
        os.makedirs(os.path.join(sm, "dn"), exist_ok=True)
        shard(sm, "x", xn, [50, 50], "dn")
        keep = [i for i in range(100) if i not in (3, 40, 77)]
        np.save(os.path.join(sm, "dn", "xk.npy"), x[keep])
        np.save(os.path.join(sm, "dn", "yk.npy"), y[keep])
        ref = run_full(sm, ["--data", "x=dn/xk.npy", "--data", "labels=dn/yk.npy"], 30,
                       "kept.jsonl", "--seed", "2")
        r = t.run(sm, "--data", "x=dn/x-*.npy", "--data", "labels=y.npy", "--steps", "30",
                  "--seed", "2", "--drop-nonfinite", "--metrics", "dn.jsonl")
        succeeded(r)
        got = [m["loss"] for m in metrics(os.path.join(sm, "dn.jsonl"))]
        check(got == ref, "--drop-nonfinite trains differently than the kept samples")
        check("data: dropped 3 of 100 samples with NaN/Inf (first: dn/x-000.npy sample 3)"
              in r.stdout.splitlines(), r.stdout)
        check("97 samples" in r.stdout, r.stdout)
        # Without the flag the NaN stops the run, as before.
        r = t.run(sm, "--data", "x=dn/x-*.npy", "--data", "labels=y.npy", "--steps", "30",
                  "--no-shuffle")
        check(r.returncode == 1 and "loss is NaN" in r.stderr, r.stderr)
        r = t.run(sm, *sm_data, "--steps", "2", "--drop-nonfinite")
        succeeded(r)
        check("data: dropped 0 of 100 samples with NaN/Inf" in r.stdout.splitlines(),
              r.stdout)
    t.ok("--drop-nonfinite leaves out NaN/Inf samples, logged", drop_nonfinite)

    # -- Bad input: one line on stderr, exit 1. -------------------------------
    bad = os.path.join(t.work, "bad")
    os.makedirs(bad)
    x = np.load(os.path.join(sm, "x.npy"))
    y = np.load(os.path.join(sm, "y.npy"))
    np.save(os.path.join(bad, "x64.npy"), x.astype(np.float64).reshape(-1, 2, 4))
    np.save(os.path.join(bad, "short.npy"), y[:50])
    yb = y.copy()
    yb[37] = 12
    np.save(os.path.join(bad, "y12.npy"), yb)
    np.save(os.path.join(bad, "tiny_x.npy"), x[:5])
    np.save(os.path.join(bad, "tiny_y.npy"), y[:5])
    xn = x.copy()
    xn[3, 2] = np.nan
    np.save(os.path.join(bad, "xnan.npy"), xn)
    xn9 = xn[:9].copy()
    xn9[5, 0] = -np.inf
    np.save(os.path.join(bad, "nan9_x.npy"), xn9)
    np.save(os.path.join(bad, "nan9_y.npy"), y[:9])
    # Finite, but dropout's 1/(1-0.2) scaling overflows it to infinity.
    np.save(os.path.join(bad, "xbig.npy"), np.full_like(x, 3e38))
    with open(os.path.join(bad, "notnpy.npy"), "wb") as f:
        f.write(b"hello")
    with open(os.path.join(bad, "afile"), "w") as f:
        f.write("x")
    os.mkfifo(os.path.join(bad, "fifo"))
    full = open(os.path.join(sm, "payload.bin"), "rb").read()
    with open(os.path.join(bad, "cut.bin"), "wb") as f:
        f.write(full[:len(full) // 2] + full[-72:])
    for sub, arrs in (("shape", [x[:50], x[50:].reshape(50, 2, 4)]),
                      ("dtype", [x[:50], x[50:].astype(np.float64)])):
        os.makedirs(os.path.join(bad, sub))
        for k, a in enumerate(arrs):
            np.save(os.path.join(bad, sub, "x-%d.npy" % k), a)
    os.makedirs(os.path.join(bad, "man"))
    with open(os.path.join(bad, "man", "manifest.json"), "w") as f:
        json.dump({"inputs": {"x": ["../../sm/x.npy"]}}, f)
    os.makedirs(os.path.join(bad, "noman"))
    B = os.path.join(bad, "")
    exe = os.path.join(sm, "model.train")
    cases = [
        ("missing --data", sm, ["--data", "x=x.npy", "--steps", "3"], None,
         "missing --data for input 'labels'"),
        ("unknown --data name", sm, sm_data + ["--data", "z=x.npy", "--steps", "3"], None,
         "--data z: the model has no input 'z' (it reads x, labels)"),
        ("--data given twice", sm, sm_data + ["--data", "x=x.npy", "--steps", "3"], None,
         "--data x is given 2 times"),
        ("different lengths", sm, ["--data", "x=x.npy", "--data", "labels=%sshort.npy" % B,
                                   "--steps", "3"], None,
         "--data labels: %sshort.npy has 50 samples, --data x: x.npy has 100" % B),
        ("sample shape and dtype", sm, ["--data", "x=%sx64.npy" % B, "--data", "labels=y.npy",
                                        "--steps", "3"], None,
         "--data x: %sx64.npy holds f64 samples of shape [2,4], the model expects f32 [8]" % B),
        ("labels out of range", sm, ["--data", "x=x.npy", "--data", "labels=%sy12.npy" % B,
                                     "--steps", "3"], None,
         "--data labels: value 12 at sample 37 is outside [0, 5)"),
        ("eval labels out of range", sm, sm_data + ["--steps", "3", "--eval-data", "x=x.npy",
                                                    "--eval-data", "labels=%sy12.npy" % B], None,
         "--eval-data labels: value 12 at sample 37 is outside [0, 5)"),
        ("fewer samples than a batch", sm, ["--data", "x=%stiny_x.npy" % B,
                                            "--data", "labels=%stiny_y.npy" % B, "--steps", "3"],
         None, "--data x: %stiny_x.npy has 5 samples, fewer than one batch of 8" % B),
        ("not a .npy", sm, ["--data", "x=%snotnpy.npy" % B, "--data", "labels=y.npy",
                            "--steps", "3"], None,
         "--data x: %snotnpy.npy: not a .npy file (bad magic)" % B),
        ("a glob matching nothing", sm, ["--data", "x=nothing*.npy", "--data", "labels=y.npy",
                                         "--steps", "3"], None,
         "--data x=nothing*.npy: no file matches"),
        ("an eval glob matching nothing", sm, sm_data + ["--steps", "3", "--eval-data",
                                                         "x=x-[0-9].npy", "--eval-data",
                                                         "labels=y.npy"], None,
         "--eval-data x=x-[0-9].npy: no file matches"),
        ("shards of different sample shapes", sm, ["--data", "x=%sshape/x-*.npy" % B,
                                                   "--data", "labels=y.npy", "--steps", "3"],
         None, "--data x: %sshape/x-1.npy holds f32 samples of shape [2,4], "
               "%sshape/x-0.npy holds f32 samples of shape [8]; the shards of an input "
               "must agree" % (B, B)),
        ("shards of different dtypes", sm, ["--data", "x=%sdtype/x-*.npy" % B,
                                            "--data", "labels=y.npy", "--steps", "3"],
         None, "--data x: %sdtype/x-1.npy holds f64 samples of shape [8], "
               "%sdtype/x-0.npy holds f32 samples of shape [8]; the shards of an input "
               "must agree" % (B, B)),
        ("a manifest without the input", sm, ["--data", "x=%sman" % B, "--data",
                                              "labels=%sman" % B, "--steps", "3"], None,
         "--data labels: %sman/manifest.json: it lists no input 'labels' (it lists x)" % B),
        ("a directory without a manifest", sm, ["--data", "x=%snoman" % B, "--data",
                                                "labels=y.npy", "--steps", "3"], None,
         "--data x: %snoman is a directory, and %snoman/manifest.json: " % (B, B)),
        ("--loader-threads 0", sm, sm_data + ["--steps", "3", "--loader-threads", "0"], None,
         "--loader-threads needs a positive integer, got '0'"),
        ("--drop-nonfinite leaves too few", sm, ["--data", "x=%snan9_x.npy" % B, "--data",
                                                 "labels=%snan9_y.npy" % B, "--steps", "3",
                                                 "--drop-nonfinite"], None,
         "--data x: %snan9_x.npy has 9 samples, 7 kept after dropping those with NaN/Inf, "
         "fewer than one batch of 8" % B),
        ("missing file", sm, ["--data", "x=nope.npy", "--data", "labels=y.npy", "--steps", "3"],
         None, "--data x: nope.npy: No such file or directory"),
        ("unwritable checkpoint dir", sm, sm_data + ["--steps", "3", "--checkpoint-dir",
                                                     "%safile/ck" % B], None,
         "--checkpoint-dir %safile/ck: cannot create it" % B),
        ("--steps and --epochs", sm, sm_data + ["--steps", "3", "--epochs", "1"], None,
         "give --steps or --epochs, not both"),
        ("no --steps", sm, sm_data, None, "give --steps N or --epochs N"),
        ("bad --steps", sm, sm_data + ["--steps", "x"], None,
         "--steps needs a positive integer, got 'x'"),
        ("--threads above its bound", sm, sm_data + ["--steps", "3", "--threads", "1025"],
         None, "--threads is at most 1024, got '1025'"),
        ("--epochs times steps per epoch overflows", sm,
         sm_data + ["--epochs", "4611686018427387904"], None,
         "--epochs 4611686018427387904 of 12 steps each is more than "
         "4611686018427387904 steps"),
        ("a value given to a plain flag", sm, sm_data + ["--steps", "3", "--debug-nan=yes"],
         None, "debug-nan"),
        ("--resume without a dir", sm, sm_data + ["--steps", "3", "--resume"], None,
         "--resume needs --checkpoint-dir"),
        ("empty --checkpoint-dir", sm, sm_data + ["--steps", "3", "--checkpoint-dir", ""],
         None, "--checkpoint-dir needs a value, got ''"),
        ("empty --export-onnx", sm, sm_data + ["--steps", "3", "--export-onnx", ""], None,
         "--export-onnx needs a value, got ''"),
        ("empty --metrics", sm, sm_data + ["--steps", "3", "--metrics", ""], None,
         "--metrics needs a value, got ''"),
        # A FIFO is refused without blocking in open() (issue 21, defect 9).
        ("a FIFO as --data", sm, ["--data", "x=%sfifo" % B, "--data", "labels=y.npy",
                                  "--steps", "3"], {"timeout": 30},
         "--data x: %sfifo: not a regular file (a FIFO)" % B),
        ("a FIFO as --eval-data", sm, sm_data + ["--steps", "3", "--eval-data", "x=x.npy",
                                                 "--eval-data", "labels=%sfifo" % B],
         {"timeout": 30}, "--eval-data labels: %sfifo: not a regular file (a FIFO)" % B),
        ("no payload", sm, sm_data + ["--steps", "3"], {"exe": t.bin},
         "%s: not a Kiln training executable (no payload)" % t.bin),
        ("damaged payload", sm, sm_data + ["--steps", "3"],
         {"exe": t.bin, "env": {"KILN_TRAIN_PAYLOAD": B + "cut.bin"}},
         "not a Kiln training executable (no payload): the"),
        ("NaN loss", sm, ["--data", "x=%sxnan.npy" % B, "--data", "labels=y.npy",
                          "--steps", "3", "--no-shuffle", "--debug-nan",
                          "--checkpoint-dir", "cknan"], None,
         "%s: step 0: loss is NaN; first non-finite value: input 'x'" % exe),
        ("NaN loss, no --debug-nan", sm, ["--data", "x=%sxnan.npy" % B, "--data", "labels=y.npy",
                                          "--steps", "3", "--no-shuffle"], None,
         "step 0: loss is NaN; first non-finite value: input 'x'"),
        ("overflow inside the step", sm, ["--data", "x=%sxbig.npy" % B, "--data", "labels=y.npy",
                                          "--steps", "3", "--no-shuffle", "--debug-nan"], None,
         "step 0: loss is NaN; first non-finite value: step 0 ('dropout' at /Dropout)"),
    ]
    for name, d, argv, kw, want in cases:
        def case(d=d, argv=argv, kw=kw or {}, want=want):
            r = t.run(d, *argv, **kw)
            err = r.stderr.strip().splitlines()
            check(r.returncode == 1, "exit %d, stderr %r" % (r.returncode, r.stderr))
            check(len(err) == 1, "stderr has %d lines: %r" % (len(err), r.stderr))
            check(want in err[0], "stderr %r lacks %r" % (err[0], want))
        t.ok("bad input: " + name, case)

    # -- Outputs never replace an input, the executable or a special file ----
    # (issue 21, defects 1 and 2): refused at start, the target untouched.
    def sha(path):
        return hashlib.sha256(open(path, "rb").read()).hexdigest()

    def outputs_never_destroy():
        xc = os.path.join(bad, "xc.npy")
        shutil.copy(os.path.join(sm, "x.npy"), xc)
        fifo = os.path.join(bad, "fifo")
        if not os.path.exists(fifo):
            os.mkfifo(fifo)
        link = os.path.join(bad, "link.onnx")
        if not os.path.lexists(link):
            os.symlink(os.path.join(bad, "afile"), link)
        cases = [
            (["--data", "x=" + xc, "--data", "labels=y.npy", "--metrics", xc],
             "--metrics %s: it is also an input (--data x); give another path" % xc, xc),
            (sm_data + ["--export-onnx", exe], "it is also an input (the executable)", exe),
            (sm_data + ["--metrics", fifo], "--metrics %s: it is a FIFO" % fifo, None),
            (sm_data + ["--export-onnx", link], "--export-onnx %s: it is a symbolic link" % link,
             None),
        ]
        for argv, want, kept in cases:
            before = sha(kept) if kept else None
            r = t.run(sm, *(argv + ["--steps", "3"]))
            err = r.stderr.strip().splitlines()
            check(r.returncode == 1 and len(err) == 1 and want in err[0],
                  "%s: exit %d, stderr %r, want %r" % (argv[-1], r.returncode, r.stderr, want))
            if kept:
                check(sha(kept) == before, "%s changed" % kept)
        check(stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced")
        check(os.path.islink(link) and open(os.path.join(bad, "afile")).read() == "x",
              "the symlink or its target was replaced")
    t.ok("outputs never replace an input, the executable or a special file",
         outputs_never_destroy)

    # An output naming a device node (run as root: /dev/null was once
    # replaced by a regular file) is refused and the node left as it was.
    def device_node():
        if os.geteuid() != 0:
            print("  (not root: the device-node case is skipped)")
            return
        nd = os.path.join(bad, "nd")
        if not os.path.exists(nd):
            os.mknod(nd, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        ck = os.path.join(sm, "ck_nd")
        shutil.rmtree(ck, ignore_errors=True)
        succeeded(t.run(sm, *sm_data, "--steps", "2", "--checkpoint-dir", ck))
        for extra in (["--export-onnx", nd], ["--resume", "--checkpoint-dir", ck,
                                              "--metrics", nd]):
            r = t.run(sm, *sm_data, "--steps", "4", *extra)
            err = r.stderr.strip().splitlines()
            check(r.returncode == 1 and len(err) == 1 and
                  "%s %s: it is a character device" % (extra[-2], nd) in err[0],
                  "%s: exit %d, %r" % (extra, r.returncode, r.stderr))
            st = os.lstat(nd)
            check(stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 and
                  os.minor(st.st_rdev) == 3, "the device node was replaced")
    t.ok("an output naming a device node is refused, the node unchanged", device_node)

    # Checkpoint retention deletes only this model's complete checkpoints
    # (issue 21, defect 3); anything else under a step-* name is left, with
    # one warning, and does not count toward --keep-checkpoints.
    def retention():
        ck = os.path.join(sm, "ck_keep")
        shutil.rmtree(ck, ignore_errors=True)
        os.makedirs(ck)
        other = os.path.join(ck, "step-00000001")  # another model's checkpoint
        shutil.copytree(os.path.join(sm, "ck_export", "step-00000030"), other)
        mp = os.path.join(other, "manifest.json")
        man = json.load(open(mp))
        man["model_sha256"] = "1" * 64
        json.dump(man, open(mp, "w"))
        user = os.path.join(ck, "step-00000002")  # a user's files
        os.makedirs(user)
        with open(os.path.join(user, "mydata.txt"), "w") as f:
            f.write("precious")
        os.makedirs(os.path.join(ck, "step-99999999"))  # a stray, empty
        foreign = {p: sha(os.path.join(p, f)) for p in (other, user)
                   for f in os.listdir(p)}
        r = t.run(sm, *sm_data, "--steps", "8", "--checkpoint-dir", ck,
                  "--checkpoint-every", "3", "--keep-checkpoints", "2")
        succeeded(r)
        names = sorted(os.listdir(ck))  # 3, 6 and 8 written, 3 pruned
        check(names == ["step-00000001", "step-00000002", "step-00000006",
                        "step-00000008", "step-99999999"], "left %s" % names)
        check({p: sha(os.path.join(p, f)) for p in (other, user)
               for f in os.listdir(p)} == foreign, "a foreign checkpoint changed")
        warn = [l for l in r.stderr.splitlines() if "checkpoint retention" in l]
        check(len(warn) == 3 and
              any("step-00000001: not a checkpoint of this model (it was written for "
                  "another model" in l for l in warn) and
              any("step-00000002: not a checkpoint of this model (it holds 'mydata.txt'"
                  in l for l in warn) and
              any("step-99999999: not a checkpoint of this model (manifest.json is missing"
                  in l for l in warn), "warnings %r" % warn)
        # A foreign directory at a step this run writes is not replaced.
        r = t.run(sm, *sm_data, "--steps", "2", "--checkpoint-dir", ck)
        err = r.stderr.strip().splitlines()
        check(r.returncode == 1 and
              ("checkpoint %s/step-00000002 exists and is not a checkpoint of this model "
               "(it holds 'mydata.txt', which kiln does not write)" % ck) in err[-1],
              "exit %d: %r" % (r.returncode, r.stderr))
        check(open(os.path.join(user, "mydata.txt")).read() == "precious", "user file")
    t.ok("checkpoint retention deletes only this model's checkpoints", retention)

    # Resume refuses a checkpoint another compilation wrote (another
    # optimizer, --freeze): its manifest's optimizer and parameter set must
    # be this executable's. A manifest with "step": 5.5 is damaged, not step 5.
    def resume_mismatch():
        ck = os.path.join(sm, "ck_mis")
        shutil.rmtree(ck, ignore_errors=True)
        succeeded(t.run(sm, *sm_data, "--steps", "4", "--checkpoint-dir", ck,
                        "--checkpoint-every", "2"))
        mp = os.path.join(ck, "step-00000004", "manifest.json")
        good = open(mp).read()
        cases = []
        man = json.loads(good)
        man["optimizer"] = "adam"
        cases.append((man, "checkpoint %s/step-00000004 was written with optimizer 'adam', "
                      "this executable trains with 'momentum'" % ck))
        man = json.loads(good)
        man["params"].append({"name": "W/exp_avg", "role": "optimizer-state",
                              "dtype": "f32", "shape": [8, 5]})
        cases.append((man, "checkpoint %s/step-00000004 holds parameter 'W/exp_avg' "
                      "(optimizer-state), which this executable does not have" % ck))
        man = json.loads(good)
        man["params"] = [p for p in man["params"] if p["name"] != "b/momentum_buffer"]
        cases.append((man, "checkpoint %s/step-00000004 lacks parameter "
                      "'b/momentum_buffer'" % ck))
        for man, want in cases:
            json.dump(man, open(mp, "w"))
            r = t.run(sm, *sm_data, "--steps", "6", "--checkpoint-dir", ck, "--resume")
            err = r.stderr.strip().splitlines()
            check(r.returncode == 1 and len(err) == 1 and want in err[0],
                  "exit %d: %r, want %r" % (r.returncode, r.stderr, want))
        man = json.loads(good)
        man["step"] = 4.0
        json.dump(man, open(mp, "w"))
        r = t.run(sm, *sm_data, "--steps", "6", "--checkpoint-dir", ck, "--resume")
        succeeded(r)
        check("resumed from %s/step-00000002" % ck in r.stdout and
              "step-00000004: manifest.json field 'step' is not an integer; using" in r.stderr,
              "stdout %r stderr %r" % (r.stdout[:300], r.stderr))
        # FIFOs in place of a checkpoint's files are damage, never a hang.
        for f in ("manifest.json", "tensors.safetensors"):
            shutil.rmtree(ck, ignore_errors=True)
            succeeded(t.run(sm, *sm_data, "--steps", "4", "--checkpoint-dir", ck,
                            "--checkpoint-every", "2"))
            p = os.path.join(ck, "step-00000004", f)
            os.remove(p)
            os.mkfifo(p)
            r = t.run(sm, *sm_data, "--steps", "6", "--checkpoint-dir", ck, "--resume",
                      timeout=30)
            succeeded(r)
            check("resumed from %s/step-00000002" % ck in r.stdout and
                  ("step-00000004: %s is missing or unreadable; using" % f) in r.stderr,
                  "%s: stdout %r stderr %r" % (f, r.stdout[:300], r.stderr))
    t.ok("resume refuses another compilation's checkpoint; FIFOs are damage",
         resume_mismatch)

    def nan_no_checkpoint():
        ck = os.path.join(sm, "cknan")
        check(not os.path.exists(ck) or not any(e.startswith("step-") for e in os.listdir(ck)),
              "a checkpoint was written after a NaN loss: %s" % os.listdir(ck))
    t.ok("no checkpoint after a NaN loss", nan_no_checkpoint)

    def other_model():
        ck = os.path.join(sm, "ck_other")
        shutil.rmtree(ck, ignore_errors=True)
        succeeded(t.run(sm, *sm_data, "--steps", "5", "--checkpoint-dir", "ck_other"))
        mp = os.path.join(ck, "step-00000005", "manifest.json")
        man = json.load(open(mp))
        man["model_sha256"] = "0" * 64
        json.dump(man, open(mp, "w"))
        r = t.run(sm, *sm_data, "--steps", "8", "--checkpoint-dir", "ck_other", "--resume")
        err = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(err) == 1 and
              "checkpoint ck_other/step-00000005 was written for another model" in err[0],
              r.stderr)
        # A different --seed than the checkpoint's is refused too.
        man["model_sha256"] = json.load(open(os.path.join(sm, "ck", "step-00000050",
                                                          "manifest.json")))["model_sha256"]
        json.dump(man, open(mp, "w"))
        r = t.run(sm, *sm_data, "--steps", "8", "--checkpoint-dir", "ck_other", "--resume",
                  "--seed", "4")
        check(r.returncode == 1 and "was made with --seed 0, this run has --seed 4" in r.stderr,
              r.stderr)
    t.ok("bad input: checkpoint of another model on --resume", other_model)

    print("%d passed, %d failed" % (t.passed, t.failed))
    if not t.failed and not args.work:
        shutil.rmtree(t.work, ignore_errors=True)
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
