//===- NormUtil.h - shared helpers of the norm/softmax/loss kernels -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Float element access (f32, f64, and f16/bf16 stored in 16 bits and computed
// in float), a dtype dispatcher, a vectorisable exp for float, the row and
// tile log-sum-exp loops softmax and the class losses share, and a static
// OpenMP partitioner. Used by Norm.cpp, Softmax.cpp, Random.cpp and Loss.cpp.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CPU_NORMUTIL_H
#define KILN_RUNTIME_CPU_NORMUTIL_H

#include "FastMath.h"
#include "Loops.h"
#include "kiln/runtime/Kernel.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

namespace kiln::rt::cpu::norm {

/// 16-bit float storage types (the bits as stored).
struct Half { uint16_t bits; };
struct BF16 { uint16_t bits; };

/// The type a storage type computes in: double for f64, float otherwise.
template <typename S> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };
template <typename S> using Acc = typename AccOf<S>::type;

inline float ld(const float *p, int64_t i) { return p[i]; }
inline double ld(const double *p, int64_t i) { return p[i]; }
inline float ld(const Half *p, int64_t i) { return halfToFloat(p[i].bits); }
inline float ld(const BF16 *p, int64_t i) { return bf16ToFloat(p[i].bits); }
inline void st(float *p, int64_t i, float v) { p[i] = v; }
inline void st(double *p, int64_t i, double v) { p[i] = v; }
inline void st(Half *p, int64_t i, float v) { p[i].bits = floatToHalf(v); }
inline void st(BF16 *p, int64_t i, float v) { p[i].bits = floatToBf16(v); }

/// Calls `f(S{})` with the storage type of the float dtype `t`; any other
/// dtype is an "unsupported element type" Error.
template <typename F>
auto dispatchFloat(const KernelSpec &spec, DType t, F &&f) {
  switch (t) {
  case DType::F32: return f(float{});
  case DType::F64: return f(double{});
  case DType::F16: return f(Half{});
  case DType::BF16: return f(BF16{});
  default: unsupportedType(spec, t);
  }
}

/// Element `i` of a float tensor of any float dtype, as double (for small
/// per-channel / per-class parameters).
inline double loadAny(DType t, const void *p, int64_t i) {
  switch (t) {
  case DType::F32: return static_cast<const float *>(p)[i];
  case DType::F64: return static_cast<const double *>(p)[i];
  case DType::F16: return halfToFloat(static_cast<const uint16_t *>(p)[i]);
  case DType::BF16: return bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  default: return NAN;
  }
}

inline void storeAny(DType t, void *p, int64_t i, double v) {
  switch (t) {
  case DType::F32: static_cast<float *>(p)[i] = (float)v; break;
  case DType::F64: static_cast<double *>(p)[i] = v; break;
  case DType::F16: static_cast<uint16_t *>(p)[i] = floatToHalf((float)v); break;
  case DType::BF16: static_cast<uint16_t *>(p)[i] = floatToBf16((float)v); break;
  default: break;
  }
}

/// Throws unless `d` is present and has a float dtype.
inline void expectFloat(const KernelSpec &spec, const TensorDesc *d,
                        const char *what) {
  if (!d)
    throw Error("kernel '" + spec.kernel + "': missing " + what);
  if (!isFloat(d->dtype))
    unsupportedType(spec, d->dtype);
}

/// Throws unless `got` equals `want`, naming `what`.
inline void expectDesc(const KernelSpec &spec, const TensorDesc *got,
                       const TensorDesc &want, const char *what) {
  if (!got || *got != want)
    throw Error("kernel '" + spec.kernel + "': " + what + " must be " +
                want.str() + ", got " + (got ? got->str() : "none"));
}

/// An axis attribute in [-rank, rank), normalised to [0, rank).
inline int64_t normAxis(const KernelSpec &spec, const char *name, int64_t axis,
                        int64_t rank) {
  if (axis < -rank || axis >= rank)
    throw Error("kernel '" + spec.kernel + "': " + name + " " +
                std::to_string(axis) + " is out of range for rank " +
                std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// Threading: the shared static split of the other CPU kernels (Loops.h).
using loops::kParallelWork;
using loops::parallelRange;

/// Max and log-sum-exp of the contiguous row x[0..n): on return `m` is the
/// maximum and `lse` is log(sum(exp(x - m))).
template <typename S> void rowLse(const S *x, int64_t n, Acc<S> &m, Acc<S> &lse) {
  using A = Acc<S>;
  A mx = -std::numeric_limits<A>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n; ++j) {
    A v = ld(x, j);
    mx = v > mx ? v : mx;
  }
  A s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j)
    s += expAcc(ld(x, j) - mx);
  m = mx;
  lse = std::log(s);
}

/// The width of a strided tile: positions handled together when the reduced
/// axis is not the innermost one.
constexpr int64_t kTile = 64;

/// For `kw` (<= kTile) adjacent positions k, the max m[k] and log-sum-exp
/// lse[k] of x[j * stride + k], j in [0, n).
template <typename S>
void tileLse(const S *x, int64_t n, int64_t stride, int64_t kw, Acc<S> *m,
             Acc<S> *lse) {
  using A = Acc<S>;
  for (int64_t k = 0; k < kw; ++k) {
    m[k] = -std::numeric_limits<A>::infinity();
    lse[k] = 0;
  }
  for (int64_t j = 0; j < n; ++j) {
    const S *row = x + j * stride;
#pragma omp simd
    for (int64_t k = 0; k < kw; ++k) {
      A v = ld(row, k);
      m[k] = v > m[k] ? v : m[k];
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    const S *row = x + j * stride;
#pragma omp simd
    for (int64_t k = 0; k < kw; ++k)
      lse[k] += expAcc(ld(row, k) - m[k]);
  }
  for (int64_t k = 0; k < kw; ++k)
    lse[k] = std::log(lse[k]);
}

/// The "mean" / "sum" / "none" reduction attribute of the losses.
enum class Reduction { None, Sum, Mean };

inline Reduction parseReduction(const KernelSpec &spec) {
  std::string r = spec.attrs.getString("reduction", "mean");
  if (r == "mean")
    return Reduction::Mean;
  if (r == "sum")
    return Reduction::Sum;
  if (r == "none")
    return Reduction::None;
  throw Error("kernel '" + spec.kernel + "': reduction must be mean, sum or none, got '" +
              r + "'");
}

} // namespace kiln::rt::cpu::norm

#endif // KILN_RUNTIME_CPU_NORMUTIL_H
