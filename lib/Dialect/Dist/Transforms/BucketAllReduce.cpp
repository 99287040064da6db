//===- BucketAllReduce.cpp - --kiln-bucket-all-reduce -----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Groups shard.all_reduce ops into buckets: dist.all_reduce_start right
// after the bucket's last tensor is computed, dist.all_reduce_wait right
// before the first read of a result (Passes.td has the contract).
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Dist/Transforms/Passes.h"

#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/Statistic.h"

#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#define DEBUG_TYPE "kiln-bucket-all-reduce"

namespace kiln::dist {
#define GEN_PASS_DEF_KILNBUCKETALLREDUCEPASS
#include "kiln/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace kiln::dist

using namespace mlir;
using namespace kiln::dist;

namespace {

/// One all-reduce to bucket: where its tensor is computed (-1: before the
/// block) and where its result is first read, as positions in the block.
struct Member {
  shard::AllReduceOp op;
  int64_t def, firstUse, bytes;
};

RankedTensorType tensorOf(shard::AllReduceOp ar) {
  return cast<RankedTensorType>(ar.getResult().getType());
}

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

/// All-reduces that may share a bucket agree on all of these.
using Key = std::tuple<std::string, std::vector<int16_t>, int, std::string,
                       std::string>;

struct Bucket {
  SmallVector<Member> members;
  int64_t bytes = 0, def = -1, firstUse = std::numeric_limits<int64_t>::max();
};

struct BucketAllReducePass
    : public kiln::dist::impl::KilnBucketAllReducePassBase<BucketAllReducePass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (!(bucketMB >= 0) || !std::isfinite(bucketMB) || bucketMB > 1e6) {
      f.emitError("--kiln-bucket-all-reduce: bucket-mb must be in [0, 1e6], got ")
          << bucketMB;
      return signalPassFailure();
    }
    if (bucketMB == 0 || f.isExternal())
      return;
    const int64_t cap = (int64_t)(bucketMB * 1024 * 1024);
    for (Block &block : f.getBody())
      bucketBlock(block, cap);
  }

  void bucketBlock(Block &block, int64_t cap) {
    DenseMap<Operation *, int64_t> pos;
    SmallVector<Operation *> ops;
    for (Operation &op : block) {
      pos[&op] = ops.size();
      ops.push_back(&op);
    }
    const int64_t end = ops.size();
    auto posOf = [&](Value v) -> int64_t {
      Operation *d = v.getDefiningOp();
      if (!d)
        return -1;
      Operation *a = block.findAncestorOpInBlock(*d);
      return a ? pos[a] : -1;
    };

    SmallVector<Member> members;
    DenseSet<Operation *> candidate;
    for (Operation *op : ops)
      if (auto ar = dyn_cast<shard::AllReduceOp>(op)) {
        auto t = dyn_cast<RankedTensorType>(ar.getResult().getType());
        if (!t || !t.hasStaticShape() || !t.getElementType().isIntOrFloat() ||
            t != ar.getInput().getType() || t.getNumElements() == 0)
          continue;
        candidate.insert(op);
      }
    for (Operation *op : ops) {
      if (!candidate.contains(op))
        continue;
      auto ar = cast<shard::AllReduceOp>(op);
      // An all-reduce of another's result stays where it is.
      if (Operation *d = ar.getInput().getDefiningOp(); d && candidate.contains(d))
        continue;
      int64_t first = end;
      for (Operation *user : ar->getUsers()) {
        Operation *a = block.findAncestorOpInBlock(*user);
        if (!a)
          continue;
        first = std::min(first, pos[a]);
      }
      if (first == end) // unused: wait before the terminator
        first = end - 1;
      auto t = tensorOf(ar);
      int64_t bytes = t.getNumElements() *
                      std::max<int64_t>(1, t.getElementTypeBitWidth() / 8);
      members.push_back({ar, posOf(ar.getInput()), first, bytes});
    }
    if (members.empty())
      return;
    // In the order the tensors are computed (backward order for gradients).
    llvm::stable_sort(members, [](const Member &a, const Member &b) {
      return a.def < b.def;
    });

    std::map<Key, Bucket> open;
    SmallVector<Bucket> closed;
    auto keyOf = [](shard::AllReduceOp ar) {
      auto wire = ar->getAttrOfType<StringAttr>(
          kiln::KilnDialect::getCompressionAttrName());
      return Key(ar.getGrid().str(), std::vector<int16_t>(ar.getGridAxes().begin(),
                                                          ar.getGridAxes().end()),
                 (int)ar.getReduction(), typeName(tensorOf(ar).getElementType()),
                 wire ? wire.getValue().str() : "");
    };
    for (const Member &m : members) {
      Bucket &b = open[keyOf(m.op)];
      // Full, or a member's result is read before this tensor is computed:
      // the bucket goes as it is.
      if (!b.members.empty() &&
          (b.bytes + m.bytes > cap || m.def >= b.firstUse)) {
        closed.push_back(std::move(b));
        b = Bucket();
      }
      b.members.push_back(m);
      b.bytes += m.bytes;
      b.def = std::max(b.def, m.def);
      b.firstUse = std::min(b.firstUse, m.firstUse);
    }
    for (auto &kv : open)
      if (!kv.second.members.empty())
        closed.push_back(std::move(kv.second));
    // Start in the order the buckets became ready.
    llvm::stable_sort(closed, [](const Bucket &a, const Bucket &b) {
      return a.def < b.def;
    });

    int bucketIndex = 0;
    for (Bucket &b : closed) {
      OpBuilder builder(&getContext());
      // Right after the last tensor is computed, after the starts already
      // placed there (starts keep the order above on every rank).
      Block::iterator at = b.def < 0 ? block.begin()
                                     : std::next(ops[b.def]->getIterator());
      while (at != block.end() && isa<AllReduceStartOp>(&*at))
        ++at;
      builder.setInsertionPoint(&block, at);
      shard::AllReduceOp lead = b.members.front().op;
      SmallVector<Value> inputs;
      SmallVector<Type> types;
      int64_t elements = 0;
      for (Member &m : b.members) {
        inputs.push_back(m.op.getInput());
        types.push_back(tensorOf(m.op));
        elements += tensorOf(m.op).getNumElements();
      }
      auto bucketType = BucketType::get(&getContext(), elements,
                                        tensorOf(lead).getElementType());
      // One tensor: its own location; several: the bucket, named (a fused
      // location would list every gradient in each error and trace).
      Location loc = b.members.size() == 1
                         ? lead.getLoc()
                         : Location(NameLoc::get(builder.getStringAttr(
                               "bucket " + std::to_string(bucketIndex) + " (" +
                               std::to_string(b.members.size()) + " tensors)")));
      ++bucketIndex;
      auto start = AllReduceStartOp::create(
          builder, loc, bucketType, inputs, lead.getGridAttr(),
          lead.getGridAxesAttr(),
          shard::ReductionKindAttr::get(&getContext(), lead.getReduction()),
          lead->getAttrOfType<StringAttr>(
              kiln::KilnDialect::getCompressionAttrName()));
      builder.setInsertionPoint(ops[b.firstUse]);
      auto wait = AllReduceWaitOp::create(builder, loc, types, start.getBucket());
      for (auto [m, r] : llvm::zip(b.members, wait.getResults())) {
        m.op.getResult().replaceAllUsesWith(r);
        m.op->erase();
      }
      ++numBuckets;
    }
  }
};

} // namespace
