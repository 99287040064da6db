//===- Convert16.h - vectorized bf16 <-> f32 conversion ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The casts mixed precision runs every step (a weight's bf16 copy, a bf16
// gradient's f32 value) and the 16-bit staging of Widen16.h, as loops the
// compiler vectorizes (AVX-512 clones through KILN_DISPATCH): the same
// rounding as DType.h's floatToBf16 (nearest even, NaN kept quiet) and its
// exact inverse.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CPU_CONVERT16_H
#define KILN_RUNTIME_CPU_CONVERT16_H

#include <cstdint>

namespace kiln::rt::cpu {

/// y[i] = bf16(x[i]) for i in [b, e).
void bf16FromF32(const float *x, uint16_t *y, int64_t b, int64_t e);
/// y[i] = float(x[i]) for i in [b, e).
void f32FromBf16(const uint16_t *x, float *y, int64_t b, int64_t e);

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_CONVERT16_H
