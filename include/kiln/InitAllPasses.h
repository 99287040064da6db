//===- InitAllPasses.h - every pass Kiln's tools offer ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_INITALLPASSES_H
#define KILN_INITALLPASSES_H

#include "kiln/Conversion/Passes.h"
#include "kiln/Dialect/Dist/Transforms/Passes.h"
#include "kiln/Dialect/KRT/Transforms/Passes.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

namespace kiln {
/// Registers Kiln's passes and the upstream ones its pipelines use.
inline void registerAllPasses() {
  registerKilnConversionPasses();
  krt::registerKRTPasses();
  dist::registerDistPasses();
  registerKilnTrainingPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
}
} // namespace kiln

#endif // KILN_INITALLPASSES_H
