//===- ActivationGradTest.cpp - pointwise activation gradients ------------===//
// SPDX-License-Identifier: Apache-2.0
//
// relu_grad and gelu_grad (exact and tanh) in every float type against the
// derivative computed in double on the same (type-rounded) inputs: f32 and
// f64 run the templated loop, f16/bf16 compute in float per element
// (mixed precision's backward) and round once.
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cmath>
#include <random>

using namespace kiln::rt;
using namespace kiln::rt::test;
using nlohmann::json;

namespace {

double reluGrad(double dy, double x) { return x > 0 ? dy : 0; }
double geluGrad(double dy, double x) {
  double cdf = 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
  double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
  return dy * (cdf + x * pdf);
}
double geluTanhGrad(double dy, double x) {
  const double c = std::sqrt(2 / M_PI), a = 0.044715;
  double u = c * (x + a * x * x * x), t = std::tanh(u);
  return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * a * x * x));
}

} // namespace

TEST(ActivationGrad, EveryFloatTypeMatchesDouble) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  const int64_t n = 70001; // parallel, with a ragged end
  struct Case {
    const char *kernel, *approximate;
    double (*ref)(double, double);
  } cases[] = {{"relu_grad", nullptr, reluGrad},
               {"gelu_grad", "none", geluGrad},
               {"gelu_grad", "tanh", geluTanhGrad}};
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16})
    for (const Case &c : cases) {
      std::vector<double> dy(n), x(n);
      for (int64_t i = 0; i < n; ++i) {
        dy[i] = u(rng);
        x[i] = u(rng);
      }
      HostTensor dyT = makeTensor(t, {n}, dy), xT = makeTensor(t, {n}, x);
      json attrs = json::object();
      if (c.approximate)
        attrs["approximate"] = c.approximate;
      HostTensor got = run1(cpu::registerBackwardKernels, c.kernel, {&dyT, &xT},
                            TensorDesc{t, {n}}, attrs);
      std::vector<double> want(n);
      for (int64_t i = 0; i < n; ++i)
        want[i] = c.ref(dy[i], x[i]);
      SCOPED_TRACE(std::string(c.kernel) + " " + (c.approximate ? c.approximate : "") +
                   " " + dtypeName(t));
      // One rounding of the result in t (float arithmetic for 16-bit and f32).
      double tol = t == DType::F64 ? 1e-12 : t == DType::F32 ? 1e-5
                   : t == DType::F16 ? 2e-3 : 1e-2;
      std::vector<double> v = valuesOf(got);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(v[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << "at " << i;
    }
}

// dropout_grad in every float type: kept elements are dy / (1 - ratio)
// rounded once, dropped ones 0.
TEST(ActivationGrad, DropoutEveryFloatType) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  const int64_t n = 50001;
  const double ratio = 0.25;
  for (DType t : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    std::vector<double> dy(n), mask(n);
    for (int64_t i = 0; i < n; ++i) {
      dy[i] = u(rng);
      mask[i] = rng() % 4 != 0;
    }
    HostTensor dyT = makeTensor(t, {n}, dy), mT = makeTensor(DType::Bool, {n}, mask);
    HostTensor got = run1(cpu::registerBackwardKernels, "dropout_grad", {&dyT, &mT},
                          TensorDesc{t, {n}}, json{{"ratio", ratio}});
    std::vector<double> v = valuesOf(got);
    double tol = t == DType::F64 ? 1e-12 : t == DType::F32 ? 1e-6 : t == DType::F16 ? 1e-3 : 8e-3;
    SCOPED_TRACE(dtypeName(t));
    for (int64_t i = 0; i < n; ++i) {
      double want = mask[i] ? dy[i] / (1 - ratio) : 0.0;
      ASSERT_NEAR(v[i], want, tol * std::max(1.0, std::fabs(want))) << "at " << i;
    }
  }
}
