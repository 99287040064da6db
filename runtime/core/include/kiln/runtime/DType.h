//===- DType.h - element types of the runtime -------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The element types a plan may name, their sizes and names (one table,
// KILN_DTYPES, that the compiler includes too), and the float16 / bfloat16
// conversions kernels use (storage in 16 bits, arithmetic in float). Free of
// MLIR and of the runtime library, so the compiler can include it.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_DTYPE_H
#define KILN_RUNTIME_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace kiln::rt {

/// What kind of number a dtype holds.
enum class DTypeKind : uint8_t { Float, SignedInt, UnsignedInt, Bool };

/// The element types, defined once: X(Enum, plan name, bytes, kind). The
/// enum, the functions below, the compiler's MLIR mapping
/// (lib/Target/Plan/PlanDType.cpp, which static_asserts the count) and the
/// schemas' dtype enums (checked against this list by DTypeTest) all follow
/// it; the order is the enum's, so append new types at the end.
#define KILN_DTYPES(X)                                                         \
  X(F32, "f32", 4, Float)                                                      \
  X(F64, "f64", 8, Float)                                                      \
  X(F16, "f16", 2, Float)                                                      \
  X(BF16, "bf16", 2, Float)                                                    \
  X(I64, "i64", 8, SignedInt)                                                  \
  X(I32, "i32", 4, SignedInt)                                                  \
  X(I16, "i16", 2, SignedInt)                                                  \
  X(I8, "i8", 1, SignedInt)                                                    \
  X(U64, "u64", 8, UnsignedInt)                                                \
  X(U32, "u32", 4, UnsignedInt)                                                \
  X(U16, "u16", 2, UnsignedInt)                                                \
  X(U8, "u8", 1, UnsignedInt)                                                  \
  X(Bool, "i1", 1, Bool)

enum class DType : uint8_t {
#define KILN_DTYPE_ENUM(E, NAME, BYTES, KIND) E,
  KILN_DTYPES(KILN_DTYPE_ENUM)
#undef KILN_DTYPE_ENUM
};

/// How many dtypes there are; DType values are 0 .. kNumDTypes - 1.
constexpr int kNumDTypes = 0
#define KILN_DTYPE_COUNT(E, NAME, BYTES, KIND) +1
    KILN_DTYPES(KILN_DTYPE_COUNT)
#undef KILN_DTYPE_COUNT
    ;

/// Bytes per element (Bool is one byte, 0 or 1).
constexpr size_t dtypeSize(DType t) {
  switch (t) {
#define KILN_DTYPE_SIZE(E, NAME, BYTES, KIND)                                  \
  case DType::E:                                                               \
    return BYTES;
    KILN_DTYPES(KILN_DTYPE_SIZE)
#undef KILN_DTYPE_SIZE
  }
  return 1;
}

/// The plan's name: "f32", "bf16", "i64", "i1", ...
constexpr const char *dtypeName(DType t) {
  switch (t) {
#define KILN_DTYPE_NAME(E, NAME, BYTES, KIND)                                  \
  case DType::E:                                                               \
    return NAME;
    KILN_DTYPES(KILN_DTYPE_NAME)
#undef KILN_DTYPE_NAME
  }
  return "?";
}

constexpr DTypeKind dtypeKind(DType t) {
  switch (t) {
#define KILN_DTYPE_KIND(E, NAME, BYTES, KIND)                                  \
  case DType::E:                                                               \
    return DTypeKind::KIND;
    KILN_DTYPES(KILN_DTYPE_KIND)
#undef KILN_DTYPE_KIND
  }
  return DTypeKind::Float;
}

/// Parses a plan name; false for an unknown one.
constexpr bool parseDType(std::string_view name, DType &out) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name == dtypeName(DType(i))) {
      out = DType(i);
      return true;
    }
  return false;
}

constexpr bool isFloat(DType t) { return dtypeKind(t) == DTypeKind::Float; }
/// The 16-bit float types (mixed precision's), which kernels often compute
/// in float32.
constexpr bool is16BitFloat(DType t) { return t == DType::F16 || t == DType::BF16; }
constexpr bool isSignedInt(DType t) {
  return dtypeKind(t) == DTypeKind::SignedInt;
}
constexpr bool isUnsignedInt(DType t) {
  return dtypeKind(t) == DTypeKind::UnsignedInt;
}

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
