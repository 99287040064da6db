#!/usr/bin/python3
# The --augment transforms (runtime/train/Augment.h) reimplemented in NumPy
# from the header's definitions, with the same counter-based randomness, and
# compared bit for bit with what kiln-augment-dump writes on fixed seeds.
#
# Usage: /usr/bin/python3 test/Training/augment_ref.py --bin build/bin --work DIR
#
# Data: the digits example (8x8 grey images, flat [64] per sample, read as
# image=1x8x8), the charlm example's token windows, and random 3x32x32 RGB
# images (CIFAR-like images are not on the machine). Every case also runs
# with another batch size and thread count and must give the same bytes:
# a sample's augmentation depends on (seed, epoch, sample id) only.
# Prints one line per case and exits 1 if any fails.
import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")

M64 = (1 << 64) - 1
G = 0x9E3779B97F4A7C15
PARTNER = 1 << 32


# --- The streams (Augment.h, "Randomness") ---------------------------------

def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def h(x):
    return mix((x + G) & M64)


def stream_key(seed, epoch, sample, slot):
    return h(h(h(h(seed) ^ epoch) ^ sample) ^ slot)


def bits(k, i):
    return mix((k + (i + 1) * G) & M64)


def uniform(k, i):
    return (bits(k, i) >> 11) * 2.0 ** -53


def below(k, i, n):
    return bits(k, i) % n


def bits_vec(k, idx):
    """bits(k, i) for an array of draw indices (uint64 arithmetic wraps)."""
    with np.errstate(over="ignore"):
        z = np.uint64(k) + (idx.astype(np.uint64) + np.uint64(1)) * np.uint64(G)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def uniform_vec(k, idx):
    return (bits_vec(k, idx) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53


class Cursor:
    def __init__(self, k, i):
        self.k, self.i = k, i

    def uniform(self):
        u = uniform(self.k, self.i)
        self.i += 1
        return u


def normal(c):
    u1 = c.uniform()
    u2 = c.uniform()
    return math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)


def gamma(c, alpha):
    if alpha < 1.0:
        g = gamma(c, alpha + 1.0)
        u = c.uniform()
        return g * math.pow(u, 1.0 / alpha)
    d = alpha - 1.0 / 3.0
    cc = 1.0 / math.sqrt(9.0 * d)
    while True:
        while True:
            x = normal(c)
            v = 1.0 + cc * x
            if v > 0.0:
                break
        v = v * v * v
        u = c.uniform()
        if (math.log(u) if u > 0 else -math.inf) < 0.5 * x * x + d * (1.0 - v + math.log(v)):
            return d * v


def beta(c, alpha):
    x = gamma(c, alpha)
    y = gamma(c, alpha)
    s = x + y
    return x / s if s > 0.0 else 1.0


# --- The transforms, on one sample -----------------------------------------

F = np.float32


def clamp(v, hi):
    return v if hi is None else np.minimum(np.maximum(v, F(0)), F(hi))


def crop(img, k, pad):
    c, hh, ww = img.shape
    i0 = below(k, 0, 2 * pad + 1)
    j0 = below(k, 1, 2 * pad + 1)
    padded = np.pad(img, ((0, 0), (pad, pad), (pad, pad)))
    return padded[:, i0:i0 + hh, j0:j0 + ww].copy()


def flip(img, k, p):
    return img[:, :, ::-1].copy() if uniform(k, 0) < p else img


def gray(img):
    if img.shape[0] == 1:
        return img[0]
    s = F(0.2989) * img[0]
    s = s + F(0.587) * img[1]
    return s + F(0.114) * img[2]


def jitter(img, k, factors, hi):
    f = []
    for j in range(3):
        lo, up = max(0.0, 1.0 - factors[j]), 1.0 + factors[j]
        f.append(F(lo + (up - lo) * uniform(k, j)))
    x = img
    if factors[0] > 0:
        x = clamp(x * f[0], hi)
    if factors[1] > 0:
        g = gray(x).reshape(-1).astype(np.float64)
        m = F(np.cumsum(g)[-1] / float(g.size))   # sequential, as the C++
        x = clamp(f[1] * x + (F(1) - f[1]) * m, hi)
    if factors[2] > 0:
        g = (F(1) - f[2]) * gray(x)
        x = clamp(f[2] * x + g[None], hi)
    return x


def normalize(img, mean, std):
    c = img.shape[0]
    mean = mean * c if len(mean) == 1 else mean
    std = std * c if len(std) == 1 else std
    return np.stack([(img[i] - F(mean[i])) / F(std[i]) for i in range(c)])


def blend(x, y, lam):
    l = F(lam)
    return x * l + y * (F(1) - l)


def mask(tok, labels, k, p, mask_id, vocab, ignore):
    idx = np.arange(tok.size, dtype=np.uint64)
    sel = uniform_vec(k, 3 * idx) < p
    u = uniform_vec(k, 3 * idx + 1)
    rnd = (bits_vec(k, 3 * idx + 2) % np.uint64(vocab)).astype(tok.dtype)
    out = np.where(sel & (u < 0.8), tok.dtype.type(mask_id),
                   np.where(sel & (u < 0.9), rnd, tok))
    if ignore is not None:
        labels = np.where(sel, labels, labels.dtype.type(ignore))
    return out, labels


def substitute(tok, k, p, table):
    out = tok.copy()
    for pos in range(tok.size):
        if not uniform(k, 2 * pos) < p:
            continue
        t = int(tok[pos])
        if t < 0 or t >= table.shape[0]:
            continue
        row = [int(e) for e in table[t] if e >= 0]
        if row:
            out[pos] = row[below(k, 2 * pos + 1, len(row))]
    return out


# --- A case: stages in spec order (their index is the slot) ----------------

def apply_image_stage(stage, img, k, hi):
    kind, a = stage
    if kind == "crop":
        return crop(img, k, a["pad"])
    if kind == "flip":
        return flip(img, k, a.get("p", 0.5))
    if kind == "jitter":
        return jitter(img, k, a["f"], hi)
    if kind == "normalize":
        return normalize(img, a["mean"], a["std"])
    raise ValueError(kind)


def reference(case, arrays, seed, epoch):
    """The augmented arrays, sample by sample from the header's rules."""
    out = {n: a.copy() for n, a in arrays.items()}
    n = len(next(iter(arrays.values())))
    stages = case["stages"]          # [(input, kind, args)]
    shape = case.get("image", {})    # input -> (C, H, W)
    hi = case.get("max", 1.0)
    for s in range(n):
        for t, (inp, kind, a) in enumerate(stages):
            k = stream_key(seed, epoch, s, t)
            if kind in ("crop", "flip", "jitter", "normalize"):
                img = out[inp][s].reshape(shape[inp])
                out[inp][s] = apply_image_stage((kind, a), img, k, hi).reshape(out[inp][s].shape)
            elif kind == "mix":
                mixup, cutmix = a.get("mixup", 0.0), a.get("cutmix", 0.0)
                cut = cutmix > 0 and (mixup == 0 or uniform(k, 0) < 0.5)
                partner = below(k, 1, n)
                lam = beta(Cursor(k, 4), cutmix if cut else mixup)
                px = arrays[inp][partner].reshape(shape[inp])
                for t2, (inp2, kind2, a2) in enumerate(stages[:t]):
                    if inp2 == inp:
                        px = apply_image_stage((kind2, a2), px,
                                               stream_key(seed, epoch, s, PARTNER + t2), hi)
                x = out[inp][s].reshape(shape[inp])
                if cut:
                    _, hh, ww = x.shape
                    r = math.sqrt(1.0 - lam)
                    ch, cw = int(hh * r), int(ww * r)
                    cy, cx = below(k, 3, hh), below(k, 2, ww)
                    y1, y2 = min(max(cy - ch // 2, 0), hh), min(max(cy + ch // 2, 0), hh)
                    x1, x2 = min(max(cx - cw // 2, 0), ww), min(max(cx + cw // 2, 0), ww)
                    x = x.copy()
                    x[:, y1:y2, x1:x2] = px[:, y1:y2, x1:x2]
                    lam = 1.0 - ((y2 - y1) * (x2 - x1)) / (hh * ww)
                else:
                    x = blend(x, px, lam)
                out[inp][s] = x.reshape(out[inp][s].shape)
                lab = case["labels"]
                out[lab][s] = blend(out[lab][s], arrays[lab][partner], lam)
            elif kind == "mask":
                lab = case.get("labels")
                tok, labels = mask(out[inp][s].reshape(-1),
                                   out[lab][s].reshape(-1) if lab else None, k,
                                   a["p"], a["id"], a["vocab"], a.get("ignore"))
                out[inp][s] = tok.reshape(out[inp][s].shape)
                if a.get("ignore") is not None:
                    out[lab][s] = labels.reshape(out[lab][s].shape)
            elif kind == "substitute":
                out[inp][s] = substitute(out[inp][s].reshape(-1), k, a["p"],
                                         a["table"]).reshape(out[inp][s].shape)
            else:
                raise ValueError(kind)
    return out


def run_dump(args, case, files, outdir, seed, epoch, batch, threads):
    cmd = [os.path.join(args.bin, "kiln-augment-dump"), "--augment", case["spec"],
           "--seed", str(seed), "--epoch", str(epoch), "--batch", str(batch),
           "--threads", str(threads), "--out-dir", outdir]
    for name, path in files.items():
        cmd += ["--data", "%s=%s" % (name, path)]
    if "classes" in case:
        cmd += ["--num-classes", str(case["classes"])]
    if "labels" in case:
        cmd += ["--labels", case["labels"]]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("kiln-augment-dump failed: " + (r.stderr or r.stdout).strip())
    return {n: np.load(os.path.join(outdir, n + ".npy")) for n in files}


def same_bytes(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def run_case(args, name, case, files, arrays):
    seed, epoch = case.get("seed", 7), case.get("epoch", 3)
    if "classes" in case:
        # kiln-augment-dump feeds integer labels as one-hot rows, as the
        # loader does for soft labels.
        arrays = dict(arrays)
        arrays["labels"] = np.eye(case["classes"], dtype=np.float32)[arrays["labels"]]
    work = os.path.join(args.work, name)
    got = run_dump(args, case, files, work + "_a", seed, epoch, 7, 3)
    again = run_dump(args, case, files, work + "_b", seed, epoch, 16, 1)
    want = reference(case, arrays, seed, epoch)
    for n in files:
        if not same_bytes(got[n], again[n]):
            return False, "%s: batch 7 on 3 threads and batch 16 on 1 differ" % n
        if not same_bytes(got[n], want[n]):
            d = np.abs(got[n].astype(np.float64) - want[n].astype(np.float64))
            bad = np.argwhere(d != 0)
            return False, "%s: %d values differ from the NumPy reference (max %.3g, first at %s)" % (
                n, len(bad), float(d.max()) if d.size else 0.0, bad[0].tolist() if len(bad) else "?")
    changed = sum(int(np.sum(got[n] != arrays[n])) for n in files)
    other = run_dump(args, case, files, work + "_c", seed, epoch + 1, 7, 2)
    if all(same_bytes(other[n], got[n]) for n in files) and changed:
        return False, "epoch %d and %d augment alike" % (epoch, epoch + 1)
    return True, "%d samples bit-exact, %d values changed" % (
        len(next(iter(arrays.values()))), changed)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    w = args.work

    # The digits example: flat [64] samples in [0, 1], int64 labels.
    dd = os.path.join(w, "digits")
    subprocess.run([sys.executable, os.path.join(EXAMPLES, "digits", "make_data.py"), dd],
                   check=True, capture_output=True)
    dx = np.load(os.path.join(dd, "train_x.npy"))[:300]
    dy = np.load(os.path.join(dd, "train_y.npy"))[:300]
    np.save(os.path.join(w, "dx.npy"), dx)
    np.save(os.path.join(w, "dy.npy"), dy)
    digits = ({"x": os.path.join(w, "dx.npy"), "labels": os.path.join(w, "dy.npy")},
              {"x": dx, "labels": dy})

    # The charlm example: int64 [N, 32] windows and next-character labels.
    cd = os.path.join(w, "charlm")
    subprocess.run([sys.executable, os.path.join(EXAMPLES, "charlm", "make_data.py"), cd],
                   check=True, capture_output=True)
    vocab = len(json.load(open(os.path.join(cd, "vocab.json")))["chars"])
    ci = np.load(os.path.join(cd, "train_idx.npy"))[:200]
    cl = np.load(os.path.join(cd, "train_labels.npy"))[:200]
    np.save(os.path.join(w, "ci.npy"), ci)
    np.save(os.path.join(w, "cl.npy"), cl)
    charlm = ({"idx": os.path.join(w, "ci.npy"), "labels": os.path.join(w, "cl.npy")},
              {"idx": ci, "labels": cl})
    # A substitute table: up to 3 "synonyms" per character, -1 padded; some
    # rows empty.
    g = np.random.default_rng(5)
    table = g.integers(0, vocab, size=(vocab, 3)).astype(np.int64)
    table[g.random((vocab, 3)) < 0.3] = -1
    table[::7] = -1
    tpath = os.path.join(w, "table.npy")
    np.save(tpath, table)

    # CIFAR-like: random 3x32x32 images in [0, 1].
    rx = g.random((48, 3, 32, 32), dtype=np.float32)
    ry = g.integers(0, 10, size=(48,)).astype(np.int64)
    np.save(os.path.join(w, "rx.npy"), rx)
    np.save(os.path.join(w, "ry.npy"), ry)
    rgb = ({"x": os.path.join(w, "rx.npy"), "labels": os.path.join(w, "ry.npy")},
           {"x": rx, "labels": ry})

    img8 = {"x": (1, 8, 8)}
    cases = [
        ("digits/crop-flip", digits, {
            "spec": "image=1x8x8,crop=8,pad=2,flip", "image": img8,
            "stages": [("x", "crop", {"pad": 2}), ("x", "flip", {})]}),
        ("digits/jitter-normalize", digits, {
            "spec": "x:image=8x8,jitter=0.4,0.4,normalize=0.3/0.4", "image": img8,
            "stages": [("x", "jitter", {"f": [0.4, 0.4, 0.0]}),
                       ("x", "normalize", {"mean": [0.3], "std": [0.4]})]}),
        ("digits/flip-mixup", digits, {
            "spec": "image=1x8x8,flip=0.3,mixup=0.4", "image": img8, "classes": 10,
            "labels": "labels",
            "stages": [("x", "flip", {"p": 0.3}), ("x", "mix", {"mixup": 0.4})]}),
        ("digits/crop-cutmix", digits, {
            "spec": "image=1x8x8,pad=1,cutmix=1.0", "image": img8, "classes": 10,
            "labels": "labels",
            "stages": [("x", "crop", {"pad": 1}), ("x", "mix", {"cutmix": 1.0})]}),
        ("digits/mixup-or-cutmix", digits, {
            "spec": "image=1x8x8,mixup=0.2,cutmix=2.5,max=none", "image": img8,
            "classes": 10, "labels": "labels", "epoch": 0, "seed": 12345678901234,
            "stages": [("x", "mix", {"mixup": 0.2, "cutmix": 2.5})]}),
        ("rgb/cifar-recipe", rgb, {
            "spec": "crop=32,pad=4,flip,jitter=0.4,0.4,0.4,"
                    "normalize=0.49,0.48,0.45/0.25,0.24,0.26",
            "image": {"x": (3, 32, 32)},
            "stages": [("x", "crop", {"pad": 4}), ("x", "flip", {}),
                       ("x", "jitter", {"f": [0.4, 0.4, 0.4]}),
                       ("x", "normalize", {"mean": [0.49, 0.48, 0.45],
                                           "std": [0.25, 0.24, 0.26]})]}),
        ("rgb/jitter-mixup", rgb, {
            "spec": "jitter=0.8,0.5,1.5,mixup=1.0", "image": {"x": (3, 32, 32)},
            "classes": 10, "labels": "labels",
            "stages": [("x", "jitter", {"f": [0.8, 0.5, 1.5]}),
                       ("x", "mix", {"mixup": 1.0})]}),
        ("charlm/mask", charlm, {
            "spec": "idx:mask=0.15,0,%d,ignore=-100" % vocab, "labels": "labels",
            "stages": [("idx", "mask", {"p": 0.15, "id": 0, "vocab": vocab,
                                        "ignore": -100})]}),
        ("charlm/substitute-mask", charlm, {
            "spec": "substitute=0.3,%s,mask=0.1,3,%d" % (tpath, vocab),
            "stages": [("idx", "substitute", {"p": 0.3, "table": table}),
                       ("idx", "mask", {"p": 0.1, "id": 3, "vocab": vocab})]}),
    ]
    failed = 0
    for name, (files, arrays), case in cases:
        try:
            ok, detail = run_case(args, name, case, files, arrays)
        except RuntimeError as e:
            ok, detail = False, str(e)
        print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail))
        failed += not ok
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
