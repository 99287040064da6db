//===- Tensor.cpp - host tensors -------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Tensor.h"

#include "kiln/runtime/Device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln::rt {

const char *deviceKindName(DeviceKind k) {
  switch (k) {
  case DeviceKind::Cpu: return "cpu";
  case DeviceKind::Cuda: return "cuda";
  }
  return "?";
}

std::string MemorySpace::str() const {
  return std::string(deviceKindName(kind)) + ":" + std::to_string(index);
}

std::string TensorDesc::str() const {
  std::string s = dtypeName(dtype);
  s += "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

HostTensor::HostTensor(TensorDesc desc) : desc_(std::move(desc)) {
  // Whole 64-byte lines, never empty (as before the allocator seam).
  size_t alloc = std::max<size_t>(64, (desc_.bytes() + 63) / 64 * 64);
  Allocator &a = hostAllocator();
  void *p = a.allocate(alloc, 64);
  data_ = std::shared_ptr<uint8_t>(static_cast<uint8_t *>(p),
                                   [&a](uint8_t *q) { a.deallocate(q); });
}

} // namespace kiln::rt
