//===- PruneMagnitude.cpp - --kiln-prune-magnitude --------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Unstructured magnitude pruning kept through training (docs/Compression.md):
// after each optimizer update of a weight of rank >= 2, a
// kiln.magnitude_prune op zeroes the smallest elements on the cubic
// schedule and keeps them zero; the update's optimizer state is masked
// alike, so a pruned element's momentum and Adam moments stay zero. The
// mask is optimizer state (`<param>/pruned`, zeros: nothing pruned), so it
// is checkpointed and resumed with the rest.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPRUNEMAGNITUDEPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

struct PruneMagnitudePass
    : public kiln::impl::KilnPruneMagnitudePassBase<PruneMagnitudePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kTrainStepFuncName);
    if (!f || f.isExternal()) {
      m.emitError("--kiln-prune-magnitude: the module has no @train_step; run "
                  "--kiln-autodiff and --kiln-attach-optimizer first");
      return signalPassFailure();
    }
    if (failed(prune(f)))
      signalPassFailure();
  }

  LogicalResult prune(func::FuncOp f);
};

LogicalResult PruneMagnitudePass::prune(func::FuncOp f) {
  MLIRContext *ctx = f.getContext();
  if (!(sparsity >= 0.0 && sparsity < 1.0))
    return f.emitError("--kiln-prune-magnitude: sparsity must be in [0, 1), got ")
           << (double)sparsity;
  if (start < 0 || end < start)
    return f.emitError("--kiln-prune-magnitude: needs 0 <= start <= end, got start ")
           << (int64_t)start << ", end " << (int64_t)end;
  if (every < 1)
    return f.emitError("--kiln-prune-magnitude: every must be at least 1, got ")
           << (int64_t)every;

  auto name = [&](unsigned i) {
    auto n = f.getArgAttrOfType<StringAttr>(i, "onnx.name");
    return n ? n.getValue().str() : "arg" + std::to_string(i);
  };
  std::optional<unsigned> stepArg;
  for (unsigned i = 0; i < f.getNumArguments(); ++i)
    if (name(i) == kiln::kStepInputName)
      stepArg = i;
  if (!stepArg)
    return f.emitError("--kiln-prune-magnitude: @train_step has no '")
           << kiln::kStepInputName << "' argument; run --kiln-attach-optimizer first";

  // The updates of weights of rank >= 2, with their new parameter and state.
  struct Target {
    Operation *update;
    unsigned param;
    Value newParam;
    SmallVector<Value, 2> newState;
  };
  SmallVector<Target> targets;
  f.walk([&](Operation *op) {
    Value p, np;
    SmallVector<Value, 2> st;
    if (auto u = dyn_cast<kiln::SgdUpdateOp>(op)) {
      p = u.getParam();
      np = u.getResult();
    } else if (auto u = dyn_cast<kiln::MomentumUpdateOp>(op)) {
      p = u.getParam();
      np = u.getNewParam();
      st.push_back(u.getNewBuf());
    } else if (auto u = dyn_cast<kiln::AdamUpdateOp>(op)) {
      p = u.getParam();
      np = u.getNewParam();
      st.push_back(u.getNewM());
      st.push_back(u.getNewV());
    } else {
      return;
    }
    auto arg = dyn_cast<BlockArgument>(p);
    auto t = dyn_cast<RankedTensorType>(p.getType());
    if (!arg || !t || t.getRank() < 2)
      return;
    if (kiln::getRole(f, arg.getArgNumber()) != kiln::ParamRole::Weight)
      return;
    targets.push_back({op, arg.getArgNumber(), np, st});
  });
  if (targets.empty())
    return f.emitError("--kiln-prune-magnitude: @train_step updates no weight "
                       "of rank 2 or more (a Linear's or a convolution's): "
                       "nothing to prune");

  auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
  SmallVector<DictionaryAttr> resAttrs;
  f.getAllResultAttrs(resAttrs);
  SmallVector<Value> results(ret.getOperands());
  Value step = f.getArgument(*stepArg);
  for (Target &t : targets) {
    Type type = t.newParam.getType();
    NamedAttrList a;
    std::string maskName = name(t.param) + "/pruned";
    a.set("onnx.name", StringAttr::get(ctx, maskName));
    kiln::addParamAttrs(ctx, a, kiln::ParamRole::Optimizer, kiln::ParamInit::Zeros);
    unsigned at = f.getNumArguments();
    Location loc = NameLoc::get(StringAttr::get(ctx, name(t.param) + "/prune"));
    if (failed(f.insertArgument(at, type, a.getDictionary(ctx), loc)))
      return failure();
    Value mask = f.getArgument(at);

    OpBuilder b(t.update->getBlock(), std::next(t.update->getIterator()));
    auto pr = kiln::MagnitudePruneOp::create(
        b, loc, TypeRange{type, type}, t.newParam, mask, step,
        b.getF32FloatAttr(sparsity), b.getI64IntegerAttr(start),
        b.getI64IntegerAttr(end), b.getI64IntegerAttr(every));
    t.newParam.replaceAllUsesExcept(pr.getNewParam(), pr.getOperation());
    if (!t.newState.empty()) {
      // keep = 1 - pruned: a pruned element's optimizer state is zero.
      auto elt = cast<RankedTensorType>(type).getElementType();
      auto one = kiln::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(RankedTensorType::get({}, elt),
                                 b.getFloatAttr(elt, 1.0)));
      Value keep = kiln::SubOp::create(b, loc, one, pr.getNewPruned());
      for (Value s : t.newState) {
        auto masked = kiln::MulOp::create(b, loc, s, keep);
        s.replaceAllUsesExcept(masked, masked.getOperation());
      }
    }
    results.clear();
    llvm::append_range(results, ret.getOperands());
    results.push_back(pr.getNewPruned());
    NamedAttrList r;
    r.set("onnx.name", StringAttr::get(ctx, maskName));
    r.set(kiln::KilnDialect::getUpdateAttrName(), b.getI64IntegerAttr(at));
    resAttrs.push_back(r.getDictionary(ctx));
    OpBuilder rb(ret);
    auto newRet = func::ReturnOp::create(rb, ret.getLoc(), results);
    ret.erase();
    ret = newRet;
  }
  SmallVector<Type> types;
  for (Value v : ret.getOperands())
    types.push_back(v.getType());
  f.setType(FunctionType::get(ctx, f.getArgumentTypes(), types));
  f.setAllResultAttrs(resAttrs);
  return success();
}

} // namespace
