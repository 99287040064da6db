//===- GradUtil.h - shared helpers of the gradient kernels ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// What the gradient and optimizer kernel files (ActivationGrad.cpp,
// SoftmaxGrad.cpp, NormGrad.cpp, ConvGrad.cpp, PoolGrad.cpp, ShapeGrad.cpp,
// LossGrad.cpp, Optimizer.cpp) share: operand checks that throw a one-line
// kiln::rt::Error naming the kernel, a kernel from a lambda, the f32/f64
// dispatch, and the oneDNN-or-direct-loop kernel of the conv and pool
// gradients. Internal to runtime/cpu.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CPU_GRADUTIL_H
#define KILN_RUNTIME_CPU_GRADUTIL_H

#include "Loops.h"
#include "kiln/runtime/Kernel.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt::cpu::grad {

using loops::parallelRange;


inline int64_t prod(const std::vector<int64_t> &s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < s.size(); ++i)
    p *= s[i];
  return p;
}

[[noreturn]] inline void fail(const KernelSpec &spec, const std::string &msg) {
  throw Error("kernel '" + spec.kernel + "': " + msg);
}

inline void need(const KernelSpec &spec, const TensorDesc *d, const char *what) {
  if (!d)
    fail(spec, std::string(what) + " is required");
  if (d->dtype != DType::F32 && d->dtype != DType::F64)
    unsupportedType(spec, d->dtype);
}

inline void sameDesc(const KernelSpec &spec, const TensorDesc *a, const TensorDesc *b,
              const char *what) {
  if (!a || !b || *a != *b)
    fail(spec, std::string(what) + " must be " + (b ? b->str() : "?") + ", got " +
                   (a ? a->str() : "nothing"));
}

inline int64_t axisAttr(const KernelSpec &spec, const char *name, int64_t rank) {
  int64_t a = spec.attrs.getInt(name);
  if (a < 0)
    a += rank;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    fail(spec, std::string(name) + " out of range");
  return a;
}

/// A float attribute stored as f32 in the IR, back to the decimal the user
/// wrote (0.899999976 -> 0.9), so scalars match torch's Python floats.
inline double userFloat(double f32value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", f32value);
  return std::strtod(buf, nullptr);
}

/// A kernel from a lambda over typed pointers.
template <typename F> class FnKernel final : public Kernel {
public:
  explicit FnKernel(F f) : f_(std::move(f)) {}
  void run(ExecContext &ctx, const void *const *in, void *const *out) override {
    f_(ctx, in, out);
  }

private:
  F f_;
};
template <typename F> std::unique_ptr<Kernel> make(F f) {
  return std::make_unique<FnKernel<F>>(std::move(f));
}

/// Calls f(T{}) with T = float or double per `t`.
template <typename F> auto byFloat(const KernelSpec &spec, DType t, F &&f) {
  if (t == DType::F32)
    return f(float{});
  if (t == DType::F64)
    return f(double{});
  unsupportedType(spec, t);
}

inline int64_t loadIndex(DType t, const void *p, int64_t i) {
  return t == DType::I64 ? static_cast<const int64_t *>(p)[i]
                         : static_cast<const int32_t *>(p)[i];
}

/// A gradient kernel that runs on a oneDNN primitive `D` where one was
/// built (f32, a geometry oneDNN computes the same way), else on `direct`,
/// the double-accumulating loop.
template <typename D> class DnnlOrDirectKernel final : public Kernel {
public:
  DnnlOrDirectKernel(std::unique_ptr<D> dnnl, std::unique_ptr<Kernel> direct)
      : dnnl_(std::move(dnnl)), direct_(std::move(direct)) {}
  void run(ExecContext &ctx, const void *const *in, void *const *out) override {
    if (dnnl_)
      dnnl_->run(in, out);
    else
      direct_->run(ctx, in, out);
  }

private:
  std::unique_ptr<D> dnnl_;
  std::unique_ptr<Kernel> direct_;
};

template <typename D>
std::unique_ptr<Kernel> dnnlOrDirect(std::unique_ptr<D> dnnl,
                                     std::unique_ptr<Kernel> direct) {
  return std::make_unique<DnnlOrDirectKernel<D>>(std::move(dnnl), std::move(direct));
}

} // namespace kiln::rt::cpu::grad

namespace kiln::rt::cpu {

// The registration function of each gradient kernel file; Backward.cpp's
// registerBackwardKernels (Kernels.h) calls them all.
void registerActivationGradKernels(KernelRegistry &r); // ActivationGrad.cpp
void registerSoftmaxGradKernels(KernelRegistry &r);    // SoftmaxGrad.cpp
void registerNormGradKernels(KernelRegistry &r);       // NormGrad.cpp
void registerConvGradKernels(KernelRegistry &r);       // ConvGrad.cpp
void registerPoolGradKernels(KernelRegistry &r);       // PoolGrad.cpp
void registerShapeGradKernels(KernelRegistry &r);      // ShapeGrad.cpp
void registerLossGradKernels(KernelRegistry &r);       // LossGrad.cpp
void registerOptimizerKernels(KernelRegistry &r);      // Optimizer.cpp
void registerPruneKernels(KernelRegistry &r);          // Prune.cpp
void registerQuantKernels(KernelRegistry &r);          // Quant.cpp

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_GRADUTIL_H
