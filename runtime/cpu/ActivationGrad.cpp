//===- ActivationGrad.cpp - pointwise activation gradients ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// relu_grad, gelu_grad (exact and tanh) and dropout_grad: dx from dy and the
// forward input (or dropout's mask), one parallel pass. f32 and f64, and
// f16/bf16 computed in float per element (mixed precision's backward).
//===----------------------------------------------------------------------===//
#include "GradUtil.h"
#include "Kernels.h"

#include <cmath>
#include <cstdint>

namespace kiln::rt::cpu {
namespace {

using namespace grad;

//===----------------------------------------------------------------------===//
// Pointwise
//===----------------------------------------------------------------------===//

/// A 16-bit pointwise gradient computed in float per element (mixed
/// precision's relu_grad and gelu_grad), without staging.
template <typename S, typename G>
std::unique_ptr<Kernel> pointwise2Half(int64_t n, G g) {
  return make([n, g](ExecContext &, const void *const *in, void *const *out) {
    const S *dy = static_cast<const S *>(in[0]), *x = static_cast<const S *>(in[1]);
    S *dx = static_cast<S *>(out[0]);
    parallelRange(n, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        loops::store(dx, i, g(loops::load(dy, i), loops::load(x, i)));
    });
  });
}

template <typename G>
std::unique_ptr<Kernel> pointwise2(const KernelSpec &spec, G g) {
  expectArity(spec, 2, 1);
  if (spec.inputs[0] && is16BitFloat(spec.inputs[0]->dtype)) {
    sameDesc(spec, spec.inputs[1], spec.inputs[0], "x");
    sameDesc(spec, spec.outputs[0], spec.inputs[0], "the result");
    int64_t n = spec.inputs[0]->numel();
    if (spec.inputs[0]->dtype == DType::BF16)
      return pointwise2Half<loops::BF16>(n, g);
    return pointwise2Half<loops::F16>(n, g);
  }
  need(spec, spec.inputs[0], "dy");
  sameDesc(spec, spec.inputs[1], spec.inputs[0], "x");
  sameDesc(spec, spec.outputs[0], spec.inputs[0], "the result");
  int64_t n = spec.inputs[0]->numel();
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([n, g](ExecContext &, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]), *x = static_cast<const T *>(in[1]);
      T *dx = static_cast<T *>(out[0]);
      parallelRange(n, n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          dx[i] = g(dy[i], x[i]);
      });
    });
  });
}

std::unique_ptr<Kernel> makeReluGrad(const KernelSpec &spec) {
  return pointwise2(spec, [](auto dy, auto x) { return x > 0 ? dy : decltype(dy)(0); });
}

std::unique_ptr<Kernel> makeGeluGrad(const KernelSpec &spec) {
  std::string approx = spec.attrs.getString("approximate", "none");
  if (approx == "tanh")
    return pointwise2(spec, [](auto dy, auto x) {
      using T = decltype(dy);
      const T c = T(0.7978845608028654), a = T(0.044715);
      T u = c * (x + a * x * x * x), t = std::tanh(u);
      T d = T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * c * (T(1) + T(3) * a * x * x);
      return dy * d;
    });
  if (approx != "none")
    fail(spec, "approximate must be none or tanh");
  return pointwise2(spec, [](auto dy, auto x) {
    using T = decltype(dy);
    T cdf = T(0.5) * (T(1) + std::erf(x * T(0.7071067811865476)));
    T pdf = std::exp(T(-0.5) * x * x) * T(0.3989422804014327);
    return dy * (cdf + x * pdf);
  });
}

/// dropout_grad on f16/bf16: dy * scale in float, rounded once (what f32
/// staging computes, without the staging).
template <typename S>
std::unique_ptr<Kernel> dropoutGradHalf(int64_t n, float scale) {
  return make([n, scale](ExecContext &, const void *const *in, void *const *out) {
    const S *dy = static_cast<const S *>(in[0]);
    const uint8_t *m = static_cast<const uint8_t *>(in[1]);
    S *dx = static_cast<S *>(out[0]);
    parallelRange(n, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        loops::store(dx, i, m[i] ? loops::load(dy, i) * scale : 0.0f);
    });
  });
}

std::unique_ptr<Kernel> makeDropoutGrad(const KernelSpec &spec) {
  expectArity(spec, 2, 1);
  bool half = spec.inputs[0] && is16BitFloat(spec.inputs[0]->dtype);
  if (!half)
    need(spec, spec.inputs[0], "dy");
  if (!spec.inputs[1] || spec.inputs[1]->dtype != DType::Bool ||
      spec.inputs[1]->shape != spec.inputs[0]->shape)
    fail(spec, "mask must be i1 of dy's shape");
  sameDesc(spec, spec.outputs[0], spec.inputs[0], "the result");
  double ratio = spec.attrs.getFloat("ratio");
  int64_t n = spec.inputs[0]->numel();
  if (half) {
    float scale = ratio < 1 ? 1.0f / (1.0f - float(ratio)) : 0.0f;
    if (spec.inputs[0]->dtype == DType::BF16)
      return dropoutGradHalf<loops::BF16>(n, scale);
    return dropoutGradHalf<loops::F16>(n, scale);
  }
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    T scale = ratio < 1 ? T(1) / (T(1) - T(ratio)) : T(0);
    return make([n, scale](ExecContext &, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]);
      const uint8_t *m = static_cast<const uint8_t *>(in[1]);
      T *dx = static_cast<T *>(out[0]);
      parallelRange(n, n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          dx[i] = m[i] ? dy[i] * scale : T(0);
      });
    });
  });
}

} // namespace

void registerActivationGradKernels(KernelRegistry &r) {
  r.add("relu_grad", makeReluGrad);
  r.add("gelu_grad", makeGeluGrad);
  r.add("dropout_grad", makeDropoutGrad);
}

} // namespace kiln::rt::cpu
