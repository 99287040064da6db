//===- Passes.h - Kiln conversion passes ------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_CONVERSION_PASSES_H
#define KILN_CONVERSION_PASSES_H

#include "kiln/Dialect/KRT/IR/KRTOps.h"
#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace kiln {
#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

#endif // KILN_CONVERSION_PASSES_H
