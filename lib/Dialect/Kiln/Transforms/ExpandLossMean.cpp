//===- ExpandLossMean.cpp - --kiln-expand-loss-mean -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// A class loss's mean over its valid labels as a sum over their count
// (Passes.td has the contract), so that a sharded batch splits it.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNEXPANDLOSSMEANPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// Whether `op` averages over valid labels (what the pass rewrites).
template <typename Op> bool averagesValid(Op op) {
  return op.getReduction() == "mean" &&
         (op.getIgnoreIndex().has_value() || op.getWeight());
}

/// sum over the labels of (label != ignore_index ? weight[label] : 1 or 0),
/// as a scalar of `elt`.
template <typename Op> Value validCount(OpBuilder &b, Op op, Type elt) {
  Location loc = op.getLoc();
  Value labels = op.getLabels();
  auto lt = cast<RankedTensorType>(labels.getType());
  auto scalarOf = [&](Type t, Attribute v) -> Value {
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(RankedTensorType::get({}, t), v));
  };
  auto fshape = RankedTensorType::get(lt.getShape(), elt);
  Value valid; // i1, per label
  if (std::optional<int64_t> ignore = op.getIgnoreIndex()) {
    Value ig = scalarOf(lt.getElementType(),
                        b.getIntegerAttr(lt.getElementType(), *ignore));
    valid = NotOp::create(b, loc, EqualOp::create(b, loc, labels, ig));
  }
  Value per;
  if (Value w = op.getWeight()) {
    Value safe = labels;
    if (valid) // ignored labels may be out of the weights' range
      safe = SelectOp::create(
          b, loc, valid, labels,
          scalarOf(lt.getElementType(), b.getIntegerAttr(lt.getElementType(), 0)));
    per = GatherOp::create(b, loc, w, safe, b.getI64IntegerAttr(0), StringAttr(),
                           IntegerAttr());
    if (valid)
      per = SelectOp::create(b, loc, valid, per,
                             scalarOf(elt, b.getFloatAttr(elt, 0.0)));
  } else {
    per = CastOp::create(b, loc, fshape, valid);
  }
  SmallVector<int64_t> axes(lt.getRank());
  for (int64_t d = 0; d < lt.getRank(); ++d)
    axes[d] = d;
  return ReduceSumOp::create(b, loc, per, b.getDenseI64ArrayAttr(axes),
                             b.getBoolAttr(false));
}

template <typename Op> void expandLoss(Op op) {
  if (!averagesValid(op))
    return;
  OpBuilder b(op);
  b.setInsertionPointAfter(op);
  Type elt = cast<RankedTensorType>(op.getType()).getElementType();
  Value count = validCount(b, op, elt);
  op.setReduction("sum");
  Value mean = DivOp::create(b, op.getLoc(), op.getResult(), count);
  op.getResult().replaceAllUsesExcept(mean, mean.getDefiningOp());
}

template <typename Op> void expandGrad(Op op) {
  if (!averagesValid(op))
    return;
  OpBuilder b(op);
  Type elt = cast<RankedTensorType>(op.getDloss().getType()).getElementType();
  Value count = validCount(b, op, elt);
  Value scaled = DivOp::create(b, op.getLoc(), op.getDloss(), count);
  op.getDlossMutable().assign(scaled);
  op.setReduction("sum");
}

struct ExpandLossMeanPass
    : public kiln::impl::KilnExpandLossMeanPassBase<ExpandLossMeanPass> {
  void runOnOperation() override {
    getOperation().walk([](Operation *op) {
      if (auto o = dyn_cast<SoftmaxCrossEntropyOp>(op))
        expandLoss(o);
      else if (auto o = dyn_cast<NllLossOp>(op))
        expandLoss(o);
      else if (auto o = dyn_cast<SoftmaxCrossEntropyGradOp>(op))
        expandGrad(o);
      else if (auto o = dyn_cast<NllLossGradOp>(op))
        expandGrad(o);
    });
  }
};

} // namespace
