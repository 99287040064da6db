//===- ShapeTest.cpp - reshape, broadcast, transpose, slice, concat, pad, gather ===//
// SPDX-License-Identifier: Apache-2.0
//
// Random shapes and parameters in every element size against naive
// coordinate-mapping references (tiled transposes, negative strides,
// cropping pads, negative gather indices, threaded sizes), hand-checked
// cases, the gather range error, and malformed specs.
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cmath>
#include <numeric>
#include <random>

namespace {

using nlohmann::json;
using namespace kiln::rt;
using namespace kiln::rt::test;
namespace L = kiln::rt::cpu::loops;

const RegisterFn kReg = cpu::registerShapeKernels;

const std::vector<DType> kSizes = {DType::U8, DType::F16, DType::F32, DType::I64,
                                   DType::Bool, DType::I16, DType::F64, DType::I32};

/// Distinct-ish values that survive every type (small integers).
HostTensor iota(DType t, const std::vector<int64_t> &s) {
  std::vector<double> v(numelOf(s));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t == DType::Bool ? double(i % 3 == 0) : double(i % 97);
  return tensor(t, s, v);
}

std::vector<int64_t> randomShape(std::mt19937 &rng, int rank, int maxDim) {
  std::vector<int64_t> s(rank);
  for (auto &d : s)
    d = 1 + rng() % maxDim;
  return s;
}

TEST(Shape, Reshape) {
  auto x = iota(DType::F32, {2, 3, 4});
  EXPECT_EQ(valuesOf(run1(kReg, "reshape", {&x}, desc(DType::F32, {6, 4}))), valuesOf(x));
  expectError([&] { build(kReg, "reshape", {x.desc()}, {desc(DType::F32, {5, 4})}); },
              "cannot reshape");
  expectError([&] { build(kReg, "reshape", {x.desc()}, {desc(DType::I32, {24})}); },
              "element type");
}

TEST(Shape, BroadcastRandom) {
  std::mt19937 rng(1);
  for (int iter = 0; iter < 40; ++iter) {
    int rank = rng() % 5;
    std::vector<int64_t> out = randomShape(rng, rank, 5), in = out;
    for (auto &d : in)
      if (rng() % 2)
        d = 1;
    in.erase(in.begin(), in.begin() + (rank ? rng() % (rank + 1) : 0));
    if (iter == 0)
      out = {3, 40000}, in = {40000};
    DType t = kSizes[iter % kSizes.size()];
    auto x = iota(t, in);
    auto xv = valuesOf(x);
    std::vector<double> want(numelOf(out));
    for (int64_t i = 0; i < (int64_t)want.size(); ++i) {
      auto c = coords(i, out);
      int64_t j = 0;
      size_t off = out.size() - in.size();
      for (size_t d = 0; d < in.size(); ++d)
        j = j * in[d] + (in[d] == 1 ? 0 : c[off + d]);
      want[i] = xv[j];
    }
    expectClose(valuesOf(run1(kReg, "broadcast", {&x}, desc(t, out))), want, 0,
                "broadcast " + x.desc().str() + " -> " + L::shapeStr(out));
  }
  expectError([&] { build(kReg, "broadcast", {desc(DType::F32, {3})}, {desc(DType::F32, {4})}); },
              "cannot broadcast");
  expectError([&] { build(kReg, "broadcast", {desc(DType::F32, {2, 3})}, {desc(DType::F32, {3})}); },
              "cannot broadcast");
}

std::vector<double> refTranspose(const std::vector<double> &x, const std::vector<int64_t> &s,
                                 const std::vector<int64_t> &perm) {
  std::vector<int64_t> os;
  for (int64_t p : perm)
    os.push_back(s[p]);
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < (int64_t)y.size(); ++i) {
    auto c = coords(i, os);
    std::vector<int64_t> ic(s.size());
    for (size_t d = 0; d < perm.size(); ++d)
      ic[perm[d]] = c[d];
    y[i] = x[linear(ic, s)];
  }
  return y;
}

TEST(Shape, TransposeRandom) {
  std::mt19937 rng(2);
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{70, 130}, {1, 0}},        {{3, 64, 33}, {0, 2, 1}}, {{300, 257}, {1, 0}},
      {{2, 3, 50, 40}, {0, 1, 3, 2}}, {{40, 3, 50}, {2, 1, 0}}, {{5}, {0}}, {{}, {}}};
  for (int iter = 0; iter < 40; ++iter) {
    int rank = 1 + rng() % 5;
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    cases.push_back({randomShape(rng, rank, 5), perm});
  }
  int k = 0;
  for (auto &[s, perm] : cases) {
    DType t = kSizes[k++ % kSizes.size()];
    auto x = iota(t, s);
    std::vector<int64_t> os;
    for (int64_t p : perm)
      os.push_back(s[p]);
    expectClose(valuesOf(run1(kReg, "transpose", {&x}, desc(t, os), {{"perm", perm}})),
                refTranspose(valuesOf(x), s, perm), 0,
                "transpose " + x.desc().str() + " perm " + L::shapeStr(perm));
  }
  TensorDesc x = desc(DType::F32, {2, 3});
  expectError([&] { build(kReg, "transpose", {x}, {desc(DType::F32, {3, 2})}, {{"perm", {0, 0}}}); },
              "not a permutation");
  expectError([&] { build(kReg, "transpose", {x}, {desc(DType::F32, {3, 2})}, {{"perm", {1}}}); },
              "entries");
  expectError([&] { build(kReg, "transpose", {x}, {desc(DType::F32, {2, 3})}, {{"perm", {1, 0}}}); },
              "should have shape");
}

TEST(Shape, SliceRandom) {
  std::mt19937 rng(3);
  for (int iter = 0; iter < 80; ++iter) {
    int rank = iter == 0 ? 2 : 1 + (int)(rng() % 4);
    std::vector<int64_t> s = randomShape(rng, rank, 7);
    if (iter == 0)
      s = {400, 300};
    std::vector<int64_t> st(rank), li(rank), sd(rank), os(rank);
    for (int d = 0; d < rank; ++d) {
      int64_t n = s[d];
      sd[d] = (int64_t)(rng() % 3 + 1) * (rng() % 2 ? -1 : 1);
      if (sd[d] > 0) {
        st[d] = rng() % (n + 1);
        li[d] = rng() % (n + 1);
      } else {
        st[d] = rng() % n;
        li[d] = (int64_t)(rng() % (n + 1)) - 1;
      }
      int64_t a = sd[d] > 0 ? li[d] - st[d] : st[d] - li[d], m = std::abs(sd[d]);
      os[d] = a > 0 ? (a + m - 1) / m : 0;
    }
    DType t = kSizes[iter % kSizes.size()];
    auto x = iota(t, s);
    auto xv = valuesOf(x);
    std::vector<double> want(numelOf(os));
    for (int64_t i = 0; i < (int64_t)want.size(); ++i) {
      auto c = coords(i, os);
      for (int d = 0; d < rank; ++d)
        c[d] = st[d] + c[d] * sd[d];
      want[i] = xv[linear(c, s)];
    }
    expectClose(valuesOf(run1(kReg, "slice", {&x}, desc(t, os),
                            {{"starts", st}, {"limits", li}, {"strides", sd}})),
                want, 0,
                "slice " + x.desc().str() + " " + L::shapeStr(st) + L::shapeStr(li) +
                    L::shapeStr(sd));
  }
  // Hand-checked: reverse a row through index 0; a huge stride.
  auto x = iota(DType::I32, {5});
  EXPECT_EQ(valuesOf(run1(kReg, "slice", {&x}, desc(DType::I32, {5}),
                        {{"starts", {4}}, {"limits", {-1}}, {"strides", {-1}}})),
            (std::vector<double>{4, 3, 2, 1, 0}));
  EXPECT_EQ(valuesOf(run1(kReg, "slice", {&x}, desc(DType::I32, {1}),
                        {{"starts", {4}}, {"limits", {-1}}, {"strides", {INT64_MIN}}})),
            (std::vector<double>{4}));
  EXPECT_EQ(valuesOf(run1(kReg, "slice", {&x}, desc(DType::I32, {1}),
                        {{"starts", {1}}, {"limits", {5}}, {"strides", {INT64_MAX}}})),
            (std::vector<double>{1}));
  TensorDesc d = x.desc();
  expectError([&] { build(kReg, "slice", {d}, {d}, {{"starts", {0}}, {"limits", {5}}, {"strides", {0}}}); },
              "stride");
  expectError([&] { build(kReg, "slice", {d}, {d}, {{"starts", {0}}, {"limits", {6}}, {"strides", {1}}}); },
              "out of range");
  expectError([&] { build(kReg, "slice", {d}, {d}, {{"starts", {0}}, {"limits", {4}}, {"strides", {1}}}); },
              "should have shape");
  expectError([&] { build(kReg, "slice", {d}, {d}, {{"starts", {0, 0}}, {"limits", {5}}, {"strides", {1}}}); },
              "entries");
}

TEST(Shape, ConcatRandom) {
  std::mt19937 rng(4);
  for (int iter = 0; iter < 40; ++iter) {
    int rank = 1 + rng() % 4;
    std::vector<int64_t> base = randomShape(rng, rank, 4);
    int64_t axis = rng() % rank;
    int nin = 1 + rng() % 4;
    DType t = kSizes[iter % kSizes.size()];
    std::vector<HostTensor> ins;
    std::vector<const HostTensor *> ptrs;
    std::vector<int64_t> os = base;
    os[axis] = 0;
    for (int i = 0; i < nin; ++i) {
      std::vector<int64_t> s = base;
      s[axis] = rng() % 4; // may be 0
      if (iter == 0)
        s[axis] = 20000;
      os[axis] += s[axis];
      std::vector<double> v(numelOf(s));
      for (auto &x : v)
        x = rng() % 100;
      ins.push_back(tensor(t, s, v));
    }
    for (auto &h : ins)
      ptrs.push_back(&h);
    std::vector<double> want(numelOf(os));
    for (int64_t i = 0; i < (int64_t)want.size(); ++i) {
      auto c = coords(i, os);
      int64_t a = c[axis];
      for (auto &h : ins) {
        if (a < h.shape()[axis]) {
          c[axis] = a;
          want[i] = valueAt(h, linear(c, h.shape()));
          break;
        }
        a -= h.shape()[axis];
      }
    }
    expectClose(valuesOf(run1(kReg, "concat", ptrs, desc(t, os), {{"axis", axis}})), want, 0,
                "concat axis " + std::to_string(axis) + " -> " + L::shapeStr(os));
  }
  TensorDesc a = desc(DType::F32, {2, 3}), b = desc(DType::F32, {3, 3}),
             c = desc(DType::I32, {2, 3});
  expectError([&] { build(kReg, "concat", {a, b}, {desc(DType::F32, {2, 6})}, {{"axis", 1}}); },
              "differ in dim 0");
  expectError([&] { build(kReg, "concat", {a, c}, {desc(DType::F32, {4, 3})}, {{"axis", 0}}); },
              "element type");
  expectError([&] { build(kReg, "concat", {a, b}, {desc(DType::F32, {6, 3})}, {{"axis", 0}}); },
              "should have shape");
  expectError([&] { build(kReg, "concat", {a}, {a}, {{"axis", 2}}); }, "out of range");
  expectError([&] { build(kReg, "concat", std::vector<TensorDesc>{}, {a}, {{"axis", 0}}); }, "at least one");
}

TEST(Shape, PadRandom) {
  std::mt19937 rng(5);
  for (int iter = 0; iter < 90; ++iter) {
    int rank = rng() % 4;
    std::vector<int64_t> s = randomShape(rng, rank, 5);
    const char *mode = std::vector<const char *>{"constant", "reflect", "edge"}[iter % 3];
    std::vector<int64_t> lo(rank), hi(rank), os(rank);
    for (int d = 0; d < rank; ++d) {
      int64_t n = s[d];
      if (std::string(mode) == "reflect") {
        lo[d] = (int64_t)(rng() % n) - (int64_t)(rng() % n) / 2;
        hi[d] = (int64_t)(rng() % n) - (int64_t)(rng() % n) / 2;
      } else {
        lo[d] = (int64_t)(rng() % 4) - (int64_t)(rng() % (n + 1)) / 2;
        hi[d] = (int64_t)(rng() % 4) - (int64_t)(rng() % (n + 1)) / 2;
      }
      os[d] = n + lo[d] + hi[d];
    }
    if (iter == 0)
      s = {300, 200}, lo = {1, 2}, hi = {3, -4}, os = {304, 198}, rank = 2;
    DType t = kSizes[iter % kSizes.size()];
    auto x = iota(t, s);
    auto xv = valuesOf(x);
    double value = t == DType::Bool ? 1 : 42.5;
    double pv = rounded(t, value);
    std::vector<double> want(numelOf(os));
    for (int64_t i = 0; i < (int64_t)want.size(); ++i) {
      auto c = coords(i, os);
      bool fill = false;
      for (int d = 0; d < rank; ++d) {
        int64_t p = c[d] - lo[d], n = s[d];
        if (std::string(mode) == "constant") {
          fill |= p < 0 || p >= n;
        } else if (std::string(mode) == "edge") {
          p = std::clamp<int64_t>(p, 0, n - 1);
        } else {
          if (p < 0)
            p = -p;
          if (p >= n)
            p = 2 * (n - 1) - p;
        }
        c[d] = p;
      }
      want[i] = fill ? pv : xv[linear(c, s)];
    }
    expectClose(valuesOf(run1(kReg, "pad", {&x}, desc(t, os),
                            {{"low", lo}, {"high", hi}, {"mode", mode}, {"value", value}})),
                want, 0,
                std::string("pad ") + mode + " " + x.desc().str() + " " +
                    L::shapeStr(lo) + L::shapeStr(hi));
  }
  auto x = iota(DType::I32, {3});
  EXPECT_EQ(valuesOf(run1(kReg, "pad", {&x}, desc(DType::I32, {5}),
                        {{"low", {1}}, {"high", {1}}, {"value", -7.9}})),
            (std::vector<double>{-7, 0, 1, 2, -7}));
  TensorDesc d = x.desc();
  expectError([&] { build(kReg, "pad", {d}, {desc(DType::I32, {7})},
                          {{"low", {3}}, {"high", {1}}, {"mode", "reflect"}}); },
              "reflect padding");
  expectError([&] { build(kReg, "pad", {d}, {d}, {{"low", {0}}, {"high", {0}}, {"mode", "wrap"}}); },
              "mode");
  expectError([&] { build(kReg, "pad", {d}, {d}, {{"low", {-2}}, {"high", {-2}}}); }, "negative size");
  expectError([&] { build(kReg, "pad", {d}, {d}, {{"low", {1}}, {"high", {0}}}); }, "should have shape");
  expectError([&] { build(kReg, "pad", {desc(DType::I32, {0})}, {desc(DType::I32, {2})},
                          {{"low", {1}}, {"high", {1}}, {"mode", "edge"}}); },
              "edge padding");
}

TEST(Shape, GatherRandom) {
  std::mt19937 rng(6);
  for (int iter = 0; iter < 40; ++iter) {
    int rank = 1 + rng() % 3;
    std::vector<int64_t> s = randomShape(rng, rank, 5);
    int64_t axis = rng() % rank;
    std::vector<int64_t> is = randomShape(rng, rng() % 3, 4);
    if (iter == 0)
      s = {1000, 64}, axis = 0, is = {50, 20};
    DType it = iter % 2 ? DType::I32 : DType::I64;
    std::vector<double> iv(numelOf(is));
    for (auto &v : iv)
      v = (int64_t)(rng() % (2 * s[axis])) - s[axis];
    auto ids = tensor(it, is, iv);
    DType t = kSizes[iter % kSizes.size()];
    auto x = iota(t, s);
    auto xv = valuesOf(x);
    std::vector<int64_t> os(s.begin(), s.begin() + axis);
    os.insert(os.end(), is.begin(), is.end());
    os.insert(os.end(), s.begin() + axis + 1, s.end());
    std::vector<double> want(numelOf(os));
    for (int64_t i = 0; i < (int64_t)want.size(); ++i) {
      auto c = coords(i, os);
      std::vector<int64_t> ic(c.begin(), c.begin() + axis);
      std::vector<int64_t> jc(c.begin() + axis, c.begin() + axis + is.size());
      int64_t k = (int64_t)iv[linear(jc, is)];
      ic.push_back(k < 0 ? k + s[axis] : k);
      ic.insert(ic.end(), c.begin() + axis + is.size(), c.end());
      want[i] = xv[linear(ic, s)];
    }
    expectClose(valuesOf(run1(kReg, "gather", {&x, &ids}, desc(t, os), {{"axis", axis}})), want, 0,
                "gather " + x.desc().str() + " axis " + std::to_string(axis));
  }
  auto x = iota(DType::F32, {5, 2});
  auto bad = tensor(DType::I64, {2}, {1, 7});
  expectError([&] { run1(kReg, "gather", {&x, &bad}, desc(DType::F32, {2, 2}), {{"axis", 0}}); },
              "gather index 7 is out of range for axis 0 of size 5");
  auto neg = tensor(DType::I32, {1}, {-6});
  expectError([&] { run1(kReg, "gather", {&x, &neg}, desc(DType::F32, {1, 2}), {{"axis", 0}}); },
              "gather index -6 is out of range");
  auto f = tensor(DType::F32, {1}, {0});
  expectError([&] { run1(kReg, "gather", {&x, &f}, desc(DType::F32, {1, 2}), {{"axis", 0}}); },
              "i32 or i64");
  auto ok = tensor(DType::I64, {}, {-1});
  EXPECT_EQ(valuesOf(run1(kReg, "gather", {&x, &ok}, desc(DType::F32, {5}), {{"axis", 1}})),
            (std::vector<double>{1, 3, 5, 7, 9}));
  expectError([&] { run1(kReg, "gather", {&x, &ok}, desc(DType::F32, {5, 1}), {{"axis", 1}}); },
              "should have shape");
  expectError([&] { run1(kReg, "gather", {&x, &ok}, desc(DType::F32, {5}), {{"axis", 2}}); },
              "out of range for rank");
}

TEST(Shape, GatherElementsRandom) {
  std::mt19937 rng(8);
  for (int iter = 0; iter < 40; ++iter) {
    int rank = 1 + rng() % 4;
    std::vector<int64_t> s = randomShape(rng, rank, 5);
    for (auto &d : s)
      d = std::max<int64_t>(d, 1);
    if (iter == 0)
      s = {300, 70}; // threaded
    rank = (int)s.size();
    int64_t axis = rng() % rank;
    // Indices: any length on the axis, no larger than the input elsewhere.
    std::vector<int64_t> is(s);
    for (int64_t d = 0; d < rank; ++d)
      is[d] = d == axis ? 1 + rng() % 4 : 1 + rng() % s[d];
    DType it = iter % 2 ? DType::I32 : DType::I64;
    std::vector<double> iv(numelOf(is));
    for (auto &v : iv)
      v = (int64_t)(rng() % (2 * s[axis])) - s[axis];
    auto ids = tensor(it, is, iv);
    DType t = kSizes[iter % kSizes.size()];
    auto x = iota(t, s);
    auto xv = valuesOf(x);
    std::vector<double> want(numelOf(is));
    for (int64_t i = 0; i < (int64_t)want.size(); ++i) {
      auto c = coords(i, is);
      int64_t k = (int64_t)iv[i];
      c[axis] = k < 0 ? k + s[axis] : k;
      want[i] = xv[linear(c, s)];
    }
    expectClose(valuesOf(run1(kReg, "gather_elements", {&x, &ids}, desc(t, is), {{"axis", axis}})),
                want, 0, "gather_elements " + x.desc().str() + " axis " + std::to_string(axis));
  }
  // Hand-checked: ONNX's test_gather_elements_0.
  auto x = tensor(DType::F32, {2, 2}, {1, 2, 3, 4});
  auto i = tensor(DType::I64, {2, 2}, {0, 0, 1, 0});
  EXPECT_EQ(valuesOf(run1(kReg, "gather_elements", {&x, &i}, desc(DType::F32, {2, 2}), {{"axis", 1}})),
            (std::vector<double>{1, 1, 4, 3}));
  auto bad = tensor(DType::I64, {2, 1}, {0, 2});
  expectError([&] { run1(kReg, "gather_elements", {&x, &bad}, desc(DType::F32, {2, 1}), {{"axis", 1}}); },
              "gather_elements index 2 is out of range for axis 1 of size 2");
  auto wide = tensor(DType::I64, {3, 1}, {0, 0, 0});
  expectError([&] { run1(kReg, "gather_elements", {&x, &wide}, desc(DType::F32, {3, 1}), {{"axis", 1}}); },
              "larger than the input");
}

} // namespace
