//===- NormTest.cpp - batch_norm, batch_norm_train and layer_norm ---------===//
// SPDX-License-Identifier: Apache-2.0
//
// Randomized shapes in every float type against double references
// (including the [N, C] path of batch_norm_train and threaded sizes), the
// ONNX node test data when installed (which fixes the running variance to
// the biased batch variance), zero-size inputs, and malformed specs.
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

using namespace kiln::rt;
using namespace kiln::rt::test;

namespace {

struct Ncs {
  int64_t n, c, s;
};
Ncs ncsOf(const std::vector<int64_t> &shape) {
  Ncs g{shape[0], shape[1], 1};
  for (size_t i = 2; i < shape.size(); ++i)
    g.s *= shape[i];
  return g;
}

std::vector<double> refBatchNorm(const std::vector<double> &x,
                                 const std::vector<int64_t> &shape,
                                 const std::vector<double> &scale,
                                 const std::vector<double> &bias,
                                 const std::vector<double> &mean,
                                 const std::vector<double> &var, double eps) {
  Ncs g = ncsOf(shape);
  std::vector<double> y(x.size());
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t s = 0; s < g.s; ++s) {
        int64_t i = (n * g.c + c) * g.s + s;
        y[i] = scale[c] * (x[i] - mean[c]) / std::sqrt(var[c] + eps) + bias[c];
      }
  return y;
}

TEST(BatchNorm, InferenceRandom) {
  std::mt19937 rng(11);
  std::vector<std::vector<int64_t>> shapes = {
      {2, 3}, {1, 1, 1}, {2, 3, 4, 5}, {3, 4, 7}, {2, 2, 3, 3, 2}, {4, 16, 40, 40}};
  for (const auto &shape : shapes)
    for (DType t : floatTypes()) {
      int64_t c = shape[1];
      std::vector<double> xv = randomVals(rng, numelOf(shape), -3, 3);
      std::vector<double> sv = randomVals(rng, c, 0.5, 2), bv = randomVals(rng, c, -1, 1),
                          mv = randomVals(rng, c, -1, 1), vv = randomVals(rng, c, 0.1, 3);
      HostTensor x = makeTensor(t, shape, xv), s = makeTensor(t, {c}, sv),
                 b = makeTensor(t, {c}, bv), m = makeTensor(t, {c}, mv),
                 v = makeTensor(t, {c}, vv);
      auto y = runOnce(cpu::registerNormKernels, "batch_norm", {&x, &s, &b, &m, &v},
                       {x.desc()}, json{{"epsilon", 1e-3}});
      expectNear(y[0], refBatchNorm(xv, shape, sv, bv, mv, vv, 1e-3), tolFor(t), 1.0,
                 std::string("batch_norm ") + x.desc().str());
    }
}

TEST(BatchNorm, MixedParamTypes) {
  // Per-channel parameters of another float type than the input are read
  // as such.
  std::mt19937 rng(3);
  std::vector<int64_t> shape = {2, 3, 4};
  std::vector<double> xv = randomVals(rng, 24, -3, 3), sv = {1, 2, 3}, bv = {0, 1, 2},
                      mv = {0.5, -0.5, 0}, vv = {1, 2, 0.5};
  HostTensor x = makeTensor(DType::F16, shape, xv), s = makeTensor(DType::F32, {3}, sv),
             b = makeTensor(DType::F64, {3}, bv), m = makeTensor(DType::BF16, {3}, mv),
             v = makeTensor(DType::F32, {3}, vv);
  auto y = runOnce(cpu::registerNormKernels, "batch_norm", {&x, &s, &b, &m, &v},
                   {x.desc()}, json{{"epsilon", 1e-5}});
  expectNear(y[0], refBatchNorm(xv, shape, sv, bv, mv, vv, 1e-5), tolFor(DType::F16),
             1.0, "mixed");
}

TEST(BatchNormTrain, Random) {
  std::mt19937 rng(12);
  std::vector<std::vector<int64_t>> shapes = {
      {5, 3}, {1, 1}, {2, 3, 4, 5}, {7, 4, 3}, {2000, 40}, {8, 3, 70, 70}};
  for (const auto &shape : shapes)
    for (DType t : floatTypes()) {
      Ncs g = ncsOf(shape);
      int64_t c = g.c;
      std::vector<double> xv = randomVals(rng, numelOf(shape), -3, 5);
      std::vector<double> sv = randomVals(rng, c, 0.5, 2), bv = randomVals(rng, c, -1, 1),
                          mv = randomVals(rng, c, -1, 1), vv = randomVals(rng, c, 0.1, 3);
      HostTensor x = makeTensor(t, shape, xv), s = makeTensor(t, {c}, sv),
                 b = makeTensor(t, {c}, bv), m = makeTensor(t, {c}, mv),
                 v = makeTensor(t, {c}, vv);
      double eps = 1e-5, mom = 0.8;
      std::vector<double> bm(c, 0), bvar(c, 0);
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t k = 0; k < g.s; ++k)
            bm[ch] += xv[(n * c + ch) * g.s + k];
      double cnt = (double)(g.n * g.s);
      for (auto &e : bm)
        e /= cnt;
      for (int64_t n = 0; n < g.n; ++n)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t k = 0; k < g.s; ++k) {
            double d = xv[(n * c + ch) * g.s + k] - bm[ch];
            bvar[ch] += d * d / cnt;
          }
      std::vector<double> rm(c), rv(c);
      for (int64_t ch = 0; ch < c; ++ch) {
        rm[ch] = mv[ch] * mom + bm[ch] * (1 - mom);
        rv[ch] = vv[ch] * mom + bvar[ch] * (1 - mom);
      }
      auto y = runOnce(cpu::registerNormKernels, "batch_norm_train",
                       {&x, &s, &b, &m, &v}, {x.desc(), m.desc(), v.desc()},
                       json{{"epsilon", eps}, {"momentum", mom}});
      std::string what = std::string("batch_norm_train ") + x.desc().str();
      expectNear(y[0], refBatchNorm(xv, shape, sv, bv, bm, bvar, eps),
                 4 * tolFor(t), 1.0, what);
      expectNear(y[1], rm, tolFor(t), 1.0, what + " running mean");
      expectNear(y[2], rv, tolFor(t), 1.0, what + " running var");
    }
}

TEST(BatchNorm, ZeroSize) {
  std::vector<double> none, p = {1, 1, 1};
  HostTensor x = makeTensor(DType::F32, {0, 3, 4}, none);
  HostTensor s = makeTensor(DType::F32, {3}, p);
  auto y = runOnce(cpu::registerNormKernels, "batch_norm", {&x, &s, &s, &s, &s},
                   {x.desc()}, json{{"epsilon", 1e-5}});
  EXPECT_EQ(y[0].numel(), 0);
  auto yt = runOnce(cpu::registerNormKernels, "batch_norm_train", {&x, &s, &s, &s, &s},
                    {x.desc(), s.desc(), s.desc()},
                    json{{"epsilon", 1e-5}, {"momentum", 0.9}});
  EXPECT_EQ(yt[0].numel(), 0);
}

std::vector<double> refLayerNorm(const std::vector<double> &x, int64_t outer,
                                 int64_t n, const std::vector<double> &g,
                                 const std::vector<double> &b, double eps,
                                 std::vector<double> &mean, std::vector<double> &inv) {
  std::vector<double> y(x.size());
  mean.assign(outer, 0);
  inv.assign(outer, 0);
  for (int64_t o = 0; o < outer; ++o) {
    double s = 0, m2 = 0;
    for (int64_t j = 0; j < n; ++j)
      s += x[o * n + j];
    double m = s / n;
    for (int64_t j = 0; j < n; ++j)
      m2 += (x[o * n + j] - m) * (x[o * n + j] - m);
    double r = 1 / std::sqrt(m2 / n + eps);
    for (int64_t j = 0; j < n; ++j)
      y[o * n + j] = (x[o * n + j] - m) * r * g[j] + b[j];
    mean[o] = m;
    inv[o] = r;
  }
  return y;
}

TEST(LayerNorm, Random) {
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> rankD(1, 4), dimD(1, 8);
  for (int iter = 0; iter < 40; ++iter) {
    int rank = rankD(rng);
    std::vector<int64_t> shape(rank);
    for (auto &d : shape)
      d = dimD(rng);
    if (iter == 5)
      shape = {64, 1024};
    if (iter == 6)
      shape = {3, 50000};
    rank = (int)shape.size();
    int64_t axis = iter % 3 == 0 ? -1 : (int64_t)(rng() % rank);
    int64_t a = axis < 0 ? rank - 1 : axis;
    std::vector<int64_t> normShape(shape.begin() + a, shape.end()), stat = shape;
    for (int64_t i = a; i < rank; ++i)
      stat[i] = 1;
    int64_t n = numelOf(normShape), outer = numelOf(shape) / n;
    for (DType t : floatTypes()) {
      std::vector<double> xv = randomVals(rng, numelOf(shape), -2, 6);
      std::vector<double> gv = randomVals(rng, n, 0.5, 1.5), bv = randomVals(rng, n, -1, 1);
      HostTensor x = makeTensor(t, shape, xv), g = makeTensor(t, normShape, gv),
                 b = makeTensor(t, normShape, bv);
      TensorDesc sd{t, stat};
      auto y = runOnce(cpu::registerNormKernels, "layer_norm", {&x, &g, &b},
                       {x.desc(), sd, sd}, json{{"axis", axis}, {"epsilon", 1e-4}});
      std::vector<double> mean, inv;
      auto want = refLayerNorm(xv, outer, n, gv, bv, 1e-4, mean, inv);
      std::string what = std::string("layer_norm ") + x.desc().str() + " axis " +
                         std::to_string(axis);
      expectNear(y[0], want, 4 * tolFor(t), 1.0, what);
      expectNear(y[1], mean, tolFor(t), 1.0, what + " mean");
      expectNear(y[2], inv, tolFor(t), 1.0, what + " inv_std_dev");
    }
  }
}

TEST(LayerNorm, F32StatsOfBf16Input) {
  std::vector<double> xv = {1, 2, 3, 4, 10, 20, 30, 40}, gv = {1, 1, 1, 1},
                      bv = {0, 0, 0, 0};
  HostTensor x = makeTensor(DType::BF16, {2, 4}, xv), g = makeTensor(DType::BF16, {4}, gv),
             b = makeTensor(DType::BF16, {4}, bv);
  TensorDesc sd{DType::F32, {2, 1}};
  auto y = runOnce(cpu::registerNormKernels, "layer_norm", {&x, &g, &b},
                   {x.desc(), sd, sd}, json{{"axis", 1}, {"epsilon", 0.0}});
  expectNear(y[1], {2.5, 25}, 1e-7, 0, "mean");
  expectNear(y[2], {1 / std::sqrt(1.25), 1 / std::sqrt(125.0)}, 1e-6, 0, "inv");
}

TEST(Norm, OnnxNodeTests) {
  int ran = 0;
  for (const char *test : {"test_batchnorm_example", "test_batchnorm_epsilon"}) {
    std::string dir = onnxNodeDir(test);
    if (dir.empty())
      continue;
    double eps = std::string(test).find("epsilon") != std::string::npos
                     ? (double)0.01f : 1e-5;
    HostTensor in[5];
    for (int i = 0; i < 5; ++i)
      in[i] = onnxTensor(dir, "input", i);
    auto y = runOnce(cpu::registerNormKernels, "batch_norm",
                     {&in[0], &in[1], &in[2], &in[3], &in[4]}, {in[0].desc()},
                     json{{"epsilon", eps}});
    expectNear(y[0], valuesOf(onnxTensor(dir, "output", 0)), 1e-5, 1e-5, test);
    std::string tdir = onnxNodeDir(std::string(test) + "_training_mode");
    if (tdir.empty())
      continue;
    for (int i = 0; i < 5; ++i)
      in[i] = onnxTensor(tdir, "input", i);
    auto yt = runOnce(cpu::registerNormKernels, "batch_norm_train",
                      {&in[0], &in[1], &in[2], &in[3], &in[4]},
                      {in[0].desc(), in[3].desc(), in[4].desc()},
                      json{{"epsilon", eps}, {"momentum", (double)0.9f}});
    for (int o = 0; o < 3; ++o)
      expectNear(yt[o], valuesOf(onnxTensor(tdir, "output", o)), 1e-5, 1e-5,
                 tdir + " output " + std::to_string(o));
    ++ran;
  }
  struct LnCase {
    const char *test;
    int64_t axis;
    double eps;
  };
  const double e1 = (double)0.1f;
  const LnCase ln[] = {
      {"test_layer_normalization_2d_axis0", 0, 1e-5},
      {"test_layer_normalization_2d_axis1", 1, 1e-5},
      {"test_layer_normalization_2d_axis_negative_1", -1, 1e-5},
      {"test_layer_normalization_2d_axis_negative_2", -2, 1e-5},
      {"test_layer_normalization_3d_axis0_epsilon", 0, e1},
      {"test_layer_normalization_3d_axis1_epsilon", 1, e1},
      {"test_layer_normalization_3d_axis2_epsilon", 2, e1},
      {"test_layer_normalization_3d_axis_negative_1_epsilon", -1, e1},
      {"test_layer_normalization_3d_axis_negative_2_epsilon", -2, e1},
      {"test_layer_normalization_3d_axis_negative_3_epsilon", -3, e1},
      {"test_layer_normalization_4d_axis0", 0, 1e-5},
      {"test_layer_normalization_4d_axis1", 1, 1e-5},
      {"test_layer_normalization_4d_axis2", 2, 1e-5},
      {"test_layer_normalization_4d_axis3", 3, 1e-5},
      {"test_layer_normalization_4d_axis_negative_1", -1, 1e-5},
      {"test_layer_normalization_4d_axis_negative_2", -2, 1e-5},
      {"test_layer_normalization_4d_axis_negative_3", -3, 1e-5},
      {"test_layer_normalization_4d_axis_negative_4", -4, 1e-5},
      {"test_layer_normalization_default_axis", -1, 1e-5},
  };
  for (const LnCase &c : ln) {
    std::string dir = onnxNodeDir(c.test);
    if (dir.empty())
      continue;
    HostTensor x = onnxTensor(dir, "input", 0), g = onnxTensor(dir, "input", 1),
               b = onnxTensor(dir, "input", 2);
    HostTensor o[3];
    for (int i = 0; i < 3; ++i)
      o[i] = onnxTensor(dir, "output", i);
    auto y = runOnce(cpu::registerNormKernels, "layer_norm", {&x, &g, &b},
                     {o[0].desc(), o[1].desc(), o[2].desc()},
                     json{{"axis", c.axis}, {"epsilon", c.eps}});
    for (int i = 0; i < 3; ++i)
      expectNear(y[i], valuesOf(o[i]), 1e-5, 0.1,
                 std::string(c.test) + " output " + std::to_string(i));
    ++ran;
  }
  if (!ran)
    GTEST_SKIP() << "ONNX node test data not installed";
}

TEST(Norm, Malformed) {
  auto reg = cpu::registerNormKernels;
  TensorDesc x{DType::F32, {2, 3, 4}}, p{DType::F32, {3}}, bad{DType::F32, {4}};
  json eps = {{"epsilon", 1e-5}};
  EXPECT_THROW(build(reg, "batch_norm", {&x, &p, &p, &p, &bad}, {x}, eps), Error);
  EXPECT_THROW(build(reg, "batch_norm", {&x, &p, &p, &p}, {x}, eps), Error);
  EXPECT_THROW(build(reg, "batch_norm", {&x, &p, &p, &p, nullptr}, {x}, eps), Error);
  TensorDesc x1{DType::F32, {3}};
  EXPECT_THROW(build(reg, "batch_norm", {&x1, &p, &p, &p, &p}, {x1}, eps), Error);
  TensorDesc xi{DType::I32, {2, 3, 4}};
  EXPECT_THROW(build(reg, "batch_norm", {&xi, &p, &p, &p, &p}, {xi}, eps), Error);
  EXPECT_THROW(build(reg, "batch_norm", {&x, &p, &p, &p, &p}, {p}, eps), Error);
  EXPECT_THROW(build(reg, "batch_norm", {&x, &p, &p, &p, &p}, {x},
                     json{{"epsilon", -1.0}}),
               Error);
  EXPECT_THROW(build(reg, "batch_norm_train", {&x, &p, &p, &p, &p}, {x, p}, eps), Error);
  EXPECT_THROW(build(reg, "batch_norm_train", {&x, &p, &p, &p, &p}, {x, p, bad}, eps),
               Error);
  // layer_norm
  TensorDesc g{DType::F32, {4}}, st{DType::F32, {2, 3, 1}};
  json ax = {{"axis", 2}, {"epsilon", 1e-5}};
  EXPECT_NO_THROW(build(reg, "layer_norm", {&x, &g, &g}, {x, st, st}, ax));
  EXPECT_THROW(build(reg, "layer_norm", {&x, &p, &p}, {x, st, st}, ax), Error);
  EXPECT_THROW(build(reg, "layer_norm", {&x, &g, &g}, {x, x, st}, ax), Error);
  EXPECT_THROW(build(reg, "layer_norm", {&x, &g, &g}, {x, st, st},
                     json{{"axis", 3}, {"epsilon", 1e-5}}),
               Error);
  TensorDesc g16{DType::F16, {4}};
  EXPECT_THROW(build(reg, "layer_norm", {&x, &g16, &g}, {x, st, st}, ax), Error);
  EXPECT_THROW(build(reg, "layer_norm", {&x, &g, &g}, {x, st}, ax), Error);
}

} // namespace
