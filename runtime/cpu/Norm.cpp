//===- Norm.cpp - batch and layer normalisation kernels ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// batch_norm (inference: given statistics), batch_norm_train (batch
// statistics, updated running statistics) and layer_norm. The data tensor is
// f32, f64, f16 or bf16 (16-bit computed in float); the small per-channel
// parameters and statistics may be any float type. Statistics accumulate in
// double. batch_norm views the input as [N, C, S] and applies y = x * a[c] +
// b[c] with a, b folded per run; layer_norm normalises rows of the trailing
// dimensions. All loops are contiguous; work is split with OpenMP.
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "NormUtil.h"

#include <memory>
#include <vector>

namespace kiln::rt::cpu {
namespace {

using namespace norm;

/// [N, C, S] geometry of a batch-norm input.
struct NcsShape {
  int64_t n = 1, c = 1, s = 1;
};

/// Checks the input (rank >= 2, float) and the per-channel parameters
/// `in[1..4]` (float, [C]).
NcsShape checkBatchNorm(const KernelSpec &spec) {
  const TensorDesc *x = spec.inputs[0];
  expectFloat(spec, x, "input");
  if (x->rank() < 2)
    throw Error("kernel '" + spec.kernel + "' needs an input of rank >= 2, got " +
                x->str());
  NcsShape g;
  g.n = x->shape[0];
  g.c = x->shape[1];
  for (int64_t i = 2; i < x->rank(); ++i)
    g.s *= x->shape[i];
  static const char *const names[] = {"scale", "bias", "mean", "var"};
  for (int i = 1; i <= 4; ++i) {
    const TensorDesc *p = spec.inputs[i];
    expectFloat(spec, p, names[i - 1]);
    if (p->shape != std::vector<int64_t>{g.c})
      throw Error("kernel '" + spec.kernel + "': " + names[i - 1] + " must be [" +
                  std::to_string(g.c) + "], got " + p->str());
  }
  expectDesc(spec, spec.outputs[0], *x, "result");
  return g;
}

/// y = x * a[c] + b[c] over [N, C, S], split over the flat element range.
template <typename S>
void applyAffine(const NcsShape &g, const S *x, S *y, const Acc<S> *a,
                 const Acc<S> *b) {
  int64_t total = g.n * g.c * g.s;
  parallelRange(total, total, [&](int64_t i0, int64_t i1) {
    int64_t p = i0 / g.s, s0 = i0 % g.s;
    for (int64_t i = i0; i < i1; ++p, s0 = 0) {
      int64_t s1 = std::min(g.s, s0 + (i1 - i));
      int64_t c = p % g.c;
      Acc<S> ac = a[c], bc = b[c];
      const S *xp = x + p * g.s;
      S *yp = y + p * g.s;
#pragma omp simd
      for (int64_t s = s0; s < s1; ++s)
        st(yp, s, ld(xp, s) * ac + bc);
      i += s1 - s0;
    }
  });
}

template <typename S> class BatchNormKernel final : public Kernel {
public:
  BatchNormKernel(const KernelSpec &spec, NcsShape g, double eps)
      : g_(g), eps_(eps), a_(g.c), b_(g.c) {
    for (int i = 0; i < 4; ++i)
      pt_[i] = spec.inputs[i + 1]->dtype;
  }

  void run(ExecContext &, const void *const *in, void *const *out) override {
    for (int64_t c = 0; c < g_.c; ++c) {
      double a = loadAny(pt_[0], in[1], c) /
                 std::sqrt(loadAny(pt_[3], in[4], c) + eps_);
      a_[c] = (Acc<S>)a;
      b_[c] = (Acc<S>)(loadAny(pt_[1], in[2], c) - loadAny(pt_[2], in[3], c) * a);
    }
    applyAffine(g_, static_cast<const S *>(in[0]), static_cast<S *>(out[0]),
                a_.data(), b_.data());
  }

private:
  NcsShape g_;
  double eps_;
  DType pt_[4];
  std::vector<Acc<S>> a_, b_;
};

template <typename S> class BatchNormTrainKernel final : public Kernel {
public:
  BatchNormTrainKernel(const KernelSpec &spec, NcsShape g, double eps,
                       double momentum, bool unbiased)
      : g_(g), eps_(eps), momentum_(momentum), unbiased_(unbiased), mean_(g.c), m2_(g.c), a_(g.c),
        b_(g.c) {
    for (int i = 0; i < 4; ++i)
      pt_[i] = spec.inputs[i + 1]->dtype;
    ot_[0] = spec.outputs[1]->dtype;
    ot_[1] = spec.outputs[2]->dtype;
  }

  void run(ExecContext &, const void *const *in, void *const *out) override {
    const S *x = static_cast<const S *>(in[0]);
    stats(x);
    double count = (double)(g_.n * g_.s);
    for (int64_t c = 0; c < g_.c; ++c) {
      double mean = mean_[c], var = m2_[c] / count; // biased
      double a = loadAny(pt_[0], in[1], c) / std::sqrt(var + eps_);
      a_[c] = (Acc<S>)a;
      b_[c] = (Acc<S>)(loadAny(pt_[1], in[2], c) - mean * a);
      // ONNX's reference (and its node test data) updates the running
      // variance with the biased batch variance; PyTorch with the unbiased
      // one (unbiased_running_var).
      double rvar = unbiased_ && count > 1 ? m2_[c] / (count - 1) : var;
      double rm = loadAny(pt_[2], in[3], c), rv = loadAny(pt_[3], in[4], c);
      storeAny(ot_[0], out[1], c, rm * momentum_ + mean * (1 - momentum_));
      storeAny(ot_[1], out[2], c, rv * momentum_ + rvar * (1 - momentum_));
    }
    applyAffine(g_, x, static_cast<S *>(out[0]), a_.data(), b_.data());
  }

private:
  /// mean_[c] and m2_[c] = sum((x - mean)^2), two passes in double. Threads
  /// split the channels, so the result does not depend on the thread count.
  void stats(const S *x) {
    int64_t total = g_.n * g_.c * g_.s;
    double count = (double)(g_.n * g_.s);
    int64_t cs = g_.c * g_.s;
    parallelRange(g_.c, total, [&](int64_t c0, int64_t c1) {
      if (g_.s == 1) { // [N, C]: vectorise across the channels of a row
        for (int64_t c = c0; c < c1; ++c)
          mean_[c] = m2_[c] = 0;
        for (int64_t n = 0; n < g_.n; ++n) {
          const S *row = x + n * g_.c;
#pragma omp simd
          for (int64_t c = c0; c < c1; ++c)
            mean_[c] += (double)ld(row, c);
        }
        for (int64_t c = c0; c < c1; ++c)
          mean_[c] /= count;
        for (int64_t n = 0; n < g_.n; ++n) {
          const S *row = x + n * g_.c;
#pragma omp simd
          for (int64_t c = c0; c < c1; ++c) {
            double d = (double)ld(row, c) - mean_[c];
            m2_[c] += d * d;
          }
        }
        return;
      }
      for (int64_t c = c0; c < c1; ++c) {
        double sum = 0;
        for (int64_t n = 0; n < g_.n; ++n) {
          const S *p = x + n * cs + c * g_.s;
#pragma omp simd reduction(+ : sum)
          for (int64_t s = 0; s < g_.s; ++s)
            sum += (double)ld(p, s);
        }
        double mean = sum / count, m2 = 0;
        for (int64_t n = 0; n < g_.n; ++n) {
          const S *p = x + n * cs + c * g_.s;
#pragma omp simd reduction(+ : m2)
          for (int64_t s = 0; s < g_.s; ++s) {
            double d = (double)ld(p, s) - mean;
            m2 += d * d;
          }
        }
        mean_[c] = mean;
        m2_[c] = m2;
      }
    });
  }

  NcsShape g_;
  double eps_, momentum_;
  bool unbiased_;
  DType pt_[4], ot_[2];
  std::vector<double> mean_, m2_;
  std::vector<Acc<S>> a_, b_;
};

std::unique_ptr<Kernel> makeBatchNorm(const KernelSpec &spec) {
  expectArity(spec, 5, 1);
  NcsShape g = checkBatchNorm(spec);
  double eps = spec.attrs.getFloat("epsilon", 1e-5);
  if (!(eps >= 0))
    throw Error("kernel 'batch_norm': epsilon must be >= 0");
  return dispatchFloat(spec, spec.inputs[0]->dtype,
                       [&](auto tag) -> std::unique_ptr<Kernel> {
                         using S = decltype(tag);
                         return std::make_unique<BatchNormKernel<S>>(spec, g, eps);
                       });
}

std::unique_ptr<Kernel> makeBatchNormTrain(const KernelSpec &spec) {
  expectArity(spec, 5, 3);
  NcsShape g = checkBatchNorm(spec);
  expectDesc(spec, spec.outputs[1], *spec.inputs[3], "new_running_mean");
  expectDesc(spec, spec.outputs[2], *spec.inputs[4], "new_running_var");
  double eps = spec.attrs.getFloat("epsilon", 1e-5);
  double momentum = spec.attrs.getFloat("momentum", 0.9);
  if (!(eps >= 0))
    throw Error("kernel 'batch_norm_train': epsilon must be >= 0");
  if (!std::isfinite(momentum))
    throw Error("kernel 'batch_norm_train': momentum must be finite");
  return dispatchFloat(spec, spec.inputs[0]->dtype,
                       [&](auto tag) -> std::unique_ptr<Kernel> {
                         using S = decltype(tag);
                         return std::make_unique<BatchNormTrainKernel<S>>(
                             spec, g, eps, momentum,
                             spec.attrs.getBool("unbiased_running_var", false));
                       });
}

template <typename S> class LayerNormKernel final : public Kernel {
public:
  LayerNormKernel(int64_t outer, int64_t n, double eps, DType statType)
      : outer_(outer), n_(n), eps_(eps), statType_(statType) {}

  void run(ExecContext &, const void *const *in, void *const *out) override {
    const S *x = static_cast<const S *>(in[0]);
    const S *g = static_cast<const S *>(in[1]);
    const S *b = static_cast<const S *>(in[2]);
    S *y = static_cast<S *>(out[0]);
    parallelRange(outer_, outer_ * n_, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        const S *xr = x + o * n_;
        S *yr = y + o * n_;
        double sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < n_; ++j)
          sum += (double)ld(xr, j);
        double mean = sum / (double)n_, m2 = 0;
#pragma omp simd reduction(+ : m2)
        for (int64_t j = 0; j < n_; ++j) {
          double d = (double)ld(xr, j) - mean;
          m2 += d * d;
        }
        double inv = 1.0 / std::sqrt(m2 / (double)n_ + eps_);
        Acc<S> am = (Acc<S>)mean, ai = (Acc<S>)inv;
#pragma omp simd
        for (int64_t j = 0; j < n_; ++j)
          st(yr, j, (ld(xr, j) - am) * ai * ld(g, j) + ld(b, j));
        storeAny(statType_, out[1], o, mean);
        storeAny(statType_, out[2], o, inv);
      }
    });
  }

private:
  int64_t outer_, n_;
  double eps_;
  DType statType_;
};

std::unique_ptr<Kernel> makeLayerNorm(const KernelSpec &spec) {
  expectArity(spec, 3, 3);
  const TensorDesc *x = spec.inputs[0];
  expectFloat(spec, x, "input");
  int64_t rank = x->rank();
  if (rank == 0)
    throw Error("kernel 'layer_norm' needs an input of rank >= 1");
  int64_t axis = normAxis(spec, "axis", spec.attrs.getInt("axis", -1), rank);
  double eps = spec.attrs.getFloat("epsilon", 1e-5);
  if (!(eps >= 0))
    throw Error("kernel 'layer_norm': epsilon must be >= 0");
  TensorDesc norm{x->dtype, std::vector<int64_t>(x->shape.begin() + axis,
                                                 x->shape.end())};
  expectDesc(spec, spec.inputs[1], norm, "scale");
  expectDesc(spec, spec.inputs[2], norm, "bias");
  expectDesc(spec, spec.outputs[0], *x, "result");
  const TensorDesc *mean = spec.outputs[1];
  expectFloat(spec, mean, "mean");
  TensorDesc stat{mean->dtype, x->shape};
  for (int64_t i = axis; i < rank; ++i)
    stat.shape[i] = 1;
  expectDesc(spec, mean, stat, "mean");
  expectDesc(spec, spec.outputs[2], stat, "inv_std_dev");
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= x->shape[i];
  int64_t n = norm.numel();
  return dispatchFloat(spec, x->dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using S = decltype(tag);
    return std::make_unique<LayerNormKernel<S>>(outer, n, eps, stat.dtype);
  });
}

} // namespace

void registerNormKernels(KernelRegistry &r) {
  r.add("batch_norm", makeBatchNorm);
  r.add("batch_norm_train", makeBatchNormTrain);
  r.add("layer_norm", makeLayerNorm);
}

} // namespace kiln::rt::cpu
