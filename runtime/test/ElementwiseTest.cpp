//===- ElementwiseTest.cpp - unary, binary, compare, select and cast ------===//
// SPDX-License-Identifier: Apache-2.0
//
// Hand-checked values, randomized broadcasting shapes in every type against
// naive scalar references (the threaded sizes too), in-place use, integer
// edge cases (division by zero, INT_MIN / -1, wrapping, pow), cast between
// every pair of types, 0-size and rank-0 tensors, and malformed specs.
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "Convert16.h"
#include "kiln/runtime/ShapeRules.h"

#include <cmath>
#include <functional>
#include <random>

namespace {

using nlohmann::json;
using namespace kiln::rt;
using namespace kiln::rt::test;
namespace L = kiln::rt::cpu::loops;

const RegisterFn kReg = cpu::registerElementwiseKernels;

std::vector<int64_t> bshape(const std::vector<int64_t> &a,
                            const std::vector<int64_t> &b) {
  std::vector<int64_t> o;
  EXPECT_EQ(kiln::shape::broadcastShapes(a, b, o), "");
  return o;
}

/// Index into `in` (aligned right, broadcasting) of output coordinate c.
int64_t bindex(const std::vector<int64_t> &c, const std::vector<int64_t> &in) {
  size_t off = c.size() - in.size();
  int64_t i = 0;
  for (size_t d = 0; d < in.size(); ++d)
    i = i * in[d] + (in[d] == 1 ? 0 : c[off + d]);
  return i;
}

std::vector<int64_t> randomShape(std::mt19937 &rng, int rank, int maxDim) {
  std::vector<int64_t> s(rank);
  for (auto &d : s)
    d = 1 + rng() % maxDim;
  return s;
}

/// A pair of shapes that broadcast: b is a with some dims set to 1 and maybe
/// some leading dims dropped (then the two are swapped at random).
void randomPair(std::mt19937 &rng, std::vector<int64_t> &a, std::vector<int64_t> &b) {
  int rank = rng() % 5;
  a = randomShape(rng, rank, 5);
  b = a;
  for (auto &d : b)
    if (rng() % 3 == 0)
      d = 1;
  int drop = rank ? rng() % (rank + 1) : 0;
  b.erase(b.begin(), b.begin() + drop);
  for (auto &d : a)
    if (rng() % 5 == 0)
      d = 1;
  if (rng() % 2)
    std::swap(a, b);
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

TEST(Elementwise, UnaryHandChecked) {
  auto x = tensor(DType::F32, {6}, {-2, -0.5, 0, 0.5, 2, 30});
  auto r = [&](const char *n, json a = json::object()) {
    return valuesOf(run1(kReg, n, {&x}, x.desc(), a));
  };
  expectClose(r("relu"), {0, 0, 0, 0.5, 2, 30}, 0, "relu");
  expectClose(r("neg"), {2, 0.5, 0, -0.5, -2, -30}, 0, "neg");
  expectClose(r("abs"), {2, 0.5, 0, 0.5, 2, 30}, 0, "abs");
  expectClose(r("sign"), {-1, -1, 0, 1, 1, 1}, 0, "sign");
  expectClose(r("leaky_relu", {{"alpha", 0.1}}), {-0.2, -0.05, 0, 0.5, 2, 30},
              1e-6, "leaky_relu");
  expectClose(r("elu", {{"alpha", 2.0}}),
              {2 * (std::exp(-2.0) - 1), 2 * (std::exp(-0.5) - 1), 0, 0.5, 2, 30},
              1e-6, "elu");
  expectClose(r("softplus"),
              {std::log1p(std::exp(-2.0)), std::log1p(std::exp(-0.5)), std::log(2.0),
               std::log1p(std::exp(0.5)), std::log1p(std::exp(2.0)), 30},
              1e-6, "softplus");
  expectClose(r("gelu"),
              {-0.04550026389635842, -0.15426876936299347, 0, 0.3457312306370065,
               1.9544997361036416, 30},
              1e-6, "gelu");
  expectClose(r("gelu", {{"approximate", "tanh"}}),
              {-0.04540230591222873, -0.15428599017532606, 0, 0.34571400982467394,
               1.9545976940877712, 30},
              1e-6, "gelu tanh");
  expectClose(r("floor"), {-2, -1, 0, 0, 2, 30}, 0, "floor");
  expectClose(r("ceil"), {-2, -0, 0, 1, 2, 30}, 0, "ceil");
  auto b = tensor(DType::Bool, {3}, {1, 0, 1});
  expectClose(valuesOf(run1(kReg, "not", {&b}, b.desc())), {0, 1, 0}, 0, "not");
  // NaN: relu and sign keep it.
  auto n = tensor(DType::F32, {1}, {NAN});
  EXPECT_TRUE(std::isnan(valuesOf(run1(kReg, "relu", {&n}, n.desc()))[0]));
  EXPECT_TRUE(std::isnan(valuesOf(run1(kReg, "sign", {&n}, n.desc()))[0]));
}

TEST(Elementwise, UnaryIntegers) {
  HostTensor x(desc(DType::I32, {4}));
  int32_t *p = x.as<int32_t>();
  p[0] = INT32_MIN, p[1] = -5, p[2] = 0, p[3] = 7;
  auto a = run1(kReg, "abs", {&x}, x.desc());
  EXPECT_EQ(a.as<int32_t>()[0], INT32_MIN); // wraps
  EXPECT_EQ(a.as<int32_t>()[1], 5);
  auto ng = run1(kReg, "neg", {&x}, x.desc());
  EXPECT_EQ(ng.as<int32_t>()[0], INT32_MIN);
  EXPECT_EQ(ng.as<int32_t>()[3], -7);
  auto s = run1(kReg, "sign", {&x}, x.desc());
  EXPECT_EQ(valuesOf(s), (std::vector<double>{-1, -1, 0, 1}));
  for (DType t : {DType::I64, DType::I16, DType::I8, DType::U8, DType::U64}) {
    auto y = tensor(t, {3}, {0, 3, 9});
    EXPECT_EQ(valuesOf(run1(kReg, "abs", {&y}, y.desc())), (std::vector<double>{0, 3, 9}));
    EXPECT_EQ(valuesOf(run1(kReg, "sign", {&y}, y.desc())), (std::vector<double>{0, 1, 1}));
  }
  auto u = tensor(DType::U8, {2}, {1, 200});
  EXPECT_EQ(valuesOf(run1(kReg, "neg", {&u}, u.desc())), (std::vector<double>{255, 56}));
}

struct UnaryRef {
  const char *name;
  std::function<double(double)> f;
  double lo, hi;
};

TEST(Elementwise, UnaryRandomAgainstReference) {
  const double s2 = std::sqrt(2.0);
  std::vector<UnaryRef> ops = {
      {"neg", [](double x) { return -x; }, -5, 5},
      {"abs", [](double x) { return std::fabs(x); }, -5, 5},
      {"exp", [](double x) { return std::exp(x); }, -5, 5},
      {"log", [](double x) { return std::log(x); }, 0.01, 10},
      {"tanh", [](double x) { return std::tanh(x); }, -5, 5},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, -8, 8},
      {"relu", [](double x) { return x > 0 ? x : 0; }, -5, 5},
      {"sqrt", [](double x) { return std::sqrt(x); }, 0, 10},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, 0.1, 10},
      {"reciprocal", [](double x) { return 1 / x; }, 0.1, 10},
      {"erf", [](double x) { return std::erf(x); }, -3, 3},
      {"softplus", [](double x) { return std::log1p(std::exp(x)); }, -8, 8},
      {"sin", [](double x) { return std::sin(x); }, -3, 3},
      {"cos", [](double x) { return std::cos(x); }, -3, 3},
      {"gelu", [&](double x) { return 0.5 * x * (1 + std::erf(x / s2)); }, -4, 4},
  };
  std::mt19937 rng(7);
  for (const UnaryRef &op : ops)
    for (DType t : kFloats)
      for (int64_t n : {0, 1, 17, 70000}) {
        std::vector<double> v = randomVals(rng, n, op.lo, op.hi);
        HostTensor x = tensor(t, {n}, v);
        std::vector<double> xv = valuesOf(x), want(n);
        for (int64_t i = 0; i < n; ++i)
          want[i] = rounded(t, op.f(xv[i]));
        // One rounding of the result in t plus the compute type's error.
        double tol = t == DType::F64 ? 1e-12 : (t == DType::F32 ? 1e-6 : tolOf(t));
        expectClose(valuesOf(run1(kReg, op.name, {&x}, x.desc())), want, tol,
                    std::string(op.name) + " " + dtypeName(t) + " n=" +
                        std::to_string(n));
      }
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

struct BinRef {
  const char *name;
  std::function<double(double, double)> f;
};

double refDivInt(double a, double b) { return b == 0 ? 0 : std::trunc(a / b); }

/// Integer r (exact in double) wrapped to integer type t.
double wrapped(DType t, double r) {
  return L::dispatchType(t, [&](auto tag) -> double {
    using T = decltype(tag);
    if constexpr (L::kIsInt<T>)
      return (double)L::castValue<T>((int64_t)r);
    else
      return r;
  });
}

void checkBinary(const BinRef &op, DType t, const std::vector<int64_t> &sa,
                 const std::vector<int64_t> &sb, std::mt19937 &rng, bool isInt,
                 bool compare) {
  std::vector<int64_t> so = bshape(sa, sb);
  double lo = isInt ? -20 : -4, hi = isInt ? 20 : 4;
  if (t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64)
    lo = 0;
  auto gen = [&](int64_t n) {
    std::vector<double> v = randomVals(rng, n, lo, hi);
    if (isInt)
      for (double &x : v)
        x = std::round(x);
    return v;
  };
  HostTensor a = tensor(t, sa, gen(numelOf(sa))), b = tensor(t, sb, gen(numelOf(sb)));
  if (std::string(op.name) == "pow") { // keep it exact-ish: small exponents
    for (int64_t i = 0; i < b.numel(); ++i)
      setValue(b, i, isInt ? std::fabs(std::fmod(valueAt(b, i), 4)) : valueAt(b, i) / 2);
    for (int64_t i = 0; i < a.numel(); ++i)
      if (!isInt)
        setValue(a, i, std::fabs(valueAt(a, i)) + 0.1);
  }
  std::vector<double> av = valuesOf(a), bv = valuesOf(b);
  int64_t n = numelOf(so);
  std::vector<double> want(n);
  for (int64_t i = 0; i < n; ++i) {
    auto c = coords(i, so);
    double r = op.f(av[bindex(c, sa)], bv[bindex(c, sb)]);
    want[i] = compare ? r : (isInt ? wrapped(t, r) : rounded(t, r));
  }
  TensorDesc od{compare ? DType::Bool : t, so};
  HostTensor y = run1(kReg, op.name, {&a, &b}, od);
  double tol = isInt || compare ? 0 : (t == DType::F64 ? 1e-12 : (t == DType::F32 ? 1e-6 : tolOf(t)));
  expectClose(valuesOf(y), want, tol,
              std::string(op.name) + " " + dtypeName(t) + " " + L::shapeStr(sa) +
                  " " + L::shapeStr(sb));
}

TEST(Elementwise, BinaryRandomBroadcast) {
  std::vector<BinRef> arith = {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"div", [](double a, double b) { return a / b; }},
      {"pow", [](double a, double b) { return std::pow(a, b); }},
      {"max", [](double a, double b) { return std::max(a, b); }},
      {"min", [](double a, double b) { return std::min(a, b); }},
  };
  std::vector<BinRef> cmp = {
      {"equal", [](double a, double b) { return double(a == b); }},
      {"less", [](double a, double b) { return double(a < b); }},
      {"less_equal", [](double a, double b) { return double(a <= b); }},
      {"greater", [](double a, double b) { return double(a > b); }},
      {"greater_equal", [](double a, double b) { return double(a >= b); }},
  };
  std::mt19937 rng(11);
  for (int iter = 0; iter < 25; ++iter) {
    std::vector<int64_t> sa, sb;
    randomPair(rng, sa, sb);
    for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32,
                    DType::I64, DType::I8, DType::U8, DType::U16}) {
      bool isInt = !isFloat(t);
      for (BinRef op : arith) {
        if (isInt && std::string(op.name) == "div")
          op.f = refDivInt;
        checkBinary(op, t, sa, sb, rng, isInt, false);
      }
      for (const BinRef &op : cmp)
        checkBinary(op, t, sa, sb, rng, isInt, true);
    }
  }
  // Threaded sizes and the run-length patterns.
  for (auto [sa, sb] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{300, 257}, {257}}, {{300, 257}, {300, 1}}, {{70000}, {70000}},
           {{1}, {70001}}, {{3, 1, 20000}, {1, 4, 1}}, {{2, 40000}, {}}}) {
    checkBinary(arith[0], DType::F32, sa, sb, rng, false, false);
    checkBinary(arith[3], DType::F16, sa, sb, rng, false, false);
    checkBinary(cmp[1], DType::F32, sa, sb, rng, false, true);
    checkBinary(arith[2], DType::I32, sa, sb, rng, true, false);
  }
}

TEST(Elementwise, IntegerEdgeCases) {
  HostTensor a(desc(DType::I32, {5})), b(desc(DType::I32, {5}));
  int32_t *pa = a.as<int32_t>(), *pb = b.as<int32_t>();
  int32_t av[5] = {7, -7, INT32_MIN, INT32_MAX, 5};
  int32_t bv[5] = {2, 2, -1, 0, -3};
  std::copy(av, av + 5, pa);
  std::copy(bv, bv + 5, pb);
  auto d = run1(kReg, "div", {&a, &b}, a.desc());
  EXPECT_EQ(std::vector<int32_t>(d.as<int32_t>(), d.as<int32_t>() + 5),
            (std::vector<int32_t>{3, -3, INT32_MIN, 0, -1}));
  auto s = run1(kReg, "add", {&a, &b}, a.desc());
  EXPECT_EQ(s.as<int32_t>()[2], INT32_MAX); // INT32_MIN + -1 wraps
  auto m = run1(kReg, "mul", {&a, &a}, a.desc());
  EXPECT_EQ(m.as<int32_t>()[3], 1); // INT32_MAX^2 wraps to 1
  // pow, as ONNX test_pow_types_int32_int32: [1,2,3]^[4,5,6]
  auto x = tensor(DType::I32, {3}, {1, 2, 3}), y = tensor(DType::I32, {3}, {4, 5, 6});
  EXPECT_EQ(valuesOf(run1(kReg, "pow", {&x, &y}, x.desc())), (std::vector<double>{1, 32, 729}));
  auto x64 = tensor(DType::I64, {4}, {2, -1, 1, 3}),
       e64 = tensor(DType::I64, {4}, {-1, -3, -5, 0});
  EXPECT_EQ(valuesOf(run1(kReg, "pow", {&x64, &e64}, x64.desc())),
            (std::vector<double>{0, -1, 1, 1}));
  auto u = tensor(DType::U8, {2}, {200, 3}), v = tensor(DType::U8, {2}, {100, 0});
  EXPECT_EQ(valuesOf(run1(kReg, "add", {&u, &v}, u.desc())), (std::vector<double>{44, 3}));
  EXPECT_EQ(valuesOf(run1(kReg, "sub", {&v, &u}, u.desc())), (std::vector<double>{156, 253}));
  EXPECT_EQ(valuesOf(run1(kReg, "div", {&u, &v}, u.desc())), (std::vector<double>{2, 0}));
  auto w = tensor(DType::U16, {1}, {65535});
  EXPECT_EQ(valuesOf(run1(kReg, "mul", {&w, &w}, w.desc())), (std::vector<double>{1}));
}

TEST(Elementwise, FloatSpecials) {
  auto a = tensor(DType::F32, {3}, {NAN, 1, -1}), b = tensor(DType::F32, {3}, {1, NAN, 0});
  auto mx = valuesOf(run1(kReg, "max", {&a, &b}, a.desc()));
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mx[1]));
  auto mn = valuesOf(run1(kReg, "min", {&a, &b}, a.desc()));
  EXPECT_TRUE(std::isnan(mn[0]) && std::isnan(mn[1]));
  EXPECT_EQ(mn[2], -1);
  auto dv = valuesOf(run1(kReg, "div", {&a, &b}, a.desc()));
  EXPECT_EQ(dv[2], -INFINITY);
  auto eq = valuesOf(run1(kReg, "equal", {&a, &a}, desc(DType::Bool, {3})));
  EXPECT_EQ(eq, (std::vector<double>{0, 1, 1}));
}

TEST(Elementwise, Logical) {
  auto a = tensor(DType::Bool, {2, 2}, {0, 0, 1, 1}), b = tensor(DType::Bool, {2}, {0, 1});
  TensorDesc o = desc(DType::Bool, {2, 2});
  EXPECT_EQ(valuesOf(run1(kReg, "and", {&a, &b}, o)), (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ(valuesOf(run1(kReg, "or", {&a, &b}, o)), (std::vector<double>{0, 1, 1, 1}));
  EXPECT_EQ(valuesOf(run1(kReg, "xor", {&a, &b}, o)), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(valuesOf(run1(kReg, "equal", {&a, &b}, o)), (std::vector<double>{1, 0, 0, 1}));
}

TEST(Elementwise, SelectRandomBroadcast) {
  std::mt19937 rng(5);
  for (int iter = 0; iter < 40; ++iter) {
    std::vector<int64_t> s0, s1, s2, tmp;
    randomPair(rng, s0, s1);
    randomPair(rng, tmp, s2);
    // s2 must broadcast with s0/s1: use a trailing part of the result.
    std::vector<int64_t> so = bshape(s0, s1);
    s2 = so;
    for (auto &d : s2)
      if (rng() % 2)
        d = 1;
    if (!s2.empty() && rng() % 2)
      s2.erase(s2.begin());
    so = bshape(so, s2);
    DType t = kAll[iter % kAll.size()];
    auto c = tensor(DType::Bool, s0, randomVals(rng, numelOf(s0), 0, 1));
    for (int64_t i = 0; i < c.numel(); ++i)
      setValue(c, i, rng() % 2);
    auto x = tensor(t, s1, randomVals(rng, numelOf(s1), 0, 100));
    auto y = tensor(t, s2, randomVals(rng, numelOf(s2), 0, 100));
    auto cv = valuesOf(c), xv = valuesOf(x), yv = valuesOf(y);
    std::vector<double> want(numelOf(so));
    for (int64_t i = 0; i < (int64_t)want.size(); ++i) {
      auto co = coords(i, so);
      want[i] = cv[bindex(co, s0)] ? xv[bindex(co, s1)] : yv[bindex(co, s2)];
    }
    expectClose(valuesOf(run1(kReg, "select", {&c, &x, &y}, desc(t, so))), want, 0,
                std::string("select ") + dtypeName(t) + " " + L::shapeStr(so));
  }
  // Threaded.
  auto c = tensor(DType::Bool, {1, 50000}, std::vector<double>(50000, 0));
  for (int64_t i = 0; i < 50000; i += 3)
    setValue(c, i, 1);
  auto x = tensor(DType::F32, {2, 50000}, std::vector<double>(100000, 1.5));
  auto y = tensor(DType::F32, {}, {-2});
  auto r = valuesOf(run1(kReg, "select", {&c, &x, &y}, desc(DType::F32, {2, 50000})));
  for (int64_t i = 0; i < 100000; ++i)
    ASSERT_EQ(r[i], (i % 50000) % 3 == 0 ? 1.5 : -2) << i;
}

TEST(Elementwise, InPlace) {
  std::mt19937 rng(3);
  for (auto [sa, sb] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{7, 9}, {9}}, {{50000}, {50000}}, {{3, 40000}, {3, 1}}}) {
    auto a = tensor(DType::F32, sa, randomVals(rng, numelOf(sa), -1, 1));
    auto b = tensor(DType::F32, sb, randomVals(rng, numelOf(sb), -1, 1));
    HostTensor want = run1(kReg, "mul", {&a, &b}, a.desc());
    auto k = build(kReg, "mul", {a.desc(), b.desc()}, {a.desc()});
    const void *in[2] = {a.data(), b.data()};
    void *out = a.data();
    ExecContext ctx;
    k->run(ctx, in, &out);
    EXPECT_EQ(valuesOf(a), valuesOf(want));
    auto u = build(kReg, "exp", {a.desc()}, {a.desc()});
    HostTensor w2 = run1(kReg, "exp", {&a}, a.desc());
    u->run(ctx, in, &out);
    EXPECT_EQ(valuesOf(a), valuesOf(w2));
  }
  // cast between same-size types in place: f32 -> i32.
  auto f = tensor(DType::F32, {3}, {1.7, -2.5, 3});
  auto k = build(kReg, "cast", {f.desc()}, {desc(DType::I32, {3})});
  const void *in[1] = {f.data()};
  void *out = f.data();
  ExecContext ctx;
  k->run(ctx, in, &out);
  EXPECT_EQ(std::vector<int32_t>(f.as<int32_t>(), f.as<int32_t>() + 3),
            (std::vector<int32_t>{1, -2, 3}));
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

TEST(Elementwise, CastEveryPair) {
  std::vector<double> v = {0, 1, 2, 3, 7, 100, 127};
  for (DType from : kAll)
    for (DType to : kAll) {
      std::vector<double> src = v;
      if (from == DType::Bool)
        src = {0, 1, 1, 0, 1, 0, 0};
      auto x = tensor(from, {7}, src);
      std::vector<double> want;
      for (double s : valuesOf(x))
        want.push_back(to == DType::Bool ? double(s != 0) : rounded(to, s));
      expectClose(valuesOf(run1(kReg, "cast", {&x}, desc(to, {7}))), want, 0,
                  std::string("cast ") + dtypeName(from) + " -> " + dtypeName(to));
    }
}

TEST(Elementwise, CastEdgeCases) {
  auto x = tensor(DType::F32, {8}, {-2.7, 2.7, NAN, 1e20, -1e20, INFINITY, -0.5, 300});
  EXPECT_EQ(valuesOf(run1(kReg, "cast", {&x}, desc(DType::I32, {8}))),
            (std::vector<double>{-2, 2, 0, INT32_MAX, INT32_MIN, INT32_MAX, 0, 300}));
  EXPECT_EQ(valuesOf(run1(kReg, "cast", {&x}, desc(DType::U8, {8}))),
            (std::vector<double>{0, 2, 0, 255, 0, 255, 0, 255}));
  auto i64 = run1(kReg, "cast", {&x}, desc(DType::I64, {8}));
  EXPECT_EQ(i64.as<int64_t>()[3], INT64_MAX);
  EXPECT_EQ(i64.as<int64_t>()[4], INT64_MIN);
  auto u64 = run1(kReg, "cast", {&x}, desc(DType::U64, {8}));
  EXPECT_EQ(u64.as<uint64_t>()[3], UINT64_MAX);
  EXPECT_EQ(valuesOf(run1(kReg, "cast", {&x}, desc(DType::Bool, {8}))),
            (std::vector<double>{1, 1, 1, 1, 1, 1, 1, 1}));
  // Integer narrowing wraps.
  auto w = tensor(DType::I64, {3}, {300, -1, 65536 + 5});
  EXPECT_EQ(valuesOf(run1(kReg, "cast", {&w}, desc(DType::I8, {3}))),
            (std::vector<double>{44, -1, 5}));
  EXPECT_EQ(valuesOf(run1(kReg, "cast", {&w}, desc(DType::U16, {3}))),
            (std::vector<double>{300, 65535, 5}));
  // f32 -> f16 / bf16 round to nearest even.
  HostTensor f(desc(DType::F32, {2}));
  f.as<float>()[0] = 1.0f + std::ldexp(1.0f, -11); // halfway between halves
  f.as<float>()[1] = 1.0f + 3 * std::ldexp(1.0f, -11);
  auto h = run1(kReg, "cast", {&f}, desc(DType::F16, {2}));
  EXPECT_EQ(h.as<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(h.as<uint16_t>()[1], 0x3c02);
  auto d = tensor(DType::F64, {2}, {1e300, -3.25});
  EXPECT_EQ(valuesOf(run1(kReg, "cast", {&d}, desc(DType::F32, {2})))[0], INFINITY);
  EXPECT_EQ(valuesOf(run1(kReg, "cast", {&d}, desc(DType::BF16, {2})))[1], -3.25);
}

//===----------------------------------------------------------------------===//
// Edge shapes and malformed specs
//===----------------------------------------------------------------------===//

TEST(Elementwise, EmptyAndScalar) {
  auto e = tensor(DType::F32, {0, 3}, {}), s = tensor(DType::F32, {}, {2});
  EXPECT_EQ(run1(kReg, "add", {&e, &s}, desc(DType::F32, {0, 3})).numel(), 0);
  EXPECT_EQ(run1(kReg, "exp", {&e}, e.desc()).numel(), 0);
  EXPECT_EQ(valuesOf(run1(kReg, "mul", {&s, &s}, s.desc())), (std::vector<double>{4}));
  auto r = tensor(DType::F32, {2, 1}, {1, 2});
  auto z = tensor(DType::F32, {0}, {});
  EXPECT_EQ(run1(kReg, "sub", {&r, &z}, desc(DType::F32, {2, 0})).numel(), 0);
  EXPECT_EQ(run1(kReg, "cast", {&e}, desc(DType::I8, {0, 3})).numel(), 0);
}

TEST(Elementwise, Malformed) {
  TensorDesc f23 = desc(DType::F32, {2, 3}), f3 = desc(DType::F32, {3}),
             f4 = desc(DType::F32, {4}), i3 = desc(DType::I32, {3}),
             b3 = desc(DType::Bool, {3});
  expectError([&] { build(kReg, "add", {f23}, {f23}); }, "takes 2 inputs");
  expectError([&] { build(kReg, "add", {f23, f4}, {f23}); }, "do not broadcast");
  expectError([&] { build(kReg, "add", {f23, f3}, {f3}); }, "broadcast shape");
  expectError([&] { build(kReg, "add", {f3, i3}, {f3}); }, "one element type");
  expectError([&] { build(kReg, "add", {b3, b3}, {b3}); }, "unsupported element type i1");
  expectError([&] { build(kReg, "less", {f3, f3}, {f3}); }, "must be i1");
  expectError([&] { build(kReg, "and", {f3, f3}, {f3}); }, "unsupported element type f32");
  expectError([&] { build(kReg, "exp", {i3}, {i3}); }, "unsupported element type i32");
  expectError([&] { build(kReg, "neg", {b3}, {b3}); }, "unsupported element type i1");
  expectError([&] { build(kReg, "not", {f3}, {f3}); }, "unsupported element type f32");
  expectError([&] { build(kReg, "exp", {f3}, {f4}); }, "differs from its input");
  expectError([&] { build(kReg, "gelu", {f3}, {f3}, {{"approximate", "fast"}}); },
              "approximate");
  expectError([&] { build(kReg, "leaky_relu", {f3}, {f3}, {{"alpha", "x"}}); },
              "not a number");
  expectError([&] { build(kReg, "cast", {f3}, {desc(DType::I8, {4})}); }, "shape");
  expectError([&] { build(kReg, "select", {f3, f3, f3}, {f3}); }, "condition must be i1");
  expectError([&] { build(kReg, "select", {b3, f3, i3}, {f3}); }, "one element type");
  expectError([&] { build(kReg, "select", {b3, f3, f4}, {f3}); }, "do not broadcast");
}

} // namespace

// The vectorized bf16 conversions (Convert16.h, which cast and the 16-bit
// staging use) round exactly as DType.h's scalar floatToBf16: random bit
// patterns (every class: normals, subnormals, infinities, NaNs), ties, and
// the round trip.
TEST(Elementwise, Bf16ConversionMatchesScalar) {
  std::mt19937 rng(5);
  std::vector<float> x(100003);
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t u = rng();
    if (i % 7 == 0)
      u = (u & 0xffff0000u) | 0x8000u; // a tie: rounds to even
    std::memcpy(&x[i], &u, 4);
  }
  x[0] = INFINITY;
  x[1] = -INFINITY;
  x[2] = NAN;
  x[3] = 3.4028235e38f; // rounds up to infinity
  std::vector<uint16_t> y(x.size());
  kiln::rt::cpu::bf16FromF32(x.data(), y.data(), 0, (int64_t)x.size());
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(y[i], floatToBf16(x[i])) << "element " << i;
  std::vector<float> back(x.size());
  kiln::rt::cpu::f32FromBf16(y.data(), back.data(), 0, (int64_t)x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    float want = bf16ToFloat(y[i]);
    ASSERT_EQ(std::memcmp(&back[i], &want, 4), 0) << "element " << i;
  }
}
