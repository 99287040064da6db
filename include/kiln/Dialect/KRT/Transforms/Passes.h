//===- Passes.h - krt passes ------------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KRT_TRANSFORMS_PASSES_H
#define KILN_DIALECT_KRT_TRANSFORMS_PASSES_H

#include "kiln/Dialect/KRT/IR/KRTOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace kiln::krt {
#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "kiln/Dialect/KRT/Transforms/Passes.h.inc"
} // namespace kiln::krt

#endif // KILN_DIALECT_KRT_TRANSFORMS_PASSES_H
