//===- NormGrad.cpp - layer_norm and batch_norm gradients -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// layer_norm_grad (dx, dscale, dbias from dy, x, scale and the saved mean
// and inverse std. dev.) and batch_norm_train_grad (recomputes the batch
// statistics from x). Sums accumulate in double. f32 and f64.
//===----------------------------------------------------------------------===//
#include "GradUtil.h"
#include "Kernels.h"

#include <algorithm>

#include <cmath>
#include <vector>

namespace kiln::rt::cpu {
namespace {

using namespace grad;

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

std::unique_ptr<Kernel> makeLayerNormGrad(const KernelSpec &spec) {
  expectArity(spec, 5, 3);
  need(spec, spec.inputs[0], "dy");
  sameDesc(spec, spec.inputs[1], spec.inputs[0], "x");
  const auto &s = spec.inputs[0]->shape;
  int64_t axis = axisAttr(spec, "axis", (int64_t)s.size());
  int64_t rows = prod(s, 0, axis), n = prod(s, axis, s.size());
  for (int i : {2})
    if (!spec.inputs[i] || spec.inputs[i]->numel() != n ||
        spec.inputs[i]->dtype != spec.inputs[0]->dtype)
      fail(spec, "scale must have the normalised shape");
  for (int i : {3, 4})
    if (!spec.inputs[i] || spec.inputs[i]->numel() != rows ||
        spec.inputs[i]->dtype != spec.inputs[0]->dtype)
      fail(spec, "mean and inv_std_dev need one value per row");
  sameDesc(spec, spec.outputs[0], spec.inputs[0], "dx");
  sameDesc(spec, spec.outputs[1], spec.inputs[2], "dscale");
  sameDesc(spec, spec.outputs[2], spec.inputs[2], "dbias");
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([=](ExecContext &, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]), *x = static_cast<const T *>(in[1]),
              *g = static_cast<const T *>(in[2]), *mu = static_cast<const T *>(in[3]),
              *rs = static_cast<const T *>(in[4]);
      T *dx = static_cast<T *>(out[0]), *dg = static_cast<T *>(out[1]),
        *db = static_cast<T *>(out[2]);
      parallelRange(rows, rows * n, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const T *dyr = dy + r * n, *xr = x + r * n;
          double s1 = 0, s2 = 0;
          for (int64_t j = 0; j < n; ++j) {
            double xh = (double(xr[j]) - mu[r]) * rs[r], gj = double(dyr[j]) * g[j];
            s1 += gj;
            s2 += gj * xh;
          }
          double m1 = s1 / n, m2 = s2 / n;
          for (int64_t j = 0; j < n; ++j) {
            double xh = (double(xr[j]) - mu[r]) * rs[r], gj = double(dyr[j]) * g[j];
            dx[r * n + j] = T(rs[r] * (gj - m1 - xh * m2));
          }
        }
      });
      // dscale and dbias: sums over the rows, each column's in row order
      // (as a column-at-a-time loop would), a block of columns at a time so
      // each row's reads are contiguous and the inner loop vectorizes.
      constexpr int64_t kCols = 64;
      int64_t blocks = (n + kCols - 1) / kCols;
      parallelRange(blocks, rows * n, [&](int64_t b, int64_t e) {
        double sg[kCols], sb[kCols];
        for (int64_t blk = b; blk < e; ++blk) {
          int64_t j0 = blk * kCols, w = std::min(kCols, n - j0);
          for (int64_t j = 0; j < w; ++j)
            sg[j] = sb[j] = 0;
          for (int64_t r = 0; r < rows; ++r) {
            const T *dyr = dy + r * n + j0, *xr = x + r * n + j0;
            double m = mu[r], inv = rs[r];
#pragma omp simd
            for (int64_t j = 0; j < w; ++j) {
              double d = dyr[j];
              sg[j] += d * (double(xr[j]) - m) * inv;
              sb[j] += d;
            }
          }
          for (int64_t j = 0; j < w; ++j) {
            dg[j0 + j] = T(sg[j]);
            db[j0 + j] = T(sb[j]);
          }
        }
      });
    });
  });
}

/// batch_norm_train_grad when each channel's plane (S elements) is too short
/// to vectorize over: every thread takes a block of channels and walks the N
/// rows of that block, [c0, c1) x S contiguous elements each, accumulating
/// per (channel, position) in double, so the loops vectorize across
/// channels. The same three passes and sums as the per-channel loop.
constexpr int64_t kSmallPlane = 64;

template <typename T>
void bnGradSmallPlanes(int64_t N, int64_t C, int64_t S, double eps, const T *dy,
                       const T *x, const T *g, T *dx, T *dg, T *db) {
  double M = double(N * S);
  parallelRange(C, N * C * S, [&](int64_t c0, int64_t c1) {
    const int64_t w = (c1 - c0) * S, off = c0 * S;
    std::vector<double> a(w), b(w), c(w), mean(w), k1(w), k2(w), k3(w);
    // Pass 1: the sums of x per position, then per channel.
    for (int64_t n = 0; n < N; ++n) {
      const T *xp = x + n * C * S + off;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j)
        a[j] += double(xp[j]);
    }
    for (int64_t ch = 0; ch < c1 - c0; ++ch) {
      double sum = 0;
      for (int64_t i = 0; i < S; ++i)
        sum += a[ch * S + i];
      for (int64_t i = 0; i < S; ++i)
        mean[ch * S + i] = sum / M;
    }
    std::fill(a.begin(), a.end(), 0.0);
    // Pass 2: sum (x - mean)^2, sum dy, sum dy (x - mean).
    for (int64_t n = 0; n < N; ++n) {
      const T *xp = x + n * C * S + off, *dyp = dy + n * C * S + off;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) {
        double d = double(xp[j]) - mean[j], gj = double(dyp[j]);
        a[j] += d * d;
        b[j] += gj;
        c[j] += gj * d;
      }
    }
    // dx = A dy - B - (x - mean) K per channel, spread over its positions.
    for (int64_t ch = 0; ch < c1 - c0; ++ch) {
      double m2 = 0, sdy = 0, sdyxc = 0;
      for (int64_t i = 0; i < S; ++i) {
        m2 += a[ch * S + i];
        sdy += b[ch * S + i];
        sdyxc += c[ch * S + i];
      }
      double rstd = 1.0 / std::sqrt(m2 / M + eps), sdyx = sdyxc * rstd;
      dg[c0 + ch] = T(sdyx);
      db[c0 + ch] = T(sdy);
      double coef = double(g[c0 + ch]) * rstd / M;
      for (int64_t i = 0; i < S; ++i) {
        k1[ch * S + i] = coef * M;
        k2[ch * S + i] = coef * sdy;
        k3[ch * S + i] = coef * rstd * sdyx;
      }
    }
    for (int64_t n = 0; n < N; ++n) {
      const T *xp = x + n * C * S + off, *dyp = dy + n * C * S + off;
      T *dxp = dx + n * C * S + off;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j)
        dxp[j] = T(k1[j] * double(dyp[j]) - k2[j] - (double(xp[j]) - mean[j]) * k3[j]);
    }
  });
}

std::unique_ptr<Kernel> makeBatchNormTrainGrad(const KernelSpec &spec) {
  expectArity(spec, 3, 3);
  need(spec, spec.inputs[0], "dy");
  sameDesc(spec, spec.inputs[1], spec.inputs[0], "x");
  const auto &s = spec.inputs[0]->shape;
  if (s.size() < 2)
    fail(spec, "input must be [N, C, ...]");
  int64_t N = s[0], C = s[1], S = prod(s, 2, s.size());
  if (!spec.inputs[2] || spec.inputs[2]->numel() != C ||
      spec.inputs[2]->dtype != spec.inputs[0]->dtype)
    fail(spec, "scale must be [C]");
  sameDesc(spec, spec.outputs[0], spec.inputs[0], "dx");
  sameDesc(spec, spec.outputs[1], spec.inputs[2], "dscale");
  sameDesc(spec, spec.outputs[2], spec.inputs[2], "dbias");
  double eps = spec.attrs.getFloat("epsilon", 1e-5);
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([=](ExecContext &, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]), *x = static_cast<const T *>(in[1]),
              *g = static_cast<const T *>(in[2]);
      T *dx = static_cast<T *>(out[0]), *dg = static_cast<T *>(out[1]),
        *db = static_cast<T *>(out[2]);
      double M = double(N * S);
      if (S < kSmallPlane) {
        bnGradSmallPlanes(N, C, S, eps, dy, x, g, dx, dg, db);
        return;
      }
      // Three passes per channel (mean; variance with the dy sums; dx), each
      // a SIMD reduction in double over the channel's N planes.
      parallelRange(C, N * C * S, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c) {
          double sum = 0;
          for (int64_t n = 0; n < N; ++n) {
            const T *xp = x + (n * C + c) * S;
#pragma omp simd reduction(+ : sum)
            for (int64_t i = 0; i < S; ++i)
              sum += double(xp[i]);
          }
          double mean = sum / M, m2 = 0, sdy = 0, sdyxc = 0;
          for (int64_t n = 0; n < N; ++n) {
            const T *xp = x + (n * C + c) * S, *dyp = dy + (n * C + c) * S;
#pragma omp simd reduction(+ : m2, sdy, sdyxc)
            for (int64_t i = 0; i < S; ++i) {
              double d = double(xp[i]) - mean, g = double(dyp[i]);
              m2 += d * d;
              sdy += g;
              sdyxc += g * d;
            }
          }
          double rstd = 1.0 / std::sqrt(m2 / M + eps);
          double sdyx = sdyxc * rstd;
          dg[c] = T(sdyx);
          db[c] = T(sdy);
          double a = double(g[c]) * rstd / M;
          for (int64_t n = 0; n < N; ++n) {
            const T *xp = x + (n * C + c) * S, *dyp = dy + (n * C + c) * S;
            T *dxp = dx + (n * C + c) * S;
#pragma omp simd
            for (int64_t i = 0; i < S; ++i) {
              double xh = (double(xp[i]) - mean) * rstd;
              dxp[i] = T(a * (M * double(dyp[i]) - sdy - xh * sdyx));
            }
          }
        }
      });
    });
  });
}

} // namespace

void registerNormGradKernels(KernelRegistry &r) {
  r.add("layer_norm_grad", makeLayerNormGrad);
  r.add("batch_norm_train_grad", makeBatchNormTrainGrad);
}

} // namespace kiln::rt::cpu
