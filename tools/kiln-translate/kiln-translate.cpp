//===- kiln-translate.cpp - Kiln translation driver -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// mlir-translate with Kiln's translations: `--import-onnx model.onnx` prints
// the model in the onnx dialect.
//===----------------------------------------------------------------------===//

#include "kiln/InitAllDialects.h"
#include "kiln/Target/ONNX/Import.h"
#include "kiln/Target/Plan/ExportPlan.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

int main(int argc, char **argv) {
  kiln::registerONNXImportTranslation();
  kiln::registerPlanExportTranslation();
  // Round trip of the textual form, with every Kiln dialect loaded.
  mlir::TranslateFromMLIRRegistration roundTrip(
      "mlir-round-trip", "Parse and print the input module (Kiln dialects)",
      [](mlir::Operation *op, llvm::raw_ostream &os) {
        op->print(os);
        return mlir::success();
      },
      [](mlir::DialectRegistry &registry) {
        kiln::registerAllDialects(registry);
      });
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "Kiln translation tool"));
}
