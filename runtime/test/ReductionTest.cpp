//===- ReductionTest.cpp - reduce_* and argmax/argmin ----------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// Hand-checked values, random shapes and axis sets (adjacent, split, none,
// all) in float and integer types against a double reference, a 1e6-element
// f32 sum, the threaded paths, empty reductions, NaN, ties and
// select_last_index, and malformed specs.
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cmath>
#include <random>

namespace {

using nlohmann::json;
using namespace kiln::rt;
using namespace kiln::rt::test;
namespace L = kiln::rt::cpu::loops;

const RegisterFn kReg = cpu::registerReductionKernels;

std::vector<int64_t> reducedShape(const std::vector<int64_t> &s,
                                  const std::vector<int64_t> &axes, bool keep) {
  std::vector<int64_t> o;
  for (int64_t i = 0; i < (int64_t)s.size(); ++i) {
    bool r = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!r)
      o.push_back(s[i]);
    else if (keep)
      o.push_back(1);
  }
  return o;
}

/// Reference reduction in double (ints: exact for small values).
std::vector<double> refReduce(const std::string &op, const std::vector<double> &x,
                              const std::vector<int64_t> &s,
                              const std::vector<int64_t> &axes, bool isInt) {
  std::vector<int64_t> ks = reducedShape(s, axes, true);
  int64_t n = numelOf(ks);
  double init = op == "reduce_prod" ? 1
                : op == "reduce_max" ? -INFINITY
                : op == "reduce_min" ? INFINITY
                                     : 0;
  std::vector<double> acc(n, init), cnt(n, 0);
  for (int64_t i = 0; i < (int64_t)x.size(); ++i) {
    auto c = coords(i, s);
    for (int64_t a : axes)
      c[a] = 0;
    int64_t o = linear(c, ks);
    double v = x[i];
    if (op == "reduce_sum" || op == "reduce_mean")
      acc[o] += v;
    else if (op == "reduce_sum_square")
      acc[o] += v * v;
    else if (op == "reduce_prod")
      acc[o] *= v;
    else if (op == "reduce_max")
      acc[o] = std::isnan(v) || v > acc[o] ? v : acc[o];
    else
      acc[o] = std::isnan(v) || v < acc[o] ? v : acc[o];
    cnt[o] += 1;
  }
  if (op == "reduce_mean")
    for (int64_t o = 0; o < n; ++o)
      acc[o] = isInt ? std::trunc(acc[o] / cnt[o]) : acc[o] / cnt[o];
  return acc;
}

HostTensor reduce(const std::string &op, const HostTensor &x,
                  const std::vector<int64_t> &axes, bool keep) {
  return run1(kReg, op, {&x}, desc(x.dtype(), reducedShape(x.shape(), axes, keep)),
              {{"axes", axes}, {"keepdims", keep}});
}

TEST(Reduction, HandChecked) {
  auto x = tensor(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(valuesOf(reduce("reduce_sum", x, {1}, false)), (std::vector<double>{6, 15}));
  EXPECT_EQ(valuesOf(reduce("reduce_sum", x, {0}, true)), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(valuesOf(reduce("reduce_mean", x, {0, 1}, false)), (std::vector<double>{3.5}));
  EXPECT_EQ(valuesOf(reduce("reduce_max", x, {1}, true)), (std::vector<double>{3, 6}));
  EXPECT_EQ(valuesOf(reduce("reduce_min", x, {0}, false)), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(valuesOf(reduce("reduce_prod", x, {1}, false)), (std::vector<double>{6, 120}));
  // No axes: a copy.
  EXPECT_EQ(valuesOf(reduce("reduce_mean", x, {}, true)), valuesOf(x));
  auto n = tensor(DType::F32, {3}, {1, NAN, 2});
  EXPECT_TRUE(std::isnan(valuesOf(reduce("reduce_max", n, {0}, false))[0]));
  EXPECT_TRUE(std::isnan(valuesOf(reduce("reduce_min", n, {0}, false))[0]));
  auto i = tensor(DType::I32, {4}, {1, 2, 2, 2});
  EXPECT_EQ(valuesOf(reduce("reduce_mean", i, {0}, false)), (std::vector<double>{1}));
  auto b = tensor(DType::Bool, {2, 2}, {0, 1, 0, 0});
  EXPECT_EQ(valuesOf(reduce("reduce_max", b, {1}, false)), (std::vector<double>{1, 0}));
  EXPECT_EQ(valuesOf(reduce("reduce_min", b, {0}, false)), (std::vector<double>{0, 0}));
  // Integer sums wrap.
  auto w = tensor(DType::I8, {2}, {100, 100});
  EXPECT_EQ(valuesOf(reduce("reduce_sum", w, {0}, false)), (std::vector<double>{-56}));
}

TEST(Reduction, RandomAgainstReference) {
  std::mt19937 rng(21);
  const char *ops[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                       "reduce_prod"};
  for (int iter = 0; iter < 60; ++iter) {
    int rank = 1 + rng() % 4;
    std::vector<int64_t> s(rank);
    for (auto &d : s)
      d = 1 + rng() % 6;
    if (iter % 10 == 0)
      s[rng() % rank] = 300; // a wider tile
    std::vector<int64_t> axes;
    for (int64_t a = 0; a < rank; ++a)
      if (rng() % 2)
        axes.push_back(a);
    bool keep = rng() % 2;
    for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32,
                    DType::I64, DType::U8}) {
      bool isInt = !isFloat(t);
      for (const char *op : ops) {
        bool prod = std::string(op) == "reduce_prod";
        std::vector<double> v = randomVals(rng, numelOf(s), prod ? 0.8 : -5,
                                           prod ? 1.25 : 5);
        if (isInt)
          for (double &x : v)
            x = prod ? (rng() % 3 == 0 ? 2 : 1) : std::round(x + 5);
        HostTensor x = tensor(t, s, v);
        std::vector<double> want = refReduce(op, valuesOf(x), s, axes, isInt);
        for (double &w : want)
          w = isInt ? (double)L::castValue<int64_t>(w) : rounded(t, w);
        if (isInt && t == DType::U8)
          for (double &w : want)
            w = (double)(uint8_t)(int64_t)w;
        double tol = isInt ? 0 : (t == DType::F64 ? 1e-12 : t == DType::F32 ? 1e-6 : tolOf(t));
        expectClose(valuesOf(reduce(op, x, axes, keep)), want, tol,
                    std::string(op) + " " + x.desc().str() + " axes " +
                        L::shapeStr(axes));
      }
    }
  }
}

TEST(Reduction, SumSquareAgainstReference) {
  std::mt19937 rng(77);
  for (int iter = 0; iter < 40; ++iter) {
    int rank = 1 + rng() % 4;
    std::vector<int64_t> s(rank);
    for (auto &d : s)
      d = 1 + rng() % 6;
    if (iter % 8 == 0)
      s[rng() % rank] = 300; // a wider tile, and rows split over threads
    std::vector<int64_t> axes;
    for (int64_t a = 0; a < rank; ++a)
      if (rng() % 2)
        axes.push_back(a);
    bool keep = rng() % 2;
    for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32,
                    DType::I64}) {
      bool isInt = !isFloat(t);
      std::vector<double> v = randomVals(rng, numelOf(s), -3, 3);
      if (isInt)
        for (double &x : v)
          x = std::round(x);
      HostTensor x = tensor(t, s, v);
      std::vector<double> want = refReduce("reduce_sum_square", valuesOf(x), s, axes, isInt);
      for (double &w : want)
        w = isInt ? w : rounded(t, w);
      double tol = isInt ? 0 : (t == DType::F64 ? 1e-12 : t == DType::F32 ? 1e-6 : tolOf(t));
      expectClose(valuesOf(reduce("reduce_sum_square", x, axes, keep)), want, tol,
                  "reduce_sum_square " + x.desc().str() + " axes " + L::shapeStr(axes));
    }
  }
}

TEST(Reduction, LargeSums) {
  std::mt19937 rng(4);
  const int64_t n = 1000000;
  std::vector<double> v = randomVals(rng, n, -1, 3);
  HostTensor x = tensor(DType::F32, {n}, v);
  std::vector<double> xv = valuesOf(x);
  double ref = 0;
  for (double d : xv)
    ref += d;
  double got = valuesOf(reduce("reduce_sum", x, {0}, false))[0];
  EXPECT_NEAR(got, ref, 1e-6 * std::fabs(ref));
  double mean = valuesOf(reduce("reduce_mean", x, {0}, false))[0];
  EXPECT_NEAR(mean, ref / n, 1e-6 * std::fabs(ref / n));
  // The threaded row, tile and few-rows paths against the reference.
  for (auto [shape, axes] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{4, 250000}, {1}}, {{250000, 4}, {0}}, {{1000, 1000}, {0}},
           {{1000, 1000}, {1}}, {{10, 100, 1000}, {0, 2}}}) {
    HostTensor y = tensor(DType::F32, shape, v);
    for (const char *op : {"reduce_sum", "reduce_max"}) {
      std::vector<double> want = refReduce(op, xv, shape, axes, false);
      for (double &w : want)
        w = rounded(DType::F32, w);
      expectClose(valuesOf(reduce(op, y, axes, false)), want, 1e-6,
                  std::string(op) + " " + y.desc().str());
    }
  }
}

TEST(Reduction, Empty) {
  HostTensor x = tensor(DType::F32, {2, 0, 3}, {});
  EXPECT_EQ(valuesOf(reduce("reduce_sum", x, {1}, false)), std::vector<double>(6, 0));
  EXPECT_EQ(valuesOf(reduce("reduce_prod", x, {1}, false)), std::vector<double>(6, 1));
  EXPECT_EQ(valuesOf(reduce("reduce_max", x, {1}, true)), std::vector<double>(6, -INFINITY));
  EXPECT_EQ(valuesOf(reduce("reduce_min", x, {1}, true)), std::vector<double>(6, INFINITY));
  EXPECT_TRUE(std::isnan(valuesOf(reduce("reduce_mean", x, {1}, true))[0]));
  EXPECT_EQ(reduce("reduce_sum", x, {2}, false).numel(), 0);
  HostTensor i = tensor(DType::I32, {0}, {});
  EXPECT_EQ(valuesOf(reduce("reduce_mean", i, {0}, false)), std::vector<double>{0});
  EXPECT_EQ(valuesOf(reduce("reduce_max", i, {0}, false)), std::vector<double>{INT32_MIN});
  HostTensor s = tensor(DType::F16, {}, {2.5});
  EXPECT_EQ(valuesOf(reduce("reduce_sum", s, {}, false)), std::vector<double>{2.5});
}

//===----------------------------------------------------------------------===//
// argmax / argmin
//===----------------------------------------------------------------------===//

std::vector<double> argRun(const char *op, const HostTensor &x, int64_t axis,
                           bool keep, bool last) {
  int64_t a = axis < 0 ? axis + x.desc().rank() : axis;
  return valuesOf(run1(kReg, op, {&x}, desc(DType::I64, reducedShape(x.shape(), {a}, keep)),
                     {{"axis", axis}, {"keepdims", keep}, {"select_last_index", last}}));
}

TEST(Reduction, ArgHandChecked) {
  auto x = tensor(DType::F32, {2, 4}, {1, 3, 3, 0, 2, 2, 2, 2});
  EXPECT_EQ(argRun("argmax", x, 1, false, false), (std::vector<double>{1, 0}));
  EXPECT_EQ(argRun("argmax", x, 1, true, true), (std::vector<double>{2, 3}));
  EXPECT_EQ(argRun("argmin", x, 1, false, false), (std::vector<double>{3, 0}));
  EXPECT_EQ(argRun("argmin", x, -1, false, true), (std::vector<double>{3, 3}));
  EXPECT_EQ(argRun("argmax", x, 0, false, false), (std::vector<double>{1, 0, 0, 1}));
  auto n = tensor(DType::F32, {5}, {1, NAN, 5, NAN, -1});
  EXPECT_EQ(argRun("argmax", n, 0, false, false), (std::vector<double>{1}));
  EXPECT_EQ(argRun("argmin", n, 0, false, false), (std::vector<double>{1}));
  EXPECT_EQ(argRun("argmax", n, 0, false, true), (std::vector<double>{3}));
  auto i = tensor(DType::I64, {3}, {-5, 7, 7});
  EXPECT_EQ(argRun("argmax", i, 0, false, false), (std::vector<double>{1}));
  EXPECT_EQ(argRun("argmin", i, 0, true, false), (std::vector<double>{0}));
}

TEST(Reduction, ArgRandom) {
  std::mt19937 rng(8);
  for (int iter = 0; iter < 40; ++iter) {
    int rank = 1 + rng() % 4;
    std::vector<int64_t> s(rank);
    for (auto &d : s)
      d = 1 + rng() % 6;
    if (iter % 8 == 0)
      s.back() = 700;
    int64_t axis = rng() % rank;
    DType t = std::vector<DType>{DType::F32, DType::F16, DType::I32, DType::I8,
                                 DType::F64, DType::BF16}[iter % 6];
    std::vector<double> v = randomVals(rng, numelOf(s), -4, 4);
    for (double &d : v)
      d = std::round(d); // ties
    HostTensor x = tensor(t, s, v);
    std::vector<double> xv = valuesOf(x);
    for (bool mx : {true, false})
      for (bool last : {false, true}) {
        std::vector<int64_t> ks = reducedShape(s, {axis}, true);
        std::vector<double> want(numelOf(ks));
        for (int64_t o = 0; o < (int64_t)want.size(); ++o) {
          auto c = coords(o, ks);
          int64_t best = 0;
          double bv = 0;
          for (int64_t j = 0; j < s[axis]; ++j) {
            c[axis] = j;
            double v2 = xv[linear(c, s)];
            bool better = j == 0 || (mx ? (last ? v2 >= bv : v2 > bv)
                                        : (last ? v2 <= bv : v2 < bv));
            if (better)
              best = j, bv = v2;
          }
          want[o] = best;
        }
        expectClose(argRun(mx ? "argmax" : "argmin", x, axis, rng() % 2, last), want,
                    0, std::string(mx ? "argmax " : "argmin ") + x.desc().str());
      }
  }
}

TEST(Reduction, Malformed) {
  TensorDesc x = desc(DType::F32, {2, 3});
  auto r = [&](json a, TensorDesc out) { build(kReg, "reduce_sum", {x}, {out}, a); };
  expectError([&] { r({{"axes", {1, 0}}}, desc(DType::F32, {1, 1})); }, "sorted");
  expectError([&] { r({{"axes", {2}}}, desc(DType::F32, {2, 3})); }, "out of range");
  expectError([&] { r({{"keepdims", true}}, desc(DType::F32, {2, 3})); }, "axes");
  expectError([&] { r({{"axes", {1}}, {"keepdims", false}}, desc(DType::F32, {2, 1})); },
              "should be");
  expectError([&] { r({{"axes", {1}}}, desc(DType::F64, {2, 1})); }, "should be");
  expectError([&] { build(kReg, "reduce_sum", {desc(DType::Bool, {2})}, {desc(DType::Bool, {1})},
                          {{"axes", {0}}}); },
              "unsupported element type i1");
  expectError([&] { build(kReg, "reduce_sum", {x, x}, {x}, {{"axes", json::array()}}); },
              "takes 1 inputs");
  expectError([&] { build(kReg, "argmax", {x}, {desc(DType::I64, {2, 1})}, {{"axis", 2}}); },
              "out of range");
  expectError([&] { build(kReg, "argmax", {x}, {desc(DType::I32, {2, 1})}, {{"axis", 1}}); },
              "should be");
  expectError([&] { build(kReg, "argmin", {desc(DType::F32, {2, 0})}, {desc(DType::I64, {2, 1})},
                          {{"axis", 1}}); },
              "empty axis");
}

} // namespace
