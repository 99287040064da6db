//===- kiln-opt.cpp - run Kiln and upstream passes on .mlir -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// mlir-opt for Kiln: parses the dialects Kiln uses and offers every Kiln pass
// and the upstream passes its pipelines rely on.
//===----------------------------------------------------------------------===//
#include "kiln/InitAllDialects.h"
#include "kiln/InitAllPasses.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/PrettyStackTrace.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  kiln::registerAllDialects(registry);
  kiln::registerAllPasses();
  llvm::setBugReportMsg("Kiln crashed: please file an issue with the input "
                        "above and the command line.\n");
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Kiln optimizer driver\n", registry));
}
