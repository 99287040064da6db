//===- Device.cpp - allocator accounting and the CPU backend ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The CPU device: host memory from calloc (large arenas stay lazily mapped
// until a kernel touches them), a stream that runs work inline as it is
// issued, memmove copies, and KernelRegistry::cpu().
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Device.h"

#include "kiln/runtime/Kernel.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace kiln::rt {

//===----------------------------------------------------------------------===//
// Allocator
//===----------------------------------------------------------------------===//

void *Allocator::allocate(size_t bytes, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)))
    throw Error("allocation alignment " + std::to_string(alignment) +
                " is not a power of two");
  void *p = doAllocate(bytes, alignment);
  size_t now = inUse_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  size_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak &&
         !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed))
    ;
  live_.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void Allocator::deallocate(void *p) {
  if (!p)
    return;
  size_t bytes = doDeallocate(p);
  inUse_.fetch_sub(bytes, std::memory_order_relaxed);
  live_.fetch_sub(1, std::memory_order_relaxed);
}

namespace {

//===----------------------------------------------------------------------===//
// The CPU backend
//===----------------------------------------------------------------------===//

/// Host memory: calloc'd with room to align, the raw pointer and the size
/// kept just below the aligned pointer (no table, no lock).
class CpuAllocator final : public Allocator {
public:
  CpuAllocator() : Allocator(MemorySpace::host()) {}

protected:
  struct Header {
    void *raw;
    size_t bytes;
  };

  void *doAllocate(size_t bytes, size_t alignment) override {
    size_t slack = alignment + sizeof(Header);
    if (bytes > SIZE_MAX - slack)
      throw std::bad_alloc();
    void *raw = std::calloc(bytes + slack, 1);
    if (!raw)
      throw std::bad_alloc();
    uintptr_t first = reinterpret_cast<uintptr_t>(raw) + sizeof(Header);
    uintptr_t p = (first + alignment - 1) & ~(uintptr_t)(alignment - 1);
    Header h{raw, bytes};
    std::memcpy(reinterpret_cast<void *>(p - sizeof(Header)), &h, sizeof h);
    return reinterpret_cast<void *>(p);
  }

  size_t doDeallocate(void *p) override {
    Header h;
    std::memcpy(&h, static_cast<uint8_t *>(p) - sizeof(Header), sizeof h);
    std::free(h.raw);
    return h.bytes;
  }
};

/// Work issued on the CPU stream has run when the call returns, so every
/// event is complete when recorded and waiting is a no-op.
class CpuEvent final : public Event {
public:
  bool query() const override { return true; }
  void synchronize() override {}
};

class CpuStream final : public Stream {
public:
  std::unique_ptr<Event> record() override {
    return std::make_unique<CpuEvent>();
  }
  void wait(const Event &) override {}
  void synchronize() override {}
};

class CpuDevice final : public Device {
public:
  CpuDevice() : Device(MemorySpace::host()) {}

  bool hostAccessible() const override { return true; }
  Allocator &allocator() override { return hostAllocator(); }
  Stream &defaultStream() override { return stream_; }
  const KernelRegistry &kernels() const override { return KernelRegistry::cpu(); }

  void copyToDevice(void *dst, const void *src, size_t bytes,
                    Stream &) override {
    copy(dst, src, bytes);
  }
  void copyToHost(void *dst, const void *src, size_t bytes, Stream &) override {
    copy(dst, src, bytes);
  }
  void copyOnDevice(void *dst, const void *src, size_t bytes,
                    Stream &) override {
    copy(dst, src, bytes);
  }

private:
  static void copy(void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src)
      std::memmove(dst, src, bytes);
  }

  CpuStream stream_;
};

} // namespace

Allocator &hostAllocator() {
  // Never destroyed: host tensors in other static objects may outlive any
  // destruction order we could pick.
  static CpuAllocator *a = new CpuAllocator();
  return *a;
}

Device &cpuDevice() {
  static CpuDevice *d = new CpuDevice();
  return *d;
}

std::shared_ptr<Device> openDevice(const std::string &name, std::string &err) {
  std::string kind = name.substr(0, name.find(':'));
  int index = 0;
  if (kind.size() != name.size()) {
    std::string num = name.substr(kind.size() + 1);
    char *end = nullptr;
    long v = num.empty() ? -1 : std::strtol(num.c_str(), &end, 10);
    if (v < 0 || v > 1 << 16 || *end) {
      err = "bad device '" + name + "': expected KIND or KIND:INDEX";
      return nullptr;
    }
    index = (int)v;
  }
  if (kind == "cpu") {
    if (index != 0) {
      err = "no device '" + name + "': the CPU backend has only cpu:0";
      return nullptr;
    }
    err.clear();
    // The process-wide device, not owned by the caller.
    return std::shared_ptr<Device>(&cpuDevice(), [](Device *) {});
  }
  if (kind == "cuda") {
    err = "device '" + name + "': this runtime was not built with CUDA support";
    return nullptr;
  }
  err = "unknown device '" + name + "' (expected cpu or cuda)";
  return nullptr;
}

} // namespace kiln::rt
