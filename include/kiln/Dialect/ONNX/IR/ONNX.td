//===- ONNX.td - onnx dialect umbrella ----------------------*- tablegen -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_ONNX_IR_ONNX_TD
#define KILN_DIALECT_ONNX_IR_ONNX_TD
include "kiln/Dialect/ONNX/IR/ONNXDialect.td"
include "kiln/Dialect/ONNX/IR/ONNXOps.td"
#endif
