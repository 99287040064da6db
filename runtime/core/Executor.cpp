//===- Executor.cpp - building and running a Program ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// A Program owns its arena (one 64-byte-aligned allocation, made at load), a
// copy of the plan's data blob (constants point into it) and one buffer per
// parameter (initialised from the blob, persistent across runs), all from its
// device's allocator (Device.h) and so in the device's memory. Every step's
// input and output pointer arrays are computed at load; only the pointers of
// caller inputs are bound per run: the caller's host data itself on a device
// the host can address (the CPU: no copy), else a device staging buffer the
// input is copied into. Outputs and parameters come back through the
// device's copies. Nothing here throws out of the public API.
//===----------------------------------------------------------------------===//
#include "PlanInternal.h"

#include "kiln/runtime/Device.h"
#include "kiln/runtime/FileIO.h"
#include "kiln/runtime/Kernel.h"
#include "kiln/runtime/Runtime.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <unordered_map>

namespace kiln::rt {

using detail::ParsedPlan;
using detail::PlanStep;
using detail::PlanValue;
using detail::ValueKind;

namespace {

std::string oneLine(std::string s) {
  for (char &c : s)
    if (c == '\n' || c == '\r')
      c = ' ';
  return s;
}

bool profilingRequested() {
  const char *e = std::getenv("KILN_PROFILE");
  return e && *e && std::strcmp(e, "0") != 0;
}

} // namespace

class ProgramImpl {
public:
  struct Step {
    std::unique_ptr<Kernel> kernel;
    std::vector<const void *> in;
    std::vector<void *> out;
    /// (position in `in`, caller input index) for operands that are inputs.
    std::vector<std::pair<size_t, size_t>> inputSlots;
  };

  /// A parameter's persistent value, in the device's memory.
  struct Param {
    TensorDesc desc;
    DeviceBuffer buf;
  };

  ParsedPlan plan;
  std::shared_ptr<Device> device; // set before build
  Stream *stream = nullptr;
  std::vector<TensorDesc> inputDescs, outputDescs;
  std::vector<std::string> inputNames;
  DeviceBuffer arena, blob;
  std::vector<Param> params;            // in plan order
  std::vector<size_t> paramValue;       // value index of params[k]
  std::unordered_map<std::string, size_t> paramByName;
  std::vector<uint8_t *> ptr;           // per value; null for input-rooted
  /// Per caller input, where the steps read it: the caller's data on a
  /// host-accessible device, else a device copy (staged[k], made at load).
  std::vector<const void *> bound;
  std::vector<DeviceBuffer> staged;
  std::vector<Step> steps;
  /// The steps whose kernels begin each run (Kernel::beginRun): a
  /// pipeline's receives, which post themselves.
  std::vector<size_t> beginSteps;
  ExecContext ctx;

  bool profile = false;
  uint64_t profiledRuns = 0;
  /// Program::captureGradients: where the next run puts the gradients.
  std::map<std::string, HostTensor> *gradientCapture = nullptr;
  std::vector<double> stepSeconds;
  /// Each step's trace arguments (node, shapes, bytes, FLOPs), made on first
  /// use.
  std::vector<std::shared_ptr<const TraceArgs>> stepArgs;
  const std::shared_ptr<const TraceArgs> &traceArgs(size_t s);
  /// Each step's label in `labelsOf` (interned when tracing starts).
  std::vector<TraceLabel> stepLabels;
  const TraceRecorder *labelsOf = nullptr;
  void internLabels(TraceRecorder &trace);
  /// The bytes step `s` reads and writes.
  uint64_t stepBytes(size_t s) const;

  ~ProgramImpl();
  void build(const KernelRegistry &registry);
  void run(const std::vector<const HostTensor *> &inputs,
           std::vector<HostTensor> &outputs);
  std::string checkInputs(const std::vector<const HostTensor *> &inputs) const;
  std::string findNonFinite(const std::vector<const HostTensor *> &inputs);

private:
  /// Checks the inputs and points the steps that read them at their data.
  void bindInputs(const std::vector<const HostTensor *> &inputs);
  /// Rethrows the exception in flight as an Error naming step `s`.
  [[noreturn]] void failAtStep(size_t s) const;

public:

private:
  /// The bound data of the input value `value` is rooted at.
  const void *inputPtr(int64_t value) const {
    return bound[plan.values[plan.values[value].root].index];
  }
};

uint64_t ProgramImpl::stepBytes(size_t s) const {
  uint64_t bytes = 0;
  for (int64_t v : plan.steps[s].inputs)
    if (v >= 0)
      bytes += plan.values[v].desc.bytes();
  for (int64_t v : plan.steps[s].outputs)
    bytes += plan.values[v].desc.bytes();
  return bytes;
}

const std::shared_ptr<const TraceArgs> &ProgramImpl::traceArgs(size_t s) {
  if (stepArgs.size() != steps.size())
    stepArgs.assign(steps.size(), nullptr);
  std::shared_ptr<const TraceArgs> &made = stepArgs[s];
  if (made)
    return made;
  const PlanStep &ps = plan.steps[s];
  std::string shapes;
  for (size_t k = 0; k < ps.inputs.size(); ++k) {
    shapes += k ? ", " : "";
    shapes += ps.inputs[k] < 0 ? "-" : plan.values[ps.inputs[k]].desc.str();
  }
  shapes += " -> ";
  for (size_t k = 0; k < ps.outputs.size(); ++k)
    shapes += (k ? ", " : "") + plan.values[ps.outputs[k]].desc.str();
  TraceArgs args = {{"node", ps.loc},
                    {"plan_step", std::to_string(s)},
                    {"shapes", shapes},
                    {"bytes", std::to_string(stepBytes(s))}};
  if (ps.flops)
    args.push_back({"flops", std::to_string(ps.flops)});
  made = std::make_shared<const TraceArgs>(std::move(args));
  return made;
}

void ProgramImpl::internLabels(TraceRecorder &trace) {
  if (labelsOf == &trace && stepLabels.size() == steps.size())
    return;
  stepLabels.resize(steps.size());
  for (size_t s = 0; s < steps.size(); ++s)
    stepLabels[s] = trace.label(plan.steps[s].kernel, "kernel", traceArgs(s));
  labelsOf = &trace;
}

ProgramImpl::~ProgramImpl() {
  if (!profile || steps.empty())
    return;
  // KILN_PROFILE: the table kiln-train --profile prints, over every run.
  std::map<std::string, KernelStat> byKernel;
  double totalMs = 0, runs = (double)profiledRuns;
  for (size_t s = 0; s < steps.size(); ++s) {
    KernelStat &k = byKernel[plan.steps[s].kernel];
    k.name = plan.steps[s].kernel;
    k.ms += stepSeconds[s] * 1e3;
    k.calls += runs;
    k.flops += (double)plan.steps[s].flops * runs;
    k.bytes += (double)stepBytes(s) * runs;
    totalMs += stepSeconds[s] * 1e3;
  }
  std::vector<KernelStat> stats;
  for (auto &[name, k] : byKernel)
    stats.push_back(k);
  std::fprintf(stderr, "kiln profile: %llu runs, %.3f ms in kernels\n",
               (unsigned long long)profiledRuns, totalMs);
  for (const std::string &row : kernelTable(std::move(stats), totalMs, 15))
    std::fprintf(stderr, "  %s\n", row.c_str());
}

void ProgramImpl::build(const KernelRegistry &registry) {
  const size_t alignment = std::max<size_t>(64, plan.alignment);
  Allocator &alloc = device->allocator();
  stream = &device->defaultStream();
  ctx.device = device.get();
  ctx.stream = stream;
  ctx.allocator = &alloc;
  blob = DeviceBuffer(alloc, plan.blob.size(), 64);
  if (!plan.blob.empty())
    device->copyToDevice(blob.data(), plan.blob.data(), plan.blob.size(),
                         *stream);
  std::string().swap(plan.blob);
  arena = DeviceBuffer(alloc, plan.arenaBytes, alignment);

  ptr.assign(plan.values.size(), nullptr);
  for (size_t i = 0; i < plan.values.size(); ++i) {
    const PlanValue &v = plan.values[i];
    switch (v.kind) {
    case ValueKind::Input:
      break;
    case ValueKind::Param: {
      // Whole 64-byte lines, never empty, as the host tensors that held
      // parameters before the device seam were.
      Param p{v.desc,
              DeviceBuffer(alloc, std::max<size_t>(64, (v.bytes + 63) / 64 * 64), 64)};
      if (v.bytes)
        device->copyOnDevice(p.buf.data(), blob.data() + v.dataOffset, v.bytes,
                             *stream);
      paramByName.emplace(v.name, params.size());
      paramValue.push_back(i);
      ptr[i] = p.buf.data();
      params.push_back(std::move(p));
      break;
    }
    case ValueKind::Constant:
      ptr[i] = blob.data() + v.dataOffset;
      break;
    case ValueKind::Arena:
      ptr[i] = arena.data() + v.offset;
      break;
    case ValueKind::View:
      ptr[i] = ptr[v.source];
      break;
    }
  }
  for (int64_t idx : plan.inputs) {
    inputDescs.push_back(plan.values[idx].desc);
    const std::string &name = plan.values[idx].name;
    inputNames.push_back(name.empty() ? "input_" + std::to_string(inputNames.size())
                                      : name);
  }
  for (int64_t idx : plan.outputs)
    outputDescs.push_back(plan.values[idx].desc);
  bound.assign(plan.inputs.size(), nullptr);
  if (!device->hostAccessible())
    for (int64_t idx : plan.inputs)
      staged.emplace_back(alloc, plan.values[idx].desc.bytes(), alignment);

  steps.resize(plan.steps.size());
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const PlanStep &ps = plan.steps[s];
    const KernelFactory *factory = registry.find(ps.kernel);
    if (!factory)
      throw Error(detail::stepLabel(s, ps) + ": no " +
                  (device->kind() == DeviceKind::Cpu ? "CPU" : "CUDA") +
                  " kernel '" + ps.kernel + "'");
    KernelSpec spec;
    spec.kernel = ps.kernel;
    spec.loc = ps.loc;
    spec.attrs = Attrs(ps.attrs);
    Step &st = steps[s];
    for (size_t k = 0; k < ps.inputs.size(); ++k) {
      int64_t idx = ps.inputs[k];
      spec.inputs.push_back(idx < 0 ? nullptr : &plan.values[idx].desc);
      st.in.push_back(idx < 0 ? nullptr : ptr[idx]);
      if (idx >= 0 && plan.values[plan.values[idx].root].kind == ValueKind::Input)
        st.inputSlots.emplace_back(
            k, (size_t)plan.values[plan.values[idx].root].index);
    }
    for (int64_t idx : ps.outputs) {
      spec.outputs.push_back(&plan.values[idx].desc);
      st.out.push_back(ptr[idx]);
    }
    try {
      st.kernel = (*factory)(spec);
    } catch (const Error &e) {
      throw Error(detail::stepLabel(s, ps) + ": " + oneLine(e.what()));
    } catch (const std::bad_alloc &) {
      throw Error(detail::stepLabel(s, ps) + ": out of memory");
    } catch (const std::exception &e) {
      throw Error(detail::stepLabel(s, ps) + ": " + oneLine(e.what()));
    }
    if (!st.kernel)
      throw Error(detail::stepLabel(s, ps) + ": the kernel factory made no kernel");
  }
  for (size_t s = 0; s < plan.steps.size(); ++s)
    if (plan.steps[s].kernel == "recv")
      beginSteps.push_back(s);
  profile = profilingRequested();
  if (profile)
    stepSeconds.assign(steps.size(), 0.0);
}

std::string
ProgramImpl::checkInputs(const std::vector<const HostTensor *> &inputs) const {
  if (inputs.size() != inputDescs.size())
    return "expected " + std::to_string(inputDescs.size()) + " input" +
           (inputDescs.size() == 1 ? "" : "s") + ", got " +
           std::to_string(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k])
      return "input '" + inputNames[k] + "' is missing";
    if (inputs[k]->desc() != inputDescs[k])
      return "input '" + inputNames[k] + "' has type " + inputs[k]->desc().str() +
             ", the model expects " + inputDescs[k].str();
    if (!inputs[k]->data())
      return "input '" + inputNames[k] + "' has no data";
  }
  return "";
}

void ProgramImpl::run(const std::vector<const HostTensor *> &inputs,
                      std::vector<HostTensor> &outputs) {
  bindInputs(inputs);
  size_t s = 0;
  if (ctx.collectives) {
    for (size_t b : beginSteps) {
      try {
        steps[b].kernel->beginRun(ctx);
      } catch (const std::exception &e) {
        throw Error(detail::stepLabel(b, plan.steps[b]) + ": " + oneLine(e.what()));
      }
    }
  }
  std::map<std::string, HostTensor> *capture = gradientCapture;
  gradientCapture = nullptr;
  try {
    if (capture) {
      // Before an optimizer update runs, the gradient it reads (operand 1),
      // keyed by the parameter it updates (operand 0's root). A traced run
      // (a profiled step that also writes histograms) still traces.
      TraceRecorder *trace =
          ctx.trace && ctx.trace->enabled() ? ctx.trace : nullptr;
      if (trace)
        internLabels(*trace);
      for (; s < steps.size(); ++s) {
        const PlanStep &ps = plan.steps[s];
        size_t n = ps.kernel.size();
        if (n > 7 && ps.kernel.compare(n - 7, 7, "_update") == 0 &&
            ps.inputs.size() >= 2 && ps.inputs[0] >= 0 && ps.inputs[1] >= 0) {
          const PlanValue &p = plan.values[plan.values[ps.inputs[0]].root];
          const PlanValue &g = plan.values[ps.inputs[1]];
          if (p.kind == ValueKind::Param) {
            HostTensor t(g.desc);
            if (g.bytes)
              device->copyToHost(t.data(), steps[s].in[1], g.bytes, *stream);
            (*capture)[p.name] = std::move(t);
          }
        }
        auto t0 = TraceRecorder::Clock::now();
        steps[s].kernel->run(ctx, steps[s].in.data(), steps[s].out.data());
        if (trace) {
          stream->synchronize();
          trace->record(stepLabels[s], TraceThread::Compute, t0,
                        TraceRecorder::Clock::now());
        }
      }
    } else if (ctx.trace && ctx.trace->enabled()) {
      TraceRecorder &trace = *ctx.trace;
      internLabels(trace);
      for (; s < steps.size(); ++s) {
        auto t0 = TraceRecorder::Clock::now();
        steps[s].kernel->run(ctx, steps[s].in.data(), steps[s].out.data());
        stream->synchronize(); // a device kernel has only been issued
        trace.record(stepLabels[s], TraceThread::Compute, t0,
                     TraceRecorder::Clock::now());
      }
    } else if (profile) {
      for (; s < steps.size(); ++s) {
        auto t0 = std::chrono::steady_clock::now();
        steps[s].kernel->run(ctx, steps[s].in.data(), steps[s].out.data());
        stream->synchronize(); // a device kernel has only been issued
        stepSeconds[s] += std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - t0)
                              .count();
      }
      ++profiledRuns;
    } else {
      for (; s < steps.size(); ++s)
        steps[s].kernel->run(ctx, steps[s].in.data(), steps[s].out.data());
    }
  } catch (...) {
    failAtStep(s);
  }
  std::vector<HostTensor> result;
  result.reserve(plan.outputs.size());
  for (int64_t idx : plan.outputs) {
    const PlanValue &v = plan.values[idx];
    HostTensor t(v.desc);
    const void *src = ptr[idx] ? ptr[idx] : inputPtr(idx);
    if (v.bytes)
      device->copyToHost(t.data(), src, v.bytes, *stream);
    result.push_back(std::move(t));
  }
  outputs = std::move(result);
}

void ProgramImpl::bindInputs(const std::vector<const HostTensor *> &inputs) {
  std::string bad = checkInputs(inputs);
  if (!bad.empty())
    throw Error(bad);
  if (device->hostAccessible()) {
    for (size_t k = 0; k < inputs.size(); ++k)
      bound[k] = inputs[k]->data();
  } else {
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k]->bytes())
        device->copyToDevice(staged[k].data(), inputs[k]->data(),
                             inputs[k]->bytes(), *stream);
      bound[k] = staged[k].data();
    }
  }
  for (Step &st : steps)
    for (auto [pos, k] : st.inputSlots)
      st.in[pos] = bound[k];
}

void ProgramImpl::failAtStep(size_t s) const {
  std::string label = detail::stepLabel(s, plan.steps[s]);
  try {
    throw;
  } catch (const std::bad_alloc &) {
    throw Error(label + ": out of memory");
  } catch (const std::exception &e) {
    throw Error(label + ": " + oneLine(e.what()));
  }
}

namespace {

/// True when `bytes` of `dtype` hold a NaN or an infinity (floats only).
bool hasNonFinite(DType dtype, const void *data, size_t bytes) {
  switch (dtype) {
  case DType::F32: {
    const uint32_t *p = static_cast<const uint32_t *>(data);
    for (size_t i = 0, n = bytes / 4; i < n; ++i)
      if ((p[i] & 0x7f800000u) == 0x7f800000u)
        return true;
    return false;
  }
  case DType::F64: {
    const uint64_t *p = static_cast<const uint64_t *>(data);
    for (size_t i = 0, n = bytes / 8; i < n; ++i)
      if ((p[i] & 0x7ff0000000000000ull) == 0x7ff0000000000000ull)
        return true;
    return false;
  }
  case DType::F16:
  case DType::BF16: {
    uint16_t mask = dtype == DType::F16 ? 0x7c00 : 0x7f80;
    const uint16_t *p = static_cast<const uint16_t *>(data);
    for (size_t i = 0, n = bytes / 2; i < n; ++i)
      if ((p[i] & mask) == mask)
        return true;
    return false;
  }
  default:
    return false;
  }
}

} // namespace

std::string
ProgramImpl::findNonFinite(const std::vector<const HostTensor *> &inputs) {
  bindInputs(inputs);
  // The steps write into the parameters (optimizer updates): keep their
  // values and put them back however the run ends.
  std::vector<DeviceBuffer> saved;
  saved.reserve(params.size());
  for (const Param &p : params) {
    saved.emplace_back(device->allocator(), p.desc.bytes(), 64);
    if (p.desc.bytes())
      device->copyOnDevice(saved.back().data(), p.buf.data(), p.desc.bytes(),
                           *stream);
  }
  struct Restore {
    ProgramImpl &impl;
    std::vector<DeviceBuffer> &from;
    ~Restore() {
      for (size_t k = 0; k < from.size(); ++k)
        if (from[k].size())
          impl.device->copyOnDevice(impl.params[k].buf.data(), from[k].data(),
                                    from[k].size(), *impl.stream);
    }
  } restore{*this, saved};

  // A non-finite value fed in is the data's fault, not an op's.
  for (size_t k = 0; k < inputs.size(); ++k)
    if (isFloat(inputs[k]->dtype()) &&
        hasNonFinite(inputs[k]->dtype(), inputs[k]->data(), inputs[k]->bytes()))
      return "input '" + inputNames[k] + "'";
  std::vector<uint8_t> host; // a device's output, copied to look at
  for (size_t s = 0; s < steps.size(); ++s) {
    try {
      steps[s].kernel->run(ctx, steps[s].in.data(), steps[s].out.data());
    } catch (...) {
      failAtStep(s);
    }
    const PlanStep &ps = plan.steps[s];
    // A bucket in flight is the communicator's until its wait: not a value
    // yet (the wait's outputs are checked).
    if (ps.kernel == "all_reduce_start")
      continue;
    for (size_t k = 0; k < ps.outputs.size(); ++k) {
      const PlanValue &v = plan.values[ps.outputs[k]];
      if (!isFloat(v.desc.dtype) || !steps[s].out[k])
        continue;
      const void *data = steps[s].out[k];
      if (!device->hostAccessible()) {
        host.resize(v.bytes);
        device->copyToHost(host.data(), data, v.bytes, *stream);
        data = host.data();
      } else {
        stream->synchronize();
      }
      if (hasNonFinite(v.desc.dtype, data, v.bytes))
        return detail::stepLabel(s, ps);
    }
  }
  return "";
}

//===----------------------------------------------------------------------===//
// Program
//===----------------------------------------------------------------------===//

Program::Program() : impl_(std::make_unique<ProgramImpl>()) {}
Program::~Program() = default;

std::unique_ptr<Program> Program::load(const void *data, size_t size,
                                       std::string &err) noexcept {
  return load(data, size, err, nullptr);
}

std::unique_ptr<Program> Program::load(const void *data, size_t size,
                                       std::string &err,
                                       const KernelRegistry *registry) noexcept {
  LoadOptions opts;
  opts.registry = registry;
  return load(data, size, err, opts);
}

std::unique_ptr<Program> Program::load(const void *data, size_t size,
                                       std::string &err,
                                       const LoadOptions &opts) noexcept {
  try {
    std::shared_ptr<Device> device = opts.deviceObject;
    if (!device && !(device = openDevice(opts.device, err)))
      return nullptr;
    std::unique_ptr<Program> p(new Program());
    detail::parsePlan(data, size, p->impl_->plan);
    p->impl_->device = device;
    p->impl_->build(opts.registry ? *opts.registry : device->kernels());
    err.clear();
    return p;
  } catch (const Error &e) {
    err = oneLine(e.what());
  } catch (const std::bad_alloc &) {
    err = "out of memory loading the plan";
  } catch (const std::exception &e) {
    err = oneLine(e.what());
  } catch (...) {
    err = "unknown error loading the plan";
  }
  return nullptr;
}

std::unique_ptr<Program> Program::loadFile(const std::string &path,
                                           std::string &err) noexcept {
  return loadFile(path, err, nullptr);
}

std::unique_ptr<Program> Program::loadFile(const std::string &path,
                                           std::string &err,
                                           const KernelRegistry *registry) noexcept {
  LoadOptions opts;
  opts.registry = registry;
  return loadFile(path, err, opts);
}

std::unique_ptr<Program> Program::loadFile(const std::string &path,
                                           std::string &err,
                                           const LoadOptions &opts) noexcept {
  try {
    std::string bytes;
    if (!readWholeFile(path, bytes, err))
      return nullptr;
    auto p = load(bytes.data(), bytes.size(), err, opts);
    if (!p)
      err = path + ": " + err;
    return p;
  } catch (const std::bad_alloc &) {
    err = path + ": out of memory";
  } catch (...) {
    err = path + ": cannot read";
  }
  return nullptr;
}

const std::vector<TensorDesc> &Program::inputDescs() const {
  return impl_->inputDescs;
}
const std::vector<std::string> &Program::inputNames() const {
  return impl_->inputNames;
}
const std::vector<TensorDesc> &Program::outputDescs() const {
  return impl_->outputDescs;
}
const std::vector<std::string> &Program::outputNames() const {
  return impl_->plan.outputNames;
}
size_t Program::arenaBytes() const { return impl_->plan.arenaBytes; }
size_t Program::numSteps() const { return impl_->steps.size(); }
std::string Program::deviceName() const { return impl_->device->name(); }

bool Program::run(const std::vector<const HostTensor *> &inputs,
                  std::vector<HostTensor> &outputs, std::string &err) noexcept {
  try {
    impl_->run(inputs, outputs);
    err.clear();
    return true;
  } catch (const Error &e) {
    err = oneLine(e.what());
  } catch (const std::bad_alloc &) {
    err = "out of memory running the plan";
  } catch (const std::exception &e) {
    err = oneLine(e.what());
  } catch (...) {
    err = "unknown error running the plan";
  }
  return false;
}

std::string
Program::checkInputs(const std::vector<const HostTensor *> &inputs) const {
  try {
    return impl_->checkInputs(inputs);
  } catch (...) {
    return "out of memory checking the inputs";
  }
}

std::vector<std::string> Program::paramNames() const {
  std::vector<std::string> out;
  for (size_t idx : impl_->paramValue)
    out.push_back(impl_->plan.values[idx].name);
  return out;
}

bool Program::getParamDesc(const std::string &name, TensorDesc &desc) const {
  auto it = impl_->paramByName.find(name);
  if (it == impl_->paramByName.end())
    return false;
  desc = impl_->params[it->second].desc;
  return true;
}

bool Program::getParam(const std::string &name, HostTensor &out,
                       std::string &err) const noexcept {
  try {
    auto it = impl_->paramByName.find(name);
    if (it == impl_->paramByName.end()) {
      err = "the model has no parameter '" + name + "'";
      return false;
    }
    const ProgramImpl::Param &p = impl_->params[it->second];
    HostTensor t(p.desc);
    if (p.desc.bytes())
      impl_->device->copyToHost(t.data(), p.buf.data(), p.desc.bytes(),
                                *impl_->stream);
    out = std::move(t);
    err.clear();
    return true;
  } catch (...) {
    err = "out of memory reading parameter '" + name + "'";
  }
  return false;
}

bool Program::setParam(const std::string &name, const HostTensor &value,
                       std::string &err) noexcept {
  try {
    auto it = impl_->paramByName.find(name);
    if (it == impl_->paramByName.end()) {
      err = "the model has no parameter '" + name + "'";
      return false;
    }
    ProgramImpl::Param &p = impl_->params[it->second];
    if (value.desc() != p.desc) {
      err = "parameter '" + name + "' has type " + p.desc.str() +
            ", the value has type " + value.desc().str();
      return false;
    }
    if (p.desc.bytes()) {
      if (!value.data()) {
        err = "the value for parameter '" + name + "' has no data";
        return false;
      }
      impl_->device->copyToDevice(p.buf.data(), value.data(), p.desc.bytes(),
                                  *impl_->stream);
    }
    err.clear();
    return true;
  } catch (...) {
    err = "out of memory setting parameter '" + name + "'";
  }
  return false;
}

std::string Program::paramRole(const std::string &name) const {
  auto it = impl_->paramByName.find(name);
  if (it == impl_->paramByName.end())
    return "";
  const std::string &role =
      impl_->plan.values[impl_->paramValue[it->second]].role;
  return role.empty() ? "weight" : role;
}

bool Program::findNonFinite(const std::vector<const HostTensor *> &inputs,
                            std::string &where, std::string &err) noexcept {
  where.clear();
  try {
    where = impl_->findNonFinite(inputs);
    err.clear();
    return true;
  } catch (const Error &e) {
    err = oneLine(e.what());
  } catch (const std::bad_alloc &) {
    err = "out of memory looking for non-finite values";
  } catch (const std::exception &e) {
    err = oneLine(e.what());
  } catch (...) {
    err = "unknown error looking for non-finite values";
  }
  where.clear();
  return false;
}

void Program::setSeed(uint64_t seed) { impl_->ctx.seed = seed; }
void Program::setStep(uint64_t step) { impl_->ctx.step = step; }
void Program::setCollectives(Collectives *c) { impl_->ctx.collectives = c; }
void Program::setTrace(TraceRecorder *trace) {
  impl_->ctx.trace = trace;
  // The labels are made now, not inside the first traced step.
  if (trace && !impl_->steps.empty())
    impl_->internLabels(*trace);
}
void Program::captureGradients(std::map<std::string, HostTensor> *out) {
  impl_->gradientCapture = out;
}
void Program::setBatchShard(int64_t index, int64_t count) {
  impl_->ctx.batchShardIndex = index;
  impl_->ctx.batchShardCount = count;
  // Parameters split over the ranks start from this rank's block.
  for (size_t k = 0; k < impl_->params.size(); ++k) {
    const PlanValue &v = impl_->plan.values[impl_->paramValue[k]];
    if (v.blocks == 1 || !v.blockAxes.empty())
      continue;
    if (v.blocks != count || index < 0 || index >= count)
      throw Error("parameter '" + v.name + "' is split into " +
                  std::to_string(v.blocks) + " blocks, but this is rank " +
                  std::to_string(index) + " of " + std::to_string(count));
    if (v.bytes)
      impl_->device->copyOnDevice(impl_->params[k].buf.data(),
                                  impl_->blob.data() + v.dataOffset +
                                      (uint64_t)index * v.bytes,
                                  v.bytes, *impl_->stream);
  }
  impl_->stream->synchronize();
}
void Program::setMeshPosition(const std::vector<MeshAxisPosition> &position) {
  for (size_t k = 0; k < impl_->params.size(); ++k) {
    const PlanValue &v = impl_->plan.values[impl_->paramValue[k]];
    if (v.blockAxes.empty())
      continue;
    int64_t block = 0, count = 1;
    for (const std::string &a : v.blockAxes) {
      const MeshAxisPosition *p = nullptr;
      for (const MeshAxisPosition &q : position)
        if (q.axis == a)
          p = &q;
      if (!p || p->size < 1 || p->index < 0 || p->index >= p->size)
        throw Error("parameter '" + v.name + "' is split over mesh axis '" + a +
                    "', which this run's mesh does not have");
      block = block * p->size + p->index;
      count *= p->size;
    }
    if (count != v.blocks)
      throw Error("parameter '" + v.name + "' is split into " +
                  std::to_string(v.blocks) + " blocks, but this run's mesh "
                  "gives it " + std::to_string(count));
    if (v.bytes)
      impl_->device->copyOnDevice(impl_->params[k].buf.data(),
                                  impl_->blob.data() + v.dataOffset +
                                      (uint64_t)block * v.bytes,
                                  v.bytes, *impl_->stream);
  }
  impl_->stream->synchronize();
}
uint64_t Program::seed() const { return impl_->ctx.seed; }
uint64_t Program::step() const { return impl_->ctx.step; }

} // namespace kiln::rt
