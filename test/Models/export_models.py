#!/usr/bin/python3
# Export the small test models Kiln imports, as ONNX training graphs.
#
# Usage: /usr/bin/python3 test/Models/export_models.py OUTDIR [NAME ...]
#   Writes OUTDIR/<name>.onnx for each named model (all when none are named)
#   and prints one line per model. Needs torch (1.13), torchvision (0.14) and
#   onnx (1.12): use Debian's /usr/bin/python3, not the python3 on PATH.
#
# Every export uses opset 17, do_constant_folding=False,
# training=TrainingMode.TRAINING and fixed static shapes (no dynamic_axes);
# torch.manual_seed(0) is called before each model is built, so the files are
# deterministic.
#
# Op types observed per model (torch 1.13.0, torchvision 0.14.1, onnx 1.12.0,
# opset 17):
#
#   mlp       Gemm x3, Relu x2
#   cnn       Conv x2, BatchNormalization x2, Relu x2, MaxPool, GlobalAveragePool,
#             Flatten, Gemm
#   resnet18  Conv x20, BatchNormalization x20, Relu x17, Add x8, MaxPool,
#             GlobalAveragePool, Flatten, Gemm
#   gpt       Constant x84, Unsqueeze x31, Transpose x17, Add x15, MatMul x13,
#             Concat x8, Reshape x8, Dropout x7, Mul x6, LayerNormalization x5,
#             Cast x4, Slice x4, Div x2, Equal x2, Erf x2, Gather x2, Softmax x2,
#             Split x2, Where x2
#   mlp_ce    Gemm x3, Relu x2, SoftmaxCrossEntropyLoss (reduction=mean,
#             ignore_index=-100)
#   tiny_ops  Constant x48, Add x22, Slice x7, Cast x5, Mul x5, Shape x4,
#             Concat x3, ConstantOfShape x3, Reshape x3, Expand x2, Gather x2,
#             Pad x2, ReduceSum x2, Sub x2, Tanh x2, Transpose x2, Unsqueeze x2,
#             Where x2, and one each of Abs, ArgMax, AveragePool, Clip,
#             ConvTranspose, Div, Elu, Equal, Exp, Flatten, Greater,
#             LayerNormalization, LeakyRelu, Log, LogSoftmax, Neg, Pow, ReduceMax,
#             ReduceMean, Sigmoid, Softplus, Split, Sqrt, Squeeze, Tile
#
# What the graphs look like (all exported unchanged; no model needed changing):
#   * Every file has one opset import, ("", 17), and IR version 8. No
#     value_info is written: an importer has to infer intermediate shapes.
#   * BatchNormalization has training_mode=1 and momentum=0.9 (ONNX momentum is
#     1 - torch momentum). Its running_mean/running_var outputs (outputs 1 and
#     2) are NOT graph outputs: they dangle (40 of them in resnet18), and the
#     num_batches_tracked update is dropped ("Removing mutation" warning).
#   * Dropout (gpt) gets ratio 0.1 and training_mode true as Constant inputs;
#     its mask output dangles.
#   * nn.Linear on 2-D input is Gemm (transB=1); on 3-D input (gpt) it is
#     Transpose(weight) + MatMul + Add(bias, ...), bias first.
#   * gpt: torch.arange(T) and every view() shape are constant-folded by the
#     exporter even with do_constant_folding=False: no Range or Shape; Reshape
#     shapes are Concat of Unsqueeze'd scalar Constants. The bool mask
#     initializer is sliced, Cast to int64, Equal 0, Cast to bool, then
#     Where(mask, -inf, att). GELU is Div(sqrt 2), Erf, Add 1, Mul, Mul 0.5.
#   * tiny_ops: torch.chunk exports Shape/Gather/Add/Div/Mul feeding Slice
#     starts/ends (computed, not Constant); F.pad exports a Shape, Gather,
#     ConstantOfShape, Concat, Reshape, Slice(step -1), Transpose, Reshape,
#     Cast chain feeding Pad's pads (third input ''); expand() becomes a
#     ConstantOfShape/Mul/Equal/Where chain into Expand; repeat() is Expand +
#     Tile; avg_pool2d is an all-zero Pad then AveragePool; clamp casts its
#     Constant bounds; torch.max(x, dim) is ReduceMax (indices unused);
#     ReduceMean/ReduceMax take axes as an attribute, ReduceSum as an input.
#     Because of the chunk Slices, the exporter's shape inference loses the
#     rank, so output "out" is declared with symbolic dims (Addout_dim_0..3)
#     even though it is [2,3,8,8]; "flat" is a static [2,384].
#   * Warnings printed at export (hidden unless -v): the num_batches_tracked
#     mutation removal, "Constant folding - Only steps=1 can be constant
#     folded" (F.pad's reversed Slice), and "shape inference of prim::Constant
#     type is missing". None of them changes the graphs described here.
import argparse
import math
import os
import sys
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

OPSET = 17


# ---------------------------------------------------------------- models ---

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class MLPWithLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = MLP()

    def forward(self, x, labels):
        return F.cross_entropy(self.mlp(x), labels)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.relu(self.bn2(self.conv2(x)))
        x = torch.flatten(self.gap(x), 1)
        return self.fc(x)


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_head, block_size, dropout):
        super().__init__()
        assert d_model % n_head == 0
        self.n_head = n_head
        self.head_dim = d_model // n_head
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        # Boolean mask, so it is not a floating-point initializer.
        mask = torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        hd = self.head_dim  # a Python int, so 1/sqrt(hd) is not traced
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_drop(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, d_model, n_head, block_size, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, block_size, dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model),
            nn.GELU(),  # exact (erf) form
            nn.Linear(4 * d_model, d_model),
            nn.Dropout(dropout),
        )

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=64, block_size=16, n_layer=2, n_head=2,
                 d_model=32, dropout=0.1, tied=False):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(block_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            [Block(d_model, n_head, block_size, dropout)
             for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        if tied:  # the LM head reads the token embedding (GPT-2's tying)
            self.head.weight = self.tok_emb.weight

    def forward(self, idx):
        B, T = idx.size()
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos).unsqueeze(0))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class MoE(nn.Module):
    """A mixture-of-experts feed-forward layer (GShard/Switch style): a
    linear router, softmax, top-k gating renormalised over the k choices,
    stacked expert weights [E, d, h] and [E, h, d], and per-sequence expert
    capacity ceil(k * T / E * capacity_factor): each sequence is a group, all
    first choices take their slots before the second choices (GShard's
    priority), and a token an expert has no slot for is dropped by that
    expert. Dispatch and combine are dense one-hot products, so the layer
    exports as MatMul, TopK, OneHot and CumSum. forward returns the output
    and the load-balancing loss E * sum_e f_e * P_e (f_e: the fraction of
    tokens whose first choice is e, P_e: the mean router probability)."""

    def __init__(self, d_model, n_expert=4, k=2, capacity_factor=1.25,
                 hidden=None):
        super().__init__()
        h = hidden or 2 * d_model
        self.n_expert, self.k, self.cf = n_expert, k, capacity_factor
        self.router = nn.Linear(d_model, n_expert, bias=False)
        self.w1 = nn.Parameter(torch.randn(n_expert, d_model, h) * 0.1)
        self.b1 = nn.Parameter(torch.zeros(n_expert, 1, h))
        self.w2 = nn.Parameter(torch.randn(n_expert, h, d_model) * 0.1)
        self.b2 = nn.Parameter(torch.zeros(n_expert, 1, d_model))

    def forward(self, x):
        B, T, D = x.shape
        E, k = self.n_expert, self.k
        cap = int(math.ceil(k * T / E * self.cf))
        probs = F.softmax(self.router(x), dim=-1)              # [B,T,E]
        gate, idx = probs.topk(k, dim=-1)                      # [B,T,k]
        gate = gate / gate.sum(-1, keepdim=True)
        mask = F.one_hot(idx, E).to(x.dtype)                   # [B,T,k,E]
        m = mask.transpose(1, 2).reshape(B, k * T, E)          # choice-major
        pos = (torch.cumsum(m, dim=1) - 1.0) * m               # slot in expert
        keep = m * (pos < cap).to(x.dtype)
        slot = F.one_hot(pos.clamp(0, cap - 1).long(), cap).to(x.dtype)
        dk = (keep.unsqueeze(-1) * slot).reshape(B, k, T, E * cap)
        dispatch = dk.sum(1)                                   # [B,T,E*cap]
        combine = (dk * gate.transpose(1, 2).unsqueeze(-1)).sum(1)
        xin = dispatch.transpose(1, 2) @ x                     # [B,E*cap,D]
        xin = xin.reshape(B, E, cap, D).transpose(0, 1).reshape(E, B * cap, D)
        hid = F.gelu(xin @ self.w1 + self.b1)                  # [E,B*cap,h]
        y = hid @ self.w2 + self.b2                            # [E,B*cap,D]
        y = y.reshape(E, B, cap, D).transpose(0, 1).reshape(B, E * cap, D)
        out = combine @ y                                      # [B,T,D]
        f = mask[:, :, 0, :].mean(dim=(0, 1))
        aux = E * (f * probs.mean(dim=(0, 1))).sum()
        return out, aux


class MoEBlock(nn.Module):
    def __init__(self, d_model, n_head, block_size, dropout, **moe):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, block_size, dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.moe = MoE(d_model, **moe)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        y, aux = self.moe(self.ln2(x))
        return x + y, aux


class MoEGPT(nn.Module):
    """The GPT decoder with every block's MLP a MoE layer (E=4, top-2); it
    computes its own loss: the mean token cross-entropy plus aux_coef times
    the blocks' load-balancing losses (train with --loss output)."""

    def __init__(self, vocab=64, block_size=16, n_layer=2, n_head=2,
                 d_model=32, dropout=0.0, aux_coef=0.01, **moe):
        super().__init__()
        self.aux_coef = aux_coef
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(block_size, d_model)
        self.blocks = nn.ModuleList(
            [MoEBlock(d_model, n_head, block_size, dropout, **moe)
             for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx, labels):
        B, T = idx.size()
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos).unsqueeze(0)
        aux = 0.0
        for block in self.blocks:
            x, a = block(x)
            aux = aux + a
        logits = self.head(self.ln_f(x))
        ce = F.cross_entropy(logits.reshape(B * T, -1), labels.reshape(B * T))
        return ce + self.aux_coef * aux


class TinyOps(nn.Module):
    """A grab bag of exporter patterns; every branch feeds an output."""

    def __init__(self):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1,
                                         output_padding=1)
        self.ln_w = nn.Parameter(torch.randn(8))
        self.ln_b = nn.Parameter(torch.randn(8))

    def forward(self, x):  # x: [2,3,8,8]
        # Reshapes: flatten(1) and view(2, -1).
        f = x.flatten(1)                                   # [2,192]
        v = x.view(2, -1)                                  # [2,192]
        flat = torch.cat([f, v.tanh()], dim=1)             # [2,384]

        # Layout ops, split/chunk, slicing.
        t = x.transpose(2, 3)                              # [2,3,8,8]
        p = x.permute(0, 2, 3, 1)                          # [2,8,8,3]
        a, b, c = torch.split(x, 1, dim=1)                 # 3x[2,1,8,8]
        h1, h2 = torch.chunk(x, 2, dim=3)                  # 2x[2,3,8,4]
        s = x[:, 1:3]                                      # [2,2,8,8]

        # Reductions.
        m = x.mean(dim=(2, 3), keepdim=True)               # [2,3,1,1]
        sm = x.sum(dim=1)                                  # [2,8,8]
        mx, _ = torch.max(x, dim=1)                        # [2,8,8]
        am = x.argmax(dim=1)                               # [2,8,8] int64

        # Elementwise.
        w = torch.where(x > 0, x, -x)
        cl = x.clamp(-0.5, 0.5)
        act = (torch.sigmoid(x) + torch.tanh(t) + F.leaky_relu(x, 0.1)
               + F.elu(x) + F.softplus(x) + torch.sqrt(x.abs() + 1)
               + torch.exp(cl) + torch.log(x.abs() + 1) + x.pow(2)
               + w)                                        # [2,3,8,8]
        act = act + p.permute(0, 3, 1, 2) + (a * b - c)
        act = act + torch.cat([h2, h1], dim=3) + m

        # Broadcast / repeat, pad, (un)squeeze.
        e = m.expand(2, 3, 8, 8)
        r = s.repeat(1, 2, 1, 1)[:, :3]                    # [2,3,8,8]
        padded = F.pad(x, (1, 1, 2, 0))                    # [2,3,10,10]
        u = sm.unsqueeze(1).squeeze(1)                     # [2,8,8]
        act = act + e + r + padded[:, :, 1:9, 1:9]
        act = act + (u + mx + am.to(x.dtype)).unsqueeze(1)

        # Pooling, transposed conv, log_softmax, layer_norm.
        ap = F.avg_pool2d(act, 2)                          # [2,3,4,4]
        dc = self.deconv(ap)                               # [2,4,8,8]
        lsm = F.log_softmax(dc, dim=1)                     # [2,4,8,8]
        ln = F.layer_norm(act, (8,), self.ln_w, self.ln_b)  # [2,3,8,8]

        out = lsm.sum(dim=1, keepdim=True) + ln            # [2,3,8,8]
        return out, flat


# ----------------------------------------------------------------- table ---
# name -> (builder, example-input builder, input names, output names)

def _x(*shape):
    return torch.randn(*shape)


MODELS = {
    "mlp": (MLP, lambda: (_x(8, 784),), ["x"], ["logits"]),
    "cnn": (CNN, lambda: (_x(4, 1, 28, 28),), ["x"], ["logits"]),
    "resnet18": (
        lambda: __import__("torchvision").models.resnet18(
            weights=None, num_classes=10),
        lambda: (_x(2, 3, 32, 32),), ["x"], ["logits"]),
    "gpt": (GPT, lambda: (torch.randint(0, 64, (2, 16), dtype=torch.int64),),
            ["idx"], ["logits"]),
    "mlp_ce": (MLPWithLoss,
               lambda: (_x(8, 784),
                        torch.randint(0, 10, (8,), dtype=torch.int64)),
               ["x", "labels"], ["loss"]),
    "moe": (MoEGPT,
            lambda: (torch.randint(0, 64, (2, 16), dtype=torch.int64),
                     torch.randint(0, 64, (2, 16), dtype=torch.int64)),
            ["idx", "labels"], ["loss"]),
    "tiny_ops": (TinyOps, lambda: (_x(2, 3, 8, 8),), ["x"], ["out", "flat"]),
}


def export(name, outdir):
    build, make_args, input_names, output_names = MODELS[name]
    torch.manual_seed(0)
    model = build()
    model.train()
    args = make_args()
    path = os.path.join(outdir, name + ".onnx")
    start = time.perf_counter()
    torch.onnx.export(model, args, path,
                      opset_version=OPSET,
                      do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING,
                      input_names=input_names,
                      output_names=output_names)
    return path, time.perf_counter() - start


def main(argv):
    parser = argparse.ArgumentParser(
        description="Export Kiln's ONNX test models (opset 17, training).")
    parser.add_argument("outdir")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show the exporter's warnings (hidden by "
                        "default; they are expected, see the top comment)")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help="models to export (default: all): "
                        + ", ".join(MODELS))
    opts = parser.parse_args(argv)
    unknown = [n for n in opts.names if n not in MODELS]
    if unknown:
        parser.error("unknown model(s): %s (known: %s)"
                     % (", ".join(unknown), ", ".join(MODELS)))
    if not opts.verbose:
        warnings.filterwarnings("ignore")
    os.makedirs(opts.outdir, exist_ok=True)
    for name in opts.names or list(MODELS):
        path, secs = export(name, opts.outdir)
        print("%-9s %s (%.2fs)" % (name, path, secs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
