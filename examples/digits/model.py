#!/usr/bin/python3
"""Export the digits MLP (64 -> 128 -> 64 -> 10, ReLU) as an ONNX training graph.

Usage: /usr/bin/python3 examples/digits/model.py OUTDIR

Writes OUTDIR/digits_mlp.onnx: opset 17, training mode, no constant folding,
weights from torch.manual_seed(0). Input "x" is float32 [batch, 64], output
"logits" is float32 [batch, 10]; the batch dimension is symbolic ("batch"),
so `kiln-compile --batch-size N` fixes it. The loss is not in the graph:
`kiln-compile --loss cross-entropy` appends it (and a "labels" input).
"""
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 17


class DigitsMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def main(argv):
    if len(argv) != 1:
        sys.stderr.write("usage: model.py OUTDIR\n")
        return 1
    outdir = argv[0]
    os.makedirs(outdir, exist_ok=True)
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    model = DigitsMLP()
    model.train()
    path = os.path.join(outdir, "digits_mlp.onnx")
    torch.onnx.export(model, (torch.randn(8, 64),), path,
                      opset_version=OPSET,
                      do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING,
                      input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "batch"},
                                    "logits": {0: "batch"}})
    n = sum(p.numel() for p in model.parameters())
    print("digits_mlp: 64-128-64-10 MLP, %d parameters -> %s" % (n, path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
