#!/usr/bin/python3
"""Build a character-level language-modelling dataset from text on every Debian machine.

Usage: /usr/bin/python3 examples/charlm/make_data.py OUTDIR [--context T]

The corpus is the licence texts in /usr/share/common-licenses (package
base-files, always installed), each file once (GPL, LGPL and GFDL are links
to the newest version), in name order. If that folder is missing or nearly
empty, the packages' /usr/share/doc/*/copyright files are used instead.

Writes:
  OUTDIR/vocab.json         {"chars": [...], "context": T, "corpus": [...files]}
                            chars[i] is the character with id i (sorted)
  OUTDIR/train_idx.npy      int64 [N, T]  ids of text[s : s+T]
  OUTDIR/train_labels.npy   int64 [N, T]  ids of text[s+1 : s+T+1] (the next char)
with windows starting at s = 0, T, 2T, ... (stride T, no overlap).
"""
import argparse
import glob
import json
import os
import sys

import numpy as np

MIN_CORPUS_CHARS = 20000


def read_texts(paths):
    seen, files, parts = set(), [], []
    for p in sorted(paths):
        real = os.path.realpath(p)
        if real in seen or not os.path.isfile(real):
            continue
        seen.add(real)
        with open(real, "rb") as f:
            text = f.read().decode("utf-8", errors="replace")
        files.append(p)
        parts.append(text)
    return files, "\n".join(parts)


def corpus():
    files, text = read_texts(glob.glob("/usr/share/common-licenses/*"))
    if len(text) >= MIN_CORPUS_CHARS:
        return files, text
    files, text = read_texts(glob.glob("/usr/share/doc/*/copyright"))
    if len(text) >= MIN_CORPUS_CHARS:
        return files, text
    sys.exit("make_data.py: no text corpus found (need /usr/share/common-licenses "
             "or /usr/share/doc/*/copyright, at least %d characters)"
             % MIN_CORPUS_CHARS)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--context", type=int, default=32, metavar="T",
                    help="window length (default 32; the model's context)")
    opts = ap.parse_args(argv)
    T = opts.context
    files, text = corpus()
    chars = sorted(set(text))
    lut = {c: i for i, c in enumerate(chars)}
    data = np.fromiter((lut[c] for c in text), dtype=np.int64, count=len(text))
    n = (len(data) - 1) // T
    starts = np.arange(n) * T
    offs = np.arange(T)
    idx = data[starts[:, None] + offs[None, :]]
    labels = data[starts[:, None] + offs[None, :] + 1]
    os.makedirs(opts.outdir, exist_ok=True)
    np.save(os.path.join(opts.outdir, "train_idx.npy"), idx)
    np.save(os.path.join(opts.outdir, "train_labels.npy"), labels)
    with open(os.path.join(opts.outdir, "vocab.json"), "w") as f:
        json.dump({"chars": chars, "context": T, "corpus": files}, f,
                  ensure_ascii=False, indent=1)
    print("charlm: %d characters from %d files, vocab %d, %d windows of %d -> %s"
          % (len(text), len(files), len(chars), n, T, opts.outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
