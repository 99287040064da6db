//===- KilnVJP.cpp - vector-Jacobian products of the kiln ops ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// DifferentiableOpInterface::buildVJP for every differentiable kiln op: given
// the gradients of an op's results, build the gradients of its operands from
// kiln ops. --kiln-autodiff calls these in reverse program order; nothing
// else knows the rules. Where a composition would cost several passes over
// memory, a dedicated backward op (KilnGradOps.td) has a kernel instead.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <numeric>

using namespace mlir;
using namespace kiln;

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
Type eltOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }

/// A rank-0 constant of `elt` (a float type) with value `x`.
Value scalar(OpBuilder &b, Location loc, Type elt, double x) {
  auto t = RankedTensorType::get({}, elt);
  return ConstantOp::create(b, loc,
                            DenseElementsAttr::get(t, b.getFloatAttr(elt, x)));
}

/// Sums `g` (of a broadcast result's shape) down to `target`'s shape: the
/// gradient of NumPy broadcasting.
Value reduceTo(OpBuilder &b, Location loc, Value g, Type target) {
  if (g.getType() == target)
    return g;
  ArrayRef<int64_t> gs = shapeOf(g);
  ArrayRef<int64_t> ts = cast<RankedTensorType>(target).getShape();
  size_t lead = gs.size() - ts.size();
  SmallVector<int64_t> axes;
  for (size_t i = 0; i < gs.size(); ++i)
    if (i < lead || (ts[i - lead] == 1 && gs[i] != 1))
      axes.push_back(i);
  Value r = g;
  if (!axes.empty())
    r = ReduceSumOp::create(b, loc, g, b.getDenseI64ArrayAttr(axes),
                            b.getBoolAttr(true));
  if (r.getType() != target)
    r = ReshapeOp::create(b, loc, target, r);
  return r;
}

Value mul(OpBuilder &b, Location loc, Value x, Value y) {
  return MulOp::create(b, loc, x, y);
}

/// Gradients of a binary broadcasting op from the full-shape gradients.
void binaryGrads(OpBuilder &b, Location loc, Operation *op, Value gl, Value gr,
                 SmallVectorImpl<Value> &og) {
  og.push_back(gl ? reduceTo(b, loc, gl, op->getOperand(0).getType()) : Value());
  og.push_back(gr ? reduceTo(b, loc, gr, op->getOperand(1).getType()) : Value());
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise unary
//===----------------------------------------------------------------------===//

#define KILN_VJP(OP)                                                           \
  LogicalResult OP::buildVJP(OpBuilder &b, ArrayRef<Value> rg,                 \
                             SmallVectorImpl<Value> &og)

#define KILN_UNARY_VJP(OP, EXPR)                                               \
  KILN_VJP(OP) {                                                               \
    Location loc = getLoc();                                                   \
    Value dy = rg[0], x = getInput(), y = getResult();                         \
    Type elt = eltOf(x);                                                       \
    (void)loc; /* rules like Sign's (a zero gradient) use none of these */     \
    (void)dy;                                                                  \
    (void)y;                                                                   \
    (void)elt;                                                                 \
    og.push_back(EXPR);                                                        \
    return success();                                                          \
  }

#define S(v) scalar(b, loc, elt, v)
KILN_UNARY_VJP(NegOp, NegOp::create(b, loc, dy))
KILN_UNARY_VJP(AbsOp, mul(b, loc, dy, SignOp::create(b, loc, x)))
KILN_UNARY_VJP(SignOp, Value())
KILN_UNARY_VJP(FloorOp, Value())
KILN_UNARY_VJP(RoundOp, Value())
KILN_UNARY_VJP(CeilOp, Value())
KILN_UNARY_VJP(ExpOp, mul(b, loc, dy, y))
KILN_UNARY_VJP(LogOp, DivOp::create(b, loc, dy, x))
// tanh: dy * (1 - y^2)
KILN_UNARY_VJP(TanhOp, mul(b, loc, dy, SubOp::create(b, loc, S(1.0), mul(b, loc, y, y))))
// sigmoid: dy * y * (1 - y)
KILN_UNARY_VJP(SigmoidOp,
               mul(b, loc, dy, mul(b, loc, y, SubOp::create(b, loc, S(1.0), y))))
KILN_UNARY_VJP(ReluOp, ReluGradOp::create(b, loc, dy, x))
// sqrt: dy / (2 y)
KILN_UNARY_VJP(SqrtOp, DivOp::create(b, loc, dy, mul(b, loc, y, S(2.0))))
// rsqrt: -0.5 * dy * y^3
KILN_UNARY_VJP(RsqrtOp,
               mul(b, loc, mul(b, loc, dy, S(-0.5)), mul(b, loc, y, mul(b, loc, y, y))))
// reciprocal: -dy * y^2
KILN_UNARY_VJP(ReciprocalOp, NegOp::create(b, loc, mul(b, loc, dy, mul(b, loc, y, y))))
// erf: dy * 2/sqrt(pi) * exp(-x^2)
KILN_UNARY_VJP(ErfOp,
               mul(b, loc, mul(b, loc, dy, S(1.1283791670955126)),
                   ExpOp::create(b, loc, NegOp::create(b, loc, mul(b, loc, x, x)))))
// softplus: dy * sigmoid(x)
KILN_UNARY_VJP(SoftplusOp, mul(b, loc, dy, SigmoidOp::create(b, loc, x)))
KILN_UNARY_VJP(SinOp, mul(b, loc, dy, CosOp::create(b, loc, x)))
KILN_UNARY_VJP(CosOp, NegOp::create(b, loc, mul(b, loc, dy, SinOp::create(b, loc, x))))
KILN_UNARY_VJP(GeluOp, GeluGradOp::create(b, loc, dy, x, getApproximateAttr()))
#undef S

// leaky_relu: x > 0 ? dy : alpha * dy (PyTorch's rule at 0).
KILN_VJP(LeakyReluOp) {
  Location loc = getLoc();
  Value dy = rg[0], x = getInput();
  Type elt = eltOf(x);
  Value pos = GreaterOp::create(b, loc, x, scalar(b, loc, elt, 0.0));
  Value neg = mul(b, loc, dy, scalar(b, loc, elt, getAlpha().convertToDouble()));
  og.push_back(SelectOp::create(b, loc, pos, dy, neg));
  return success();
}

// elu: x > 0 ? dy : dy * (y + alpha).
KILN_VJP(EluOp) {
  Location loc = getLoc();
  Value dy = rg[0], x = getInput(), y = getResult();
  Type elt = eltOf(x);
  Value pos = GreaterOp::create(b, loc, x, scalar(b, loc, elt, 0.0));
  Value neg = mul(b, loc, dy,
                  AddOp::create(b, loc, y,
                                scalar(b, loc, elt, getAlpha().convertToDouble())));
  og.push_back(SelectOp::create(b, loc, pos, dy, neg));
  return success();
}

// A float-to-float cast passes the gradient back in the source type; other
// casts stop it.
KILN_VJP(CastOp) {
  Type src = getInput().getType();
  if (!isa<FloatType>(eltOf(getInput())) || !isa<FloatType>(eltOf(getResult()))) {
    og.push_back(Value());
    return success();
  }
  og.push_back(CastOp::create(b, getLoc(), src, rg[0]));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise binary and select
//===----------------------------------------------------------------------===//

KILN_VJP(AddOp) {
  binaryGrads(b, getLoc(), *this, rg[0], rg[0], og);
  return success();
}

KILN_VJP(SubOp) {
  binaryGrads(b, getLoc(), *this, rg[0], NegOp::create(b, getLoc(), rg[0]), og);
  return success();
}

KILN_VJP(MulOp) {
  Location loc = getLoc();
  binaryGrads(b, loc, *this, mul(b, loc, rg[0], getRhs()),
              mul(b, loc, rg[0], getLhs()), og);
  return success();
}

// d(x/y): dy / y and -(dy / y) * (x / y).
KILN_VJP(DivOp) {
  Location loc = getLoc();
  Value dx = DivOp::create(b, loc, rg[0], getRhs());
  Value dr = NegOp::create(b, loc, mul(b, loc, dx, getResult()));
  binaryGrads(b, loc, *this, dx, dr, og);
  return success();
}

// d(x^y): dy * y * x^(y-1) and dy * x^y * log(x).
KILN_VJP(PowOp) {
  Location loc = getLoc();
  Type elt = eltOf(getLhs());
  Value ym1 = SubOp::create(b, loc, getRhs(), scalar(b, loc, elt, 1.0));
  Value dx = mul(b, loc, rg[0], mul(b, loc, getRhs(), PowOp::create(b, loc, getLhs(), ym1)));
  Value dr = mul(b, loc, rg[0], mul(b, loc, getResult(), LogOp::create(b, loc, getLhs())));
  binaryGrads(b, loc, *this, dx, dr, og);
  return success();
}

/// max/min: the chosen side takes the gradient (the left one on ties).
template <typename CmpOp>
static void chooseGrads(OpBuilder &b, Operation *op, Value dy,
                        SmallVectorImpl<Value> &og) {
  Location loc = op->getLoc();
  Value l = op->getOperand(0), r = op->getOperand(1);
  Value pick = CmpOp::create(b, loc, l, r);
  Value zero = scalar(b, loc, eltOf(dy), 0.0);
  binaryGrads(b, loc, op, SelectOp::create(b, loc, pick, dy, zero),
              SelectOp::create(b, loc, pick, zero, dy), og);
}
KILN_VJP(MaxOp) {
  chooseGrads<GreaterEqualOp>(b, *this, rg[0], og);
  return success();
}
KILN_VJP(MinOp) {
  chooseGrads<LessEqualOp>(b, *this, rg[0], og);
  return success();
}

KILN_VJP(SelectOp) {
  Location loc = getLoc();
  Value dy = rg[0];
  Value zero = scalar(b, loc, eltOf(dy), 0.0);
  og.push_back(Value());
  og.push_back(reduceTo(b, loc, SelectOp::create(b, loc, getCond(), dy, zero),
                        getOnTrue().getType()));
  og.push_back(reduceTo(b, loc, SelectOp::create(b, loc, getCond(), zero, dy),
                        getOnFalse().getType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Matmul and convolution
//===----------------------------------------------------------------------===//

/// `a · b` with the given transposes, as a 2-D product when `a` has batch
/// dimensions but the wanted result `target` is a matrix: the batch is folded
/// into the rows (no reduce over a batched product).
static Value matmulTo(OpBuilder &b, Location loc, Value x, Value y, bool tx,
                      bool ty, Type target) {
  auto tt = cast<RankedTensorType>(target);
  ArrayRef<int64_t> xs = shapeOf(x), ys = shapeOf(y);
  // dW = X^T · dY with X [..., M, K], dY [..., M, N]: fold the batch into M.
  if (tt.getRank() == 2 && tx && !ty && xs.size() > 2 && xs.size() == ys.size()) {
    int64_t rows = 1;
    for (int64_t d : xs.drop_back(1))
      rows *= d;
    Type e = eltOf(x);
    Value x2 = ReshapeOp::create(b, loc, RankedTensorType::get({rows, xs.back()}, e), x);
    Value y2 = ReshapeOp::create(b, loc, RankedTensorType::get({rows, ys.back()}, e), y);
    return MatmulOp::create(b, loc, x2, y2, true, false);
  }
  Value r = MatmulOp::create(b, loc, x, y, tx, ty);
  return reduceTo(b, loc, r, target);
}

KILN_VJP(MatmulOp) {
  Location loc = getLoc();
  Value dy = rg[0], a = getLhs(), w = getRhs();
  bool tl = getTransposeLhs(), tr = getTransposeRhs();
  // dA: !tl: dY · op(B)^T; tl: op(B) · dY^T.
  Value da = !tl ? matmulTo(b, loc, dy, w, false, !tr, a.getType())
                 : matmulTo(b, loc, w, dy, tr, true, a.getType());
  // dB: !tr: op(A)^T · dY; tr: dY^T · op(A).
  Value db = !tr ? matmulTo(b, loc, a, dy, !tl, false, w.getType())
                 : matmulTo(b, loc, dy, a, true, tl, w.getType());
  og.push_back(da);
  og.push_back(db);
  return success();
}

KILN_VJP(ConvOp) {
  Location loc = getLoc();
  og.push_back(ConvInputGradOp::create(b, loc, getInput().getType(), rg[0],
                                       getWeight(), getStridesAttr(),
                                       getDilationsAttr(), getPaddingAttr(),
                                       getGroupsAttr()));
  og.push_back(ConvWeightGradOp::create(b, loc, getWeight().getType(), getInput(),
                                        rg[0], getStridesAttr(), getDilationsAttr(),
                                        getPaddingAttr(), getGroupsAttr()));
  return success();
}

KILN_VJP(MaxPoolOp) {
  og.push_back(MaxPoolGradOp::create(b, getLoc(), getInput().getType(), rg[0],
                                     getInput(), getKernelAttr(), getStridesAttr(),
                                     getDilationsAttr(), getPaddingAttr()));
  return success();
}

KILN_VJP(AvgPoolOp) {
  og.push_back(AvgPoolGradOp::create(
      b, getLoc(), getInput().getType(), rg[0], getKernelAttr(), getStridesAttr(),
      getDilationsAttr(), getPaddingAttr(), getCountIncludePadAttr(),
      getCeilPadAttr()));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisation, softmax, dropout
//===----------------------------------------------------------------------===//

KILN_VJP(BatchNormTrainOp) {
  if (!rg[0]) { // only the running statistics reach the loss: no gradient
    og.append(5, Value());
    return success();
  }
  auto g = BatchNormTrainGradOp::create(
      b, getLoc(),
      TypeRange{getInput().getType(), getScale().getType(), getBias().getType()},
      rg[0], getInput(), getScale(), getEpsilonAttr());
  og.push_back(g.getDx());
  og.push_back(g.getDscale());
  og.push_back(g.getDbias());
  og.append(2, Value());
  return success();
}

KILN_VJP(LayerNormOp) {
  if (!rg[0])
    return emitOpError("only the result of layer_norm is differentiable, not "
                       "its mean or inv_std_dev");
  auto g = LayerNormGradOp::create(
      b, getLoc(),
      TypeRange{getInput().getType(), getScale().getType(), getBias().getType()},
      rg[0], getInput(), getScale(), getMean(), getInvStdDev(), getAxisAttr());
  og.push_back(g.getDx());
  og.push_back(g.getDscale());
  og.push_back(g.getDbias());
  return success();
}

KILN_VJP(SoftmaxOp) {
  og.push_back(SoftmaxGradOp::create(b, getLoc(), rg[0], getResult(), getAxisAttr()));
  return success();
}

KILN_VJP(LogSoftmaxOp) {
  og.push_back(LogSoftmaxGradOp::create(b, getLoc(), rg[0], getResult(), getAxisAttr()));
  return success();
}

KILN_VJP(DropoutOp) {
  og.push_back(DropoutGradOp::create(b, getLoc(), getInput().getType(), rg[0],
                                     getMask(), getRatioAttr()));
  return success();
}

// Straight-through: the gradient passes where the input quantized inside the
// range; none reaches the scale or zero point.
KILN_VJP(FakeQuantOp) {
  og.push_back(FakeQuantGradOp::create(
      b, getLoc(), getInput().getType(), rg[0], getInput(), getScale(),
      getZeroPoint(), getAxisAttr(), getQuantMinAttr(), getQuantMaxAttr()));
  og.push_back(Value());
  og.push_back(Value());
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Broadcasts a reduction's result gradient back to the input's shape.
static Value unreduce(OpBuilder &b, Location loc, Value dy, Type input,
                      ArrayRef<int64_t> axes) {
  auto it = cast<RankedTensorType>(input);
  SmallVector<int64_t> kept(it.getShape());
  for (int64_t a : axes)
    kept[a] = 1;
  if (axes.empty()) // reduce over nothing: identity
    kept.assign(it.getShape().begin(), it.getShape().end());
  Type keptT = RankedTensorType::get(kept, it.getElementType());
  Value k = dy.getType() == keptT ? dy : ReshapeOp::create(b, loc, keptT, dy);
  if (keptT == input)
    return k;
  return BroadcastOp::create(b, loc, input, k);
}

KILN_VJP(ReduceSumOp) {
  og.push_back(unreduce(b, getLoc(), rg[0], getInput().getType(), getAxes()));
  return success();
}

// d/dx sum(x^2) = 2x.
KILN_VJP(ReduceSumSquareOp) {
  Location loc = getLoc();
  Value x = getInput();
  Value twoX = mul(b, loc, x, scalar(b, loc, eltOf(x), 2.0));
  og.push_back(mul(b, loc, unreduce(b, loc, rg[0], x.getType(), getAxes()), twoX));
  return success();
}

KILN_VJP(ReduceMeanOp) {
  Location loc = getLoc();
  int64_t n = 1;
  for (int64_t a : getAxes())
    n *= shapeOf(getInput())[a];
  Value scaled = mul(b, loc, rg[0], scalar(b, loc, eltOf(rg[0]), 1.0 / double(n)));
  og.push_back(unreduce(b, loc, scaled, getInput().getType(), getAxes()));
  return success();
}

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

KILN_VJP(ReshapeOp) {
  og.push_back(ReshapeOp::create(b, getLoc(), getInput().getType(), rg[0]));
  return success();
}

KILN_VJP(BroadcastOp) {
  og.push_back(reduceTo(b, getLoc(), rg[0], getInput().getType()));
  return success();
}

KILN_VJP(TransposeOp) {
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[perm[i]] = i;
  og.push_back(TransposeOp::create(b, getLoc(), rg[0], b.getDenseI64ArrayAttr(inv)));
  return success();
}

KILN_VJP(SliceOp) {
  og.push_back(SliceGradOp::create(b, getLoc(), getInput().getType(), rg[0],
                                   getStartsAttr(), getLimitsAttr(), getStridesAttr()));
  return success();
}

KILN_VJP(ConcatOp) {
  Location loc = getLoc();
  int64_t axis = getAxis(), at = 0;
  ArrayRef<int64_t> out = shapeOf(getResult());
  for (Value in : getInputs()) {
    ArrayRef<int64_t> s = shapeOf(in);
    SmallVector<int64_t> starts(out.size(), 0), limits(out), strides(out.size(), 1);
    starts[axis] = at;
    limits[axis] = at + s[axis];
    at += s[axis];
    og.push_back(SliceOp::create(b, loc, rg[0], b.getDenseI64ArrayAttr(starts),
                                 b.getDenseI64ArrayAttr(limits),
                                 b.getDenseI64ArrayAttr(strides)));
  }
  return success();
}

// Constant padding: the gradient is the unpadded window (negative pads crop,
// so their gradient pads with zeros).
KILN_VJP(PadOp) {
  if (getMode() != "constant")
    return emitOpError("the gradient of '") << getMode()
                                            << "' padding is not implemented";
  Location loc = getLoc();
  ArrayRef<int64_t> in = shapeOf(getInput());
  SmallVector<int64_t> starts, limits, strides(in.size(), 1), low, high;
  bool crop = false;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t lo = getLow()[i], hi = getHigh()[i];
    starts.push_back(std::max<int64_t>(lo, 0));
    limits.push_back(std::max<int64_t>(lo, 0) + in[i] + std::min<int64_t>(lo, 0) +
                     std::min<int64_t>(hi, 0));
    low.push_back(std::max<int64_t>(-lo, 0));
    high.push_back(std::max<int64_t>(-hi, 0));
    crop |= lo < 0 || hi < 0;
  }
  Value g = SliceOp::create(b, loc, rg[0], b.getDenseI64ArrayAttr(starts),
                            b.getDenseI64ArrayAttr(limits),
                            b.getDenseI64ArrayAttr(strides));
  if (crop)
    g = PadOp::create(b, loc, g, b.getDenseI64ArrayAttr(low),
                      b.getDenseI64ArrayAttr(high), b.getStringAttr("constant"),
                      b.getF64FloatAttr(0.0));
  og.push_back(g);
  return success();
}

KILN_VJP(GatherOp) {
  og.push_back(GatherGradOp::create(b, getLoc(), getInput().getType(), rg[0],
                                    getIndices(), getAxisAttr(), StringAttr(),
                                    IntegerAttr()));
  og.push_back(Value());
  return success();
}

// gather_elements: the gradient adds back at the indices.
KILN_VJP(GatherElementsOp) {
  og.push_back(GatherElementsGradOp::create(b, getLoc(), getInput().getType(), rg[0],
                                            getIndices(), getAxisAttr()));
  og.push_back(Value());
  return success();
}

// topk: each value's gradient goes to the element it was taken from.
KILN_VJP(TopKOp) {
  og.push_back(rg[0] ? GatherElementsGradOp::create(b, getLoc(), getInput().getType(),
                                                    rg[0], getIndices(), getAxisAttr())
                           .getResult()
                     : Value());
  return success();
}

// cumsum: each input element feeds the outputs on its side, so its
// gradient is the cumulative sum of dy from the other end.
KILN_VJP(CumSumOp) {
  og.push_back(CumSumOp::create(b, getLoc(), rg[0], getAxisAttr(), getExclusiveAttr(),
                                b.getBoolAttr(!getReverse())));
  return success();
}

// scatter_elements: an update's gradient is dy where it was written; the
// data's is dy where nothing was written over it ("none") or all of dy
// ("add").
KILN_VJP(ScatterElementsOp) {
  Location loc = getLoc();
  StringRef red = getReduction();
  if (red != "none" && red != "add")
    return emitOpError() << "has no gradient with reduction '" << red
                         << "' (only none and add)";
  Value dy = rg[0];
  if (red == "none") {
    auto ut = cast<RankedTensorType>(getUpdates().getType());
    Value zeros = BroadcastOp::create(b, loc, ut, scalar(b, loc, ut.getElementType(), 0.0));
    og.push_back(ScatterElementsOp::create(b, loc, dy, getIndices(), zeros, getAxisAttr(),
                                           getReductionAttr()));
  } else {
    og.push_back(dy);
  }
  og.push_back(Value());
  og.push_back(GatherElementsOp::create(b, loc, dy, getIndices(), getAxisAttr()));
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

KILN_VJP(SoftmaxCrossEntropyOp) {
  auto g = SoftmaxCrossEntropyGradOp::create(
      b, getLoc(), getLogits().getType(), rg[0], getLogits(), getLabels(),
      getWeight(), getReductionAttr(), getIgnoreIndexAttr(), getClassAxisAttr());
  og.push_back(g);
  og.push_back(Value());
  if (getWeight())
    og.push_back(Value());
  return success();
}

KILN_VJP(NllLossOp) {
  auto g = NllLossGradOp::create(b, getLoc(), getLogits().getType(), rg[0],
                                 getLabels(), getWeight(), getReductionAttr(),
                                 getIgnoreIndexAttr(), getClassAxisAttr());
  og.push_back(g);
  og.push_back(Value());
  if (getWeight())
    og.push_back(Value());
  return success();
}

// mse: d = 2 (x - t) dloss / n (mean), 2 (x - t) dloss (sum, none).
KILN_VJP(MseLossOp) {
  Location loc = getLoc();
  Value diff = SubOp::create(b, loc, getInput(), getTarget());
  double scale = 2.0;
  if (getReduction() == "mean") {
    int64_t n = 1;
    for (int64_t d : shapeOf(getInput()))
      n *= d;
    scale /= double(n);
  }
  Value d = mul(b, loc, diff, mul(b, loc, rg[0], scalar(b, loc, eltOf(diff), scale)));
  og.push_back(d);
  og.push_back(NegOp::create(b, loc, d));
  return success();
}
