//===- AttachLoss.cpp - --kiln-attach-loss ----------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Makes @forward return the scalar loss first: an appended cross-entropy
// (against class indices, or with soft-labels against probability rows) or
// mse against a new labels argument, or a model output that already is the
// loss (docs/Training.md).
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNATTACHLOSSPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using kiln::LossKind;

namespace {

std::string resultName(func::FuncOp f, unsigned i) {
  if (auto n = f.getResultAttrOfType<StringAttr>(i, "onnx.name"))
    return n.getValue().str();
  return "output_" + std::to_string(i);
}

struct AttachLossPass
    : public kiln::impl::KilnAttachLossPassBase<AttachLossPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kForwardFuncName);
    if (!f || f.isExternal()) {
      m.emitError("--kiln-attach-loss: the module has no @forward function");
      return signalPassFailure();
    }
    if (failed(attach(f)))
      signalPassFailure();
  }

  FailureOr<unsigned> findOutput(func::FuncOp f, StringRef name, StringRef flag) {
    unsigned n = f.getNumResults();
    if (name.empty()) {
      if (n == 1)
        return 0u;
      std::string names;
      for (unsigned i = 0; i < n; ++i)
        names += (i ? ", " : "") + resultName(f, i);
      return f.emitError() << "the model has " << n << " outputs (" << names
                           << "); choose one with " << flag;
    }
    for (unsigned i = 0; i < n; ++i)
      if (resultName(f, i) == name)
        return i;
    return f.emitError() << flag << ": the model has no output '" << name << "'";
  }

  /// mean over the positions of -sum_c y_c * log_softmax(z)_c, the class
  /// on the last axis, from differentiable ops (autodiff needs nothing new;
  /// a one-hot y gives softmax_cross_entropy's value).
  static Value softCrossEntropy(OpBuilder &b, Location loc, Value logits,
                                Value labels) {
    auto t = cast<RankedTensorType>(logits.getType());
    int64_t classAxis = t.getRank() - 1;
    Value logp = kiln::LogSoftmaxOp::create(b, loc, logits,
                                            b.getI64IntegerAttr(classAxis));
    Value prod = kiln::MulOp::create(b, loc, labels, logp);
    Value perPos = kiln::ReduceSumOp::create(
        b, loc, prod, b.getDenseI64ArrayAttr({classAxis}), b.getBoolAttr(false));
    SmallVector<int64_t> all(classAxis);
    for (int64_t d = 0; d < classAxis; ++d)
      all[d] = d;
    Value mean = kiln::ReduceMeanOp::create(
        b, loc, perPos, b.getDenseI64ArrayAttr(all), b.getBoolAttr(false));
    return kiln::NegOp::create(b, loc, mean.getType(), mean);
  }

  LogicalResult attach(func::FuncOp f) {
    MLIRContext *ctx = f.getContext();
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    SmallVector<Value> results(ret.getOperands());
    SmallVector<DictionaryAttr> resAttrs;
    f.getAllResultAttrs(resAttrs);
    OpBuilder b(ret);
    Value lossValue;
    int keepIndex = -1; // the output that became the loss (dropped from the rest)

    if (loss == LossKind::Output) {
      auto idx = findOutput(f, lossOutput, "--loss-output");
      if (failed(idx))
        return failure();
      Value v = results[*idx];
      auto t = cast<RankedTensorType>(v.getType());
      if (t.getNumElements() != 1 || !isa<FloatType>(t.getElementType()))
        return f.emitError() << "--loss-output: output '" << resultName(f, *idx)
                             << "' has type " << t
                             << "; the loss must be a floating-point scalar";
      if (t.getRank() != 0)
        v = kiln::ReshapeOp::create(b, v.getLoc(),
                                    RankedTensorType::get({}, t.getElementType()), v);
      lossValue = v;
      keepIndex = *idx;
    } else {
      auto idx = findOutput(f, logits, "--logits");
      if (failed(idx))
        return failure();
      Value out = results[*idx];
      auto t = cast<RankedTensorType>(out.getType());
      if (!isa<FloatType>(t.getElementType()) || t.getRank() < 1)
        return f.emitError()
               << "--loss " << kiln::stringifyLossKind(loss) << ": output '"
               << resultName(f, *idx) << "' has type " << t
               << "; it needs floating-point values of rank >= 1";
      for (unsigned i = 0; i < f.getNumArguments(); ++i)
        if (auto n = f.getArgAttrOfType<StringAttr>(i, "onnx.name"))
          if (n.getValue() == labels)
            return f.emitError() << "--labels: the model already has an input or "
                                    "parameter named '" << labels << "'";
      Type labelType;
      if (loss == LossKind::CrossEntropy) {
        if (t.getRank() < 2)
          return f.emitError() << "--loss cross-entropy: output '"
                               << resultName(f, *idx) << "' has type " << t
                               << "; logits need a batch and a class axis";
        labelType = softLabels ? Type(t)
                               : RankedTensorType::get(t.getShape().drop_back(),
                                                       IntegerType::get(ctx, 64));
      } else {
        if (softLabels)
          return f.emitError() << "--soft-labels goes with --loss cross-entropy";
        labelType = t;
      }
      unsigned pos = 0;
      while (pos < f.getNumArguments() && !kiln::isParam(f, pos))
        ++pos;
      NamedAttrList attrs;
      attrs.set("onnx.name", StringAttr::get(ctx, labels));
      attrs.set(kiln::KilnDialect::getLabelsAttrName(), UnitAttr::get(ctx));
      if (failed(f.insertArgument(pos, labelType, attrs.getDictionary(ctx),
                                  f.getLoc())))
        return failure();
      Value lab = f.getArgument(pos);
      Location loc = NameLoc::get(StringAttr::get(ctx, "loss"));
      if (loss == LossKind::CrossEntropy && softLabels)
        lossValue = softCrossEntropy(b, loc, out, lab);
      else if (loss == LossKind::CrossEntropy)
        lossValue = kiln::SoftmaxCrossEntropyOp::create(
            b, loc, out, lab, Value(), b.getStringAttr("mean"), IntegerAttr(),
            b.getI64IntegerAttr(t.getRank() - 1));
      else
        lossValue =
            kiln::MseLossOp::create(b, loc, out, lab, b.getStringAttr("mean"));
    }

    SmallVector<Value> newResults = {lossValue};
    NamedAttrList lossAttrs;
    lossAttrs.set("onnx.name", StringAttr::get(ctx, "loss"));
    lossAttrs.set(kiln::KilnDialect::getLossAttrName(), UnitAttr::get(ctx));
    SmallVector<DictionaryAttr> newAttrs = {lossAttrs.getDictionary(ctx)};
    for (unsigned i = 0; i < results.size(); ++i) {
      if ((int)i == keepIndex)
        continue;
      newResults.push_back(results[i]);
      newAttrs.push_back(resAttrs[i] ? resAttrs[i] : DictionaryAttr::get(ctx));
    }
    func::ReturnOp::create(b, ret.getLoc(), newResults);
    ret.erase();
    SmallVector<Type> types;
    for (Value v : newResults)
      types.push_back(v.getType());
    f.setType(FunctionType::get(ctx, f.getArgumentTypes(), types));
    f.setAllResultAttrs(newAttrs);
    return success();
  }
};

} // namespace
