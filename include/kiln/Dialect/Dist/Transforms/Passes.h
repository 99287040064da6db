//===- Passes.h - dist passes -----------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_DIST_TRANSFORMS_PASSES_H
#define KILN_DIALECT_DIST_TRANSFORMS_PASSES_H

#include "kiln/Dialect/Dist/IR/DistOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace kiln::dist {
#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "kiln/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace kiln::dist

#endif // KILN_DIALECT_DIST_TRANSFORMS_PASSES_H
