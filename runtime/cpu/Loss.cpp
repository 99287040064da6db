//===- Loss.cpp - cross-entropy, NLL and MSE loss kernels -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// softmax_cross_entropy(logits, labels, weight?) and nll_loss(logp, labels,
// weight?) with the class on any axis (1 as in ONNX/PyTorch, or the last):
// the input is viewed as [outer, C, inner], a position is (o, k), its label
// labels[o * inner + k] (i32 or i64). loss = -logp[label] * weight[label];
// positions whose label is ignore_index contribute 0 and no weight. "mean"
// divides the sum by the sum of the weights of the non-ignored positions (the
// position count without weights), as ONNX and PyTorch do; with every
// position ignored that is 0 / 0 = NaN (PyTorch and ONNX's reference agree).
// A label outside [0, C) that is not ignore_index is an Error naming it.
//
// mse_loss(input, target): (x - y)^2, reduced.
//
// Data f32, f64, f16, bf16 (16-bit computed in float); weights any float
// type. Sums accumulate in double per fixed-size chunk and the chunks are
// added in order, so results do not depend on the thread count.
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "NormUtil.h"

#include <memory>
#include <vector>

namespace kiln::rt::cpu {
namespace {

using namespace norm;

/// Fixed chunking of [0, n) for deterministic parallel sums.
struct Chunks {
  int64_t n = 0, size = 1, count = 0;
  Chunks() = default;
  Chunks(int64_t n, int64_t size) : n(n), size(std::max<int64_t>(1, size)) {
    count = (n + this->size - 1) / this->size;
  }
};

template <typename S, typename L> class ClassLossKernel final : public Kernel {
public:
  ClassLossKernel(bool softmax, Reduction red, bool hasIgnore, int64_t ignore,
                  int64_t outer, int64_t c, int64_t inner, const TensorDesc *w)
      : softmax_(softmax), red_(red), hasIgnore_(hasIgnore), ignore_(ignore),
        outer_(outer), c_(c), inner_(inner), ktiles_((inner + kTile - 1) / kTile),
        hasWeight_(w != nullptr), wType_(w ? w->dtype : DType::F32),
        weight_(c, 1.0) {
    int64_t tiles = outer_ * ktiles_;
    int64_t perTile = std::max<int64_t>(1, c_ * std::min(kTile, inner_));
    chunks_ = Chunks(tiles, 16384 / perTile);
    lossPart_.resize(chunks_.count);
    weightPart_.resize(chunks_.count);
  }

  void run(ExecContext &, const void *const *in, void *const *out) override {
    const S *x = static_cast<const S *>(in[0]);
    const L *labels = static_cast<const L *>(in[1]);
    checkLabels(labels);
    if (hasWeight_)
      for (int64_t c = 0; c < c_; ++c)
        weight_[c] = loadAny(wType_, in[2], c);
    int64_t work = outer_ * c_ * inner_;
    if (red_ == Reduction::None) {
      S *y = static_cast<S *>(out[0]);
      parallelRange(outer_ * ktiles_, work, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
          tile(x, labels, t, [&](int64_t pos, double loss, double) {
            st(y, pos, (Acc<S>)loss);
          });
      });
      return;
    }
    parallelRange(chunks_.count, work, [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        double ls = 0, ws = 0;
        int64_t t1 = std::min(chunks_.n, (ch + 1) * chunks_.size);
        for (int64_t t = ch * chunks_.size; t < t1; ++t)
          tile(x, labels, t, [&](int64_t, double loss, double w) {
            ls += loss;
            ws += w;
          });
        lossPart_[ch] = ls;
        weightPart_[ch] = ws;
      }
    });
    double ls = 0, ws = 0;
    for (int64_t ch = 0; ch < chunks_.count; ++ch) {
      ls += lossPart_[ch];
      ws += weightPart_[ch];
    }
    st(static_cast<S *>(out[0]), 0,
       (Acc<S>)(red_ == Reduction::Mean ? ls / ws : ls));
  }

private:
  /// Serially, before any parallel work: every label in [0, C) or ignored.
  void checkLabels(const L *labels) const {
    int64_t n = outer_ * inner_;
    for (int64_t p = 0; p < n; ++p) {
      int64_t l = (int64_t)labels[p];
      if ((l < 0 || l >= c_) && !(hasIgnore_ && l == ignore_))
        throw Error("kernel '" + std::string(softmax_ ? "softmax_cross_entropy"
                                                      : "nll_loss") +
                    "': label " + std::to_string(l) + " at position " +
                    std::to_string(p) + " is out of range for " +
                    std::to_string(c_) + " classes");
    }
  }

  /// Calls emit(position, loss, weight) for each position of tile `t` (a
  /// row when inner == 1, else up to kTile adjacent inner positions).
  template <typename F>
  void tile(const S *x, const L *labels, int64_t t, F &&emit) const {
    using A = Acc<S>;
    int64_t o = t / ktiles_, k0 = (t % ktiles_) * kTile;
    int64_t kw = std::min(kTile, inner_ - k0);
    const S *base = x + o * c_ * inner_ + k0;
    A m[kTile], lse[kTile];
    if (softmax_) {
      if (inner_ == 1)
        rowLse(base, c_, m[0], lse[0]);
      else
        tileLse(base, c_, inner_, kw, m, lse);
    }
    for (int64_t k = 0; k < kw; ++k) {
      int64_t pos = o * inner_ + k0 + k;
      int64_t l = (int64_t)labels[pos];
      if (hasIgnore_ && l == ignore_) {
        emit(pos, 0.0, 0.0);
        continue;
      }
      A v = ld(base, l * inner_ + k);
      double logp = softmax_ ? (double)((v - m[k]) - lse[k]) : (double)v;
      double w = weight_[l];
      emit(pos, -logp * w, w);
    }
  }

  bool softmax_;
  Reduction red_;
  bool hasIgnore_;
  int64_t ignore_, outer_, c_, inner_, ktiles_;
  bool hasWeight_;
  DType wType_;
  std::vector<double> weight_;
  Chunks chunks_;
  std::vector<double> lossPart_, weightPart_;
};

std::unique_ptr<Kernel> makeClassLoss(const KernelSpec &spec, bool softmax) {
  // The optional weight is the last operand: absent, the step has 2 inputs
  // (or 3 with -1).
  if (spec.inputs.size() == 2)
    expectArity(spec, 2, 1);
  else
    expectArity(spec, 3, 1);
  const TensorDesc *x = spec.inputs[0], *labels = spec.inputs[1],
                   *w = spec.inputs.size() > 2 ? spec.inputs[2] : nullptr;
  expectFloat(spec, x, "logits");
  if (!labels)
    throw Error("kernel '" + spec.kernel + "': missing labels");
  if (labels->dtype != DType::I64 && labels->dtype != DType::I32)
    unsupportedType(spec, labels->dtype);
  int64_t rank = x->rank();
  if (rank < 1)
    throw Error("kernel '" + spec.kernel + "' needs logits of rank >= 1");
  int64_t axis =
      normAxis(spec, "class_axis", spec.attrs.getInt("class_axis", 1), rank);
  Reduction red = parseReduction(spec);
  bool hasIgnore = spec.attrs.has("ignore_index");
  int64_t ignore = hasIgnore ? spec.attrs.getInt("ignore_index") : 0;
  std::vector<int64_t> labelShape = x->shape;
  labelShape.erase(labelShape.begin() + axis);
  if (labels->shape != labelShape)
    throw Error("kernel '" + spec.kernel + "': labels must have shape " +
                TensorDesc{labels->dtype, labelShape}.str() + " for logits " +
                x->str() + ", got " + labels->str());
  int64_t c = x->shape[axis];
  if (w) {
    expectFloat(spec, w, "weight");
    if (w->shape != std::vector<int64_t>{c})
      throw Error("kernel '" + spec.kernel + "': weight must be [" +
                  std::to_string(c) + "], got " + w->str());
  }
  expectDesc(spec, spec.outputs[0],
             TensorDesc{x->dtype, red == Reduction::None ? labelShape
                                                         : std::vector<int64_t>{}},
             "result");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= x->shape[i];
  for (int64_t i = axis + 1; i < rank; ++i)
    inner *= x->shape[i];
  return dispatchFloat(spec, x->dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using S = decltype(tag);
    if (labels->dtype == DType::I64)
      return std::make_unique<ClassLossKernel<S, int64_t>>(
          softmax, red, hasIgnore, ignore, outer, c, inner, w);
    return std::make_unique<ClassLossKernel<S, int32_t>>(
        softmax, red, hasIgnore, ignore, outer, c, inner, w);
  });
}

template <typename S> class MseLossKernel final : public Kernel {
public:
  MseLossKernel(Reduction red, int64_t n)
      : red_(red), chunks_(n, 16384), part_(chunks_.count) {}

  void run(ExecContext &, const void *const *in, void *const *out) override {
    const S *x = static_cast<const S *>(in[0]);
    const S *t = static_cast<const S *>(in[1]);
    int64_t n = chunks_.n;
    if (red_ == Reduction::None) {
      S *y = static_cast<S *>(out[0]);
      parallelRange(n, n, [&](int64_t b, int64_t e) {
#pragma omp simd
        for (int64_t i = b; i < e; ++i) {
          Acc<S> d = ld(x, i) - ld(t, i);
          st(y, i, d * d);
        }
      });
      return;
    }
    parallelRange(chunks_.count, n, [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        int64_t b = ch * chunks_.size, m = std::min(n, b + chunks_.size) - b;
        const S *xb = x + b, *tb = t + b;
        double s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < m; ++i) {
          double d = (double)ld(xb, i) - (double)ld(tb, i);
          s += d * d;
        }
        part_[ch] = s;
      }
    });
    double s = 0;
    for (int64_t ch = 0; ch < chunks_.count; ++ch)
      s += part_[ch];
    st(static_cast<S *>(out[0]), 0,
       (Acc<S>)(red_ == Reduction::Mean ? s / (double)n : s));
  }

private:
  Reduction red_;
  Chunks chunks_;
  std::vector<double> part_;
};

std::unique_ptr<Kernel> makeMseLoss(const KernelSpec &spec) {
  expectArity(spec, 2, 1);
  const TensorDesc *x = spec.inputs[0];
  expectFloat(spec, x, "input");
  expectDesc(spec, spec.inputs[1], *x, "target");
  Reduction red = parseReduction(spec);
  expectDesc(spec, spec.outputs[0],
             red == Reduction::None ? *x : TensorDesc{x->dtype, {}}, "result");
  return dispatchFloat(spec, x->dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using S = decltype(tag);
    return std::make_unique<MseLossKernel<S>>(red, x->numel());
  });
}

} // namespace

void registerLossKernels(KernelRegistry &r) {
  r.add("softmax_cross_entropy",
        [](const KernelSpec &s) { return makeClassLoss(s, true); });
  r.add("nll_loss", [](const KernelSpec &s) { return makeClassLoss(s, false); });
  r.add("mse_loss", makeMseLoss);
}

} // namespace kiln::rt::cpu
