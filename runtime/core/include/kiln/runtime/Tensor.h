//===- Tensor.h - tensor descriptions and host tensors ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// MemorySpace tags where a buffer lives (the device seam, Device.h): host
// tensors are always in host memory; the executor's arena, parameters and
// staged inputs are in its device's space.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_TENSOR_H
#define KILN_RUNTIME_TENSOR_H

#include "kiln/runtime/DType.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt {

/// A backend. Cpu is the host itself.
enum class DeviceKind { Cpu, Cuda };

/// "cpu", "cuda".
const char *deviceKindName(DeviceKind k);

/// Where bytes live: a device kind and its index ({Cpu, 0} is host memory).
struct MemorySpace {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;

  static MemorySpace host() { return {}; }
  bool isHost() const { return kind == DeviceKind::Cpu; }
  /// "cpu:0"
  std::string str() const;
  bool operator==(const MemorySpace &o) const {
    return kind == o.kind && index == o.index;
  }
  bool operator!=(const MemorySpace &o) const { return !(*this == o); }
};

/// A dense row-major tensor's type: element type and static shape.
struct TensorDesc {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  size_t bytes() const { return (size_t)numel() * dtypeSize(dtype); }
  int64_t rank() const { return (int64_t)shape.size(); }
  /// "f32[2,3]"
  std::string str() const;
  bool operator==(const TensorDesc &o) const {
    return dtype == o.dtype && shape == o.shape;
  }
  bool operator!=(const TensorDesc &o) const { return !(*this == o); }
};

/// A tensor in host memory that owns (or shares) 64-byte-aligned storage
/// from hostAllocator() (Device.h).
class HostTensor {
public:
  HostTensor() = default;
  /// Allocates zeroed storage for `desc`.
  explicit HostTensor(TensorDesc desc);

  const TensorDesc &desc() const { return desc_; }
  /// Always host memory: device data reaches a HostTensor through a
  /// Device's copyToHost.
  MemorySpace space() const { return MemorySpace::host(); }
  DType dtype() const { return desc_.dtype; }
  const std::vector<int64_t> &shape() const { return desc_.shape; }
  int64_t numel() const { return desc_.numel(); }
  size_t bytes() const { return desc_.bytes(); }
  void *data() { return data_.get(); }
  const void *data() const { return data_.get(); }
  template <typename T> T *as() { return static_cast<T *>(data()); }
  template <typename T> const T *as() const {
    return static_cast<const T *>(data());
  }

private:
  TensorDesc desc_;
  std::shared_ptr<uint8_t> data_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_TENSOR_H
