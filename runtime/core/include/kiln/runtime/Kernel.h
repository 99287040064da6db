//===- Kernel.h - the kernel interface and registry -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// A kernel executes one plan step. At load time the registry's factory for the
// step's kernel name builds a Kernel from the step's operand and result types
// and attributes (checking them and precomputing whatever it can: strides,
// oneDNN primitives); at run time `run` gets the data pointers.
//
// Errors are thrown as kiln::rt::Error with a message that names the problem
// but not the step (the executor adds "step N (kernel at 'loc')"). Never throw
// out of an OpenMP parallel region: check first, or record and throw after.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_KERNEL_H
#define KILN_RUNTIME_KERNEL_H

#include "kiln/runtime/Collectives.h"
#include "kiln/runtime/Device.h"
#include "kiln/runtime/Tensor.h"
#include "kiln/runtime/Trace.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::manifest {
struct Kernel;
} // namespace kiln::manifest

namespace kiln::rt {

/// A runtime error (bad plan, bad input, a kernel's run-time check). Internal:
/// the public API (Runtime.h) catches it and returns the message.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Typed access to a step's attributes; a missing or mistyped attribute
/// throws an Error naming it. When it knows its kernel's manifest entry
/// (KernelManifest.h), reading an attribute the manifest does not declare for
/// the kernel, or reading one as another type than declared, throws an Error
/// naming the kernel and the attribute: the factories of manifest kernels get
/// such Attrs (KernelRegistry::add), so every kernel built, in a plan or in a
/// unit test, checks that it reads only its declared attributes.
class Attrs {
public:
  Attrs() = default;
  explicit Attrs(const nlohmann::json *json) : json_(json) {}
  /// The same attributes, checked against `kernel`'s declarations.
  Attrs checkedAgainst(const manifest::Kernel *kernel) const {
    Attrs a = *this;
    a.kernel_ = kernel;
    return a;
  }
  /// The manifest entry reads are checked against; null when unchecked.
  const manifest::Kernel *kernel() const { return kernel_; }

  bool has(const std::string &name) const;
  int64_t getInt(const std::string &name) const;
  int64_t getInt(const std::string &name, int64_t dflt) const;
  double getFloat(const std::string &name) const;
  double getFloat(const std::string &name, double dflt) const;
  bool getBool(const std::string &name, bool dflt) const;
  std::string getString(const std::string &name, const std::string &dflt) const;
  std::vector<int64_t> getInts(const std::string &name) const;
  /// A string array; `dflt` when absent.
  std::vector<std::string> getStrings(const std::string &name,
                                      const std::vector<std::string> &dflt) const;
  std::vector<int64_t> getInts(const std::string &name,
                               const std::vector<int64_t> &dflt) const;

private:
  enum class Read { Any, Int, Float, Bool, String, Ints, Strings };
  /// Throws unless the manifest declares `name`, of a type `read` accepts.
  void checkRead(const std::string &name, Read read) const;

  const nlohmann::json *json_ = nullptr;
  const manifest::Kernel *kernel_ = nullptr;
};

/// What a factory sees of a step.
struct KernelSpec {
  std::string kernel;                      // "matmul", "add", ...
  std::vector<const TensorDesc *> inputs;  // nullptr for an absent optional
  std::vector<const TensorDesc *> outputs;
  Attrs attrs;
  std::string loc; // the ONNX node, for messages
};

/// Per-run state kernels may read.
struct ExecContext {
  uint64_t seed = 0; // the run's random seed (dropout)
  uint64_t step = 0; // the training step (dropout), 0 for inference
  /// Where the kernel runs (its operands live in device->space()), the
  /// stream to issue its work on, and the allocator for scratch memory
  /// (workspaces). The executor sets them to its Program's device; the
  /// defaults are the CPU device, so a plain ExecContext runs on the host.
  Device *device = &cpuDevice();
  Stream *stream = &cpuDevice().defaultStream();
  Allocator *allocator = &cpuDevice().allocator();
  /// The ranks a collective kernel reduces over (Collectives.h); null for a
  /// single-rank program.
  Collectives *collectives = nullptr;
  /// This rank's slice of the global batch along axis 0 (data parallelism):
  /// shard `batchShardIndex` of `batchShardCount`. Kernels whose randomness
  /// is indexed by element (dropout) number elements in the whole batch, so
  /// N ranks draw the 1-rank run's masks.
  int64_t batchShardIndex = 0, batchShardCount = 1;
  /// Where the executor records each kernel it runs while the recorder is
  /// enabled (kiln-train --profile); null: nothing is recorded.
  TraceRecorder *trace = nullptr;
};

class Kernel {
public:
  virtual ~Kernel() = default;
  /// `in[i]` is null for an absent optional input. Outputs may alias inputs
  /// only where the compiler marked the kernel in-place-safe.
  virtual void run(ExecContext &ctx, const void *const *in,
                   void *const *out) = 0;
  /// Called before a run's first step for the kernels whose step asks for
  /// it (a pipeline's receives, which post themselves so that what a peer
  /// sends arrives while the steps before them compute).
  virtual void beginRun(ExecContext &ctx) { (void)ctx; }
};

using KernelFactory = std::function<std::unique_ptr<Kernel>(const KernelSpec &)>;

class KernelRegistry {
public:
  /// Registers `factory` under `name`. If the kernel manifest declares
  /// `name`, the factory sees Attrs checked against the declaration. Other
  /// names are accepted (tests register stand-ins), but the CPU registry
  /// refuses them (registerCpuKernels may add only manifest kernels and
  /// runtimeOnlyKernels()).
  void add(const std::string &name, KernelFactory factory);
  /// Null when no kernel has this name.
  const KernelFactory *find(const std::string &name) const;
  std::vector<std::string> names() const;
  /// The CPU kernels (registerCpuKernels, called once).
  static const KernelRegistry &cpu();

private:
  std::unordered_map<std::string, KernelFactory> factories_;
};

/// Adds every CPU kernel (runtime/cpu) to `r`.
void registerCpuKernels(KernelRegistry &r);

/// The kernels a target may register that the kernel manifest does not
/// declare (Registry.cpp says why each is there).
const std::vector<std::string> &runtimeOnlyKernels();

/// Throws an Error naming the first kernel of `r` that is neither in the
/// kernel manifest nor in runtimeOnlyKernels().
void checkRegistryAgainstManifest(const KernelRegistry &r);

/// Helpers for kernel factories.
/// Throws unless `spec` has exactly `nin` inputs (counting absent optionals)
/// and `nout` outputs.
void expectArity(const KernelSpec &spec, size_t nin, size_t nout);
/// "unsupported element type f16 for kernel 'conv'"-style error.
[[noreturn]] void unsupportedType(const KernelSpec &spec, DType t);

} // namespace kiln::rt

#endif // KILN_RUNTIME_KERNEL_H
