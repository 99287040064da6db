//===- ONNXToKiln.cpp - the --convert-onnx-to-kiln driver -------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The pattern registry, the NodeRewriter every pattern builds with, and the
// pass. The pass visits nodes in graph (block) order rather than through the
// greedy driver: each pattern then sees its operands already converted to
// statically shaped kiln values, and the constant-folded shape subgraphs
// feed the Reshape/Expand/Slice patterns that need their values.
//===----------------------------------------------------------------------===//
#include "kiln/Conversion/ONNXToKiln/ONNXToKiln.h"
#include "kiln/Conversion/Passes.h"
#include "kiln/Support/TensorSize.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/Support/FormatVariadic.h"

namespace kiln {
#define GEN_PASS_DEF_CONVERTONNXTOKILNPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

void ONNXPatternRegistry::add(StringRef opType, int64_t minOpset, int64_t maxOpset,
                              ONNXConvertFn fn, StringRef domain) {
  all.push_back({domain, opType, minOpset, maxOpset, fn});
}

const ONNXPattern *ONNXPatternRegistry::lookup(StringRef domain, StringRef opType,
                                               int64_t opset) const {
  for (const ONNXPattern &p : all)
    if (p.domain == domain && p.opType == opType && p.minOpset <= opset &&
        opset <= p.maxOpset)
      return &p;
  return nullptr;
}

bool ONNXPatternRegistry::knowsOpType(StringRef domain, StringRef opType) const {
  return llvm::any_of(all, [&](const ONNXPattern &p) {
    return p.domain == domain && p.opType == opType;
  });
}

const ONNXPatternRegistry &kiln::getONNXPatternRegistry() {
  static const ONNXPatternRegistry registry = [] {
    ONNXPatternRegistry r;
    populateONNXElementwisePatterns(r);
    populateONNXLinalgPatterns(r);
    populateONNXNNPatterns(r);
    populateONNXShapePatterns(r);
    populateONNXTrainingPatterns(r);
    populateONNXQuantizePatterns(r);
    return r;
  }();
  return registry;
}

//===----------------------------------------------------------------------===//
// NodeRewriter
//===----------------------------------------------------------------------===//

Value NodeRewriter::input(unsigned i) {
  if (i >= numInputs())
    return {};
  Value v = node.getInputs()[i];
  if (isa<NoneType>(v.getType()))
    return {};
  return v;
}

FailureOr<Value> NodeRewriter::required(unsigned i) {
  Value v = input(i);
  if (!v)
    return error("input " + Twine(i) + " is required");
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape())
    return error("input " + Twine(i) + " has no static shape (" +
                 llvm::formatv("{0}", v.getType()).str() +
                 "); fix the input dimensions with --dim NAME=N or --batch-size N");
  return v;
}

template <typename T>
static FailureOr<SmallVector<T>> readConst(NodeRewriter &rw, unsigned i,
                                           StringRef what) {
  Value v = rw.input(i);
  if (!v)
    return rw.error(what + " (input " + Twine(i) + ") is missing");
  DenseElementsAttr dense;
  if (!matchPattern(v, m_Constant(&dense)))
    return rw.error(what + " (input " + Twine(i) +
                    ") must be a constant or computable from constants");
  SmallVector<T> out;
  if (isa<FloatType>(dense.getElementType())) {
    for (APFloat f : dense.getValues<APFloat>()) {
      bool lost;
      f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      out.push_back((T)f.convertToDouble());
    }
  } else {
    bool zext = dense.getElementType().isInteger(1) ||
                dense.getElementType().isUnsignedInteger();
    for (APInt x : dense.getValues<APInt>())
      out.push_back((T)(zext ? (int64_t)x.getZExtValue() : x.getSExtValue()));
  }
  return out;
}

FailureOr<SmallVector<int64_t>> NodeRewriter::constInts(unsigned i, StringRef what) {
  return readConst<int64_t>(*this, i, what);
}

FailureOr<SmallVector<double>> NodeRewriter::constFloats(unsigned i, StringRef what) {
  return readConst<double>(*this, i, what);
}

FailureOr<int64_t> NodeRewriter::intAttr(StringRef name, int64_t dflt) {
  Attribute a = node.getONNXAttr(name);
  if (!a)
    return dflt;
  if (auto i = dyn_cast<IntegerAttr>(a))
    return i.getInt();
  return error("attribute '" + name + "' must be an int");
}

FailureOr<float> NodeRewriter::floatAttr(StringRef name, float dflt) {
  Attribute a = node.getONNXAttr(name);
  if (!a)
    return dflt;
  if (auto f = dyn_cast<FloatAttr>(a))
    return (float)f.getValueAsDouble();
  return error("attribute '" + name + "' must be a float");
}

FailureOr<std::string> NodeRewriter::strAttr(StringRef name, StringRef dflt) {
  Attribute a = node.getONNXAttr(name);
  if (!a)
    return dflt.str();
  if (auto s = dyn_cast<StringAttr>(a))
    return s.getValue().str();
  return error("attribute '" + name + "' must be a string");
}

FailureOr<SmallVector<int64_t>> NodeRewriter::intsAttr(StringRef name,
                                                       ArrayRef<int64_t> dflt) {
  Attribute a = node.getONNXAttr(name);
  if (!a)
    return SmallVector<int64_t>(dflt);
  auto arr = dyn_cast<ArrayAttr>(a);
  if (!arr)
    return error("attribute '" + name + "' must be a list of ints");
  SmallVector<int64_t> out;
  for (Attribute e : arr) {
    auto i = dyn_cast<IntegerAttr>(e);
    if (!i)
      return error("attribute '" + name + "' must be a list of ints");
    out.push_back(i.getInt());
  }
  return out;
}

Operation *NodeRewriter::finish(StringRef name, ValueRange operands,
                                ArrayRef<NamedAttribute> attrs, ArrayRef<Type> types) {
  OperationState state(loc, name);
  state.addOperands(operands);
  state.addAttributes(attrs);
  state.addTypes(types);
  return b.create(state);
}

SmallVector<Value> NodeRewriter::fold(Operation *op) {
  SmallVector<Value> results;
  if (succeeded(b.tryFold(op, results)) && !results.empty()) {
    op->erase();
    return results;
  }
  return SmallVector<Value>(op->getResults());
}

Value NodeRewriter::constant(ElementsAttr value) {
  return ConstantOp::create(b, loc, value);
}

Value NodeRewriter::scalar(double value, Type elt) {
  auto type = RankedTensorType::get({}, elt);
  if (isa<FloatType>(elt))
    return constant(DenseElementsAttr::get(type, b.getFloatAttr(elt, value)));
  return constant(DenseElementsAttr::get(type, b.getIntegerAttr(elt, (int64_t)value)));
}

Value NodeRewriter::i64s(ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({(int64_t)values.size()}, b.getI64Type());
  return constant(DenseElementsAttr::get(type, values));
}

FailureOr<Value> NodeRewriter::reshape(Value v, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, elementOf(v));
  if (type.getNumElements() != typeOf(v).getNumElements())
    return error(llvm::formatv("cannot reshape {0} to {1}", v.getType(), type).str());
  if (type == v.getType())
    return v;
  Operation *op = ReshapeOp::create(b, loc, type, v);
  return fold(op).front();
}

FailureOr<Value> NodeRewriter::broadcast(Value v, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, elementOf(v));
  SmallVector<int64_t> out;
  if (rankOf(v) > (int64_t)shape.size() ||
      failed(broadcastShapes(shapeOf(v), shape, out)) || ArrayRef<int64_t>(out) != shape)
    return error(llvm::formatv("cannot broadcast {0} to {1}", v.getType(), type).str());
  if (type == v.getType())
    return v;
  Operation *op = BroadcastOp::create(b, loc, type, v);
  return fold(op).front();
}

Value NodeRewriter::cast(Value v, Type elt) {
  if (elementOf(v) == elt)
    return v;
  Operation *op =
      CastOp::create(b, loc, RankedTensorType::get(shapeOf(v), elt), v);
  return fold(op).front();
}

FailureOr<Value> NodeRewriter::transpose(Value v, ArrayRef<int64_t> perm) {
  return create<TransposeOp>({v}, {arrayAttr("perm", perm)});
}

LogicalResult NodeRewriter::replace(ValueRange values) {
  if (values.size() > node.getNumResults())
    return error("internal: pattern produced too many results");
  for (unsigned i = values.size(), e = node.getNumResults(); i < e; ++i)
    if (!node.getResult(i).use_empty())
      return error("output " + Twine(i) + " is not supported");
  // `values` may be shorter than the node's results (unused trailing
  // outputs): walk the shorter of the two.
  for (unsigned i = 0, e = values.size(); i < e; ++i) {
    Value res = node.getResult(i), v = values[i];
    // Where ONNX shape inference knew a static type it must agree with ours.
    auto old = dyn_cast<RankedTensorType>(res.getType());
    auto now = dyn_cast<RankedTensorType>(v.getType());
    if (!now)
      return error("internal: pattern produced a non-tensor result");
    // Shapes computed here (ConstantOfShape's, Expand's, Reshape's) come
    // from the model's values: size them before anything allocates them.
    int64_t bytes;
    if (now.hasStaticShape() && !checkedTypeBytes(now, bytes))
      return error(tooLargeText("output " + std::to_string(i), now));
    if (old && old.hasStaticShape() &&
        (old.getShape() != now.getShape() ||
         old.getElementType() != now.getElementType()))
      return error(llvm::formatv("result type {0} disagrees with ONNX shape "
                                 "inference ({1})",
                                 now, old)
                       .str());
    res.replaceAllUsesWith(v);
    // The ONNX value name, for annotations by name (kiln.onnx_names on the
    // kiln op that now computes it; kiln-compile --shard).
    auto names = node->getAttrOfType<ArrayAttr>("onnx.outputs");
    Operation *def = v.getDefiningOp();
    auto name = names && i < names.size() ? llvm::dyn_cast<StringAttr>(names[i]) : StringAttr();
    if (name && !name.getValue().empty() && def &&
        isa<KilnDialect>(def->getDialect()) && !isa<ConstantOp>(def)) {
      StringRef key = KilnDialect::getOnnxNamesAttrName();
      SmallVector<Attribute> all(def->getNumResults(), b.getStringAttr(""));
      if (auto had = def->getAttrOfType<ArrayAttr>(key))
        for (auto [k, a] : llvm::enumerate(had))
          all[k] = a;
      all[llvm::cast<OpResult>(v).getResultNumber()] = name;
      def->setAttr(key, b.getArrayAttr(all));
    }
  }
  didReplace = true;
  return success();
}

LogicalResult NodeRewriter::error(const Twine &message) {
  return emitError(loc) << message;
}

FailureOr<int64_t> NodeRewriter::axis(int64_t axis, int64_t rank, StringRef what) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return error(what + " " + Twine(axis) + " is out of range for rank " +
                 Twine(rank));
  return a;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {
struct ConvertONNXToKilnPass
    : public kiln::impl::ConvertONNXToKilnPassBase<ConvertONNXToKilnPass> {
  void runOnOperation() override {
    const ONNXPatternRegistry &registry = getONNXPatternRegistry();
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(convertFunction(func, registry)))
        return signalPassFailure();
  }

  LogicalResult convertFunction(func::FuncOp func,
                                const ONNXPatternRegistry &registry) {
    if (func.isExternal())
      return success();
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
      if (auto c = dyn_cast<onnx::ConstantOp>(op)) {
        b.setInsertionPoint(c);
        c.replaceAllUsesWith(ConstantOp::create(b, c.getLoc(), c.getValue()).getResult());
        c.erase();
        continue;
      }
      auto node = dyn_cast<onnx::NodeOp>(op);
      if (!node)
        continue;
      if (failed(convertNode(node, registry, b)))
        return failure();
      ++numConverted;
    }
    // Drop what the graph no longer uses (omitted-input markers, folded-away
    // shape computations), last use first.
    Block &body = func.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (op.use_empty() && isPure(&op) && !op.hasTrait<OpTrait::IsTerminator>())
        op.erase();
    Operation *leftover = nullptr;
    func.walk([&](Operation *op) {
      if (isa<onnx::ONNXDialect>(op->getDialect()) && !leftover)
        leftover = op;
    });
    if (leftover)
      return leftover->emitError("onnx op left after conversion");
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    func.setType(FunctionType::get(ctx, func.getArgumentTypes(),
                                   ret.getOperandTypes()));
    return success();
  }

  LogicalResult convertNode(onnx::NodeOp node, const ONNXPatternRegistry &registry,
                            OpBuilder &b) {
    std::string name = node.getNodeName();
    // A node whose name was lost (a .mlir printed without locations) is
    // named by its position in that file instead of an empty ''.
    std::string prefix =
        (name.empty() ? "node at " + node.getNodeKey() + " (" + node.getOpType().str() + "): "
                      : ("node '" + name + "' (" + node.getOpType() + "): ").str());
    StringRef domain = node.getDomain();
    const ONNXPattern *pattern =
        registry.lookup(domain, node.getOpType(), node.getOpset());
    if (!pattern) {
      if (registry.knowsOpType(domain, node.getOpType()))
        return node.emitError(prefix) << "opset " << node.getOpset()
                                      << " of this op is not supported";
      return node.emitError(prefix)
             << "unsupported op '" << node.getOpType() << "'"
             << (domain.empty() ? "" : " in domain '" + domain.str() + "'");
    }
    b.setInsertionPoint(node);
    NodeRewriter rw(node, b);
    // Collect the pattern's first error and report it once, prefixed with the
    // node, so every failure is a single line naming node and op.
    std::string first;
    LogicalResult result = success();
    {
      ScopedDiagnosticHandler handler(&getContext(), [&](Diagnostic &d) {
        if (d.getSeverity() == DiagnosticSeverity::Error && first.empty())
          first = d.str();
        return success();
      });
      result = pattern->convert(node, rw);
    }
    if (failed(result) || !rw.replaced())
      return node.emitError(prefix)
             << (first.empty() ? std::string("conversion failed") : first);
    node.erase();
    return success();
  }
};
} // namespace
