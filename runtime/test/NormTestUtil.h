//===- NormTestUtil.h - helpers of the norm/softmax/loss tests --*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Building and running one kernel from hand-made descs and attributes,
// filling float tensors from doubles (rounded to the storage type, and the
// doubles updated to what was stored), reading elements back as double,
// per-dtype tolerances, and loading ONNX node test data when it is installed.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_TEST_NORMTESTUTIL_H
#define KILN_RUNTIME_TEST_NORMTESTUTIL_H

#include "Kernels.h"

#include "kiln/runtime/Kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace kiln::rt::normtest {

using nlohmann::json;
using RegisterFn = void (*)(KernelRegistry &);

inline int64_t numelOf(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

inline double valueAt(const HostTensor &h, int64_t i) {
  switch (h.dtype()) {
  case DType::F32: return h.as<float>()[i];
  case DType::F64: return h.as<double>()[i];
  case DType::F16: return halfToFloat(h.as<uint16_t>()[i]);
  case DType::BF16: return bf16ToFloat(h.as<uint16_t>()[i]);
  case DType::I64: return (double)h.as<int64_t>()[i];
  case DType::I32: return h.as<int32_t>()[i];
  case DType::Bool: return h.as<uint8_t>()[i];
  default: ADD_FAILURE() << "valueAt: type"; return NAN;
  }
}

inline void setValue(HostTensor &h, int64_t i, double v) {
  switch (h.dtype()) {
  case DType::F32: h.as<float>()[i] = (float)v; break;
  case DType::F64: h.as<double>()[i] = v; break;
  case DType::F16: h.as<uint16_t>()[i] = floatToHalf((float)v); break;
  case DType::BF16: h.as<uint16_t>()[i] = floatToBf16((float)v); break;
  case DType::I64: h.as<int64_t>()[i] = (int64_t)v; break;
  case DType::I32: h.as<int32_t>()[i] = (int32_t)v; break;
  case DType::Bool: h.as<uint8_t>()[i] = v != 0; break;
  default: ADD_FAILURE() << "setValue: type"; break;
  }
}

/// A tensor holding `vals` rounded to `t`; `vals` becomes what was stored.
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

inline std::vector<double> randomVals(std::mt19937 &rng, int64_t n, double lo,
                                      double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(n);
  for (double &x : v)
    x = d(rng);
  return v;
}

/// Relative tolerance of a computed result in `t`.
inline double tolFor(DType t) {
  switch (t) {
  case DType::F64: return 1e-10;
  case DType::F32: return 2e-5;
  case DType::F16: return 4e-3;
  case DType::BF16: return 3e-2;
  default: return 0;
  }
}

inline const std::vector<DType> &floatTypes() {
  static const std::vector<DType> t = {DType::F32, DType::F64, DType::F16,
                                       DType::BF16};
  return t;
}

/// Builds kernel `name` from `reg` for these input descs (null: absent) and
/// output descs.
inline std::unique_ptr<Kernel> build(RegisterFn reg, const std::string &name,
                                     const std::vector<const TensorDesc *> &ins,
                                     const std::vector<TensorDesc> &outs,
                                     const json &attrs) {
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

/// Builds and runs once; returns the outputs.
inline std::vector<HostTensor> runOnce(RegisterFn reg, const std::string &name,
                                       const std::vector<const HostTensor *> &ins,
                                       const std::vector<TensorDesc> &outs,
                                       const json &attrs, ExecContext ctx = {}) {
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

/// Expects every element of `got` within tol * (|want| + floor) of `want`.
inline void expectNear(const HostTensor &got, const std::vector<double> &want,
                       double tol, double floor, const std::string &what) {
  ASSERT_EQ(got.numel(), (int64_t)want.size()) << what;
  int bad = 0;
  for (int64_t i = 0; i < got.numel() && bad < 5; ++i) {
    double g = valueAt(got, i), w = want[i];
    bool ok = (std::isnan(w) && std::isnan(g)) || g == w ||
              std::fabs(g - w) <= tol * (std::fabs(w) + floor);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " is " << g << ", want " << w;
    }
  }
}

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

inline std::vector<double> valuesOf(const HostTensor &h) {
  std::vector<double> v(h.numel());
  for (int64_t i = 0; i < h.numel(); ++i)
    v[i] = valueAt(h, i);
  return v;
}

} // namespace kiln::rt::normtest

#endif // KILN_RUNTIME_TEST_NORMTESTUTIL_H
