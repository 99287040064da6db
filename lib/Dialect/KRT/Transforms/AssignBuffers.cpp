//===- AssignBuffers.cpp - arena offsets for krt buffers --------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// --kiln-assign-buffers: liveness over the program order, union of views and
// in-place outputs with their source, then greedy-by-size best-fit placement
// (Pisarchyk & Lee, "Efficient Memory Management for Deep Neural Net
// Inference", 2020: the strategy TFLite uses), offsets aligned to 64 bytes.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/KRT/Transforms/Passes.h"

#include "kiln/runtime/CheckedMath.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/EquivalenceClasses.h"

#include <algorithm>

namespace kiln::krt {
#define GEN_PASS_DEF_KILNASSIGNBUFFERSPASS
#include "kiln/Dialect/KRT/Transforms/Passes.h.inc"
} // namespace kiln::krt

using namespace mlir;
using namespace kiln::krt;

namespace {


/// One arena buffer: an alloc and everything sharing its bytes.
struct Buffer {
  SmallVector<AllocOp> allocs;
  int64_t size = 0;       // aligned bytes
  int64_t def = INT64_MAX; // first op index writing it
  int64_t last = -1;       // last op index reading it
  int64_t offset = -1;
};

struct KilnAssignBuffersPass
    : public kiln::krt::impl::KilnAssignBuffersPassBase<KilnAssignBuffersPass> {
  using Base::Base;
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(assign(func)))
        return signalPassFailure();
  }
  LogicalResult assign(func::FuncOp func);
};

LogicalResult KilnAssignBuffersPass::assign(func::FuncOp func) {
  if (!func.getBody().hasOneBlock())
    return func.emitOpError() << "must have one block for buffer assignment";
  Block &body = func.getBody().front();

  // The buffer (alloc) a value's bytes belong to, if it is in the arena.
  llvm::DenseMap<Value, Value> root;
  auto rootOf = [&](Value v) -> Value {
    auto it = root.find(v);
    return it == root.end() ? Value() : it->second;
  };
  llvm::EquivalenceClasses<Value> classes;
  llvm::DenseMap<Operation *, int64_t> index;
  int64_t n = 0;
  for (Operation &op : body) {
    index[&op] = n++;
    if (auto a = dyn_cast<AllocOp>(op)) {
      root[a] = a;
      classes.insert(a.getResult());
    } else if (auto v = dyn_cast<ViewOp>(op)) {
      if (Value r = rootOf(v.getSource()))
        root[v] = r;
    }
  }
  const int64_t end = n; // function results live to the end

  // First write and last read of each alloc (views count for their root).
  llvm::DenseMap<Value, int64_t> def, last;
  auto noteUse = [&](Value v, int64_t at) {
    if (Value r = rootOf(v))
      last[r] = std::max(last.lookup(r), at);
  };
  for (Operation &op : body) {
    int64_t i = index[&op];
    if (auto l = dyn_cast<LaunchOp>(op)) {
      for (Value v : l.getIns())
        noteUse(v, i);
      for (Value v : l.getOuts())
        if (Value r = rootOf(v); r && !def.count(r))
          def[r] = i;
      continue;
    }
    if (isa<ViewOp, AllocOp, ConstantOp>(op))
      continue;
    // Collectives read their input and write their output; the return reads
    // to the end; any other op conservatively reads and writes everything.
    bool isReturn = isa<func::ReturnOp>(op);
    for (Value v : op.getOperands()) {
      noteUse(v, isReturn ? end : i);
      if (Value r = rootOf(v); r && !isReturn && !def.count(r))
        def[r] = i;
    }
  }

  int64_t inPlace = 0;
  // Class-level liveness, kept up to date as in-place outputs join inputs.
  llvm::DenseMap<Value, int64_t> classLast;
  for (auto &kv : root)
    if (kv.first == kv.second)
      classLast[kv.first] = last.lookup(kv.first);
  auto leader = [&](Value alloc) { return classes.getLeaderValue(alloc); };

  for (Operation &op : body) {
    auto l = dyn_cast<LaunchOp>(op);
    if (!l || !l.getInPlace() || l.getOuts().size() != 1)
      continue;
    int64_t i = index[&op];
    Value out = l.getOuts()[0];
    Value outRoot = rootOf(out);
    if (!outRoot || outRoot != out)
      continue;
    for (Value in : l.getIns()) {
      Value r = rootOf(in);
      if (!r || in.getType() != out.getType())
        continue;
      Value lead = leader(r);
      if (lead == leader(outRoot) || classLast.lookup(lead) != i)
        continue;
      // Another input reading the same bytes under another shape or value
      // would see elements already overwritten.
      bool shared = llvm::any_of(l.getIns(), [&](Value other) {
        Value o = rootOf(other);
        return other != in && o && leader(o) == lead;
      });
      if (shared)
        continue;
      int64_t merged = std::max(classLast.lookup(lead),
                                classLast.lookup(leader(outRoot)));
      classes.unionSets(lead, outRoot);
      classLast[leader(outRoot)] = merged;
      ++numInPlace;
      ++inPlace;
      break;
    }
  }

  // Every size and offset below is checked (kiln/runtime/CheckedMath.h): a
  // buffer is at most kiln::rt::kMaxTensorBytes (the krt verifier), and so is the
  // arena the runtime accepts, so a sum past that is refused, not wrapped.
  auto tooLarge = [&](Operation *at, const Twine &what) {
    return at->emitError() << "@" << func.getSymName() << " needs " << what
                           << " of more than " << kiln::rt::kMaxTensorBytesText
                           << ", the largest arena the runtime accepts";
  };

  // Gather the buffers.
  llvm::DenseMap<Value, unsigned> bufferOf;
  std::vector<Buffer> buffers;
  int64_t naive = 0;
  bool naiveOverflow = false;
  for (Operation &op : body) {
    auto a = dyn_cast<AllocOp>(op);
    if (!a)
      continue;
    Value lead = leader(a.getResult());
    auto [it, inserted] = bufferOf.try_emplace(lead, buffers.size());
    if (inserted)
      buffers.emplace_back();
    Buffer &b = buffers[it->second];
    b.allocs.push_back(a);
    int64_t bytes;
    if (!kiln::rt::checkedAlignUp(bufferBytes(a.getType()), kArenaAlignment, bytes))
      return tooLarge(a, "a buffer");
    // The naive total is a statistic; it saturates rather than fails.
    naiveOverflow |= !kiln::rt::checkedAdd(naive, bytes, naive);
    b.size = std::max(b.size, bytes);
    int64_t d = def.count(a) ? def[a] : index[a];
    b.def = std::min(b.def, d);
    b.last = std::max({b.last, last.lookup(a), d});
  }

  // Greedy by size, best fit among the placed buffers alive at the same time.
  std::vector<unsigned> order(buffers.size());
  for (unsigned k = 0; k < order.size(); ++k)
    order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](unsigned x, unsigned y) {
    if (buffers[x].size != buffers[y].size)
      return buffers[x].size > buffers[y].size;
    return buffers[x].def < buffers[y].def;
  });
  std::vector<unsigned> placed;
  int64_t arena = 0;
  for (unsigned k : order) {
    Buffer &b = buffers[k];
    SmallVector<const Buffer *> live;
    for (unsigned p : placed) {
      const Buffer &o = buffers[p];
      if (o.def <= b.last && b.def <= o.last)
        live.push_back(&o);
    }
    llvm::sort(live, [](const Buffer *x, const Buffer *y) {
      return x->offset < y->offset;
    });
    // Placed buffers end at or below kMaxTensorBytes (checked below), so
    // these sums of two such values cannot overflow.
    int64_t prevEnd = 0, best = -1, bestGap = INT64_MAX;
    for (const Buffer *o : live) {
      int64_t gap = o->offset - prevEnd;
      if (gap >= b.size && gap < bestGap) {
        best = prevEnd;
        bestGap = gap;
      }
      prevEnd = std::max(prevEnd, o->offset + o->size);
    }
    b.offset = best >= 0 ? best : prevEnd;
    int64_t end;
    if (!kiln::rt::checkedAdd(b.offset, b.size, end) || end > kiln::rt::kMaxTensorBytes)
      return tooLarge(b.allocs.front(), "an arena");
    arena = std::max(arena, end);
    placed.push_back(k);
  }
  if (naiveOverflow)
    naive = INT64_MAX;

  Builder builder(func.getContext());
  for (Buffer &b : buffers)
    for (AllocOp a : b.allocs)
      a.setOffsetAttr(builder.getI64IntegerAttr(b.offset));
  func->setAttr(KRTDialect::getArenaBytesAttrName(),
                builder.getI64IntegerAttr(arena));
  if (printStatistics)
    llvm::errs() << "kiln-assign-buffers: @" << func.getSymName()
                 << " peak-bytes " << arena << " naive-bytes " << naive
                 << " buffers " << buffers.size() << " in-place " << inPlace
                 << "\n";
  peakBytes += arena;
  naiveBytes += naive;
  numBuffers += buffers.size();
  return success();
}

} // namespace
