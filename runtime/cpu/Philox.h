//===- Philox.h - the Philox-4x32-10 counter-based generator ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Philox-4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC'11), bit-exact with Random123's philox4x32_R(10, ...):
// a 128-bit counter and a 64-bit key give 128 random bits. Being a pure
// function of (counter, key), any element's bits can be computed
// independently: results do not depend on the thread count or order.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CPU_PHILOX_H
#define KILN_RUNTIME_CPU_PHILOX_H

#include <array>
#include <cstdint>

namespace kiln::rt::cpu {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

/// Random123's philox4x32_R(10, ctr, key).
inline PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u; // key bumps
  for (int round = 0; round < 10; ++round) {
    if (round) {
      key[0] += kW0;
      key[1] += kW1;
    }
    uint64_t p0 = (uint64_t)kM0 * ctr[0], p1 = (uint64_t)kM1 * ctr[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

/// philox4x32_10 of the L counters {c0 + l, c1, c2, c3}, l in [0, L), with
/// one key, vectorised across the lanes: word w of lane l goes to
/// out[l * 4 + w], so `out` lists the words in counter order.
template <int L>
inline void philox4x32_10Lanes(uint32_t c0, uint32_t c1, uint32_t c2,
                               uint32_t c3, PhiloxKey key, uint32_t *out) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#pragma omp simd
  for (int l = 0; l < L; ++l) {
    uint32_t x0 = c0 + (uint32_t)l, x1 = c1, x2 = c2, x3 = c3;
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; ++round) {
      if (round) {
        k0 += kW0;
        k1 += kW1;
      }
      uint64_t p0 = (uint64_t)kM0 * x0, p1 = (uint64_t)kM1 * x2;
      x0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0;
      x2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1;
      x1 = (uint32_t)p1;
      x3 = (uint32_t)p0;
    }
    out[l * 4 + 0] = x0;
    out[l * 4 + 1] = x1;
    out[l * 4 + 2] = x2;
    out[l * 4 + 3] = x3;
  }
}

/// A uniform float in [0, 1) from 32 random bits: the top 24 bits * 2^-24.
inline float philoxUniform(uint32_t bits) {
  return (float)(bits >> 8) * (1.0f / 16777216.0f);
}

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_PHILOX_H
