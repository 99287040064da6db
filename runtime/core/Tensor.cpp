//===- Tensor.cpp - host tensors -------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln::rt {

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
  size_t n = desc_.bytes();
  size_t alloc = ((n + 63) / 64) * 64;
  if (alloc == 0)
    alloc = 64;
  void *p = std::aligned_alloc(64, alloc);
  if (!p)
    throw std::bad_alloc();
  std::memset(p, 0, alloc);
  data_ = std::shared_ptr<uint8_t>(static_cast<uint8_t *>(p),
                                   [](uint8_t *q) { std::free(q); });
}

} // namespace kiln::rt
