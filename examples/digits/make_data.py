#!/usr/bin/python3
"""Write scikit-learn's bundled handwritten digits as .npy files for Kiln.

Usage: /usr/bin/python3 examples/digits/make_data.py OUTDIR

load_digits() ships with scikit-learn (Debian: python3-sklearn), so no
network is needed: 1,797 8x8 grey-level images, values 0..16, ten classes.
Writes, with a fixed-seed 80/20 split (1,438 train, 359 test):

  OUTDIR/train_x.npy  float32 [1438, 64]  pixels scaled to [0, 1]
  OUTDIR/train_y.npy  int64   [1438]      the digit, 0..9
  OUTDIR/test_x.npy   float32 [359, 64]
  OUTDIR/test_y.npy   int64   [359]
"""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

SEED = 0
TEST_FRACTION = 0.2


def main(argv):
    if len(argv) != 1:
        sys.stderr.write("usage: make_data.py OUTDIR\n")
        return 1
    outdir = argv[0]
    os.makedirs(outdir, exist_ok=True)
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)       # [1797, 64] in [0, 1]
    y = digits.target.astype(np.int64)                 # [1797]
    order = np.random.RandomState(SEED).permutation(len(x))
    n_test = int(round(len(x) * TEST_FRACTION))
    test, train = order[:n_test], order[n_test:]
    arrays = {"train_x": x[train], "train_y": y[train],
              "test_x": x[test], "test_y": y[test]}
    for name, a in arrays.items():
        np.save(os.path.join(outdir, name + ".npy"), np.ascontiguousarray(a))
    print("digits: %d train, %d test samples of 64 features, 10 classes -> %s"
          % (len(train), len(test), outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
