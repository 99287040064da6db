//===- LossTest.cpp - softmax_cross_entropy, nll_loss and mse_loss --------===//
// SPDX-License-Identifier: Apache-2.0
//
// Randomized shapes, class axes (1 and last), weights, ignore_index and
// reductions in every float type and both label types against a double
// reference; the ONNX node test data when installed; all-ignored mean (NaN);
// out-of-range labels; threaded sizes; mse_loss; malformed specs.
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

using namespace kiln::rt;
using namespace kiln::rt::test;

namespace {

struct LossCase {
  std::vector<int64_t> shape; // logits
  int64_t axis = 1;
  bool weighted = false, hasIgnore = false;
  int64_t ignore = 0;
  std::string reduction = "mean";
};

/// Reference; `labels` flat over the label shape.
std::vector<double> refLoss(bool softmax, const LossCase &c,
                            const std::vector<double> &x,
                            const std::vector<double> &labels,
                            const std::vector<double> &w) {
  int64_t outer = 1, inner = 1, C = c.shape[c.axis];
  for (int64_t i = 0; i < c.axis; ++i)
    outer *= c.shape[i];
  for (int64_t i = c.axis + 1; i < (int64_t)c.shape.size(); ++i)
    inner *= c.shape[i];
  std::vector<double> per(outer * inner);
  double sum = 0, wsum = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < inner; ++k) {
      int64_t pos = o * inner + k, l = (int64_t)labels[pos];
      auto at = [&](int64_t j) { return x[(o * C + j) * inner + k]; };
      if (c.hasIgnore && l == c.ignore) {
        per[pos] = 0;
        continue;
      }
      double logp = at(l);
      if (softmax) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < C; ++j)
          m = std::max(m, at(j));
        for (int64_t j = 0; j < C; ++j)
          s += std::exp(at(j) - m);
        logp = at(l) - m - std::log(s);
      }
      double wl = c.weighted ? w[l] : 1.0;
      per[pos] = -logp * wl;
      sum += per[pos];
      wsum += wl;
    }
  if (c.reduction == "none")
    return per;
  return {c.reduction == "sum" ? sum : sum / wsum};
}

std::vector<int64_t> labelShapeOf(const LossCase &c) {
  std::vector<int64_t> s = c.shape;
  s.erase(s.begin() + c.axis);
  return s;
}

json attrsOf(const LossCase &c) {
  json a = {{"reduction", c.reduction}, {"class_axis", c.axis}};
  if (c.hasIgnore)
    a["ignore_index"] = c.ignore;
  return a;
}

TEST(ClassLoss, RandomAgainstReference) {
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> rankD(1, 4), dimD(1, 6);
  const char *reds[] = {"mean", "sum", "none"};
  for (int iter = 0; iter < 60; ++iter) {
    LossCase c;
    int rank = rankD(rng);
    c.shape.resize(rank);
    for (auto &d : c.shape)
      d = dimD(rng);
    if (iter % 9 == 0 && rank >= 2)
      c.shape[rank - 1] = 70;
    c.axis = (rank >= 2 && iter % 2) ? 1 : rank - 1;
    c.weighted = iter % 3 == 1;
    c.hasIgnore = iter % 4 >= 2;
    c.reduction = reds[iter % 3];
    int64_t C = c.shape[c.axis];
    c.ignore = iter % 8 == 2 ? -100 : (int64_t)(rng() % C);
    auto ls = labelShapeOf(c);
    for (bool softmax : {true, false})
      for (DType t : floatTypes())
        for (DType lt : {DType::I64, DType::I32}) {
          std::vector<double> xv = randomVals(rng, numelOf(c.shape), softmax ? -5 : -6,
                                              softmax ? 5 : 0);
          std::vector<double> lv(numelOf(ls));
          for (auto &l : lv)
            l = (c.hasIgnore && rng() % 4 == 0) ? (double)c.ignore : (double)(rng() % C);
          std::vector<double> wv = randomVals(rng, C, 0.2, 2);
          HostTensor x = makeTensor(t, c.shape, xv), l = makeTensor(lt, ls, lv),
                     w = makeTensor(t, {C}, wv);
          TensorDesc od{t, c.reduction == "none" ? ls : std::vector<int64_t>{}};
          const char *kernel = softmax ? "softmax_cross_entropy" : "nll_loss";
          auto y = runOnce(cpu::registerLossKernels, kernel,
                           {&x, &l, c.weighted ? &w : nullptr}, {od}, attrsOf(c));
          expectNear(y[0], refLoss(softmax, c, xv, lv, wv), 2 * tolFor(t), 1.0,
                     std::string(kernel) + " " + dtypeName(t) + " " + x.desc().str() +
                         " axis " + std::to_string(c.axis) + " " + c.reduction);
        }
  }
}

TEST(ClassLoss, LargeThreaded) {
  std::mt19937 rng(32);
  for (LossCase c : {LossCase{{512, 1000}, 1}, LossCase{{16, 10, 40, 40}, 1},
                     LossCase{{8, 64, 1000}, 2}}) {
    c.weighted = true;
    c.hasIgnore = true;
    c.ignore = 3;
    int64_t C = c.shape[c.axis];
    auto ls = labelShapeOf(c);
    for (const char *red : {"mean", "none"}) {
      c.reduction = red;
      std::vector<double> xv = randomVals(rng, numelOf(c.shape), -10, 10);
      std::vector<double> lv(numelOf(ls));
      for (auto &l : lv)
        l = (double)(rng() % C);
      std::vector<double> wv = randomVals(rng, C, 0.2, 2);
      HostTensor x = makeTensor(DType::F32, c.shape, xv),
                 l = makeTensor(DType::I64, ls, lv), w = makeTensor(DType::F32, {C}, wv);
      TensorDesc od{DType::F32, c.reduction == "none" ? ls : std::vector<int64_t>{}};
      auto y = runOnce(cpu::registerLossKernels, "softmax_cross_entropy", {&x, &l, &w},
                       {od}, attrsOf(c));
      expectNear(y[0], refLoss(true, c, xv, lv, wv), 1e-5, 1.0, "large " + x.desc().str());
    }
  }
}

TEST(ClassLoss, AllIgnoredMeanIsNaN) {
  std::vector<double> xv = {1, 2, 3, 4, 5, 6}, lv = {7, 7};
  HostTensor x = makeTensor(DType::F32, {2, 3}, xv), l = makeTensor(DType::I64, {2}, lv);
  LossCase c{{2, 3}, 1, false, true, 7, "mean"};
  for (const char *k : {"softmax_cross_entropy", "nll_loss"}) {
    auto y = runOnce(cpu::registerLossKernels, k, {&x, &l, nullptr},
                     {TensorDesc{DType::F32, {}}}, attrsOf(c));
    EXPECT_TRUE(std::isnan(valueAt(y[0], 0))) << k;
    c.reduction = "sum";
    y = runOnce(cpu::registerLossKernels, k, {&x, &l, nullptr},
                {TensorDesc{DType::F32, {}}}, attrsOf(c));
    EXPECT_EQ(valueAt(y[0], 0), 0.0) << k;
    c.reduction = "mean";
  }
}

TEST(ClassLoss, HandChecked) {
  // logits [[0, ln 3]]: p = [1/4, 3/4]; label 1 -> -ln(3/4).
  std::vector<double> xv = {0, std::log(3.0)}, lv = {1};
  HostTensor x = makeTensor(DType::F64, {1, 2}, xv), l = makeTensor(DType::I32, {1}, lv);
  auto y = runOnce(cpu::registerLossKernels, "softmax_cross_entropy", {&x, &l, nullptr},
                   {TensorDesc{DType::F64, {}}}, json::object());
  EXPECT_NEAR(valueAt(y[0], 0), -std::log(0.75), 1e-14);
  // nll with weights, mean: (-(-1)*2 + -(-3)*1) / (2 + 1).
  std::vector<double> lp = {-1, -2, -3, -4}, l2 = {0, 1}, w = {2, 1};
  HostTensor xp = makeTensor(DType::F32, {2, 2}, lp), ll = makeTensor(DType::I64, {2}, l2),
             ww = makeTensor(DType::F32, {2}, w);
  auto z = runOnce(cpu::registerLossKernels, "nll_loss", {&xp, &ll, &ww},
                   {TensorDesc{DType::F32, {}}}, json{{"reduction", "mean"}});
  EXPECT_NEAR(valueAt(z[0], 0), (2.0 + 4.0) / 3.0, 1e-6);
}

TEST(ClassLoss, LabelOutOfRange) {
  std::vector<double> xv(12, 0.5), lv = {0, 4, 1, 2};
  HostTensor x = makeTensor(DType::F32, {4, 3}, xv), l = makeTensor(DType::I64, {4}, lv);
  for (const char *k : {"softmax_cross_entropy", "nll_loss"})
    for (const char *red : {"mean", "none"}) {
      TensorDesc od{DType::F32, std::string(red) == "none" ? std::vector<int64_t>{4}
                                                          : std::vector<int64_t>{}};
      try {
        runOnce(cpu::registerLossKernels, k, {&x, &l, nullptr}, {od},
                json{{"reduction", red}, {"ignore_index", -1}});
        ADD_FAILURE() << "no error";
      } catch (const Error &e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("label 4"), std::string::npos) << msg;
        EXPECT_NE(msg.find("3 classes"), std::string::npos) << msg;
      }
    }
  std::vector<double> neg = {0, -1, 1, 2};
  HostTensor ln = makeTensor(DType::I32, {4}, neg);
  EXPECT_THROW(runOnce(cpu::registerLossKernels, "nll_loss", {&x, &ln, nullptr},
                       {TensorDesc{DType::F32, {}}}, json::object()),
               Error);
  // ... but -1 is fine when it is the ignore_index.
  EXPECT_NO_THROW(runOnce(cpu::registerLossKernels, "nll_loss", {&x, &ln, nullptr},
                          {TensorDesc{DType::F32, {}}}, json{{"ignore_index", -1}}));
}

TEST(ClassLoss, OnnxNodeTests) {
  // name, softmax?, reduction, ignore_index (INT64_MIN: none), weighted.
  struct Case {
    const char *test;
    bool softmax;
    const char *reduction;
    int64_t ignore;
  };
  const int64_t kNo = INT64_MIN;
  const Case cases[] = {
      {"test_nllloss_NC", false, "none", kNo},
      {"test_nllloss_NCd1", false, "mean", kNo},
      {"test_nllloss_NCd1_ii", false, "mean", 1},
      {"test_nllloss_NCd1_mean_weight_negative_ii", false, "mean", -1},
      {"test_nllloss_NCd1_weight", false, "mean", kNo},
      {"test_nllloss_NCd1_weight_ii", false, "mean", 1},
      {"test_nllloss_NCd1d2", false, "none", kNo},
      {"test_nllloss_NCd1d2_no_weight_reduction_mean_ii", false, "mean", 1},
      {"test_nllloss_NCd1d2_reduction_mean", false, "mean", kNo},
      {"test_nllloss_NCd1d2_reduction_sum", false, "sum", kNo},
      {"test_nllloss_NCd1d2_with_weight", false, "none", kNo},
      {"test_nllloss_NCd1d2_with_weight_reduction_mean", false, "mean", kNo},
      {"test_nllloss_NCd1d2_with_weight_reduction_sum", false, "sum", kNo},
      {"test_nllloss_NCd1d2_with_weight_reduction_sum_ii", false, "sum", 0},
      {"test_nllloss_NCd1d2d3_none_no_weight_negative_ii", false, "none", -5},
      {"test_nllloss_NCd1d2d3_sum_weight_high_ii", false, "sum", 10},
      {"test_nllloss_NCd1d2d3d4d5_mean_weight", false, "mean", kNo},
      {"test_nllloss_NCd1d2d3d4d5_none_no_weight", false, "none", kNo},
      {"test_sce_NCd1_mean_weight_negative_ii", true, "mean", -1},
      {"test_sce_NCd1d2d3_none_no_weight_negative_ii", true, "none", -5},
      {"test_sce_NCd1d2d3_sum_weight_high_ii", true, "sum", 10},
      {"test_sce_NCd1d2d3d4d5_mean_weight", true, "mean", kNo},
      {"test_sce_NCd1d2d3d4d5_none_no_weight", true, "none", kNo},
      {"test_sce_mean", true, "mean", kNo},
      {"test_sce_mean_3d", true, "mean", kNo},
      {"test_sce_mean_no_weight_ii", true, "mean", 2},
      {"test_sce_mean_no_weight_ii_3d", true, "mean", 2},
      {"test_sce_mean_no_weight_ii_4d", true, "mean", 2},
      {"test_sce_mean_weight", true, "mean", kNo},
      {"test_sce_mean_weight_ii", true, "mean", 0},
      {"test_sce_mean_weight_ii_3d", true, "mean", 1},
      {"test_sce_mean_weight_ii_4d", true, "mean", 2},
      {"test_sce_none", true, "none", kNo},
      {"test_sce_none_weights", true, "none", kNo},
      {"test_sce_sum", true, "sum", kNo},
  };
  int ran = 0;
  for (const Case &c : cases) {
    std::string dir = onnxNodeDir(c.test);
    if (dir.empty())
      continue;
    HostTensor x = onnxTensor(dir, "input", 0), l = onnxTensor(dir, "input", 1), w;
    std::string wpath = dir + "/test_data_set_0/input_2.pb";
    bool weighted = readTensorProto(wpath, w);
    HostTensor want = onnxTensor(dir, "output", 0);
    json attrs = {{"reduction", c.reduction}, {"class_axis", 1}};
    if (c.ignore != kNo)
      attrs["ignore_index"] = c.ignore;
    auto y = runOnce(cpu::registerLossKernels,
                     c.softmax ? "softmax_cross_entropy" : "nll_loss",
                     {&x, &l, weighted ? &w : nullptr}, {want.desc()}, attrs);
    expectNear(y[0], valuesOf(want), 1e-5, 1e-5, c.test);
    ++ran;
  }
  if (!ran)
    GTEST_SKIP() << "ONNX node test data not installed";
}

TEST(MseLoss, Random) {
  std::mt19937 rng(41);
  std::vector<std::vector<int64_t>> shapes = {{}, {0}, {5}, {3, 4}, {2, 3, 4}, {300, 500}};
  for (const auto &shape : shapes)
    for (DType t : floatTypes())
      for (const char *red : {"mean", "sum", "none"}) {
        int64_t n = numelOf(shape);
        if (t == DType::F16 && std::string(red) == "sum" && n > 1000)
          continue; // beyond f16's range
        std::vector<double> xv = randomVals(rng, n, -3, 3), tv = randomVals(rng, n, -3, 3);
        HostTensor x = makeTensor(t, shape, xv), tt = makeTensor(t, shape, tv);
        std::vector<double> want;
        double s = 0;
        for (int64_t i = 0; i < n; ++i) {
          double d = xv[i] - tv[i];
          want.push_back(d * d);
          s += d * d;
        }
        std::string r = red;
        if (r != "none")
          want = {r == "sum" ? s : s / (double)n};
        TensorDesc od = r == "none" ? x.desc() : TensorDesc{t, {}};
        auto y = runOnce(cpu::registerLossKernels, "mse_loss", {&x, &tt}, {od},
                         json{{"reduction", red}});
        expectNear(y[0], want, 2 * tolFor(t), 1e-3,
                   std::string("mse ") + x.desc().str() + " " + red);
      }
}

TEST(Loss, Malformed) {
  auto reg = cpu::registerLossKernels;
  TensorDesc x{DType::F32, {4, 3}}, l{DType::I64, {4}}, s{DType::F32, {}},
      w{DType::F32, {3}};
  EXPECT_NO_THROW(build(reg, "softmax_cross_entropy", {&x, &l, nullptr}, {s}, json::object()));
  EXPECT_NO_THROW(build(reg, "nll_loss", {&x, &l, &w}, {s}, json::object()));
  TensorDesc l3{DType::I64, {3}}, lf{DType::F32, {4}}, w4{DType::F32, {4}};
  EXPECT_THROW(build(reg, "nll_loss", {&x, &l3, nullptr}, {s}, json::object()), Error);
  EXPECT_THROW(build(reg, "nll_loss", {&x, &lf, nullptr}, {s}, json::object()), Error);
  EXPECT_THROW(build(reg, "nll_loss", {&x, &l, &w4}, {s}, json::object()), Error);
  EXPECT_THROW(build(reg, "nll_loss", {&x}, {s}, json::object()), Error);
  EXPECT_THROW(build(reg, "nll_loss", {&x, &l, nullptr}, {s}, json{{"reduction", "avg"}}),
               Error);
  EXPECT_THROW(build(reg, "nll_loss", {&x, &l, nullptr}, {s}, json{{"reduction", "none"}}),
               Error);
  EXPECT_THROW(build(reg, "nll_loss", {&x, &l, nullptr}, {s}, json{{"class_axis", 2}}),
               Error);
  EXPECT_THROW(build(reg, "nll_loss", {&x, &l, nullptr}, {TensorDesc{DType::F64, {}}},
                     json::object()),
               Error);
  TensorDesc xi{DType::I32, {4, 3}};
  EXPECT_THROW(build(reg, "nll_loss", {&xi, &l, nullptr}, {s}, json::object()), Error);
  // mse_loss
  TensorDesc y{DType::F32, {4, 2}};
  EXPECT_THROW(build(reg, "mse_loss", {&x, &y}, {s}, json::object()), Error);
  EXPECT_THROW(build(reg, "mse_loss", {&x, &x}, {x}, json::object()), Error);
  EXPECT_THROW(build(reg, "mse_loss", {&x, &x}, {s}, json{{"reduction", "max"}}), Error);
  EXPECT_NO_THROW(build(reg, "mse_loss", {&x, &x}, {x}, json{{"reduction", "none"}}));
}

} // namespace
