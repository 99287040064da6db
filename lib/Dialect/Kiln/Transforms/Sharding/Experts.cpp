//===- Experts.cpp - --kiln-expert-parallel: experts split over ep -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Expert parallelism (Passes.td has the contract), found by graph
// structure: an expert layer is a batched matmul whose rhs is a rank-3
// parameter [E, in, out] and whose lhs has the same leading dimension E
// (the tokens dispatched to each expert), plus the rank-3 parameters [E,
// ...] added to its result (the biases). Their dimension 0 is split over
// `ep`. Nothing else is decided here: the tokens arrive split over the data
// axes (dp and ep), and where an expert weight meets them the partitioner
// trades the token split for the expert split, one all-to-all (and back
// after the experts: the combine).
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "kiln/Dialect/Kiln/Transforms/Sharding.h"

#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNEXPERTPARALLELPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

struct ExpertParallelPass
    : public kiln::impl::KilnExpertParallelPassBase<ExpertParallelPass> {
  using Base::Base;
  void runOnOperation() override;
};

/// The rank-3 parameter argument `v` is, or null.
BlockArgument param3D(func::FuncOp f, Value v) {
  auto a = dyn_cast<BlockArgument>(v);
  if (!a || a.getOwner() != &f.getBody().front() || !kiln::isParam(f, a.getArgNumber()))
    return {};
  return cast<RankedTensorType>(a.getType()).getRank() == 3 ? a : BlockArgument();
}

std::string nameOf(func::FuncOp f, BlockArgument a) {
  auto n = f.getArgAttrOfType<StringAttr>(a.getArgNumber(), "onnx.name");
  return n ? n.getValue().str() : "#" + std::to_string(a.getArgNumber());
}

void ExpertParallelPass::runOnOperation() {
  ModuleOp m = getOperation();
  MLIRContext *ctx = &getContext();
  auto f = m.lookupSymbol<func::FuncOp>(kiln::kForwardFuncName);
  if (!f || f.isExternal()) {
    m.emitError("--kiln-expert-parallel: the module has no @forward");
    return signalPassFailure();
  }
  if (ep < 2) {
    m.emitError("--kiln-expert-parallel: ep must be at least 2, got ") << (int64_t)ep;
    return signalPassFailure();
  }
  auto spec = [&](int64_t rank) {
    SmallVector<Attribute> dims;
    for (int64_t d = 0; d < rank; ++d)
      dims.push_back(d == 0 ? ArrayAttr::get(ctx, {StringAttr::get(ctx, "ep")})
                            : ArrayAttr::get(ctx, {}));
    return ArrayAttr::get(ctx, dims);
  };
  SmallVector<Attribute> layers;
  for (auto mm : f.getBody().front().getOps<kiln::MatmulOp>()) {
    BlockArgument w = param3D(f, mm.getRhs());
    auto lhs = cast<RankedTensorType>(mm.getLhs().getType());
    if (!w || lhs.getRank() != 3)
      continue;
    int64_t e = cast<RankedTensorType>(w.getType()).getDimSize(0);
    if (lhs.getDimSize(0) != e || e < 2)
      continue;
    SmallVector<BlockArgument> params{w};
    // The biases: rank-3 [E, ...] parameters added to the result.
    for (Operation *u : mm.getResult().getUsers())
      if (auto add = dyn_cast<kiln::AddOp>(u))
        for (Value o : add->getOperands())
          if (BlockArgument bias = param3D(f, o);
              bias && cast<RankedTensorType>(bias.getType()).getDimSize(0) == e)
            params.push_back(bias);
    if (e % ep) {
      m.emitWarning() << "--kiln-expert-parallel: the " << e << " experts of '"
                      << nameOf(f, w) << "' do not divide over ep=" << (int64_t)ep
                      << "; they stay whole";
      continue;
    }
    SmallVector<Attribute> names;
    for (BlockArgument p : params) {
      // A user's annotation wins, and a parameter used elsewhere too (by a
      // non-expert op) is still split: the partition gathers it there.
      if (!f.getArgAttr(p.getArgNumber(), kiln::KilnDialect::getShardingAttrName()))
        f.setArgAttr(p.getArgNumber(), kiln::KilnDialect::getShardingAttrName(),
                     spec(3));
      names.push_back(StringAttr::get(ctx, nameOf(f, p)));
    }
    Builder b(ctx);
    layers.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("experts", b.getI64IntegerAttr(e)),
         b.getNamedAttr("params", b.getArrayAttr(names))}));
  }
  m->setAttr(kiln::KilnDialect::getEpLayersAttrName(), ArrayAttr::get(ctx, layers));
}

} // namespace
