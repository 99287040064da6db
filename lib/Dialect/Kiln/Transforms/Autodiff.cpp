//===- Autodiff.cpp - --kiln-autodiff ---------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Reverse-mode differentiation of @forward into @train_step. The pass knows
// no op: which values carry gradients follows from the types and the def-use
// graph, each op's rule is its DifferentiableOpInterface::buildVJP (the sweep
// is kiln::buildGradients, KilnGradients.h), and the state an op updates
// comes from its StatefulOpInterface.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"

#include "kiln/Dialect/Kiln/IR/KilnGradients.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Regex.h"

namespace kiln {
#define GEN_PASS_DEF_KILNAUTODIFFPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using kiln::argName;
using kiln::ParamRole;

namespace {

bool isFloatTensor(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && isa<FloatType>(r.getElementType());
}

struct AutodiffPass : public kiln::impl::KilnAutodiffPassBase<AutodiffPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kForwardFuncName);
    if (!f || f.isExternal()) {
      m.emitError("--kiln-autodiff: the module has no @forward function");
      return signalPassFailure();
    }
    if (m.lookupSymbol(kiln::kTrainStepFuncName)) {
      m.emitError("--kiln-autodiff: the module already has a @train_step");
      return signalPassFailure();
    }
    // A misspelt testing aid would silently break nothing.
    if (!breakVJP.empty() &&
        !RegisteredOperationName::lookup(breakVJP, m.getContext())) {
      m.emitError("--kiln-autodiff: break-vjp names no op: '")
          << breakVJP << "' (a kiln op name, as kiln.relu)";
      return signalPassFailure();
    }
    if (failed(differentiate(f)))
      signalPassFailure();
  }

  LogicalResult differentiate(func::FuncOp forward);
};

LogicalResult AutodiffPass::differentiate(func::FuncOp forward) {
  MLIRContext *ctx = forward.getContext();
  if (forward.getNumResults() < 1 || !kiln::isLoss(forward, 0))
    return forward.emitError("@forward's result 0 is not a loss; run "
                             "--kiln-attach-loss first");
  auto lossType = dyn_cast<RankedTensorType>(forward.getResultTypes()[0]);
  if (!lossType || lossType.getRank() != 0 || !isFloatTensor(lossType))
    return forward.emitError("the loss must be a floating-point scalar, got ")
           << forward.getResultTypes()[0];
  if (!forward.getBody().hasOneBlock())
    return forward.emitError("@forward must have one block");

  llvm::Regex freezeRe(freeze);
  std::string reErr;
  if (!freeze.empty() && !freezeRe.isValid(reErr))
    return forward.emitError("--freeze: invalid regular expression '")
           << freeze << "': " << reErr;

  // Work on a copy named @train_step; @forward stays for evaluation.
  auto f = cast<func::FuncOp>(forward->clone());
  f.setName(kiln::kTrainStepFuncName);
  ModuleOp(forward->getParentOp()).insert(std::next(Block::iterator(forward)), f);
  Block &body = f.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);

  // Values the loss depends on.
  llvm::DenseSet<Value> useful = {loss};
  for (Operation *op : llvm::reverse(ops))
    if (llvm::any_of(op->getResults(), [&](Value r) { return useful.count(r); }))
      for (Value v : op->getOperands())
        useful.insert(v);

  // Trainable: float params, not frozen, that reach the loss.
  SmallVector<unsigned> trainable;
  llvm::DenseSet<Value> active;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    if (!kiln::isParam(f, i))
      continue;
    BlockArgument a = f.getArgument(i);
    // A parameter a pass froze before (a distillation teacher's) stays so.
    bool frozen = !isFloatTensor(a.getType()) || !useful.count(a) ||
                  kiln::getRole(f, i) == ParamRole::Frozen ||
                  (!freeze.empty() && freezeRe.match(argName(f, i)));
    kiln::setRole(f, i, frozen ? ParamRole::Frozen : ParamRole::Weight);
    if (!frozen) {
      trainable.push_back(i);
      active.insert(a);
    }
  }
  if (trainable.empty())
    return forward.emitError("nothing to train: no floating-point parameter "
                             "reaches the loss")
           << (freeze.empty() ? "" : " (or --freeze matches them all)");

  OpBuilder b(ret);
  Value seed;
  if (lossScale) {
    // Loss scaling: backward starts from the scale, not 1.
    NamedAttrList a;
    a.set("onnx.name", StringAttr::get(ctx, kiln::kLossScaleInputName));
    auto f32 = RankedTensorType::get({}, Float32Type::get(ctx));
    unsigned at = f.getNumArguments();
    (void)f.insertArgument(at, f32, a.getDictionary(ctx), loss.getLoc());
    seed = f.getArgument(at);
    if (lossType != f32)
      seed = kiln::CastOp::create(b, loss.getLoc(), lossType, seed);
  } else {
    auto seedAttr = DenseElementsAttr::get(
        lossType, b.getFloatAttr(lossType.getElementType(), 1.0));
    seed = kiln::ConstantOp::create(b, loss.getLoc(), seedAttr);
  }
  SmallVector<Value> xs, xGrads;
  for (unsigned i : trainable)
    xs.push_back(f.getArgument(i));
  if (failed(kiln::buildGradients(b, ops, loss, seed, xs, xGrads,
                                  "a trainable parameter", "the loss",
                                  breakVJP)))
    return failure();
  llvm::DenseMap<Value, Value> grads;
  for (auto [x, g] : llvm::zip(xs, xGrads))
    if (g)
      grads[x] = g;

  // Results: loss, gradients, state updates.
  SmallVector<Value> results = {loss};
  SmallVector<DictionaryAttr> attrs;
  {
    NamedAttrList a;
    a.set("onnx.name", StringAttr::get(ctx, "loss"));
    a.set(kiln::KilnDialect::getLossAttrName(), UnitAttr::get(ctx));
    attrs.push_back(a.getDictionary(ctx));
  }
  // A parameter that reaches the loss only through operands without a
  // gradient (BatchNorm's running statistics) is not trained.
  llvm::erase_if(trainable, [&](unsigned i) {
    if (grads.lookup(f.getArgument(i)))
      return false;
    kiln::setRole(f, i, ParamRole::Frozen);
    return true;
  });
  if (trainable.empty())
    return forward.emitError("nothing to train: no gradient reaches a parameter");
  for (unsigned i : trainable) {
    Value g = grads.lookup(f.getArgument(i));
    results.push_back(g);
    NamedAttrList a;
    a.set("onnx.name", StringAttr::get(ctx, argName(f, i) + "/grad"));
    a.set(kiln::KilnDialect::getGradOfAttrName(), b.getI64IntegerAttr(i));
    attrs.push_back(a.getDictionary(ctx));
  }
  llvm::DenseSet<unsigned> updated;
  for (Operation *op : ops) {
    auto s = dyn_cast<kiln::StatefulOpInterface>(op);
    if (!s)
      continue;
    if (auto bn = dyn_cast<kiln::BatchNormTrainOp>(op))
      bn.setUnbiasedRunningVar(bnRunningVar == kiln::BNRunningVar::Unbiased);
    SmallVector<std::pair<unsigned, unsigned>> ups;
    s.getStateUpdates(ups);
    for (auto [o, r] : ups) {
      auto arg = dyn_cast<BlockArgument>(op->getOperand(o));
      if (!arg || !kiln::isParam(f, arg.getArgNumber()))
        continue; // state computed in the graph: nothing persists
      unsigned i = arg.getArgNumber();
      if (!updated.insert(i).second)
        return op->emitOpError("updates parameter '")
               << argName(f, i) << "', which another op updates too";
      if (llvm::is_contained(trainable, i))
        return op->emitOpError("updates parameter '")
               << argName(f, i) << "', which is also trained";
      kiln::setRole(f, i, ParamRole::State);
      results.push_back(op->getResult(r));
      NamedAttrList a;
      a.set("onnx.name", StringAttr::get(ctx, argName(f, i)));
      a.set(kiln::KilnDialect::getUpdateAttrName(), b.getI64IntegerAttr(i));
      attrs.push_back(a.getDictionary(ctx));
    }
  }
  b.setInsertionPoint(ret);
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  SmallVector<Type> types;
  for (Value v : results)
    types.push_back(v.getType());
  f.setType(FunctionType::get(ctx, f.getArgumentTypes(), types));
  f.setAllResultAttrs(attrs);
  return success();
}

} // namespace
