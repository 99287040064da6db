//===- ONNXToKiln.h - the onnx -> kiln pattern registry ---------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// `--convert-onnx-to-kiln` is a registry of patterns keyed by (domain, op
// type, opset range). A pattern receives the node and a NodeRewriter, which
// gives typed access to the node's inputs and attributes, creates kiln ops
// with their types checked and folded, and reports errors that name the
// node. Patterns are grouped by family in lib/Conversion/ONNXToKiln/.
//===----------------------------------------------------------------------===//
#ifndef KILN_CONVERSION_ONNXTOKILN_ONNXTOKILN_H
#define KILN_CONVERSION_ONNXTOKILN_ONNXTOKILN_H

#include "kiln/Support/ONNXOrigin.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Dialect/ONNX/IR/ONNXOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace kiln {

class NodeRewriter;

/// Converts one node; on failure it has reported an error through the
/// rewriter.
using ONNXConvertFn = mlir::LogicalResult (*)(onnx::NodeOp node, NodeRewriter &rw);

/// One conversion: ops of `opType` in `domain` ("" is ai.onnx) for opsets in
/// [minOpset, maxOpset].
struct ONNXPattern {
  llvm::StringRef domain;
  llvm::StringRef opType;
  int64_t minOpset;
  int64_t maxOpset;
  ONNXConvertFn convert;
};

/// All patterns, looked up by (domain, op type, opset).
class ONNXPatternRegistry {
public:
  void add(llvm::StringRef opType, int64_t minOpset, int64_t maxOpset,
           ONNXConvertFn fn, llvm::StringRef domain = "");
  /// The pattern for a node, or null.
  const ONNXPattern *lookup(llvm::StringRef domain, llvm::StringRef opType,
                            int64_t opset) const;
  /// True if some opset of the op type has a pattern.
  bool knowsOpType(llvm::StringRef domain, llvm::StringRef opType) const;
  const std::vector<ONNXPattern> &patterns() const { return all; }

private:
  std::vector<ONNXPattern> all;
};

/// The registry with every pattern Kiln has (built once).
const ONNXPatternRegistry &getONNXPatternRegistry();

void populateONNXElementwisePatterns(ONNXPatternRegistry &registry);
void populateONNXLinalgPatterns(ONNXPatternRegistry &registry);
void populateONNXNNPatterns(ONNXPatternRegistry &registry);
void populateONNXShapePatterns(ONNXPatternRegistry &registry);
void populateONNXTrainingPatterns(ONNXPatternRegistry &registry);
void populateONNXQuantizePatterns(ONNXPatternRegistry &registry);

/// What a pattern uses to read a node and build its replacement.
class NodeRewriter {
public:
  NodeRewriter(onnx::NodeOp node, mlir::OpBuilder &builder)
      : node(node), b(builder),
        loc(withONNXOpType(node.getLoc(), node.getOpType())) {}

  onnx::NodeOp getNode() { return node; }
  mlir::OpBuilder &builder() { return b; }
  mlir::Location getLoc() { return loc; }
  int64_t opset() { return node.getOpset(); }

  //===--- inputs ---------------------------------------------------------===//
  unsigned numInputs() { return node.getInputs().size(); }
  /// Input `i`, or null when it is absent or omitted (`onnx.none`).
  mlir::Value input(unsigned i);
  /// Input `i`, which must be present and a static ranked tensor.
  mlir::FailureOr<mlir::Value> required(unsigned i);
  static mlir::RankedTensorType typeOf(mlir::Value v) {
    return mlir::cast<mlir::RankedTensorType>(v.getType());
  }
  static int64_t rankOf(mlir::Value v) { return typeOf(v).getRank(); }
  static llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) {
    return typeOf(v).getShape();
  }
  static mlir::Type elementOf(mlir::Value v) { return typeOf(v).getElementType(); }
  /// The integer values of a constant input (a shape, axes, pads...).
  mlir::FailureOr<llvm::SmallVector<int64_t>> constInts(unsigned i,
                                                        llvm::StringRef what);
  /// The float values of a constant input (e.g. Clip's bounds).
  mlir::FailureOr<llvm::SmallVector<double>> constFloats(unsigned i,
                                                         llvm::StringRef what);

  //===--- attributes -----------------------------------------------------===//
  bool hasAttr(llvm::StringRef name) { return (bool)node.getONNXAttr(name); }
  /// INT attribute; errors (and returns failure) on a wrong type.
  mlir::FailureOr<int64_t> intAttr(llvm::StringRef name, int64_t dflt);
  mlir::FailureOr<float> floatAttr(llvm::StringRef name, float dflt);
  mlir::FailureOr<std::string> strAttr(llvm::StringRef name, llvm::StringRef dflt);
  /// INTS attribute, or `dflt` when absent.
  mlir::FailureOr<llvm::SmallVector<int64_t>>
  intsAttr(llvm::StringRef name, llvm::ArrayRef<int64_t> dflt = {});

  //===--- building -------------------------------------------------------===//
  /// Creates a kiln op whose result types are inferred, after checking that
  /// inference succeeds (the error names the node otherwise), then folds it.
  template <typename OpTy>
  mlir::FailureOr<mlir::Operation *>
  createOp(mlir::ValueRange operands,
           llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    mlir::MLIRContext *ctx = b.getContext();
    mlir::DictionaryAttr dict = mlir::DictionaryAttr::get(ctx, attrs);
    typename OpTy::Properties props;
    if (mlir::failed(OpTy::setPropertiesFromAttr(
            props, dict, [&]() { return mlir::emitError(loc); })))
      return mlir::failure();
    // Attributes the pattern left out take their declared defaults, as they
    // do when the op itself is created (inference reads them).
    OpTy::populateDefaultProperties(
        mlir::OperationName(OpTy::getOperationName(), ctx), props);
    llvm::SmallVector<mlir::Type> types;
    if (mlir::failed(OpTy::inferReturnTypes(ctx, loc, operands, dict,
                                            mlir::OpaqueProperties(&props), {},
                                            types)))
      return mlir::failure();
    return finish(OpTy::getOperationName(), operands, attrs, types);
  }
  /// As createOp, for a single-result op; returns its (possibly folded) value.
  template <typename OpTy>
  mlir::FailureOr<mlir::Value> create(mlir::ValueRange operands,
                                      llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    mlir::FailureOr<mlir::Operation *> op = createOp<OpTy>(operands, attrs);
    if (mlir::failed(op))
      return mlir::failure();
    return fold(*op).front();
  }

  mlir::Value constant(mlir::ElementsAttr value);
  /// A rank-0 constant of element type `elt`.
  mlir::Value scalar(double value, mlir::Type elt);
  /// A 1-D i64 constant.
  mlir::Value i64s(llvm::ArrayRef<int64_t> values);
  mlir::FailureOr<mlir::Value> reshape(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::FailureOr<mlir::Value> broadcast(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::Value cast(mlir::Value v, mlir::Type elt);
  mlir::FailureOr<mlir::Value> transpose(mlir::Value v, llvm::ArrayRef<int64_t> perm);

  mlir::NamedAttribute attr(llvm::StringRef name, mlir::Attribute value) {
    return b.getNamedAttr(name, value);
  }
  mlir::NamedAttribute i64Attr(llvm::StringRef name, int64_t v) {
    return attr(name, b.getI64IntegerAttr(v));
  }
  mlir::NamedAttribute f32Attr(llvm::StringRef name, float v) {
    return attr(name, b.getF32FloatAttr(v));
  }
  mlir::NamedAttribute arrayAttr(llvm::StringRef name, llvm::ArrayRef<int64_t> v) {
    return attr(name, b.getDenseI64ArrayAttr(v));
  }

  //===--- results and errors ---------------------------------------------===//
  /// Replaces the node's results; `values` may be shorter than the node's
  /// results only when the missing ones are unused.
  mlir::LogicalResult replace(mlir::ValueRange values);
  bool replaced() { return didReplace; }
  /// Reports `message` against the node and returns failure.
  mlir::LogicalResult error(const llvm::Twine &message);
  /// Normalises a possibly negative axis for `rank`.
  mlir::FailureOr<int64_t> axis(int64_t axis, int64_t rank, llvm::StringRef what = "axis");

private:
  mlir::Operation *finish(llvm::StringRef name, mlir::ValueRange operands,
                          llvm::ArrayRef<mlir::NamedAttribute> attrs,
                          llvm::ArrayRef<mlir::Type> types);
  llvm::SmallVector<mlir::Value> fold(mlir::Operation *op);

  onnx::NodeOp node;
  mlir::OpBuilder &b;
  mlir::Location loc;
  bool didReplace = false;
};

} // namespace kiln

#endif // KILN_CONVERSION_ONNXTOKILN_ONNXTOKILN_H
