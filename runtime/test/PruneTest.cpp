//===- PruneTest.cpp - magnitude_prune: schedule, selection, kernel -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Prune.h"

#include "TestUtil.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

using namespace kiln::rt;
using namespace kiln::rt::test;
using nlohmann::json;

TEST(Prune, CubicScheduleAndItsPoints) {
  // Zhu & Gupta: s_t = S (1 - (1 - (t - t0) / (t1 - t0))^3).
  EXPECT_FALSE(cpu::pruneTarget(0.8, 10, 20, 1, 9));
  EXPECT_FALSE(cpu::pruneTarget(0.8, 10, 20, 1, 21));
  EXPECT_DOUBLE_EQ(*cpu::pruneTarget(0.8, 10, 20, 1, 10), 0.0);
  EXPECT_DOUBLE_EQ(*cpu::pruneTarget(0.8, 10, 20, 1, 15), 0.8 * (1 - 0.125));
  EXPECT_DOUBLE_EQ(*cpu::pruneTarget(0.8, 10, 20, 1, 20), 0.8);
  // every 4: points 10, 14, 18 and the end 20.
  for (int64_t s = 10; s <= 20; ++s)
    EXPECT_EQ(cpu::pruneTarget(0.8, 10, 20, 4, s).has_value(),
              s == 10 || s == 14 || s == 18 || s == 20)
        << s;
  // At once: start == end.
  EXPECT_DOUBLE_EQ(*cpu::pruneTarget(0.3, 5, 5, 1, 5), 0.3);
  EXPECT_FALSE(cpu::pruneTarget(0.3, 5, 5, 1, 6));
  // The schedule never falls.
  double last = 0;
  for (int64_t s = 0; s <= 100; ++s) {
    double t = *cpu::pruneTarget(0.9, 0, 100, 1, s);
    EXPECT_GE(t, last);
    last = t;
  }
  EXPECT_EQ(cpu::prunedCount(0.5, 7), 4); // 3.5 rounds to even: 4
  EXPECT_EQ(cpu::prunedCount(0.25, 10), 2);
  EXPECT_EQ(cpu::prunedCount(0.0, 10), 0);
  EXPECT_EQ(cpu::prunedCount(0.999, 10), 10);
}

TEST(Prune, SelectsTheSmallestMagnitudesKeepingThosePrunedBefore) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  const int64_t n = 1000;
  std::vector<float> p(n), before(n, 0.0f), got(n);
  for (float &x : p)
    x = (float)u(rng);
  cpu::selectPruned(p.data(), before.data(), got.data(), n, 300);
  std::vector<float> mags(n);
  for (int64_t i = 0; i < n; ++i)
    mags[i] = std::fabs(p[i]);
  std::vector<float> sorted = mags;
  std::sort(sorted.begin(), sorted.end());
  float thr = sorted[299];
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    count += got[i] != 0;
    EXPECT_EQ(got[i] != 0, mags[i] <= thr) << i; // no ties in random floats
  }
  EXPECT_EQ(count, 300);

  // Elements pruned before stay pruned, even where the update made them
  // large; the rest of k goes to the smallest others.
  before = got;
  for (int64_t i = 0; i < n; ++i)
    if (before[i] != 0)
      p[i] = 5.0f; // a gradient step moved a pruned weight
  cpu::selectPruned(p.data(), before.data(), got.data(), n, 400);
  count = 0;
  for (int64_t i = 0; i < n; ++i) {
    count += got[i] != 0;
    if (before[i] != 0)
      EXPECT_NE(got[i], 0) << i;
  }
  EXPECT_EQ(count, 400);

  // Ties by position, NaN last, in place (pruned aliases before).
  std::vector<double> q = {0.5, NAN, 0.5, 0.1, 0.5}, m(5, 0.0);
  cpu::selectPruned(q.data(), m.data(), m.data(), 5, 3);
  EXPECT_EQ(m, (std::vector<double>{1, 0, 1, 1, 0}));
}

TEST(Prune, KernelZeroesThePrunedAndKeepsTheMaskBetweenPoints) {
  const int64_t n = 64;
  for (DType t : {DType::F32, DType::F64}) {
    SCOPED_TRACE(dtypeName(t));
    std::vector<double> w(n), none(n, 0.0);
    for (int64_t i = 0; i < n; ++i)
      w[i] = (i % 2 ? 1 : -1) * (double)(i + 1) / n; // |w| grows with i
    HostTensor wT = makeTensor(t, {8, 8}, w), q0 = makeTensor(t, {8, 8}, none);
    json attrs = {{"sparsity", 0.5}, {"start", 2}, {"end", 6}, {"every", 2}};
    auto run = [&](const HostTensor &q, int64_t step) {
      HostTensor st(TensorDesc{DType::I64, {}});
      *st.as<int64_t>() = step;
      return runOnce(cpu::registerBackwardKernels, "magnitude_prune", {&wT, &q, &st},
                     {TensorDesc{t, {8, 8}}, TensorDesc{t, {8, 8}}}, attrs);
    };
    // Step index 1 (t = 2) is before the schedule: nothing changes.
    auto r = run(q0, 2);
    EXPECT_EQ(valuesOf(r[0]), valuesOf(wT));
    EXPECT_EQ(valuesOf(r[1]), none);
    // Index 4 (t = 5): target 0.5 (1 - 0.5^3) = 0.4375, 28 of 64: the 28
    // smallest |w|, elements 0..27.
    r = run(q0, 5);
    std::vector<double> p1 = valuesOf(r[0]), m1 = valuesOf(r[1]);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(m1[i], i < 28 ? 1.0 : 0.0) << i;
      EXPECT_EQ(p1[i], i < 28 ? 0.0 : valueAt(wT, i)) << i;
    }
    // Index 5 (t = 6) is not a point (every 2): the mask stays, and w
    // (here unchanged, as an update might have moved it) is masked.
    r = run(r[1], 6);
    EXPECT_EQ(valuesOf(r[1]), m1);
    EXPECT_EQ(valuesOf(r[0]), p1);
  }
  // Bad attributes and operands.
  TensorDesc f{DType::F32, {4}}, i64{DType::I64, {}}, i32{DType::I32, {}};
  expectError([&] {
    build(cpu::registerBackwardKernels, "magnitude_prune", {&f, &f, &i32}, {f, f},
          {{"sparsity", 0.5}, {"start", 0}, {"end", 0}});
  }, "step must be an i64 scalar");
  expectError([&] {
    build(cpu::registerBackwardKernels, "magnitude_prune", {&f, &f, &i64}, {f, f},
          {{"sparsity", 1.0}, {"start", 0}, {"end", 0}});
  }, "0 <= sparsity < 1");
}
