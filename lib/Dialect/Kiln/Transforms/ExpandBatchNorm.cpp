//===- ExpandBatchNorm.cpp - --kiln-expand-batch-norm -----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Training BatchNorm and its gradient as reductions and elementwise ops
// (Passes.td has the contract), so that sharding the batch all-reduces the
// statistics: SyncBatchNorm without a dedicated collective.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNEXPANDBATCHNORMPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// The statistics of `x` over every axis but the channel axis 1, shaped to
/// broadcast against it ([1, C, 1, ...]).
struct Stats {
  SmallVector<int64_t> axes;
  int64_t count = 1; // elements per channel
  Value xc, istd;    // x - mean, 1 / sqrt(var + eps)
  Value mean, var;   // [1, C, 1, ...]
};

class Expander {
public:
  Expander(OpBuilder &b, Location loc, Type elt) : b(b), loc(loc), elt(elt) {}

  Value scalar(double v) {
    auto t = RankedTensorType::get({}, elt);
    return ConstantOp::create(b, loc,
                              DenseElementsAttr::get(t, b.getFloatAttr(elt, v)));
  }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value reduce(Value x, ArrayRef<int64_t> axes, bool mean) {
    auto a = b.getDenseI64ArrayAttr(axes);
    auto keep = b.getBoolAttr(true);
    return mean ? Value(ReduceMeanOp::create(b, loc, x, a, keep))
                : Value(ReduceSumOp::create(b, loc, x, a, keep));
  }
  /// A [C] tensor as [1, C, 1, ...] of `rank` dimensions, or back.
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    auto t = RankedTensorType::get(shape, elt);
    return v.getType() == t ? v : Value(ReshapeOp::create(b, loc, t, v));
  }

  Stats stats(Value x, double eps) {
    Stats s;
    ArrayRef<int64_t> shape = cast<RankedTensorType>(x.getType()).getShape();
    for (int64_t d = 0; d < (int64_t)shape.size(); ++d)
      if (d != 1) {
        s.axes.push_back(d);
        s.count *= shape[d];
      }
    s.mean = reduce(x, s.axes, /*mean=*/true);
    s.xc = sub(x, s.mean);
    s.var = reduce(mul(s.xc, s.xc), s.axes, /*mean=*/true);
    s.istd = RsqrtOp::create(b, loc, add(s.var, scalar(eps)));
    return s;
  }

  OpBuilder &b;
  Location loc;
  Type elt;
};

SmallVector<int64_t> broadcastShape(Value x) {
  auto t = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> s(t.getRank(), 1);
  s[1] = t.getDimSize(1);
  return s;
}

/// The input's type when it is static of rank >= 2, else an error on `op`.
FailureOr<RankedTensorType> inputType(Operation *op, Value x) {
  auto t = cast<RankedTensorType>(x.getType());
  if (t.getRank() < 2 || !t.hasStaticShape())
    return op->emitOpError() << "--kiln-expand-batch-norm: needs a static "
                                "input of rank >= 2, got "
                             << t;
  return t;
}

LogicalResult expandForward(BatchNormTrainOp op) {
  OpBuilder b(op);
  Value x = op.getInput();
  FailureOr<RankedTensorType> t = inputType(op, x);
  if (failed(t))
    return failure();
  Expander e(b, op.getLoc(), t->getElementType());
  Stats s = e.stats(x, op.getEpsilon().convertToDouble());
  SmallVector<int64_t> bshape = broadcastShape(x);
  Value y = e.add(e.mul(e.mul(s.xc, s.istd), e.reshape(op.getScale(), bshape)),
                  e.reshape(op.getBias(), bshape));
  auto cshape = cast<RankedTensorType>(op.getRunningMean().getType()).getShape();
  double m = op.getMomentum().convertToDouble();
  Value mean = e.reshape(s.mean, cshape), var = e.reshape(s.var, cshape);
  if (op.getUnbiasedRunningVar() && s.count > 1)
    var = e.mul(var, e.scalar((double)s.count / (double)(s.count - 1)));
  Value rm = e.add(e.mul(op.getRunningMean(), e.scalar(m)),
                   e.mul(mean, e.scalar(1.0 - m)));
  Value rv = e.add(e.mul(op.getRunningVar(), e.scalar(m)),
                   e.mul(var, e.scalar(1.0 - m)));
  op.getResult().replaceAllUsesWith(y);
  op.getNewRunningMean().replaceAllUsesWith(rm);
  op.getNewRunningVar().replaceAllUsesWith(rv);
  op.erase();
  return success();
}

LogicalResult expandBackward(BatchNormTrainGradOp op) {
  OpBuilder b(op);
  Value x = op.getX(), dy = op.getDy();
  FailureOr<RankedTensorType> t = inputType(op, x);
  if (failed(t))
    return failure();
  Expander e(b, op.getLoc(), t->getElementType());
  Stats s = e.stats(x, op.getEpsilon().convertToDouble());
  SmallVector<int64_t> bshape = broadcastShape(x);
  Value xhat = e.mul(s.xc, s.istd);
  Value dbias = e.reduce(dy, s.axes, /*mean=*/false);
  Value dscale = e.reduce(e.mul(dy, xhat), s.axes, /*mean=*/false);
  Value inv = e.scalar(1.0 / (double)s.count);
  Value inner = e.sub(e.sub(dy, e.mul(dbias, inv)),
                      e.mul(xhat, e.mul(dscale, inv)));
  Value dx = e.mul(e.mul(e.reshape(op.getScale(), bshape), s.istd), inner);
  auto cshape = cast<RankedTensorType>(op.getScale().getType()).getShape();
  op.getDx().replaceAllUsesWith(dx);
  op.getDscale().replaceAllUsesWith(e.reshape(dscale, cshape));
  op.getDbias().replaceAllUsesWith(e.reshape(dbias, cshape));
  op.erase();
  return success();
}

struct ExpandBatchNormPass
    : public kiln::impl::KilnExpandBatchNormPassBase<ExpandBatchNormPass> {
  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<BatchNormTrainOp, BatchNormTrainGradOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      LogicalResult r = isa<BatchNormTrainOp>(op)
                            ? expandForward(cast<BatchNormTrainOp>(op))
                            : expandBackward(cast<BatchNormTrainGradOp>(op));
      if (failed(r))
        return signalPassFailure();
    }
  }
};

} // namespace
