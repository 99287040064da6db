//===- Microbatch.cpp - --kiln-microbatch -----------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Gradient accumulation over M microbatches (Passes.td has the contract):
// @train_step's batch-dependent ops copied once per microbatch, the
// losses and gradients averaged, the state threaded through the copies.
// The pass knows no op: what depends on the batch follows from the
// def-use graph, what a result is from its attributes.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

namespace kiln {
#define GEN_PASS_DEF_KILNMICROBATCHPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using kiln::argName;

namespace {

/// Whether argument `i` is a per-step input the trainer feeds whole (the
/// learning rate, the step, the loss scale) rather than batch data.
bool isStepScalar(func::FuncOp f, unsigned i) {
  std::string n = argName(f, i);
  return n == kiln::kLrInputName || n == kiln::kStepInputName ||
         n == kiln::kLossScaleInputName;
}

struct MicrobatchPass
    : public kiln::impl::KilnMicrobatchPassBase<MicrobatchPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    if (microbatches < 1) {
      m.emitError("--kiln-microbatch: microbatches must be at least 1, got ")
          << (int64_t)microbatches;
      return signalPassFailure();
    }
    if (microbatches == 1)
      return;
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kTrainStepFuncName);
    if (!f || f.isExternal()) {
      m.emitError("--kiln-microbatch: the module has no @train_step; run "
                  "--kiln-autodiff first");
      return signalPassFailure();
    }
    if (failed(unroll(f)))
      signalPassFailure();
  }

  LogicalResult unroll(func::FuncOp f);
};

LogicalResult MicrobatchPass::unroll(func::FuncOp f) {
  const int64_t M = microbatches;
  if (!f.getBody().hasOneBlock())
    return f.emitOpError("must have one block");
  Block &body = f.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // What each result is: the loss and gradients are averaged over the
  // microbatches, a state update is the last microbatch's.
  enum class Kind { Mean, Last };
  SmallVector<Kind> kinds;
  llvm::DenseSet<unsigned> stateArgs;
  bool anyGrad = false;
  for (unsigned r = 0; r < f.getNumResults(); ++r) {
    DictionaryAttr a = f.getResultAttrDict(r);
    if (kiln::isLoss(f, r)) {
      kinds.push_back(Kind::Mean);
    } else if (kiln::getGradOf(a)) {
      kinds.push_back(Kind::Mean);
      anyGrad = true;
    } else if (std::optional<unsigned> i = kiln::getUpdateOf(a)) {
      kinds.push_back(Kind::Last);
      stateArgs.insert(*i);
    } else {
      return f.emitOpError("result ")
             << r << " is not the loss, a gradient or a state update: "
             << "--kiln-microbatch runs after --kiln-autodiff and before "
                "--kiln-attach-optimizer";
    }
  }
  if (!anyGrad)
    return f.emitOpError("has no gradient results (kiln.grad_of): run "
                         "--kiln-microbatch after --kiln-autodiff and before "
                         "--kiln-attach-optimizer");

  // The data inputs: the step was built for one microbatch; its inputs
  // now take the M microbatches' rows, split below.
  SmallVector<unsigned> dataArgs;
  SmallVector<Type> argTypes(f.getArgumentTypes());
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    if (kiln::isParam(f, i) || isStepScalar(f, i))
      continue;
    auto t = dyn_cast<RankedTensorType>(f.getArgument(i).getType());
    if (!t || t.getRank() < 1 || t.isDynamicDim(0))
      return f.emitOpError("input '")
             << argName(f, i) << "' has no static batch axis to split into "
             << M << " microbatches";
    dataArgs.push_back(i);
  }
  if (dataArgs.empty())
    return f.emitOpError("has no batch input to split into microbatches");
  // The microbatch's inputs (each use is redirected to its slices below).
  SmallVector<Value> microInputs;
  {
    OpBuilder ab(&body, body.begin());
    for (unsigned i : dataArgs) {
      BlockArgument a = f.getArgument(i);
      auto t = cast<RankedTensorType>(a.getType());
      SmallVector<int64_t> whole(t.getShape());
      whole[0] *= M;
      auto wt = RankedTensorType::get(whole, t.getElementType());
      // A placeholder of the microbatch's type until the slices exist.
      auto ph = kiln::ReshapeOp::create(ab, f.getLoc(), t, a);
      a.replaceAllUsesExcept(ph.getResult(), ph);
      a.setType(wt);
      argTypes[i] = wt;
      microInputs.push_back(ph.getResult());
    }
    f.setType(FunctionType::get(f.getContext(), argTypes, f.getResultTypes()));
  }

  // Ops that read the batch or the state, directly or not: one copy each
  // per microbatch. The others (constants, functions of the weights) are
  // computed once and shared.
  llvm::DenseSet<Value> dependent;
  for (Value v : microInputs)
    dependent.insert(v);
  for (unsigned i : stateArgs)
    dependent.insert(f.getArgument(i));
  SmallVector<Operation *> copied;
  // Dropout streams: the microbatches' copies take disjoint ones.
  int64_t seedStreams = 1;
  body.walk([&](kiln::DropoutOp d) {
    seedStreams = std::max<int64_t>(seedStreams, (int64_t)d.getSeed() + 1);
  });
  for (Operation &op : body.without_terminator()) {
    if (op.getNumRegions())
      return op.emitOpError("has regions; --kiln-microbatch copies "
                            "region-free ops only");
    if (llvm::is_contained(microInputs, op.getNumResults() ? op.getResult(0) : Value()))
      continue;
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return dependent.count(v); })) {
      copied.push_back(&op);
      for (Value r : op.getResults())
        dependent.insert(r);
    }
  }

  OpBuilder b(ret);
  Location loc = f.getLoc();
  auto scalarConst = [&](Type elt, double v) -> Value {
    auto t = RankedTensorType::get({}, elt);
    return kiln::ConstantOp::create(
        b, loc, DenseElementsAttr::get(t, b.getFloatAttr(elt, v)));
  };
  SmallVector<SmallVector<Value>> perMicrobatch; // [m][result]
  for (int64_t mb = 0; mb < M; ++mb) {
    IRMapping map;
    auto tag = b.getI64IntegerAttr(mb);
    for (auto [i, microIn] : llvm::zip(dataArgs, microInputs)) {
      Value x = f.getArgument(i);
      auto t = cast<RankedTensorType>(x.getType());
      int64_t B = t.getDimSize(0);
      // [B, ...] -> [B/M, M, ...] -> [B/M, 1, ...] -> [B/M, ...]: rows
      // mb, mb + M, ...
      SmallVector<int64_t> split = {B / M, M};
      llvm::append_range(split, t.getShape().drop_front());
      auto split3 = kiln::ReshapeOp::create(
          b, loc, RankedTensorType::get(split, t.getElementType()), x);
      SmallVector<int64_t> starts(split.size(), 0), limits(split),
          strides(split.size(), 1);
      starts[1] = mb;
      limits[1] = mb + 1;
      SmallVector<int64_t> one(split);
      one[1] = 1;
      auto slice = kiln::SliceOp::create(
          b, loc, RankedTensorType::get(one, t.getElementType()), split3,
          b.getDenseI64ArrayAttr(starts), b.getDenseI64ArrayAttr(limits),
          b.getDenseI64ArrayAttr(strides));
      SmallVector<int64_t> micro(t.getShape());
      micro[0] = B / M;
      auto v = kiln::ReshapeOp::create(
          b, loc, RankedTensorType::get(micro, t.getElementType()), slice);
      for (Operation *o : {split3.getOperation(), slice.getOperation(),
                           v.getOperation()})
        o->setAttr(kiln::KilnDialect::getMicrobatchAttrName(), tag);
      map.map(microIn, v);
    }
    // State: what the previous microbatch wrote.
    if (mb > 0)
      for (auto [r, v] : llvm::enumerate(ret.getOperands()))
        if (std::optional<unsigned> i = kiln::getUpdateOf(f.getResultAttrDict(r)))
          map.map(f.getArgument(*i), perMicrobatch.back()[r]);
    for (Operation *op : copied) {
      Operation *c = b.clone(*op, map);
      c->setAttr(kiln::KilnDialect::getMicrobatchAttrName(), tag);
      // Each microbatch's dropout draws its own masks: stream seed + m S
      // (S past every stream of the step), not the first microbatch's
      // again.
      if (auto d = dyn_cast<kiln::DropoutOp>(c))
        d.setSeed((uint64_t)(d.getSeed() + mb * seedStreams));
    }
    SmallVector<Value> results;
    for (Value v : ret.getOperands())
      results.push_back(map.lookupOrDefault(v));
    perMicrobatch.push_back(std::move(results));
  }

  // The mean of each loss and gradient, the last state.
  SmallVector<Value> results;
  for (auto [r, v] : llvm::enumerate(ret.getOperands())) {
    if (!dependent.count(v)) {
      results.push_back(v); // the same in every microbatch
      continue;
    }
    if (kinds[r] == Kind::Last) {
      results.push_back(perMicrobatch.back()[r]);
      continue;
    }
    Value sum = perMicrobatch[0][r];
    for (int64_t mb = 1; mb < M; ++mb)
      sum = kiln::AddOp::create(b, loc, sum, perMicrobatch[mb][r]);
    Type elt = cast<RankedTensorType>(v.getType()).getElementType();
    if (!isa<FloatType>(elt))
      return f.emitOpError("result ") << r << " is not a floating-point tensor";
    results.push_back(
        kiln::MulOp::create(b, loc, sum, scalarConst(elt, 1.0 / (double)M)));
  }
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  for (Operation *op : llvm::reverse(copied))
    op->erase();
  for (Value v : microInputs)
    v.getDefiningOp()->erase();
  return success();
}

} // namespace
