//===- Backward.cpp - gradient and optimizer kernels ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The kernels of the ops --kiln-autodiff and --kiln-attach-optimizer add
// (docs/Training.md has their semantics): pointwise gradients, softmax and
// normalisation gradients, convolution and pooling gradients, scatter
// gradients of gather and slice, loss gradients, and the sgd / momentum /
// adam updates with torch.optim's formulas. f32 and f64.
//
// In f32 the convolution gradients run on oneDNN's convolution_backward_data
// / _weights primitives (blocked layouts of its choice, with reorders built at
// factory time, as the forward conv does), and max/avg pooling gradients on
// pooling_v2_backward (max pooling re-runs the forward in training mode for
// the argmax workspace: the kernel gets x, not the forward's indices). f64
// keeps the direct loops, accumulating in double: they are the reference the
// f32 path is tested against and what the finite-difference check runs.
// Every parallel loop writes disjoint outputs, so results do not depend on
// the thread count. Optimizer kernels read element i of every input before
// writing element i, so their outputs may alias their inputs.
//===----------------------------------------------------------------------===//
#include "Dnnl.h"
#include "FastMath.h"
#include "Kernels.h"
#include "Loops.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <unordered_map>

namespace kiln::rt::cpu {
namespace {

using loops::parallelRange;

int64_t prod(const std::vector<int64_t> &s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < s.size(); ++i)
    p *= s[i];
  return p;
}

[[noreturn]] void fail(const KernelSpec &spec, const std::string &msg) {
  throw Error("kernel '" + spec.kernel + "': " + msg);
}

void need(const KernelSpec &spec, const TensorDesc *d, const char *what) {
  if (!d)
    fail(spec, std::string(what) + " is required");
  if (d->dtype != DType::F32 && d->dtype != DType::F64)
    unsupportedType(spec, d->dtype);
}

void sameDesc(const KernelSpec &spec, const TensorDesc *a, const TensorDesc *b,
              const char *what) {
  if (!a || !b || *a != *b)
    fail(spec, std::string(what) + " must be " + (b ? b->str() : "?") + ", got " +
                   (a ? a->str() : "nothing"));
}

int64_t axisAttr(const KernelSpec &spec, const char *name, int64_t rank) {
  int64_t a = spec.attrs.getInt(name);
  if (a < 0)
    a += rank;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    fail(spec, std::string(name) + " out of range");
  return a;
}

/// A float attribute stored as f32 in the IR, back to the decimal the user
/// wrote (0.899999976 -> 0.9), so scalars match torch's Python floats.
double userFloat(double f32value) {
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

int64_t loadIndex(DType t, const void *p, int64_t i) {
  return t == DType::I64 ? static_cast<const int64_t *>(p)[i]
                         : static_cast<const int32_t *>(p)[i];
}

//===----------------------------------------------------------------------===//
// Pointwise
//===----------------------------------------------------------------------===//

template <typename G>
std::unique_ptr<Kernel> pointwise2(const KernelSpec &spec, G g) {
  expectArity(spec, 2, 1);
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

std::unique_ptr<Kernel> makeDropoutGrad(const KernelSpec &spec) {
  expectArity(spec, 2, 1);
  need(spec, spec.inputs[0], "dy");
  if (!spec.inputs[1] || spec.inputs[1]->dtype != DType::Bool ||
      spec.inputs[1]->shape != spec.inputs[0]->shape)
    fail(spec, "mask must be i1 of dy's shape");
  sameDesc(spec, spec.outputs[0], spec.inputs[0], "the result");
  double ratio = spec.attrs.getFloat("ratio");
  int64_t n = spec.inputs[0]->numel();
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
      parallelRange(n, rows * n, [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) {
          double sg = 0, sb = 0;
          for (int64_t r = 0; r < rows; ++r) {
            double d = dy[r * n + j];
            sg += d * (double(x[r * n + j]) - mu[r]) * rs[r];
            sb += d;
          }
          dg[j] = T(sg);
          db[j] = T(sb);
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

//===----------------------------------------------------------------------===//
// Convolution (direct loops over up to 3 spatial dims)
//===----------------------------------------------------------------------===//

/// Spatial arrays hold the last `nsp` entries; leading ones are neutral.
struct ConvGeom {
  int nsp = 0;
  int64_t N = 0, C = 0, O = 0, G = 1, cpg = 0, opg = 0;
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, k{1, 1, 1}, s{1, 1, 1},
      d{1, 1, 1}, p{0, 0, 0}, ph{0, 0, 0};
  int64_t inSize() const { return in[0] * in[1] * in[2]; }
  int64_t outSize() const { return out[0] * out[1] * out[2]; }
  int64_t kSize() const { return k[0] * k[1] * k[2]; }
};

ConvGeom convGeom(const KernelSpec &spec, const TensorDesc &x, const TensorDesc &w,
                  const TensorDesc &y) {
  int64_t nsp = x.rank() - 2;
  if (nsp < 1 || nsp > 3 || w.rank() != x.rank() || y.rank() != x.rank())
    fail(spec, "input, weight and dy need rank 3 to 5");
  ConvGeom g;
  g.nsp = (int)nsp;
  g.N = x.shape[0];
  g.C = x.shape[1];
  g.O = w.shape[0];
  g.G = spec.attrs.getInt("groups", 1);
  if (g.G < 1 || g.C % g.G || g.O % g.G || w.shape[1] * g.G != g.C ||
      y.shape[1] != g.O || y.shape[0] != g.N)
    fail(spec, "channels do not match");
  g.cpg = g.C / g.G;
  g.opg = g.O / g.G;
  auto st = spec.attrs.getInts("strides"), di = spec.attrs.getInts("dilations"),
       pa = spec.attrs.getInts("padding");
  if ((int64_t)st.size() != nsp || (int64_t)di.size() != nsp ||
      (int64_t)pa.size() != 2 * nsp)
    fail(spec, "strides, dilations and padding do not match the rank");
  int off = 3 - (int)nsp;
  for (int64_t i = 0; i < nsp; ++i) {
    g.in[off + i] = x.shape[2 + i];
    g.out[off + i] = y.shape[2 + i];
    g.k[off + i] = w.shape[2 + i];
    g.s[off + i] = st[i];
    g.d[off + i] = di[i];
    g.p[off + i] = pa[i];
    g.ph[off + i] = pa[i + nsp];
    int64_t span = di[i] * (w.shape[2 + i] - 1) + 1;
    int64_t want = (x.shape[2 + i] + pa[i] + pa[i + nsp] - span) / st[i] + 1;
    if (st[i] < 1 || di[i] < 1 || want != y.shape[2 + i])
      fail(spec, "dy's spatial size does not match the convolution");
  }
  return g;
}

/// Calls f(input offset, weight tap offset, output offset) for every
/// (output position, tap) pair of plane pairs whose input position is inside.
template <typename F> inline void forTaps(const ConvGeom &g, F &&f) {
  for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
    for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
      int64_t i0 = o0 * g.s[0] - g.p[0] + k0 * g.d[0];
      if (i0 < 0 || i0 >= g.in[0])
        continue;
      for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
        for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
          int64_t i1 = o1 * g.s[1] - g.p[1] + k1 * g.d[1];
          if (i1 < 0 || i1 >= g.in[1])
            continue;
          int64_t obase = (o0 * g.out[1] + o1) * g.out[2];
          int64_t ibase = (i0 * g.in[1] + i1) * g.in[2];
          int64_t kbase = (k0 * g.k[1] + k1) * g.k[2];
          for (int64_t k2 = 0; k2 < g.k[2]; ++k2)
            for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
              int64_t i2 = o2 * g.s[2] - g.p[2] + k2 * g.d[2];
              if (i2 < 0 || i2 >= g.in[2])
                continue;
              f(ibase + i2, kbase + k2, obase + o2);
            }
        }
    }
}

/// conv_input_grad (dy, w -> dx) or conv_weight_grad (x, dy -> dw) in f32
/// on oneDNN's backward primitives.
class DnnlConvGrad {
public:
  DnnlConvGrad(const KernelSpec &spec, const ConvGeom &g, bool weights) {
    try {
      build(g, weights);
    } catch (const dnnl::error &e) {
      throwDnnl(spec, weights ? "convolution backward (weights)"
                              : "convolution backward (data)", e);
    }
  }

  /// The kernel's operands. Data: a = dy, b = w, r = dx. Weights: a = x,
  /// b = dy, r = dw.
  void run(const void *const *in, void *const *out) {
    dnnl::stream &st = dnnlStream();
    a_.bind(in[0]);
    b_.bind(in[1]);
    r_.bind(out[0]);
    a_.toPrim(st);
    b_.toPrim(st);
    prim_.execute(st, args_);
    r_.toUser(st);
    st.wait();
  }

private:
  void build(const ConvGeom &g, bool weights) {
    using dnnl::memory;
    memory::dims sd = {g.N, g.C}, dd = {g.N, g.O}, wd, strides, dil, pl, pr;
    wd = g.G > 1 ? memory::dims{g.G, g.opg, g.cpg} : memory::dims{g.O, g.cpg};
    for (int i = 3 - g.nsp; i < 3; ++i) {
      sd.push_back(g.in[i]);
      dd.push_back(g.out[i]);
      wd.push_back(g.k[i]);
      strides.push_back(g.s[i]);
      dil.push_back(g.d[i] - 1); // oneDNN counts the holes
      pl.push_back(g.p[i]);
      pr.push_back(g.ph[i]);
    }
    auto f32 = memory::data_type::f32;
    auto any = memory::format_tag::any;
    memory::desc anyS(sd, f32, any), anyW(wd, f32, any), anyD(dd, f32, any);
    dnnl::engine &eng = dnnlEngine();
    dnnl::primitive_attr attr = userScratchpadAttr();
    // The backward primitives take the forward's descriptor as a hint.
    dnnl::convolution_forward::primitive_desc hint(
        dnnl::convolution_forward::desc(
            dnnl::prop_kind::forward_training,
            dnnl::algorithm::convolution_direct, anyS, anyW, anyD, strides, dil,
            pl, pr),
        eng);
    memory::desc pad;
    if (weights) {
      dnnl::convolution_backward_weights::primitive_desc pd(
          dnnl::convolution_backward_weights::desc(
              dnnl::algorithm::convolution_direct, anyS, anyW, anyD, strides,
              dil, pl, pr),
          attr, eng, hint);
      prim_ = dnnl::convolution_backward_weights(pd);
      a_.init(plainF32(sd), pd.src_desc(), true);
      b_.init(plainF32(dd), pd.diff_dst_desc(), true);
      r_.init(plainF32(wd), pd.diff_weights_desc(), false);
      pad = pd.scratchpad_desc();
      args_ = {{DNNL_ARG_SRC, a_.prim},
               {DNNL_ARG_DIFF_DST, b_.prim},
               {DNNL_ARG_DIFF_WEIGHTS, r_.prim}};
    } else {
      dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(
              dnnl::algorithm::convolution_direct, anyS, anyW, anyD, strides,
              dil, pl, pr),
          attr, eng, hint);
      prim_ = dnnl::convolution_backward_data(pd);
      a_.init(plainF32(dd), pd.diff_dst_desc(), true);
      b_.init(plainF32(wd), pd.weights_desc(), true);
      r_.init(plainF32(sd), pd.diff_src_desc(), false);
      pad = pd.scratchpad_desc();
      args_ = {{DNNL_ARG_DIFF_DST, a_.prim},
               {DNNL_ARG_WEIGHTS, b_.prim},
               {DNNL_ARG_DIFF_SRC, r_.prim}};
    }
    scratch_.resize(pad.get_size());
    args_[DNNL_ARG_SCRATCHPAD] = memory(pad, eng, scratch_.data());
  }

  dnnl::primitive prim_;
  Staged a_, b_, r_;
  Scratch scratch_;
  std::unordered_map<int, dnnl::memory> args_;
};

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

std::unique_ptr<Kernel> convGradKernel(const KernelSpec &spec, const ConvGeom &g,
                                       bool weights, std::unique_ptr<Kernel> direct) {
  std::unique_ptr<DnnlConvGrad> dnnl;
  if (spec.inputs[0]->dtype == DType::F32 && g.N > 0 && g.C > 0 && g.O > 0)
    dnnl = std::make_unique<DnnlConvGrad>(spec, g, weights);
  return dnnlOrDirect(std::move(dnnl), std::move(direct));
}

std::unique_ptr<Kernel> makeConvInputGrad(const KernelSpec &spec) {
  expectArity(spec, 2, 1);
  need(spec, spec.inputs[0], "dy");
  need(spec, spec.inputs[1], "weight");
  need(spec, spec.outputs[0], "the result");
  ConvGeom g = convGeom(spec, *spec.outputs[0], *spec.inputs[1], *spec.inputs[0]);
  auto direct = byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([g](ExecContext &, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]), *w = static_cast<const T *>(in[1]);
      T *dx = static_cast<T *>(out[0]);
      int64_t IS = g.inSize(), OS = g.outSize(), KS = g.kSize();
      parallelRange(g.N * g.C, g.N * g.C * IS * g.opg * KS, [&](int64_t b, int64_t e) {
        std::vector<double> acc(IS);
        for (int64_t nc = b; nc < e; ++nc) {
          int64_t n = nc / g.C, c = nc % g.C, grp = c / g.cpg, cl = c % g.cpg;
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t ol = 0; ol < g.opg; ++ol) {
            int64_t o = grp * g.opg + ol;
            const T *dyp = dy + (n * g.O + o) * OS;
            const T *wp = w + (o * g.cpg + cl) * KS;
            forTaps(g, [&](int64_t i, int64_t k, int64_t op) {
              acc[i] += double(dyp[op]) * double(wp[k]);
            });
          }
          T *dxp = dx + nc * IS;
          for (int64_t i = 0; i < IS; ++i)
            dxp[i] = T(acc[i]);
        }
      });
    });
  });
  return convGradKernel(spec, g, false, std::move(direct));
}

std::unique_ptr<Kernel> makeConvWeightGrad(const KernelSpec &spec) {
  expectArity(spec, 2, 1);
  need(spec, spec.inputs[0], "input");
  need(spec, spec.inputs[1], "dy");
  need(spec, spec.outputs[0], "the result");
  ConvGeom g = convGeom(spec, *spec.inputs[0], *spec.outputs[0], *spec.inputs[1]);
  auto direct = byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([g](ExecContext &, const void *const *in, void *const *out) {
      const T *x = static_cast<const T *>(in[0]), *dy = static_cast<const T *>(in[1]);
      T *dw = static_cast<T *>(out[0]);
      int64_t IS = g.inSize(), OS = g.outSize(), KS = g.kSize();
      parallelRange(g.O * g.cpg, g.N * g.O * g.cpg * OS * KS, [&](int64_t b, int64_t e) {
        std::vector<double> acc(KS);
        for (int64_t oc = b; oc < e; ++oc) {
          int64_t o = oc / g.cpg, cl = oc % g.cpg, c = (o / g.opg) * g.cpg + cl;
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t n = 0; n < g.N; ++n) {
            const T *xp = x + (n * g.C + c) * IS;
            const T *dyp = dy + (n * g.O + o) * OS;
            forTaps(g, [&](int64_t i, int64_t k, int64_t op) {
              acc[k] += double(dyp[op]) * double(xp[i]);
            });
          }
          for (int64_t k = 0; k < KS; ++k)
            dw[oc * KS + k] = T(acc[k]);
        }
      });
    });
  });
  return convGradKernel(spec, g, true, std::move(direct));
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// Spatial arrays hold the last `nsp` entries; leading ones are neutral.
struct PoolG {
  int nsp = 0;
  int64_t batch = 0, channels = 0;
  int64_t planes = 0;
  bool emptyWindow = false; // some window has no real element
  bool anyCeilPad = false;
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, k{1, 1, 1}, s{1, 1, 1},
      d{1, 1, 1}, p{0, 0, 0}, ph{0, 0, 0}, cp{0, 0, 0};
  bool includePad = false;
};

PoolG poolGeom(const KernelSpec &spec, const TensorDesc &x, const TensorDesc &y,
               bool avg) {
  int64_t nsp = x.rank() - 2;
  if (nsp < 1 || nsp > 3 || y.rank() != x.rank() || x.shape[0] != y.shape[0] ||
      x.shape[1] != y.shape[1])
    fail(spec, "input and dy must be [N, C, D...] alike");
  PoolG g;
  g.nsp = (int)nsp;
  g.batch = x.shape[0];
  g.channels = x.shape[1];
  g.planes = x.shape[0] * x.shape[1];
  auto k = spec.attrs.getInts("kernel"), st = spec.attrs.getInts("strides"),
       di = spec.attrs.getInts("dilations"), pa = spec.attrs.getInts("padding");
  std::vector<int64_t> cp;
  if (avg) {
    g.includePad = spec.attrs.getBool("count_include_pad", false);
    cp = spec.attrs.getInts("ceil_pad", std::vector<int64_t>{});
  }
  if ((int64_t)k.size() != nsp || (int64_t)st.size() != nsp ||
      (int64_t)di.size() != nsp || (int64_t)pa.size() != 2 * nsp ||
      (!cp.empty() && (int64_t)cp.size() != nsp))
    fail(spec, "window attributes do not match the rank");
  int off = 3 - (int)nsp;
  for (int64_t i = 0; i < nsp; ++i) {
    g.in[off + i] = x.shape[2 + i];
    g.out[off + i] = y.shape[2 + i];
    g.k[off + i] = k[i];
    g.s[off + i] = st[i];
    g.d[off + i] = di[i];
    g.p[off + i] = pa[i];
    g.ph[off + i] = pa[i + nsp];
    g.cp[off + i] = cp.empty() ? 0 : cp[i];
    g.anyCeilPad |= g.cp[off + i] > 0;
    int64_t span = di[i] * (k[i] - 1) + 1;
    if (st[i] < 1 || di[i] < 1 ||
        (x.shape[2 + i] + pa[i] + pa[i + nsp] - span) / st[i] + 1 != y.shape[2 + i])
      fail(spec, "dy's spatial size does not match the pooling");
    for (int64_t o = 0; o < y.shape[2 + i]; ++o) {
      bool real = false;
      for (int64_t t = 0; t < k[i] && !real; ++t) {
        int64_t pos = o * st[i] - pa[i] + t * di[i];
        real = pos >= 0 && pos < x.shape[2 + i];
      }
      g.emptyWindow |= !real;
    }
  }
  return g;
}

/// max_pool_grad (dy, x -> dx) or avg_pool_grad (dy -> dx) in f32 on
/// oneDNN's pooling_v2_backward, on the plain layouts. Max pooling first
/// re-runs the forward in training mode to get the argmax workspace.
class DnnlPoolGrad {
public:
  /// Null when oneDNN does not compute `g` the way the direct loop does.
  static std::unique_ptr<DnnlPoolGrad> create(const PoolG &g, bool isMax) {
    if (g.planes == 0 || g.emptyWindow || (!isMax && g.includePad && g.anyCeilPad))
      return nullptr;
    try {
      return std::unique_ptr<DnnlPoolGrad>(new DnnlPoolGrad(g, isMax));
    } catch (const dnnl::error &) {
      return nullptr; // the direct loop computes it
    }
  }

  /// The kernel's operands: dy (and, for max, x) -> dx.
  void run(const void *const *in, void *const *out) {
    dnnl::stream &st = dnnlStream();
    if (isMax_) {
      src_.set_data_handle(const_cast<void *>(in[1]));
      fwd_.execute(st, fwdArgs_);
    }
    diffDst_.set_data_handle(const_cast<void *>(in[0]));
    diffSrc_.set_data_handle(out[0]);
    bwd_.execute(st, bwdArgs_);
    st.wait();
  }

private:
  DnnlPoolGrad(const PoolG &g, bool isMax) : isMax_(isMax) {
    using dnnl::memory;
    memory::dims sd = {g.batch, g.channels}, dd = {g.batch, g.channels}, k, s,
                 d, pl, pr;
    for (int i = 3 - g.nsp; i < 3; ++i) {
      sd.push_back(g.in[i]);
      dd.push_back(g.out[i]);
      k.push_back(g.k[i]);
      s.push_back(g.s[i]);
      d.push_back(g.d[i] - 1); // oneDNN counts the holes
      pl.push_back(g.p[i]);
      pr.push_back(g.ph[i]);
    }
    dnnl::algorithm alg = isMax ? dnnl::algorithm::pooling_max
                          : g.includePad
                              ? dnnl::algorithm::pooling_avg_include_padding
                              : dnnl::algorithm::pooling_avg_exclude_padding;
    dnnl::engine &eng = dnnlEngine();
    memory::desc smd = plainF32(sd), dmd = plainF32(dd);
    dnnl::pooling_v2_forward::primitive_desc fpd(
        dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_training, alg,
                                       smd, dmd, s, k, d, pl, pr),
        userScratchpadAttr(), eng);
    dnnl::pooling_v2_backward::primitive_desc bpd(
        dnnl::pooling_v2_backward::desc(alg, smd, dmd, s, k, d, pl, pr),
        userScratchpadAttr(), eng, fpd);
    bwd_ = dnnl::pooling_v2_backward(bpd);
    diffDst_ = memory(dmd, eng, nullptr);
    diffSrc_ = memory(smd, eng, nullptr);
    size_t padBytes = bpd.scratchpad_desc().get_size();
    if (isMax) {
      fwd_ = dnnl::pooling_v2_forward(fpd);
      src_ = memory(smd, eng, nullptr);
      dstBuf_.resize(dmd.get_size());
      wsBuf_.resize(fpd.workspace_desc().get_size());
      padBytes = std::max(padBytes, fpd.scratchpad_desc().get_size());
    }
    // The two primitives run one after the other, so they share a scratchpad.
    scratch_.resize(padBytes);
    bwdArgs_ = {{DNNL_ARG_DIFF_DST, diffDst_},
                {DNNL_ARG_DIFF_SRC, diffSrc_},
                {DNNL_ARG_SCRATCHPAD,
                 memory(bpd.scratchpad_desc(), eng, scratch_.data())}};
    if (isMax) {
      memory ws(fpd.workspace_desc(), eng, wsBuf_.data());
      fwdArgs_ = {{DNNL_ARG_SRC, src_},
                  {DNNL_ARG_DST, memory(dmd, eng, dstBuf_.data())},
                  {DNNL_ARG_WORKSPACE, ws},
                  {DNNL_ARG_SCRATCHPAD,
                   memory(fpd.scratchpad_desc(), eng, scratch_.data())}};
      bwdArgs_[DNNL_ARG_WORKSPACE] = ws;
    }
  }

  bool isMax_;
  dnnl::pooling_v2_forward fwd_;
  dnnl::pooling_v2_backward bwd_;
  dnnl::memory src_, diffDst_, diffSrc_;
  Scratch dstBuf_, wsBuf_, scratch_;
  std::unordered_map<int, dnnl::memory> fwdArgs_, bwdArgs_;
};

std::unique_ptr<Kernel> poolGradKernel(const KernelSpec &spec, const PoolG &g,
                                       bool isMax, std::unique_ptr<Kernel> direct) {
  std::unique_ptr<DnnlPoolGrad> dnnl;
  if (spec.inputs[0]->dtype == DType::F32)
    dnnl = DnnlPoolGrad::create(g, isMax);
  return dnnlOrDirect(std::move(dnnl), std::move(direct));
}

std::unique_ptr<Kernel> makeMaxPoolGrad(const KernelSpec &spec) {
  expectArity(spec, 2, 1);
  need(spec, spec.inputs[0], "dy");
  need(spec, spec.inputs[1], "x");
  sameDesc(spec, spec.outputs[0], spec.inputs[1], "the result");
  PoolG g = poolGeom(spec, *spec.inputs[1], *spec.inputs[0], false);
  auto direct = byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([g](ExecContext &, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]), *x = static_cast<const T *>(in[1]);
      T *dx = static_cast<T *>(out[0]);
      int64_t IS = g.in[0] * g.in[1] * g.in[2], OS = g.out[0] * g.out[1] * g.out[2];
      parallelRange(g.planes, g.planes * OS * g.k[0] * g.k[1] * g.k[2], [&](int64_t b, int64_t e) {
        for (int64_t pl = b; pl < e; ++pl) {
          const T *xp = x + pl * IS, *dyp = dy + pl * OS;
          T *dxp = dx + pl * IS;
          std::fill(dxp, dxp + IS, T(0));
          for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
            for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
              for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
                int64_t best = -1;
                T bv = T(0);
                for (int64_t k0 = 0; k0 < g.k[0]; ++k0) {
                  int64_t i0 = o0 * g.s[0] - g.p[0] + k0 * g.d[0];
                  if (i0 < 0 || i0 >= g.in[0]) continue;
                  for (int64_t k1 = 0; k1 < g.k[1]; ++k1) {
                    int64_t i1 = o1 * g.s[1] - g.p[1] + k1 * g.d[1];
                    if (i1 < 0 || i1 >= g.in[1]) continue;
                    for (int64_t k2 = 0; k2 < g.k[2]; ++k2) {
                      int64_t i2 = o2 * g.s[2] - g.p[2] + k2 * g.d[2];
                      if (i2 < 0 || i2 >= g.in[2]) continue;
                      int64_t i = (i0 * g.in[1] + i1) * g.in[2] + i2;
                      if (best < 0 || xp[i] > bv || std::isnan(xp[i])) {
                        if (best >= 0 && std::isnan(bv)) continue;
                        best = i;
                        bv = xp[i];
                      }
                    }
                  }
                }
                if (best >= 0)
                  dxp[best] += dyp[(o0 * g.out[1] + o1) * g.out[2] + o2];
              }
        }
      });
    });
  });
  return poolGradKernel(spec, g, true, std::move(direct));
}

std::unique_ptr<Kernel> makeAvgPoolGrad(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  need(spec, spec.inputs[0], "dy");
  need(spec, spec.outputs[0], "the result");
  PoolG g = poolGeom(spec, *spec.outputs[0], *spec.inputs[0], true);
  // Per dim and output index: valid taps [lo, hi) and the divisor factor, as
  // the forward avg_pool counts them.
  std::array<std::vector<int64_t>, 3> lo, hi, dv;
  for (int i = 0; i < 3; ++i) {
    int64_t limit = g.in[i] + g.ph[i] - g.cp[i];
    for (int64_t o = 0; o < g.out[i]; ++o) {
      int64_t start = o * g.s[i] - g.p[i], l = g.k[i], h = 0, counted = 0;
      for (int64_t t = 0; t < g.k[i]; ++t) {
        int64_t pos = start + t * g.d[i];
        if (pos >= 0 && pos < g.in[i]) {
          l = std::min(l, t);
          h = t + 1;
        }
        if (pos < limit)
          ++counted;
      }
      if (h <= l)
        l = h = 0;
      lo[i].push_back(l);
      hi[i].push_back(h);
      dv[i].push_back(g.includePad ? counted : h - l);
    }
  }
  auto direct = byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([g, lo, hi, dv](ExecContext &, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]);
      T *dx = static_cast<T *>(out[0]);
      int64_t IS = g.in[0] * g.in[1] * g.in[2], OS = g.out[0] * g.out[1] * g.out[2];
      parallelRange(g.planes, g.planes * OS * g.k[0] * g.k[1] * g.k[2], [&](int64_t b, int64_t e) {
        for (int64_t pl = b; pl < e; ++pl) {
          const T *dyp = dy + pl * OS;
          T *dxp = dx + pl * IS;
          std::fill(dxp, dxp + IS, T(0));
          for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
            for (int64_t o1 = 0; o1 < g.out[1]; ++o1)
              for (int64_t o2 = 0; o2 < g.out[2]; ++o2) {
                int64_t div = dv[0][o0] * dv[1][o1] * dv[2][o2];
                if (div == 0)
                  continue;
                T v = dyp[(o0 * g.out[1] + o1) * g.out[2] + o2] / T(div);
                for (int64_t k0 = lo[0][o0]; k0 < hi[0][o0]; ++k0) {
                  int64_t i0 = o0 * g.s[0] - g.p[0] + k0 * g.d[0];
                  for (int64_t k1 = lo[1][o1]; k1 < hi[1][o1]; ++k1) {
                    int64_t i1 = o1 * g.s[1] - g.p[1] + k1 * g.d[1];
                    for (int64_t k2 = lo[2][o2]; k2 < hi[2][o2]; ++k2) {
                      int64_t i2 = o2 * g.s[2] - g.p[2] + k2 * g.d[2];
                      dxp[(i0 * g.in[1] + i1) * g.in[2] + i2] += v;
                    }
                  }
                }
              }
        }
      });
    });
  });
  return poolGradKernel(spec, g, false, std::move(direct));
}

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
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([=](ExecContext &, const void *const *in, void *const *out) {
      const T *dy = static_cast<const T *>(in[0]);
      T *d = static_cast<T *>(out[0]);
      std::vector<int64_t> pos(ni);
      for (int64_t i = 0; i < ni; ++i) {
        int64_t a = loadIndex(it, in[1], i);
        if (a < 0)
          a += A;
        if (a < 0 || a >= A)
          throw Error("kernel 'gather_grad': index " + std::to_string(loadIndex(it, in[1], i)) +
                      " is out of range for size " + std::to_string(A));
        pos[i] = a;
      }
      std::memset(d, 0, sizeof(T) * outer * A * inner);
      // Split over the trailing elements: each thread owns columns, and
      // indices are added in order.
      parallelRange(outer * inner, outer * ni * inner, [&](int64_t b, int64_t e) {
        for (int64_t oc = b; oc < e; ++oc) {
          int64_t o = oc / inner, c = oc % inner;
          for (int64_t i = 0; i < ni; ++i)
            d[(o * A + pos[i]) * inner + c] += dy[(o * ni + i) * inner + c];
        }
      });
    });
  });
}

std::unique_ptr<Kernel> makeSliceGrad(const KernelSpec &spec) {
  expectArity(spec, 1, 1);
  need(spec, spec.inputs[0], "dy");
  need(spec, spec.outputs[0], "the result");
  const auto &xs = spec.outputs[0]->shape, &ys = spec.inputs[0]->shape;
  auto st = spec.attrs.getInts("starts"), sp = spec.attrs.getInts("strides");
  size_t r = xs.size();
  if (st.size() != r || sp.size() != r || ys.size() != r)
    fail(spec, "starts and strides need one entry per dim");
  for (size_t i = 0; i < r; ++i)
    if (ys[i] > 0 && (st[i] < 0 || st[i] >= xs[i] || st[i] + (ys[i] - 1) * sp[i] < 0 ||
                      st[i] + (ys[i] - 1) * sp[i] >= xs[i]))
      fail(spec, "slice out of range in dim " + std::to_string(i));
  std::vector<int64_t> xstr(r, 1);
  for (int64_t i = (int64_t)r - 2; i >= 0; --i)
    xstr[i] = xstr[i + 1] * xs[i + 1];
  // Walk dy (contiguous) and its place in dx (strided) together.
  std::vector<int64_t> ystr(r, 1), dstr(r), base(2, 0);
  for (int64_t i = (int64_t)r - 2; i >= 0; --i)
    ystr[i] = ystr[i + 1] * ys[i + 1];
  for (size_t i = 0; i < r; ++i) {
    dstr[i] = sp[i] * xstr[i];
    base[1] += (ys[i] > 0 ? st[i] : 0) * xstr[i];
  }
  loops::Walk walk(ys, {ystr, dstr}, base);
  int64_t nx = spec.outputs[0]->numel();
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
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
  });
}

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

//===----------------------------------------------------------------------===//
// Optimizer updates and copy
//===----------------------------------------------------------------------===//

void checkUpdate(const KernelSpec &spec, size_t nTensors, size_t nin, size_t nout) {
  expectArity(spec, nin, nout);
  need(spec, spec.inputs[0], "param");
  for (size_t i = 1; i < nTensors; ++i)
    sameDesc(spec, spec.inputs[i], spec.inputs[0], "every tensor operand");
  for (size_t i = 0; i < nout; ++i)
    sameDesc(spec, spec.outputs[i], spec.inputs[0], "every result");
  if (!spec.inputs[nTensors] || spec.inputs[nTensors]->dtype != DType::F32 ||
      spec.inputs[nTensors]->numel() != 1)
    fail(spec, "lr must be an f32 scalar");
}

std::unique_ptr<Kernel> makeSgd(const KernelSpec &spec) {
  checkUpdate(spec, 2, 3, 1);
  double wd = userFloat(spec.attrs.getFloat("weight_decay", 0.0));
  int64_t n = spec.inputs[0]->numel();
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([=](ExecContext &, const void *const *in, void *const *out) {
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
  checkUpdate(spec, 3, 4, 2);
  double wd = userFloat(spec.attrs.getFloat("weight_decay", 0.0));
  double mom = userFloat(spec.attrs.getFloat("momentum"));
  bool nesterov = spec.attrs.getBool("nesterov", false);
  int64_t n = spec.inputs[0]->numel();
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([=](ExecContext &, const void *const *in, void *const *out) {
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
  checkUpdate(spec, 4, 6, 3);
  if (!spec.inputs[5] || spec.inputs[5]->dtype != DType::I64 || spec.inputs[5]->numel() != 1)
    fail(spec, "step must be an i64 scalar");
  double b1 = userFloat(spec.attrs.getFloat("beta1")), b2 = userFloat(spec.attrs.getFloat("beta2"));
  double eps = userFloat(spec.attrs.getFloat("eps"));
  double wd = userFloat(spec.attrs.getFloat("weight_decay", 0.0));
  bool decoupled = spec.attrs.getBool("decoupled", false);
  int64_t n = spec.inputs[0]->numel();
  return byFloat(spec, spec.inputs[0]->dtype, [&](auto tag) {
    using T = decltype(tag);
    return make([=](ExecContext &, const void *const *in, void *const *out) {
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

void registerBackwardKernels(KernelRegistry &r) {
  r.add("relu_grad", makeReluGrad);
  r.add("gelu_grad", makeGeluGrad);
  r.add("dropout_grad", makeDropoutGrad);
  r.add("softmax_grad", [](const KernelSpec &s) { return makeSoftmaxGrad(s, false); });
  r.add("log_softmax_grad", [](const KernelSpec &s) { return makeSoftmaxGrad(s, true); });
  r.add("layer_norm_grad", makeLayerNormGrad);
  r.add("batch_norm_train_grad", makeBatchNormTrainGrad);
  r.add("conv_input_grad", makeConvInputGrad);
  r.add("conv_weight_grad", makeConvWeightGrad);
  r.add("max_pool_grad", makeMaxPoolGrad);
  r.add("avg_pool_grad", makeAvgPoolGrad);
  r.add("gather_grad", makeGatherGrad);
  r.add("slice_grad", makeSliceGrad);
  r.add("softmax_cross_entropy_grad", [](const KernelSpec &s) { return makeClassLossGrad(s, true); });
  r.add("nll_loss_grad", [](const KernelSpec &s) { return makeClassLossGrad(s, false); });
  r.add("sgd_update", makeSgd);
  r.add("momentum_update", makeMomentum);
  r.add("adam_update", makeAdam);
  r.add("copy", makeCopy);
}

} // namespace kiln::rt::cpu
