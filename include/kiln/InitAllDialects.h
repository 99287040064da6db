//===- InitAllDialects.h - every dialect Kiln's tools parse -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_INITALLDIALECTS_H
#define KILN_INITALLDIALECTS_H

#include "kiln/Dialect/Dist/IR/DistOps.h"
#include "kiln/Dialect/KRT/IR/KRTOps.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/ONNX/IR/ONNXOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dialect.h"

namespace kiln {
/// Adds Kiln's dialects and the upstream ones it uses to `registry`.
inline void registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<kiln::KilnDialect, kiln::onnx::ONNXDialect, kiln::krt::KRTDialect,
                  kiln::dist::DistDialect,
                  mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::tensor::TensorDialect, mlir::shard::ShardDialect>();
}
} // namespace kiln

#endif // KILN_INITALLDIALECTS_H
