//===- DistOps.cpp - dist dialect -------------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Dist/IR/DistOps.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace kiln::dist;

#include "kiln/Dialect/Dist/IR/DistDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "kiln/Dialect/Dist/IR/DistTypes.cpp.inc"

#define GET_OP_CLASSES
#include "kiln/Dialect/Dist/IR/DistOps.cpp.inc"

void DistDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "kiln/Dialect/Dist/IR/DistTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "kiln/Dialect/Dist/IR/DistOps.cpp.inc"
      >();
}

LogicalResult BucketType::verify(function_ref<InFlightDiagnostic()> emitError,
                                 int64_t size, Type elementType) {
  if (size <= 0)
    return emitError() << "a bucket holds at least one element, got " << size;
  if (!elementType.isIntOrFloat())
    return emitError() << "a bucket's elements are integers or floats, got "
                       << elementType;
  return success();
}

/// The elements of `types` (static tensors of `element`), or failure with a
/// diagnostic on `op`.
static FailureOr<int64_t> packedSize(Operation *op, TypeRange types,
                                     Type element, StringRef what) {
  int64_t total = 0;
  for (auto [i, t] : llvm::enumerate(types)) {
    auto tensor = cast<RankedTensorType>(t);
    if (!tensor.hasStaticShape())
      return op->emitOpError() << what << " #" << i << " has type " << t
                               << "; a bucket packs static shapes";
    if (tensor.getElementType() != element)
      return op->emitOpError() << what << " #" << i << " has element type "
                               << tensor.getElementType() << ", the bucket's is "
                               << element;
    int64_t n = tensor.getNumElements();
    if (n > std::numeric_limits<int64_t>::max() - total)
      return op->emitOpError() << "packs more elements than an int64 counts";
    total += n;
  }
  return total;
}

LogicalResult AllReduceStartOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "packs at least one tensor";
  BucketType bucket = getBucket().getType();
  FailureOr<int64_t> n = packedSize(*this, getInputs().getTypes(),
                                    bucket.getElementType(), "input");
  if (failed(n))
    return failure();
  if (*n != bucket.getSize())
    return emitOpError() << "packs " << *n << " elements into a bucket of "
                         << bucket.getSize();
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
      *this, getGridAttr());
  if (!grid)
    return emitOpError() << "names the grid " << getGridAttr()
                         << ", which the module does not declare";
  ArrayRef<int16_t> axes = getGridAxes();
  if (axes.empty())
    return emitOpError() << "reduces over no grid axis";
  for (int16_t a : axes)
    if (a < 0 || a >= grid.getRank())
      return emitOpError() << "grid axis " << a << " is not an axis of "
                           << getGridAttr() << " (rank " << grid.getRank()
                           << ")";
  if (getReduction() == shard::ReductionKind::Average &&
      !isa<FloatType>(bucket.getElementType()))
    return emitOpError() << "an average needs floating-point values";
  if (std::optional<StringRef> wire = getCompression()) {
    if (*wire != "bf16" && *wire != "fp16" && *wire != "int8")
      return emitOpError() << "compression must be bf16, fp16 or int8, got '"
                           << *wire << "'";
    if (!bucket.getElementType().isF32() ||
        (getReduction() != shard::ReductionKind::Sum &&
         getReduction() != shard::ReductionKind::Average))
      return emitOpError() << "compression applies to sums and averages of f32";
  }
  return success();
}

LogicalResult AllReduceWaitOp::verify() {
  BucketType bucket = getBucket().getType();
  if (getResults().empty())
    return emitOpError() << "unpacks at least one tensor";
  FailureOr<int64_t> n = packedSize(*this, getResults().getTypes(),
                                    bucket.getElementType(), "result");
  if (failed(n))
    return failure();
  if (*n != bucket.getSize())
    return emitOpError() << "unpacks " << *n << " elements from a bucket of "
                         << bucket.getSize();
  if (AllReduceStartOp start = getStart()) {
    if (start.getInputs().getTypes() != getResults().getTypes())
      return emitOpError() << "must unpack the types its start packed";
  }
  if (!getBucket().hasOneUse())
    return emitOpError() << "a bucket is waited for once";
  return success();
}
