//===- TestUtil.h - the kernel-test harness of the runtime tests -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// What every kernel test needs, once: building one kernel of a family's
// registration function from hand-made descs and attributes and running it;
// tensors filled from doubles (rounded to the storage type by the `cast`
// rule, Loops.h's castValue) and read back as doubles, in every dtype;
// per-dtype tolerances and element-wise comparison; index helpers; and
// loading ONNX node test data when it is installed.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_TEST_TESTUTIL_H
#define KILN_RUNTIME_TEST_TESTUTIL_H

#include "Kernels.h"
#include "Loops.h"

#include "kiln/runtime/Kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace kiln::rt::test {

using nlohmann::json;
/// A kernel family's registration function (Kernels.h); a test builds its
/// kernels from that family alone.
using RegisterFn = void (*)(KernelRegistry &);

//===----------------------------------------------------------------------===//
// Elements and tensors
//===----------------------------------------------------------------------===//

inline int64_t numelOf(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

/// Element i of `h` as a double, in any dtype.
inline double valueAt(const HostTensor &h, int64_t i) {
  namespace L = cpu::loops;
  return L::dispatchType(h.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return (double)L::load(h.as<T>(), i);
  });
}

/// Stores `v` into element i of `h` by the `cast` rule.
inline void setValue(HostTensor &h, int64_t i, double v) {
  namespace L = cpu::loops;
  L::dispatchType(h.dtype(), [&](auto tag) {
    using T = decltype(tag);
    L::store(h.as<T>(), i, L::castValue<T>(v));
    return 0;
  });
}

inline std::vector<double> valuesOf(const HostTensor &h) {
  std::vector<double> v(h.numel());
  for (int64_t i = 0; i < h.numel(); ++i)
    v[i] = valueAt(h, i);
  return v;
}

/// A tensor of `v` converted to `t` (by the cast rules).
inline HostTensor tensor(DType t, const std::vector<int64_t> &shape,
                         const std::vector<double> &v) {
  HostTensor h(TensorDesc{t, shape});
  EXPECT_EQ(h.numel(), (int64_t)v.size());
  for (int64_t i = 0; i < h.numel() && i < (int64_t)v.size(); ++i)
    setValue(h, i, v[i]);
  return h;
}

/// A tensor holding `vals` rounded to `t`; `vals` becomes what was stored,
/// so that a double reference computes on exactly the kernel's inputs.
inline HostTensor makeTensor(DType t, std::vector<int64_t> shape,
                             std::vector<double> &vals) {
  HostTensor h(TensorDesc{t, std::move(shape)});
  EXPECT_EQ((int64_t)vals.size(), h.numel());
  for (int64_t i = 0; i < h.numel() && i < (int64_t)vals.size(); ++i) {
    setValue(h, i, vals[i]);
    vals[i] = valueAt(h, i);
  }
  return h;
}

/// What storing `v` in `t` and loading it back gives.
inline double rounded(DType t, double v) {
  HostTensor h(TensorDesc{t, {}});
  setValue(h, 0, v);
  return valueAt(h, 0);
}

inline TensorDesc desc(DType t, std::vector<int64_t> s) {
  return TensorDesc{t, std::move(s)};
}

inline std::vector<double> randomVals(std::mt19937 &rng, int64_t n, double lo,
                                      double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (double &x : v)
    x = d(rng);
  return v;
}

/// Coordinates of linear index i in shape s.
inline std::vector<int64_t> coords(int64_t i, const std::vector<int64_t> &s) {
  std::vector<int64_t> c(s.size());
  for (int64_t d = (int64_t)s.size() - 1; d >= 0; --d) {
    c[d] = s[d] ? i % s[d] : 0;
    i = s[d] ? i / s[d] : 0;
  }
  return c;
}

inline int64_t linear(const std::vector<int64_t> &c,
                      const std::vector<int64_t> &s) {
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d)
    i = i * s[d] + c[d];
  return i;
}

/// Advances a multi-index over `shape` (last axis fastest); false after the
/// last one.
inline bool nextIndex(std::vector<int64_t> &idx,
                      const std::vector<int64_t> &shape) {
  for (int64_t i = (int64_t)shape.size() - 1; i >= 0; --i) {
    if (++idx[i] < shape[i])
      return true;
    idx[i] = 0;
  }
  return false;
}

inline const std::vector<DType> kFloats = {DType::F32, DType::F64, DType::F16,
                                           DType::BF16};
inline const std::vector<DType> kAll = {
    DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64,
    DType::I32, DType::I16, DType::I8,  DType::U64,  DType::U32,
    DType::U16, DType::U8,  DType::Bool};

inline const std::vector<DType> &floatTypes() { return kFloats; }

//===----------------------------------------------------------------------===//
// Building and running one kernel
//===----------------------------------------------------------------------===//

/// Builds kernel `name` from `reg` for these input descs (null: an absent
/// optional operand) and output descs.
inline std::unique_ptr<Kernel> build(RegisterFn reg, const std::string &name,
                                     const std::vector<const TensorDesc *> &ins,
                                     const std::vector<TensorDesc> &outs,
                                     const json &attrs = json::object()) {
  KernelRegistry r;
  reg(r);
  const KernelFactory *f = r.find(name);
  if (!f)
    throw Error("no kernel " + name);
  KernelSpec spec;
  spec.kernel = name;
  spec.inputs = ins;
  for (const TensorDesc &d : outs)
    spec.outputs.push_back(&d);
  spec.attrs = Attrs(&attrs);
  return (*f)(spec);
}

/// As above, every input present.
inline std::unique_ptr<Kernel> build(RegisterFn reg, const std::string &name,
                                     const std::vector<TensorDesc> &ins,
                                     const std::vector<TensorDesc> &outs,
                                     const json &attrs = json::object()) {
  std::vector<const TensorDesc *> p;
  for (const TensorDesc &d : ins)
    p.push_back(&d);
  return build(reg, name, p, outs, attrs);
}

/// Braced pointer lists ({&x, &y}) come here: without this overload they
/// would also match the vector<TensorDesc> one through its iterator-pair
/// constructor.
inline std::unique_ptr<Kernel> build(RegisterFn reg, const std::string &name,
                                     std::initializer_list<const TensorDesc *> ins,
                                     const std::vector<TensorDesc> &outs,
                                     const json &attrs = json::object()) {
  return build(reg, name, std::vector<const TensorDesc *>(ins), outs, attrs);
}

/// Builds and runs once (null inputs: absent); returns the outputs.
inline std::vector<HostTensor> runOnce(RegisterFn reg, const std::string &name,
                                       const std::vector<const HostTensor *> &ins,
                                       const std::vector<TensorDesc> &outs,
                                       const json &attrs = json::object(),
                                       ExecContext ctx = {}) {
  std::vector<const TensorDesc *> descs;
  std::vector<const void *> ptrs;
  for (const HostTensor *h : ins) {
    descs.push_back(h ? &h->desc() : nullptr);
    ptrs.push_back(h ? h->data() : nullptr);
  }
  auto k = build(reg, name, descs, outs, attrs);
  std::vector<HostTensor> res;
  std::vector<void *> optrs;
  for (const TensorDesc &d : outs)
    res.emplace_back(d);
  for (HostTensor &h : res)
    optrs.push_back(h.data());
  k->run(ctx, ptrs.data(), optrs.data());
  return res;
}

/// runOnce with one output.
inline HostTensor run1(RegisterFn reg, const std::string &name,
                       const std::vector<const HostTensor *> &ins,
                       const TensorDesc &out, const json &attrs = json::object()) {
  return std::move(runOnce(reg, name, ins, {out}, attrs)[0]);
}

//===----------------------------------------------------------------------===//
// Checking
//===----------------------------------------------------------------------===//

/// Relative tolerance of one operation's result in `t` (a few roundings).
inline double tolOf(DType t) {
  switch (t) {
  case DType::F64: return 1e-12;
  case DType::F32: return 2e-6;
  case DType::F16: return 2e-3;
  case DType::BF16: return 1.6e-2;
  default: return 0;
  }
}

/// Relative tolerance of an accumulated result in `t` (norms, softmax,
/// losses: sums over a reduction axis).
inline double tolFor(DType t) {
  switch (t) {
  case DType::F64: return 1e-10;
  case DType::F32: return 2e-5;
  case DType::F16: return 4e-3;
  case DType::BF16: return 3e-2;
  default: return 0;
  }
}

/// Expects every element of `got` within tol * (|want| + floor) of `want`
/// (NaN matches NaN); reports the first five misses.
inline void expectNear(const std::vector<double> &got,
                       const std::vector<double> &want, double tol, double floor,
                       const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    double g = got[i], w = want[i];
    bool ok = (std::isnan(w) && std::isnan(g)) || g == w ||
              std::fabs(g - w) <= tol * (std::fabs(w) + floor);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", want " << w;
    }
  }
}

inline void expectNear(const HostTensor &got, const std::vector<double> &want,
                       double tol, double floor, const std::string &what) {
  expectNear(valuesOf(got), want, tol, floor, what);
}

/// expectNear with an absolute floor of 1e-3.
inline void expectClose(const std::vector<double> &got,
                        const std::vector<double> &want, double tol,
                        const std::string &what) {
  expectNear(got, want, tol, 1e-3, what);
}

/// Expects `f` to throw an Error whose message contains `substr`.
template <typename F> void expectError(F &&f, const std::string &substr) {
  try {
    f();
    ADD_FAILURE() << "no Error; expected one containing '" << substr << "'";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(substr), std::string::npos)
        << "message: " << e.what();
  }
}

//===----------------------------------------------------------------------===//
// ONNX node test data
//===----------------------------------------------------------------------===//

inline std::string onnxNodeDir(const std::string &test) {
  std::string d = "/usr/share/libonnx-testdata/data/node/" + test;
  struct stat st;
  return ::stat((d + "/test_data_set_0").c_str(), &st) == 0 ? d : "";
}

/// A minimal reader of an ONNX TensorProto file (dims, data_type and
/// raw_data / float_data / int32_data / int64_data / double_data); enough for
/// the node test data. False on anything it does not understand.
inline bool readTensorProto(const std::string &path, HostTensor &out) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return false;
  std::string buf;
  char tmp[65536];
  size_t n;
  while ((n = std::fread(tmp, 1, sizeof(tmp), f)) > 0)
    buf.append(tmp, n);
  std::fclose(f);
  const uint8_t *p = (const uint8_t *)buf.data(), *end = p + buf.size();
  auto varint = [&](const uint8_t *&q, const uint8_t *e, uint64_t &v) {
    v = 0;
    for (int sh = 0; q < e && sh < 64; sh += 7) {
      uint8_t b = *q++;
      v |= (uint64_t)(b & 0x7f) << sh;
      if (!(b & 0x80))
        return true;
    }
    return false;
  };
  std::vector<int64_t> dims;
  int64_t dataType = 0;
  std::string raw;
  std::vector<double> vals; // from the typed fields
  while (p < end) {
    uint64_t key, v;
    if (!varint(p, end, key))
      return false;
    int field = (int)(key >> 3), wt = (int)(key & 7);
    if (wt == 0) {
      if (!varint(p, end, v))
        return false;
      if (field == 1)
        dims.push_back((int64_t)v);
      else if (field == 2)
        dataType = (int64_t)v;
      else if (field == 5 || field == 7)
        vals.push_back((double)(int64_t)v);
    } else if (wt == 2) {
      if (!varint(p, end, v) || v > (uint64_t)(end - p))
        return false;
      const uint8_t *q = p, *qe = p + v;
      p = qe;
      if (field == 9) {
        raw.assign((const char *)q, v);
      } else if (field == 1 || field == 5 || field == 7) { // packed varints
        while (q < qe) {
          uint64_t x;
          if (!varint(q, qe, x))
            return false;
          if (field == 1)
            dims.push_back((int64_t)x);
          else
            vals.push_back((double)(int64_t)x);
        }
      } else if (field == 4) { // packed floats
        for (; q + 4 <= qe; q += 4) {
          float x;
          std::memcpy(&x, q, 4);
          vals.push_back(x);
        }
      } else if (field == 10) { // packed doubles
        for (; q + 8 <= qe; q += 8) {
          double x;
          std::memcpy(&x, q, 8);
          vals.push_back(x);
        }
      }
    } else if (wt == 5) {
      if (end - p < 4)
        return false;
      float x;
      std::memcpy(&x, p, 4);
      p += 4;
      if (field == 4)
        vals.push_back(x);
    } else if (wt == 1) {
      if (end - p < 8)
        return false;
      double x;
      std::memcpy(&x, p, 8);
      p += 8;
      if (field == 10)
        vals.push_back(x);
    } else {
      return false;
    }
  }
  DType t;
  switch (dataType) {
  case 1: t = DType::F32; break;
  case 6: t = DType::I32; break;
  case 7: t = DType::I64; break;
  case 9: t = DType::Bool; break;
  case 10: t = DType::F16; break;
  case 11: t = DType::F64; break;
  case 16: t = DType::BF16; break;
  default: return false;
  }
  out = HostTensor(TensorDesc{t, dims});
  if (!raw.empty()) {
    if (raw.size() != out.bytes())
      return false;
    std::memcpy(out.data(), raw.data(), raw.size());
  } else {
    if ((int64_t)vals.size() != out.numel())
      return false;
    for (int64_t i = 0; i < out.numel(); ++i)
      setValue(out, i, vals[i]);
  }
  return true;
}

/// input_i.pb / output_i.pb of test_data_set_0 of an ONNX node test.
inline HostTensor onnxTensor(const std::string &dir, const char *kind, int i) {
  HostTensor t;
  std::string path = dir + "/test_data_set_0/" + kind + "_" + std::to_string(i) + ".pb";
  EXPECT_TRUE(readTensorProto(path, t)) << "cannot read " << path;
  return t;
}

} // namespace kiln::rt::test

#endif // KILN_RUNTIME_TEST_TESTUTIL_H
