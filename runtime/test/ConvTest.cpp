//===- ConvTest.cpp - the conv and conv_transpose kernels -----------------===//
// SPDX-License-Identifier: Apache-2.0
//
// Randomized 1-D/2-D/3-D convolutions and transposed convolutions (groups,
// depthwise, strides, dilations, asymmetric pads, output_padding) in every
// float type against double-precision reference loops (the transposed one
// in ONNX's scatter formulation), a hand-checked case, and malformed specs.
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cmath>
#include <random>

using namespace kiln::rt;
using namespace kiln::rt::test;
using nlohmann::json;

namespace {

std::unique_ptr<Kernel> makeKernel(const std::string &name,
                                   const std::vector<TensorDesc> &ins,
                                   const TensorDesc &out, const json &attrs) {
  return build(cpu::registerConvKernels, name, ins, {out}, attrs);
}

struct ConvCase {
  std::vector<int64_t> x, w; // input and weight shapes
  std::vector<int64_t> strides, dilations, padding, outPad;
  int64_t groups = 1;
};

/// Row-major index of `idx` in `shape`.
int64_t flat(const std::vector<int64_t> &shape, const std::vector<int64_t> &idx) {
  int64_t f = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    f = f * shape[i] + idx[i];
  return f;
}

/// Forward convolution, direct gather definition.
std::vector<double> refConv(const ConvCase &c, const std::vector<double> &x,
                            const std::vector<double> &w,
                            std::vector<int64_t> &os) {
  size_t nsp = c.x.size() - 2;
  os = {c.x[0], c.w[0]};
  for (size_t i = 0; i < nsp; ++i)
    os.push_back((c.x[i + 2] + c.padding[i] + c.padding[i + nsp] -
                  c.dilations[i] * (c.w[i + 2] - 1) - 1) / c.strides[i] + 1);
  std::vector<double> y(numelOf(os), 0.0);
  int64_t cpg = c.x[1] / c.groups, opg = c.w[0] / c.groups;
  std::vector<int64_t> ksh(c.w.begin() + 2, c.w.end());
  std::vector<int64_t> oi(os.size(), 0);
  do {
    int64_t n = oi[0], oc = oi[1], g = oc / opg;
    double acc = 0;
    for (int64_t ic = 0; ic < cpg; ++ic) {
      std::vector<int64_t> ki(nsp, 0);
      do {
        std::vector<int64_t> xi = {n, g * cpg + ic};
        bool inside = true;
        for (size_t i = 0; i < nsp; ++i) {
          int64_t p = oi[i + 2] * c.strides[i] - c.padding[i] + ki[i] * c.dilations[i];
          inside &= p >= 0 && p < c.x[i + 2];
          xi.push_back(p);
        }
        if (!inside)
          continue;
        std::vector<int64_t> wi = {oc, ic};
        wi.insert(wi.end(), ki.begin(), ki.end());
        acc += x[flat(c.x, xi)] * w[flat(c.w, wi)];
      } while (nextIndex(ki, ksh));
    }
    y[flat(os, oi)] = acc;
  } while (nextIndex(oi, os));
  return y;
}

/// Transposed convolution, ONNX's scatter definition.
std::vector<double> refConvTranspose(const ConvCase &c, const std::vector<double> &x,
                                     const std::vector<double> &w,
                                     std::vector<int64_t> &os) {
  size_t nsp = c.x.size() - 2;
  os = {c.x[0], c.w[1] * c.groups};
  for (size_t i = 0; i < nsp; ++i)
    os.push_back(c.strides[i] * (c.x[i + 2] - 1) + c.outPad[i] +
                 (c.w[i + 2] - 1) * c.dilations[i] + 1 - c.padding[i] -
                 c.padding[i + nsp]);
  std::vector<double> y(numelOf(os), 0.0);
  int64_t cpg = c.x[1] / c.groups, opg = c.w[1];
  std::vector<int64_t> ksh(c.w.begin() + 2, c.w.end());
  std::vector<int64_t> xi(c.x.size(), 0);
  do {
    int64_t n = xi[0], ic = xi[1], g = ic / cpg;
    for (int64_t ocg = 0; ocg < opg; ++ocg) {
      std::vector<int64_t> ki(nsp, 0);
      do {
        std::vector<int64_t> yi = {n, g * opg + ocg};
        bool inside = true;
        for (size_t i = 0; i < nsp; ++i) {
          int64_t p = xi[i + 2] * c.strides[i] - c.padding[i] + ki[i] * c.dilations[i];
          inside &= p >= 0 && p < os[i + 2];
          yi.push_back(p);
        }
        if (!inside)
          continue;
        std::vector<int64_t> wi = {ic, ocg};
        wi.insert(wi.end(), ki.begin(), ki.end());
        y[flat(os, yi)] += x[flat(c.x, xi)] * w[flat(c.w, wi)];
      } while (nextIndex(ki, ksh));
    }
  } while (nextIndex(xi, c.x));
  return y;
}

double tolerance(DType t, int64_t terms) {
  switch (t) {
  case DType::F64: return 1e-12 * (terms + 1);
  case DType::F32: return 2e-6 * (terms + 1);
  case DType::F16: return 2e-3 * std::sqrt((double)terms + 1) + 1e-3;
  default: return 1.6e-2 * std::sqrt((double)terms + 1) + 8e-3;
  }
}

void checkCase(const std::string &name, DType t, const ConvCase &c,
               std::mt19937 &rng) {
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> xv(numelOf(c.x)), wv(numelOf(c.w));
  for (double &v : xv)
    v = dist(rng);
  for (double &v : wv)
    v = dist(rng);
  HostTensor xh = makeTensor(t, c.x, xv), wh = makeTensor(t, c.w, wv);
  bool tr = name == "conv_transpose";
  std::vector<int64_t> os;
  std::vector<double> ref =
      tr ? refConvTranspose(c, xv, wv, os) : refConv(c, xv, wv, os);
  json attrs = {{"strides", c.strides}, {"dilations", c.dilations},
                {"padding", c.padding}, {"groups", c.groups}};
  if (tr)
    attrs["output_padding"] = c.outPad;
  TensorDesc od{t, os};
  auto k = makeKernel(name, {xh.desc(), wh.desc()}, od, attrs);
  HostTensor oh(od);
  const void *in[] = {xh.data(), wh.data()};
  void *out[] = {oh.data()};
  ExecContext ctx;
  int64_t terms = tr ? numelOf(c.w) / (c.w[0] * c.w[1]) * (c.x[1] / c.groups)
                     : numelOf(c.w) / c.w[0];
  double tol = tolerance(t, terms);
  for (int rep = 0; rep < 2; ++rep) {
    k->run(ctx, in, out);
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(valueAt(oh, i), ref[i], tol * std::max(1.0, std::fabs(ref[i])))
          << name << " " << dtypeName(t) << " x " << xh.desc().str() << " w "
          << wh.desc().str() << " attrs " << attrs.dump() << " at " << i;
  }
}

std::vector<ConvCase> convCases() {
  return {
      {{1, 1, 5}, {1, 1, 3}, {1}, {1}, {0, 0}},
      {{2, 3, 9}, {4, 3, 3}, {2}, {1}, {1, 2}},
      {{1, 4, 11}, {6, 2, 2}, {1}, {3}, {0, 1}, {}, 2},
      {{1, 1, 4, 4}, {1, 1, 2, 2}, {1, 1}, {1, 1}, {0, 0, 0, 0}},
      {{2, 3, 8, 7}, {5, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{1, 4, 9, 10}, {8, 2, 3, 2}, {2, 1}, {1, 2}, {0, 1, 2, 0}, {}, 2},
      {{2, 6, 7, 7}, {6, 1, 3, 3}, {1, 2}, {2, 1}, {2, 1, 1, 2}, {}, 6}, // depthwise
      {{1, 16, 12, 12}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{1, 8, 6, 6}, {16, 8, 1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}},
      {{1, 2, 5, 4, 6}, {3, 2, 2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 0, 1, 1}},
      {{1, 4, 4, 5, 4}, {4, 2, 3, 1, 2}, {2, 1, 1}, {1, 1, 1}, {1, 1, 0, 0, 0, 1}, {}, 2},
  };
}

std::vector<ConvCase> convTransposeCases() {
  return {
      {{1, 1, 3}, {1, 1, 3}, {1}, {1}, {0, 0}, {0}},
      {{2, 3, 5}, {3, 2, 3}, {2}, {1}, {1, 0}, {1}},
      {{1, 4, 6}, {4, 3, 2}, {3}, {2}, {0, 1}, {2}, 2},
      {{1, 1, 3, 3}, {1, 2, 3, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {0, 0}},
      {{1, 1, 3, 3}, {1, 2, 3, 3}, {3, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
      {{2, 4, 5, 4}, {4, 3, 3, 2}, {2, 2}, {1, 2}, {1, 0, 0, 1}, {1, 0}, 2},
      {{1, 6, 4, 4}, {6, 1, 3, 3}, {2, 1}, {1, 1}, {1, 1, 1, 1}, {0, 0}, 6},
      {{1, 8, 7, 7}, {8, 16, 4, 4}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0, 0}},
      // output_padding >= stride (what the converter makes of a large
      // ONNX output_shape): the extra end positions are zeros.
      {{1, 2, 3, 3}, {2, 2, 2, 2}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {2, 1}},
      {{1, 2, 3, 3}, {2, 2, 2, 2}, {2, 2}, {1, 1}, {0, 0, 1, 1}, {3, 0}},
      {{1, 2, 3, 3}, {2, 2, 3, 3}, {2, 2}, {1, 1}, {0, 0, 1, 1}, {2, 2}},
      {{1, 2, 3, 2, 3}, {2, 3, 2, 2, 3}, {2, 1, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, {1, 0, 0}},
  };
}

} // namespace

TEST(Conv, HandChecked) {
  // 1x1x3x3 input, 2x2 all-ones kernel: 2x2 window sums.
  std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w = {1, 1, 1, 1};
  HostTensor xh = makeTensor(DType::F32, {1, 1, 3, 3}, x);
  HostTensor wh = makeTensor(DType::F32, {1, 1, 2, 2}, w);
  TensorDesc od{DType::F32, {1, 1, 2, 2}};
  json attrs = {{"strides", {1, 1}}, {"dilations", {1, 1}},
                {"padding", {0, 0, 0, 0}}, {"groups", 1}};
  auto k = makeKernel("conv", {xh.desc(), wh.desc()}, od, attrs);
  HostTensor oh(od);
  const void *in[] = {xh.data(), wh.data()};
  void *out[] = {oh.data()};
  ExecContext ctx;
  k->run(ctx, in, out);
  EXPECT_EQ(oh.as<float>()[0], 12);
  EXPECT_EQ(oh.as<float>()[1], 16);
  EXPECT_EQ(oh.as<float>()[2], 24);
  EXPECT_EQ(oh.as<float>()[3], 28);
}

TEST(Conv, RandomAllTypes) {
  std::mt19937 rng(1);
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (const ConvCase &c : convCases())
      checkCase("conv", t, c, rng);
}

TEST(Conv, LargeThreaded) {
  std::mt19937 rng(2);
  checkCase("conv", DType::F32, {{2, 32, 20, 20}, {64, 32, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}}, rng);
  checkCase("conv", DType::F64, {{2, 8, 20, 20}, {16, 4, 3, 3}, {2, 1}, {1, 1}, {1, 0, 2, 1}, {}, 2}, rng);
}

TEST(ConvTranspose, RandomAllTypes) {
  std::mt19937 rng(3);
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (const ConvCase &c : convTransposeCases())
      checkCase("conv_transpose", t, c, rng);
}

TEST(ConvTranspose, HandChecked) {
  // ONNX's convtranspose_1d: x [1,1,3] = 0,1,2, w [1,2,3] all ones.
  std::vector<double> x = {0, 1, 2}, w = {1, 1, 1, 1, 1, 1};
  HostTensor xh = makeTensor(DType::F32, {1, 1, 3}, x);
  HostTensor wh = makeTensor(DType::F32, {1, 2, 3}, w);
  TensorDesc od{DType::F32, {1, 2, 5}};
  json attrs = {{"strides", {1}}, {"dilations", {1}}, {"padding", {0, 0}},
                {"output_padding", {0}}, {"groups", 1}};
  auto k = makeKernel("conv_transpose", {xh.desc(), wh.desc()}, od, attrs);
  HostTensor oh(od);
  const void *in[] = {xh.data(), wh.data()};
  void *out[] = {oh.data()};
  ExecContext ctx;
  k->run(ctx, in, out);
  const float want[] = {0, 1, 3, 3, 2, 0, 1, 3, 3, 2};
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(oh.as<float>()[i], want[i]) << i;
}

TEST(Conv, EmptyBatch) {
  TensorDesc x{DType::F32, {0, 3, 5, 5}}, w{DType::F32, {4, 3, 3, 3}},
      o{DType::F32, {0, 4, 3, 3}};
  json attrs = {{"strides", {1, 1}}, {"dilations", {1, 1}},
                {"padding", {0, 0, 0, 0}}, {"groups", 1}};
  auto k = makeKernel("conv", {x, w}, o, attrs);
  HostTensor xh(x), wh(w), oh(o);
  const void *in[] = {xh.data(), wh.data()};
  void *out[] = {oh.data()};
  ExecContext ctx;
  k->run(ctx, in, out);
}

TEST(Conv, MalformedSpecsThrow) {
  auto f32 = [](std::vector<int64_t> s) { return TensorDesc{DType::F32, s}; };
  json ok = {{"strides", {1, 1}}, {"dilations", {1, 1}},
             {"padding", {0, 0, 0, 0}}, {"groups", 1}};
  TensorDesc x = f32({1, 3, 5, 5}), w = f32({4, 3, 3, 3}), y = f32({1, 4, 3, 3});
  EXPECT_NO_THROW(makeKernel("conv", {x, w}, y, ok));
  EXPECT_THROW(makeKernel("conv", {x, w}, f32({1, 4, 4, 3}), ok), Error);
  EXPECT_THROW(makeKernel("conv", {x, f32({4, 2, 3, 3})}, y, ok), Error);
  EXPECT_THROW(makeKernel("conv", {x, f32({4, 3, 3})}, y, ok), Error);
  EXPECT_THROW(makeKernel("conv", {x, f32({4, 3, 7, 7})}, f32({1, 4, 1, 1}), ok), Error);
  EXPECT_THROW(makeKernel("conv", {x, TensorDesc{DType::F64, {4, 3, 3, 3}}}, y, ok), Error);
  EXPECT_THROW(makeKernel("conv", {TensorDesc{DType::I32, {1, 3, 5, 5}},
                                   TensorDesc{DType::I32, {4, 3, 3, 3}}},
                          TensorDesc{DType::I32, {1, 4, 3, 3}}, ok),
               Error);
  json bad = ok;
  bad["strides"] = {0, 1};
  EXPECT_THROW(makeKernel("conv", {x, w}, y, bad), Error);
  bad = ok;
  bad["padding"] = {0, 0};
  EXPECT_THROW(makeKernel("conv", {x, w}, y, bad), Error);
  bad = ok;
  bad["groups"] = 2;
  EXPECT_THROW(makeKernel("conv", {x, w}, y, bad), Error);
  bad = ok;
  bad.erase("dilations");
  EXPECT_THROW(makeKernel("conv", {x, w}, y, bad), Error);
  EXPECT_THROW(makeKernel("conv", {f32({1, 1, 2, 2, 2, 2}), f32({1, 1, 1, 1, 1, 1})},
                          f32({1, 1, 2, 2, 2, 2}),
                          json{{"strides", {1, 1, 1, 1}}, {"dilations", {1, 1, 1, 1}},
                               {"padding", {0, 0, 0, 0, 0, 0, 0, 0}}, {"groups", 1}}),
               Error);
  json tok = ok;
  tok["output_padding"] = {0, 0};
  EXPECT_NO_THROW(makeKernel("conv_transpose", {f32({1, 3, 3, 3}), f32({3, 2, 3, 3})},
                             f32({1, 2, 5, 5}), tok));
  EXPECT_THROW(makeKernel("conv_transpose", {f32({1, 3, 3, 3}), f32({2, 2, 3, 3})},
                          f32({1, 2, 5, 5}), tok),
               Error);
  EXPECT_THROW(makeKernel("conv_transpose", {f32({1, 3, 3, 3}), f32({3, 2, 3, 3})},
                          f32({1, 2, 5, 5}), ok),
               Error);
  EXPECT_THROW(makeKernel("conv_transpose", {f32({1, 3, 3, 3}), f32({3, 2, 3, 3})},
                          f32({1, 2, 6, 5}), tok),
               Error);
}
