//===- ONNXOps.cpp - onnx dialect -------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/ONNX/IR/ONNXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

using namespace mlir;
using namespace kiln::onnx;

#include "kiln/Dialect/ONNX/IR/ONNXDialect.cpp.inc"

void ONNXDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "kiln/Dialect/ONNX/IR/ONNXOps.cpp.inc"
      >();
}

std::string NodeOp::getNodeName() {
  Location loc = getLoc();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (isa<NameLoc>(l)) {
        loc = l;
        break;
      }
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  return "";
}

#define GET_OP_CLASSES
#include "kiln/Dialect/ONNX/IR/ONNXOps.cpp.inc"
