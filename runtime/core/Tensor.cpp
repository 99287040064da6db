//===- Tensor.cpp - element types and host tensors --------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Tensor.h"

#include "kiln/runtime/Device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln::rt {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F64: case DType::I64: case DType::U64: return 8;
  case DType::F32: case DType::I32: case DType::U32: return 4;
  case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 2;
  case DType::I8: case DType::U8: case DType::Bool: return 1;
  }
  return 1;
}

static const char *const kNames[] = {"f32", "f64", "f16", "bf16", "i64",
                                     "i32", "i16", "i8",  "u64",  "u32",
                                     "u16", "u8",  "i1"};

const char *dtypeName(DType t) { return kNames[(int)t]; }

bool parseDType(std::string_view name, DType &out) {
  for (int i = 0; i < (int)(sizeof(kNames) / sizeof(kNames[0])); ++i)
    if (name == kNames[i]) {
      out = (DType)i;
      return true;
    }
  return false;
}

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 ||
         t == DType::BF16;
}
bool isSignedInt(DType t) {
  return t == DType::I64 || t == DType::I32 || t == DType::I16 || t == DType::I8;
}
bool isUnsignedInt(DType t) {
  return t == DType::U64 || t == DType::U32 || t == DType::U16 || t == DType::U8;
}

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
