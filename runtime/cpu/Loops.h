//===- Loops.h - shared loops of the elementwise/reduction/shape kernels -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Helpers shared by Elementwise.cpp, Reduction.cpp and Shape.cpp (and free
// for other kernel files to include):
//  - storage types for every DType (F16/BF16 hold the 16 bits, Bool8 holds a
//    byte 0/1), the type each computes in (Calc: float for 16-bit floats),
//    load/store, and castValue, the one scalar conversion rule of `cast`;
//  - dispatchType / dispatchSize: call a generic lambda with a tag of the
//    storage type of a dtype, or with an unsigned integer of its size;
//  - Walk: a strided walk over an index space shared by up to kMaxOperands
//    operands, with size-1 dims dropped and mergeable dims merged at factory
//    time, visited as contiguous innermost runs by an odometer (no index
//    division in the hot loop); used for broadcasting, transposes, slices;
//  - parallelRange: a static OpenMP split of [0, n) when the work is big;
//  - KILN_DISPATCH: AVX-512 and baseline clones of a function, picked once
//    at load time by the CPU it runs on.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CPU_LOOPS_H
#define KILN_RUNTIME_CPU_LOOPS_H

#include "kiln/runtime/Kernel.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

/// Put before a hot leaf function (not a lambda, and not one containing an
/// OpenMP region: GCC outlines the region's body before cloning, so the
/// clones would share a baseline body) to build it twice, for x86-64-v4
/// (AVX-512) and for the build's baseline (-march, runtime/CMakeLists.txt),
/// and call the one this CPU runs through an ifunc resolved at load time. A
/// no-op where the baseline already has AVX-512 (-march=native here), for
/// other compilers and processors, and with -DKILN_NO_DISPATCH.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&        \
    !defined(__AVX512F__) && !defined(KILN_NO_DISPATCH) &&                    \
    !defined(__SANITIZE_ADDRESS__)
#define KILN_DISPATCH __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define KILN_DISPATCH
#endif

namespace kiln::rt::cpu::loops {

//===----------------------------------------------------------------------===//
// Storage and compute types
//===----------------------------------------------------------------------===//

struct F16 { uint16_t bits; };
struct BF16 { uint16_t bits; };
struct Bool8 { uint8_t v; };

/// The type a storage type computes in.
template <typename T> struct CalcOf { using type = T; };
template <> struct CalcOf<F16> { using type = float; };
template <> struct CalcOf<BF16> { using type = float; };
template <> struct CalcOf<Bool8> { using type = bool; };
template <typename T> using Calc = typename CalcOf<T>::type;

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> ||
                          std::is_same_v<T, F16> || std::is_same_v<T, BF16>;
template <typename T> constexpr bool kIsBool = std::is_same_v<T, Bool8>;
template <typename T>
constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <typename T> inline Calc<T> load(const T *p, int64_t i) {
  if constexpr (std::is_same_v<T, F16>)
    return halfToFloat(p[i].bits);
  else if constexpr (std::is_same_v<T, BF16>)
    return bf16ToFloat(p[i].bits);
  else if constexpr (std::is_same_v<T, Bool8>)
    return p[i].v != 0;
  else
    return p[i];
}

template <typename T> inline void store(T *p, int64_t i, Calc<T> v) {
  if constexpr (std::is_same_v<T, F16>)
    p[i].bits = floatToHalf(v);
  else if constexpr (std::is_same_v<T, BF16>)
    p[i].bits = floatToBf16(v);
  else if constexpr (std::is_same_v<T, Bool8>)
    p[i].v = v ? 1 : 0;
  else
    p[i] = v;
}

/// Converts a computed value `v` (float, double, integer or bool) to the
/// compute type of storage type `To`, by the rules of `cast`: to bool is
/// v != 0; float to integer truncates toward zero, saturates out-of-range
/// values to the integer's range and maps NaN to 0; integer to integer wraps
/// (two's complement); to F16/BF16 goes through float (round to nearest even).
template <typename To, typename V> inline Calc<To> castValue(V v) {
  using C = Calc<To>;
  if constexpr (std::is_same_v<C, bool>) {
    return v != V(0);
  } else if constexpr (std::is_floating_point_v<C>) {
    return static_cast<C>(v);
  } else if constexpr (std::is_floating_point_v<V>) {
    double d = static_cast<double>(v);
    if (d != d)
      return C(0);
    if (d <= static_cast<double>(std::numeric_limits<C>::lowest()))
      return std::numeric_limits<C>::lowest();
    if (d >= static_cast<double>(std::numeric_limits<C>::max()))
      return std::numeric_limits<C>::max();
    return static_cast<C>(d);
  } else {
    return static_cast<C>(v); // integer or bool: modular
  }
}

/// Unsigned type for wrapping arithmetic on integer T (at least 32 bits so
/// that promotion to int cannot overflow).
template <typename T>
using WrapOf = std::conditional_t<(sizeof(T) < 4), uint32_t,
                                  std::make_unsigned_t<T>>;

template <typename T> inline T wrapAdd(T a, T b) {
  using W = WrapOf<T>;
  return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
}
template <typename T> inline T wrapSub(T a, T b) {
  using W = WrapOf<T>;
  return static_cast<T>(static_cast<W>(a) - static_cast<W>(b));
}
template <typename T> inline T wrapMul(T a, T b) {
  using W = WrapOf<T>;
  return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

/// Calls `f(T{})` with the storage type T of `t`.
template <typename F> auto dispatchType(DType t, F &&f) {
  switch (t) {
  case DType::F32: return f(float{});
  case DType::F64: return f(double{});
  case DType::F16: return f(F16{});
  case DType::BF16: return f(BF16{});
  case DType::I64: return f(int64_t{});
  case DType::I32: return f(int32_t{});
  case DType::I16: return f(int16_t{});
  case DType::I8: return f(int8_t{});
  case DType::U64: return f(uint64_t{});
  case DType::U32: return f(uint32_t{});
  case DType::U16: return f(uint16_t{});
  case DType::U8: return f(uint8_t{});
  case DType::Bool: break;
  }
  return f(Bool8{});
}

/// Calls `f(U{})` with the unsigned integer U of the size of `t` (for kernels
/// that only move elements).
template <typename F> auto dispatchSize(DType t, F &&f) {
  switch (dtypeSize(t)) {
  case 8: return f(uint64_t{});
  case 4: return f(uint32_t{});
  case 2: return f(uint16_t{});
  default: return f(uint8_t{});
  }
}

//===----------------------------------------------------------------------===//
// Shapes and parallel loops
//===----------------------------------------------------------------------===//

inline std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

/// Work (elements) below which loops stay serial.
constexpr int64_t kParallelWork = 32768;

/// Calls f(b, e) on a static split of [0, n) over the OpenMP threads when
/// `work` is big enough, else f(0, n) once. `f` must not throw.
template <typename F> void parallelRange(int64_t n, int64_t work, F &&f) {
  if (n <= 0)
    return;
  if (work < kParallelWork || n < 2 || omp_get_max_threads() < 2) {
    f((int64_t)0, n);
    return;
  }
#pragma omp parallel
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t b = n * t / nt, e = n * (t + 1) / nt;
    if (b < e)
      f(b, e);
  }
}

/// Row-major strides of `shape` (elements).
inline std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = (int64_t)shape.size() - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

/// The strides (elements) with which `in` is read when broadcast to `out`
/// (aligned at the right; broadcast dims get stride 0). The caller has
/// checked that `in` broadcasts to `out`.
inline std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &in,
                                             const std::vector<int64_t> &out) {
  std::vector<int64_t> s(out.size(), 0);
  std::vector<int64_t> cs = contiguousStrides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    s[off + i] = (in[i] == 1 && out[off + i] != 1) ? 0 : cs[i];
  return s;
}

//===----------------------------------------------------------------------===//
// Walk
//===----------------------------------------------------------------------===//

/// A walk over the row-major index space `dims` shared by `nop` operands,
/// each with its own element strides (any sign; 0 for broadcasting) and base
/// offset. Built once by the factory; forEachRun visits [b, e) of the linear
/// index space as runs along the innermost dim.
class Walk {
public:
  static constexpr int kMaxOperands = 4;
  static constexpr int kMaxRank = 32;

  Walk() = default;
  /// `strides[k]` has one entry per dim; `base[k]` (or 0) is operand k's
  /// offset of index 0. Throws Error for a rank over kMaxRank.
  Walk(const std::vector<int64_t> &dims,
       const std::vector<std::vector<int64_t>> &strides,
       const std::vector<int64_t> &base = {}) {
    nop_ = (int)strides.size();
    numel_ = 1;
    for (int64_t d : dims)
      numel_ *= d;
    for (int k = 0; k < nop_; ++k)
      base_[k] = k < (int)base.size() ? base[k] : 0;
    // Drop size-1 dims, merge dims i-1, i when every operand steps over dim
    // i-1 as one step of the merged dim.
    std::vector<int64_t> d;
    std::vector<std::vector<int64_t>> s(nop_);
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == 1)
        continue;
      bool merge = !d.empty();
      for (int k = 0; k < nop_ && merge; ++k)
        merge = s[k].back() == strides[k][i] * dims[i];
      if (merge) {
        d.back() *= dims[i];
        for (int k = 0; k < nop_; ++k)
          s[k].back() = strides[k][i];
      } else {
        d.push_back(dims[i]);
        for (int k = 0; k < nop_; ++k)
          s[k].push_back(strides[k][i]);
      }
    }
    if (d.empty()) {
      d.push_back(1);
      for (int k = 0; k < nop_; ++k)
        s[k].push_back(0);
    }
    if ((int)d.size() > kMaxRank)
      throw Error("tensors of rank " + std::to_string(d.size()) +
                  " (after merging dims) are not supported, at most " +
                  std::to_string(kMaxRank));
    rank_ = (int)d.size();
    for (int i = 0; i < rank_; ++i) {
      dims_[i] = d[i];
      for (int k = 0; k < nop_; ++k)
        strides_[k][i] = s[k][i];
    }
  }

  int64_t numel() const { return numel_; }
  int rank() const { return rank_; }
  int64_t dim(int i) const { return dims_[i]; }
  int64_t stride(int k, int i) const { return strides_[k][i]; }
  /// Operand k's stride along the innermost dim.
  int64_t inner(int k) const { return strides_[k][rank_ - 1]; }
  int64_t base(int k) const { return base_[k]; }

  /// Calls f(const int64_t *off, int64_t len) for each innermost run of
  /// [b, e): off[k] is operand k's element offset of the run's first index,
  /// and the run continues with stride inner(k).
  template <typename F> void forEachRun(int64_t b, int64_t e, F &&f) const {
    if (b >= e)
      return;
    int64_t idx[kMaxRank], off[kMaxOperands];
    int64_t rem = b;
    for (int i = rank_ - 1; i >= 0; --i) {
      idx[i] = rem % dims_[i];
      rem /= dims_[i];
    }
    for (int k = 0; k < nop_; ++k) {
      off[k] = base_[k];
      for (int i = 0; i < rank_; ++i)
        off[k] += idx[i] * strides_[k][i];
    }
    const int last = rank_ - 1;
    const int64_t n = dims_[last];
    while (true) {
      int64_t len = std::min(n - idx[last], e - b);
      f(static_cast<const int64_t *>(off), len);
      b += len;
      if (b >= e)
        return;
      // The run ended at the end of the innermost dim: carry.
      for (int k = 0; k < nop_; ++k)
        off[k] -= idx[last] * strides_[k][last];
      idx[last] = 0;
      for (int i = last - 1; i >= 0; --i) {
        ++idx[i];
        for (int k = 0; k < nop_; ++k)
          off[k] += strides_[k][i];
        if (idx[i] < dims_[i])
          break;
        for (int k = 0; k < nop_; ++k)
          off[k] -= dims_[i] * strides_[k][i];
        idx[i] = 0;
      }
    }
  }

  /// forEachRun over all of the walk, split over threads when big.
  template <typename F> void parallelRuns(F &&f) const {
    parallelRange(numel_, numel_,
                  [&](int64_t b, int64_t e) { forEachRun(b, e, f); });
  }

private:
  int nop_ = 0, rank_ = 0;
  int64_t numel_ = 0;
  int64_t dims_[kMaxRank] = {};
  int64_t strides_[kMaxOperands][kMaxRank] = {};
  int64_t base_[kMaxOperands] = {};
};

} // namespace kiln::rt::cpu::loops

#endif // KILN_RUNTIME_CPU_LOOPS_H
