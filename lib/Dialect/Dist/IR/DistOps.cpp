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

/// `types` (static tensors of the bucket's element type) fill `bucket`
/// exactly; else a diagnostic on `op` (`what`: "input" or "result"; `verb`:
/// "packs" or "unpacks").
static LogicalResult verifyPacking(Operation *op, TypeRange types,
                                  BucketType bucket, StringRef what,
                                  StringRef verb) {
  if (types.empty())
    return op->emitOpError() << verb << " at least one tensor";
  int64_t total = 0;
  for (auto [i, t] : llvm::enumerate(types)) {
    auto tensor = cast<RankedTensorType>(t);
    if (!tensor.hasStaticShape())
      return op->emitOpError() << what << " #" << i << " has type " << t
                               << "; a bucket packs static shapes";
    if (tensor.getElementType() != bucket.getElementType())
      return op->emitOpError() << what << " #" << i << " has element type "
                               << tensor.getElementType() << ", the bucket's is "
                               << bucket.getElementType();
    int64_t n = tensor.getNumElements();
    if (n > std::numeric_limits<int64_t>::max() - total)
      return op->emitOpError() << "packs more elements than an int64 counts";
    total += n;
  }
  if (total != bucket.getSize())
    return op->emitOpError() << verb << " " << total << " elements "
                             << (verb == "packs" ? "into" : "from")
                             << " a bucket of " << bucket.getSize();
  return success();
}

LogicalResult AllReduceStartOp::verify() {
  BucketType bucket = getBucket().getType();
  if (failed(verifyPacking(*this, getInputs().getTypes(), bucket, "input", "packs")))
    return failure();
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
  if (failed(verifyPacking(*this, getResults().getTypes(),
                           getBucket().getType(), "result", "unpacks")))
    return failure();
  if (AllReduceStartOp start = getStart()) {
    if (start.getInputs().getTypes() != getResults().getTypes())
      return emitOpError() << "must unpack the types its start packed";
  }
  if (!getBucket().hasOneUse())
    return emitOpError() << "a bucket is waited for once";
  return success();
}

//===----------------------------------------------------------------------===//
// Point to point (pipeline stages)
//===----------------------------------------------------------------------===//

/// A peer and a tag the communicator can name (MPI guarantees tags up to
/// 32767).
static LogicalResult verifyPeer(Operation *op, StringRef axis, int64_t peer,
                                int64_t tag) {
  if (axis.empty())
    return op->emitOpError() << "names no mesh axis";
  if (peer < 0 || peer >= (int64_t(1) << 20))
    return op->emitOpError() << "peer " << peer << " is not a rank index";
  if (tag < 0 || tag > 32767)
    return op->emitOpError() << "tag " << tag << " is outside [0, 32767]";
  return success();
}

LogicalResult SendOp::verify() {
  if (!cast<RankedTensorType>(getInput().getType()).hasStaticShape())
    return emitOpError() << "sends a statically shaped tensor only";
  return verifyPeer(*this, getAxis(), getPeer(), getTag());
}

LogicalResult RecvOp::verify() {
  if (!cast<RankedTensorType>(getResult().getType()).hasStaticShape())
    return emitOpError() << "receives a statically shaped tensor only";
  return verifyPeer(*this, getAxis(), getPeer(), getTag());
}
