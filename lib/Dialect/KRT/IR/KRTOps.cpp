//===- KRTOps.cpp - krt dialect ---------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/KRT/IR/KRTOps.h"

#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"
#include "kiln/Support/TensorSize.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace kiln::krt;

#include "kiln/Dialect/KRT/IR/KRTDialect.cpp.inc"
#include "kiln/Dialect/KRT/IR/KRTEnums.cpp.inc"

void KRTDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "kiln/Dialect/KRT/IR/KRTOps.cpp.inc"
      >();
}

int64_t kiln::krt::bufferBytes(MemRefType type) {
  int64_t bytes = 0;
  // The verifiers below refuse a buffer whose size does not check, so this
  // holds for every verified krt value.
  bool ok = checkedTypeBytes(type, bytes);
  assert(ok && "bufferBytes of an unverified buffer type");
  (void)ok;
  return bytes;
}

/// Buffers are dense, row-major and statically shaped.
static LogicalResult verifyBuffer(Operation *op, Type t, StringRef what) {
  auto type = cast<MemRefType>(t);
  if (!type.hasStaticShape())
    return op->emitOpError() << what << " must have a static shape, got "
                             << type;
  if (!type.getLayout().isIdentity())
    return op->emitOpError() << what << " must be row-major (identity "
                             << "layout), got " << type;
  if (!type.getElementType().isIntOrFloat())
    return op->emitOpError() << what << " must have an integer or float "
                             << "element type, got " << type;
  int64_t bytes;
  if (!kiln::checkedTypeBytes(type, bytes))
    return op->emitOpError() << kiln::tooLargeText(what.str(), type);
  return success();
}

LogicalResult AllocOp::verify() {
  if (failed(verifyBuffer(*this, getType(), "result")))
    return failure();
  if (std::optional<int64_t> off = getOffset())
    if (*off < 0 || *off % kArenaAlignment != 0)
      return emitOpError() << "offset " << *off << " is not a non-negative "
                           << "multiple of " << kArenaAlignment;
  return success();
}

LogicalResult ConstantOp::verify() {
  if (failed(verifyBuffer(*this, getType(), "result")))
    return failure();
  auto valueType = cast<ShapedType>(getValue().getType());
  if (valueType.getShape() != getType().getShape() ||
      valueType.getElementType() != getType().getElementType())
    return emitOpError() << "value of type " << valueType
                         << " does not match the buffer " << getType();
  return success();
}

LogicalResult ViewOp::verify() {
  if (failed(verifyBuffer(*this, getSource().getType(), "source")) ||
      failed(verifyBuffer(*this, getType(), "result")))
    return failure();
  MemRefType from = getSource().getType(), to = getType();
  if (from.getElementType() != to.getElementType() ||
      from.getNumElements() != to.getNumElements())
    return emitOpError() << "cannot view " << from << " as " << to
                         << ": element types and counts must agree";
  return success();
}

LogicalResult LaunchOp::verify() {
  if (getKernel().empty())
    return emitOpError() << "needs a kernel name";
  // A kernel without outputs acts on the world (send: the communicator
  // takes a copy); the plan's export checks its arity against the manifest.
  if (getOuts().empty() && getIns().empty())
    return emitOpError() << "kernel '" << getKernel()
                         << "' reads and writes no buffer";
  for (Value v : getIns())
    if (failed(verifyBuffer(*this, v.getType(), "input")))
      return failure();
  for (Value v : getOuts()) {
    if (failed(verifyBuffer(*this, v.getType(), "output")))
      return failure();
    if (v.getDefiningOp<AllocOp>())
      continue;
    // A parameter's own storage (training updates) may be written too.
    auto arg = dyn_cast<BlockArgument>(v);
    auto func = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp())
                    : func::FuncOp();
    if (!func || !kiln::isParam(func, arg.getArgNumber()))
      return emitOpError() << "output of kernel '" << getKernel()
                           << "' must be a krt.alloc buffer or a parameter";
  }
  if (getStream() < 0)
    return emitOpError() << "stream must be non-negative";
  return success();
}

template <typename Op> static LogicalResult verifyCollective(Op op) {
  if (failed(verifyBuffer(op, op.getInput().getType(), "input")) ||
      failed(verifyBuffer(op, op.getOutput().getType(), "output")))
    return failure();
  if (op.getInput().getType().getElementType() !=
      op.getOutput().getType().getElementType())
    return op.emitOpError() << "input and output element types differ";
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (failed(verifyCollective(*this)))
    return failure();
  if (getInput().getType() != getOutput().getType())
    return emitOpError() << "input and output types differ";
  return success();
}
LogicalResult AllGatherOp::verify() { return verifyCollective(*this); }
LogicalResult ReduceScatterOp::verify() { return verifyCollective(*this); }

#define GET_OP_CLASSES
#include "kiln/Dialect/KRT/IR/KRTOps.cpp.inc"
