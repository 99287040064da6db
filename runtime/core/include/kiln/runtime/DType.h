//===- DType.h - element types of the runtime -------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The element types a plan may name, their sizes and names, and the float16 /
// bfloat16 conversions kernels use (storage in 16 bits, arithmetic in float).
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_DTYPE_H
#define KILN_RUNTIME_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace kiln::rt {

enum class DType : uint8_t {
  F32, F64, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, Bool
};

/// Bytes per element (Bool is one byte, 0 or 1).
size_t dtypeSize(DType t);
/// The plan's name: "f32", "bf16", "i64", "i1", ...
const char *dtypeName(DType t);
/// Parses a plan name; false for an unknown one.
bool parseDType(std::string_view name, DType &out);
bool isFloat(DType t);
bool isSignedInt(DType t);
bool isUnsignedInt(DType t);

inline float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) { mant <<= 1; --exp; }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Round to nearest even, with overflow to infinity and NaN kept NaN.
inline uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) // inf or nan
    return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
  if (absx >= 0x477ff000u) // rounds to >= 65520: overflow
    return (uint16_t)(sign | 0x7c00);
  if (absx < 0x38800000u) { // subnormal or zero in half
    if (absx < 0x33000000u)
      return (uint16_t)sign;
    uint32_t e = absx >> 23, m = (absx & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e; // 14..24
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1)))
      ++r;
    return (uint16_t)(sign | r);
  }
  uint32_t r = absx + 0xfffu + ((absx >> 13) & 1); // round to nearest even
  return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

inline float bf16ToFloat(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) // NaN stays a quiet NaN
    return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

} // namespace kiln::rt

#endif // KILN_RUNTIME_DTYPE_H
