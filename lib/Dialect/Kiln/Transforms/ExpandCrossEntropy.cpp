//===- ExpandCrossEntropy.cpp - --kiln-expand-cross-entropy -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Softmax cross-entropy and its gradient as reductions over the class axis
// and elementwise ops (Passes.td has the contract), so that logits split on
// the class axis (a vocab-parallel LM head) are never gathered: the
// partitioner all-reduces the class max, the sum of exponentials and the
// label's logit (Megatron-LM's vocab-parallel cross-entropy).
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNEXPANDCROSSENTROPYPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// The pieces both the loss and its gradient need, for logits `x` with the
/// class on `axis` and integer `labels`.
struct Parts {
  Value m, e, s;     // class max, exp(x - m), sum of e (keepdims)
  Value onehot;      // label == class, in x's type
  Value valid;       // label != ignore_index, in x's type (keepdims); or null
};

Value scalar(OpBuilder &b, Location loc, Type t, Attribute v) {
  return ConstantOp::create(b, loc,
                            DenseElementsAttr::get(RankedTensorType::get({}, t), v));
}

Parts parts(OpBuilder &b, Location loc, Value x, Value labels, int64_t axis,
            std::optional<int64_t> ignore) {
  auto xt = cast<RankedTensorType>(x.getType());
  auto lt = cast<RankedTensorType>(labels.getType());
  Type elt = xt.getElementType(), it = lt.getElementType();
  int64_t rank = xt.getRank();
  SmallVector<int64_t> kept(xt.getShape());
  kept[axis] = 1;
  auto keptT = RankedTensorType::get(kept, elt);
  auto axes = b.getDenseI64ArrayAttr({axis});
  Parts p;
  p.m = ReduceMaxOp::create(b, loc, keptT, x, axes, b.getBoolAttr(true));
  p.e = ExpOp::create(b, loc, SubOp::create(b, loc, x, p.m));
  p.s = ReduceSumOp::create(b, loc, keptT, p.e, axes, b.getBoolAttr(true));
  // Labels with the class axis as 1, and a class iota along it.
  Value lbl = ReshapeOp::create(b, loc, RankedTensorType::get(kept, it), labels);
  if (ignore) {
    Value ig = scalar(b, loc, it, b.getIntegerAttr(it, *ignore));
    Value ok = NotOp::create(b, loc, EqualOp::create(b, loc, lbl, ig));
    p.valid = CastOp::create(b, loc, RankedTensorType::get(kept, elt), ok);
  }
  SmallVector<int64_t> iotaShape(rank, 1);
  iotaShape[axis] = xt.getDimSize(axis);
  auto iotaT = RankedTensorType::get(iotaShape, it);
  SmallVector<APInt> values;
  for (int64_t c = 0; c < xt.getDimSize(axis); ++c)
    values.push_back(APInt(it.getIntOrFloatBitWidth(), c, /*isSigned=*/true));
  Value iota = ConstantOp::create(b, loc, DenseElementsAttr::get(iotaT, values));
  Value eq = EqualOp::create(b, loc, iota, lbl);
  p.onehot = CastOp::create(b, loc, RankedTensorType::get(xt.getShape(), elt), eq);
  return p;
}

struct ExpandCrossEntropyPass
    : public kiln::impl::KilnExpandCrossEntropyPassBase<ExpandCrossEntropyPass> {
  using Base::Base;
  void runOnOperation() override;
};

/// The axis of the class, or none if the op is not expanded (class
/// weights, reduction none).
template <typename Op> std::optional<int64_t> expandable(Op op) {
  if (op.getWeight() || op.getReduction() == "none")
    return std::nullopt;
  if (op.getReduction() == "mean" && op.getIgnoreIndex())
    return std::nullopt; // --kiln-expand-loss-mean makes it a sum first
  auto xt = cast<RankedTensorType>(op.getLogits().getType());
  int64_t axis = op.getClassAxis();
  if (axis < 0)
    axis += xt.getRank();
  if (axis < 0 || axis >= xt.getRank() || !isa<FloatType>(xt.getElementType()))
    return std::nullopt;
  return axis;
}

void ExpandCrossEntropyPass::runOnOperation() {
  ModuleOp m = getOperation();
  SmallVector<SoftmaxCrossEntropyOp> losses;
  SmallVector<SoftmaxCrossEntropyGradOp> grads;
  m.walk([&](SoftmaxCrossEntropyOp op) { losses.push_back(op); });
  m.walk([&](SoftmaxCrossEntropyGradOp op) { grads.push_back(op); });
  for (SoftmaxCrossEntropyOp op : losses) {
    std::optional<int64_t> axis = expandable(op);
    if (!axis)
      continue;
    OpBuilder b(op);
    Location loc = op.getLoc();
    Value x = op.getLogits();
    auto xt = cast<RankedTensorType>(x.getType());
    Type elt = xt.getElementType();
    Parts p = parts(b, loc, x, op.getLabels(), *axis, op.getIgnoreIndex());
    SmallVector<int64_t> kept(xt.getShape());
    kept[*axis] = 1;
    auto keptT = RankedTensorType::get(kept, elt);
    auto ax = b.getDenseI64ArrayAttr({*axis});
    // log(sum exp) + max - x[label], per position.
    Value lse = AddOp::create(b, loc, LogOp::create(b, loc, p.s), p.m);
    Value picked = ReduceSumOp::create(b, loc, keptT,
                                       MulOp::create(b, loc, x, p.onehot), ax,
                                       b.getBoolAttr(true));
    Value l = SubOp::create(b, loc, lse, picked);
    if (p.valid)
      l = MulOp::create(b, loc, l, p.valid);
    SmallVector<int64_t> all;
    for (int64_t d = 0; d < (int64_t)kept.size(); ++d)
      all.push_back(d);
    auto scalarT = RankedTensorType::get({}, elt);
    Value loss = op.getReduction() == "mean"
                     ? ReduceMeanOp::create(b, loc, scalarT, l,
                                            b.getDenseI64ArrayAttr(all),
                                            b.getBoolAttr(false))
                           .getResult()
                     : ReduceSumOp::create(b, loc, scalarT, l,
                                           b.getDenseI64ArrayAttr(all),
                                           b.getBoolAttr(false))
                           .getResult();
    if (loss.getType() != op.getType()) {
      op.emitOpError() << "--kiln-expand-cross-entropy: the loss is "
                       << op.getType() << ", its expansion " << loss.getType();
      return signalPassFailure();
    }
    op.getResult().replaceAllUsesWith(loss);
    op->erase();
  }
  for (SoftmaxCrossEntropyGradOp op : grads) {
    std::optional<int64_t> axis = expandable(op);
    if (!axis)
      continue;
    OpBuilder b(op);
    Location loc = op.getLoc();
    Value x = op.getLogits();
    auto xt = cast<RankedTensorType>(x.getType());
    Type elt = xt.getElementType();
    Parts p = parts(b, loc, x, op.getLabels(), *axis, op.getIgnoreIndex());
    // (softmax - onehot) * dloss (/ positions for a mean), 0 where ignored.
    Value g = SubOp::create(b, loc, DivOp::create(b, loc, p.e, p.s), p.onehot);
    if (p.valid)
      g = MulOp::create(b, loc, g, p.valid);
    Value scale = op.getDloss();
    if (op.getReduction() == "mean") {
      int64_t positions = xt.getNumElements() / xt.getDimSize(*axis);
      scale = DivOp::create(b, loc, scale,
                            scalar(b, loc, elt, b.getFloatAttr(elt, (double)positions)));
    }
    Value dx = MulOp::create(b, loc, g, scale);
    op.getResult().replaceAllUsesWith(dx);
    op->erase();
  }
}

} // namespace
