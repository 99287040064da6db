//===- Recompute.cpp - --kiln-recompute -------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Activation recompute (Passes.td has the contract). The pass works on the
// step function in the order it will run, so its liveness is the arena's:
//   1. classify: forward ops (the loss's slice, or a stage's untagged-
//      backward ops) and backward readers; the saved activations;
//   2. choose: the mode's pool, cheapest recompute FLOPs per byte first,
//      until the estimated peak of live intermediates meets the budget;
//   3. clone: each chosen value's op (and the intermediates it needs that
//      are not kept anyway) just before its first backward reader.
// The estimate mirrors --kiln-assign-buffers: a value is live from its
// definition to its last reader, views (kiln.reshape) share their source's
// bytes, parameters, inputs and constants are outside the arena, returned
// values live to the end. The pass knows no op by name except the view.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/Support/TensorSize.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace kiln {
#define GEN_PASS_DEF_KILNRECOMPUTEPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using kiln::KilnDialect;

namespace {

/// Selective recompute's bound: FLOPs of the recomputation per byte freed.
constexpr double kSelectiveFlopsPerByte = 32.0;
constexpr double kMiB = 1024.0 * 1024.0;

int64_t bytesOf(Value v) {
  int64_t bytes = 0;
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && kiln::checkedTypeBytes(t, bytes) ? bytes : 0;
}

int64_t flopsOf(Operation *op) {
  if (auto c = dyn_cast<kiln::CostOpInterface>(op))
    return std::max<int64_t>(0, c.getFlops());
  return 0;
}

/// Whether the step function is one --kiln-recompute works on.
bool isStepFunction(func::FuncOp f) {
  StringRef n = f.getSymName();
  return !f.isExternal() &&
         (n == kiln::kTrainStepFuncName ||
          n.starts_with((kiln::kTrainStepFuncName + "_pp").str()));
}

/// One step function's forward/backward split and its saved activations.
class StepAnalysis {
public:
  explicit StepAnalysis(func::FuncOp f) : f(f), body(f.getBody().front()) {
    int64_t i = 0;
    for (Operation &op : body)
      pos[&op] = i++;
    end = i;
    bool tagged = false;
    for (Operation &op : body)
      tagged |= op.hasAttr(KilnDialect::getBackwardAttrName());
    if (tagged) {
      // A pipeline rank's program: the tags say it.
      for (Operation &op : body.without_terminator()) {
        if (op.hasAttr(KilnDialect::getBackwardAttrName()))
          backward.insert(&op);
        else if (op.hasAttr(KilnDialect::getStageAttrName()))
          forward.insert(&op);
      }
    } else {
      // The loss's slice is forward; what reads it and is not, backward.
      auto ret = cast<func::ReturnOp>(body.getTerminator());
      SmallVector<Operation *> work;
      for (unsigned r = 0; r < ret.getNumOperands(); ++r)
        if (kiln::isLoss(f, r))
          if (Operation *d = ret.getOperand(r).getDefiningOp())
            work.push_back(d);
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        if (op->getBlock() != &body || !forward.insert(op).second)
          continue;
        for (Value v : op->getOperands())
          if (Operation *d = v.getDefiningOp())
            work.push_back(d);
      }
      for (Operation &op : body.without_terminator())
        if (!forward.count(&op))
          backward.insert(&op);
    }
    // Saved activations with a recomputable op: read by backward, by
    // nothing else outside forward (a returned or sent value stays).
    for (Operation *op : forward) {
      if (!recomputable(op))
        continue;
      for (Value v : op->getResults()) {
        bool readInBackward = false, other = false;
        for (Operation *u : v.getUsers()) {
          if (backward.count(u))
            readInBackward = true;
          else if (!forward.count(u))
            other = true;
        }
        if (readInBackward && !other && bytesOf(v) > 0)
          candidates.push_back(v);
      }
    }
    llvm::sort(candidates, [&](Value a, Value b) {
      return pos[a.getDefiningOp()] < pos[b.getDefiningOp()] ||
             (a.getDefiningOp() == b.getDefiningOp() &&
              cast<OpResult>(a).getResultNumber() < cast<OpResult>(b).getResultNumber());
    });
  }

  bool recomputable(Operation *op) const {
    return forward.count(op) && op->getNumRegions() == 0 &&
           isMemoryEffectFree(op) && !isa<kiln::ConstantOp>(op) &&
           op->getNumResults() > 0;
  }
  /// Outside the arena: parameters, inputs, constants.
  static bool outsideArena(Value v) {
    return isa<BlockArgument>(v) || isa_and_nonnull<kiln::ConstantOp>(v.getDefiningOp());
  }
  /// Kept whatever is recomputed: free, or saved and not recomputed, or
  /// made by an op that is not cloned (side effects).
  bool kept(Value v, const llvm::DenseSet<Value> &cloned) const {
    if (outsideArena(v) || cloned.count(v))
      return outsideArena(v);
    Operation *d = v.getDefiningOp();
    if (!recomputable(d))
      return true;
    for (Operation *u : v.getUsers())
      if (backward.count(u))
        return true; // saved anyway
    return false;
  }
  /// `chosen` and the intermediates their ops need that are not kept: the
  /// values whose ops are cloned.
  llvm::DenseSet<Value> closure(ArrayRef<Value> chosen) const {
    llvm::DenseSet<Value> out(chosen.begin(), chosen.end());
    SmallVector<Value> work(chosen.begin(), chosen.end());
    while (!work.empty()) {
      Value v = work.pop_back_val();
      for (Value u : v.getDefiningOp()->getOperands())
        if (!kept(u, out) && out.insert(u).second)
          work.push_back(u);
    }
    return out;
  }
  /// FLOPs of cloning the ops of `values`.
  int64_t flops(const llvm::DenseSet<Value> &values) const {
    llvm::DenseSet<Operation *> ops;
    int64_t total = 0;
    for (Value v : values)
      if (ops.insert(v.getDefiningOp()).second)
        total += flopsOf(v.getDefiningOp());
    return total;
  }

  /// Where each cloned value's copy goes: before the first backward op
  /// that reads it or a copy that does (an index of `body`).
  llvm::DenseMap<Value, int64_t> placeClones(const llvm::DenseSet<Value> &cloned) const {
    llvm::DenseMap<Value, int64_t> at;
    // Latest-defined first: a value's readers among the clones are placed
    // before it is.
    SmallVector<Value> order(cloned.begin(), cloned.end());
    llvm::sort(order, [&](Value a, Value b) {
      int64_t pa = pos.lookup(a.getDefiningOp()), pb = pos.lookup(b.getDefiningOp());
      return pa > pb || (pa == pb && cast<OpResult>(a).getResultNumber() >
                                         cast<OpResult>(b).getResultNumber());
    });
    for (Value v : order) {
      int64_t p = end;
      for (Operation *u : v.getUsers())
        if (backward.count(u))
          p = std::min(p, pos.lookup(u));
      // The clones of v's op's other results' readers, and of the clones
      // that read v.
      for (Operation *u : v.getUsers())
        for (Value r : u->getResults())
          if (auto it = at.find(r); it != at.end() && forward.count(u))
            p = std::min(p, it->second);
      at[v] = p;
    }
    return at;
  }

  /// Where each cloned op goes: before the earliest placement of its
  /// cloned results (one copy of the op serves them all).
  llvm::DenseMap<Operation *, int64_t>
  placeOps(const llvm::DenseMap<Value, int64_t> &at) const {
    llvm::DenseMap<Operation *, int64_t> out;
    for (auto [v, p] : at) {
      auto [it, fresh] = out.try_emplace(v.getDefiningOp(), p);
      it->second = std::min(it->second, p);
    }
    return out;
  }

  struct Estimate {
    int64_t peak = 0;   // bytes
    double area = 0;    // bytes x time live, for ties
  };
  /// The live intermediates with `cloned` recomputed: their peak bytes.
  /// As --kiln-assign-buffers places them: a value lives from its op to its
  /// last reader, a view shares its source's bytes, an in-place
  /// elementwise op's result takes the bytes of an input of its type that
  /// dies there (unless another input reads them too).
  Estimate estimate(const llvm::DenseSet<Value> &cloned) const {
    llvm::DenseMap<Operation *, int64_t> opAt = placeOps(placeClones(cloned));
    // Times: op i at i W + W - 1; the copies placed before op p at
    // p W + 1 + (their op's index), in forward order, as apply emits them.
    const int64_t W = end + 2, last = (end + 1) * W;
    using Key = std::pair<Value, unsigned>; // a value, or its copy (1)
    auto rootOf = [&](Value v, bool clone) -> Key {
      while (auto r = dyn_cast_or_null<kiln::ReshapeOp>(v.getDefiningOp())) {
        Value in = r.getInput();
        clone = clone && cloned.count(in);
        v = in;
      }
      return {v, unsigned(clone)};
    };
    // The ops as they will run: the originals and the copies.
    struct Run {
      int64_t t;
      Operation *op;
      SmallVector<Key> ins, outs;
    };
    std::vector<Run> runs;
    for (Operation &op : body) {
      Run r{pos.lookup(&op) * W + W - 1, &op, {}, {}};
      for (Value v : op.getResults())
        r.outs.push_back(rootOf(v, false));
      for (Value u : op.getOperands()) // a backward reader reads the copy
        r.ins.push_back(rootOf(u, cloned.count(u) && backward.count(&op)));
      runs.push_back(std::move(r));
    }
    for (auto [op, p] : opAt) {
      Run r{p * W + 1 + pos.lookup(op), op, {}, {}};
      for (Value v : op->getResults())
        r.outs.push_back(rootOf(v, cloned.count(v) > 0));
      for (Value u : op->getOperands())
        r.ins.push_back(rootOf(u, cloned.count(u) > 0));
      runs.push_back(std::move(r));
    }
    llvm::sort(runs, [](const Run &a, const Run &b) { return a.t < b.t; });
    // [first, last] per root; a returned value lives to the end.
    llvm::DenseMap<Key, std::pair<int64_t, int64_t>> span;
    auto touch = [&](Key k, int64_t t) {
      if (outsideArena(k.first))
        return;
      auto [it, fresh] = span.try_emplace(k, t, t);
      it->second.first = std::min(it->second.first, t);
      it->second.second = std::max(it->second.second, t);
    };
    for (const Run &r : runs) {
      bool ret = isa<func::ReturnOp>(r.op);
      for (Key k : r.outs)
        touch(k, r.t);
      for (Key k : r.ins)
        touch(k, ret ? last : r.t);
    }
    // In place: the result joins an input that dies at the op.
    llvm::DenseMap<Key, Key> joined; // root -> its class's leader
    auto leader = [&](Key k) {
      while (true) {
        auto it = joined.find(k);
        if (it == joined.end())
          return k;
        k = it->second;
      }
    };
    for (const Run &r : runs) {
      if (!r.op->hasTrait<kiln::trait::InPlaceElementwise>() || r.outs.size() != 1)
        continue;
      Key out = r.outs[0];
      if (outsideArena(out.first) || out.first.getDefiningOp() != r.op || !span.count(out))
        continue;
      for (auto [k, in] : llvm::zip(r.ins, r.op->getOperands())) {
        if (outsideArena(k.first) || in.getType() != r.op->getResult(0).getType())
          continue;
        Key lead = leader(k);
        if (lead == leader(out) || span.lookup(lead).second != r.t)
          continue;
        if (llvm::count_if(r.ins, [&](Key o) { return !outsideArena(o.first) && leader(o) == lead; }) > 1)
          continue;
        auto &a = span[lead];
        auto b = span.lookup(out);
        a.first = std::min(a.first, b.first);
        a.second = std::max(a.second, b.second);
        span.erase(out);
        joined[out] = lead;
        break;
      }
    }
    std::vector<std::pair<int64_t, int64_t>> events; // time, +/- bytes
    Estimate e;
    for (auto &[key, sp] : span) {
      int64_t b = bytesOf(key.first);
      events.push_back({sp.first, b});
      events.push_back({sp.second + 1, -b});
      e.area += (double)b * (double)(sp.second + 1 - sp.first) / (double)W;
    }
    llvm::sort(events, [](auto &a, auto &b) {
      return a.first < b.first || (a.first == b.first && a.second < b.second);
    });
    int64_t live = 0;
    for (auto [t, b] : events) {
      live += b;
      e.peak = std::max(e.peak, live);
    }
    return e;
  }

  /// Clones `cloned`'s ops before their first backward readers and points
  /// those readers at the copies.
  void apply(const llvm::DenseSet<Value> &cloned) {
    llvm::DenseMap<Operation *, int64_t> opAt = placeOps(placeClones(cloned));
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    // The copies before each op in forward order, as estimate assumes.
    SmallVector<std::pair<int64_t, Operation *>> todo;
    for (auto [op, p] : opAt)
      todo.push_back({p, op});
    llvm::sort(todo, [&](auto &a, auto &b) {
      return a.first < b.first ||
             (a.first == b.first && pos.lookup(a.second) < pos.lookup(b.second));
    });
    IRMapping map;
    OpBuilder b(f.getContext());
    for (auto [p, op] : todo) {
      b.setInsertionPoint(ops[p]);
      Operation *c = b.clone(*op, map); // operands: earlier clones or originals
      if (op->hasAttr(KilnDialect::getStageAttrName()))
        c->setAttr(KilnDialect::getBackwardAttrName(), b.getUnitAttr());
    }
    // Backward readers read the copies.
    for (Operation *op : ops)
      if (backward.count(op))
        for (OpOperand &use : op->getOpOperands())
          if (cloned.count(use.get()))
            use.set(map.lookup(use.get()));
  }

  func::FuncOp f;
  Block &body;
  llvm::DenseMap<Operation *, int64_t> pos;
  int64_t end = 0;
  llvm::DenseSet<Operation *> forward, backward;
  SmallVector<Value> candidates;
};

struct RecomputePass : public kiln::impl::KilnRecomputePassBase<RecomputePass> {
  using Base::Base;

  void runOnOperation() override {
    if (mode != "none" && mode != "selective" && mode != "full") {
      getOperation().emitError("--kiln-recompute: unknown mode '")
          << mode << "' (none, selective or full)";
      return signalPassFailure();
    }
    if (!(budgetMb >= 0.0)) {
      getOperation().emitError("--kiln-recompute: budget-mb must be >= 0, got ")
          << (double)budgetMb;
      return signalPassFailure();
    }
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (isStepFunction(f) && failed(recompute(f)))
        return signalPassFailure();
  }

  LogicalResult recompute(func::FuncOp f) {
    if (!f.getBody().hasOneBlock())
      return f.emitOpError("must have one block for --kiln-recompute");
    StepAnalysis a(f);
    // The pool, each with its cost per byte freed.
    struct Pick {
      Value v;
      double perByte;
    };
    SmallVector<Pick> pool;
    for (Value v : a.candidates) {
      llvm::DenseSet<Value> c = a.closure({v});
      double perByte = (double)a.flops(c) / (double)bytesOf(v);
      if (mode == "selective" && perByte > kSelectiveFlopsPerByte)
        continue;
      if (mode == "none" && budgetMb <= 0.0)
        continue;
      pool.push_back({v, perByte});
    }
    llvm::stable_sort(pool, [](const Pick &x, const Pick &y) { return x.perByte < y.perByte; });

    const StepAnalysis::Estimate before = a.estimate({});
    SmallVector<Value> chosen;
    llvm::DenseSet<Value> cloned;
    StepAnalysis::Estimate now = before;
    const int64_t budget = (int64_t)(budgetMb * kMiB);
    // Cheapest first; each kept when it does not raise the peak and
    // shortens what is live (a copy placed where the forward value was
    // still live anyway frees nothing).
    for (const Pick &p : pool) {
      if (budget > 0 && now.peak <= budget)
        break;
      chosen.push_back(p.v);
      llvm::DenseSet<Value> c = a.closure(chosen);
      StepAnalysis::Estimate next = a.estimate(c);
      if (next.peak <= now.peak && next.area < now.area) {
        now = next;
        cloned = std::move(c);
      } else {
        chosen.pop_back();
      }
    }
    if (budget > 0 && now.peak > budget)
      return f.emitOpError(llvm::formatv(
                 "--memory-budget {0:F2} MiB is below the smallest peak "
                 "recompute reaches: {1:F2} MiB of live intermediates "
                 "(without recompute {2:F2} MiB)",
                 (double)budgetMb, now.peak / kMiB, before.peak / kMiB)
                 .str());
    int64_t flops = a.flops(cloned);
    if (!cloned.empty())
      a.apply(cloned);
    f->setAttr(KilnDialect::getRecomputeAttrName(),
               DictionaryAttr::get(
                   f.getContext(),
                   {NamedAttribute(StringAttr::get(f.getContext(), "activations"),
                                   IntegerAttr::get(IntegerType::get(f.getContext(), 64),
                                                    (int64_t)chosen.size())),
                    NamedAttribute(StringAttr::get(f.getContext(), "flops"),
                                   IntegerAttr::get(IntegerType::get(f.getContext(), 64),
                                                    flops)),
                    NamedAttribute(StringAttr::get(f.getContext(), "peak_before"),
                                   IntegerAttr::get(IntegerType::get(f.getContext(), 64),
                                                    before.peak)),
                    NamedAttribute(StringAttr::get(f.getContext(), "peak_after"),
                                   IntegerAttr::get(IntegerType::get(f.getContext(), 64),
                                                    now.peak))}));
    return success();
  }
};

} // namespace
