//===- FastMath.h - branch-free float exp and erf ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// float exp and erf written as straight-line arithmetic, so the loops that
// call them vectorise (libm's expf/erff are calls, and without -ffast-math
// GCC will not substitute its vector versions). Each is within a few ulp of
// libm, which runtime/test/FastMathTest.cpp checks over the float range.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CPU_FASTMATH_H
#define KILN_RUNTIME_CPU_FASTMATH_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace kiln::rt::cpu {

/// exp for float, branch-free so loops over it vectorise (Cephes' expf:
/// range reduction by ln 2 and a degree-6 polynomial, about 1 ulp). Results
/// below FLT_MIN (x < ln FLT_MIN) flush to 0; x > ln FLT_MAX gives inf; NaN
/// stays NaN. 2^n is applied as two factors, so n = 128 (x near ln FLT_MAX)
/// needs no exponent field out of range.
inline float fastExp(float x) {
  constexpr float kLo = -87.3365447f, kHi = 88.7228394f; // ln FLT_MIN, ln FLT_MAX
  float xc = x > kLo ? x : kLo; // NaN -> kLo: xc is always finite
  xc = xc < kHi ? xc : kHi;
  // Round to nearest by adding and subtracting 1.5 * 2^23 (|xc / ln 2| is
  // far below 2^22); std::floor would be a libm call that stops
  // vectorisation without -ffast-math.
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t ni = (int32_t)n, n1 = ni / 2, n2 = ni - n1; // n in [-126, 128]
  uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  float y = p * s1 * s2;
  y = x < kLo ? 0.0f : y;
  y = x > kHi ? std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;
}

/// erf for float: the odd-over-even rational approximation on [-4, 4]
/// (degree 13 over degree 8 in x) that Eigen and TensorFlow use; beyond
/// +-4, erf is +-1 in float. Max abs error 4.2e-7. NaN stays NaN.
inline float fastErf(float x) {
  float xc = x < 4.0f ? x : 4.0f; // NaN -> 4: xc is always finite
  xc = xc > -4.0f ? xc : -4.0f;
  float x2 = xc * xc;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  p = p * xc;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  float y = p / q;
  return x != x ? x : y;
}

/// exp and erf in a kernel's compute type: the forms above for float (f32,
/// and f16/bf16 computed in f32), libm for double.
inline float expAcc(float x) { return fastExp(x); }
inline double expAcc(double x) { return std::exp(x); }
inline float erfAcc(float x) { return fastErf(x); }
inline double erfAcc(double x) { return std::erf(x); }

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_FASTMATH_H
