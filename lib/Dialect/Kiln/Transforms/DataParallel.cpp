//===- DataParallel.cpp - --kiln-data-parallel ------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The data-parallel strategy (Passes.td has the contract): the general
// sharding passes with the batch split over dp and every parameter
// replicated; the sharding rules place the collectives. Compression then
// marks the gradients' all-reduces.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "kiln/Dialect/Kiln/Transforms/Sharding.h"

#include "mlir/Pass/PassManager.h"

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
    std::string wire = compression;
    if (wire != "none" && wire != "bf16" && wire != "fp16" && wire != "int8") {
      m.emitError("--kiln-data-parallel: compression must be none, bf16, "
                  "fp16 or int8, got '")
          << wire << "'";
      return signalPassFailure();
    }
    if (tp < 1) {
      m.emitError("--kiln-data-parallel: tp must be at least 1, got ")
          << (int64_t)tp;
      return signalPassFailure();
    }
    if (ep < 1) {
      m.emitError("--kiln-data-parallel: ep must be at least 1, got ")
          << (int64_t)ep;
      return signalPassFailure();
    }
    if (ep > 1 && tp > 1) {
      m.emitError("--kiln-data-parallel: a mesh with both ep and tp is not "
                  "supported yet");
      return signalPassFailure();
    }
    if (dp == 1 && tp == 1 && ep == 1 && shard.empty())
      return;
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kTrainStepFuncName);
    if (!f || f.isExternal()) {
      m.emitError("--kiln-data-parallel: the module has no @train_step; run "
                  "--kiln-autodiff first");
      return signalPassFailure();
    }
    SmallVector<DictionaryAttr> resAttrs;
    f.getAllResultAttrs(resAttrs);
    if (llvm::none_of(resAttrs, [](DictionaryAttr a) {
          return kiln::getGradOf(a).has_value();
        })) {
      f.emitOpError() << "has no gradient results (kiln.grad_of): run "
                         "--kiln-autodiff first, and --kiln-data-parallel "
                         "before --kiln-attach-optimizer";
      return signalPassFailure();
    }

    OpPassManager pm(ModuleOp::getOperationName());
    kiln::KilnShardPassOptions so;
    // dp outermost, ep or tp inside: an ep or tp group is consecutive
    // ranks. The batch is split over dp and ep together (expert
    // parallelism's ranks are data-parallel outside the experts).
    std::string meshText;
    if (dp > 1 || (tp == 1 && ep == 1))
      meshText = "dp=" + std::to_string((int64_t)dp);
    if (ep > 1)
      meshText += (meshText.empty() ? "" : ",") + ("ep=" + std::to_string((int64_t)ep));
    if (tp > 1)
      meshText += (meshText.empty() ? "" : ",") + ("tp=" + std::to_string((int64_t)tp));
    so.mesh = meshText;
    so.batchAxis = "dp+ep";
    so.shard = shard;
    so.warnUnmatched = true;
    so.func = kiln::kTrainStepFuncName;
    pm.addPass(kiln::createKilnShardPass(so));
    pm.addPass(kiln::createKilnShardPropagationPass());
    pm.addPass(kiln::createKilnPartitionPass());
    if (failed(runPipeline(pm, m)))
      return signalPassFailure();

    if (wire == "none")
      return;
    // Compression: the gradients' own all-reduces over dp (the loss's
    // stays exact, and so do tp's partial sums).
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto ar = v.getDefiningOp<shard::AllReduceOp>();
      if (ar && ar.getGridAxes().size() == 1 && ar.getGridAxes()[0] == 0 &&
          dp > 1 && kiln::getGradOf(resAttrs[i]) &&
          cast<ShapedType>(v.getType()).getElementType().isF32())
        ar->setAttr(kiln::KilnDialect::getCompressionAttrName(),
                    StringAttr::get(&getContext(), wire));
    }
  }
};

} // namespace
