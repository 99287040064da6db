#!/usr/bin/python3
"""compare.py A.npy B.npy: exits 1 unless the arrays are equal (same dtype/shape)."""
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
ok = a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
print("equal" if ok else "differ: %r vs %r" % (a, b))
sys.exit(0 if ok else 1)
