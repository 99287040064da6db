//===- ExportPlan.h - krt to the runtime's plan format ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Serialises a function in krt form, with its buffers assigned, as a plan
// (docs/PlanFormat.md, version 1) that the runtime loads without MLIR.
//===----------------------------------------------------------------------===//
#ifndef KILN_TARGET_PLAN_EXPORTPLAN_H
#define KILN_TARGET_PLAN_EXPORTPLAN_H

#include "kiln/runtime/PlanFile.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <string>

namespace kiln {

/// The plan format version this compiler writes (the runtime's constant).
using rt::kPlanFormatVersion;

/// The largest constant the plan writer materialises, in bytes (2 GiB, the
/// most a serialized ONNX model can hold inline). A constant's bytes are
/// stored in the plan's data blob, element by element even for a splat
/// (ConstantOfShape), so a constant above this is refused with its node and
/// size rather than built in memory (docs/PlanFormat.md).
constexpr int64_t kMaxPlanConstantBytes = int64_t(1) << 31;

/// Parameter values by their `onnx.name`, as raw little-endian bytes.
using ParamData = std::map<std::string, std::string>;

/// Writes function `funcName` of `module` as a plan into `out`. Parameters
/// (arguments marked `kiln.param`) take their values from `params`. Emits an
/// error at the offending op and fails on anything the format cannot hold.
mlir::LogicalResult exportPlan(mlir::ModuleOp module, llvm::StringRef funcName,
                               const ParamData &params, std::string &out);

/// Registers `--export-plan` (reads parameter values from the ONNX model the
/// module's `kiln.weights` names).
void registerPlanExportTranslation();

} // namespace kiln

#endif // KILN_TARGET_PLAN_EXPORTPLAN_H
