//===- PoolTest.cpp - the max_pool and avg_pool kernels -------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// Randomized 1-D/2-D/3-D pooling with padding, strides, dilations,
// count_include_pad and ceil_pad in every float type against a direct
// reference, hand-checked ONNX cases, and malformed specs.
//===----------------------------------------------------------------------===//
#include "PoolWindow.h"
#include "TestUtil.h"

#include <chrono>
#include <cmath>
#include <random>

using namespace kiln::rt;
using namespace kiln::rt::test;
using nlohmann::json;

namespace {

std::unique_ptr<Kernel> makeKernel(const std::string &name, const TensorDesc &in,
                                   const TensorDesc &out, const json &attrs) {
  return build(cpu::registerPoolKernels, name, {in}, {out}, attrs);
}

struct PoolCase {
  std::vector<int64_t> x, kernel, strides, dilations, padding, ceilPad;
  bool includePad = false;
};

/// The reference: every window tap tested against the input and the
/// counted extent.
std::vector<double> refPool(bool isMax, const PoolCase &c,
                            const std::vector<double> &x,
                            std::vector<int64_t> &os) {
  size_t nsp = c.x.size() - 2;
  os = {c.x[0], c.x[1]};
  for (size_t i = 0; i < nsp; ++i)
    os.push_back((c.x[i + 2] + c.padding[i] + c.padding[i + nsp] -
                  c.dilations[i] * (c.kernel[i] - 1) - 1) / c.strides[i] + 1);
  std::vector<double> y;
  std::vector<int64_t> oi(os.size(), 0);
  do {
    double acc = isMax ? -INFINITY : 0;
    int64_t real = 0, counted = 0;
    std::vector<int64_t> ki(nsp, 0);
    do {
      bool inside = true, inCount = true;
      int64_t off = oi[0] * c.x[1] + oi[1];
      for (size_t i = 0; i < nsp; ++i) {
        int64_t p = oi[i + 2] * c.strides[i] - c.padding[i] + ki[i] * c.dilations[i];
        int64_t cp = c.ceilPad.empty() ? 0 : c.ceilPad[i];
        inside &= p >= 0 && p < c.x[i + 2];
        inCount &= p < c.x[i + 2] + c.padding[i + nsp] - cp;
        off = off * c.x[i + 2] + p;
      }
      counted += inCount;
      if (!inside)
        continue;
      ++real;
      acc = isMax ? std::max(acc, x[off]) : acc + x[off];
    } while (nextIndex(ki, c.kernel));
    if (!isMax) {
      int64_t div = c.includePad ? counted : real;
      acc = div ? acc / div : 0;
    }
    y.push_back(acc);
  } while (nextIndex(oi, os));
  return y;
}

void checkCase(bool isMax, DType t, const PoolCase &c, std::mt19937 &rng) {
  std::uniform_real_distribution<double> dist(-4, 4);
  std::vector<double> xv(numelOf(c.x));
  for (double &v : xv)
    v = dist(rng);
  if (t == DType::U8)
    for (double &v : xv)
      v = std::floor((v + 4) * 30);
  else if (t == DType::I32)
    for (double &v : xv)
      v = std::floor(v * 1000);
  HostTensor xh = makeTensor(t, c.x, xv);
  std::vector<int64_t> os;
  std::vector<double> ref = refPool(isMax, c, xv, os);
  json attrs = {{"kernel", c.kernel}, {"strides", c.strides},
                {"dilations", c.dilations}, {"padding", c.padding}};
  if (!isMax) {
    attrs["count_include_pad"] = c.includePad;
    if (!c.ceilPad.empty())
      attrs["ceil_pad"] = c.ceilPad;
  }
  TensorDesc od{t, os};
  std::string name = isMax ? "max_pool" : "avg_pool";
  auto k = makeKernel(name, xh.desc(), od, attrs);
  HostTensor oh(od);
  const void *in[] = {xh.data()};
  void *out[] = {oh.data()};
  ExecContext ctx;
  double tol = t == DType::F64 ? 1e-12
               : t == DType::F32 ? 1e-5
               : t == DType::F16 ? 4e-3
               : isMax && t != DType::BF16 ? 0 : 1.6e-2;
  if (t == DType::I32 || t == DType::U8)
    tol = 0;
  k->run(ctx, in, out);
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(valueAt(oh, i), ref[i], tol * std::max(1.0, std::fabs(ref[i])))
        << name << " " << dtypeName(t) << " x " << xh.desc().str() << " attrs "
        << attrs.dump() << " at " << i;
}

std::vector<PoolCase> cases() {
  return {
      {{1, 1, 7}, {3}, {1}, {1}, {0, 0}},
      {{2, 3, 9}, {3}, {2}, {1}, {1, 2}, {1}},
      {{1, 2, 10}, {2}, {3}, {2}, {1, 1}},
      {{1, 1, 4, 4}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}},
      {{2, 3, 8, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{1, 2, 9, 10}, {3, 2}, {2, 3}, {1, 1}, {1, 0, 2, 1}, {1, 0}},
      {{1, 2, 7, 7}, {3, 3}, {2, 2}, {2, 2}, {2, 1, 2, 2}, {0, 1}},
      {{1, 2, 5, 5}, {2, 2}, {2, 2}, {1, 1}, {1, 1, 1, 1}},
      {{1, 2, 6, 5, 7}, {2, 3, 2}, {1, 2, 2}, {1, 1, 2}, {1, 0, 1, 0, 1, 1}, {0, 0, 1}},
      {{1, 3, 4, 5, 4}, {3, 3, 3}, {2, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}},
      {{4, 8, 33, 31}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 2}, {0, 1}}, // threaded
  };
}

} // namespace

TEST(Pool, RandomAllTypes) {
  std::mt19937 rng(11);
  for (bool isMax : {true, false})
    for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
      for (PoolCase c : cases())
        for (bool includePad : {false, true}) {
          c.includePad = includePad;
          checkCase(isMax, t, c, rng);
        }
}

TEST(Pool, MaxPoolIntegers) {
  std::mt19937 rng(12);
  for (DType t : {DType::I32, DType::U8})
    for (const PoolCase &c : cases())
      checkCase(true, t, c, rng);
}

// ONNX's averagepool_2d_pads_count_include_pad and maxpool_2d_pads shapes.
TEST(Pool, HandChecked) {
  std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  HostTensor xh = makeTensor(DType::F32, {1, 1, 3, 3}, x);
  TensorDesc od{DType::F32, {1, 1, 2, 2}};
  json attrs = {{"kernel", {2, 2}}, {"strides", {2, 2}}, {"dilations", {1, 1}},
                {"padding", {1, 1, 0, 0}}};
  HostTensor oh(od);
  const void *in[] = {xh.data()};
  void *out[] = {oh.data()};
  ExecContext ctx;
  makeKernel("max_pool", xh.desc(), od, attrs)->run(ctx, in, out);
  EXPECT_EQ(oh.as<float>()[0], 1);
  EXPECT_EQ(oh.as<float>()[1], 3);
  EXPECT_EQ(oh.as<float>()[2], 7);
  EXPECT_EQ(oh.as<float>()[3], 9);
  makeKernel("avg_pool", xh.desc(), od, attrs)->run(ctx, in, out);
  EXPECT_EQ(oh.as<float>()[0], 1);
  EXPECT_EQ(oh.as<float>()[1], 2.5);
  EXPECT_EQ(oh.as<float>()[2], 5.5);
  EXPECT_EQ(oh.as<float>()[3], 7);
  attrs["count_include_pad"] = true;
  makeKernel("avg_pool", xh.desc(), od, attrs)->run(ctx, in, out);
  EXPECT_EQ(oh.as<float>()[0], 0.25);
  EXPECT_EQ(oh.as<float>()[1], 1.25);
  EXPECT_EQ(oh.as<float>()[2], 2.75);
  EXPECT_EQ(oh.as<float>()[3], 7);
  // ceil mode on a 3x3 input, 2x2 kernel stride 2: one extra end pad that
  // is never counted.
  json ceil = {{"kernel", {2, 2}}, {"strides", {2, 2}}, {"dilations", {1, 1}},
               {"padding", {0, 0, 1, 1}}, {"ceil_pad", {1, 1}},
               {"count_include_pad", true}};
  makeKernel("avg_pool", xh.desc(), od, ceil)->run(ctx, in, out);
  EXPECT_EQ(oh.as<float>()[0], 3);
  EXPECT_EQ(oh.as<float>()[1], 4.5);
  EXPECT_EQ(oh.as<float>()[2], 7.5);
  EXPECT_EQ(oh.as<float>()[3], 9);
}

TEST(Pool, EmptyAndMalformed) {
  auto f32 = [](std::vector<int64_t> s) { return TensorDesc{DType::F32, s}; };
  json ok = {{"kernel", {2, 2}}, {"strides", {1, 1}}, {"dilations", {1, 1}},
             {"padding", {0, 0, 0, 0}}};
  {
    TensorDesc x = f32({0, 3, 4, 4}), y = f32({0, 3, 3, 3});
    auto k = makeKernel("max_pool", x, y, ok);
    HostTensor xh(x), oh(y);
    const void *in[] = {xh.data()};
    void *out[] = {oh.data()};
    ExecContext ctx;
    k->run(ctx, in, out);
  }
  TensorDesc x = f32({1, 3, 4, 4}), y = f32({1, 3, 3, 3});
  EXPECT_NO_THROW(makeKernel("avg_pool", x, y, ok));
  EXPECT_THROW(makeKernel("max_pool", x, f32({1, 3, 2, 3}), ok), Error);
  EXPECT_THROW(makeKernel("max_pool", x, TensorDesc{DType::F64, {1, 3, 3, 3}}, ok), Error);
  EXPECT_THROW(makeKernel("max_pool", f32({3, 4}), f32({3, 3}), ok), Error);
  EXPECT_THROW(makeKernel("avg_pool", TensorDesc{DType::I32, {1, 3, 4, 4}},
                          TensorDesc{DType::I32, {1, 3, 3, 3}}, ok),
               Error);
  json bad = ok;
  bad["kernel"] = {2};
  EXPECT_THROW(makeKernel("max_pool", x, y, bad), Error);
  bad = ok;
  bad["kernel"] = {5, 5};
  EXPECT_THROW(makeKernel("max_pool", x, f32({1, 3, 1, 1}), bad), Error);
  bad = ok;
  bad["dilations"] = {0, 1};
  EXPECT_THROW(makeKernel("max_pool", x, y, bad), Error);
  bad = ok;
  bad["padding"] = {0, 0, -1, 0};
  EXPECT_THROW(makeKernel("max_pool", x, y, bad), Error);
  bad = ok;
  bad["ceil_pad"] = {1, 0};
  EXPECT_THROW(makeKernel("avg_pool", x, y, bad), Error);
  bad["ceil_pad"] = {0};
  EXPECT_THROW(makeKernel("avg_pool", x, y, bad), Error);
  bad = ok;
  bad.erase("strides");
  EXPECT_THROW(makeKernel("max_pool", x, y, bad), Error);
}

// The tap tables, computed in closed form, equal a walk over every tap; and
// a window of 2^40 taps (found fuzzing the plan loader: the walk took hours)
// builds at once.
TEST(Pool, TapTablesAndHugeWindows) {
  for (int64_t in = 0; in <= 6; ++in)
    for (int64_t k = 1; k <= 4; ++k)
      for (int64_t s = 1; s <= 3; ++s)
        for (int64_t d = 1; d <= 3; ++d)
          for (int64_t pl = 0; pl <= 3; ++pl)
            for (int64_t ph = 0; ph <= 3; ++ph)
              for (int64_t cp = 0; cp <= ph; ++cp) {
                std::vector<int64_t> x{1, 1, in}, kk{k}, ss{s}, dd{d}, pp{pl, ph};
                kiln::shape::WindowAttrs a;
                a.kernel = kk;
                a.strides = ss;
                a.dilations = dd;
                a.padding = pp;
                kiln::shape::WindowGeometry g;
                if (!kiln::shape::poolGeometry(x, a, g).empty())
                  continue;
                cpu::PoolTaps t(g, true, {cp});
                const int i = 2;
                for (int64_t o = 0; o < g.out[i]; ++o) {
                  int64_t l = k, h = 0, counted = 0;
                  for (int64_t tap = 0; tap < k; ++tap) {
                    int64_t pos = o * s - pl + tap * d;
                    if (pos >= 0 && pos < in) {
                      l = std::min(l, tap);
                      h = tap + 1;
                    }
                    counted += pos < in + ph - cp;
                  }
                  if (h <= l)
                    l = h = 0;
                  ASSERT_EQ(t.lo[i][o], l) << in << " " << k << " " << s << " " << d;
                  ASSERT_EQ(t.hi[i][o], h) << in << " " << k << " " << s << " " << d;
                  ASSERT_EQ(t.div[i][o], counted) << in << " " << k << " " << s;
                }
              }
  const int64_t big = int64_t(1) << 40;
  json attrs = {{"kernel", {big}}, {"strides", {big}}, {"dilations", {1}},
                {"padding", {big, big}}, {"count_include_pad", true}};
  auto start = std::chrono::steady_clock::now();
  TensorDesc x{DType::F32, {1, 1, 4}}, y{DType::F32, {1, 1, 2}};
  auto k = makeKernel("avg_pool", x, y, attrs);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  HostTensor xh(x), oh(y);
  for (int i = 0; i < 4; ++i)
    xh.as<float>()[i] = 1.0f;
  const void *in[] = {xh.data()};
  void *out[] = {oh.data()};
  ExecContext ctx;
  k->run(ctx, in, out);
  // Window 0 covers [-2^40, 0): padding only; window 1 [0, 2^40): the four
  // inputs, divided by the whole (counted) window.
  EXPECT_EQ(oh.as<float>()[0], 0.0f);
  EXPECT_FLOAT_EQ(oh.as<float>()[1], 4.0f / float(big));
}

// Throughput of a ResNet-stem max pool and a 2x2 average pool (run with
// --gtest_also_run_disabled_tests).
TEST(Pool, DISABLED_Bench) {
  for (bool isMax : {true, false}) {
    TensorDesc x{DType::F32, {8, 64, 112, 112}}, y{DType::F32, {8, 64, 56, 56}};
    json attrs = isMax ? json{{"kernel", {3, 3}}, {"strides", {2, 2}},
                              {"dilations", {1, 1}}, {"padding", {1, 1, 0, 0}}}
                       : json{{"kernel", {2, 2}}, {"strides", {2, 2}},
                              {"dilations", {1, 1}}, {"padding", {0, 0, 0, 0}}};
    auto k = makeKernel(isMax ? "max_pool" : "avg_pool", x, y, attrs);
    HostTensor xh(x), oh(y);
    const void *in[] = {xh.data()};
    void *out[] = {oh.data()};
    ExecContext ctx;
    k->run(ctx, in, out);
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 10; ++r)
      k->run(ctx, in, out);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s f32[8,64,112,112]: %.2f ms\n", isMax ? "max_pool 3x3/2" : "avg_pool 2x2/2",
                s / 10 * 1e3);
  }
}
