//===- DataParallel.cpp - --kiln-data-parallel ------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Averages @train_step's gradients and loss over the ranks of the dp mesh
// axis with upstream `shard.all_reduce`, and makes rank 0's state updates
// every rank's with `shard.broadcast` (Passes.td has the contract). The
// collective is lowered to the runtime's `all_reduce` kernel, which runs it
// on the executable's communicator (runtime/comm).
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNDATAPARALLELPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

struct DataParallelPass
    : public kiln::impl::KilnDataParallelPassBase<DataParallelPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    if (dp < 1) {
      m.emitError("--kiln-data-parallel: dp must be at least 1, got ")
          << (int64_t)dp;
      return signalPassFailure();
    }
    if (dp == 1)
      return;
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kTrainStepFuncName);
    if (!f || f.isExternal()) {
      m.emitError("--kiln-data-parallel: the module has no @train_step; run "
                  "--kiln-autodiff first");
      return signalPassFailure();
    }
    if (failed(apply(m, f)))
      signalPassFailure();
  }

  LogicalResult apply(ModuleOp m, func::FuncOp f);
};

LogicalResult DataParallelPass::apply(ModuleOp m, func::FuncOp f) {
  MLIRContext *ctx = m.getContext();
  auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
  SmallVector<DictionaryAttr> resAttrs;
  f.getAllResultAttrs(resAttrs);

  // What is averaged: the gradients and the loss.
  SmallVector<unsigned> averaged, broadcast;
  bool sawGradient = false;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    DictionaryAttr a = resAttrs[i];
    if (kiln::getGradOf(a)) {
      averaged.push_back(i);
      sawGradient = true;
    } else if (a && a.get(kiln::KilnDialect::getLossAttrName())) {
      averaged.push_back(i);
    } else if (a && a.get(kiln::KilnDialect::getUpdateAttrName())) {
      broadcast.push_back(i);
    }
  }
  if (!sawGradient)
    return f.emitOpError()
           << "has no gradient results (kiln.grad_of): run --kiln-autodiff "
              "first, and --kiln-data-parallel before --kiln-attach-optimizer";

  // The mesh: one axis, dp.
  StringRef meshName = "kiln_mesh";
  auto grid = m.lookupSymbol<shard::GridOp>(meshName);
  if (!grid) {
    OpBuilder b = OpBuilder::atBlockBegin(m.getBody());
    int64_t n = dp;
    grid = shard::GridOp::create(b, NameLoc::get(StringAttr::get(ctx, "mesh")),
                                 meshName, ArrayRef<int64_t>{n});
    grid->setAttr(kiln::KilnDialect::getAxisNamesAttrName(),
                  b.getArrayAttr({b.getStringAttr("dp")}));
  } else if (grid.getShape() != ArrayRef<int64_t>{(int64_t)dp}) {
    int64_t n = dp;
    return grid.emitOpError() << "does not match --kiln-data-parallel dp="
                              << n << ": a 1-axis mesh of " << n
                              << " ranks is needed";
  }

  std::string wire = compression;
  if (wire != "none" && wire != "bf16" && wire != "fp16" && wire != "int8")
    return m.emitError("--kiln-data-parallel: compression must be none, bf16, "
                       "fp16 or int8, got '")
           << wire << "'";
  OpBuilder b(ret);
  for (unsigned i : averaged) {
    Value v = ret.getOperand(i);
    Location loc = v.getLoc();
    auto all = shard::AllReduceOp::create(
        b, loc, v, meshName, ArrayRef<shard::GridAxis>{0},
        shard::ReductionKind::Average);
    if (wire != "none" && kiln::getGradOf(resAttrs[i]) &&
        cast<ShapedType>(v.getType()).getElementType().isF32())
      all->setAttr(kiln::KilnDialect::getCompressionAttrName(),
                   b.getStringAttr(wire));
    ret.setOperand(i, all.getResult());
  }
  // State (BatchNorm's running statistics) is updated from each rank's own
  // batch; rank 0's update is every rank's, as PyTorch DDP's buffer
  // broadcast makes it.
  for (unsigned i : broadcast) {
    Value v = ret.getOperand(i);
    auto b0 = shard::BroadcastOp::create(
        b, v.getLoc(), v.getType(), FlatSymbolRefAttr::get(ctx, meshName),
        b.getDenseI16ArrayAttr({0}), v, b.getDenseI64ArrayAttr({0}),
        ValueRange{});
    ret.setOperand(i, b0.getResult());
  }
  return success();
}

} // namespace
