//===- PlanInternal.h - a parsed, checked plan ------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// What Plan.cpp makes of a plan's bytes and Executor.cpp builds a Program
// from. Internal to runtime/core.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_CORE_PLANINTERNAL_H
#define KILN_RUNTIME_CORE_PLANINTERNAL_H

#include "kiln/runtime/Kernel.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::rt::detail {

enum class ValueKind { Input, Param, Constant, Arena, View };

struct PlanValue {
  TensorDesc desc;
  ValueKind kind = ValueKind::Arena;
  size_t bytes = 0;
  std::string name;     // input, param (may be empty for others)
  std::string role;     // param: weight|state|frozen|optimizer ("" = weight)
  int64_t index = -1;   // input: the caller's input position
  uint64_t dataOffset = 0; // param, constant: into the blob
  /// param: the blob holds this many consecutive values of `bytes` each,
  /// one per rank of a mesh that splits the parameter (ZeRO-3); block 0
  /// until Program::setBatchShard picks this rank's.
  int64_t blocks = 1;
  /// With blocks > 1: the mesh axes whose positions pick the block (tensor
  /// parallelism; linearised in this order, the last fastest); empty: the
  /// batch shard's index (ZeRO-3, Program::setBatchShard).
  std::vector<std::string> blockAxes;
  uint64_t offset = 0;  // arena: into the arena
  int64_t source = -1;  // view: the viewed value
  int64_t root = -1;    // the non-view value whose bytes this is (self if none)
};

struct PlanStep {
  std::string kernel;
  std::string loc;
  /// The op's floating-point work (0: not given).
  uint64_t flops = 0;
  std::vector<int64_t> inputs; // -1: an absent optional operand
  std::vector<int64_t> outputs;
  /// Into ParsedPlan::header (never copied: a deep tree would recurse); null
  /// when the step has none.
  const nlohmann::json *attrs = nullptr;
};

struct ParsedPlan {
  nlohmann::json header;
  std::string function;
  uint64_t alignment = 64;
  uint64_t arenaBytes = 0;
  std::vector<PlanValue> values;
  std::vector<int64_t> inputs;  // value indices in call order
  std::vector<int64_t> outputs; // value indices
  std::vector<std::string> outputNames;
  std::vector<PlanStep> steps;
  std::string blob; // a copy of the data blob
};

/// Parses the container and header and checks everything that does not need
/// the kernels; throws Error with a one-line message.
void parsePlan(const void *data, size_t size, ParsedPlan &out);

/// "step 3 ('add' at /Add_1)" (no " at ..." when the location is empty).
std::string stepLabel(size_t index, const PlanStep &step);

} // namespace kiln::rt::detail

#endif // KILN_RUNTIME_CORE_PLANINTERNAL_H
