//===- LossGrad.cpp - classification loss gradients -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// softmax_cross_entropy_grad (softmax(logits) - onehot(label), scaled) and
// nll_loss_grad (-onehot(label), scaled), with class weights, ignore_index
// and the mean / sum / none reductions as torch computes them.
//===----------------------------------------------------------------------===//
#include "FastMath.h"
#include "GradUtil.h"
#include "Kernels.h"

#include <cmath>
#include <limits>

namespace kiln::rt::cpu {
namespace {

using namespace grad;

//===----------------------------------------------------------------------===//
// Loss gradients
//===----------------------------------------------------------------------===//

std::unique_ptr<Kernel> makeClassLossGrad(const KernelSpec &spec, bool softmax) {
  // sce: dloss, logits, labels [, weight]; nll: dloss, labels [, weight].
  size_t base = softmax ? 1 : 0;
  if (spec.inputs.size() != base + 2 && spec.inputs.size() != base + 3)
    fail(spec, "expected " + std::to_string(base + 2) + " or " +
                   std::to_string(base + 3) + " inputs");
  expectArity(spec, spec.inputs.size(), 1);
  need(spec, spec.outputs[0], "the result");
  need(spec, spec.inputs[0], "dloss");
  const TensorDesc &z = *spec.outputs[0];
  if (softmax)
    sameDesc(spec, spec.inputs[1], &z, "logits");
  const TensorDesc *lab = spec.inputs[base + 1];
  if (!lab || (lab->dtype != DType::I64 && lab->dtype != DType::I32))
    fail(spec, "labels must be i32 or i64");
  const TensorDesc *wd = spec.inputs.size() == base + 3 ? spec.inputs[base + 2] : nullptr;
  int64_t ax = axisAttr(spec, "class_axis", z.rank());
  int64_t outer = prod(z.shape, 0, ax), C = z.shape[ax], inner = prod(z.shape, ax + 1, z.shape.size());
  if (lab->numel() != outer * inner)
    fail(spec, "labels do not match the logits");
  if (wd && (wd->numel() != C || wd->dtype != z.dtype))
    fail(spec, "weight must be [C]");
  std::string red = spec.attrs.getString("reduction", "mean");
  if (red != "mean" && red != "sum" && red != "none")
    fail(spec, "reduction must be mean, sum or none");
  if (red == "none" ? spec.inputs[0]->numel() != outer * inner : spec.inputs[0]->numel() != 1)
    fail(spec, "dloss has the wrong shape");
  bool hasIgnore = spec.attrs.has("ignore_index");
  int64_t ignore = hasIgnore ? spec.attrs.getInt("ignore_index") : 0;
  bool redNone = red == "none", redSum = red == "sum";
  DType lt = lab->dtype;
  return byFloat(spec, z.dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([=](ExecContext &, const void *const *in, void *const *out) {
      const T *dl = static_cast<const T *>(in[0]);
      const T *zp = softmax ? static_cast<const T *>(in[1]) : nullptr;
      const void *lp = in[base + 1];
      const T *w = wd ? static_cast<const T *>(in[base + 2]) : nullptr;
      T *dz = static_cast<T *>(out[0]);
      int64_t P = outer * inner;
      double wsum = 0;
      for (int64_t q = 0; q < P; ++q) {
        int64_t l = loadIndex(lt, lp, q);
        if (hasIgnore && l == ignore)
          continue;
        if (l < 0 || l >= C)
          throw Error("kernel '" + std::string(softmax ? "softmax_cross_entropy_grad"
                                                       : "nll_loss_grad") +
                      "': label " + std::to_string(l) + " is outside [0, " +
                      std::to_string(C) + ")");
        wsum += w ? double(w[l]) : 1.0;
      }
      parallelRange(P, P * C, [&](int64_t b, int64_t e) {
        for (int64_t q = b; q < e; ++q) {
          int64_t o = q / inner, k = q % inner, l = loadIndex(lt, lp, q);
          int64_t at = o * C * inner + k;
          bool ignored = hasIgnore && l == ignore;
          double coef = 0;
          if (!ignored) {
            double wl = w ? double(w[l]) : 1.0;
            coef = redNone ? double(dl[q]) * wl
                   : redSum ? double(dl[0]) * wl
                            : double(dl[0]) * wl / wsum;
          }
          if (!softmax) {
            for (int64_t c = 0; c < C; ++c)
              dz[at + c * inner] = T(c == l ? -coef : 0.0);
            continue;
          }
          if (ignored) {
            for (int64_t c = 0; c < C; ++c)
              dz[at + c * inner] = T(0);
            continue;
          }
          // softmax(z) - onehot(l), scaled: exp once per element (kept in
          // dz), its sum in double.
          T mx = -std::numeric_limits<T>::infinity();
          for (int64_t c = 0; c < C; ++c)
            mx = std::max(mx, zp[at + c * inner]);
          double s = 0;
          for (int64_t c = 0; c < C; ++c) {
            T e = expAcc(T(zp[at + c * inner] - mx));
            dz[at + c * inner] = e;
            s += double(e);
          }
          T inv = T(1.0 / s), cf = T(coef);
          for (int64_t c = 0; c < C; ++c)
            dz[at + c * inner] = cf * (dz[at + c * inner] * inv - T(c == l ? 1 : 0));
        }
      });
    });
  });
}

} // namespace

void registerLossGradKernels(KernelRegistry &r) {
  r.add("softmax_cross_entropy_grad", [](const KernelSpec &s) { return makeClassLossGrad(s, true); });
  r.add("nll_loss_grad", [](const KernelSpec &s) { return makeClassLossGrad(s, false); });
}

} // namespace kiln::rt::cpu
