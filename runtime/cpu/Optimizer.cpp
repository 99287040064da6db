//===- Optimizer.cpp - optimizer update kernels -----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The ops --kiln-attach-optimizer adds (docs/Training.md has their
// semantics): sgd_update, momentum_update and adam_update (adam and adamw)
// with torch.optim's formulas. f32 and f64. With `skip` set (loss scaling
// found a non-finite gradient) each result is its operand, unchanged. Each reads element i
// of every input before writing element i, so outputs may alias inputs.
//===----------------------------------------------------------------------===//
#include "GradUtil.h"
#include "Kernels.h"

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <type_traits>

namespace kiln::rt::cpu {
namespace {

using namespace grad;

//===----------------------------------------------------------------------===//
// Optimizer updates and copy
//===----------------------------------------------------------------------===//

/// Checks an update's operands; `nin` counts the optional trailing `skip`,
/// which a step may leave out. Returns skip's input index, or -1.
int checkUpdate(const KernelSpec &spec, size_t nTensors, size_t nin, size_t nout) {
  expectArity(spec, spec.inputs.size() + 1 == nin ? nin - 1 : nin, nout);
  const TensorDesc *skip = spec.inputs.size() == nin ? spec.inputs[nin - 1] : nullptr;
  if (skip && (skip->dtype != DType::Bool || skip->numel() != 1))
    fail(spec, "skip must be an i1 scalar");
  need(spec, spec.inputs[0], "param");
  for (size_t i = 1; i < nTensors; ++i)
    sameDesc(spec, spec.inputs[i], spec.inputs[0], "every tensor operand");
  for (size_t i = 0; i < nout; ++i)
    sameDesc(spec, spec.outputs[i], spec.inputs[0], "every result");
  if (!spec.inputs[nTensors] || spec.inputs[nTensors]->dtype != DType::F32 ||
      spec.inputs[nTensors]->numel() != 1)
    fail(spec, "lr must be an f32 scalar");
  return skip ? int(nin - 1) : -1;
}

/// `skip` (the last input, optional) set: each output becomes its input
/// (out[k] = in[from[k]]) and the update does not run; true if so.
bool skipped(int skipAt, const void *const *in, void *const *out,
             std::initializer_list<int> from, size_t bytes) {
  const void *skip = skipAt >= 0 ? in[skipAt] : nullptr;
  if (!skip || !*static_cast<const uint8_t *>(skip))
    return false;
  int k = 0;
  for (int i : from) {
    if (out[k] != in[i])
      std::memcpy(out[k], in[i], bytes);
    ++k;
  }
  return true;
}

std::unique_ptr<Kernel> makeSgd(const KernelSpec &spec) {
  int skipAt = checkUpdate(spec, 2, 4, 1);
  double wd = userFloat(spec.attrs.getFloat("weight_decay", 0.0));
  int64_t n = spec.inputs[0]->numel();
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    size_t bytes = spec.inputs[0]->bytes();
    return make([=](ExecContext &, const void *const *in, void *const *out) {
      if (skipped(skipAt, in, out, {0}, bytes))
        return;
      const T *p = static_cast<const T *>(in[0]), *g = static_cast<const T *>(in[1]);
      T lr = T(*static_cast<const float *>(in[2])), wdT = T(wd);
      T *po = static_cast<T *>(out[0]);
      parallelRange(n, n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          T d = wd != 0 ? g[i] + wdT * p[i] : g[i];
          po[i] = p[i] + (-lr) * d;
        }
      });
    });
  });
}

std::unique_ptr<Kernel> makeMomentum(const KernelSpec &spec) {
  int skipAt = checkUpdate(spec, 3, 5, 2);
  double wd = userFloat(spec.attrs.getFloat("weight_decay", 0.0));
  double mom = userFloat(spec.attrs.getFloat("momentum"));
  bool nesterov = spec.attrs.getBool("nesterov", false);
  int64_t n = spec.inputs[0]->numel();
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    size_t bytes = spec.inputs[0]->bytes();
    return make([=](ExecContext &, const void *const *in, void *const *out) {
      if (skipped(skipAt, in, out, {0, 2}, bytes))
        return;
      const T *p = static_cast<const T *>(in[0]), *g = static_cast<const T *>(in[1]),
              *buf = static_cast<const T *>(in[2]);
      T lr = T(*static_cast<const float *>(in[3])), wdT = T(wd), m = T(mom);
      T *po = static_cast<T *>(out[0]), *bo = static_cast<T *>(out[1]);
      parallelRange(n, n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          T pi = p[i];
          T d = wd != 0 ? g[i] + wdT * pi : g[i];
          T nb = buf[i] * m + d;
          T step = nesterov ? d + m * nb : nb;
          bo[i] = nb;
          po[i] = pi + (-lr) * step;
        }
      });
    });
  });
}

std::unique_ptr<Kernel> makeAdam(const KernelSpec &spec) {
  int skipAt = checkUpdate(spec, 4, 7, 3);
  if (!spec.inputs[5] || spec.inputs[5]->dtype != DType::I64 || spec.inputs[5]->numel() != 1)
    fail(spec, "step must be an i64 scalar");
  double b1 = userFloat(spec.attrs.getFloat("beta1")), b2 = userFloat(spec.attrs.getFloat("beta2"));
  double eps = userFloat(spec.attrs.getFloat("eps"));
  double wd = userFloat(spec.attrs.getFloat("weight_decay", 0.0));
  bool decoupled = spec.attrs.getBool("decoupled", false);
  int64_t n = spec.inputs[0]->numel();
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    size_t bytes = spec.inputs[0]->bytes();
    return make([=](ExecContext &, const void *const *in, void *const *out) {
      if (skipped(skipAt, in, out, {0, 2, 3}, bytes))
        return;
      const T *p = static_cast<const T *>(in[0]), *g = static_cast<const T *>(in[1]),
              *m = static_cast<const T *>(in[2]), *v = static_cast<const T *>(in[3]);
      double lr = *static_cast<const float *>(in[4]);
      int64_t t = *static_cast<const int64_t *>(in[5]);
      if (t < 1)
        throw Error("kernel 'adam_update': step must be >= 1, got " + std::to_string(t));
      double bc1 = 1 - std::pow(b1, double(t)), bc2s = std::sqrt(1 - std::pow(b2, double(t)));
      T stepSize = T(-(lr / bc1)), bc2T = T(bc2s), epsT = T(eps);
      T b1T = T(b1), b2T = T(b2), omb1 = T(1 - b1), omb2 = T(1 - b2), wdT = T(wd);
      T decay = T(1 - lr * wd);
      T *po = static_cast<T *>(out[0]), *mo = static_cast<T *>(out[1]),
        *vo = static_cast<T *>(out[2]);
      // The weight-decay form is a compile-time choice, so the loop has no
      // branches and vectorizes.
      auto update = [&](auto decoupledWd, auto coupledWd) {
        parallelRange(n, n, [&](int64_t b, int64_t e) {
#pragma omp simd
          for (int64_t i = b; i < e; ++i) {
            T pi = p[i], gi = g[i];
            if constexpr (decltype(decoupledWd)::value)
              pi = pi * decay;
            if constexpr (decltype(coupledWd)::value)
              gi = gi + wdT * pi;
            T mi = m[i] * b1T + gi * omb1;
            T vi = v[i] * b2T + omb2 * gi * gi;
            T denom = std::sqrt(vi) / bc2T + epsT;
            mo[i] = mi;
            vo[i] = vi;
            po[i] = pi + stepSize * (mi / denom);
          }
        });
      };
      using Yes = std::true_type;
      using No = std::false_type;
      if (wd == 0)
        update(No{}, No{});
      else if (decoupled)
        update(Yes{}, No{});
      else
        update(No{}, Yes{});
    });
  });
}

} // namespace

void registerOptimizerKernels(KernelRegistry &r) {
  r.add("sgd_update", makeSgd);
  r.add("momentum_update", makeMomentum);
  r.add("adam_update", makeAdam);
}

} // namespace kiln::rt::cpu
