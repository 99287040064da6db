//===- EvalMode.cpp - --kiln-eval-mode --------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The evaluation form of @forward: dropout is the identity and BatchNorm
// normalises with its running statistics.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNEVALMODEPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct EvalModePass : public kiln::impl::KilnEvalModePassBase<EvalModePass> {
  void runOnOperation() override {
    auto f = getOperation().lookupSymbol<func::FuncOp>(kiln::kForwardFuncName);
    if (!f)
      return;
    SmallVector<Operation *> dead;
    f.walk([&](Operation *op) {
      OpBuilder b(op);
      if (auto d = dyn_cast<kiln::DropoutOp>(op)) {
        d.getResult().replaceAllUsesWith(d.getInput());
        if (!d.getMask().use_empty()) {
          auto t = cast<RankedTensorType>(d.getMask().getType());
          Value all = kiln::ConstantOp::create(
              b, d.getLoc(), DenseElementsAttr::get(t, b.getBoolAttr(true)));
          d.getMask().replaceAllUsesWith(all);
        }
        dead.push_back(op);
      } else if (auto o = dyn_cast<kiln::MinMaxObserveOp>(op)) {
        // Evaluation reads the observed range and does not move it.
        o.setFreeze(0);
      } else if (auto bn = dyn_cast<kiln::BatchNormTrainOp>(op)) {
        Value y = kiln::BatchNormOp::create(b, bn.getLoc(), bn.getInput(),
                                            bn.getScale(), bn.getBias(),
                                            bn.getRunningMean(),
                                            bn.getRunningVar(), bn.getEpsilonAttr());
        bn.getResult().replaceAllUsesWith(y);
        bn.getNewRunningMean().replaceAllUsesWith(bn.getRunningMean());
        bn.getNewRunningVar().replaceAllUsesWith(bn.getRunningVar());
        dead.push_back(op);
      }
    });
    for (Operation *op : dead)
      op->erase();
  }
};
} // namespace
