//===- Runtime.h - the runtime's public, non-throwing API -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Loads a plan (docs/PlanFormat.md) and runs it. Callers may be built without
// exceptions (the MLIR tools are): nothing here throws; failures return false
// (or null) with a one-line message in `err`.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_RUNTIME_H
#define KILN_RUNTIME_RUNTIME_H

#include "kiln/runtime/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::rt {

/// The plan format version this runtime reads.
constexpr uint32_t kPlanVersion = 1;

class Collectives;
class TraceRecorder;
class Device;
class KernelRegistry;
class ProgramImpl;

/// Where and with what a plan is loaded.
struct LoadOptions {
  /// The device the program runs on: "cpu" (the default; also "cpu:0") or
  /// "cuda[:N]", refused with "... not built with CUDA support" until the
  /// runtime has a CUDA backend.
  std::string device = "cpu";
  /// A device object to use instead of naming one (Device.h; tests plug in
  /// backends this way). Shared: the program keeps it alive.
  std::shared_ptr<Device> deviceObject;
  /// The kernels; null: the device's own registry.
  const KernelRegistry *registry = nullptr;
};

/// A loaded plan: values, parameters (with their current values) and the
/// kernels of its steps, ready to run.
class Program {
public:
  ~Program();
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;

  /// Parses and checks a plan and builds its kernels. Null on error.
  static std::unique_ptr<Program> load(const void *data, size_t size,
                                       std::string &err) noexcept;
  /// As above, with the kernels of `registry` (null: KernelRegistry::cpu()).
  static std::unique_ptr<Program> load(const void *data, size_t size,
                                       std::string &err,
                                       const KernelRegistry *registry) noexcept;
  /// As above, on the device and with the kernels `opts` name.
  static std::unique_ptr<Program> load(const void *data, size_t size,
                                       std::string &err,
                                       const LoadOptions &opts) noexcept;
  /// Reads and loads a plan file; messages start with "PATH: ".
  static std::unique_ptr<Program> loadFile(const std::string &path,
                                           std::string &err) noexcept;
  static std::unique_ptr<Program> loadFile(const std::string &path,
                                           std::string &err,
                                           const KernelRegistry *registry) noexcept;
  static std::unique_ptr<Program> loadFile(const std::string &path,
                                           std::string &err,
                                           const LoadOptions &opts) noexcept;

  /// The device the program runs on: "cpu:0". Its arena, parameters and
  /// constants live there; run, getParam and setParam copy host tensors in
  /// and out through it (the CPU device reads inputs in place).
  std::string deviceName() const;

  const std::vector<TensorDesc> &inputDescs() const;
  const std::vector<std::string> &inputNames() const;
  const std::vector<TensorDesc> &outputDescs() const;
  const std::vector<std::string> &outputNames() const;
  /// Bytes of the arena one run uses.
  size_t arenaBytes() const;
  /// Number of steps (kernel calls) of one run.
  size_t numSteps() const;

  /// Runs the steps once. `inputs` match inputDescs() exactly (the caller
  /// checks with checkInputs for a message naming the input; run checks too);
  /// `outputs` is filled with fresh tensors. Inputs are read in place, not
  /// copied: they must stay alive and unchanged during the call.
  bool run(const std::vector<const HostTensor *> &inputs,
           std::vector<HostTensor> &outputs, std::string &err) noexcept;
  /// "input 'x' has type f32[2,3], the model expects f32[4,3]",
  /// "expected 2 inputs, got 1", or "" when they match.
  std::string checkInputs(const std::vector<const HostTensor *> &inputs) const;

  /// Parameters (kind `param`), in plan order. Their values persist across
  /// runs: steps may update them (training), setParam replaces them.
  std::vector<std::string> paramNames() const;
  /// The parameter's description; false for an unknown name.
  bool getParamDesc(const std::string &name, TensorDesc &desc) const;
  /// Copies the parameter's current value into a fresh tensor.
  bool getParam(const std::string &name, HostTensor &out,
                std::string &err) const noexcept;
  /// Copies `value` (whose desc must equal the parameter's) into it.
  bool setParam(const std::string &name, const HostTensor &value,
                std::string &err) noexcept;

  /// The parameter's role in a training plan: "weight" (trainable, also
  /// when the plan gives none), "state", "frozen" or "optimizer"; "" for an
  /// unknown name.
  std::string paramRole(const std::string &name) const;

  /// Runs the steps once like run, on a copy of the parameters' state (the
  /// parameters are unchanged afterwards), checking the floating outputs
  /// (f32, f64, f16, bf16) of every step for NaN and infinity. `where` is
  /// the first offender: "input NAME" when an input holds one, else
  /// "step N ('kernel' at LOC)"; "" when there is
  /// none. False (with `err`) when the inputs are wrong or a step fails.
  bool findNonFinite(const std::vector<const HostTensor *> &inputs,
                     std::string &where, std::string &err) noexcept;

  /// The run context kernels see (ExecContext): the random seed (dropout)
  /// and the training step. Both default to 0; they are not changed by run.
  void setSeed(uint64_t seed);
  void setStep(uint64_t step);
  /// The ranks the plan's collective kernels reduce over; null (the
  /// default) runs them as a single rank. Not owned; must outlive runs.
  void setCollectives(Collectives *collectives);
  /// This rank holds slice `index` of `count` of every batch along axis 0
  /// (ExecContext::batchShardIndex); 0 of 1 by default.
  void setBatchShard(int64_t index, int64_t count);
  /// This rank's position on the mesh: each axis's name, this rank's index
  /// on it and its size. Every parameter split over mesh axes (`block_axes`
  /// in the plan, tensor parallelism) starts from the block at this
  /// position; throws Error for an axis the position lacks or a block
  /// count that does not match.
  struct MeshAxisPosition {
    std::string axis;
    int64_t index = 0, size = 1;
  };
  void setMeshPosition(const std::vector<MeshAxisPosition> &position);
  /// Records every kernel a run executes while `trace` is enabled (its
  /// name, the ONNX node, the step index); null (the default) records
  /// nothing. Not owned; must outlive runs.
  void setTrace(TraceRecorder *trace);
  /// During the next run only (not traced): before each optimizer update
  /// step (a kernel named `*_update`) runs, copies the gradient it reads
  /// (operand 1) into `(*out)[P]`, P the parameter it updates (operand 0,
  /// or the parameter it views: with ZeRO, this rank's slice). Not owned;
  /// must outlive the run. kiln-train's gradient histograms.
  void captureGradients(std::map<std::string, HostTensor> *out);
  uint64_t seed() const;
  uint64_t step() const;

private:
  Program();
  std::unique_ptr<ProgramImpl> impl_;
};

/// Reads a `.npy` file or an ONNX TensorProto `.pb` file (by content).
bool readTensorFile(const std::string &path, HostTensor &out,
                    std::string &err) noexcept;
/// Reads a `.npy` or TensorProto from memory; `name` is used in messages.
bool readTensorBytes(const void *data, size_t size, const std::string &name,
                     HostTensor &out, std::string &err) noexcept;
/// Where a `.npy` image of `size` bytes keeps its data: the element type,
/// the shape and the byte range of the C-order elements, every header field
/// checked against `size`. Nothing is copied (the training data loader maps
/// its files and reads samples in place). False with `err` ("NAME: why").
struct NpyLayout {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  size_t dataOffset = 0;
  uint64_t dataBytes = 0;
};
bool parseNpy(const void *data, size_t size, const std::string &name,
              NpyLayout &out, std::string &err) noexcept;
/// Writes `.npy` (format 1.0, or 2.0 for a huge header; little-endian, C
/// order). bf16 has no numpy dtype and is refused. Atomic: PATH.tmp, fsync,
/// rename.
bool writeNpy(const std::string &path, const HostTensor &t,
              std::string &err) noexcept;
/// safetensors: https://github.com/huggingface/safetensors (format as of 0.4).
/// Tensors come back in the order of their data in the file.
bool readSafetensors(const std::string &path,
                     std::vector<std::pair<std::string, HostTensor>> &out,
                     std::string &err) noexcept;
/// As above, from memory; `name` is used in messages.
bool readSafetensorsBytes(const void *data, size_t size, const std::string &name,
                          std::vector<std::pair<std::string, HostTensor>> &out,
                          std::string &err) noexcept;
/// Atomic like writeNpy; tensors are stored in the given order.
bool writeSafetensors(const std::string &path,
                      const std::vector<std::pair<std::string, const HostTensor *>> &tensors,
                      std::string &err) noexcept;

} // namespace kiln::rt

#endif // KILN_RUNTIME_RUNTIME_H
