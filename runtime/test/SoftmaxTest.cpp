//===- SoftmaxTest.cpp - the softmax and log_softmax kernels --------------===//
// SPDX-License-Identifier: Apache-2.0
//
// Randomized shapes and axes (contiguous and strided paths, threaded sizes)
// in every float type against a double reference, hand-checked and extreme
// values (large numbers, -inf, NaN), the ONNX node test data when installed,
// and malformed specs.
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

using namespace kiln::rt;
using namespace kiln::rt::test;

namespace {

std::vector<double> refSoftmax(const std::vector<double> &x,
                               const std::vector<int64_t> &shape, int64_t axis,
                               bool log) {
  int64_t outer = 1, inner = 1, n = shape[axis];
  for (int64_t i = 0; i < axis; ++i)
    outer *= shape[i];
  for (int64_t i = axis + 1; i < (int64_t)shape.size(); ++i)
    inner *= shape[i];
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k) {
      auto at = [&](int64_t j) { return o * n * inner + j * inner + k; };
      double m = -INFINITY;
      for (int64_t j = 0; j < n; ++j)
        m = std::max(m, x[at(j)]);
      double s = 0;
      for (int64_t j = 0; j < n; ++j)
        s += std::exp(x[at(j)] - m);
      for (int64_t j = 0; j < n; ++j)
        y[at(j)] = log ? x[at(j)] - m - std::log(s) : std::exp(x[at(j)] - m) / s;
    }
  return y;
}

std::vector<HostTensor> runSoftmax(const char *name, const HostTensor &x,
                                   int64_t axis) {
  return runOnce(cpu::registerSoftmaxKernels, name, {&x}, {x.desc()},
                 json{{"axis", axis}});
}

TEST(Softmax, HandChecked) {
  std::vector<double> v = {1, 2, 3};
  HostTensor x = makeTensor(DType::F32, {1, 3}, v);
  auto y = runSoftmax("softmax", x, 1);
  expectNear(y[0], {0.09003057317038046, 0.24472847105479767, 0.6652409557748219},
             1e-6, 0, "softmax");
  auto l = runSoftmax("log_softmax", x, 1);
  expectNear(l[0], {-2.40760596444438, -1.40760596444438, -0.40760596444438},
             1e-6, 0, "log_softmax");
}

TEST(Softmax, RandomAgainstReference) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> rankD(1, 4), dimD(1, 9);
  for (int iter = 0; iter < 60; ++iter) {
    int rank = rankD(rng);
    std::vector<int64_t> shape(rank);
    for (auto &d : shape)
      d = dimD(rng);
    if (iter % 7 == 0)
      shape[rng() % rank] = 70; // a tile wider than kTile
    int64_t axis = rng() % rank;
    for (DType t : floatTypes())
      for (bool log : {false, true}) {
        std::vector<double> v = randomVals(rng, numelOf(shape), -8, 8);
        HostTensor x = makeTensor(t, shape, v);
        auto y = runSoftmax(log ? "log_softmax" : "softmax", x, axis);
        expectNear(y[0], refSoftmax(v, shape, axis, log), tolFor(t),
                   log ? 1.0 : 1e-3,
                   std::string(log ? "log_softmax " : "softmax ") + dtypeName(t) +
                       " " + x.desc().str() + " axis " + std::to_string(axis));
      }
  }
}

TEST(Softmax, LargeThreaded) {
  std::mt19937 rng(7);
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  for (const Case &c : {Case{{64, 1500}, 1}, Case{{3000, 40}, 0},
                        Case{{4, 300, 90}, 1}, Case{{2, 5, 7000}, 1}})
    for (DType t : {DType::F32, DType::BF16})
      for (bool log : {false, true}) {
        std::vector<double> v = randomVals(rng, numelOf(c.shape), -20, 20);
        HostTensor x = makeTensor(t, c.shape, v);
        auto y = runSoftmax(log ? "log_softmax" : "softmax", x, c.axis);
        expectNear(y[0], refSoftmax(v, c.shape, c.axis, log), tolFor(t),
                   log ? 1.0 : 1e-6, "large " + x.desc().str());
      }
}

TEST(Softmax, ExtremeValues) {
  // Large numbers (ONNX's test_softmax_large_number), -inf entries, NaN.
  std::vector<double> v = {0.0001, 0.0002, 0.0003, 0.0004,
                           10000,  10001,  10002,  10003,
                           -INFINITY, 0, -INFINITY, 1,
                           1, NAN, 2, 3};
  HostTensor x = makeTensor(DType::F32, {4, 4}, v);
  auto y = runSoftmax("softmax", x, 1);
  std::vector<double> want = refSoftmax(v, {4, 4}, 1, false);
  expectNear(y[0], want, 1e-6, 1e-6, "softmax extreme");
  EXPECT_EQ(valueAt(y[0], 8), 0.0);
  EXPECT_TRUE(std::isnan(valueAt(y[0], 12)));
  auto l = runSoftmax("log_softmax", x, 1);
  EXPECT_NEAR(valueAt(l[0], 7), -0.4401897, 1e-5);
  EXPECT_EQ(valueAt(l[0], 8), -INFINITY);
  EXPECT_NEAR(valueAt(l[0], 11), -0.31326169, 1e-6);
  // Very negative but finite inputs underflow to exactly 0.
  std::vector<double> u = {0, -200};
  HostTensor xu = makeTensor(DType::F32, {2}, u);
  auto yu = runSoftmax("softmax", xu, 0);
  EXPECT_EQ(valueAt(yu[0], 0), 1.0);
  EXPECT_EQ(valueAt(yu[0], 1), 0.0);
}

TEST(Softmax, ZeroSizeAndDefaultAxis) {
  std::vector<double> none;
  HostTensor x = makeTensor(DType::F32, {3, 0, 4}, none);
  auto y = runSoftmax("softmax", x, 1);
  EXPECT_EQ(y[0].numel(), 0);
  // axis missing: the last one (ONNX's default).
  std::vector<double> v = {1, 2, 3, 4, 5, 6};
  HostTensor x2 = makeTensor(DType::F64, {2, 3}, v);
  auto y2 = runOnce(cpu::registerSoftmaxKernels, "softmax", {&x2}, {x2.desc()},
                    json::object());
  expectNear(y2[0], refSoftmax(v, {2, 3}, 1, false), 1e-12, 0, "default axis");
}

TEST(Softmax, OnnxNodeTests) {
  struct Case {
    const char *test, *kernel;
    int64_t axis; // -1: the last
  };
  const Case cases[] = {
      {"test_softmax_axis_0", "softmax", 0},
      {"test_softmax_axis_1", "softmax", 1},
      {"test_softmax_axis_2", "softmax", 2},
      {"test_softmax_default_axis", "softmax", -1},
      {"test_softmax_example", "softmax", -1},
      {"test_softmax_large_number", "softmax", -1},
      {"test_softmax_negative_axis", "softmax", -1},
      {"test_logsoftmax_axis_0", "log_softmax", 0},
      {"test_logsoftmax_axis_1", "log_softmax", 1},
      {"test_logsoftmax_axis_2", "log_softmax", 2},
      {"test_logsoftmax_default_axis", "log_softmax", -1},
      {"test_logsoftmax_example_1", "log_softmax", -1},
      {"test_logsoftmax_large_number", "log_softmax", -1},
      {"test_logsoftmax_negative_axis", "log_softmax", -1},
  };
  int ran = 0;
  for (const Case &c : cases) {
    std::string dir = onnxNodeDir(c.test);
    if (dir.empty())
      continue;
    HostTensor x = onnxTensor(dir, "input", 0), want = onnxTensor(dir, "output", 0);
    auto y = runSoftmax(c.kernel, x, c.axis < 0 ? x.desc().rank() - 1 : c.axis);
    expectNear(y[0], valuesOf(want), 1e-5, 1e-6, c.test);
    ++ran;
  }
  if (!ran)
    GTEST_SKIP() << "ONNX node test data not installed";
}

TEST(Softmax, Malformed) {
  TensorDesc x{DType::F32, {2, 3}};
  auto mk = [&](const TensorDesc &in, const TensorDesc &out, json attrs) {
    return build(cpu::registerSoftmaxKernels, "softmax", {&in}, {out}, attrs);
  };
  EXPECT_THROW(mk(x, x, json{{"axis", 2}}), Error);
  EXPECT_THROW(mk(x, x, json{{"axis", -3}}), Error);
  EXPECT_THROW(mk(x, TensorDesc{DType::F32, {3, 2}}, json{{"axis", 1}}), Error);
  EXPECT_THROW(mk(x, TensorDesc{DType::F64, {2, 3}}, json{{"axis", 1}}), Error);
  TensorDesc xi{DType::I32, {2, 3}};
  EXPECT_THROW(mk(xi, xi, json{{"axis", 1}}), Error);
  TensorDesc s{DType::F32, {}};
  EXPECT_THROW(mk(s, s, json{{"axis", 0}}), Error);
  EXPECT_THROW(mk(x, x, json{{"axis", "one"}}), Error);
  EXPECT_THROW(build(cpu::registerSoftmaxKernels, "log_softmax", {&x, &x}, {x},
                     json{{"axis", 1}}),
               Error);
}

} // namespace
