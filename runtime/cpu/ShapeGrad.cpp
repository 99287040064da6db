//===- ShapeGrad.cpp - gather and slice gradients, copy ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// gather_grad and slice_grad scatter dy back into a zeroed dx of the forward
// input's shape. Each thread owns whole columns (gather) or runs (slice), so
// repeated indices add up in index order whatever the thread count.
// copy is krt's byte copy of an update the lowering could not write in place.
//===----------------------------------------------------------------------===//
#include "GradUtil.h"
#include "Kernels.h"

#include <cstring>
#include <vector>

namespace kiln::rt::cpu {
namespace {

using namespace grad;

//===----------------------------------------------------------------------===//
// Scatter gradients
//===----------------------------------------------------------------------===//

std::unique_ptr<Kernel> makeGatherGrad(const KernelSpec &spec) {
  expectArity(spec, 2, 1);
  need(spec, spec.inputs[0], "dy");
  need(spec, spec.outputs[0], "the result");
  const TensorDesc *idx = spec.inputs[1];
  if (!idx || (idx->dtype != DType::I64 && idx->dtype != DType::I32))
    fail(spec, "indices must be i32 or i64");
  const auto &s = spec.outputs[0]->shape;
  int64_t axis = axisAttr(spec, "axis", (int64_t)s.size());
  int64_t outer = prod(s, 0, axis), A = s[axis], inner = prod(s, axis + 1, s.size());
  int64_t ni = idx->numel();
  if (spec.inputs[0]->numel() != outer * ni * inner ||
      spec.inputs[0]->dtype != spec.outputs[0]->dtype)
    fail(spec, "dy does not match the gather of the result");
  DType it = idx->dtype;
  // A result split on the axis (split, whole_size): this rank adds the
  // rows it holds, indices counted in the whole.
  const std::string split = spec.attrs.getString("split", "");
  const int64_t whole = spec.attrs.getInt("whole_size", A);
  if (!split.empty() && (A < 1 || whole < A || whole % A))
    fail(spec, "whole_size " + std::to_string(whole) +
                   " is not a whole number of the result's " + std::to_string(A) +
                   " rows");
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([=](ExecContext &ctx, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]);
      T *d = static_cast<T *>(out[0]);
      int64_t W = A, first = 0;
      if (!split.empty() && ctx.collectives) {
        int64_t ranks = ctx.collectives->groupSize(split);
        if (ranks * A != whole)
          throw Error("kernel 'gather_grad': the result holds " + std::to_string(A) +
                      " of " + std::to_string(whole) + " rows, but mesh axis '" +
                      split + "' has " + std::to_string(ranks) + " ranks");
        W = whole;
        first = ctx.collectives->groupRank(split) * A;
      }
      std::vector<int64_t> pos(ni);
      for (int64_t i = 0; i < ni; ++i) {
        int64_t a = loadIndex(it, in[1], i);
        if (a < 0)
          a += W;
        if (a < 0 || a >= W)
          throw Error("kernel 'gather_grad': index " + std::to_string(loadIndex(it, in[1], i)) +
                      " is out of range for size " + std::to_string(W));
        a -= first;
        pos[i] = a >= 0 && a < A ? a : -1;
      }
      std::memset(d, 0, sizeof(T) * outer * A * inner);
      // Split over the trailing elements: each thread owns columns, and
      // indices are added in order.
      parallelRange(outer * inner, outer * ni * inner, [&](int64_t b, int64_t e) {
        for (int64_t oc = b; oc < e; ++oc) {
          int64_t o = oc / inner, c = oc % inner;
          for (int64_t i = 0; i < ni; ++i)
            if (pos[i] >= 0)
              d[(o * A + pos[i]) * inner + c] += dy[(o * ni + i) * inner + c];
        }
      });
    });
  });
}

std::unique_ptr<Kernel> makeSliceGrad(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  // Moves values and writes zeros: f16/bf16 move as 16-bit words (all-zero
  // bits are +0 in both), f32/f64 as themselves.
  for (const TensorDesc *d : {spec.inputs[0], spec.outputs[0]})
    if (d && is16BitFloat(d->dtype))
      ;
    else
      need(spec, d, d == spec.inputs[0] ? "dy" : "the result");
  if (spec.inputs[0]->dtype != spec.outputs[0]->dtype)
    fail(spec, "dy and the result must have one element type");
  const auto &xs = spec.outputs[0]->shape, &ys = spec.inputs[0]->shape;
  auto st = spec.attrs.getInts("starts"), sp = spec.attrs.getInts("strides");
  size_t r = xs.size();
  if (st.size() != r || sp.size() != r || ys.size() != r)
    fail(spec, "starts and strides need one entry per dim");
  for (size_t i = 0; i < r; ++i) {
    if (ys[i] > 1 && sp[i] == 0)
      fail(spec, "slice stride of dim " + std::to_string(i) + " is 0");
    // The last tap, checked: a stride from the plan may be near 2^63
    // (issue 21, fuzzing).
    int64_t last;
    if (ys[i] > 0 && (st[i] < 0 || st[i] >= xs[i] ||
                      __builtin_mul_overflow(ys[i] - 1, sp[i], &last) ||
                      __builtin_add_overflow(st[i], last, &last) || last < 0 ||
                      last >= xs[i]))
      fail(spec, "slice out of range in dim " + std::to_string(i));
  }
  std::vector<int64_t> xstr(r, 1);
  for (int64_t i = (int64_t)r - 2; i >= 0; --i)
    xstr[i] = xstr[i + 1] * xs[i + 1];
  // Walk dy (contiguous) and its place in dx (strided) together.
  std::vector<int64_t> ystr(r, 1), dstr(r), base(2, 0);
  for (int64_t i = (int64_t)r - 2; i >= 0; --i)
    ystr[i] = ystr[i + 1] * ys[i + 1];
  for (size_t i = 0; i < r; ++i) {
    dstr[i] = (ys[i] > 1 ? sp[i] : 0) * xstr[i]; // |sp| < xs when it is used
    base[1] += (ys[i] > 0 ? st[i] : 0) * xstr[i];
  }
  loops::Walk walk(ys, {ystr, dstr}, base);
  int64_t nx = spec.outputs[0]->numel();
  auto kernel = [&](auto tag) {
    using T = decltype(tag);
    return make([=](ExecContext &, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]);
      T *dx = static_cast<T *>(out[0]);
      parallelRange(nx, nx, [&](int64_t b, int64_t e) {
        std::memset(dx + b, 0, sizeof(T) * (e - b));
      });
      const int64_t s = walk.inner(1);
      walk.parallelRuns([&](const int64_t *off, int64_t n) {
        const T *py = dy + off[0];
        T *px = dx + off[1];
        for (int64_t i = 0; i < n; ++i)
          px[i * s] = py[i];
      });
    });
  };
  if (is16BitFloat(spec.inputs[0]->dtype))
    return kernel(uint16_t{});
  return byFloat(spec, spec.inputs[0]->dtype, kernel);
}

/// krt's copy (an update result the lowering could not write in place).
std::unique_ptr<Kernel> makeCopy(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  if (!spec.inputs[0] || !spec.outputs[0] || spec.inputs[0]->bytes() != spec.outputs[0]->bytes())
    fail(spec, "input and output must have the same size");
  size_t bytes = spec.inputs[0]->bytes();
  return make([bytes](ExecContext &, const void *const *in, void *const *out) {
    if (in[0] != out[0])
      std::memmove(out[0], in[0], bytes);
  });
}

} // namespace

void registerShapeGradKernels(KernelRegistry &r) {
  r.add("gather_grad", makeGatherGrad);
  r.add("slice_grad", makeSliceGrad);
  r.add("copy", makeCopy);
}

} // namespace kiln::rt::cpu
