//===- PlanDType.h - MLIR element types to plan dtypes ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The compiler's one mapping between MLIR element types and the runtime's
// dtype table (kiln/runtime/DType.h, KILN_DTYPES). The plan writer and the
// training config writer both name dtypes through it, so a name is spelled
// only in the runtime's table.
//===----------------------------------------------------------------------===//
#ifndef KILN_TARGET_PLAN_PLANDTYPE_H
#define KILN_TARGET_PLAN_PLANDTYPE_H

#include "kiln/runtime/DType.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Types.h"

#include <optional>

namespace kiln {

/// The MLIR element type a plan dtype stands for: f32, bf16, signless iN for
/// the signed integers, uiN for the unsigned ones, i1 for Bool.
mlir::Type mlirElementType(rt::DType t, mlir::MLIRContext *ctx);

/// The plan dtype of an MLIR element type; nullopt when the plan has none.
/// Signed integers (siN) are written as the signless ones, and i1 of any
/// signedness as Bool.
std::optional<rt::DType> planDType(mlir::Type t);

} // namespace kiln

#endif // KILN_TARGET_PLAN_PLANDTYPE_H
