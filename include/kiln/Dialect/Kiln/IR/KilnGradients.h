//===- KilnGradients.h - reverse-mode sweep over kiln ops -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The reverse-mode core shared by --kiln-autodiff (which differentiates the
// loss with respect to the parameters) and the ONNX Gradient op's conversion
// (ai.onnx.preview.training, which differentiates a named tensor with
// respect to named inputs). It knows no op: each op's rule is its
// DifferentiableOpInterface::buildVJP.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_IR_KILNGRADIENTS_H
#define KILN_DIALECT_KILN_IR_KILNGRADIENTS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"

namespace kiln {

/// Builds d(y)/d(xs[i]) at b's insertion point, seeding y's gradient with
/// `seed` (y's type), by calling buildVJP on every op of `ops` (in program
/// order) that lies on a path from some x to y, last op first, and summing
/// the gradients of values used more than once. `grads[i]` is null when no
/// path leads from xs[i] to y. Fails (with the error emitted on the op) when
/// an op on such a path has no gradient rule or its rule fails; that error
/// calls the xs `xsWhat` and y `yWhat` ("a trainable parameter", "the loss").
///
/// `breakVJP` is a testing aid (--kiln-autodiff's break-vjp): every gradient
/// the rule of an op with that name (as "kiln.relu") produces is multiplied
/// by 1.5, a deliberately wrong VJP that gradient checks must find.
mlir::LogicalResult buildGradients(mlir::OpBuilder &b,
                                   llvm::ArrayRef<mlir::Operation *> ops,
                                   mlir::Value y, mlir::Value seed,
                                   llvm::ArrayRef<mlir::Value> xs,
                                   llvm::SmallVectorImpl<mlir::Value> &grads,
                                   llvm::StringRef xsWhat = "a differentiated input",
                                   llvm::StringRef yWhat = "the differentiated value",
                                   llvm::StringRef breakVJP = "");

} // namespace kiln

#endif // KILN_DIALECT_KILN_IR_KILNGRADIENTS_H
