//===- DeviceTest.cpp - the backend seam ------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The CPU device (allocator alignment and accounting, copies, the inline
// stream), naming devices (cuda refused), and the executor through the seam:
// on the CPU device with no input copy, and on a test device whose memory the
// host may not touch and whose stream defers work until synchronized, which
// is what a CUDA backend will look like to the executor.
//===----------------------------------------------------------------------===//
#include "kiln/runtime/Device.h"
#include "kiln/runtime/Kernel.h"
#include "kiln/runtime/PlanFile.h"
#include "kiln/runtime/Runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <vector>

using namespace kiln::rt;
using nlohmann::json;

namespace {

bool aligned(const void *p, size_t a) {
  return reinterpret_cast<uintptr_t>(p) % a == 0;
}

//===----------------------------------------------------------------------===//
// A device the host may not address, with a deferred stream
//===----------------------------------------------------------------------===//

/// Host memory in disguise: every allocation is remembered so that tests can
/// ask whether a pointer is device memory.
class FakeAllocator final : public Allocator {
public:
  FakeAllocator() : Allocator({DeviceKind::Cuda, 3}) {}
  bool owns(const void *p) const {
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin())
      return false;
    --it;
    return static_cast<const uint8_t *>(p) <
           static_cast<const uint8_t *>(it->first) + std::max<size_t>(it->second, 1);
  }

protected:
  void *doAllocate(size_t bytes, size_t alignment) override {
    void *p = hostAllocator().allocate(bytes, alignment);
    blocks_[p] = bytes;
    return p;
  }
  size_t doDeallocate(void *p) override {
    size_t bytes = blocks_.at(p);
    blocks_.erase(p);
    hostAllocator().deallocate(p);
    return bytes;
  }

private:
  std::map<const void *, size_t> blocks_;
};

/// Work is queued and runs only on synchronize (or a wait on an event of
/// another stream), as on a GPU the host would see stale data until then.
class DeferredStream final : public Stream {
public:
  struct Mark final : Event {
    DeferredStream *s;
    size_t pos;
    bool query() const override { return s->done_ >= pos; }
    void synchronize() override { s->runUntil(pos); }
  };
  void enqueue(std::function<void()> f) { queue_.push_back(std::move(f)); }
  std::unique_ptr<Event> record() override {
    auto m = std::make_unique<Mark>();
    m->s = this;
    m->pos = queue_.size();
    return m;
  }
  void wait(const Event &e) override {
    const_cast<Event &>(e).synchronize(); // one host thread: just run it
  }
  void synchronize() override { runUntil(queue_.size()); }
  size_t pending() const { return queue_.size() - done_; }

private:
  void runUntil(size_t pos) {
    while (done_ < pos)
      queue_[done_++]();
  }
  std::vector<std::function<void()>> queue_;
  size_t done_ = 0;
};

const KernelRegistry &fakeRegistry();

class FakeDevice final : public Device {
public:
  FakeDevice() : Device({DeviceKind::Cuda, 3}) {}
  bool hostAccessible() const override { return false; }
  Allocator &allocator() override { return alloc; }
  Stream &defaultStream() override { return stream; }
  const KernelRegistry &kernels() const override { return fakeRegistry(); }

  void copyToDevice(void *dst, const void *src, size_t bytes,
                    Stream &s) override {
    EXPECT_TRUE(alloc.owns(dst));
    EXPECT_FALSE(alloc.owns(src));
    toDevice += bytes;
    // Staged now (like cudaMemcpyAsync from pageable memory), landed later.
    auto data = std::make_shared<std::vector<uint8_t>>(
        static_cast<const uint8_t *>(src), static_cast<const uint8_t *>(src) + bytes);
    static_cast<DeferredStream &>(s).enqueue(
        [=] { std::memcpy(dst, data->data(), bytes); });
  }
  void copyToHost(void *dst, const void *src, size_t bytes, Stream &s) override {
    EXPECT_FALSE(alloc.owns(dst));
    EXPECT_TRUE(alloc.owns(src));
    toHost += bytes;
    static_cast<DeferredStream &>(s).enqueue(
        [=] { std::memcpy(dst, src, bytes); });
    s.synchronize();
  }
  void copyOnDevice(void *dst, const void *src, size_t bytes,
                    Stream &s) override {
    EXPECT_TRUE(alloc.owns(dst));
    EXPECT_TRUE(alloc.owns(src));
    static_cast<DeferredStream &>(s).enqueue(
        [=] { std::memmove(dst, src, bytes); });
  }

  FakeAllocator alloc;
  DeferredStream stream;
  size_t toDevice = 0, toHost = 0;
};

/// out = in0 + in1 over f32, issued on the context's stream, checking that
/// the executor handed it the device, its stream and device memory.
class DeviceAddKernel : public Kernel {
public:
  explicit DeviceAddKernel(int64_t n) : n_(n) {}
  void run(ExecContext &ctx, const void *const *in, void *const *out) override {
    auto *dev = dynamic_cast<FakeDevice *>(ctx.device);
    if (!dev || ctx.stream != &dev->stream || ctx.allocator != &dev->alloc)
      throw Error("not run on the fake device");
    for (const void *p : {in[0], in[1], (const void *)out[0]})
      if (!dev->alloc.owns(p))
        throw Error("an operand is not in device memory");
    const float *a = static_cast<const float *>(in[0]);
    const float *b = static_cast<const float *>(in[1]);
    float *o = static_cast<float *>(out[0]);
    int64_t n = n_;
    dev->stream.enqueue([=] {
      for (int64_t i = 0; i < n; ++i)
        o[i] = a[i] + b[i];
    });
  }

private:
  int64_t n_;
};

/// The same on the host, for the CPU device; records the context it saw.
ExecContext lastCpuContext;
std::vector<const void *> cpuFirstOperands;
class HostAddKernel : public Kernel {
public:
  explicit HostAddKernel(int64_t n) : n_(n) {}
  void run(ExecContext &ctx, const void *const *in, void *const *out) override {
    lastCpuContext = ctx;
    cpuFirstOperands.push_back(in[0]);
    const float *a = static_cast<const float *>(in[0]);
    const float *b = static_cast<const float *>(in[1]);
    float *o = static_cast<float *>(out[0]);
    for (int64_t i = 0; i < n_; ++i)
      o[i] = a[i] + b[i];
  }

private:
  int64_t n_;
};

const KernelRegistry &fakeRegistry() {
  static const KernelRegistry r = [] {
    KernelRegistry r;
    r.add("add", [](const KernelSpec &s) -> std::unique_ptr<Kernel> {
      return std::make_unique<DeviceAddKernel>(s.outputs[0]->numel());
    });
    return r;
  }();
  return r;
}

const KernelRegistry &hostRegistry() {
  static const KernelRegistry r = [] {
    KernelRegistry r;
    r.add("add", [](const KernelSpec &s) -> std::unique_ptr<Kernel> {
      return std::make_unique<HostAddKernel>(s.outputs[0]->numel());
    });
    return r;
  }();
  return r;
}

//===----------------------------------------------------------------------===//
// Plans
//===----------------------------------------------------------------------===//

json value(const char *kind, std::vector<int64_t> shape) {
  return {{"dtype", "f32"}, {"shape", shape}, {"kind", kind}};
}

/// y = (x + w) + c; t = x + w; w a parameter, c a constant, y a view.
std::string addPlan() {
  json v = json::array();
  v.push_back(value("input", {2, 3}));
  v[0]["index"] = 0;
  v[0]["name"] = "x";
  v.push_back(value("param", {2, 3}));
  v[1]["name"] = "w";
  v[1]["data_offset"] = 0;
  v[1]["data_bytes"] = 24;
  v.push_back(value("constant", {2, 3}));
  v[2]["data_offset"] = 64;
  v[2]["data_bytes"] = 24;
  v.push_back(value("arena", {2, 3}));
  v[3]["offset"] = 0;
  v.push_back(value("arena", {2, 3}));
  v[4]["offset"] = 64;
  v.push_back(value("view", {6}));
  v[5]["source"] = 4;
  auto step = [](std::vector<int64_t> in, std::vector<int64_t> out) {
    return json{{"kernel", "add"}, {"inputs", in}, {"outputs", out},
                {"attrs", json::object()}, {"loc", "/Add"}};
  };
  json h = {{"format", "kiln-plan"}, {"version", 1}, {"alignment", 64},
            {"arena_bytes", 128},    {"values", v},  {"inputs", {0}},
            {"outputs", {5, 3, 0}},
            {"steps", {step({0, 1}, {3}), step({3, 2}, {4})}}};
  h["output_names"] = {"y", "t", "x_out"};
  std::string blob(64 + 24, '\0');
  float w[6] = {1, 2, 3, 4, 5, 6}, c[6] = {100, 200, 300, 400, 500, 600};
  std::memcpy(&blob[0], w, 24);
  std::memcpy(&blob[64], c, 24);
  return writePlanContainer(h.dump(), blob);
}

HostTensor f32(std::vector<int64_t> shape, std::vector<float> vals) {
  HostTensor t(TensorDesc{DType::F32, shape});
  std::memcpy(t.data(), vals.data(), vals.size() * 4);
  return t;
}

std::vector<float> values(const HostTensor &t) {
  return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
}

} // namespace

//===----------------------------------------------------------------------===//
// The CPU device
//===----------------------------------------------------------------------===//

TEST(Device, CpuAllocatorAlignsZeroesAndCounts) {
  Allocator &a = cpuDevice().allocator();
  EXPECT_EQ(&a, &hostAllocator());
  EXPECT_TRUE(a.space().isHost());
  size_t use0 = a.bytesInUse(), live0 = a.liveAllocations();
  std::vector<std::pair<void *, size_t>> blocks;
  for (size_t align : {1, 8, 64, 4096, 1 << 16})
    for (size_t bytes : {0, 1, 100, 12345}) {
      void *p = a.allocate(bytes, align);
      ASSERT_TRUE(p);
      EXPECT_TRUE(aligned(p, align)) << bytes << " at " << align;
      for (size_t i = 0; i < bytes; ++i)
        ASSERT_EQ(static_cast<uint8_t *>(p)[i], 0) << i;
      std::memset(p, 0xab, bytes); // the whole size is writable
      blocks.emplace_back(p, bytes);
    }
  size_t total = 0;
  for (auto &b : blocks)
    total += b.second;
  EXPECT_EQ(a.bytesInUse(), use0 + total);
  EXPECT_EQ(a.liveAllocations(), live0 + blocks.size());
  EXPECT_GE(a.peakBytes(), use0 + total);
  for (auto &b : blocks)
    a.deallocate(b.first);
  a.deallocate(nullptr);
  EXPECT_EQ(a.bytesInUse(), use0);
  EXPECT_EQ(a.liveAllocations(), live0);
  EXPECT_THROW(a.allocate(16, 48), Error);
  EXPECT_THROW(a.allocate(16, 0), Error);
  EXPECT_THROW(a.allocate(SIZE_MAX - 8, 64), std::bad_alloc);
  EXPECT_EQ(a.liveAllocations(), live0);
}

TEST(Device, HostTensorsAndBuffersComeFromTheAllocator) {
  Allocator &a = hostAllocator();
  size_t use0 = a.bytesInUse();
  {
    HostTensor t(TensorDesc{DType::F32, {10}});
    EXPECT_TRUE(t.space().isHost());
    EXPECT_TRUE(aligned(t.data(), 64));
    EXPECT_EQ(a.bytesInUse(), use0 + 64); // whole 64-byte lines
    DeviceBuffer b(a, 1000, 256);
    EXPECT_TRUE(aligned(b.data(), 256));
    EXPECT_EQ(b.size(), 1000u);
    EXPECT_TRUE(b.space().isHost());
    DeviceBuffer moved = std::move(b);
    EXPECT_EQ(b.data(), nullptr);
    EXPECT_EQ(moved.size(), 1000u);
    EXPECT_EQ(a.bytesInUse(), use0 + 64 + 1000);
  }
  EXPECT_EQ(a.bytesInUse(), use0);
}

TEST(Device, CpuCopiesAndInlineStream) {
  Device &d = cpuDevice();
  EXPECT_EQ(d.kind(), DeviceKind::Cpu);
  EXPECT_EQ(d.index(), 0);
  EXPECT_EQ(d.name(), "cpu:0");
  EXPECT_TRUE(d.hostAccessible());
  EXPECT_EQ(&d.kernels(), &KernelRegistry::cpu());
  Stream &s = d.defaultStream();
  char host[16] = "0123456789abcde";
  DeviceBuffer buf(d.allocator(), 16, 64);
  d.copyToDevice(buf.data(), host, 16, s);
  EXPECT_EQ(std::memcmp(buf.data(), host, 16), 0);
  d.copyOnDevice(buf.data() + 2, buf.data(), 8, s); // overlapping: memmove
  char back[16] = {};
  d.copyToHost(back, buf.data(), 16, s);
  EXPECT_EQ(std::string(back, 16), std::string("0101234567abcde\0", 16));
  // Inline: work is done when issued, so events are complete at once.
  auto e = s.record();
  EXPECT_TRUE(e->query());
  e->synchronize();
  s.wait(*e);
  s.synchronize();
  ExecContext ctx; // defaults to the CPU device
  EXPECT_EQ(ctx.device, &d);
  EXPECT_EQ(ctx.stream, &s);
  EXPECT_EQ(ctx.allocator, &d.allocator());
}

TEST(Device, OpenDeviceByName) {
  std::string err;
  auto cpu = openDevice("cpu", err);
  ASSERT_TRUE(cpu) << err;
  EXPECT_EQ(cpu.get(), &cpuDevice());
  EXPECT_TRUE(openDevice("cpu:0", err)) << err;
  EXPECT_FALSE(openDevice("cpu:1", err));
  EXPECT_EQ(err, "no device 'cpu:1': the CPU backend has only cpu:0");
  EXPECT_FALSE(openDevice("cuda", err));
  EXPECT_EQ(err, "device 'cuda': this runtime was not built with CUDA support");
  EXPECT_FALSE(openDevice("cuda:1", err));
  EXPECT_NE(err.find("not built with CUDA support"), std::string::npos);
  EXPECT_FALSE(openDevice("cuda:x", err));
  EXPECT_EQ(err, "bad device 'cuda:x': expected KIND or KIND:INDEX");
  EXPECT_FALSE(openDevice("tpu", err));
  EXPECT_EQ(err, "unknown device 'tpu' (expected cpu or cuda)");
}

//===----------------------------------------------------------------------===//
// The executor through the seam
//===----------------------------------------------------------------------===//

TEST(DeviceExecutor, CudaIsRefusedWithOneLine) {
  std::string bytes = addPlan(), err;
  LoadOptions opts;
  opts.device = "cuda";
  EXPECT_FALSE(Program::load(bytes.data(), bytes.size(), err, opts));
  EXPECT_EQ(err, "device 'cuda': this runtime was not built with CUDA support");
  EXPECT_EQ(err.find('\n'), std::string::npos);
}

TEST(DeviceExecutor, CpuRunsInPlaceOnHostMemory) {
  std::string bytes = addPlan(), err;
  Allocator &a = hostAllocator();
  HostTensor x = f32({2, 3}, {10, 20, 30, 40, 50, 60});
  std::vector<HostTensor> out;
  size_t use0 = a.bytesInUse();
  LoadOptions opts;
  opts.registry = &hostRegistry();
  auto p = Program::load(bytes.data(), bytes.size(), err, opts);
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(p->deviceName(), "cpu:0");
  // The arena, the blob and the parameter come from the host allocator.
  EXPECT_GE(a.bytesInUse(), use0 + 128 + 88 + 24);
  cpuFirstOperands.clear();
  ASSERT_TRUE(p->run({&x}, out, err)) << err;
  EXPECT_EQ(values(out[0]), (std::vector<float>{111, 222, 333, 444, 555, 666}));
  ASSERT_EQ(cpuFirstOperands.size(), 2u);
  EXPECT_EQ(cpuFirstOperands[0], x.data()); // zero-copy: the caller's data
  EXPECT_EQ(lastCpuContext.device, &cpuDevice());
  EXPECT_EQ(lastCpuContext.stream, &cpuDevice().defaultStream());
  EXPECT_EQ(lastCpuContext.allocator, &a);
  out.clear();
  p.reset();
  EXPECT_EQ(a.bytesInUse(), use0);
}

TEST(DeviceExecutor, DeviceMemoryGoesThroughCopies) {
  std::string bytes = addPlan(), err;
  auto dev = std::make_shared<FakeDevice>();
  LoadOptions opts;
  opts.deviceObject = dev;
  auto p = Program::load(bytes.data(), bytes.size(), err, opts);
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(p->deviceName(), "cuda:3");
  EXPECT_GT(dev->alloc.liveAllocations(), 0u);
  EXPECT_GE(dev->alloc.bytesInUse(), 128u + 88 + 24 + 24);

  HostTensor x = f32({2, 3}, {10, 20, 30, 40, 50, 60});
  std::vector<HostTensor> out;
  dev->toDevice = dev->toHost = 0;
  ASSERT_TRUE(p->run({&x}, out, err)) << err;
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(values(out[0]), (std::vector<float>{111, 222, 333, 444, 555, 666}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{11, 22, 33, 44, 55, 66}));
  EXPECT_EQ(values(out[2]), (std::vector<float>{10, 20, 30, 40, 50, 60}));
  EXPECT_TRUE(out[0].space().isHost());
  EXPECT_EQ(dev->toDevice, 24u);    // the input, staged
  EXPECT_EQ(dev->toHost, 3 * 24u);  // every output, the input one included
  EXPECT_EQ(dev->stream.pending(), 0u);

  // Parameters live on the device: read and written through copies.
  HostTensor w;
  ASSERT_TRUE(p->getParam("w", w, err)) << err;
  EXPECT_EQ(values(w), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  ASSERT_TRUE(p->setParam("w", f32({2, 3}, {0, 0, 0, 0, 0, 1}), err)) << err;
  ASSERT_TRUE(p->run({&x}, out, err)) << err;
  EXPECT_EQ(values(out[1]), (std::vector<float>{10, 20, 30, 40, 50, 61}));

  // findNonFinite looks at device outputs through copies too.
  std::string where;
  HostTensor inf = f32({2, 3}, {0, 0, 0, 0, 0, 0});
  ASSERT_TRUE(p->setParam("w", f32({2, 3}, {0, 0, 1e38f, 0, 0, 0}), err));
  ASSERT_TRUE(p->findNonFinite({&inf}, where, err)) << err;
  EXPECT_EQ(where, "");
  ASSERT_TRUE(p->setParam("w", f32({2, 3}, {0, 0, INFINITY, 0, 0, 0}), err));
  ASSERT_TRUE(p->findNonFinite({&inf}, where, err)) << err;
  EXPECT_EQ(where, "step 0 ('add' at /Add)");

  p.reset();
  EXPECT_EQ(dev->alloc.liveAllocations(), 0u);
  EXPECT_EQ(dev->alloc.bytesInUse(), 0u);
}

TEST(DeviceExecutor, MissingKernelNamesTheDeviceKind) {
  std::string bytes = addPlan(), err;
  LoadOptions opts;
  opts.deviceObject = std::make_shared<FakeDevice>();
  KernelRegistry empty;
  opts.registry = &empty;
  EXPECT_FALSE(Program::load(bytes.data(), bytes.size(), err, opts));
  EXPECT_EQ(err, "step 0 ('add' at /Add): no CUDA kernel 'add'");
}
