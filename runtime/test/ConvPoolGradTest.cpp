//===- ConvPoolGradTest.cpp - convolution and pooling gradient kernels ----===//
// SPDX-License-Identifier: Apache-2.0
//
// conv_input_grad, conv_weight_grad, max_pool_grad and avg_pool_grad run on
// oneDNN in f32 and on direct double-accumulating loops in f64 (the loops
// test/Training/gradcheck.test checks against finite differences). Here the
// two paths get the same values over randomized 1-D/2-D/3-D geometries
// (groups, depthwise, strides, dilations, asymmetric and ceil-mode pads) and
// must agree; plus a hand-checked max_pool_grad and the malformed specs.
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <algorithm>
#include <cmath>
#include <random>

using namespace kiln::rt;
using namespace kiln::rt::test;
using nlohmann::json;

namespace {

std::unique_ptr<Kernel> makeGrad(const std::string &name,
                                 const std::vector<TensorDesc> &ins,
                                 const TensorDesc &out, const json &attrs) {
  return build(cpu::registerBackwardKernels, name, ins, {out}, attrs);
}

/// Runs kernel `name` on `vals` (one vector per input, f32-representable)
/// in `t` and returns the output as doubles.
std::vector<double> runGrad(const std::string &name, DType t,
                            const std::vector<std::vector<int64_t>> &shapes,
                            const std::vector<std::vector<double>> &vals,
                            const std::vector<int64_t> &outShape,
                            const json &attrs) {
  std::vector<HostTensor> ins;
  for (size_t i = 0; i < shapes.size(); ++i)
    ins.push_back(tensor(t, shapes[i], vals[i]));
  std::vector<const HostTensor *> in;
  for (const HostTensor &h : ins)
    in.push_back(&h);
  return valuesOf(run1(cpu::registerBackwardKernels, name, in,
                       TensorDesc{t, outShape}, attrs));
}

std::vector<double> randomVals(std::mt19937 &rng, int64_t n) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<double> v(n);
  for (double &x : v)
    x = u(rng); // f32 values, so both paths see the same numbers
  return v;
}

/// `v` rounded to the 16-bit float type `t` (and back to double).
std::vector<double> round16(DType t, std::vector<double> v) {
  for (double &x : v)
    x = t == DType::BF16 ? bf16ToFloat(floatToBf16(float(x)))
                         : halfToFloat(floatToHalf(float(x)));
  return v;
}

/// Max |a - b| over max |b| (or 1 when b is all small).
double relErr(const std::vector<double> &a, const std::vector<double> &b) {
  double m = 0, s = 1e-6;
  for (size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::fabs(a[i] - b[i]));
    s = std::max(s, std::fabs(b[i]));
  }
  return m / s;
}

struct Geom {
  std::vector<int64_t> x, w, y, strides, dil, pads;
  int64_t groups = 1;
};

/// A random convolution; spatial dims 1..3.
Geom randomConv(std::mt19937 &rng, int nsp) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Geom g;
  g.groups = pick(0, 3) == 0 ? pick(2, 3) : 1;
  bool depthwise = pick(0, 4) == 0;
  int64_t cpg = depthwise ? 1 : pick(1, 4), opg = pick(1, 4);
  if (depthwise)
    g.groups = pick(2, 6);
  int64_t n = pick(1, 3);
  g.x = {n, g.groups * cpg};
  g.w = {g.groups * opg, cpg};
  g.y = {n, g.groups * opg};
  std::vector<int64_t> pe;
  for (int i = 0; i < nsp; ++i) {
    int64_t k = pick(1, nsp == 3 ? 2 : 3), s = pick(1, 2), d = pick(1, 2);
    int64_t pb = pick(0, k - 1), pa = pick(0, k - 1);
    int64_t span = d * (k - 1) + 1;
    int64_t in = std::max<int64_t>(span, pick(nsp == 3 ? 2 : 3, nsp == 3 ? 5 : 9));
    g.x.push_back(in);
    g.w.push_back(k);
    g.y.push_back((in + pb + pa - span) / s + 1);
    g.strides.push_back(s);
    g.dil.push_back(d);
    g.pads.push_back(pb);
    pe.push_back(pa);
  }
  g.pads.insert(g.pads.end(), pe.begin(), pe.end());
  return g;
}

json convAttrs(const Geom &g) {
  return json{{"strides", g.strides}, {"dilations", g.dil}, {"padding", g.pads},
              {"groups", g.groups}};
}

TEST(ConvGrad, DnnlMatchesDirect) {
  std::mt19937 rng(1234);
  for (int it = 0; it < 60; ++it) {
    Geom g = randomConv(rng, 1 + it % 3);
    json a = convAttrs(g);
    auto dy = randomVals(rng, numelOf(g.y)), w = randomVals(rng, numelOf(g.w)),
         x = randomVals(rng, numelOf(g.x));
    SCOPED_TRACE("case " + std::to_string(it) + ": " + a.dump() + " x " +
                 json(g.x).dump() + " w " + json(g.w).dump());
    auto dx32 = runGrad("conv_input_grad", DType::F32, {g.y, g.w}, {dy, w}, g.x, a);
    auto dx64 = runGrad("conv_input_grad", DType::F64, {g.y, g.w}, {dy, w}, g.x, a);
    EXPECT_LT(relErr(dx32, dx64), 1e-5);
    auto dw32 = runGrad("conv_weight_grad", DType::F32, {g.x, g.y}, {x, dy}, g.w, a);
    auto dw64 = runGrad("conv_weight_grad", DType::F64, {g.x, g.y}, {x, dy}, g.w, a);
    EXPECT_LT(relErr(dw32, dw64), 1e-5);
  }
}

// bf16 (oneDNN's bf16 backward primitives where the CPU has them) and f16
// (f32 staging) against f64 on the same 16-bit-representable values: the
// 16-bit result's rounding (2^-8 relative for bf16) bounds the difference.
TEST(ConvGrad, SixteenBitMatchesF64) {
  std::mt19937 rng(99);
  for (int it = 0; it < 24; ++it) {
    Geom g = randomConv(rng, 1 + it % 3);
    json a = convAttrs(g);
    DType t = it % 2 ? DType::F16 : DType::BF16;
    auto dy = round16(t, randomVals(rng, numelOf(g.y)));
    auto w = round16(t, randomVals(rng, numelOf(g.w)));
    auto x = round16(t, randomVals(rng, numelOf(g.x)));
    SCOPED_TRACE(std::string(dtypeName(t)) + " case " + std::to_string(it) + ": " +
                 a.dump() + " x " + json(g.x).dump() + " w " + json(g.w).dump());
    EXPECT_LT(relErr(runGrad("conv_input_grad", t, {g.y, g.w}, {dy, w}, g.x, a),
                     runGrad("conv_input_grad", DType::F64, {g.y, g.w}, {dy, w}, g.x, a)),
              1e-2);
    EXPECT_LT(relErr(runGrad("conv_weight_grad", t, {g.x, g.y}, {x, dy}, g.w, a),
                     runGrad("conv_weight_grad", DType::F64, {g.x, g.y}, {x, dy}, g.w, a)),
              1e-2);
  }
}

TEST(ConvGrad, LargeThreaded) {
  // A ResNet-like 3x3 layer, big enough for blocked layouts and threads.
  std::mt19937 rng(7);
  Geom g;
  g.x = {4, 32, 16, 16};
  g.w = {64, 32, 3, 3};
  g.y = {4, 64, 8, 8};
  g.strides = {2, 2};
  g.dil = {1, 1};
  g.pads = {1, 1, 1, 1};
  json a = convAttrs(g);
  auto dy = randomVals(rng, numelOf(g.y)), w = randomVals(rng, numelOf(g.w)),
       x = randomVals(rng, numelOf(g.x));
  EXPECT_LT(relErr(runGrad("conv_input_grad", DType::F32, {g.y, g.w}, {dy, w}, g.x, a),
                   runGrad("conv_input_grad", DType::F64, {g.y, g.w}, {dy, w}, g.x, a)),
            1e-5);
  EXPECT_LT(relErr(runGrad("conv_weight_grad", DType::F32, {g.x, g.y}, {x, dy}, g.w, a),
                   runGrad("conv_weight_grad", DType::F64, {g.x, g.y}, {x, dy}, g.w, a)),
            1e-5);
}

/// A random pooling window over [N, C, D...]; `ceil` adds ceil-mode end pads.
Geom randomPool(std::mt19937 &rng, int nsp, bool ceil, std::vector<int64_t> &ceilPad) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Geom g;
  g.x = {pick(1, 2), pick(1, 4)};
  g.y = g.x;
  std::vector<int64_t> pe;
  ceilPad.clear();
  for (int i = 0; i < nsp; ++i) {
    int64_t k = pick(1, 3), s = pick(1, 3), d = pick(1, 2);
    int64_t pb = pick(0, (k - 1) / 2 + (k > 1)), pa = pick(0, k / 2);
    pb = std::min(pb, k - 1);
    pa = std::min(pa, k - 1);
    int64_t span = d * (k - 1) + 1;
    int64_t in = std::max<int64_t>(span, pick(3, 9));
    int64_t cp = 0;
    if (ceil && (in + pb + pa - span) % s) {
      cp = s - (in + pb + pa - span) % s;
      // A window starting in the end padding is dropped (PyTorch's rule).
      int64_t last = (in + pb + pa + cp - span) / s;
      if (last * s - pb >= in)
        cp = 0;
    }
    g.x.push_back(in);
    g.w.push_back(k);
    g.y.push_back((in + pb + pa + cp - span) / s + 1);
    g.strides.push_back(s);
    g.dil.push_back(d);
    g.pads.push_back(pb);
    pe.push_back(pa + cp);
    ceilPad.push_back(cp);
  }
  g.pads.insert(g.pads.end(), pe.begin(), pe.end());
  return g;
}

TEST(PoolGrad, DnnlMatchesDirect) {
  std::mt19937 rng(99);
  for (int it = 0; it < 90; ++it) {
    std::vector<int64_t> cp;
    Geom g = randomPool(rng, 1 + it % 3, it % 2 == 1, cp);
    json a = {{"kernel", g.w}, {"strides", g.strides}, {"dilations", g.dil},
              {"padding", g.pads}};
    auto dy = randomVals(rng, numelOf(g.y)), x = randomVals(rng, numelOf(g.x));
    SCOPED_TRACE("case " + std::to_string(it) + ": " + a.dump() + " x " +
                 json(g.x).dump());
    EXPECT_LT(relErr(runGrad("max_pool_grad", DType::F32, {g.y, g.x}, {dy, x}, g.x, a),
                     runGrad("max_pool_grad", DType::F64, {g.y, g.x}, {dy, x}, g.x, a)),
              1e-6);
    for (bool include : {false, true}) {
      json av = a;
      av["count_include_pad"] = include;
      av["ceil_pad"] = cp;
      EXPECT_LT(relErr(runGrad("avg_pool_grad", DType::F32, {g.y}, {dy}, g.x, av),
                       runGrad("avg_pool_grad", DType::F64, {g.y}, {dy}, g.x, av)),
                1e-6)
          << "count_include_pad " << include;
    }
  }
}

// bf16 (oneDNN's bf16 pooling backward where the CPU has it) and f16 (f32
// staging) against f64 on the same 16-bit values: max pooling on distinct
// values (no ties, so its gradient goes where f64's does), avg rounding
// once.
TEST(PoolGrad, SixteenBitMatchesF64) {
  std::mt19937 rng(7);
  for (int it = 0; it < 40; ++it) {
    std::vector<int64_t> cp;
    Geom g = randomPool(rng, 1 + it % 3, it % 2 == 1, cp);
    json a = {{"kernel", g.w}, {"strides", g.strides}, {"dilations", g.dil},
              {"padding", g.pads}};
    DType t = it % 4 < 2 ? DType::BF16 : DType::F16;
    // x: distinct values exact in both 16-bit types (k/64 for integers
    // |k| <= 128, shuffled), so no window has a tie; beyond 256 elements
    // the max is not compared.
    std::vector<double> x(numelOf(g.x));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = (double(i % 256) - 128.0) / 64.0;
    std::shuffle(x.begin(), x.end(), rng);
    x = round16(t, x);
    auto dy = round16(t, randomVals(rng, numelOf(g.y)));
    SCOPED_TRACE(std::string(dtypeName(t)) + " case " + std::to_string(it) + ": " +
                 a.dump() + " x " + json(g.x).dump());
    if (numelOf(g.x) <= 256)
      EXPECT_LT(relErr(runGrad("max_pool_grad", t, {g.y, g.x}, {dy, x}, g.x, a),
                       runGrad("max_pool_grad", DType::F64, {g.y, g.x}, {dy, x}, g.x, a)),
                1e-2);
    json av = a;
    av["count_include_pad"] = false;
    av["ceil_pad"] = cp;
    EXPECT_LT(relErr(runGrad("avg_pool_grad", t, {g.y}, {dy}, g.x, av),
                     runGrad("avg_pool_grad", DType::F64, {g.y}, {dy}, g.x, av)),
              1e-2);
  }
}

TEST(PoolGrad, MaxHandChecked) {
  // 1x1x2x4, 2x2 windows, stride 2: each window's max takes its dy.
  std::vector<double> x = {1, 5, 2, 0,  //
                           3, 4, 7, 6};
  std::vector<double> dy = {10, 20};
  json a = {{"kernel", {2, 2}}, {"strides", {2, 2}}, {"dilations", {1, 1}},
            {"padding", {0, 0, 0, 0}}};
  for (DType t : {DType::F32, DType::F64}) {
    auto dx = runGrad("max_pool_grad", t, {{1, 1, 1, 2}, {1, 1, 2, 4}}, {dy, x},
                      {1, 1, 2, 4}, a);
    EXPECT_EQ(dx, (std::vector<double>{0, 10, 0, 0, 0, 0, 20, 0}));
  }
}

TEST(ConvGrad, MalformedSpecsThrow) {
  json a = {{"strides", {1, 1}}, {"dilations", {1, 1}}, {"padding", {0, 0, 0, 0}},
            {"groups", 1}};
  // dy's spatial size does not match the convolution.
  EXPECT_THROW(makeGrad("conv_input_grad",
                        {TensorDesc{DType::F32, {1, 4, 5, 5}},
                         TensorDesc{DType::F32, {4, 3, 3, 3}}},
                        TensorDesc{DType::F32, {1, 3, 8, 8}}, a),
               Error);
  // Channels that do not match the weight.
  EXPECT_THROW(makeGrad("conv_weight_grad",
                        {TensorDesc{DType::F32, {1, 2, 8, 8}},
                         TensorDesc{DType::F32, {1, 4, 6, 6}}},
                        TensorDesc{DType::F32, {4, 3, 3, 3}}, a),
               Error);
  // Integer tensors.
  EXPECT_THROW(makeGrad("conv_input_grad",
                        {TensorDesc{DType::I32, {1, 4, 6, 6}},
                         TensorDesc{DType::I32, {4, 3, 3, 3}}},
                        TensorDesc{DType::I32, {1, 3, 8, 8}}, a),
               Error);
}

} // namespace
