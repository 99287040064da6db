//===- Zero.cpp - --kiln-zero: optimizer state sharded over dp ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// ZeRO stage 1 (Passes.td has the contract). Per optimizer update of a
// parameter p of n elements, with N = n rounded up to a multiple of dp and
// k = N / dp: the gradient's all-reduce becomes a reduce-scatter of the
// flattened, zero-padded gradient (each rank gets its k reduced elements),
// the update runs on this rank's k elements of p (shard.all_slice) and of the
// optimizer state (whose arguments become tensor<k>), and the new p is the
// all-gather of the ranks' k new elements, cut back to n and reshaped. The
// update ops are elementwise, so the k-element update is the 1-rank update
// restricted to those elements.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <string>
#include <tuple>

namespace kiln {
#define GEN_PASS_DEF_KILNZEROPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

#include <functional>

using namespace mlir;

namespace {

struct ZeroPass : public kiln::impl::KilnZeroPassBase<ZeroPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    if (stage < 0 || stage > 3) {
      m.emitError("--kiln-zero: stage must be 0, 1, 2 or 3, got ") << (int64_t)stage;
      return signalPassFailure();
    }
    if (stage == 0)
      return;
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kTrainStepFuncName);
    auto grid = m.lookupSymbol<shard::GridOp>("kiln_mesh");
    if (!f || f.isExternal() || !grid) {
      m.emitError("--kiln-zero: the module has no @train_step with a "
                  "@kiln_mesh: run --kiln-data-parallel and "
                  "--kiln-attach-optimizer first");
      return signalPassFailure();
    }
    // The dp axis (the only axis, or the one named "dp" of a 2-D mesh: dp
    // x ep, dp x tp). The state is sharded over dp alone; a gradient summed
    // over dp and other axes is reduce-scattered over dp and its block
    // summed over the others.
    auto names = grid->getAttrOfType<ArrayAttr>(kiln::KilnDialect::getAxisNamesAttrName());
    dpAxis = -1;
    if (grid.getRank() == 1)
      dpAxis = 0;
    else if (names)
      for (auto [i, n] : llvm::enumerate(names))
        if (auto sn = dyn_cast<StringAttr>(n); sn && sn.getValue() == "dp")
          dpAxis = (int16_t)i;
    if (dpAxis < 0 || grid.getShape()[dpAxis] < 1) {
      grid.emitOpError("--kiln-zero needs a dp axis in the mesh");
      return signalPassFailure();
    }
    dp = grid.getShape()[dpAxis];
    if (dp == 1)
      return;
    if (failed(apply(f)))
      signalPassFailure();
  }

  LogicalResult apply(func::FuncOp f);
  void bucketReduceScatters(Block &body);
  void bucketAllGathers(Block &body);

private:
  int64_t dp = 1;
  /// The dp axis of @kiln_mesh.
  int16_t dpAxis = 0;
  /// The updates' new sharded gradients, by the all-reduce they replace.
  DenseMap<Value, Value> shardedGrad;
  /// Gradients that reached the updates whole and equal on every rank:
  /// sliced locally, and left for any other reader.
  DenseSet<Value> replicatedGrads;

  static RankedTensorType flatType(int64_t n, Type elt) {
    return RankedTensorType::get({n}, elt);
  }
  /// x (of n elements) flattened and zero-padded to N.
  Value flatPad(OpBuilder &b, Location loc, Value x, int64_t n, int64_t N) {
    Type elt = cast<RankedTensorType>(x.getType()).getElementType();
    Value flat = x;
    if (cast<RankedTensorType>(x.getType()).getRank() != 1)
      flat = kiln::ReshapeOp::create(b, loc, flatType(n, elt), x);
    if (N == n)
      return flat;
    return kiln::PadOp::create(b, loc, flatType(N, elt), flat,
                               b.getDenseI64ArrayAttr({0}),
                               b.getDenseI64ArrayAttr({N - n}),
                               b.getStringAttr("constant"), b.getF64FloatAttr(0.0));
  }
  /// The inverse of flatPad: the flat, padded `x` cut to T's element count
  /// and reshaped to T.
  Value unflatten(OpBuilder &b, Location loc, Value x, RankedTensorType T) {
    const int64_t n = T.getNumElements();
    if (cast<RankedTensorType>(x.getType()).getDimSize(0) != n)
      x = kiln::SliceOp::create(b, loc, flatType(n, T.getElementType()), x,
                                b.getDenseI64ArrayAttr({0}),
                                b.getDenseI64ArrayAttr({n}),
                                b.getDenseI64ArrayAttr({1}));
    if (T.getRank() != 1)
      x = kiln::ReshapeOp::create(b, loc, T, x);
    return x;
  }
  /// This rank's k elements of the gradient operand `g` of an update, or
  /// null (with a diagnostic on `user`) when `g` is not the all-reduced
  /// gradient (possibly scaled by a scalar, as clipping does).
  Value shardGrad(OpBuilder &b, Value g, int64_t n, int64_t N, Operation *user);
};

Value ZeroPass::shardGrad(OpBuilder &b, Value g, int64_t n, int64_t N,
                          Operation *user) {
  const int64_t k = N / dp;
  Type elt = cast<RankedTensorType>(g.getType()).getElementType();
  if (auto ar = g.getDefiningOp<shard::AllReduceOp>()) {
    if ((ar.getReduction() != shard::ReductionKind::Average &&
         ar.getReduction() != shard::ReductionKind::Sum) ||
        ar.getGrid() != "kiln_mesh") {
      user->emitOpError() << "--kiln-zero: its gradient is reduced with "
                          << shard::stringifyReductionKind(ar.getReduction())
                          << "; ZeRO shards a sum or an average over "
                             "@kiln_mesh";
      return {};
    }
    Value &cached = shardedGrad[ar.getResult()];
    if (cached)
      return cached;
    OpBuilder::InsertionGuard guard(b);
    // Stage 2: reduce-scatter as soon as backward has computed the gradient,
    // so that its full buffer dies there instead of living to the updates.
    b.setInsertionPoint(ar);
    if (stage >= 2) {
      if (Operation *def = ar.getInput().getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(ar->getBlock());
    }
    Location loc = ar.getLoc();
    ArrayRef<int16_t> axes = ar.getGridAxes();
    if (!llvm::is_contained(axes, dpAxis)) {
      user->emitOpError() << "--kiln-zero: its gradient is not reduced over dp";
      return {};
    }
    Value flat = flatPad(b, loc, ar.getInput(), n, N);
    auto rs = shard::ReduceScatterOp::create(
        b, loc, flatType(k, elt), ar.getGridAttr(), b.getDenseI16ArrayAttr({dpAxis}), flat,
        shard::ReductionKindAttr::get(b.getContext(), ar.getReduction()),
        b.getIndexAttr(0));
    cached = rs.getResult();
    // Summed over other axes too (a replicated parameter under dp x ep):
    // the block's sum over them (equal groups: an average of averages is
    // the average).
    SmallVector<shard::GridAxis> rest;
    for (int16_t a : axes)
      if (a != dpAxis)
        rest.push_back(a);
    if (!rest.empty())
      cached = shard::AllReduceOp::create(b, loc, cached, "kiln_mesh", rest,
                                          ar.getReduction());
    return cached;
  }
  if (auto mul = g.getDefiningOp<kiln::MulOp>()) {
    // Clipping: the gradient times a scalar coefficient.
    for (int side = 0; side < 2; ++side) {
      Value t = mul->getOperand(side), s = mul->getOperand(1 - side);
      if (cast<RankedTensorType>(s.getType()).getRank() != 0 ||
          t.getType() != g.getType())
        continue;
      Value sh = shardGrad(b, t, n, N, user);
      if (!sh)
        return {};
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(mul);
      return kiln::MulOp::create(b, mul.getLoc(), flatType(k, elt), sh, s);
    }
  }
  // A gradient already reduced before it took its final form (the sum over
  // the batch came before a gather's gradient, say): every rank holds the
  // whole, so each takes its k elements without communication.
  Value &cached = shardedGrad[g];
  if (cached)
    return cached;
  OpBuilder::InsertionGuard guard(b);
  if (Operation *def = g.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(user->getBlock());
  Value flat = flatPad(b, g.getLoc(), g, n, N);
  cached = shard::AllSliceOp::create(b, g.getLoc(), flatType(k, elt), flat,
                                     "kiln_mesh",
                                     ArrayRef<shard::GridAxis>{dpAxis}, 0);
  replicatedGrads.insert(g);
  return cached;
}

LogicalResult ZeroPass::apply(func::FuncOp f) {
  Block &body = f.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // The updates: elementwise ops on a weight parameter.
  SmallVector<Operation *> updates;
  for (Operation &op : body) {
    if (!op.hasTrait<kiln::trait::InPlaceElementwise>() || op.getNumOperands() < 2)
      continue;
    auto p = dyn_cast<BlockArgument>(op.getOperand(0));
    if (!p || p.getOwner() != &body ||
        kiln::getRole(f, p.getArgNumber()) != kiln::ParamRole::Weight)
      continue;
    bool returned = llvm::all_of(op.getResults(), [&](Value r) {
      return llvm::all_of(r.getUsers(), [&](Operation *u) { return u == ret; });
    });
    if (returned)
      updates.push_back(&op);
  }
  if (updates.empty())
    return f.emitOpError() << "--kiln-zero: no optimizer update found: run "
                              "--kiln-attach-optimizer first";

  OpBuilder b(f.getContext());
  int64_t gatherUse = 0;
  for (Operation *u : updates) {
    auto p = cast<BlockArgument>(u->getOperand(0));
    auto T = cast<RankedTensorType>(p.getType());
    if (!T.hasStaticShape() || !llvm::all_of(u->getResultTypes(),
                                             [&](Type t) { return t == T; }))
      return u->emitOpError() << "--kiln-zero: its results are not all of the "
                                 "parameter's type";
    const int64_t n = T.getNumElements();
    const int64_t N = (n + dp - 1) / dp * dp, k = N / dp;
    Type elt = T.getElementType();
    auto kType = flatType(k, elt);
    Location loc = u->getLoc();
    // Stage 3 splits the parameter itself (one smaller than dp elements
    // stays whole: its blocks would be mostly padding).
    const bool splitParam = stage >= 3 && n >= dp;
    if (splitParam) {
      if (!llvm::all_of(p.getUsers(), [&](Operation *x) {
            return x == u || x->getBlock() == &body;
          }))
        return u->emitOpError() << "--kiln-zero: parameter #"
                                << p.getArgNumber()
                                << " is used inside a region";
      // Each other reader gets its own whole copy, all-gathered right
      // before it and dead right after (forward and backward each gather
      // again); the attribute keeps CSE from merging the copies.
      SmallVector<Operation *> readers;
      for (Operation *x : p.getUsers())
        if (x != u && !llvm::is_contained(readers, x))
          readers.push_back(x);
      for (Operation *x : readers) {
        b.setInsertionPoint(x);
        Location xl = x->getLoc();
        auto gather = shard::AllGatherOp::create(
            b, xl, flatType(N, elt),
            FlatSymbolRefAttr::get(b.getContext(), "kiln_mesh"),
            b.getDenseI16ArrayAttr({dpAxis}), p, b.getIndexAttr(0));
        gather->setAttr(kiln::KilnDialect::getZeroGatherAttrName(),
                      b.getI64IntegerAttr(gatherUse++));
        x->replaceUsesOfWith(p, unflatten(b, xl, gather.getResult(), T));
      }
      p.setType(kType);
      f.setArgAttr(p.getArgNumber(), kiln::KilnDialect::getShardedShapeAttrName(),
                   b.getDenseI64ArrayAttr(T.getShape()));
    }
    b.setInsertionPoint(u);
    SmallVector<Value> operands;
    for (auto [i, o] : llvm::enumerate(u->getOperands())) {
      if (o == p && splitParam) {
        operands.push_back(p); // already this rank's block
        continue;
      }
      if (o.getType() != T) {
        if (cast<RankedTensorType>(o.getType()).getRank() != 0)
          return u->emitOpError() << "--kiln-zero: operand #" << i
                                  << " is neither the parameter's shape nor a "
                                     "scalar";
        operands.push_back(o);
        continue;
      }
      if (o == p) {
        Value flat = flatPad(b, loc, p, n, N);
        operands.push_back(shard::AllSliceOp::create(
            b, loc, kType, flat, "kiln_mesh", ArrayRef<shard::GridAxis>{dpAxis}, 0));
        continue;
      }
      auto arg = dyn_cast<BlockArgument>(o);
      if (arg && arg.getOwner() == &body &&
          kiln::getRole(f, arg.getArgNumber()) == kiln::ParamRole::Optimizer) {
        // The state: this rank's k elements only, from the start.
        if (!llvm::all_of(arg.getUsers(), [&](Operation *x) { return x == u; }))
          return u->emitOpError() << "--kiln-zero: optimizer state argument #"
                                  << arg.getArgNumber()
                                  << " has users besides its update";
        arg.setType(kType);
        f.setArgAttr(arg.getArgNumber(),
                     kiln::KilnDialect::getShardedShapeAttrName(),
                     b.getDenseI64ArrayAttr(T.getShape()));
        operands.push_back(arg);
        continue;
      }
      Value g = shardGrad(b, o, n, N, u);
      if (!g)
        return failure();
      operands.push_back(g);
    }
    OperationState st(loc, u->getName());
    st.addOperands(operands);
    st.addAttributes(u->getAttrs());
    st.addTypes(SmallVector<Type>(u->getNumResults(), kType));
    Operation *nu = b.create(st);
    if (splitParam) {
      // The new parameter stays split: each rank returns its block.
      for (unsigned r = 0; r < u->getNumResults(); ++r)
        u->getResult(r).replaceAllUsesWith(nu->getResult(r));
      u->erase();
      continue;
    }
    // The new parameter: every rank's k elements, cut to n, reshaped.
    Value all = shard::AllGatherOp::create(
        b, loc, flatType(N, elt), FlatSymbolRefAttr::get(b.getContext(), "kiln_mesh"),
        b.getDenseI16ArrayAttr({dpAxis}), nu->getResult(0), b.getIndexAttr(0));
    u->getResult(0).replaceAllUsesWith(unflatten(b, loc, all, T));
    for (unsigned r = 1; r < u->getNumResults(); ++r)
      u->getResult(r).replaceAllUsesWith(nu->getResult(r));
    u->erase();
  }

  // What the gradients' all-reduces still feed: the gradient norm's sums of
  // squares, which become the sum over ranks of the shards' sums, possibly
  // after scalings (loss scaling's unscale, clipping), which are applied to
  // the shard instead.
  std::function<LogicalResult(Value, Value)> rewriteReaders =
      [&](Value full, Value sharded) -> LogicalResult {
    for (Operation *user : llvm::make_early_inc_range(full.getUsers())) {
      if (auto mul = dyn_cast<kiln::MulOp>(user)) {
        Value s = mul.getLhs() == full ? mul.getRhs() : mul.getLhs();
        if (cast<RankedTensorType>(s.getType()).getRank() == 0 &&
            mul.getType() == full.getType()) {
          if (!mul->use_empty()) {
            b.setInsertionPoint(mul);
            Value part = kiln::MulOp::create(b, mul.getLoc(), sharded.getType(),
                                             sharded, s);
            if (failed(rewriteReaders(mul.getResult(), part)))
              return failure();
          }
          if (!mul->use_empty())
            return mul.emitOpError() << "--kiln-zero: a scaled full gradient "
                                        "is still used";
          mul->erase();
          continue;
        }
      }
      auto sq = dyn_cast<kiln::ReduceSumSquareOp>(user);
      auto t = sq ? dyn_cast<RankedTensorType>(sq.getType()) : nullptr;
      if (!sq || !t || t.getRank() != 0)
        return user->emitOpError()
               << "--kiln-zero: reads a full reduced gradient, which ZeRO "
                  "shards (only the updates, scaling by a scalar and the "
                  "gradient norm's sums of squares can use it)";
      b.setInsertionPoint(sq);
      Value part = kiln::ReduceSumSquareOp::create(
          b, sq.getLoc(), t, sharded, b.getDenseI64ArrayAttr({0}),
          b.getBoolAttr(false));
      Value all = shard::AllReduceOp::create(b, sq.getLoc(), part, "kiln_mesh",
                                             ArrayRef<shard::GridAxis>{dpAxis},
                                             shard::ReductionKind::Sum);
      sq.getResult().replaceAllUsesWith(all);
      sq->erase();
    }
    return success();
  };
  for (auto &[full, sharded] : shardedGrad) {
    if (replicatedGrads.contains(full))
      continue;
    auto ar = cast<shard::AllReduceOp>(full.getDefiningOp());
    if (failed(rewriteReaders(ar.getResult(), sharded)))
      return failure();
    if (!ar->use_empty())
      return ar.emitOpError() << "--kiln-zero: the reduced gradient is still "
                                 "used";
    ar->erase();
  }

  if (stage == 1)
    bucketReduceScatters(body);
  if (stage <= 2)
    bucketAllGathers(body);
  f.setType(FunctionType::get(f.getContext(), body.getArgumentTypes(),
                              ret.getOperandTypes()));
  // Results that now leave as dp blocks drop the sharding partitioning
  // wrote for their whole (or split) form; the arguments' kiln.sharding
  // with kiln.sharded_shape still says what each block belongs to.
  for (unsigned i = 0; i < f.getNumResults(); ++i) {
    auto sh = f.getResultAttrOfType<ArrayAttr>(i, kiln::KilnDialect::getShardingAttrName());
    auto t = dyn_cast<RankedTensorType>(f.getResultTypes()[i]);
    if (sh && t && (int64_t)sh.size() != t.getRank())
      f.removeResultAttr(i, StringAttr::get(f.getContext(),
                                            kiln::KilnDialect::getShardingAttrName()));
  }
  return success();
}

/// The largest tensor (whole, in bytes) whose reduce-scatter or
/// all-gather joins a bucket: a bucket costs a copy in and out, which a
/// large tensor's own collective does not need, while small tensors' own
/// collectives cost mostly latency.
static constexpr int64_t kBucketMaxBytes = 1 << 20;

/// `x` ([dp * k]) viewed as [dp, k]: row r is rank r's block.
static Value asRows(OpBuilder &b, Location loc, Value x, int64_t dp) {
  auto t = cast<RankedTensorType>(x.getType());
  return kiln::ReshapeOp::create(
      b, loc, RankedTensorType::get({dp, t.getDimSize(0) / dp}, t.getElementType()),
      x);
}

/// Columns [at, at + k) of `rows` ([dp, K]), flattened to [dp * k].
static Value columns(OpBuilder &b, Location loc, Value rows, int64_t at,
                     int64_t k) {
  auto t = cast<RankedTensorType>(rows.getType());
  int64_t dp = t.getDimSize(0);
  Value c = kiln::SliceOp::create(
      b, loc, RankedTensorType::get({dp, k}, t.getElementType()), rows,
      b.getDenseI64ArrayAttr({0, at}), b.getDenseI64ArrayAttr({dp, at + k}),
      b.getDenseI64ArrayAttr({1, 1}));
  return kiln::ReshapeOp::create(
      b, loc, RankedTensorType::get({dp * k}, t.getElementType()), c);
}

/// The pipeline stage a value belongs to (`kiln.stage` of the nearest
/// tagged op it comes from, or, for a parameter, of a tagged reader); -1
/// without pipeline tags. A bucket never mixes stages: its collective
/// would run on one stage's ranks.
static int64_t stageOf(Value v) {
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen;
  auto tag = [](Operation *op) -> int64_t {
    auto t = op->getAttrOfType<IntegerAttr>(kiln::KilnDialect::getStageAttrName());
    return t ? t.getInt() : -1;
  };
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    if (isa<BlockArgument>(x)) {
      for (Operation *u : x.getUsers())
        if (int64_t s = tag(u); s >= 0)
          return s;
      continue;
    }
    Operation *d = x.getDefiningOp();
    if (int64_t s = tag(d); s >= 0)
      return s;
    work.append(d->getOperands().begin(), d->getOperands().end());
  }
  return -1;
}

void ZeroPass::bucketReduceScatters(Block &body) {
  // Stage 1 reduces every gradient before the first update reads one: the
  // reduce-scatters (one per parameter) become one, of the gradients'
  // blocks interleaved so that rank r's block of the bucket is its block
  // of every gradient, [g1 block r, g2 block r, ...]. Same reduction and
  // element type per bucket.
  std::map<std::tuple<int64_t, int, std::string>, SmallVector<shard::ReduceScatterOp>> groups;
  for (Operation &op : body)
    if (auto rs = dyn_cast<shard::ReduceScatterOp>(op)) {
      auto t = cast<RankedTensorType>(rs.getInput().getType());
      std::string elt;
      llvm::raw_string_ostream(elt) << t.getElementType();
      if (t.getRank() == 1 && rs.getGridAxes().size() == 1 &&
          t.getNumElements() * t.getElementTypeBitWidth() / 8 <= kBucketMaxBytes)
        groups[{stageOf(rs.getInput()), (int)rs.getReduction(), elt}].push_back(rs);
    }
  for (auto &[key, members] : groups) {
    if (members.size() < 2)
      continue;
    // Before the first reader of any member; every input must exist there.
    Operation *first = nullptr;
    for (shard::ReduceScatterOp rs : members)
      for (Operation *u : rs->getUsers())
        if (Operation *a = body.findAncestorOpInBlock(*u))
          if (!first || a->isBeforeInBlock(first))
            first = a;
    if (!first || llvm::any_of(members, [&](shard::ReduceScatterOp rs) {
          Operation *d = rs.getInput().getDefiningOp();
          return d && d->getBlock() == &body && !d->isBeforeInBlock(first);
        }))
      continue;
    OpBuilder b(first);
    Location loc = members.front().getLoc();
    SmallVector<Value> rows;
    SmallVector<int64_t> ks;
    int64_t K = 0;
    for (shard::ReduceScatterOp rs : members) {
      rows.push_back(asRows(b, rs.getLoc(), rs.getInput(), dp));
      ks.push_back(cast<RankedTensorType>(rs.getType()).getDimSize(0));
      K += ks.back();
    }
    Type elt = cast<RankedTensorType>(rows.front().getType()).getElementType();
    Value cat = kiln::ConcatOp::create(b, loc, rows, b.getI64IntegerAttr(1));
    Value flat = kiln::ReshapeOp::create(b, loc, flatType(dp * K, elt), cat);
    shard::ReduceScatterOp lead = members.front();
    Value mine = shard::ReduceScatterOp::create(
        b, loc, flatType(K, elt), lead.getGridAttr(), lead.getGridAxesAttr(), flat,
        lead.getReductionAttr(), b.getIndexAttr(0));
    int64_t at = 0;
    for (auto [rs, k] : llvm::zip(members, ks)) {
      Value part = kiln::SliceOp::create(b, rs.getLoc(), flatType(k, elt), mine,
                                         b.getDenseI64ArrayAttr({at}),
                                         b.getDenseI64ArrayAttr({at + k}),
                                         b.getDenseI64ArrayAttr({1}));
      at += k;
      rs.getResult().replaceAllUsesWith(part);
      rs->erase();
    }
  }
}

void ZeroPass::bucketAllGathers(Block &body) {
  // The new weights' all-gathers (one per parameter, each right after its
  // update) become one before the terminator, of the blocks concatenated;
  // rank r's part of the result is its block of every weight, so column
  // ranges of its [dp, K] view give each weight back. The cut and reshape
  // that follow each gather move after it.
  Operation *term = body.getTerminator();
  std::map<std::pair<int64_t, std::string>, SmallVector<shard::AllGatherOp>> groups;
  for (Operation &op : body)
    if (auto ag = dyn_cast<shard::AllGatherOp>(op)) {
      auto t = cast<RankedTensorType>(ag.getInput().getType());
      if (ag->hasAttr(kiln::KilnDialect::getZeroGatherAttrName()) ||
          t.getRank() != 1 || ag.getGridAxes().size() != 1 ||
          t.getNumElements() * t.getElementTypeBitWidth() / 8 * dp >
              kBucketMaxBytes)
        continue;
      // Only what reaches the terminator through cuts and reshapes.
      SmallVector<Operation *> chain;
      bool movable = true;
      SmallVector<Operation *> work(ag->getUsers().begin(), ag->getUsers().end());
      while (!work.empty() && movable) {
        Operation *u = work.pop_back_val();
        if (u == term)
          continue;
        if (!isa<kiln::SliceOp, kiln::ReshapeOp>(u) || u->getBlock() != &body) {
          movable = false;
          break;
        }
        chain.push_back(u);
        work.append(u->getUsers().begin(), u->getUsers().end());
      }
      std::string elt;
      llvm::raw_string_ostream(elt) << t.getElementType();
      if (movable)
        groups[{stageOf(ag.getInput()), elt}].push_back(ag);
    }
  for (auto &[key, members] : groups) {
    if (members.size() < 2)
      continue;
    OpBuilder b(term);
    Location loc = members.front().getLoc();
    SmallVector<Value> blocks;
    SmallVector<int64_t> ks;
    int64_t K = 0;
    for (shard::AllGatherOp ag : members) {
      blocks.push_back(ag.getInput());
      ks.push_back(cast<RankedTensorType>(ag.getInput().getType()).getDimSize(0));
      K += ks.back();
    }
    Type elt = cast<RankedTensorType>(blocks.front().getType()).getElementType();
    Value cat = kiln::ConcatOp::create(b, loc, blocks, b.getI64IntegerAttr(0));
    shard::AllGatherOp lead = members.front();
    Value all = shard::AllGatherOp::create(b, loc, flatType(dp * K, elt),
                                           lead.getGridAttr(),
                                           lead.getGridAxesAttr(), cat,
                                           b.getIndexAttr(0));
    Value rows = asRows(b, loc, all, dp);
    int64_t at = 0;
    for (auto [ag, k] : llvm::zip(members, ks)) {
      Value whole = columns(b, ag.getLoc(), rows, at, k);
      at += k;
      // Move the cut and reshape after the bucket, in their order.
      SmallVector<Operation *> chain;
      for (Operation &op : body)
        if (isa<kiln::SliceOp, kiln::ReshapeOp>(op) &&
            llvm::any_of(op.getOperands(), [&](Value v) {
              return v == ag.getResult() ||
                     llvm::any_of(chain, [&](Operation *c) {
                       return llvm::is_contained(c->getResults(), v);
                     });
            }))
          chain.push_back(&op);
      ag.getResult().replaceAllUsesWith(whole);
      ag->erase();
      for (Operation *c : chain)
        c->moveBefore(term);
    }
  }
}

} // namespace
