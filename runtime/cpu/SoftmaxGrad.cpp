//===- SoftmaxGrad.cpp - softmax and log_softmax gradients ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// softmax_grad and log_softmax_grad take dy and the forward result y; each
// row along `axis` needs one sum, accumulated in double. f32 and f64.
//===----------------------------------------------------------------------===//
#include "GradUtil.h"
#include "Kernels.h"

#include <cmath>

namespace kiln::rt::cpu {
namespace {

using namespace grad;

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

std::unique_ptr<Kernel> makeSoftmaxGrad(const KernelSpec &spec, bool log) {
  expectArity(spec, 2, 1);
  need(spec, spec.inputs[0], "dy");
  sameDesc(spec, spec.inputs[1], spec.inputs[0], "y");
  sameDesc(spec, spec.outputs[0], spec.inputs[0], "the result");
  const auto &s = spec.inputs[0]->shape;
  int64_t axis = axisAttr(spec, "axis", (int64_t)s.size());
  int64_t outer = prod(s, 0, axis), n = s.empty() ? 1 : s[axis],
          inner = prod(s, axis + 1, s.size());
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([=](ExecContext &, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]), *y = static_cast<const T *>(in[1]);
      T *dx = static_cast<T *>(out[0]);
      parallelRange(outer * inner, outer * n * inner, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          int64_t o = r / inner, k = r % inner, base = o * n * inner + k;
          double acc = 0;
          for (int64_t j = 0; j < n; ++j) {
            int64_t i = base + j * inner;
            acc += log ? double(dy[i]) : double(dy[i]) * double(y[i]);
          }
          T a = T(acc);
          for (int64_t j = 0; j < n; ++j) {
            int64_t i = base + j * inner;
            dx[i] = log ? dy[i] - std::exp(y[i]) * a : y[i] * (dy[i] - a);
          }
        }
      });
    });
  });
}

} // namespace

void registerSoftmaxGradKernels(KernelRegistry &r) {
  r.add("softmax_grad", [](const KernelSpec &s) { return makeSoftmaxGrad(s, false); });
  r.add("log_softmax_grad", [](const KernelSpec &s) { return makeSoftmaxGrad(s, true); });
}

} // namespace kiln::rt::cpu
