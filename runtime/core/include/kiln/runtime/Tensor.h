//===- Tensor.h - tensor descriptions and host tensors ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_TENSOR_H
#define KILN_RUNTIME_TENSOR_H

#include "kiln/runtime/DType.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::rt {

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

/// A tensor in host memory that owns (or shares) 64-byte-aligned storage.
class HostTensor {
public:
  HostTensor() = default;
  /// Allocates zeroed storage for `desc`.
  explicit HostTensor(TensorDesc desc);

  const TensorDesc &desc() const { return desc_; }
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
