//===- Device.h - the backend seam: devices, streams, allocators -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Everything the executor needs from a target, so that a new backend (CUDA:
// cudaMalloc arenas, streams and events, cudaMemcpyAsync, cuBLASLt/cuDNN
// kernels) is a new Device subclass and not a change to the executor:
//  - an Allocator: aligned, zeroed allocations in the device's memory, with
//    accounting (bytes in use, peak, live allocations);
//  - a Stream: kernels and copies are issued on one, in order; record()
//    marks a point, wait() orders another stream after it, synchronize()
//    blocks the host until it is reached. The CPU stream runs everything
//    inline when issued, so its events are complete when recorded;
//  - copies host->device, device->host and device->device, ordered on a
//    stream (the CPU copies are memmove, done when they return);
//  - the kernel registry of its target.
// A device whose memory the host can address (hostAccessible) lets the
// executor point kernels at the caller's host tensors directly: the CPU
// backend adds no copy to a run. Others get device staging buffers.
//
// Internal to the runtime like Kernel.h (it throws kiln::rt::Error); the
// public API (Runtime.h) names a device by a string.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_DEVICE_H
#define KILN_RUNTIME_DEVICE_H

#include "kiln/runtime/Tensor.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::rt {

class KernelRegistry;

/// An allocator of one memory space. Allocations are zeroed (an arena the
/// plan never writes reads as zeros, as it always has) and aligned to at least
/// `alignment` (a power of two). Thread-safe.
class Allocator {
public:
  explicit Allocator(MemorySpace space) : space_(space) {}
  virtual ~Allocator() = default;
  Allocator(const Allocator &) = delete;
  Allocator &operator=(const Allocator &) = delete;

  MemorySpace space() const { return space_; }
  /// Throws std::bad_alloc when out of memory, Error for a bad alignment.
  /// Zero bytes still give a unique, freeable pointer.
  void *allocate(size_t bytes, size_t alignment);
  /// Frees what allocate returned; null is a no-op.
  void deallocate(void *p);

  /// Bytes requested by the live allocations (not counting alignment slack).
  size_t bytesInUse() const { return inUse_.load(std::memory_order_relaxed); }
  /// The largest bytesInUse() seen.
  size_t peakBytes() const { return peak_.load(std::memory_order_relaxed); }
  /// Allocations not yet freed.
  size_t liveAllocations() const { return live_.load(std::memory_order_relaxed); }

protected:
  /// The backend's allocation; `bytes` is the caller's size.
  virtual void *doAllocate(size_t bytes, size_t alignment) = 0;
  virtual size_t doDeallocate(void *p) = 0; // returns the allocation's bytes

private:
  MemorySpace space_;
  std::atomic<size_t> inUse_{0}, peak_{0}, live_{0};
};

/// A point on a stream: complete once the stream has executed everything
/// issued on it before the point was recorded.
class Event {
public:
  virtual ~Event() = default;
  /// True when complete (never blocks).
  virtual bool query() const = 0;
  /// Blocks the host until complete.
  virtual void synchronize() = 0;
};

/// An in-order queue of device work (kernels, copies).
class Stream {
public:
  virtual ~Stream() = default;
  /// An event at the current end of the stream.
  virtual std::unique_ptr<Event> record() = 0;
  /// Work issued on this stream after the call starts after `e` completes.
  virtual void wait(const Event &e) = 0;
  /// Blocks the host until everything issued so far has executed.
  virtual void synchronize() = 0;
};

/// One device of a backend.
class Device {
public:
  virtual ~Device() = default;
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  DeviceKind kind() const { return space_.kind; }
  int index() const { return space_.index; }
  /// Where this device's allocations live.
  MemorySpace space() const { return space_; }
  /// "cpu:0"
  std::string name() const { return space_.str(); }
  /// True when the host may read and write this device's memory directly
  /// (the executor then binds host tensors without copying them).
  virtual bool hostAccessible() const = 0;

  virtual Allocator &allocator() = 0;
  /// The stream the executor issues a run on.
  virtual Stream &defaultStream() = 0;
  /// The kernels of this device's target.
  virtual const KernelRegistry &kernels() const = 0;

  /// Copies of `bytes` ordered on `stream`. `dst`/`src` are host memory on
  /// the host side and this device's memory on the device side; the regions
  /// may overlap. copyToHost returns once the host data is readable.
  virtual void copyToDevice(void *dst, const void *src, size_t bytes,
                            Stream &stream) = 0;
  virtual void copyToHost(void *dst, const void *src, size_t bytes,
                          Stream &stream) = 0;
  virtual void copyOnDevice(void *dst, const void *src, size_t bytes,
                            Stream &stream) = 0;

protected:
  explicit Device(MemorySpace space) : space_(space) {}

private:
  MemorySpace space_;
};

/// A zeroed allocation of a device's allocator, freed on destruction.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(Allocator &alloc, size_t bytes, size_t alignment)
      : alloc_(&alloc), data_(static_cast<uint8_t *>(alloc.allocate(bytes, alignment))),
        size_(bytes) {}
  DeviceBuffer(DeviceBuffer &&o) noexcept { *this = std::move(o); }
  DeviceBuffer &operator=(DeviceBuffer &&o) noexcept {
    if (this != &o) {
      reset();
      alloc_ = o.alloc_;
      data_ = o.data_;
      size_ = o.size_;
      o.alloc_ = nullptr;
      o.data_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }

  uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  /// Where the bytes live (host for an empty buffer).
  MemorySpace space() const { return alloc_ ? alloc_->space() : MemorySpace(); }
  void reset() {
    if (alloc_)
      alloc_->deallocate(data_);
    alloc_ = nullptr;
    data_ = nullptr;
    size_ = 0;
  }

private:
  Allocator *alloc_ = nullptr;
  uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

/// The host's allocator: 64-byte-aligned, zeroed host memory for HostTensor
/// (and the CPU device's arena). A CUDA build would make it page-locked so
/// that copies can overlap kernels.
Allocator &hostAllocator();

/// The CPU backend (runtime/cpu kernels, host memory, the inline stream).
/// One process-wide instance.
Device &cpuDevice();

/// The device a user names: "cpu" or "cpu:0"; "cuda[:N]" is refused with
/// "not built with CUDA support" until a CUDA backend exists. Null with a
/// one-line `err` otherwise.
std::shared_ptr<Device> openDevice(const std::string &name, std::string &err);

} // namespace kiln::rt

#endif // KILN_RUNTIME_DEVICE_H
