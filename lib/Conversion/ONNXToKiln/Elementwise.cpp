//===- Elementwise.cpp - ONNX elementwise ops to kiln -----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Unary and broadcasting binary ops, their variadic forms (Sum, Max, Min,
// Mean), Where, Clip, Cast and Identity. ONNX's multidirectional broadcasting
// (opset >= 7) is kiln's, so most ops map one to one.
//===----------------------------------------------------------------------===//
#include "PatternUtils.h"

#include <limits>

using namespace mlir;
using namespace kiln;

FailureOr<SmallVector<int64_t>> kiln::normalizeAxes(NodeRewriter &rw,
                                                    ArrayRef<int64_t> axes,
                                                    int64_t rank) {
  SmallVector<int64_t> out;
  for (int64_t a : axes)
    out.push_back(KILN_TRY(rw.axis(a, rank)));
  llvm::sort(out);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

template <typename OpTy>
LogicalResult convertUnary(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  return rw.replace(KILN_TRY(rw.create<OpTy>({x})));
}

template <typename OpTy>
LogicalResult convertBinary(onnx::NodeOp, NodeRewriter &rw) {
  Value a = KILN_TRY(rw.required(0));
  Value b = KILN_TRY(rw.required(1));
  return rw.replace(KILN_TRY(rw.create<OpTy>({a, b})));
}

/// Sum, Max, Min: a left fold of the binary op over all inputs.
template <typename OpTy>
FailureOr<Value> foldVariadic(NodeRewriter &rw) {
  if (rw.numInputs() == 0)
    return rw.error("needs at least one input");
  Value acc = KILN_TRY(rw.required(0));
  for (unsigned i = 1; i < rw.numInputs(); ++i)
    acc = KILN_TRY(rw.create<OpTy>({acc, KILN_TRY(rw.required(i))}));
  return acc;
}

template <typename OpTy>
LogicalResult convertVariadic(onnx::NodeOp, NodeRewriter &rw) {
  return rw.replace(KILN_TRY(foldVariadic<OpTy>(rw)));
}

LogicalResult convertMean(onnx::NodeOp, NodeRewriter &rw) {
  Value sum = KILN_TRY(foldVariadic<AddOp>(rw));
  Value n = rw.scalar(rw.numInputs(), NodeRewriter::elementOf(sum));
  return rw.replace(KILN_TRY(rw.create<DivOp>({sum, n})));
}

LogicalResult convertPow(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Value y = KILN_TRY(rw.required(1));
  // Opset 12+ allows an exponent of another type: compute in the base's.
  y = rw.cast(y, NodeRewriter::elementOf(x));
  return rw.replace(KILN_TRY(rw.create<PowOp>({x, y})));
}

LogicalResult convertLeakyRelu(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  float alpha = KILN_TRY(rw.floatAttr("alpha", 0.01f));
  return rw.replace(KILN_TRY(rw.create<LeakyReluOp>({x}, {rw.f32Attr("alpha", alpha)})));
}

LogicalResult convertElu(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  float alpha = KILN_TRY(rw.floatAttr("alpha", 1.0f));
  return rw.replace(KILN_TRY(rw.create<EluOp>({x}, {rw.f32Attr("alpha", alpha)})));
}

//===--- activations ONNX defines by formula: composed from kiln ops, so
// autodiff needs no new rule. `s(v)` is a scalar of x's element type.

// PRelu: x < 0 ? slope * x : x (slope broadcasts to x).
LogicalResult convertPRelu(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Value slope = KILN_TRY(rw.required(1));
  Type elt = NodeRewriter::elementOf(x);
  Value neg = KILN_TRY(rw.create<LessOp>({x, rw.scalar(0, elt)}));
  Value y = KILN_TRY(rw.create<SelectOp>({neg, KILN_TRY(rw.create<MulOp>({slope, x})), x}));
  if (NodeRewriter::shapeOf(y) != NodeRewriter::shapeOf(x))
    return rw.error("slope does not broadcast to the input's shape");
  return rw.replace(y);
}

// Selu: gamma * elu(x, alpha).
LogicalResult convertSelu(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  float alpha = KILN_TRY(rw.floatAttr("alpha", 1.67326319217681884765625f));
  float gamma = KILN_TRY(rw.floatAttr("gamma", 1.05070102214813232421875f));
  Value e = KILN_TRY(rw.create<EluOp>({x}, {rw.f32Attr("alpha", alpha)}));
  return rw.replace(KILN_TRY(rw.create<MulOp>({rw.scalar(gamma, NodeRewriter::elementOf(x)), e})));
}

// Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) = elu(x / alpha) * alpha.
LogicalResult convertCelu(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  float alpha = KILN_TRY(rw.floatAttr("alpha", 1.0f));
  Type elt = NodeRewriter::elementOf(x);
  Value e = KILN_TRY(rw.create<EluOp>({KILN_TRY(rw.create<DivOp>({x, rw.scalar(alpha, elt)}))},
                                      {rw.f32Attr("alpha", 1.0f)}));
  return rw.replace(KILN_TRY(rw.create<MulOp>({rw.scalar(alpha, elt), e})));
}

// HardSigmoid: max(0, min(1, alpha * x + beta)).
LogicalResult convertHardSigmoid(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  float alpha = KILN_TRY(rw.floatAttr("alpha", 0.2f));
  float beta = KILN_TRY(rw.floatAttr("beta", 0.5f));
  Type elt = NodeRewriter::elementOf(x);
  Value v = KILN_TRY(rw.create<AddOp>(
      {KILN_TRY(rw.create<MulOp>({rw.scalar(alpha, elt), x})), rw.scalar(beta, elt)}));
  v = KILN_TRY(rw.create<MinOp>({v, rw.scalar(1, elt)}));
  return rw.replace(KILN_TRY(rw.create<MaxOp>({v, rw.scalar(0, elt)})));
}

// HardSwish: x * hardsigmoid(x) with alpha 1/6, beta 1/2.
LogicalResult convertHardSwish(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Type elt = NodeRewriter::elementOf(x);
  Value v = KILN_TRY(rw.create<AddOp>(
      {KILN_TRY(rw.create<MulOp>({rw.scalar(1.0 / 6.0, elt), x})), rw.scalar(0.5, elt)}));
  v = KILN_TRY(rw.create<MaxOp>({KILN_TRY(rw.create<MinOp>({v, rw.scalar(1, elt)})),
                                 rw.scalar(0, elt)}));
  return rw.replace(KILN_TRY(rw.create<MulOp>({x, v})));
}

// ThresholdedRelu: x > alpha ? x : 0.
LogicalResult convertThresholdedRelu(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  float alpha = KILN_TRY(rw.floatAttr("alpha", 1.0f));
  Type elt = NodeRewriter::elementOf(x);
  Value keep = KILN_TRY(rw.create<GreaterOp>({x, rw.scalar(alpha, elt)}));
  Value zeros = KILN_TRY(rw.broadcast(rw.scalar(0, elt), NodeRewriter::shapeOf(x)));
  return rw.replace(KILN_TRY(rw.create<SelectOp>({keep, x, zeros})));
}

// Shrink: x < -lambd ? x + bias : (x > lambd ? x - bias : 0).
LogicalResult convertShrink(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  float lambd = KILN_TRY(rw.floatAttr("lambd", 0.5f));
  float bias = KILN_TRY(rw.floatAttr("bias", 0.0f));
  Type elt = NodeRewriter::elementOf(x);
  Value lo = KILN_TRY(rw.create<LessOp>({x, rw.scalar(-lambd, elt)}));
  Value hi = KILN_TRY(rw.create<GreaterOp>({x, rw.scalar(lambd, elt)}));
  Value zeros = KILN_TRY(rw.broadcast(rw.scalar(0, elt), NodeRewriter::shapeOf(x)));
  Value up = KILN_TRY(rw.create<AddOp>({x, rw.scalar(bias, elt)}));
  Value down = KILN_TRY(rw.create<SubOp>({x, rw.scalar(bias, elt)}));
  Value y = KILN_TRY(rw.create<SelectOp>({hi, down, zeros}));
  return rw.replace(KILN_TRY(rw.create<SelectOp>({lo, up, y})));
}

// Softsign: x / (1 + |x|).
LogicalResult convertSoftsign(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Type elt = NodeRewriter::elementOf(x);
  Value d = KILN_TRY(rw.create<AddOp>({rw.scalar(1, elt), KILN_TRY(rw.create<AbsOp>({x}))}));
  return rw.replace(KILN_TRY(rw.create<DivOp>({x, d})));
}

// Tan = sin / cos; Sinh, Cosh from exp.
LogicalResult convertTan(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  return rw.replace(KILN_TRY(rw.create<DivOp>(
      {KILN_TRY(rw.create<SinOp>({x})), KILN_TRY(rw.create<CosOp>({x}))})));
}

template <bool Cosh>
LogicalResult convertSinhCosh(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Type elt = NodeRewriter::elementOf(x);
  Value ep = KILN_TRY(rw.create<ExpOp>({x}));
  Value em = KILN_TRY(rw.create<ExpOp>({KILN_TRY(rw.create<NegOp>({x}))}));
  Value s = Cosh ? KILN_TRY(rw.create<AddOp>({ep, em})) : KILN_TRY(rw.create<SubOp>({ep, em}));
  return rw.replace(KILN_TRY(rw.create<MulOp>({rw.scalar(0.5, elt), s})));
}

// CastLike: Cast to input 1's element type.
LogicalResult convertCastLike(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Value like = KILN_TRY(rw.required(1));
  return rw.replace(rw.cast(x, NodeRewriter::elementOf(like)));
}

// IsNaN: x != x.
LogicalResult convertIsNaN(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  return rw.replace(KILN_TRY(rw.create<NotOp>({KILN_TRY(rw.create<EqualOp>({x, x}))})));
}

// IsInf: |x| == inf, limited by detect_positive / detect_negative.
LogicalResult convertIsInf(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  bool pos = KILN_TRY(rw.intAttr("detect_positive", 1)) != 0;
  bool neg = KILN_TRY(rw.intAttr("detect_negative", 1)) != 0;
  Type elt = NodeRewriter::elementOf(x);
  double inf = std::numeric_limits<double>::infinity();
  Value p = KILN_TRY(rw.create<EqualOp>({x, rw.scalar(inf, elt)}));
  Value n = KILN_TRY(rw.create<EqualOp>({x, rw.scalar(-inf, elt)}));
  if (pos && neg)
    return rw.replace(KILN_TRY(rw.create<OrOp>({p, n})));
  if (pos)
    return rw.replace(p);
  if (neg)
    return rw.replace(n);
  // Neither: all false.
  return rw.replace(KILN_TRY(rw.create<AndOp>({p, n})));
}

LogicalResult convertGelu(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  std::string approx = KILN_TRY(rw.strAttr("approximate", "none"));
  return rw.replace(KILN_TRY(
      rw.create<GeluOp>({x}, {rw.attr("approximate", rw.builder().getStringAttr(approx))})));
}

LogicalResult convertIdentity(onnx::NodeOp, NodeRewriter &rw) {
  return rw.replace(KILN_TRY(rw.required(0)));
}

LogicalResult convertWhere(onnx::NodeOp, NodeRewriter &rw) {
  Value c = KILN_TRY(rw.required(0));
  Value t = KILN_TRY(rw.required(1));
  Value f = KILN_TRY(rw.required(2));
  return rw.replace(KILN_TRY(rw.create<SelectOp>({c, t, f})));
}

LogicalResult convertCast(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  int64_t to = KILN_TRY(rw.intAttr("to", 0));
  Type elt = onnx::getElementType(rw.builder().getContext(), to);
  if (!elt)
    return rw.error("cast to ONNX data type " + Twine(to) + " is not supported");
  return rw.replace(rw.cast(x, elt));
}

/// Clip: bounds are attributes before opset 11 and optional scalar inputs
/// from 11 on. Lowered to max(min(x, hi), lo) so autodiff needs no new op.
LogicalResult convertClip(onnx::NodeOp node, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  Type elt = NodeRewriter::elementOf(x);
  Value lo, hi;
  if (rw.opset() < 11) {
    if (rw.hasAttr("min"))
      lo = rw.scalar(KILN_TRY(rw.floatAttr("min", 0)), elt);
    if (rw.hasAttr("max"))
      hi = rw.scalar(KILN_TRY(rw.floatAttr("max", 0)), elt);
  } else {
    lo = rw.input(1);
    hi = rw.input(2);
    for (Value bound : {lo, hi})
      if (bound && NodeRewriter::rankOf(bound) != 0)
        return rw.error("min and max must be scalars");
  }
  Value y = x;
  if (hi)
    y = KILN_TRY(rw.create<MinOp>({y, hi}));
  if (lo)
    y = KILN_TRY(rw.create<MaxOp>({y, lo}));
  return rw.replace(y);
}

} // namespace

void kiln::populateONNXElementwisePatterns(ONNXPatternRegistry &r) {
  constexpr int64_t kMax = 22;
  r.add("Neg", 6, kMax, convertUnary<NegOp>);
  r.add("Abs", 6, kMax, convertUnary<AbsOp>);
  r.add("Sign", 9, kMax, convertUnary<SignOp>);
  r.add("Exp", 6, kMax, convertUnary<ExpOp>);
  r.add("Log", 6, kMax, convertUnary<LogOp>);
  r.add("Tanh", 6, kMax, convertUnary<TanhOp>);
  r.add("Sigmoid", 6, kMax, convertUnary<SigmoidOp>);
  r.add("Relu", 6, kMax, convertUnary<ReluOp>);
  r.add("Sqrt", 6, kMax, convertUnary<SqrtOp>);
  r.add("Reciprocal", 6, kMax, convertUnary<ReciprocalOp>);
  r.add("Erf", 9, kMax, convertUnary<ErfOp>);
  r.add("Softplus", 1, kMax, convertUnary<SoftplusOp>);
  r.add("Floor", 6, kMax, convertUnary<FloorOp>);
  r.add("Round", 11, kMax, convertUnary<RoundOp>);
  r.add("Ceil", 6, kMax, convertUnary<CeilOp>);
  r.add("Sin", 7, kMax, convertUnary<SinOp>);
  r.add("Cos", 7, kMax, convertUnary<CosOp>);
  r.add("Not", 1, kMax, convertUnary<NotOp>);
  r.add("LeakyRelu", 6, kMax, convertLeakyRelu);
  r.add("PRelu", 7, kMax, convertPRelu);
  r.add("Selu", 6, kMax, convertSelu);
  r.add("Celu", 12, kMax, convertCelu);
  r.add("HardSigmoid", 6, kMax, convertHardSigmoid);
  r.add("HardSwish", 14, kMax, convertHardSwish);
  r.add("ThresholdedRelu", 10, kMax, convertThresholdedRelu);
  r.add("Shrink", 9, kMax, convertShrink);
  r.add("Softsign", 1, kMax, convertSoftsign);
  r.add("Tan", 7, kMax, convertTan);
  r.add("Sinh", 9, kMax, convertSinhCosh<false>);
  r.add("Cosh", 9, kMax, convertSinhCosh<true>);
  r.add("CastLike", 15, kMax, convertCastLike);
  r.add("IsNaN", 9, kMax, convertIsNaN);
  r.add("IsInf", 10, kMax, convertIsInf);
  r.add("Elu", 6, kMax, convertElu);
  r.add("Gelu", 20, kMax, convertGelu);
  r.add("Identity", 1, kMax, convertIdentity);

  r.add("Add", 7, kMax, convertBinary<AddOp>);
  r.add("Sub", 7, kMax, convertBinary<SubOp>);
  r.add("Mul", 7, kMax, convertBinary<MulOp>);
  r.add("Div", 7, kMax, convertBinary<DivOp>);
  r.add("Pow", 7, kMax, convertPow);
  r.add("Equal", 7, kMax, convertBinary<EqualOp>);
  r.add("Less", 7, kMax, convertBinary<LessOp>);
  r.add("LessOrEqual", 12, kMax, convertBinary<LessEqualOp>);
  r.add("Greater", 7, kMax, convertBinary<GreaterOp>);
  r.add("GreaterOrEqual", 12, kMax, convertBinary<GreaterEqualOp>);
  r.add("And", 7, kMax, convertBinary<AndOp>);
  r.add("Or", 7, kMax, convertBinary<OrOp>);
  r.add("Xor", 7, kMax, convertBinary<XorOp>);
  r.add("Sum", 8, kMax, convertVariadic<AddOp>);
  r.add("Max", 8, kMax, convertVariadic<MaxOp>);
  r.add("Min", 8, kMax, convertVariadic<MinOp>);
  r.add("Mean", 8, kMax, convertMean);
  r.add("Where", 9, kMax, convertWhere);
  r.add("Cast", 6, kMax, convertCast);
  r.add("Clip", 6, kMax, convertClip);
}
