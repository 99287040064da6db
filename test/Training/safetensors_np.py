# Reads a safetensors file (what kiln-train's checkpoints hold) into NumPy
# arrays, for the training tests that look inside checkpoints.
import json

import numpy as np


def read_safetensors(path):
    """name -> float32/float64/int64 array of a safetensors file."""
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        dt = {"F32": np.float32, "F64": np.float64, "I64": np.int64}[e["dtype"]]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dt).reshape(e["shape"])
    return out
