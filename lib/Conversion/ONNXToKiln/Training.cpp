//===- Training.cpp - ai.onnx.preview.training ops to kiln ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// ONNX's own training ops (domain ai.onnx.preview.training, opset 1):
//
// - Gradient: the gradients of the tensor its `y` attribute names (the
//   importer makes it the last operand) with respect to its inputs `xs`,
//   built by the reverse-mode sweep --kiln-autodiff uses
//   (kiln::buildGradients) over the kiln ops already converted before it.
//   y's gradient is seeded with ones; an x that y does not depend on gets
//   zeros.
// - Adagrad, Momentum (standard and nesterov), Adam: one update of every
//   (X, G, state) group, expanded into kiln elementwise ops with exactly the
//   formulas of the ONNX specification (which differ from torch.optim's:
//   Adam's epsilon is added before the bias correction, Momentum's beta is
//   1 at T = 0). R (learning rate) and T (update count) are graph values, so
//   a model can drive them step by step.
//===----------------------------------------------------------------------===//
#include "PatternUtils.h"

#include "kiln/Dialect/Kiln/IR/KilnGradients.h"

using namespace mlir;
using namespace kiln;

namespace {

constexpr llvm::StringLiteral kTraining = "ai.onnx.preview.training";

LogicalResult convertGradient(onnx::NodeOp node, NodeRewriter &rw) {
  unsigned n = rw.numInputs();
  if (n < 2)
    return rw.error("needs at least one input and the differentiated tensor");
  auto xsAttr = dyn_cast_or_null<ArrayAttr>(node.getONNXAttr("xs"));
  if (!xsAttr || xsAttr.empty())
    return rw.error("attribute 'xs' (the tensors to differentiate with respect "
                    "to) is required");
  if (xsAttr.size() > n - 1 || node.getNumResults() != xsAttr.size())
    return rw.error("has " + Twine(node.getNumResults()) + " outputs for " +
                    Twine(xsAttr.size()) + " tensors in 'xs'");
  Value y = rw.input(n - 1);
  auto yType = dyn_cast<RankedTensorType>(y.getType());
  if (!yType || !isa<FloatType>(yType.getElementType()))
    return rw.error("the differentiated tensor must be a floating-point tensor");
  SmallVector<Value> xs;
  for (unsigned i = 0; i < xsAttr.size(); ++i) {
    Value x = KILN_TRY(rw.required(i));
    auto t = dyn_cast<RankedTensorType>(x.getType());
    if (!t || !isa<FloatType>(t.getElementType()))
      return rw.error("input " + Twine(i) + " is not a floating-point tensor");
    xs.push_back(x);
  }
  SmallVector<Operation *> ops;
  for (Operation &op : *node->getBlock()) {
    if (&op == node.getOperation())
      break;
    ops.push_back(&op);
  }
  OpBuilder &b = rw.builder();
  Value seed = rw.constant(DenseElementsAttr::get(
      yType, b.getFloatAttr(yType.getElementType(), 1.0)));
  SmallVector<Value> grads;
  if (failed(buildGradients(b, ops, y, seed, xs, grads, "an input of Gradient",
                            "its 'y'")))
    return failure();
  for (auto [x, g] : llvm::zip(xs, grads))
    if (!g) {
      auto t = cast<RankedTensorType>(x.getType());
      g = rw.constant(
          DenseElementsAttr::get(t, b.getFloatAttr(t.getElementType(), 0.0)));
    }
  return rw.replace(grads);
}

/// Elementwise arithmetic on the node's values, errors naming the node.
struct Arith {
  NodeRewriter &rw;
  Type f32;

  FailureOr<Value> add(Value a, Value b) { return rw.create<AddOp>({a, b}); }
  FailureOr<Value> sub(Value a, Value b) { return rw.create<SubOp>({a, b}); }
  FailureOr<Value> mul(Value a, Value b) { return rw.create<MulOp>({a, b}); }
  FailureOr<Value> div(Value a, Value b) { return rw.create<DivOp>({a, b}); }
  FailureOr<Value> sqrt(Value a) { return rw.create<SqrtOp>({a}); }
  Value c(double v) { return rw.scalar(v, f32); }
  /// `T > 0 ? a : b` for the i64 count T.
  FailureOr<Value> ifPositive(Value t, Value a, Value b) {
    Value zero = rw.scalar(0, rw.builder().getI64Type());
    Value cond = KILN_TRY(rw.create<GreaterOp>({t, zero}));
    return rw.create<SelectOp>({cond, a, b});
  }
};

/// Reads R, T and the number of (X, G, state...) groups of an optimizer
/// node with `groups` tensors per parameter and `outsPer` outputs each.
FailureOr<unsigned> optimizerShape(NodeRewriter &rw, onnx::NodeOp node,
                                   unsigned groups, unsigned outsPer, Value &r,
                                   Value &t) {
  unsigned n = rw.numInputs();
  if (n < 2 + groups || (n - 2) % groups)
    return rw.error("expects R, T and " + Twine(groups) +
                    " tensors per optimized tensor, got " + Twine(n) + " inputs");
  unsigned k = (n - 2) / groups;
  if (node.getNumResults() != outsPer * k)
    return rw.error("has " + Twine(node.getNumResults()) + " outputs, expected " +
                    Twine(outsPer * k));
  r = KILN_TRY(rw.required(0));
  t = KILN_TRY(rw.required(1));
  auto rt = NodeRewriter::typeOf(r), tt = NodeRewriter::typeOf(t);
  if (!rt || rt.getNumElements() != 1 || !rt.getElementType().isF32())
    return rw.error("R (input 0) must be a float scalar");
  if (!tt || tt.getNumElements() != 1 || !tt.getElementType().isInteger(64))
    return rw.error("T (input 1) must be an int64 scalar");
  for (unsigned i = 2; i < n; ++i) {
    Value v = KILN_TRY(rw.required(i));
    auto vt = NodeRewriter::typeOf(v);
    if (!vt || !vt.getElementType().isF32())
      return rw.error("input " + Twine(i) + " must be a float tensor");
    unsigned first = 2 + (i - 2) % k;
    if (vt.getShape() != NodeRewriter::shapeOf(rw.input(first)))
      return rw.error("input " + Twine(i) + " does not have the shape of the "
                      "tensor it updates (input " + Twine(first) + ")");
  }
  return k;
}

FailureOr<float> requiredFloat(NodeRewriter &rw, StringRef name) {
  if (!rw.hasAttr(name))
    return rw.error("attribute '" + name + "' is required");
  return rw.floatAttr(name, 0);
}

// r = R / (1 + T * decay_factor); g = norm_coefficient * X + G;
// H_new = H + g * g; X_new = X - r * g / (sqrt(H_new) + epsilon).
LogicalResult convertAdagrad(onnx::NodeOp node, NodeRewriter &rw) {
  Value r, t;
  unsigned k = KILN_TRY(optimizerShape(rw, node, 3, 2, r, t));
  double decay = KILN_TRY(rw.floatAttr("decay_factor", 0));
  double eps = KILN_TRY(rw.floatAttr("epsilon", 1e-6f));
  double norm = KILN_TRY(rw.floatAttr("norm_coefficient", 0));
  Arith a{rw, rw.builder().getF32Type()};
  Value tf = rw.cast(t, a.f32);
  Value rAdj = KILN_TRY(a.div(r, KILN_TRY(a.add(a.c(1), KILN_TRY(a.mul(tf, a.c(decay)))))));
  SmallVector<Value> xs, hs;
  for (unsigned i = 0; i < k; ++i) {
    Value x = rw.input(2 + i), g = rw.input(2 + k + i), h = rw.input(2 + 2 * k + i);
    Value gr = KILN_TRY(a.add(KILN_TRY(a.mul(a.c(norm), x)), g));
    Value hn = KILN_TRY(a.add(h, KILN_TRY(a.mul(gr, gr))));
    Value den = KILN_TRY(a.add(KILN_TRY(a.sqrt(hn)), a.c(eps)));
    Value step = KILN_TRY(a.div(KILN_TRY(a.mul(rAdj, gr)), den));
    xs.push_back(KILN_TRY(a.sub(x, step)));
    hs.push_back(hn);
  }
  xs.append(hs);
  return rw.replace(xs);
}

// g = norm_coefficient * X + G; b = T > 0 ? beta : 1; V_new = alpha * V + b * g;
// standard: X_new = X - R * V_new; nesterov: X_new = X - R * (g + alpha * V_new).
LogicalResult convertMomentum(onnx::NodeOp node, NodeRewriter &rw) {
  Value r, t;
  unsigned k = KILN_TRY(optimizerShape(rw, node, 3, 2, r, t));
  double alpha = KILN_TRY(requiredFloat(rw, "alpha"));
  double beta = KILN_TRY(requiredFloat(rw, "beta"));
  double norm = KILN_TRY(requiredFloat(rw, "norm_coefficient"));
  if (!rw.hasAttr("mode"))
    return rw.error("attribute 'mode' is required");
  std::string mode = KILN_TRY(rw.strAttr("mode", ""));
  if (mode != "standard" && mode != "nesterov")
    return rw.error("mode must be 'standard' or 'nesterov', got '" + mode + "'");
  Arith a{rw, rw.builder().getF32Type()};
  Value bAdj = KILN_TRY(a.ifPositive(t, a.c(beta), a.c(1)));
  SmallVector<Value> xs, vs;
  for (unsigned i = 0; i < k; ++i) {
    Value x = rw.input(2 + i), g = rw.input(2 + k + i), v = rw.input(2 + 2 * k + i);
    Value gr = KILN_TRY(a.add(KILN_TRY(a.mul(a.c(norm), x)), g));
    Value vn = KILN_TRY(a.add(KILN_TRY(a.mul(a.c(alpha), v)), KILN_TRY(a.mul(bAdj, gr))));
    Value dir = vn;
    if (mode == "nesterov")
      dir = KILN_TRY(a.add(gr, KILN_TRY(a.mul(a.c(alpha), vn))));
    xs.push_back(KILN_TRY(a.sub(x, KILN_TRY(a.mul(r, dir)))));
    vs.push_back(vn);
  }
  xs.append(vs);
  return rw.replace(xs);
}

// g = norm_coefficient * X + G; V_new = alpha * V + (1 - alpha) * g;
// H_new = beta * H + (1 - beta) * g * g;
// r = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R;
// X_new = (1 - norm_coefficient_post) * (X - r * V_new / (sqrt(H_new) + epsilon)).
LogicalResult convertAdam(onnx::NodeOp node, NodeRewriter &rw) {
  Value r, t;
  unsigned k = KILN_TRY(optimizerShape(rw, node, 4, 3, r, t));
  double alpha = KILN_TRY(rw.floatAttr("alpha", 0.9f));
  double beta = KILN_TRY(rw.floatAttr("beta", 0.999f));
  double eps = KILN_TRY(rw.floatAttr("epsilon", 1e-6f));
  double norm = KILN_TRY(rw.floatAttr("norm_coefficient", 0));
  double post = KILN_TRY(rw.floatAttr("norm_coefficient_post", 0));
  Arith a{rw, rw.builder().getF32Type()};
  Value tf = rw.cast(t, a.f32);
  Value bc2 = KILN_TRY(a.sub(a.c(1), KILN_TRY(rw.create<PowOp>({a.c(beta), tf}))));
  Value bc1 = KILN_TRY(a.sub(a.c(1), KILN_TRY(rw.create<PowOp>({a.c(alpha), tf}))));
  Value corrected = KILN_TRY(a.div(KILN_TRY(a.mul(r, KILN_TRY(a.sqrt(bc2)))), bc1));
  Value rAdj = KILN_TRY(a.ifPositive(t, corrected, r));
  SmallVector<Value> xs, vs, hs;
  for (unsigned i = 0; i < k; ++i) {
    Value x = rw.input(2 + i), g = rw.input(2 + k + i), v = rw.input(2 + 2 * k + i),
          h = rw.input(2 + 3 * k + i);
    Value gr = KILN_TRY(a.add(KILN_TRY(a.mul(a.c(norm), x)), g));
    Value vn = KILN_TRY(a.add(KILN_TRY(a.mul(a.c(alpha), v)), KILN_TRY(a.mul(a.c(1 - alpha), gr))));
    Value hn = KILN_TRY(a.add(KILN_TRY(a.mul(a.c(beta), h)),
                              KILN_TRY(a.mul(a.c(1 - beta), KILN_TRY(a.mul(gr, gr))))));
    Value den = KILN_TRY(a.add(KILN_TRY(a.sqrt(hn)), a.c(eps)));
    Value xn = KILN_TRY(a.sub(x, KILN_TRY(a.mul(rAdj, KILN_TRY(a.div(vn, den))))));
    if (post != 0)
      xn = KILN_TRY(a.mul(a.c(1 - post), xn));
    xs.push_back(xn);
    vs.push_back(vn);
    hs.push_back(hn);
  }
  xs.append(vs);
  xs.append(hs);
  return rw.replace(xs);
}

} // namespace

void kiln::populateONNXTrainingPatterns(ONNXPatternRegistry &r) {
  r.add("Gradient", 1, 1, convertGradient, kTraining);
  r.add("Adagrad", 1, 1, convertAdagrad, kTraining);
  r.add("Momentum", 1, 1, convertMomentum, kTraining);
  r.add("Adam", 1, 1, convertAdam, kTraining);
}
