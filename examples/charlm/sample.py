#!/usr/bin/python3
"""Generate text from a trained charlm with PyTorch.

Usage: /usr/bin/python3 examples/charlm/sample.py MODEL.onnx [--vocab vocab.json]
           [--prompt TEXT] [--chars N] [--temperature F] [--seed S]

MODEL.onnx is what the training executable's --export-onnx wrote (or the
untrained charlm.onnx): its initializers, which keep the PyTorch names, are
loaded into model.py's CharLM, which then samples N characters after the
prompt, one at a time, from the last T characters. vocab.json defaults to
the one next to MODEL.onnx.
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import CharLM  # noqa: E402


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--vocab")
    ap.add_argument("--prompt", default="This License ")
    ap.add_argument("--chars", type=int, default=300)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=0)
    opts = ap.parse_args(argv)
    vocab_path = opts.vocab or os.path.join(os.path.dirname(opts.model), "vocab.json")
    with open(vocab_path) as f:
        meta = json.load(f)
    chars, T = meta["chars"], meta["context"]
    lut = {c: i for i, c in enumerate(chars)}

    net = CharLM(len(chars), T)
    state = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
             for t in onnx.load(opts.model).graph.initializer}
    own = net.state_dict()
    missing = [k for k in own if k not in state]
    if missing:
        sys.exit("sample.py: %s lacks %s" % (opts.model, ", ".join(missing)))
    net.load_state_dict({k: state[k] for k in own})
    net.eval()

    torch.manual_seed(opts.seed)
    ids = [lut.get(c, lut.get(" ", 0)) for c in opts.prompt] or [0]
    with torch.no_grad():
        for _ in range(opts.chars):
            ctx = ids[-T:]
            # The model takes exactly T positions; the mask is causal, so
            # padding on the right leaves position len(ctx) - 1 unchanged.
            x = torch.tensor([ctx + [0] * (T - len(ctx))])
            logits = net(x)[0, len(ctx) - 1] / max(opts.temperature, 1e-6)
            ids.append(int(torch.multinomial(torch.softmax(logits, -1), 1)))
    sys.stdout.write("".join(chars[i] for i in ids) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
