//===- ONNXTestRunner.h - ONNX backend-test folders through Kiln -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Runs ONNX backend test folders (`model.onnx` + `test_data_set_*/input_*.pb,
// output_*.pb`) through Kiln's compiler and the CPU runtime, and compares the
// outputs as ONNX's backend runner does. `kiln-run --onnx-test` is a thin
// driver over runONNXTests; scripts/conformance.py parses its output, whose
// format CONTRACT.md fixes: `PASS name[: note]` or `FAIL name: reason` per
// folder, then `N passed, N failed`.
//===----------------------------------------------------------------------===//
#ifndef KILN_TOOLS_ONNXTESTRUNNER_H
#define KILN_TOOLS_ONNXTESTRUNNER_H

#include "kiln/Target/ONNX/Import.h"
#include "kiln/runtime/Runtime.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace kiln {

/// Compiles the ONNX model at `model` to a plan (compileONNXToPlan) and loads
/// it with the runtime. Null on failure, with `err` one line and `*stage` the
/// compile stage that failed ("import", "convert", ...) or "load". `planOut`
/// receives the plan bytes on success.
std::unique_ptr<rt::Program> compileToProgram(const std::string &model,
                                              const ImportOptions &opts,
                                              std::string &err,
                                              std::string *stage = nullptr,
                                              std::string *planOut = nullptr);

/// Runs one backend test folder in this process: "" on success, "=NOTE" on a
/// success to report with a note (inputs bound at compile time), else the
/// reason it failed ("unsupported op: ...", "error (stage): ...",
/// "wrong result: ...").
std::string runONNXTest(const std::string &dir);

/// runONNXTest in a child process, so that a crash or a hang (past
/// `timeoutSeconds`) fails this folder only.
std::string runONNXTestIsolated(const std::string &dir, int timeoutSeconds);

/// Runs every folder of `dirs` (each isolated, unless KILN_RUN_IN_PROCESS is
/// set), writes one PASS/FAIL line per folder and the summary line to `os`.
/// Returns 0 when every folder passed, else 1 (the tool's exit status).
int runONNXTests(llvm::ArrayRef<std::string> dirs, llvm::raw_ostream &os);

} // namespace kiln

#endif // KILN_TOOLS_ONNXTESTRUNNER_H
