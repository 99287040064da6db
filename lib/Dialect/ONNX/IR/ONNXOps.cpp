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

std::string NodeOp::getNodeKey() {
  std::string name = getNodeName();
  if (!name.empty())
    return name;
  if (auto file = dyn_cast<FileLineColLoc>(getLoc()))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  return "";
}

Type kiln::onnx::getElementType(MLIRContext *ctx, int64_t dataType) {
  Builder b(ctx);
  switch (dataType) {
  case 1: return b.getF32Type();                                   // FLOAT
  case 2: return IntegerType::get(ctx, 8, IntegerType::Unsigned);  // UINT8
  case 3: return b.getI8Type();                                    // INT8
  case 4: return IntegerType::get(ctx, 16, IntegerType::Unsigned); // UINT16
  case 5: return b.getI16Type();                                   // INT16
  case 6: return b.getI32Type();                                   // INT32
  case 7: return b.getI64Type();                                   // INT64
  case 9: return b.getI1Type();                                    // BOOL
  case 10: return b.getF16Type();                                  // FLOAT16
  case 11: return b.getF64Type();                                  // DOUBLE
  case 12: return IntegerType::get(ctx, 32, IntegerType::Unsigned); // UINT32
  case 13: return IntegerType::get(ctx, 64, IntegerType::Unsigned); // UINT64
  case 16: return b.getBF16Type();                                 // BFLOAT16
  default: return {};
  }
}

#define GET_OP_CLASSES
#include "kiln/Dialect/ONNX/IR/ONNXOps.cpp.inc"
