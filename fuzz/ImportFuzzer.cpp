//===- ImportFuzzer.cpp - libFuzzer target for the ONNX import ---*- C++
//-*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Feeds arbitrary bytes through parsing, validation, shape inference and the
// import into the onnx dialect, then verifies and prints the module. Any crash,
// sanitizer report or failed verification of an imported module is a bug:
// errors must be diagnostics, never aborts.
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/ONNX/IR/ONNXOps.h"
#include "kiln/Target/ONNX/Import.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace {
/// An empty folder that stands for the model's folder: external data
/// locations resolve against it (and find nothing there).
const std::string &modelPath() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/kiln-import-fuzzer-XXXXXX";
    const char *dir = ::mkdtemp(tmpl);
    return std::string(dir ? dir : "/tmp") + "/fuzz.onnx";
  }();
  return path;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // A fresh context per input: attributes are uniqued in the context and
  // would otherwise accumulate for the whole run.
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  ctx.loadDialect<kiln::onnx::ONNXDialect, mlir::func::FuncDialect>();
  unsigned errors = 0;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &diag) {
    if (diag.getSeverity() == mlir::DiagnosticSeverity::Error)
      ++errors;
    return mlir::success();
  });
  kiln::ImportOptions opts;
  opts.batchSize = 2;
  mlir::OwningOpRef<mlir::ModuleOp> module = kiln::importONNXFromBuffer(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), modelPath(),
      ctx, opts);
  if (!module) {
    if (errors != 1)
      std::abort(); // A failed import must say why, exactly once.
    return 0;
  }
  if (errors != 0 || mlir::failed(mlir::verify(*module)))
    std::abort();
  module->print(llvm::nulls());
  return 0;
}
