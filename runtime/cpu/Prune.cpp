//===- Prune.cpp - magnitude_prune ------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// kiln.magnitude_prune (--kiln-prune-magnitude): at the cubic schedule's
// pruning points, the round(target * n) elements of smallest magnitude are
// marked pruned (those pruned before first); at every step the pruned
// elements of the parameter are set to zero. f32 and f64.
//===----------------------------------------------------------------------===//
#include "Prune.h"

#include "GradUtil.h"
#include "Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

namespace kiln::rt::cpu {

std::optional<double> pruneTarget(double sparsity, int64_t start, int64_t end,
                                  int64_t every, int64_t s) {
  if (s < start || s > end)
    return std::nullopt;
  if (s != end && (s - start) % every != 0)
    return std::nullopt;
  if (end == start)
    return sparsity;
  double left = 1.0 - double(s - start) / double(end - start);
  return sparsity * (1.0 - left * left * left);
}

int64_t prunedCount(double target, int64_t n) {
  double k = std::nearbyint(target * double(n));
  return std::clamp<int64_t>((int64_t)k, 0, n);
}

template <typename T>
void selectPruned(const T *param, const T *before, T *pruned, int64_t n,
                  int64_t k) {
  // Keys first: `pruned` may alias `before`.
  std::vector<double> key((size_t)n);
  for (int64_t i = 0; i < n; ++i) {
    double a = std::fabs((double)param[i]);
    key[(size_t)i] = before[i] != T(0) ? -1.0
                     : std::isnan(a)    ? std::numeric_limits<double>::infinity()
                                        : a;
  }
  for (int64_t i = 0; i < n; ++i)
    pruned[i] = T(0);
  if (k <= 0)
    return;
  std::vector<int64_t> order((size_t)n);
  std::iota(order.begin(), order.end(), int64_t(0));
  auto less = [&](int64_t a, int64_t b) {
    return key[(size_t)a] != key[(size_t)b] ? key[(size_t)a] < key[(size_t)b] : a < b;
  };
  if (k < n)
    std::nth_element(order.begin(), order.begin() + k, order.end(), less);
  for (int64_t j = 0; j < k; ++j)
    pruned[order[(size_t)j]] = T(1);
}

template void selectPruned<float>(const float *, const float *, float *, int64_t,
                                  int64_t);
template void selectPruned<double>(const double *, const double *, double *,
                                   int64_t, int64_t);

namespace {

using namespace grad;

std::unique_ptr<Kernel> makeMagnitudePrune(const KernelSpec &spec) {
  expectArity(spec, 3, 2);
  need(spec, spec.inputs[0], "param");
  sameDesc(spec, spec.inputs[1], spec.inputs[0], "pruned");
  sameDesc(spec, spec.outputs[0], spec.inputs[0], "new_param");
  sameDesc(spec, spec.outputs[1], spec.inputs[0], "new_pruned");
  if (!spec.inputs[2] || spec.inputs[2]->dtype != DType::I64 || spec.inputs[2]->numel() != 1)
    fail(spec, "step must be an i64 scalar");
  double sparsity = userFloat(spec.attrs.getFloat("sparsity"));
  int64_t start = spec.attrs.getInt("start"), end = spec.attrs.getInt("end");
  int64_t every = spec.attrs.getInt("every", 1);
  if (!(sparsity >= 0 && sparsity < 1) || start < 0 || end < start || every < 1)
    fail(spec, "needs 0 <= sparsity < 1, 0 <= start <= end and every >= 1");
  int64_t n = spec.inputs[0]->numel();
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([=](ExecContext &, const void *const *in, void *const *out) {
      const T *p = static_cast<const T *>(in[0]), *q = static_cast<const T *>(in[1]);
      int64_t s = *static_cast<const int64_t *>(in[2]) - 1; // 1-based count
      T *po = static_cast<T *>(out[0]), *qo = static_cast<T *>(out[1]);
      if (std::optional<double> target = pruneTarget(sparsity, start, end, every, s))
        selectPruned(p, q, qo, n, prunedCount(*target, n));
      else if (qo != q)
        std::memcpy(qo, q, (size_t)n * sizeof(T));
      for (int64_t i = 0; i < n; ++i)
        po[i] = qo[i] != T(0) ? T(0) : p[i];
    });
  });
}

std::unique_ptr<Kernel> makeChannelPrune(const KernelSpec &spec) {
  size_t n = spec.inputs.size();
  if (n < 3 || spec.outputs.size() != 1)
    fail(spec, "needs producers, pruned and step, and one result");
  size_t np = n - 2;
  const TensorDesc *q = spec.inputs[np];
  need(spec, q, "pruned");
  if (q->dtype != DType::F32 || q->shape.size() != 1)
    fail(spec, "pruned must be f32 [C]");
  sameDesc(spec, spec.outputs[0], q, "new_pruned");
  if (!spec.inputs[np + 1] || spec.inputs[np + 1]->dtype != DType::I64 ||
      spec.inputs[np + 1]->numel() != 1)
    fail(spec, "step must be an i64 scalar");
  std::vector<int64_t> axes = spec.attrs.getInts("axes"), blocks = spec.attrs.getInts("blocks");
  int64_t c = q->shape[0], keep = spec.attrs.getInt("keep"), at = spec.attrs.getInt("at");
  if (axes.size() != np || blocks.size() != np || keep < 1 || keep > c || at < 0)
    fail(spec, "needs one axis and block per producer, 1 <= keep <= C, at >= 0");
  struct Producer {
    int64_t outer, size, inner, block;
  };
  std::vector<Producer> ps;
  for (size_t i = 0; i < np; ++i) {
    const TensorDesc *d = spec.inputs[i];
    if (!d || d->dtype != DType::F32)
      fail(spec, "producers must be f32");
    int64_t a = axes[i];
    if (a < 0 || a >= (int64_t)d->shape.size() || d->shape[a] != c * blocks[i])
      fail(spec, "producer " + std::to_string(i) + " " + d->str() + " has no " +
                     std::to_string(c) + " channels along axis " + std::to_string(a));
    ps.push_back({grad::prod(d->shape, 0, a), d->shape[a],
                  grad::prod(d->shape, a + 1, d->shape.size()), blocks[i]});
  }
  return make([=](ExecContext &, const void *const *in, void *const *out) {
    const float *qi = static_cast<const float *>(in[np]);
    int64_t s = *static_cast<const int64_t *>(in[np + 1]) - 1; // 1-based count
    float *qo = static_cast<float *>(out[0]);
    if (s != at) {
      if (qo != qi)
        std::memcpy(qo, qi, (size_t)c * sizeof(float));
      return;
    }
    std::vector<double> score((size_t)c, 0.0);
    for (size_t i = 0; i < np; ++i) {
      const float *w = static_cast<const float *>(in[i]);
      const Producer &p = ps[i];
      for (int64_t o = 0; o < p.outer; ++o)
        for (int64_t j = 0; j < p.size; ++j)
          for (int64_t k = 0; k < p.inner; ++k)
            score[(size_t)(j / p.block)] += std::fabs(w[(o * p.size + j) * p.inner + k]);
    }
    std::vector<int64_t> order((size_t)c);
    std::iota(order.begin(), order.end(), int64_t(0));
    // Largest first, ties by position: the first `keep` stay.
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return score[a] > score[b]; });
    for (int64_t j = 0; j < c; ++j)
      qo[j] = 1.0f;
    for (int64_t j = 0; j < keep; ++j)
      qo[order[(size_t)j]] = 0.0f;
  });
}

} // namespace

void registerPruneKernels(KernelRegistry &r) {
  r.add("channel_prune", makeChannelPrune);
  r.add("magnitude_prune", makeMagnitudePrune);
}

} // namespace kiln::rt::cpu
