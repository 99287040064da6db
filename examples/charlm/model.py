#!/usr/bin/python3
"""Export a small character-level decoder-only transformer as an ONNX training graph.

Usage: /usr/bin/python3 examples/charlm/model.py OUTDIR [--vocab-size V]

Reads the vocabulary size and context from OUTDIR/vocab.json (written by
make_data.py; --vocab-size overrides it) and writes OUTDIR/charlm.onnx:
opset 17, training mode, no constant folding, weights from
torch.manual_seed(0).

  input  "idx"     int64   [batch, T]     character ids
  output "logits"  float32 [batch, T, V]  next-character scores

The batch dimension is symbolic ("batch"); `kiln-compile --batch-size N`
fixes it. `kiln-compile --loss cross-entropy` appends the loss (class on the
last axis) and a "labels" input, int64 [batch, T].

The model: token embedding + learned positional embedding, 2 pre-LayerNorm
blocks (causal 4-head self-attention, GELU MLP of width 4d), final LayerNorm,
an untied linear head; d = 64, T = 32. No dropout, so training is
deterministic. Every reshape uses the fixed context T and -1 for the batch,
so the graph has no Shape ops; the causal mask is a bool initializer (not a
parameter, and no Not op) and the positions are the whole positional table, so there is no
Range or second Gather.
"""
import argparse
import json
import math
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 17


class CausalSelfAttention(nn.Module):
    def __init__(self, d, n_head, T):
        super().__init__()
        self.n_head, self.hd, self.T, self.d = n_head, d // n_head, T, d
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        # True above the diagonal: position t may not attend to t' > t.
        self.register_buffer(
            "future", torch.ones(T, T, dtype=torch.bool).triu(1).view(1, 1, T, T))

    def forward(self, x):                       # x: [B, T, d]
        T, H, hd, d = self.T, self.n_head, self.hd, self.d
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.reshape(-1, T, H, hd).transpose(1, 2)   # [B, H, T, hd]
        k = k.reshape(-1, T, H, hd).transpose(1, 2)
        v = v.reshape(-1, T, H, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.future, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(-1, T, d)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, d, n_head, T):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, n_head, T)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class CharLM(nn.Module):
    def __init__(self, vocab, T=32, d=64, n_head=4, n_layer=2):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d)
        self.pos_emb = nn.Parameter(torch.randn(T, d) * 0.02)
        self.blocks = nn.ModuleList([Block(d, n_head, T) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):                     # idx: [B, T] int64
        x = self.tok_emb(idx) + self.pos_emb
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))          # [B, T, V]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--vocab-size", type=int, default=0, metavar="V",
                    help="default: len(chars) in OUTDIR/vocab.json")
    ap.add_argument("--context", type=int, default=0, metavar="T",
                    help="default: context in OUTDIR/vocab.json, else 32")
    opts = ap.parse_args(argv)
    V, T = opts.vocab_size, opts.context
    vocab_path = os.path.join(opts.outdir, "vocab.json")
    if os.path.exists(vocab_path):
        with open(vocab_path) as f:
            meta = json.load(f)
        V = V or len(meta["chars"])
        T = T or meta["context"]
    if not V:
        sys.exit("model.py: no %s (run make_data.py first) and no --vocab-size"
                 % vocab_path)
    T = T or 32
    os.makedirs(opts.outdir, exist_ok=True)
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    model = CharLM(V, T)
    model.train()
    path = os.path.join(opts.outdir, "charlm.onnx")
    example = torch.randint(0, V, (2, T), dtype=torch.int64)
    torch.onnx.export(model, (example,), path,
                      opset_version=OPSET,
                      do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING,
                      input_names=["idx"], output_names=["logits"],
                      dynamic_axes={"idx": {0: "batch"},
                                    "logits": {0: "batch"}})
    n = sum(p.numel() for p in model.parameters())
    print("charlm: 2-layer transformer, d 64, 4 heads, context %d, vocab %d, "
          "%d parameters -> %s" % (T, V, n, path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
