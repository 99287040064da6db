//===- Softmax.cpp - softmax and log_softmax kernels ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// softmax / log_softmax along one axis, stably (the maximum is subtracted
// first). The input is viewed as [outer, n, inner] with n the axis. When the
// axis is innermost each row is contiguous and the loops vectorise along it;
// otherwise tiles of kTile adjacent inner positions are processed together,
// vectorised across the tile. f32, f64, f16 and bf16 (16-bit computed in
// float). Work is split over rows or tiles with OpenMP.
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "NormUtil.h"

#include <memory>
#include <type_traits>

namespace kiln::rt::cpu {
namespace {

using namespace norm;

template <typename S> class SoftmaxKernel final : public Kernel {
public:
  SoftmaxKernel(int64_t outer, int64_t n, int64_t inner, bool log)
      : outer_(outer), n_(n), inner_(inner), log_(log),
        ktiles_((inner + kTile - 1) / kTile) {}

  void run(ExecContext &, const void *const *in, void *const *out) override {
    const S *x = static_cast<const S *>(in[0]);
    S *y = static_cast<S *>(out[0]);
    int64_t work = outer_ * n_ * inner_;
    if (work == 0)
      return;
    if (inner_ == 1) {
      parallelRange(outer_, work, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o)
          row(x + o * n_, y + o * n_);
      });
      return;
    }
    parallelRange(outer_ * ktiles_, work, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t o = t / ktiles_, k0 = (t % ktiles_) * kTile;
        int64_t off = o * n_ * inner_ + k0;
        tile(x + off, y + off, std::min(kTile, inner_ - k0));
      }
    });
  }

private:
  // Cloned for AVX-512 (KILN_DISPATCH): its exp vectorizes only there.
  KILN_DISPATCH void row(const S *x, S *y) const {
    using A = Acc<S>;
    A m, lse;
    if constexpr (std::is_same_v<S, A>) {
      if (!log_) { // exp once, into y, then scale
        A mx = -std::numeric_limits<A>::infinity();
#pragma omp simd reduction(max : mx)
        for (int64_t j = 0; j < n_; ++j)
          mx = x[j] > mx ? x[j] : mx;
        A s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < n_; ++j) {
          A e = expAcc(x[j] - mx);
          y[j] = e;
          s += e;
        }
        A inv = A(1) / s;
#pragma omp simd
        for (int64_t j = 0; j < n_; ++j)
          y[j] *= inv;
        return;
      }
    }
    rowLse(x, n_, m, lse);
    if (log_) {
      for (int64_t j = 0; j < n_; ++j)
        st(y, j, (ld(x, j) - m) - lse);
    } else {
      A inv = A(1) / std::exp(lse);
      for (int64_t j = 0; j < n_; ++j)
        st(y, j, expAcc(ld(x, j) - m) * inv);
    }
  }

  KILN_DISPATCH void tile(const S *x, S *y, int64_t kw) const {
    using A = Acc<S>;
    A m[kTile], lse[kTile];
    tileLse(x, n_, inner_, kw, m, lse);
    if (log_) {
      for (int64_t j = 0; j < n_; ++j) {
        const S *xr = x + j * inner_;
        S *yr = y + j * inner_;
#pragma omp simd
        for (int64_t k = 0; k < kw; ++k)
          st(yr, k, (ld(xr, k) - m[k]) - lse[k]);
      }
      return;
    }
    for (int64_t k = 0; k < kw; ++k)
      lse[k] = A(1) / std::exp(lse[k]);
    for (int64_t j = 0; j < n_; ++j) {
      const S *xr = x + j * inner_;
      S *yr = y + j * inner_;
#pragma omp simd
      for (int64_t k = 0; k < kw; ++k)
        st(yr, k, expAcc(ld(xr, k) - m[k]) * lse[k]);
    }
  }

  int64_t outer_, n_, inner_;
  bool log_;
  int64_t ktiles_;
};

std::unique_ptr<Kernel> makeSoftmax(const KernelSpec &spec, bool log) {
  expectArity(spec, 1, 1);
  const TensorDesc *x = spec.inputs[0];
  expectFloat(spec, x, "input");
  expectDesc(spec, spec.outputs[0], *x, "result");
  int64_t rank = x->rank();
  if (rank == 0)
    throw Error("kernel '" + spec.kernel + "' needs an input of rank >= 1");
  int64_t axis =
      normAxis(spec, "axis", spec.attrs.getInt("axis", rank - 1), rank);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= x->shape[i];
  for (int64_t i = axis + 1; i < rank; ++i)
    inner *= x->shape[i];
  int64_t n = x->shape[axis];
  return dispatchFloat(spec, x->dtype, [&](auto tag) -> std::unique_ptr<Kernel> {
    using S = decltype(tag);
    return std::make_unique<SoftmaxKernel<S>>(outer, n, inner, log);
  });
}

} // namespace

void registerSoftmaxKernels(KernelRegistry &r) {
  r.add("softmax", [](const KernelSpec &s) { return makeSoftmax(s, false); });
  r.add("log_softmax", [](const KernelSpec &s) { return makeSoftmax(s, true); });
}

} // namespace kiln::rt::cpu
