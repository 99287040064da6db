//===- ONNXOps.h - onnx dialect ---------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The onnx import dialect: one generic op per ONNX NodeProto.
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_ONNX_IR_ONNXOPS_H
#define KILN_DIALECT_ONNX_IR_ONNXOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "kiln/Dialect/ONNX/IR/ONNXDialect.h.inc"

#define GET_OP_CLASSES
#include "kiln/Dialect/ONNX/IR/ONNXOps.h.inc"

namespace kiln::onnx {
/// The MLIR element type of an ONNX `TensorProto.DataType` code (as in Cast's
/// `to` attribute), or null for types Kiln does not support.
mlir::Type getElementType(mlir::MLIRContext *ctx, int64_t dataType);
} // namespace kiln::onnx

#endif // KILN_DIALECT_ONNX_IR_ONNXOPS_H
