//===- Linalg.cpp - ONNX matmul, reductions and softmax to kiln -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// MatMul (NumPy semantics, 1-D operands promoted), Gemm, the Reduce* family
// (axes as an attribute or, from opset 13/18, an input), ArgMax/ArgMin and
// Softmax/LogSoftmax (opset < 13 coerces the input to 2-D first).
//===----------------------------------------------------------------------===//
#include "PatternUtils.h"

using namespace mlir;
using namespace kiln;

namespace {

LogicalResult convertMatMul(onnx::NodeOp, NodeRewriter &rw) {
  Value a = KILN_TRY(rw.required(0));
  Value b = KILN_TRY(rw.required(1));
  ArrayRef<int64_t> as = NodeRewriter::shapeOf(a), bs = NodeRewriter::shapeOf(b);
  if (as.empty() || bs.empty())
    return rw.error("operands must have rank >= 1");
  bool vecA = as.size() == 1, vecB = bs.size() == 1;
  if (vecA)
    a = KILN_TRY(rw.reshape(a, {1, as[0]}));
  if (vecB)
    b = KILN_TRY(rw.reshape(b, {bs[0], 1}));
  Value y = KILN_TRY(rw.create<MatmulOp>({a, b}));
  if (vecA || vecB) {
    SmallVector<int64_t> shape(NodeRewriter::shapeOf(y));
    if (vecB)
      shape.erase(shape.end() - 1);
    if (vecA)
      shape.erase(shape.end() - (vecB ? 1 : 2));
    y = KILN_TRY(rw.reshape(y, shape));
  }
  return rw.replace(y);
}

LogicalResult convertGemm(onnx::NodeOp, NodeRewriter &rw) {
  Value a = KILN_TRY(rw.required(0));
  Value b = KILN_TRY(rw.required(1));
  if (NodeRewriter::rankOf(a) != 2 || NodeRewriter::rankOf(b) != 2)
    return rw.error("A and B must be matrices");
  float alpha = KILN_TRY(rw.floatAttr("alpha", 1.0f));
  float beta = KILN_TRY(rw.floatAttr("beta", 1.0f));
  bool transA = KILN_TRY(rw.intAttr("transA", 0)) != 0;
  bool transB = KILN_TRY(rw.intAttr("transB", 0)) != 0;
  OpBuilder &b0 = rw.builder();
  Value y = KILN_TRY(rw.create<MatmulOp>(
      {a, b}, {rw.attr("transpose_lhs", b0.getBoolAttr(transA)),
               rw.attr("transpose_rhs", b0.getBoolAttr(transB))}));
  Type elt = NodeRewriter::elementOf(y);
  if (alpha != 1.0f)
    y = KILN_TRY(rw.create<MulOp>({y, rw.scalar(alpha, elt)}));
  if (Value c = rw.input(2)) {
    if (beta != 1.0f)
      c = KILN_TRY(rw.create<MulOp>({c, rw.scalar(beta, elt)}));
    Type product = y.getType();
    y = KILN_TRY(rw.create<AddOp>({y, c}));
    if (y.getType() != product)
      return rw.error("C does not broadcast to the product's shape");
  }
  return rw.replace(y);
}

/// What a Reduce* node reduces: its axes (an attribute before `inputFrom`,
/// an optional input from then on; empty means all axes), keepdims, and
/// whether it is a no-op (empty axes with noop_with_empty_axes).
struct ReduceSpec {
  SmallVector<int64_t> axes;
  bool keepdims = true;
  bool noop = false;
};

FailureOr<ReduceSpec> reduceSpec(NodeRewriter &rw, Value x, int64_t inputFrom) {
  int64_t rank = NodeRewriter::rankOf(x);
  ReduceSpec r;
  if (rw.opset() < inputFrom)
    r.axes = KILN_TRY(rw.intsAttr("axes"));
  else if (rw.input(1))
    r.axes = KILN_TRY(rw.constInts(1, "axes"));
  r.keepdims = KILN_TRY(rw.intAttr("keepdims", 1)) != 0;
  if (r.axes.empty()) {
    r.noop = rw.opset() >= inputFrom && KILN_TRY(rw.intAttr("noop_with_empty_axes", 0));
    for (int64_t i = 0; i < rank; ++i)
      r.axes.push_back(i);
  }
  r.axes = KILN_TRY(normalizeAxes(rw, r.axes, rank));
  return r;
}

template <typename OpTy>
LogicalResult convertReduce(onnx::NodeOp, NodeRewriter &rw, int64_t inputFrom) {
  Value x = KILN_TRY(rw.required(0));
  ReduceSpec r = KILN_TRY(reduceSpec(rw, x, inputFrom));
  if (r.noop)
    return rw.replace(x);
  return rw.replace(KILN_TRY(rw.create<OpTy>(
      {x}, {rw.arrayAttr("axes", r.axes),
            rw.attr("keepdims", rw.builder().getBoolAttr(r.keepdims))})));
}

template <typename OpTy, int64_t InputFrom>
LogicalResult convertReduceFn(onnx::NodeOp node, NodeRewriter &rw) {
  return convertReduce<OpTy>(node, rw, InputFrom);
}

/// The reductions ONNX defines through others, composed from kiln ops (so
/// autodiff differentiates them): L1 = sum |x|, L2 = sqrt(sum x^2),
/// LogSum = log(sum x), LogSumExp = log(sum exp(x - m)) + m with m the
/// maximum (stable for large x). Axes follow convertReduce (attribute before
/// opset 18, input from then on).
enum class Composite { L1, L2, LogSum, LogSumExp };

template <Composite K>
LogicalResult convertReduceComposite(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  ReduceSpec r = KILN_TRY(reduceSpec(rw, x, /*inputFrom=*/18));
  bool keepdims = r.keepdims, noop = r.noop;
  const SmallVector<int64_t> &axes = r.axes;
  OpBuilder &b = rw.builder();
  auto reduce = [&](auto tag, Value v, bool keep) -> FailureOr<Value> {
    using Op = decltype(tag);
    return rw.create<Op>({v}, {rw.arrayAttr("axes", noop ? SmallVector<int64_t>{} : axes),
                               rw.attr("keepdims", b.getBoolAttr(keep))});
  };
  Value y;
  if constexpr (K == Composite::L1) {
    y = KILN_TRY(reduce(ReduceSumOp{}, KILN_TRY(rw.create<AbsOp>({x})), keepdims));
  } else if constexpr (K == Composite::L2) {
    y = KILN_TRY(rw.create<SqrtOp>({KILN_TRY(reduce(ReduceSumSquareOp{}, x, keepdims))}));
  } else if constexpr (K == Composite::LogSum) {
    y = KILN_TRY(rw.create<LogOp>({KILN_TRY(reduce(ReduceSumOp{}, x, keepdims))}));
  } else {
    Value m = KILN_TRY(reduce(ReduceMaxOp{}, x, true));
    Value e = KILN_TRY(rw.create<ExpOp>({KILN_TRY(rw.create<SubOp>({x, m}))}));
    Value s = KILN_TRY(rw.create<LogOp>({KILN_TRY(reduce(ReduceSumOp{}, e, keepdims))}));
    if (!keepdims)
      m = KILN_TRY(rw.reshape(m, NodeRewriter::shapeOf(s)));
    y = KILN_TRY(rw.create<AddOp>({s, m}));
  }
  return rw.replace(y);
}

template <typename OpTy>
LogicalResult convertArgReduce(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  int64_t axis = KILN_TRY(rw.axis(KILN_TRY(rw.intAttr("axis", 0)), NodeRewriter::rankOf(x)));
  bool keepdims = KILN_TRY(rw.intAttr("keepdims", 1)) != 0;
  bool last = KILN_TRY(rw.intAttr("select_last_index", 0)) != 0;
  OpBuilder &b = rw.builder();
  return rw.replace(KILN_TRY(rw.create<OpTy>(
      {x}, {rw.i64Attr("axis", axis), rw.attr("keepdims", b.getBoolAttr(keepdims)),
            rw.attr("select_last_index", b.getBoolAttr(last))})));
}

/// Softmax and LogSoftmax. From opset 13 the op works along `axis` (default
/// -1); before, the input is coerced to 2-D [prod(d < axis), prod(d >= axis)]
/// (axis default 1) and normalised along the second dimension.
template <typename OpTy>
LogicalResult convertSoftmax(onnx::NodeOp, NodeRewriter &rw) {
  Value x = KILN_TRY(rw.required(0));
  int64_t rank = NodeRewriter::rankOf(x);
  if (rank == 0)
    return rw.error("input must have rank >= 1");
  bool legacy = rw.opset() < 13;
  int64_t axis = KILN_TRY(rw.axis(KILN_TRY(rw.intAttr("axis", legacy ? 1 : -1)), rank));
  if (!legacy || (axis == rank - 1))
    return rw.replace(KILN_TRY(rw.create<OpTy>({x}, {rw.i64Attr("axis", axis)})));
  ArrayRef<int64_t> shape = NodeRewriter::shapeOf(x);
  Value flat = KILN_TRY(rw.reshape(
      x, {product(shape.take_front(axis)), product(shape.drop_front(axis))}));
  Value y = KILN_TRY(rw.create<OpTy>({flat}, {rw.i64Attr("axis", 1)}));
  return rw.replace(KILN_TRY(rw.reshape(y, shape)));
}

} // namespace

void kiln::populateONNXLinalgPatterns(ONNXPatternRegistry &r) {
  constexpr int64_t kMax = 22;
  r.add("MatMul", 1, kMax, convertMatMul);
  r.add("Gemm", 7, kMax, convertGemm);
  r.add("ReduceSum", 1, kMax, convertReduceFn<ReduceSumOp, 13>);
  r.add("ReduceMean", 1, kMax, convertReduceFn<ReduceMeanOp, 18>);
  r.add("ReduceMax", 1, kMax, convertReduceFn<ReduceMaxOp, 18>);
  r.add("ReduceMin", 1, kMax, convertReduceFn<ReduceMinOp, 18>);
  r.add("ReduceProd", 1, kMax, convertReduceFn<ReduceProdOp, 18>);
  r.add("ReduceSumSquare", 1, kMax, convertReduceFn<ReduceSumSquareOp, 18>);
  r.add("ReduceL1", 1, kMax, convertReduceComposite<Composite::L1>);
  r.add("ReduceL2", 1, kMax, convertReduceComposite<Composite::L2>);
  r.add("ReduceLogSum", 1, kMax, convertReduceComposite<Composite::LogSum>);
  r.add("ReduceLogSumExp", 1, kMax, convertReduceComposite<Composite::LogSumExp>);
  r.add("ArgMax", 1, kMax, convertArgReduce<ArgMaxOp>);
  r.add("ArgMin", 1, kMax, convertArgReduce<ArgMinOp>);
  r.add("Softmax", 1, kMax, convertSoftmax<SoftmaxOp>);
  r.add("LogSoftmax", 1, kMax, convertSoftmax<LogSoftmaxOp>);
}
