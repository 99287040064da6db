//===- CheckedMath.h - overflow-checked tensor sizes ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The one definition of how big a tensor may be and of the arithmetic that
// computes sizes from a model: elements x dtype size, batch x sample, buffer
// offsets and arena ends. A model is untrusted input, so every such size is
// computed here and checked, never with a bare `*` or `+` that could wrap
// (a 2^62-element f32 tensor is 2^64 bytes: 0 in 64 bits). Header-only,
// free of MLIR and of the runtime library: the compiler (import, conversion,
// the krt buffer verifier, buffer assignment, the plan writer) and the
// runtime include it alike.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CHECKEDMATH_H
#define KILN_RUNTIME_CHECKEDMATH_H

#include "kiln/runtime/DType.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace kiln::rt {

/// The largest tensor, buffer or arena, in bytes: 2^60 (1 EiB). Below it a
/// tensor's element count is an int64, and the sum of a tensor's size with
/// an offset under the same limit cannot overflow an int64. The plan loader
/// and the tensor readers refuse larger sizes too.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 60;
/// kMaxTensorBytes as messages name it.
constexpr const char *kMaxTensorBytesText = "2^60 bytes";

/// out = a * b; false (out unspecified) when the product overflows int64.
constexpr bool checkedMul(int64_t a, int64_t b, int64_t &out) {
  return !__builtin_mul_overflow(a, b, &out);
}

/// out = a + b; false (out unspecified) when the sum overflows int64.
constexpr bool checkedAdd(int64_t a, int64_t b, int64_t &out) {
  return !__builtin_add_overflow(a, b, &out);
}

/// out = n rounded up to a multiple of `align` (a power of two); false when
/// n is negative or the result overflows int64.
constexpr bool checkedAlignUp(int64_t n, int64_t align, int64_t &out) {
  if (n < 0 || align <= 0 || (align & (align - 1)))
    return false;
  int64_t sum = 0;
  if (!checkedAdd(n, align - 1, sum))
    return false;
  out = sum & ~(align - 1);
  return true;
}

/// The element count of a tensor of `shape` with `elemBytes`-byte elements.
/// False when a dimension is negative (dynamic) or when the product of the
/// non-zero dimensions times `elemBytes` exceeds kMaxTensorBytes: the
/// product of the non-zero dimensions is bounded too, so that a shape such
/// as [0, 2^40, 2^40] (empty, but whose size overflows when multiplied left
/// to right) is refused as the plan loader refuses it.
template <class Shape>
constexpr bool checkedNumel(const Shape &shape, size_t elemBytes,
                            int64_t &numel) {
  if (elemBytes == 0)
    elemBytes = 1;
  const int64_t maxNonZero = kMaxTensorBytes / int64_t(elemBytes);
  int64_t nonZero = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0)
      return false;
    if (d == 0) {
      zero = true;
      continue;
    }
    if (!checkedMul(nonZero, d, nonZero) || nonZero > maxNonZero)
      return false;
  }
  numel = zero ? 0 : nonZero;
  return true;
}

/// The byte size of a tensor of `shape` with `elemBytes`-byte elements (one
/// for a boolean), or false as checkedNumel. A true result is at most
/// kMaxTensorBytes.
template <class Shape>
constexpr bool checkedBytes(const Shape &shape, size_t elemBytes,
                            int64_t &bytes) {
  int64_t n = 0;
  if (!checkedNumel(shape, elemBytes, n))
    return false;
  bytes = n * int64_t(elemBytes == 0 ? 1 : elemBytes);
  return true;
}

/// checkedBytes with the element size of `dtype` (DType.h).
template <class Shape>
constexpr bool checkedBytes(const Shape &shape, DType dtype, int64_t &bytes) {
  return checkedBytes(shape, dtypeSize(dtype), bytes);
}

constexpr bool checkedBytes(std::initializer_list<int64_t> shape,
                            size_t elemBytes, int64_t &bytes) {
  return checkedBytes<std::initializer_list<int64_t>>(shape, elemBytes, bytes);
}

// What the functions promise, checked wherever this header is compiled.
static_assert([] {
  int64_t b = -1;
  return checkedBytes({2, 3}, 4, b) && b == 24;
}());
static_assert([] { // 2^62 f32 elements: 2^64 bytes, which wraps to 0
  int64_t b = -1;
  return !checkedBytes({int64_t(1) << 62}, 4, b);
}());
static_assert([] { // empty, but 2^40 x 2^40 overflows left to right
  int64_t b = -1;
  return !checkedBytes({0, int64_t(1) << 40, int64_t(1) << 40}, 1, b);
}());
static_assert([] {
  int64_t b = -1;
  return checkedBytes({0, 7}, 8, b) && b == 0 &&
         checkedBytes({kMaxTensorBytes / 8}, 8, b) && b == kMaxTensorBytes &&
         !checkedBytes({kMaxTensorBytes / 8 + 1}, 8, b) &&
         !checkedBytes({-1, 2}, 4, b);
}());
static_assert([] {
  int64_t a = -1;
  return checkedAlignUp(65, 64, a) && a == 128 &&
         !checkedAlignUp(INT64_MAX - 3, 64, a);
}());

} // namespace kiln::rt

#endif // KILN_RUNTIME_CHECKEDMATH_H
