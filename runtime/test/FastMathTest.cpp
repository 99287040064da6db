//===- FastMathTest.cpp - FastMath.h's exp and erf against libm -----------===//
// SPDX-License-Identifier: Apache-2.0
//
// fastExp and fastErf over a dense sweep of the float range (and the edges:
// NaN, infinities, overflow, underflow), against double-precision libm.
//===----------------------------------------------------------------------===//
#include "FastMath.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln::rt::cpu;

TEST(FastMath, ExpAgainstLibm) {
  double worst = 0;
  for (float x = -87.3f; x < 88.72f; x += 0.0013f) {
    double want = std::exp((double)x);
    if (want < 1.1754943508222875e-38) // results below FLT_MIN flush to 0
      continue;
    worst = std::max(worst, std::fabs(fastExp(x) - want) / want);
  }
  EXPECT_LT(worst, 3e-7); // about 2 ulp
  EXPECT_EQ(fastExp(0.0f), 1.0f);
  EXPECT_EQ(fastExp(-100.0f), 0.0f);
  EXPECT_EQ(fastExp(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fastExp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(fastExp(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fastExp(NAN)));
}

TEST(FastMath, ErfAgainstLibm) {
  double worst = 0;
  for (float x = -6.0f; x < 6.0f; x += 0.0001f)
    worst = std::max(worst, std::fabs(fastErf(x) - std::erf((double)x)));
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(fastErf(0.0f), 0.0f);
  EXPECT_EQ(fastErf(10.0f), 1.0f);
  EXPECT_EQ(fastErf(-10.0f), -1.0f);
  EXPECT_EQ(fastErf(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(fastErf(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_TRUE(std::isnan(fastErf(NAN)));
  // Odd, to the bit.
  for (float x : {0.1f, 0.5f, 1.0f, 2.5f, 3.9f})
    EXPECT_EQ(fastErf(-x), -fastErf(x));
}
