//===- KilnOps.h - kiln dialect ---------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The kiln tensor dialect: ops, their interfaces and the shape helpers the
// ops' type inference shares with passes.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_KILNOPS_H
#define KILN_DIALECT_KILN_IR_KILNOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace kiln {
namespace detail {
/// Default CostOpInterface::getFlops: one per result element.
int64_t defaultFlops(mlir::Operation *op);
/// Default CostOpInterface::getBytesAccessed: all operand and result bytes.
int64_t defaultBytesAccessed(mlir::Operation *op);
/// Result type of a NumPy-broadcasting elementwise op over `operands` (the
/// first operand gives the element type unless `boolResult`).
llvm::LogicalResult
inferBroadcastTypes(std::optional<mlir::Location> loc,
                    llvm::ArrayRef<mlir::Type> operands, bool boolResult,
                    llvm::SmallVectorImpl<mlir::Type> &results);
} // namespace detail

/// NumPy broadcast of two static shapes; failure if they are incompatible.
llvm::LogicalResult broadcastShapes(llvm::ArrayRef<int64_t> a,
                                    llvm::ArrayRef<int64_t> b,
                                    llvm::SmallVectorImpl<int64_t> &out);

namespace trait {
/// Marks an elementwise op whose result may be written over an operand of the
/// same type (see Kiln_InPlaceElementwise in KilnDialect.td).
template <typename ConcreteType>
class InPlaceElementwise
    : public mlir::OpTrait::TraitBase<ConcreteType, InPlaceElementwise> {};
} // namespace trait
} // namespace kiln

#include "kiln/Dialect/Kiln/IR/KilnDialect.h.inc"
#include "kiln/Dialect/Kiln/IR/KilnEnums.h"
#include "kiln/Dialect/Kiln/IR/ShardingRule.h"
#include "kiln/Dialect/Kiln/IR/KilnInterfaces.h.inc"

#define GET_OP_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnOps.h.inc"

#endif // KILN_DIALECT_KILN_IR_KILNOPS_H
