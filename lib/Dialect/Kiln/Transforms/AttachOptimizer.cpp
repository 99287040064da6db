//===- AttachOptimizer.cpp - --kiln-attach-optimizer ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Replaces @train_step's gradient results by optimizer updates: the global
// gradient norm (and clipping), the optimizer state as new parameters, and
// one update op per trained parameter (docs/Training.md).
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "kiln/Dialect/Kiln/Transforms/Sharding.h"

#include "mlir/IR/Builders.h"

#include <map>

#include <limits>

namespace kiln {
#define GEN_PASS_DEF_KILNATTACHOPTIMIZERPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using kiln::OptimizerKind;

namespace {

Value scalar(OpBuilder &b, Location loc, Type elt, double x) {
  auto t = RankedTensorType::get({}, elt);
  return kiln::ConstantOp::create(b, loc,
                                  DenseElementsAttr::get(t, b.getFloatAttr(elt, x)));
}

/// The mesh axes (indices into @kiln_mesh) a value held as `sharding`
/// (`kiln.sharding`: per dimension, axis names) is split over, in order of
/// appearance; empty for a whole value or without a mesh.
SmallVector<shard::GridAxis> splitAxes(ModuleOp m, Attribute sharding) {
  SmallVector<shard::GridAxis> out;
  auto dims = dyn_cast_or_null<ArrayAttr>(sharding);
  auto grid = m.lookupSymbol<shard::GridOp>(kiln::sharding::kMeshName);
  auto names = grid ? grid->getAttrOfType<ArrayAttr>(
                          kiln::KilnDialect::getAxisNamesAttrName())
                    : ArrayAttr();
  if (!dims || !names)
    return out;
  for (Attribute d : dims)
    if (auto axes = dyn_cast<ArrayAttr>(d))
      for (Attribute a : axes)
        for (auto [k, n] : llvm::enumerate(names))
          if (n == a && !llvm::is_contained(out, (shard::GridAxis)k))
            out.push_back((shard::GridAxis)k);
  return out;
}

struct AttachOptimizerPass
    : public kiln::impl::KilnAttachOptimizerPassBase<AttachOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kTrainStepFuncName);
    if (!f || f.isExternal()) {
      m.emitError("--kiln-attach-optimizer: the module has no @train_step; run "
                  "--kiln-autodiff first");
      return signalPassFailure();
    }
    if (failed(attach(f)))
      signalPassFailure();
  }

  LogicalResult attach(func::FuncOp f);
};

LogicalResult AttachOptimizerPass::attach(func::FuncOp f) {
  MLIRContext *ctx = f.getContext();
  Location loc = NameLoc::get(StringAttr::get(ctx, "optimizer"));
  auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
  SmallVector<DictionaryAttr> resAttrs;
  f.getAllResultAttrs(resAttrs);

  // (param arg, gradient) pairs; other results (loss, state updates) stay.
  SmallVector<std::pair<unsigned, Value>> grads;
  SmallVector<std::pair<Value, DictionaryAttr>> kept;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    if (auto g = kiln::getGradOf(resAttrs[i]))
      grads.push_back({*g, ret.getOperand(i)});
    else
      kept.push_back({ret.getOperand(i), resAttrs[i]});
  }
  if (grads.empty())
    return f.emitError("@train_step has no gradients to apply");
  if (kept.empty() || !kept[0].second ||
      !kept[0].second.get(kiln::KilnDialect::getLossAttrName()))
    return f.emitError("@train_step's result 0 is not the loss");

  auto name = [&](unsigned i) {
    auto n = f.getArgAttrOfType<StringAttr>(i, "onnx.name");
    return n ? n.getValue().str() : "arg" + std::to_string(i);
  };
  // A parameter split over mesh axes (tensor parallelism: partitioned
  // before this pass) keeps its state split the same way.
  // A parameter held as a view of the model's shape (kiln.model_shape)
  // keeps its state in the model's shape too.
  auto shardingOf = [&](unsigned i) {
    return f.getArgAttr(i, kiln::KilnDialect::getShardingAttrName());
  };
  auto addArg = [&](Type t, StringRef argName, bool state,
                    std::optional<unsigned> like = std::nullopt) {
    NamedAttrList a;
    a.set("onnx.name", StringAttr::get(ctx, argName));
    if (state)
      kiln::addParamAttrs(ctx, a, kiln::ParamRole::Optimizer,
                          kiln::ParamInit::Zeros);
    if (like)
      for (StringRef k : {kiln::KilnDialect::getShardingAttrName(),
                          kiln::KilnDialect::getModelShapeAttrName()})
        if (Attribute v = f.getArgAttr(*like, k))
          a.set(k, v);
    unsigned at = f.getNumArguments();
    (void)f.insertArgument(at, t, a.getDictionary(ctx), loc);
    return f.getArgument(at);
  };

  // Optimizer state, then the per-step scalars.
  struct Slot {
    unsigned param;
    Value grad;
    SmallVector<Value, 2> state;
  };
  SmallVector<Slot> slots;
  for (auto [i, g] : grads) {
    Slot s{i, g, {}};
    Type t = f.getArgument(i).getType();
    if (optimizer == OptimizerKind::Momentum)
      s.state.push_back(addArg(t, name(i) + "/momentum_buffer", true, i));
    if (optimizer == OptimizerKind::Adam || optimizer == OptimizerKind::AdamW) {
      s.state.push_back(addArg(t, name(i) + "/exp_avg", true, i));
      s.state.push_back(addArg(t, name(i) + "/exp_avg_sq", true, i));
    }
    slots.push_back(s);
  }
  Type f32 = Float32Type::get(ctx);
  Value lr = addArg(RankedTensorType::get({}, f32), kiln::kLrInputName, false);
  Value step = addArg(RankedTensorType::get({}, IntegerType::get(ctx, 64)),
                      kiln::kStepInputName, false);

  OpBuilder b(ret);
  // Loss scaling: unscale each gradient (in its own type, as GradScaler).
  if (lossScale) {
    std::optional<unsigned> at;
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (name(i) == kiln::kLossScaleInputName)
        at = i;
    if (!at)
      return f.emitError("--kiln-attach-optimizer loss-scale: @train_step has "
                         "no '")
             << kiln::kLossScaleInputName
             << "' argument; run --kiln-autodiff with loss-scale";
    Value inv = kiln::ReciprocalOp::create(b, loc, f.getArgument(*at));
    for (auto &s : slots) {
      auto t = cast<RankedTensorType>(s.grad.getType());
      Value c = inv;
      if (t.getElementType() != Float32Type::get(ctx))
        c = kiln::CastOp::create(b, loc, RankedTensorType::get({}, t.getElementType()), inv);
      s.grad = kiln::MulOp::create(b, loc, s.grad, c);
    }
  }
  // Global L2 norm of all gradients. A gradient split over mesh axes
  // (its parameter's kiln.sharding) holds a part of the whole on each
  // rank: the sums of squares of the gradients split over the same axes
  // are added, then summed over those axes' ranks (one all-reduce per set
  // of axes); a replicated gradient counts once.
  Value total;
  std::map<SmallVector<shard::GridAxis>, Value> splitTotals;
  Type normElt = cast<RankedTensorType>(grads[0].second.getType()).getElementType();
  for (auto &s : slots) {
    auto t = cast<RankedTensorType>(s.grad.getType());
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < t.getRank(); ++d)
      axes.push_back(d);
    Value sum = t.getRank()
                    ? kiln::ReduceSumSquareOp::create(b, loc, s.grad,
                                                      b.getDenseI64ArrayAttr(axes),
                                                      b.getBoolAttr(false))
                          .getResult()
                    : kiln::MulOp::create(b, loc, s.grad, s.grad).getResult();
    if (t.getElementType() != normElt)
      sum = kiln::CastOp::create(b, loc, RankedTensorType::get({}, normElt), sum);
    SmallVector<shard::GridAxis> over =
        splitAxes(f->getParentOfType<ModuleOp>(), shardingOf(s.param));
    Value &acc = over.empty() ? total : splitTotals[over];
    acc = acc ? kiln::AddOp::create(b, loc, acc, sum).getResult() : sum;
  }
  for (auto &[axes, part] : splitTotals) {
    Value all = shard::AllReduceOp::create(b, loc, part, kiln::sharding::kMeshName,
                                           axes, shard::ReductionKind::Sum);
    total = total ? kiln::AddOp::create(b, loc, total, all).getResult() : all;
  }
  Value norm = kiln::SqrtOp::create(b, loc, total);
  // A step with a non-finite gradient anywhere: its sum of squares is Inf or
  // NaN, and !(total < inf) holds for both.
  Value skip;
  if (lossScale) {
    Value inf = scalar(b, loc, normElt, std::numeric_limits<double>::infinity());
    skip = kiln::NotOp::create(b, loc, kiln::LessOp::create(b, loc, total, inf));
  }
  Value normOut = norm;
  if (normElt != f32)
    normOut = kiln::CastOp::create(b, loc, RankedTensorType::get({}, f32), norm);
  if (clipNorm < 0)
    return f.emitError("--clip-norm must be >= 0");
  if (clipNorm > 0) {
    Value coef = kiln::DivOp::create(
        b, loc, scalar(b, loc, normElt, clipNorm),
        kiln::AddOp::create(b, loc, norm, scalar(b, loc, normElt, 1e-6)));
    coef = kiln::MinOp::create(b, loc, coef, scalar(b, loc, normElt, 1.0));
    for (auto &s : slots) {
      Type e = cast<RankedTensorType>(s.grad.getType()).getElementType();
      Value c = e == normElt ? coef
                             : kiln::CastOp::create(
                                   b, loc, RankedTensorType::get({}, e), coef)
                                   .getResult();
      s.grad = kiln::MulOp::create(b, loc, s.grad, c);
    }
  }

  double wd = weightDecay >= 0
                  ? weightDecay
                  : (optimizer == OptimizerKind::AdamW ? 0.01 : 0.0);
  SmallVector<Value> results = {kept[0].first, normOut};
  SmallVector<DictionaryAttr> attrs = {kept[0].second};
  {
    NamedAttrList a;
    a.set("onnx.name", StringAttr::get(ctx, "grad_norm"));
    attrs.push_back(a.getDictionary(ctx));
  }
  auto update = [&](Value v, unsigned arg) {
    results.push_back(v);
    NamedAttrList a;
    a.set("onnx.name", StringAttr::get(ctx, name(arg)));
    a.set(kiln::KilnDialect::getUpdateAttrName(), b.getI64IntegerAttr(arg));
    if (Attribute sh = shardingOf(arg))
      a.set(kiln::KilnDialect::getShardingAttrName(), sh);
    attrs.push_back(a.getDictionary(ctx));
  };
  auto f32Attr = [&](double x) { return b.getF32FloatAttr(x); };
  for (auto &s : slots) {
    Value p = f.getArgument(s.param);
    Location ploc = NameLoc::get(StringAttr::get(ctx, name(s.param) + "/update"));
    if (optimizer == OptimizerKind::SGD) {
      update(kiln::SgdUpdateOp::create(b, ploc, p.getType(), p, s.grad, lr,
                                       skip, f32Attr(wd)),
             s.param);
    } else if (optimizer == OptimizerKind::Momentum) {
      auto u = kiln::MomentumUpdateOp::create(
          b, ploc, TypeRange{p.getType(), p.getType()}, p, s.grad, s.state[0], lr,
          skip, f32Attr(momentum), f32Attr(wd), b.getBoolAttr(nesterov));
      update(u.getNewParam(), s.param);
      update(u.getNewBuf(), cast<BlockArgument>(s.state[0]).getArgNumber());
    } else {
      auto u = kiln::AdamUpdateOp::create(
          b, ploc, TypeRange{p.getType(), p.getType(), p.getType()}, p, s.grad,
          s.state[0], s.state[1], lr, step, skip, f32Attr(beta1), f32Attr(beta2),
          f32Attr(eps), f32Attr(wd),
          b.getBoolAttr(optimizer == OptimizerKind::AdamW));
      update(u.getNewParam(), s.param);
      update(u.getNewM(), cast<BlockArgument>(s.state[0]).getArgNumber());
      update(u.getNewV(), cast<BlockArgument>(s.state[1]).getArgNumber());
    }
  }
  for (auto &[v, a] : llvm::drop_begin(kept)) {
    results.push_back(v);
    attrs.push_back(a ? a : DictionaryAttr::get(ctx));
  }
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  SmallVector<Type> types;
  for (Value v : results)
    types.push_back(v.getType());
  f.setType(FunctionType::get(ctx, f.getArgumentTypes(), types));
  f.setAllResultAttrs(attrs);
  kiln::setOptimizer(f, optimizer);
  return success();
}

} // namespace
