//===- Convert16.cpp - vectorized bf16 <-> f32 conversion -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Convert16.h"

#include "Loops.h"

#include <cstring>

namespace kiln::rt::cpu {

KILN_DISPATCH void bf16FromF32(const float *x, uint16_t *y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = (u >> 16) | 0x40u;
    y[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

KILN_DISPATCH void f32FromBf16(const uint16_t *x, float *y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    uint32_t u = (uint32_t)x[i] << 16;
    std::memcpy(&y[i], &u, 4);
  }
}

} // namespace kiln::rt::cpu
