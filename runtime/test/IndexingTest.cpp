//===- IndexingTest.cpp - topk, cumsum, scatter kernels ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// runtime/cpu/Indexing.cpp against reference loops on random data (every
// dtype the kernels take), the ONNX rules the node tests do not reach (ties,
// NaN, repeated indices, negative indices), and each thrown error.
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

using namespace kiln::rt;
using namespace kiln::rt::test;

namespace {

const RegisterFn kReg = cpu::registerIndexingKernels;

TEST(TopK, MatchesAStableSortOnRandomDataOfEveryType) {
  std::mt19937 rng(3);
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::I64, DType::I32}) {
    for (bool largest : {true, false}) {
      std::vector<int64_t> shape = {3, 7, 5};
      const int64_t axis = 1, k = 4;
      // Few distinct values, so ties are common.
      std::vector<double> v = randomVals(rng, numelOf(shape), -3, 3);
      for (double &x : v)
        x = std::round(x);
      HostTensor x = makeTensor(t, shape, v);
      std::vector<int64_t> out = {3, k, 5};
      auto res = runOnce(kReg, "topk", {&x}, {desc(t, out), desc(DType::I64, out)},
                         {{"k", k}, {"axis", axis}, {"largest", largest}});
      for (int64_t o = 0; o < 3; ++o)
        for (int64_t i = 0; i < 5; ++i) {
          std::vector<int64_t> order(7);
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
            double x = v[(o * 7 + a) * 5 + i], y = v[(o * 7 + b) * 5 + i];
            return largest ? x > y : x < y;
          });
          for (int64_t j = 0; j < k; ++j) {
            int64_t at = (o * k + j) * 5 + i;
            ASSERT_EQ(valueAt(res[1], at), (double)order[j])
                << dtypeName(t) << " largest " << largest << " at " << at;
            ASSERT_EQ(valueAt(res[0], at), v[(o * 7 + order[j]) * 5 + i]);
          }
        }
    }
  }
}

TEST(TopK, NaNIsLargerThanEveryNumber) {
  std::vector<double> v = {1, NAN, 3, -INFINITY};
  HostTensor x = makeTensor(DType::F32, {4}, v);
  auto big = runOnce(kReg, "topk", {&x}, {desc(DType::F32, {2}), desc(DType::I64, {2})},
                     {{"k", 2}, {"axis", 0}});
  EXPECT_TRUE(std::isnan(valueAt(big[0], 0)));
  EXPECT_EQ(valueAt(big[1], 0), 1);
  EXPECT_EQ(valueAt(big[1], 1), 2);
  auto small = runOnce(kReg, "topk", {&x}, {desc(DType::F32, {2}), desc(DType::I64, {2})},
                       {{"k", 2}, {"axis", 0}, {"largest", false}});
  EXPECT_EQ(valueAt(small[1], 0), 3);
  EXPECT_EQ(valueAt(small[1], 1), 0);
}

TEST(CumSum, EveryDirectionAgainstAReferenceLoop) {
  std::mt19937 rng(5);
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32}) {
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        std::vector<int64_t> shape = {4, 6, 3};
        std::vector<double> v = randomVals(rng, numelOf(shape), -5, 5);
        for (double &x : v)
          x = std::round(x);
        HostTensor x = makeTensor(t, shape, v);
        HostTensor y = run1(kReg, "cumsum", {&x}, desc(t, shape),
                            {{"axis", 1}, {"exclusive", exclusive}, {"reverse", reverse}});
        for (int64_t o = 0; o < 4; ++o)
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 6; ++j) {
              double s = 0;
              for (int64_t q = 0; q < 6; ++q) {
                bool in = reverse ? (exclusive ? q > j : q >= j) : (exclusive ? q < j : q <= j);
                if (in)
                  s += v[(o * 6 + q) * 3 + i];
              }
              ASSERT_EQ(valueAt(y, (o * 6 + j) * 3 + i), s)
                  << dtypeName(t) << " exclusive " << exclusive << " reverse " << reverse;
            }
      }
  }
}

TEST(ScatterElements, CombinesRepeatedIndicesInIndexOrder) {
  std::vector<double> d = {1, 2, 3, 4}, u = {10, 20, 30};
  HostTensor data = makeTensor(DType::F32, {1, 4}, d);
  HostTensor upd = makeTensor(DType::F32, {1, 3}, u);
  std::vector<double> iv = {1, -3, 3};
  HostTensor idx = makeTensor(DType::I64, {1, 3}, iv);
  struct Want {
    const char *reduction;
    std::vector<double> out;
  };
  for (const Want &w : {Want{"none", {1, 20, 3, 30}}, Want{"add", {1, 32, 3, 34}},
                        Want{"mul", {1, 400, 3, 120}}, Want{"max", {1, 20, 3, 30}},
                        Want{"min", {1, 2, 3, 4}}}) {
    HostTensor y = run1(kReg, "scatter_elements", {&data, &idx, &upd}, desc(DType::F32, {1, 4}),
                        {{"axis", 1}, {"reduction", w.reduction}});
    EXPECT_EQ(valuesOf(y), w.out) << w.reduction;
  }
}

TEST(GatherElementsGrad, AddsEveryGradientAtItsIndex) {
  std::vector<double> dy = {1, 2, 4, 8, 16, 32};
  HostTensor g = makeTensor(DType::F64, {2, 3}, dy);
  std::vector<double> iv = {0, 2, 0, 1, 1, -1};
  HostTensor idx = makeTensor(DType::I32, {2, 3}, iv);
  HostTensor dx = run1(kReg, "gather_elements_grad", {&g, &idx}, desc(DType::F64, {2, 4}),
                       {{"axis", 1}});
  EXPECT_EQ(valuesOf(dx), (std::vector<double>{5, 0, 2, 0, 0, 24, 0, 32}));
}

TEST(ScatterND, ReplacesSlicesAndCombines) {
  std::vector<double> d(8, 1.0), u = {5, 6, 7, 8};
  HostTensor data = makeTensor(DType::F32, {4, 2}, d);
  HostTensor upd = makeTensor(DType::F32, {2, 2}, u);
  std::vector<double> iv = {3, -4};
  HostTensor idx = makeTensor(DType::I64, {2, 1}, iv);
  HostTensor y = run1(kReg, "scatter_nd", {&data, &idx, &upd}, desc(DType::F32, {4, 2}),
                      {{"reduction", "add"}});
  EXPECT_EQ(valuesOf(y), (std::vector<double>{8, 9, 1, 1, 1, 1, 6, 7}));
}

TEST(Indexing, RefusesBadShapesAndIndices) {
  expectError([] { build(kReg, "topk", {desc(DType::F32, {2, 4})},
                         {desc(DType::F32, {2, 5}), desc(DType::I64, {2, 5})},
                         {{"k", 5}, {"axis", 1}}); },
              "k (5) must be in [0, 4]");
  expectError([] { build(kReg, "cumsum", {desc(DType::F32, {2, 4})}, {desc(DType::F32, {2, 4})},
                         {{"axis", 2}}); },
              "axis 2 is out of range");
  expectError([] { build(kReg, "scatter_elements",
                         {desc(DType::F32, {3, 5}), desc(DType::I64, {3, 2}),
                          desc(DType::F32, {3, 3})},
                         {desc(DType::F32, {3, 5})}, {{"axis", 1}}); },
              "indices and updates must have one shape");
  expectError([] { build(kReg, "scatter_elements",
                         {desc(DType::F32, {3, 5}), desc(DType::I64, {3, 2}),
                          desc(DType::F32, {3, 2})},
                         {desc(DType::F32, {3, 5})}, {{"axis", 1}, {"reduction", "sum"}}); },
              "reduction must be none, add, mul, max or min");
  expectError([] { build(kReg, "scatter_nd",
                         {desc(DType::F32, {4, 4}), desc(DType::I64, {2, 1}),
                          desc(DType::F32, {2, 3})},
                         {desc(DType::F32, {4, 4})}); },
              "updates must have shape [2,4]");
  // An index out of range at run time names the op, before anything is written.
  std::vector<double> d = {1, 2, 3}, u = {9}, iv = {3};
  HostTensor data = makeTensor(DType::F32, {3}, d), upd = makeTensor(DType::F32, {1}, u);
  HostTensor idx = makeTensor(DType::I64, {1}, iv);
  expectError([&] { run1(kReg, "scatter_elements", {&data, &idx, &upd}, desc(DType::F32, {3}),
                         {{"axis", 0}}); },
              "scatter_elements index 3 is out of range for axis 0 of size 3");
  std::vector<double> iv2 = {3};
  HostTensor idx2 = makeTensor(DType::I64, {1, 1}, iv2);
  expectError([&] { run1(kReg, "scatter_nd", {&data, &idx2, &upd}, desc(DType::F32, {3})); },
              "scatter_nd index 3 is out of range for dimension 0 of size 3");
}

} // namespace
