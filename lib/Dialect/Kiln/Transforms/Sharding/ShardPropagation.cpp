//===- ShardPropagation.cpp - --kiln-shard-propagation ----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Completes the shardings of a function's ops from their sharding rules,
// from the arguments forward (Passes.td has the contract). The arguments'
// shardings are all known (none given: whole), and every op comes after its
// operands' producers, so one visit in order decides every op.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "kiln/Dialect/Kiln/Transforms/Sharding.h"

namespace kiln {
#define GEN_PASS_DEF_KILNSHARDPROPAGATIONPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using namespace kiln::sharding;

namespace {

struct ShardPropagationPass
    : public kiln::impl::KilnShardPropagationPassBase<ShardPropagationPass> {
  using Base::Base;
  void runOnOperation() override;
};

LogicalResult propagate(func::FuncOp f, const Mesh &mesh) {
  MLIRContext *ctx = f.getContext();
  DenseMap<Value, Sharding> known;
  DenseSet<Operation *> pinnedOps;
  // Values their one consumer slices locally (see below).
  DenseMap<Value, Sharding> pulled;
  for (BlockArgument arg : f.getArguments()) {
    if (!isa<RankedTensorType>(arg.getType()))
      continue;
    FailureOr<Sharding> s = argSharding(f, arg.getArgNumber(), mesh);
    if (failed(s))
      return failure();
    known[arg] = *s;
  }
  for (Operation &op : f.getBody().front()) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    FailureOr<ShardingRule> rule = ruleOf(&op);
    if (failed(rule))
      return failure();
    // Results pinned by hand (or by a strategy) come first.
    FailureOr<SmallVector<Sharding>> written = writtenShardings(&op, mesh);
    if (failed(written))
      return failure();
    SmallVector<Sharding> &pinned = *written;
    if (!pinned.empty())
      pinnedOps.insert(&op);
    SmallVector<const Sharding *> operands, results;
    for (Value v : op.getOperands()) {
      auto it = known.find(v);
      operands.push_back(it == known.end() ? nullptr : &it->second);
    }
    for (const Sharding &s : pinned)
      results.push_back(&s);
    results.resize(op.getNumResults(), nullptr);
    OpSharding chosen = assignFactors(&op, *rule, operands, results, mesh);
    SmallVector<Attribute> attrs;
    for (auto [v, s] : llvm::zip(op.getResults(), chosen.results)) {
      known[v] = s;
      attrs.push_back(shardingAttr(s, mesh, ctx));
    }
    if (op.getNumResults())
      op.setAttr(KilnDialect::getShardingsAttrName(),
                 ArrayAttr::get(ctx, attrs));
    // An operand this op takes a local slice of (whole where the op splits
    // it), used only here: its producer may compute it split instead.
    for (auto [v, want] : llvm::zip(op.getOperands(), chosen.operands)) {
      auto it = known.find(v);
      if (it == known.end() || !v.getDefiningOp() || !v.hasOneUse() ||
          it->second == want || it->second.size() != want.size())
        continue;
      bool slices = true;
      for (size_t d = 0; d < want.size(); ++d)
        slices &= it->second[d].empty() || it->second[d] == want[d];
      if (slices)
        pulled[v] = want;
    }
  }
  // Backward: a sharding a function result asks for flows into the op that
  // computes it, and on into that op's operands while each is used only
  // there, so the value is computed split rather than computed whole and
  // sliced. (Ops whose results were pinned keep them.) So does the
  // sharding a consumer slices a whole operand to, where the producer
  // can compute it split from local slices of its own operands alone (no
  // communication): a one-hot of labels against a class iota is computed
  // for this rank's classes only.
  DenseMap<Value, Sharding> wanted = pulled;
  DenseSet<Value> pulledOnly;
  for (auto &[v, s] : pulled)
    pulledOnly.insert(v);
  auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    // Every requested sharding must fit the mesh; one is followed back
    // when its value has no other use.
    if (!isa<RankedTensorType>(v.getType()) ||
        !f.getResultAttr(i, KilnDialect::getShardingAttrName()))
      continue;
    FailureOr<Sharding> s = resultSharding(f, i, mesh);
    if (failed(s))
      return failure();
    if (v.hasOneUse())
      wanted[v] = *s;
  }
  for (Operation &op : llvm::reverse(f.getBody().front())) {
    if (op.hasTrait<OpTrait::IsTerminator>() || pinnedOps.contains(&op))
      continue;
    SmallVector<const Sharding *> results;
    bool any = false;
    for (Value r : op.getResults()) {
      auto it = wanted.find(r);
      results.push_back(it == wanted.end() ? nullptr : &it->second);
      any |= it != wanted.end() && it->second != known[r];
    }
    if (!any)
      continue;
    FailureOr<ShardingRule> rule = ruleOf(&op);
    if (failed(rule))
      return failure();
    SmallVector<const Sharding *> operands;
    for (Value v : op.getOperands()) {
      auto it = known.find(v);
      operands.push_back(it == known.end() ? nullptr : &it->second);
    }
    OpSharding chosen = assignFactors(&op, *rule, operands, results, mesh);
    // A pulled sharding is taken only if it costs no communication: every
    // operand is whole wherever the op now splits it, and the results
    // come out as wanted.
    bool local = true;
    for (auto [r, s] : llvm::zip(op.getResults(), chosen.results)) {
      auto it = wanted.find(r);
      local &= it == wanted.end() || it->second == s;
    }
    for (auto [v, s] : llvm::zip(op.getOperands(), chosen.operands)) {
      auto it = known.find(v);
      if (it == known.end() || it->second.size() != s.size())
        continue;
      for (size_t d = 0; d < s.size(); ++d)
        local &= it->second[d].empty() || it->second[d] == s[d];
    }
    bool onlyPulled = llvm::all_of(op.getResults(), [&](Value r) {
      return !wanted.count(r) || pulledOnly.contains(r);
    });
    if (onlyPulled && (!local || op.getNumOperands() == 0))
      continue;
    SmallVector<Attribute> attrs;
    for (auto [v, s] : llvm::zip(op.getResults(), chosen.results)) {
      known[v] = s;
      attrs.push_back(shardingAttr(s, mesh, ctx));
    }
    op.setAttr(KilnDialect::getShardingsAttrName(), ArrayAttr::get(ctx, attrs));
    for (auto [v, s] : llvm::zip(op.getOperands(), chosen.operands))
      if (v.getDefiningOp() && v.hasOneUse() && known.count(v) && known[v] != s) {
        wanted[v] = s;
        if (onlyPulled)
          pulledOnly.insert(v);
      }
  }
  return success();
}

void ShardPropagationPass::runOnOperation() {
  ModuleOp m = getOperation();
  FailureOr<Mesh> mesh = getMesh(m, "--kiln-shard-propagation");
  if (failed(mesh))
    return signalPassFailure();
  for (auto f : m.getOps<func::FuncOp>())
    if (!f.isExternal() && failed(propagate(f, *mesh)))
      return signalPassFailure();
}

} // namespace
