//===- KilnOps.cpp - kiln dialect ops ---------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Type inference, verifiers and costs of the kiln ops. Every op infers its
// result types, so a wrong result type is a verifier error that names the
// types; the checks on operands and attributes are made here once, and all
// producers (the ONNX conversion, autodiff, hand-written IR) share them.
// The shape rules the runtime's kernel factories check as well (broadcast,
// reductions, gathers, conv/pool windows) come from kiln/runtime/ShapeRules.h,
// so both sides compute one result shape.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/runtime/ShapeRules.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

#include <cmath>

using namespace mlir;
using namespace kiln;

#include "kiln/Dialect/Kiln/IR/KilnDialect.cpp.inc"
#include "kiln/Dialect/Kiln/IR/KilnInterfaces.cpp.inc"

void KilnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "kiln/Dialect/Kiln/IR/KilnOps.cpp.inc"
      >();
}

Operation *KilnDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

static RankedTensorType tensorOf(ArrayRef<int64_t> shape, Type elt) {
  return RankedTensorType::get(shape, elt);
}

static ArrayRef<int64_t> shapeOf(Type t) {
  return cast<RankedTensorType>(t).getShape();
}

static Type elementOf(Type t) {
  return cast<RankedTensorType>(t).getElementType();
}

static int64_t numElements(Type t) {
  if (auto r = dyn_cast<RankedTensorType>(t))
    return r.hasStaticShape() ? r.getNumElements() : 0;
  return 0;
}

static int64_t byteSize(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  if (!r || !r.hasStaticShape())
    return 0;
  unsigned bits = r.getElementType().getIntOrFloatBitWidth();
  return r.getNumElements() * std::max<int64_t>(1, bits / 8);
}

int64_t kiln::detail::defaultFlops(Operation *op) {
  int64_t n = 0;
  for (Type t : op->getResultTypes())
    n += numElements(t);
  return n;
}

int64_t kiln::detail::defaultBytesAccessed(Operation *op) {
  int64_t n = 0;
  for (Type t : op->getOperandTypes())
    n += byteSize(t);
  for (Type t : op->getResultTypes())
    n += byteSize(t);
  return n;
}

LogicalResult kiln::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                                    SmallVectorImpl<int64_t> &out) {
  std::vector<int64_t> r;
  if (!shape::broadcastShapes(a, b, r).empty())
    return failure();
  out.assign(r.begin(), r.end());
  return success();
}

/// Emits a failed shape rule of kiln/runtime/ShapeRules.h (an error string,
/// empty on success) at `loc`.
static LogicalResult checkRule(std::optional<Location> loc, const std::string &err) {
  if (err.empty())
    return success();
  return emitOptionalError(loc, err);
}

static std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleave(shape, os, ",");
  os << "]";
  return s;
}

LogicalResult kiln::detail::inferBroadcastTypes(std::optional<Location> loc,
                                                ArrayRef<Type> operands,
                                                bool boolResult,
                                                SmallVectorImpl<Type> &results) {
  SmallVector<int64_t> shape;
  Type elt = elementOf(operands.front());
  for (Type t : operands) {
    if (elementOf(t) != elt)
      return emitOptionalError(loc, "operands have different element types: ",
                               operands.front(), " and ", t);
    std::vector<int64_t> next;
    if (failed(checkRule(loc, shape::broadcastShapes(shape, shapeOf(t), next))))
      return failure();
    shape.assign(next.begin(), next.end());
  }
  Builder b(operands.front().getContext());
  results.push_back(tensorOf(shape, boolResult ? b.getI1Type() : elt));
  return success();
}

/// Checks that `axis` indexes a tensor of `rank` dims.
static LogicalResult checkAxis(std::optional<Location> loc, int64_t axis,
                               int64_t rank, const char *what = "axis") {
  return checkRule(loc, shape::checkAxis(axis, rank, what));
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult GeluOp::verify() {
  if (getApproximate() != "none" && getApproximate() != "tanh")
    return emitOpError("approximate must be \"none\" or \"tanh\", got \"")
           << getApproximate() << "\"";
  return success();
}

LogicalResult MagnitudePruneOp::verify() {
  float sp = getSparsity().convertToFloat();
  if (!(sp >= 0.0f && sp < 1.0f))
    return emitOpError("sparsity must be in [0, 1), got ") << sp;
  if (getStart() < 0 || getEnd() < getStart())
    return emitOpError("needs 0 <= start <= end, got start ")
           << getStart() << ", end " << getEnd();
  if (getEvery() < 1)
    return emitOpError("every must be at least 1, got ") << getEvery();
  return success();
}

/// Checks a fake quantization's scale and zero point against its input.
static LogicalResult verifyQuantParams(Operation *op, Type input, Type scale,
                                       Type zeroPoint, std::optional<int64_t> axis,
                                       int64_t qmin, int64_t qmax) {
  if (qmin >= qmax)
    return op->emitOpError("needs quant_min < quant_max, got ")
           << qmin << " and " << qmax;
  if (scale != zeroPoint)
    return op->emitOpError("scale ") << scale << " and zero_point " << zeroPoint
                                     << " differ in type";
  ArrayRef<int64_t> in = shapeOf(input), s = shapeOf(scale);
  if (!axis) {
    if (!s.empty())
      return op->emitOpError("without axis, scale must be a scalar, got ") << scale;
    return success();
  }
  if (*axis < 0 || *axis >= (int64_t)in.size())
    return op->emitOpError("axis ") << *axis << " is out of range for " << input;
  if (s.size() != 1 || s[0] != in[*axis])
    return op->emitOpError("scale ")
           << scale << " must have the input's size " << in[*axis]
           << " along axis " << *axis;
  return success();
}

LogicalResult ChannelPruneOp::verify() {
  auto q = cast<RankedTensorType>(getPruned().getType());
  if (q.getRank() != 1)
    return emitOpError("pruned must be [C], got ") << q;
  if (getNewPruned().getType() != q)
    return emitOpError("new_pruned must be pruned's type ")
           << q << ", got " << getNewPruned().getType();
  int64_t c = q.getDimSize(0);
  size_t n = getProducers().size();
  if (n == 0 || getAxes().size() != n || getBlocks().size() != n)
    return emitOpError("needs one axis and one block per producer");
  for (size_t i = 0; i < n; ++i) {
    ArrayRef<int64_t> s = shapeOf(getProducers()[i].getType());
    int64_t a = getAxes()[i], b = getBlocks()[i];
    if (a < 0 || a >= (int64_t)s.size() || b < 1 || s[a] != c * b)
      return emitOpError("producer ") << i << " " << getProducers()[i].getType()
                                     << " has no " << c << " channels of " << b
                                     << " along axis " << a;
  }
  if (getKeep() < 1 || getKeep() > c || getAt() < 0)
    return emitOpError("needs 1 <= keep <= C and at >= 0");
  return success();
}

LogicalResult FakeQuantOp::verify() {
  return verifyQuantParams(*this, getInput().getType(), getScale().getType(),
                           getZeroPoint().getType(), getAxis(), getQuantMin(),
                           getQuantMax());
}

LogicalResult MinMaxObserveOp::verify() {
  auto o = cast<RankedTensorType>(getObserver().getType());
  if (o.getShape() != ArrayRef<int64_t>{3} || !o.getElementType().isF32())
    return emitOpError("observer must be tensor<3xf32> ([min, max, n]), got ") << o;
  if (getNewObserver().getType() != o)
    return emitOpError("new_observer must have the observer's type");
  if (getQuantMin() >= getQuantMax())
    return emitOpError("needs quant_min < quant_max");
  float a = getAveraging().convertToFloat();
  if (!(a > 0.0f && a <= 1.0f))
    return emitOpError("averaging must be in (0, 1], got ") << a;
  if (getFreeze() < 0)
    return emitOpError("freeze must be non-negative");
  return success();
}

void MinMaxObserveOp::getStateUpdates(
    SmallVectorImpl<std::pair<unsigned, unsigned>> &updates) {
  updates.push_back({2, 2}); // observer
}

LogicalResult AbsMaxScaleOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getInput().getType());
  if (getAxis() < 0 || getAxis() >= (int64_t)in.size())
    return emitOpError("axis ") << getAxis() << " is out of range";
  auto r = cast<RankedTensorType>(getType());
  if (r.getShape() != ArrayRef<int64_t>{in[getAxis()]} ||
      r.getElementType() != cast<RankedTensorType>(getInput().getType()).getElementType())
    return emitOpError("result must be [") << in[getAxis()] << "] of the input's element type";
  if (getQuantMax() < 1)
    return emitOpError("quant_max must be positive");
  return success();
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  Type t = adaptor.getOnTrue().getType(), f = adaptor.getOnFalse().getType();
  if (elementOf(t) != elementOf(f))
    return emitOptionalError(loc, "on_true and on_false have different element "
                                  "types: ",
                             t, " and ", f);
  SmallVector<int64_t> s1, s2;
  if (failed(broadcastShapes(shapeOf(adaptor.getCond().getType()), shapeOf(t), s1)) ||
      failed(broadcastShapes(s1, shapeOf(f), s2)))
    return emitOptionalError(loc, "operand shapes do not broadcast");
  results.push_back(tensorOf(s2, elementOf(t)));
  return success();
}

//===----------------------------------------------------------------------===//
// Matmul and convolution
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  Type lt = adaptor.getLhs().getType(), rt = adaptor.getRhs().getType();
  ArrayRef<int64_t> l = shapeOf(lt), r = shapeOf(rt);
  if (l.size() < 2 || r.size() < 2)
    return emitOptionalError(loc, "operands need rank >= 2, got ", lt, " and ", rt);
  if (elementOf(lt) != elementOf(rt))
    return emitOptionalError(loc, "operands have different element types");
  int64_t m = l[l.size() - 2], kl = l.back();
  if (adaptor.getTransposeLhs())
    std::swap(m, kl);
  int64_t kr = r[r.size() - 2], n = r.back();
  if (adaptor.getTransposeRhs())
    std::swap(kr, n);
  if (kl != kr)
    return emitOptionalError(loc, "contracting dimensions differ: ", kl, " vs ", kr);
  SmallVector<int64_t> batch;
  if (failed(broadcastShapes(l.drop_back(2), r.drop_back(2), batch)))
    return emitOptionalError(loc, "batch dimensions do not broadcast");
  batch.push_back(m);
  batch.push_back(n);
  results.push_back(tensorOf(batch, elementOf(lt)));
  return success();
}

int64_t MatmulOp::getFlops() {
  ArrayRef<int64_t> l = shapeOf(getLhs().getType());
  int64_t k = getTransposeLhs() ? l[l.size() - 2] : l.back();
  return 2 * k * numElements(getType());
}

/// The window attributes of a conv, conv_transpose or pool op.
template <typename Adaptor>
static shape::WindowAttrs windowAttrs(Adaptor a) {
  shape::WindowAttrs w;
  w.strides = a.getStrides();
  w.dilations = a.getDilations();
  w.padding = a.getPadding();
  return w;
}

/// The result type of a conv or conv_transpose: ShapeRules.h's geometry.
static LogicalResult inferConv(std::optional<Location> loc, Type it, Type wt,
                               const shape::WindowAttrs &attrs, bool transposed,
                               SmallVectorImpl<Type> &results) {
  shape::WindowGeometry g;
  if (failed(checkRule(loc, shape::convGeometry(shapeOf(it), shapeOf(wt), attrs,
                                                transposed, g))))
    return failure();
  results.push_back(tensorOf(g.outShape(), elementOf(it)));
  return success();
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  shape::WindowAttrs attrs = windowAttrs(adaptor);
  attrs.groups = adaptor.getGroups();
  return inferConv(loc, adaptor.getInput().getType(), adaptor.getWeight().getType(),
                   attrs, /*transposed=*/false, results);
}

int64_t ConvOp::getFlops() {
  ArrayRef<int64_t> w = shapeOf(getWeight().getType());
  int64_t perOut = 1;
  for (int64_t d : w.drop_front(1))
    perOut *= d;
  return 2 * perOut * numElements(getType());
}

LogicalResult ConvTransposeOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &results) {
  shape::WindowAttrs attrs = windowAttrs(adaptor);
  attrs.outputPadding = adaptor.getOutputPadding();
  attrs.groups = adaptor.getGroups();
  return inferConv(loc, adaptor.getInput().getType(), adaptor.getWeight().getType(),
                   attrs, /*transposed=*/true, results);
}

int64_t ConvTransposeOp::getFlops() {
  ArrayRef<int64_t> w = shapeOf(getWeight().getType());
  int64_t perIn = 1;
  for (int64_t d : w.drop_front(1))
    perIn *= d;
  return 2 * perIn * numElements(getInput().getType());
}

/// The result type of a max or avg pool: ShapeRules.h's geometry.
template <typename Adaptor>
static LogicalResult inferPool(std::optional<Location> loc, Adaptor a,
                               SmallVectorImpl<Type> &results) {
  shape::WindowAttrs attrs = windowAttrs(a);
  attrs.kernel = a.getKernel();
  shape::WindowGeometry g;
  Type it = a.getInput().getType();
  if (failed(checkRule(loc, shape::poolGeometry(shapeOf(it), attrs, g))))
    return failure();
  results.push_back(tensorOf(g.outShape(), elementOf(it)));
  return success();
}

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &results) {
  return inferPool(loc, a, results);
}

LogicalResult AvgPoolOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &results) {
  ArrayRef<int64_t> ceilPad = a.getCeilPad();
  size_t spatial = shapeOf(a.getInput().getType()).size() - 2;
  if (!ceilPad.empty() && ceilPad.size() != spatial)
    return emitOptionalError(loc, "expected ", spatial, " ceil_pad values");
  return inferPool(loc, a, results);
}

//===----------------------------------------------------------------------===//
// Normalisation, softmax, dropout
//===----------------------------------------------------------------------===//

static LogicalResult checkChannelParams(std::optional<Location> loc, Type input,
                                        ValueRange params) {
  ArrayRef<int64_t> in = shapeOf(input);
  if (in.size() < 2)
    return emitOptionalError(loc, "input must have rank >= 2, got ", input);
  for (Value p : params)
    if (shapeOf(p.getType()) != ArrayRef<int64_t>{in[1]} ||
        elementOf(p.getType()) != elementOf(input))
      return emitOptionalError(loc, "expected a ", tensorOf({in[1]}, elementOf(input)),
                               " per-channel parameter, got ", p.getType());
  return success();
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &results) {
  if (failed(checkChannelParams(loc, a.getInput().getType(),
                                {a.getScale(), a.getBias(), a.getMean(), a.getVar()})))
    return failure();
  results.push_back(a.getInput().getType());
  return success();
}

LogicalResult BatchNormTrainOp::inferReturnTypes(MLIRContext *,
                                                 std::optional<Location> loc,
                                                 Adaptor a,
                                                 SmallVectorImpl<Type> &results) {
  if (failed(checkChannelParams(loc, a.getInput().getType(),
                                {a.getScale(), a.getBias(), a.getRunningMean(),
                                 a.getRunningVar()})))
    return failure();
  results.push_back(a.getInput().getType());
  results.push_back(a.getRunningMean().getType());
  results.push_back(a.getRunningVar().getType());
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &results) {
  Type it = a.getInput().getType();
  ArrayRef<int64_t> in = shapeOf(it);
  int64_t axis = a.getAxis();
  if (failed(checkAxis(loc, axis, in.size())))
    return failure();
  for (Value p : {a.getScale(), a.getBias()})
    if (shapeOf(p.getType()) != in.drop_front(axis))
      return emitOptionalError(loc, "scale and bias must have the normalised shape ",
                               shapeStr(in.drop_front(axis)), ", got ", p.getType());
  SmallVector<int64_t> stat(in.begin(), in.end());
  for (size_t i = axis; i < in.size(); ++i)
    stat[i] = 1;
  results.push_back(it);
  results.push_back(tensorOf(stat, elementOf(it)));
  results.push_back(tensorOf(stat, elementOf(it)));
  return success();
}

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &results) {
  if (failed(checkAxis(loc, a.getAxis(), shapeOf(a.getInput().getType()).size())))
    return failure();
  results.push_back(a.getInput().getType());
  return success();
}

LogicalResult LogSoftmaxOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc, Adaptor a,
                                             SmallVectorImpl<Type> &results) {
  if (failed(checkAxis(loc, a.getAxis(), shapeOf(a.getInput().getType()).size())))
    return failure();
  results.push_back(a.getInput().getType());
  return success();
}

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &results) {
  float ratio = a.getRatio().convertToFloat();
  if (!(ratio >= 0.0f && ratio < 1.0f))
    return emitOptionalError(loc, "ratio must be in [0, 1), got ", ratio);
  Type it = a.getInput().getType();
  results.push_back(it);
  results.push_back(tensorOf(shapeOf(it), IntegerType::get(ctx, 1)));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static LogicalResult inferReduce(std::optional<Location> loc, Type it,
                                 ArrayRef<int64_t> axes, bool keepdims, Type elt,
                                 SmallVectorImpl<Type> &results) {
  std::vector<int64_t> out;
  if (failed(checkRule(loc, shape::reducedShape(shapeOf(it), axes, keepdims, out))))
    return failure();
  results.push_back(tensorOf(out, elt ? elt : elementOf(it)));
  return success();
}

#define KILN_REDUCE_INFER(OP)                                                    \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, \
                                     Adaptor a, SmallVectorImpl<Type> &results) { \
    return inferReduce(loc, a.getInput().getType(), a.getAxes(), a.getKeepdims(), \
                       Type(), results);                                         \
  }
KILN_REDUCE_INFER(ReduceSumOp)
KILN_REDUCE_INFER(ReduceMeanOp)
KILN_REDUCE_INFER(ReduceMaxOp)
KILN_REDUCE_INFER(ReduceMinOp)
KILN_REDUCE_INFER(ReduceProdOp)
KILN_REDUCE_INFER(ReduceSumSquareOp)
#undef KILN_REDUCE_INFER

#define KILN_ARGREDUCE_INFER(OP)                                                 \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx,                           \
                                     std::optional<Location> loc, Adaptor a,     \
                                     SmallVectorImpl<Type> &results) {           \
    return inferReduce(loc, a.getInput().getType(), {a.getAxis()},               \
                       a.getKeepdims(), IntegerType::get(ctx, 64), results);     \
  }
KILN_ARGREDUCE_INFER(ArgMaxOp)
KILN_ARGREDUCE_INFER(ArgMinOp)
#undef KILN_ARGREDUCE_INFER

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type changes from ")
           << in.getElementType() << " to " << out.getElementType();
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << in << " (" << in.getNumElements() << " elements) to " << out << " ("
           << out.getNumElements() << " elements)";
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type changes");
  SmallVector<int64_t> b;
  if (in.getRank() > out.getRank() ||
      failed(broadcastShapes(in.getShape(), out.getShape(), b)) ||
      ArrayRef<int64_t>(b) != out.getShape())
    return emitOpError("cannot broadcast ") << in << " to " << out;
  return success();
}

int64_t ReshapeOp::getFlops() { return 0; }
int64_t BroadcastOp::getFlops() { return 0; }

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &results) {
  ArrayRef<int64_t> in = shapeOf(a.getInput().getType());
  ArrayRef<int64_t> perm = a.getPerm();
  if (perm.size() != in.size())
    return emitOptionalError(loc, "perm has ", perm.size(), " entries for rank ",
                             in.size());
  llvm::SmallSet<int64_t, 8> seen;
  SmallVector<int64_t> out;
  for (int64_t p : perm) {
    if (p < 0 || p >= (int64_t)in.size() || !seen.insert(p).second)
      return emitOptionalError(loc, "perm is not a permutation of 0..",
                               in.size() - 1);
    out.push_back(in[p]);
  }
  results.push_back(tensorOf(out, elementOf(a.getInput().getType())));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor a, SmallVectorImpl<Type> &results) {
  ArrayRef<int64_t> in = shapeOf(a.getInput().getType());
  ArrayRef<int64_t> starts = a.getStarts(), limits = a.getLimits(),
                    strides = a.getStrides();
  if (starts.size() != in.size() || limits.size() != in.size() ||
      strides.size() != in.size())
    return emitOptionalError(loc, "starts, limits and strides need ", in.size(),
                             " entries each");
  SmallVector<int64_t> out;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t s = starts[i], l = limits[i], st = strides[i];
    if (st == 0)
      return emitOptionalError(loc, "stride of dim ", i, " is 0");
    if (st > 0 ? (s < 0 || s > in[i] || l < 0 || l > in[i])
               : (s < 0 || s >= std::max<int64_t>(in[i], 1) || l < -1 ||
                  l >= in[i]))
      return emitOptionalError(loc, "slice bounds [", s, ", ", l, ") of dim ", i,
                               " are out of range for size ", in[i]);
    int64_t n = st > 0 ? (l > s ? (l - s + st - 1) / st : 0)
                       : (s > l ? (s - l + (-st) - 1) / (-st) : 0);
    out.push_back(n);
  }
  results.push_back(tensorOf(out, elementOf(a.getInput().getType())));
  return success();
}

int64_t SliceOp::getFlops() { return 0; }

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &results) {
  if (a.getInputs().empty())
    return emitOptionalError(loc, "needs at least one input");
  Type first = a.getInputs().front().getType();
  SmallVector<int64_t> out(shapeOf(first));
  int64_t axis = a.getAxis();
  if (failed(checkAxis(loc, axis, out.size())))
    return failure();
  for (Value v : a.getInputs().drop_front()) {
    ArrayRef<int64_t> s = shapeOf(v.getType());
    if (elementOf(v.getType()) != elementOf(first) || s.size() != out.size())
      return emitOptionalError(loc, "inputs differ in element type or rank");
    for (size_t i = 0; i < s.size(); ++i)
      if ((int64_t)i != axis && s[i] != out[i])
        return emitOptionalError(loc, "inputs differ in dim ", i, ": ", out[i],
                                 " vs ", s[i]);
    out[axis] += s[axis];
  }
  results.push_back(tensorOf(out, elementOf(first)));
  return success();
}

int64_t ConcatOp::getFlops() { return 0; }

LogicalResult PadOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor a, SmallVectorImpl<Type> &results) {
  ArrayRef<int64_t> in = shapeOf(a.getInput().getType());
  if (a.getLow().size() != in.size() || a.getHigh().size() != in.size())
    return emitOptionalError(loc, "low and high need ", in.size(), " entries each");
  StringRef mode = a.getMode();
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return emitOptionalError(loc, "mode must be constant, reflect or edge, got ",
                             mode);
  SmallVector<int64_t> out;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t n = in[i] + a.getLow()[i] + a.getHigh()[i];
    if (n < 0)
      return emitOptionalError(loc, "negative size in dim ", i);
    if (mode == "reflect" && (a.getLow()[i] >= in[i] || a.getHigh()[i] >= in[i]))
      return emitOptionalError(loc, "reflect padding of dim ", i,
                               " must be smaller than its size");
    out.push_back(n);
  }
  results.push_back(tensorOf(out, elementOf(a.getInput().getType())));
  return success();
}

int64_t PadOp::getFlops() { return 0; }
int64_t TransposeOp::getFlops() { return 0; }

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &results) {
  std::vector<int64_t> out;
  if (failed(checkRule(loc, shape::gatherShape(shapeOf(a.getInput().getType()),
                                               shapeOf(a.getIndices().getType()),
                                               a.getAxis(), out))))
    return failure();
  results.push_back(tensorOf(out, elementOf(a.getInput().getType())));
  return success();
}

int64_t GatherOp::getFlops() { return 0; }

LogicalResult GatherElementsOp::inferReturnTypes(MLIRContext *,
                                                 std::optional<Location> loc,
                                                 Adaptor a,
                                                 SmallVectorImpl<Type> &results) {
  std::vector<int64_t> out;
  if (failed(checkRule(loc, shape::gatherElementsShape(
                                shapeOf(a.getInput().getType()),
                                shapeOf(a.getIndices().getType()), a.getAxis(), out))))
    return failure();
  results.push_back(tensorOf(out, elementOf(a.getInput().getType())));
  return success();
}

int64_t GatherElementsOp::getFlops() { return 0; }

LogicalResult ScatterElementsOp::inferReturnTypes(MLIRContext *,
                                                  std::optional<Location> loc,
                                                  Adaptor a,
                                                  SmallVectorImpl<Type> &results) {
  if (elementOf(a.getData().getType()) != elementOf(a.getUpdates().getType()))
    return emitOptionalError(loc, "updates ", a.getUpdates().getType(),
                             " do not have the data's element type");
  if (failed(checkRule(loc, shape::checkScatterReduction(a.getReduction().str()))) ||
      failed(checkRule(loc, shape::scatterElementsShape(
                                shapeOf(a.getData().getType()),
                                shapeOf(a.getIndices().getType()),
                                shapeOf(a.getUpdates().getType()), a.getAxis()))))
    return failure();
  results.push_back(a.getData().getType());
  return success();
}

int64_t ScatterElementsOp::getFlops() { return 0; }

LogicalResult ScatterNDOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor a, SmallVectorImpl<Type> &results) {
  if (elementOf(a.getData().getType()) != elementOf(a.getUpdates().getType()))
    return emitOptionalError(loc, "updates ", a.getUpdates().getType(),
                             " do not have the data's element type");
  if (!elementOf(a.getIndices().getType()).isInteger(64))
    return emitOptionalError(loc, "indices must be i64, got ", a.getIndices().getType());
  if (failed(checkRule(loc, shape::checkScatterReduction(a.getReduction().str()))) ||
      failed(checkRule(loc, shape::scatterNDShape(shapeOf(a.getData().getType()),
                                                  shapeOf(a.getIndices().getType()),
                                                  shapeOf(a.getUpdates().getType())))))
    return failure();
  results.push_back(a.getData().getType());
  return success();
}

int64_t ScatterNDOp::getFlops() { return 0; }

LogicalResult TopKOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                       Adaptor a, SmallVectorImpl<Type> &results) {
  std::vector<int64_t> out;
  if (failed(checkRule(loc, shape::topkShape(shapeOf(a.getInput().getType()), a.getK(),
                                             a.getAxis(), out))))
    return failure();
  results.push_back(tensorOf(out, elementOf(a.getInput().getType())));
  results.push_back(tensorOf(out, IntegerType::get(ctx, 64)));
  return success();
}

// A comparison per element per step of a partial selection: n log k.
int64_t TopKOp::getFlops() {
  ArrayRef<int64_t> in = shapeOf(getInput().getType());
  int64_t n = 1;
  for (int64_t d : in)
    n *= d;
  int64_t k = std::max<int64_t>(getK(), 2);
  return n * (int64_t)std::ceil(std::log2((double)k));
}

LogicalResult CumSumOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor a, SmallVectorImpl<Type> &results) {
  if (failed(checkRule(loc, shape::checkAxis(a.getAxis(),
                                             shapeOf(a.getInput().getType()).size()))))
    return failure();
  results.push_back(a.getInput().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

static LogicalResult checkReduction(std::optional<Location> loc, StringRef r) {
  if (r != "mean" && r != "sum" && r != "none")
    return emitOptionalError(loc, "reduction must be mean, sum or none, got ", r);
  return success();
}

/// Shared by softmax_cross_entropy and nll_loss: logits [N, C, D...] (class
/// at class_axis), labels of the logits' shape without the class axis.
template <typename Adaptor>
static LogicalResult inferClassLoss(std::optional<Location> loc, Adaptor a,
                                    SmallVectorImpl<Type> &results) {
  Type lt = a.getLogits().getType();
  ArrayRef<int64_t> logits = shapeOf(lt);
  if (failed(checkReduction(loc, a.getReduction())))
    return failure();
  int64_t axis = a.getClassAxis();
  if (logits.size() < 1 || failed(checkAxis(loc, axis, logits.size(), "class_axis")))
    return failure();
  SmallVector<int64_t> labelShape(logits);
  labelShape.erase(labelShape.begin() + axis);
  if (shapeOf(a.getLabels().getType()) != ArrayRef<int64_t>(labelShape))
    return emitOptionalError(loc, "labels must have shape ", shapeStr(labelShape),
                             " for logits ", lt, ", got ", a.getLabels().getType());
  if (a.getWeight() &&
      shapeOf(a.getWeight().getType()) != ArrayRef<int64_t>{logits[axis]})
    return emitOptionalError(loc, "weight must have one entry per class (",
                             logits[axis], ")");
  if (a.getReduction() == "none")
    results.push_back(tensorOf(labelShape, elementOf(lt)));
  else
    results.push_back(tensorOf({}, elementOf(lt)));
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::inferReturnTypes(MLIRContext *,
                                                      std::optional<Location> loc,
                                                      Adaptor a,
                                                      SmallVectorImpl<Type> &results) {
  return inferClassLoss(loc, a, results);
}

LogicalResult NllLossOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &results) {
  return inferClassLoss(loc, a, results);
}


LogicalResult MseLossOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor a, SmallVectorImpl<Type> &results) {
  if (failed(checkReduction(loc, a.getReduction())))
    return failure();
  Type it = a.getInput().getType();
  if (it != a.getTarget().getType())
    return emitOptionalError(loc, "input ", it, " and target ",
                             a.getTarget().getType(), " differ");
  if (a.getReduction() == "none")
    results.push_back(it);
  else
    results.push_back(tensorOf({}, elementOf(it)));
  return success();
}


//===----------------------------------------------------------------------===//
// Gradient ops (KilnGradOps.td): the result is the forward operand's type,
// so the verifier checks that the forward op would have produced `dy`.
//===----------------------------------------------------------------------===//

/// The forward conv result shape for input `in`, weight `w` and the attrs.
template <typename GradOp>
static FailureOr<SmallVector<int64_t>> convForwardShape(GradOp op, ArrayRef<int64_t> in,
                                                        ArrayRef<int64_t> w) {
  shape::WindowAttrs attrs = windowAttrs(op);
  attrs.groups = op.getGroups();
  shape::WindowGeometry g;
  if (failed(checkRule(op.getLoc(), shape::convGeometry(in, w, attrs, false, g))))
    return failure();
  std::vector<int64_t> out = g.outShape();
  return SmallVector<int64_t>(out.begin(), out.end());
}

LogicalResult ConvInputGradOp::verify() {
  auto out = convForwardShape(*this, shapeOf(getType()), shapeOf(getWeight().getType()));
  if (failed(out))
    return failure();
  if (ArrayRef<int64_t>(*out) != shapeOf(getDy().getType()))
    return emitOpError("dy ") << getDy().getType() << " is not the conv result of "
                              << getType();
  return success();
}

LogicalResult ConvWeightGradOp::verify() {
  auto out = convForwardShape(*this, shapeOf(getInput().getType()), shapeOf(getType()));
  if (failed(out))
    return failure();
  if (ArrayRef<int64_t>(*out) != shapeOf(getDy().getType()))
    return emitOpError("dy ") << getDy().getType()
                              << " is not the conv result for weight " << getType();
  return success();
}

LogicalResult GatherGradOp::verify() {
  std::vector<int64_t> out;
  if (failed(checkRule(getLoc(), shape::gatherShape(shapeOf(getType()),
                                                    shapeOf(getIndices().getType()),
                                                    getAxis(), out))))
    return failure();
  if (ArrayRef<int64_t>(out) != shapeOf(getDy().getType()))
    return emitOpError("dy ") << getDy().getType() << " is not the gather result of "
                              << getType();
  return success();
}

LogicalResult GatherElementsGradOp::verify() {
  std::vector<int64_t> out;
  if (failed(checkRule(getLoc(), shape::gatherElementsShape(
                                     shapeOf(getType()), shapeOf(getIndices().getType()),
                                     getAxis(), out))))
    return failure();
  if (ArrayRef<int64_t>(out) != shapeOf(getDy().getType()))
    return emitOpError("dy ") << getDy().getType() << " does not have the indices' shape";
  if (getDy().getType().getElementType() != getType().getElementType())
    return emitOpError("dy ") << getDy().getType() << " is not of the result's element type";
  return success();
}

LogicalResult SliceGradOp::verify() {
  ArrayRef<int64_t> in = shapeOf(getType());
  if (getStarts().size() != in.size() || getLimits().size() != in.size() ||
      getStrides().size() != in.size())
    return emitOpError("starts, limits and strides need ") << in.size() << " entries each";
  SmallVector<int64_t> out;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t s = getStarts()[i], l = getLimits()[i], st = getStrides()[i];
    if (st == 0)
      return emitOpError("stride of dim ") << i << " is 0";
    out.push_back(st > 0 ? (l > s ? (l - s + st - 1) / st : 0)
                         : (s > l ? (s - l + (-st) - 1) / (-st) : 0));
  }
  if (ArrayRef<int64_t>(out) != shapeOf(getDy().getType()))
    return emitOpError("dy ") << getDy().getType() << " is not the slice result of "
                              << getType();
  return success();
}

void BatchNormTrainOp::getStateUpdates(
    SmallVectorImpl<std::pair<unsigned, unsigned>> &updates) {
  updates.push_back({3, 1}); // running_mean
  updates.push_back({4, 2}); // running_var
}

#define GET_OP_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnOps.cpp.inc"
