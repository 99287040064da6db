//===- Pipelines.h - Kiln's compilation pipelines ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The pass sequences the drivers run, and the one-call ONNX-to-plan
// compilation kiln-run uses.
//===----------------------------------------------------------------------===//
#ifndef KILN_PIPELINE_PIPELINES_H
#define KILN_PIPELINE_PIPELINES_H

#include "kiln/Target/ONNX/Import.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace kiln {

/// onnx dialect -> kiln -> canonicalized kiln: the graph Kiln optimises.
void buildONNXToKilnPipeline(mlir::OpPassManager &pm);
/// kiln -> krt with buffers assigned: what the plan writer serialises.
void buildKilnToRuntimePipeline(mlir::OpPassManager &pm);

/// What compileONNXToPlan reports.
struct CompileResult {
  std::string plan;    // the plan bytes (docs/PlanFormat.md)
  std::string error;   // one line when compilation failed
  std::string stage;   // "import", "convert", "lower", "plan" on failure
  int64_t arenaBytes = 0;
};

/// Imports the ONNX model at `path`, converts, lowers and writes @forward as
/// a plan. Never crashes on a bad model: failures come back in `error`.
bool compileONNXToPlan(const std::string &path, const ImportOptions &opts,
                       CompileResult &result);

} // namespace kiln

#endif // KILN_PIPELINE_PIPELINES_H
