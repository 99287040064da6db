//===- LinalgTest.cpp - the matmul kernel ---------------------------------===//
// SPDX-License-Identifier: Apache-2.0
//
// Hand-checked products, randomized batch-broadcast / transposed products in
// every float type against a double-precision reference, edge shapes and
// malformed specs. A disabled benchmark reports the 2048^3 f32 GFLOP/s.
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <chrono>
#include <cmath>
#include <random>

using namespace kiln::rt;
using namespace kiln::rt::test;
using nlohmann::json;

namespace {

std::unique_ptr<Kernel> makeKernel(const std::vector<TensorDesc> &ins,
                                   const TensorDesc &out, const json &attrs) {
  return build(cpu::registerLinalgKernels, "matmul", ins, {out}, attrs);
}

/// Reference: out[b..., m, n] = sum_k lhs'[b..., m, k] * rhs'[b..., k, n].
std::vector<double> refMatmul(const std::vector<int64_t> &ls,
                              const std::vector<double> &l,
                              const std::vector<int64_t> &rs,
                              const std::vector<double> &r, bool tl, bool tr,
                              std::vector<int64_t> &outShape) {
  size_t lr = ls.size(), rr = rs.size(), nb = std::max(lr, rr) - 2;
  std::vector<int64_t> lb(nb, 1), rb(nb, 1), ob(nb);
  for (size_t i = 0; i < lr - 2; ++i)
    lb[nb - (lr - 2) + i] = ls[i];
  for (size_t i = 0; i < rr - 2; ++i)
    rb[nb - (rr - 2) + i] = rs[i];
  int64_t m = tl ? ls[lr - 1] : ls[lr - 2], k = tl ? ls[lr - 2] : ls[lr - 1];
  int64_t n = tr ? rs[rr - 2] : rs[rr - 1];
  int64_t nbatch = 1;
  for (size_t i = 0; i < nb; ++i) {
    ob[i] = std::max(lb[i], rb[i]);
    nbatch *= ob[i];
  }
  outShape = ob;
  outShape.push_back(m);
  outShape.push_back(n);
  std::vector<double> out(nbatch * m * n);
  for (int64_t b = 0; b < nbatch; ++b) {
    // Decompose b and map to operand batch indices.
    int64_t rem = b, lo = 0, ro = 0, lstr = 1, rstr = 1;
    std::vector<int64_t> idx(nb);
    for (int64_t i = (int64_t)nb - 1; i >= 0; --i) {
      idx[i] = rem % ob[i];
      rem /= ob[i];
    }
    for (int64_t i = (int64_t)nb - 1; i >= 0; --i) {
      lo += (lb[i] == 1 ? 0 : idx[i]) * lstr;
      ro += (rb[i] == 1 ? 0 : idx[i]) * rstr;
      lstr *= lb[i];
      rstr *= rb[i];
    }
    const double *lp = l.data() + lo * m * k, *rp = r.data() + ro * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q)
          s += (tl ? lp[q * m + i] : lp[i * k + q]) *
               (tr ? rp[j * k + q] : rp[q * n + j]);
        out[(b * m + i) * n + j] = s;
      }
  }
  return out;
}

double tolerance(DType t, int64_t k) {
  switch (t) {
  case DType::F64: return 1e-12 * (k + 1);
  case DType::F32: return 2e-6 * (k + 1);
  case DType::F16: return 2e-3 * std::sqrt((double)k + 1) + 1e-3;
  default: return 1.6e-2 * std::sqrt((double)k + 1) + 8e-3;
  }
}

void checkRandom(DType t, std::vector<int64_t> ls, std::vector<int64_t> rs,
                 bool tl, bool tr, std::mt19937 &rng) {
  int64_t nl = 1, nr = 1;
  for (int64_t d : ls)
    nl *= d;
  for (int64_t d : rs)
    nr *= d;
  std::vector<double> lv = randomVals(rng, nl, -1, 1), rv = randomVals(rng, nr, -1, 1);
  HostTensor lh = makeTensor(t, ls, lv), rh = makeTensor(t, rs, rv);
  std::vector<int64_t> os;
  std::vector<double> ref = refMatmul(ls, lv, rs, rv, tl, tr, os);
  TensorDesc od{t, os};
  json attrs = {{"transpose_lhs", tl}, {"transpose_rhs", tr}};
  auto k = makeKernel({lh.desc(), rh.desc()}, od, attrs);
  HostTensor oh(od);
  const void *in[] = {lh.data(), rh.data()};
  void *out[] = {oh.data()};
  ExecContext ctx;
  int64_t kk = tl ? ls[ls.size() - 2] : ls.back();
  double tol = tolerance(t, kk);
  for (int rep = 0; rep < 2; ++rep) { // a kernel is run repeatedly
    k->run(ctx, in, out);
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(valueAt(oh, i), ref[i], tol * std::max(1.0, std::fabs(ref[i])))
          << dtypeName(t) << " " << lh.desc().str() << " x " << rh.desc().str()
          << " tl=" << tl << " tr=" << tr << " at " << i;
  }
}

} // namespace

TEST(Matmul, HandChecked) {
  std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9, 10, 11, 12};
  HostTensor ah = makeTensor(DType::F32, {2, 3}, a), bh = makeTensor(DType::F32, {3, 2}, b);
  TensorDesc od{DType::F32, {2, 2}};
  auto k = makeKernel({ah.desc(), bh.desc()}, od, json::object());
  HostTensor oh(od);
  const void *in[] = {ah.data(), bh.data()};
  void *out[] = {oh.data()};
  ExecContext ctx;
  k->run(ctx, in, out);
  EXPECT_EQ(oh.as<float>()[0], 58);
  EXPECT_EQ(oh.as<float>()[1], 64);
  EXPECT_EQ(oh.as<float>()[2], 139);
  EXPECT_EQ(oh.as<float>()[3], 154);
}

TEST(Matmul, RandomAllTypes) {
  std::mt19937 rng(42);
  struct Shape {
    std::vector<int64_t> l, r;
  };
  // Logical (post-transpose) shapes; transposes swap the stored last dims.
  std::vector<Shape> shapes = {
      {{1, 1}, {1, 1}},           {{3, 5}, {5, 4}},
      {{17, 33}, {33, 9}},        {{2, 3, 4}, {2, 4, 5}},
      {{2, 3, 4}, {4, 5}},        {{3, 4}, {3, 4, 6}},
      {{2, 1, 3, 7}, {1, 4, 7, 2}}, {{3, 2, 6}, {5, 1, 6, 4}},
      {{64, 130}, {130, 70}},     {{1, 40}, {40, 1}},
      {{4, 1, 2}, {4, 2, 1}},
  };
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (const Shape &s : shapes)
      for (int tl = 0; tl < 2; ++tl)
        for (int tr = 0; tr < 2; ++tr) {
          std::vector<int64_t> l = s.l, r = s.r;
          if (tl)
            std::swap(l[l.size() - 1], l[l.size() - 2]);
          if (tr)
            std::swap(r[r.size() - 1], r[r.size() - 2]);
          checkRandom(t, l, r, tl, tr, rng);
        }
}

TEST(Matmul, LargeThreaded) {
  std::mt19937 rng(7);
  checkRandom(DType::F32, {3, 200, 150}, {150, 180}, false, false, rng);
  checkRandom(DType::F64, {2, 130, 150}, {2, 180, 150}, false, true, rng);
  checkRandom(DType::F64, {150, 130}, {150, 180}, true, false, rng);
  checkRandom(DType::BF16, {100, 256}, {256, 120}, false, false, rng);
}

// More batch dims than oneDNN's 12: the per-batch fallback.
TEST(Matmul, ManyBatchDims) {
  std::mt19937 rng(3);
  std::vector<int64_t> l(11, 1), r(11, 1);
  l[0] = 2;
  r[3] = 3;
  l.insert(l.end(), {3, 4});
  r.insert(r.end(), {4, 2});
  checkRandom(DType::F32, l, r, false, false, rng);
  checkRandom(DType::F32, l, {2, 4}, false, true, rng);
}

TEST(Matmul, EmptyDims) {
  // K = 0: the product is all zeros.
  for (DType t : {DType::F32, DType::F64, DType::F16}) {
    TensorDesc a{t, {3, 0}}, b{t, {0, 2}}, o{t, {3, 2}};
    auto k = makeKernel({a, b}, o, json::object());
    HostTensor ah(a), bh(b), oh(o);
    for (int i = 0; i < 6; ++i)
      oh.as<uint8_t>()[i] = 0x55;
    const void *in[] = {ah.data(), bh.data()};
    void *out[] = {oh.data()};
    ExecContext ctx;
    k->run(ctx, in, out);
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(valueAt(oh, i), 0.0);
  }
  // Zero batch / zero M: nothing to do.
  for (auto [a, b, o] : {std::tuple<TensorDesc, TensorDesc, TensorDesc>{
                             {DType::F32, {0, 3, 4}}, {DType::F32, {4, 5}}, {DType::F32, {0, 3, 5}}},
                         {{DType::F32, {0, 4}}, {DType::F32, {4, 5}}, {DType::F32, {0, 5}}}}) {
    auto k = makeKernel({a, b}, o, json::object());
    HostTensor ah(a), bh(b), oh(o);
    const void *in[] = {ah.data(), bh.data()};
    void *out[] = {oh.data()};
    ExecContext ctx;
    k->run(ctx, in, out);
  }
}

TEST(Matmul, MalformedSpecsThrow) {
  auto f32 = [](std::vector<int64_t> s) { return TensorDesc{DType::F32, s}; };
  json none = json::object();
  EXPECT_THROW(makeKernel({f32({2, 3}), f32({4, 2})}, f32({2, 2}), none), Error);
  EXPECT_THROW(makeKernel({f32({2, 3}), f32({3, 2})}, f32({2, 3}), none), Error);
  EXPECT_THROW(makeKernel({f32({3}), f32({3, 2})}, f32({2}), none), Error);
  EXPECT_THROW(makeKernel({f32({2, 2, 3}), f32({3, 3, 2})}, f32({3, 2, 2}), none), Error);
  EXPECT_THROW(makeKernel({f32({2, 3}), TensorDesc{DType::F64, {3, 2}}}, f32({2, 2}), none),
               Error);
  EXPECT_THROW(makeKernel({TensorDesc{DType::I32, {2, 3}}, TensorDesc{DType::I32, {3, 2}}},
                          TensorDesc{DType::I32, {2, 2}}, none),
               Error);
  EXPECT_THROW(makeKernel({f32({2, 3})}, f32({2, 2}), none), Error);
  EXPECT_THROW(makeKernel({f32({2, 3}), f32({2, 3})}, f32({2, 2}),
                          json{{"transpose_rhs", "yes"}}),
               Error);
  // transpose_rhs makes [2,3] x [2,3]^T valid.
  EXPECT_NO_THROW(makeKernel({f32({2, 3}), f32({2, 3})}, f32({2, 2}),
                             json{{"transpose_rhs", true}}));
}

// 2048^3 f32 GEMM throughput (run with --gtest_also_run_disabled_tests).
TEST(Matmul, DISABLED_Bench2048) {
  const int64_t n = 2048;
  TensorDesc d{DType::F32, {n, n}};
  auto k = makeKernel({d, d}, d, json::object());
  HostTensor a(d), b(d), c(d);
  for (int64_t i = 0; i < n * n; ++i) {
    a.as<float>()[i] = (float)(i % 7) * 0.1f;
    b.as<float>()[i] = (float)(i % 5) * 0.1f;
  }
  const void *in[] = {a.data(), b.data()};
  void *out[] = {c.data()};
  ExecContext ctx;
  k->run(ctx, in, out);
  auto t0 = std::chrono::steady_clock::now();
  const int reps = 5;
  for (int r = 0; r < reps; ++r)
    k->run(ctx, in, out);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("matmul 2048^3 f32: %.1f GFLOP/s\n", 2.0 * n * n * n * reps / s / 1e9);
}
