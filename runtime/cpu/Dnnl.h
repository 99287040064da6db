//===- Dnnl.h - shared oneDNN helpers for the CPU kernels -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// One oneDNN CPU engine and stream for the process, memory-descriptor
// helpers, a user-managed scratchpad, and the 16-bit float <-> f32 staging
// loops the matmul/conv kernels use for f16 and bf16 operands, and the
// descriptor dims of a conv/pool window, derived from the one geometry of
// kiln/runtime/ShapeRules.h. Everything oneDNN throws at factory time is
// turned into a one-line kiln::rt::Error.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CPU_DNNL_H
#define KILN_RUNTIME_CPU_DNNL_H

#include "Convert16.h"
#include "Loops.h"
#include "kiln/runtime/Kernel.h"
#include "kiln/runtime/ShapeRules.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace kiln::rt::cpu {

/// The process's oneDNN CPU engine.
inline dnnl::engine &dnnlEngine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

/// The process's oneDNN stream (kernels run one at a time).
inline dnnl::stream &dnnlStream() {
  static dnnl::stream s(dnnlEngine());
  return s;
}

/// "oneDNN: <what>: <message> (status N)" as a kiln Error.
[[noreturn]] inline void throwDnnl(const KernelSpec &spec, const char *what,
                                   const dnnl::error &e) {
  throw Error("oneDNN " + std::string(what) + " for kernel '" + spec.kernel +
              "' failed: " + e.what() + " (status " +
              std::to_string((int)e.status) + ")");
}

inline dnnl::memory::dims toDims(const std::vector<int64_t> &v) {
  return dnnl::memory::dims(v.begin(), v.end());
}

/// Dense row-major strides of `dims`.
inline dnnl::memory::dims denseStrides(const dnnl::memory::dims &dims) {
  dnnl::memory::dims s(dims.size(), 1);
  for (int i = (int)dims.size() - 2; i >= 0; --i)
    s[i] = s[i + 1] * (dims[i + 1] > 0 ? dims[i + 1] : 1);
  return s;
}

/// Whether oneDNN has bf16 primitives on this CPU (AVX-512 BF16 or AMX);
/// without them it would emulate bf16 slower than staging through f32.
inline bool dnnlHasBf16() {
  static const bool yes = [] {
    auto isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 ||
           isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return yes;
}

/// oneDNN's data type for a float DType it runs natively (f32, and bf16
/// where dnnlHasBf16()).
inline dnnl::memory::data_type dnnlType(DType t) {
  return t == DType::BF16 ? dnnl::memory::data_type::bf16
                          : dnnl::memory::data_type::f32;
}

/// A plain (row-major) memory descriptor of `dims` (f32 unless `dt`).
inline dnnl::memory::desc
plainF32(const dnnl::memory::dims &dims,
         dnnl::memory::data_type dt = dnnl::memory::data_type::f32) {
  return dnnl::memory::desc(dims, dt, denseStrides(dims));
}

/// The oneDNN descriptor dims of a convolution or pooling window, for the
/// forward and backward primitives alike: src [N, C, D...], dst [N, O, D...],
/// weights ([G,] O/G, C/G, K...), the window, strides, dilations as holes,
/// begin and end pads.
struct DnnlWindow {
  dnnl::memory::dims src, dst, weights, kernel, strides, holes, padL, padR;

  explicit DnnlWindow(const shape::WindowGeometry &g)
      : src(g.srcDims()), dst(g.dstDims()), weights(g.weightDims()),
        kernel(g.kernelDims()), strides(g.strideDims()), holes(g.holeDims()),
        padL(g.padLoDims()), padR(g.padHiDims()) {}
};

/// 64-byte-aligned scratch owned by a kernel, allocated at factory time.
class Scratch {
public:
  Scratch() = default;
  explicit Scratch(size_t bytes) { resize(bytes); }
  void resize(size_t bytes) {
    size_t alloc = ((bytes + 63) / 64) * 64;
    if (alloc == 0) {
      data_.reset();
      size_ = 0;
      return;
    }
    void *p = std::aligned_alloc(64, alloc);
    if (!p)
      throw std::bad_alloc();
    data_.reset(static_cast<uint8_t *>(p));
    size_ = bytes;
  }
  void *data() const { return data_.get(); }
  template <typename T> T *as() const { return static_cast<T *>(data()); }
  size_t size() const { return size_; }

private:
  struct Free {
    void operator()(uint8_t *p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

/// A primitive attribute with a user-managed scratchpad.
inline dnnl::primitive_attr userScratchpadAttr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

/// A plain user tensor and, when the primitive wants another layout, the
/// primitive-side memory with the reorder between them.
struct Staged {
  dnnl::memory user, prim;
  dnnl::reorder reorder;
  Scratch buf;
  bool reordered = false;

  void init(const dnnl::memory::desc &userMd, const dnnl::memory::desc &primMd,
            bool toPrim) {
    dnnl::engine &eng = dnnlEngine();
    user = dnnl::memory(userMd, eng, nullptr);
    if (primMd == userMd) {
      prim = user;
      return;
    }
    reordered = true;
    buf.resize(primMd.get_size());
    prim = dnnl::memory(primMd, eng, buf.data());
    reorder = toPrim ? dnnl::reorder(user, prim) : dnnl::reorder(prim, user);
  }

  /// Points the plain memory at the caller's tensor.
  void bind(const void *p) { user.set_data_handle(const_cast<void *>(p)); }
  /// An input: plain -> primitive layout, when they differ.
  void toPrim(dnnl::stream &st) {
    if (reordered)
      reorder.execute(st, user, prim);
  }
  /// An output: primitive layout -> plain, when they differ.
  void toUser(dnnl::stream &st) {
    if (reordered)
      reorder.execute(st, prim, user);
  }
};

/// Loads `n` 16-bit floats (f16 or bf16) as f32, in parallel when large.
inline void widen16(bool isHalf, const uint16_t *src, float *dst, int64_t n) {
  if (isHalf) {
#pragma omp parallel for if (n > 32768) schedule(static)
    for (int64_t i = 0; i < n; ++i)
      dst[i] = halfToFloat(src[i]);
  } else {
    loops::parallelRange(n, n, [&](int64_t b, int64_t e) { f32FromBf16(src, dst, b, e); });
  }
}

/// Stores `n` f32 values as 16-bit floats, rounding to nearest even.
inline void narrow16(bool isHalf, const float *src, uint16_t *dst, int64_t n) {
  if (isHalf) {
#pragma omp parallel for if (n > 32768) schedule(static)
    for (int64_t i = 0; i < n; ++i)
      dst[i] = floatToHalf(src[i]);
  } else {
    loops::parallelRange(n, n, [&](int64_t b, int64_t e) { bf16FromF32(src, dst, b, e); });
  }
}


/// A conv/pool window attribute: `name` with `n` entries, each >= `min`.
inline std::vector<int64_t> windowAttr(const KernelSpec &spec,
                                       const std::string &name, size_t n,
                                       int64_t min,
                                       const std::vector<int64_t> *dflt = nullptr) {
  std::vector<int64_t> v = dflt ? spec.attrs.getInts(name, *dflt)
                                : spec.attrs.getInts(name);
  if (v.size() != n)
    throw Error("kernel '" + spec.kernel + "': attribute '" + name +
                "' needs " + std::to_string(n) + " entries, got " +
                std::to_string(v.size()));
  for (int64_t x : v)
    if (x < min)
      throw Error("kernel '" + spec.kernel + "': attribute '" + name +
                  "' entries must be >= " + std::to_string(min));
  return v;
}

/// "kernel 'conv': output f32[1,2] does not match the expected f32[1,3]".
[[noreturn]] inline void badOutput(const KernelSpec &spec, const TensorDesc &got,
                                   const TensorDesc &want) {
  throw Error("kernel '" + spec.kernel + "': output " + got.str() +
              " does not match the expected " + want.str());
}

} // namespace kiln::rt::cpu

#endif // KILN_RUNTIME_CPU_DNNL_H
