//===- Partition.cpp - --kiln-partition -------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// SPMD partitioning of sharded functions (Passes.td has the contract). Each
// op is rebuilt on per-rank values: its operands resharded to what its
// factor shardings need, its results given per-rank types, partial results
// all-reduced. The factor shardings are chosen as propagation chose them
// (sharding::assignFactors, with the op's kiln.shardings first), from the
// shardings the operands actually have after partitioning.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "kiln/Dialect/Kiln/Transforms/Sharding.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPARTITIONPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using namespace kiln::sharding;

namespace {

struct PartitionPass
    : public kiln::impl::KilnPartitionPassBase<PartitionPass> {
  using Base::Base;
  void runOnOperation() override;
};

using Reductions = SmallVector<std::pair<shard::ReductionKind, Axes>>;

/// A per-rank value: its sharding, the mesh axes over which ranks hold
/// different values that should be equal (per-shard statistics), and the
/// reductions over ranks it still owes (a partial sum carried through
/// reshapes and transposes to where a consumer needs the whole value).
struct Local {
  Value value;
  Sharding sharding;
  Axes divergent;
  Reductions pending;
};

/// Appends `kind` over `axes` to `r`, merged with the last entry when that
/// is the same kind (reductions of one kind over several axes are one).
void addReduction(Reductions &r, shard::ReductionKind kind, const Axes &axes) {
  if (!r.empty() && r.back().first == kind) {
    r.back().second.append(axes.begin(), axes.end());
    return;
  }
  r.push_back({kind, axes});
}

class Partitioner {
public:
  Partitioner(func::FuncOp f, const Mesh &mesh)
      : f(f), mesh(mesh), b(f.getContext()) {}
  LogicalResult run();

private:
  Value reshard(Location loc, const Local &from, const Sharding &to);
  /// Emits the reductions `l` owes at the insertion point; `l` becomes the
  /// reduced value.
  void settle(Location loc, Local &l);
  /// Settles a partial sum `l` owes as the reduce-scatter that leaves it
  /// sharded as `to` when that is one dimension split over the summed
  /// axes; false (nothing done) otherwise.
  bool scatter(Location loc, Local &l, const Sharding &to);
  LogicalResult partitionOp(Operation &op);
  bool onlyMovedOn(Value v);
  RankedTensorType localType(Type global, const Sharding &s) {
    auto t = cast<RankedTensorType>(global);
    return RankedTensorType::get(localShape(t.getShape(), s, mesh),
                                 t.getElementType());
  }
  FlatSymbolRefAttr meshRef() {
    return FlatSymbolRefAttr::get(f.getContext(), kMeshName);
  }

  func::FuncOp f;
  const Mesh &mesh;
  OpBuilder b;
  DenseMap<Value, Local> locals;
  /// Block arguments' types before they took their per-rank ones.
  DenseMap<Value, Type> globalTypes;
  /// Each op's rule, taken from the global types before any changes.
  DenseMap<Operation *, ShardingRule> rules;
};

Value Partitioner::reshard(Location loc, const Local &from,
                           const Sharding &to) {
  Value v = from.value;
  Sharding cur = from.sharding;
  auto type = [&]() { return cast<RankedTensorType>(v.getType()); };
  // What changes, one mesh axis at a time: a dimension keeps the axes it
  // shares with `to` as a prefix (a block of a block is still a block) and
  // gathers the rest, innermost first; it then takes its block along the
  // axes `to` adds.
  struct Step {
    int64_t dim;
    int16_t axis;
  };
  SmallVector<Step> gathers, slices;
  for (size_t d = 0; d < cur.size(); ++d) {
    size_t keep = 0;
    while (keep < cur[d].size() && keep < to[d].size() && cur[d][keep] == to[d][keep])
      ++keep;
    for (size_t k = cur[d].size(); k > keep; --k)
      gathers.push_back({(int64_t)d, cur[d][k - 1]});
    for (size_t k = keep; k < to[d].size(); ++k)
      slices.push_back({(int64_t)d, to[d][k]});
  }
  // A gather and a slice along one axis on two dimensions are one
  // all-to-all (expert parallelism's dispatch and combine): the block of
  // one dimension traded for a block of the other.
  SmallVector<std::pair<Step, Step>> exchanges;
  for (auto g = gathers.begin(); g != gathers.end();) {
    auto s = llvm::find_if(slices, [&](const Step &s) {
      return s.axis == g->axis && s.dim != g->dim;
    });
    // Plain gathers run first and slices last, so the exchange must be
    // the last gather of its dimension (the outermost axis gathered) and
    // the first slice of the other.
    bool lastOfDim = llvm::none_of(gathers, [&](const Step &o) {
      return o.dim == g->dim && &o > &*g;
    });
    bool firstOfDim = s != slices.end() && llvm::none_of(slices, [&](const Step &o) {
      return o.dim == s->dim && &o < &*s;
    });
    if (s == slices.end() || !lastOfDim || !firstOfDim) {
      ++g;
      continue;
    }
    exchanges.push_back({*g, *s});
    slices.erase(s);
    g = gathers.erase(g);
  }
  for (const Step &g : gathers) {
    SmallVector<int64_t> shape(type().getShape());
    shape[g.dim] *= mesh.sizes[g.axis];
    v = shard::AllGatherOp::create(
        b, loc, RankedTensorType::get(shape, type().getElementType()), meshRef(),
        b.getDenseI16ArrayAttr({g.axis}), v, b.getIndexAttr(g.dim));
  }
  for (auto &[g, sl] : exchanges) {
    SmallVector<int64_t> shape(type().getShape());
    shape[g.dim] *= mesh.sizes[g.axis];
    shape[sl.dim] /= mesh.sizes[g.axis];
    v = shard::AllToAllOp::create(
        b, loc, RankedTensorType::get(shape, type().getElementType()), meshRef(),
        b.getDenseI16ArrayAttr({g.axis}), v, b.getIndexAttr(sl.dim),
        b.getIndexAttr(g.dim));
  }
  for (const Step &sl : slices) {
    SmallVector<int64_t> shape(type().getShape());
    shape[sl.dim] /= mesh.sizes[sl.axis];
    v = shard::AllSliceOp::create(
        b, loc, RankedTensorType::get(shape, type().getElementType()), v, kMeshName,
        ArrayRef<int16_t>{sl.axis}, sl.dim);
  }
  return v;
}

void Partitioner::settle(Location loc, Local &l) {
  for (auto &[kind, axes] : l.pending) {
    llvm::sort(axes);
    l.value = shard::AllReduceOp::create(b, loc, l.value, kMeshName, axes, kind);
  }
  l.pending.clear();
}

/// A partial sum whose consumer takes a block of one dimension over the
/// same axes it is summed over: one reduce-scatter instead of an
/// all-reduce and a local slice (Megatron's sequence parallelism).
bool Partitioner::scatter(Location loc, Local &l, const Sharding &to) {
  if (l.pending.size() != 1 || l.pending[0].first != shard::ReductionKind::Sum ||
      to.size() != l.sharding.size() || !l.divergent.empty())
    return false;
  Axes axes = l.pending[0].second;
  llvm::sort(axes);
  int64_t dim = -1;
  for (size_t d = 0; d < to.size(); ++d) {
    if (to[d] == l.sharding[d])
      continue;
    Axes want = to[d];
    llvm::sort(want);
    if (!l.sharding[d].empty() || want != axes || dim >= 0)
      return false;
    dim = (int64_t)d;
  }
  if (dim < 0)
    return false;
  auto t = cast<RankedTensorType>(l.value.getType());
  SmallVector<int64_t> shape(t.getShape());
  if (shape[dim] % mesh.ranks(axes))
    return false;
  shape[dim] /= mesh.ranks(axes);
  l.value = shard::ReduceScatterOp::create(
      b, loc, RankedTensorType::get(shape, t.getElementType()), meshRef(),
      b.getDenseI16ArrayAttr(axes), l.value,
      shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum),
      b.getIndexAttr(dim));
  l.sharding[dim] = to[dim];
  l.pending.clear();
  return true;
}

/// Whether every user of `v` carries reductions (moves or widens elements
/// only), so a reduction `v` owes can wait for them.
bool Partitioner::onlyMovedOn(Value v) {
  return !v.use_empty() && llvm::all_of(v.getUsers(), [&](Operation *u) {
    auto it = rules.find(u);
    return it != rules.end() &&
           ((u->getNumOperands() == 1 && it->second.carriesReductions) ||
            (it->second.sumsOperands && v.hasOneUse()));
  });
}

LogicalResult Partitioner::partitionOp(Operation &op) {
  const ShardingRule *rule = &rules.find(&op)->second;
  FailureOr<SmallVector<Sharding>> written = writtenShardings(&op, mesh);
  if (failed(written))
    return failure();
  const SmallVector<Sharding> &pinned = *written;
  SmallVector<const Sharding *> operands, results;
  SmallVector<Type> operandTypes;
  for (Value v : op.getOperands()) {
    auto it = locals.find(v);
    operands.push_back(it == locals.end() ? nullptr : &it->second.sharding);
    operandTypes.push_back(globalTypes.lookup_or(v, v.getType()));
  }
  for (const Sharding &s : pinned)
    results.push_back(&s);
  results.resize(op.getNumResults(), nullptr);
  OpSharding chosen =
      assignFactors(&op, *rule, operands, results, mesh, operandTypes);
  // A sum of partial sums held alike (the Q, K and V paths' input
  // gradients) is added as the operands are held, and owes their sums:
  // one collective after the add instead of one per operand (a
  // reduce-scatter where the consumer takes a block); the consumer
  // reshards the sum as it needs.
  if (rule->sumsOperands && op.getNumOperands() >= 2 &&
      op.getNumResults() == 1) {
    auto first = locals.find(op.getOperand(0));
    bool alike = first != locals.end() && !first->second.pending.empty() &&
                 first->second.divergent.empty();
    for (Value v : op.getOperands()) {
      auto it = locals.find(v);
      alike &= it != locals.end() && it->second.pending == first->second.pending &&
               it->second.sharding == first->second.sharding &&
               it->second.divergent.empty() && v.getType() == op.getResult(0).getType();
    }
    if (alike && chosen.results[0] != first->second.sharding) {
      const Sharding &held = first->second.sharding;
      for (Sharding &o : chosen.operands)
        o = held;
      chosen.results[0] = held;
      for (auto &axes : chosen.factorAxes)
        axes.clear();
      for (auto [d, f] : llvm::enumerate(rule->results[0]))
        if (f >= 0 && d < held.size())
          chosen.factorAxes[f] = held[d];
    }
  }

  IRMapping map;
  Axes divergent;
  Reductions inherited;
  // A sum of operands that all owe the same partial sums (and are held
  // alike) owes them itself.
  bool sumPending = rule->sumsOperands && op.getNumOperands() >= 2;
  for (auto [k, v] : llvm::enumerate(op.getOperands())) {
    auto it = locals.find(v);
    auto first = locals.find(op.getOperand(0));
    sumPending &= it != locals.end() && first != locals.end() &&
                  !it->second.pending.empty() &&
                  it->second.pending == first->second.pending &&
                  llvm::all_of(it->second.pending,
                               [](const auto &p) {
                                 return p.first == shard::ReductionKind::Sum;
                               }) &&
                  it->second.sharding == first->second.sharding &&
                  it->second.divergent.empty() &&
                  it->second.sharding == chosen.operands[k];
  }
  for (auto [i, v] : llvm::enumerate(op.getOperands())) {
    auto it = locals.find(v);
    if (it == locals.end())
      continue; // not a tensor: used as is
    if (!it->second.pending.empty()) {
      // Carried only when the operand is used as it is held: a local
      // slice or a gather of a partial value would combine different
      // ranks' parts.
      if (((rule->carriesReductions && op.getNumOperands() == 1) || sumPending) &&
          it->second.sharding == chosen.operands[i])
        inherited = it->second.pending;
      else if (!scatter(op.getLoc(), it->second, chosen.operands[i]))
        settle(op.getLoc(), it->second);
    }
    map.map(v, reshard(op.getLoc(), it->second, chosen.operands[i]));
    for (shard::GridAxis a : it->second.divergent)
      if (!llvm::is_contained(divergent, a))
        divergent.push_back(a);
  }
  Operation *clone = b.clone(op, map);
  clone->removeAttr(KilnDialect::getShardingsAttrName());

  for (auto [i, r] : llvm::enumerate(clone->getResults()))
    r.setType(localType(op.getResult(i).getType(), chosen.results[i]));
  if (auto iface = dyn_cast<ShardingRuleOpInterface>(clone)) {
    SmallVector<Attribute> shardings, operandShardings;
    for (const Sharding &s : chosen.results)
      shardings.push_back(shardingAttr(s, mesh, op.getContext()));
    for (auto [k, v] : llvm::enumerate(op.getOperands()))
      operandShardings.push_back(
          isa<RankedTensorType>(operandTypes[k]) && k < chosen.operands.size()
              ? Attribute(shardingAttr(chosen.operands[k], mesh, op.getContext()))
              : Attribute());
    iface.localizeAttributes(operandShardings, shardings, TypeRange(operandTypes),
                             op.getResultTypes());
  }
  for (auto [i, r] : llvm::enumerate(clone->getResults())) {
    Value v = r;
    Axes resultDivergent = divergent;
    // Factors sharded but absent from this result: combine the shards.
    Reductions reductions = inherited;
    double scale = 1;
    for (auto [fi, factor] : llvm::enumerate(rule->factors)) {
      const Axes &axes = chosen.factorAxes[fi];
      if (axes.empty())
        continue;
      bool present = llvm::is_contained(rule->results[i], (int)fi);
      if (present) {
        if (factor.dividesBySize)
          scale /= mesh.ranks(axes);
        continue;
      }
      if (!factor.combine) {
        resultDivergent.append(axes.begin(), axes.end());
        continue;
      }
      addReduction(reductions, *factor.combine, axes);
    }
    // Scaling commutes with the reductions (sums, averages; max and min
    // for the positive 1 / ranks), so it comes first.
    if (scale != 1) {
      auto t = cast<RankedTensorType>(v.getType());
      if (!isa<FloatType>(t.getElementType()))
        return op.emitOpError()
               << "divides result " << i << " by a sharded factor's size, "
               << "but the result is not a float tensor";
      auto c = ConstantOp::create(
          b, op.getLoc(),
          DenseElementsAttr::get(RankedTensorType::get({}, t.getElementType()),
                                 FloatAttr::get(t.getElementType(), scale)));
      v = MulOp::create(b, op.getLoc(), t, v, c).getResult();
    }
    Local l{v, chosen.results[i], resultDivergent, reductions};
    // A partial sum with one user is combined there: as one reduce-scatter
    // when that user takes a block of it (sequence parallelism), else as
    // the all-reduce it would get here.
    // (A gradient the function returns is reduced where it is computed.)
    Value res = op.getResult(i);
    bool deferred = res.hasOneUse() &&
                    !res.getUses().begin()->getOwner()->hasTrait<OpTrait::IsTerminator>();
    if (!onlyMovedOn(res) && !deferred)
      settle(op.getLoc(), l);
    locals[op.getResult(i)] = l;
  }
  return success();
}

LogicalResult Partitioner::run() {
  if (!f.getBody().hasOneBlock())
    return f.emitOpError() << "has several blocks: --kiln-partition "
                              "partitions single-block functions";
  Block &body = f.getBody().front();
  // The rules, from the global types (the arguments' change below).
  for (Operation &op : body) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    FailureOr<ShardingRule> rule = ruleOf(&op);
    if (failed(rule))
      return failure();
    rules[&op] = std::move(*rule);
  }
  // Arguments: each rank receives its block.
  for (BlockArgument arg : f.getArguments()) {
    auto t = dyn_cast<RankedTensorType>(arg.getType());
    if (!t)
      continue;
    FailureOr<Sharding> s = argSharding(f, arg.getArgNumber(), mesh);
    if (failed(s))
      return failure();
    globalTypes[arg] = t;
    arg.setType(localType(t, *s));
    locals[arg] = {arg, *s, {}};
  }
  SmallVector<Operation *> old;
  for (Operation &op : body) {
    b.setInsertionPoint(&op);
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      SmallVector<Value> values;
      SmallVector<Type> types;
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        auto it = locals.find(v);
        if (it == locals.end()) {
          values.push_back(v);
          types.push_back(v.getType());
          continue;
        }
        FailureOr<Sharding> want = resultSharding(f, i, mesh);
        if (failed(want))
          return failure();
        settle(ret.getLoc(), it->second);
        Value local = reshard(ret.getLoc(), it->second, *want);
        // A per-shard value returned as one value: rank 0's.
        if (!it->second.divergent.empty()) {
          Axes axes = it->second.divergent;
          llvm::sort(axes);
          axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
          local = shard::BroadcastOp::create(
              b, ret.getLoc(), local.getType(), meshRef(),
              b.getDenseI16ArrayAttr(axes), local,
              b.getDenseI64ArrayAttr(SmallVector<int64_t>(axes.size(), 0)),
              ValueRange{});
        }
        values.push_back(local);
        types.push_back(local.getType());
      }
      func::ReturnOp::create(b, ret.getLoc(), values);
      f.setType(FunctionType::get(f.getContext(), body.getArgumentTypes(), types));
      old.push_back(&op);
      break;
    }
    if (failed(partitionOp(op)))
      return failure();
    old.push_back(&op);
  }
  for (Operation *op : llvm::reverse(old)) {
    op->dropAllUses();
    op->erase();
  }
  return success();
}

void PartitionPass::runOnOperation() {
  ModuleOp m = getOperation();
  FailureOr<Mesh> mesh = getMesh(m, "--kiln-partition");
  if (failed(mesh))
    return signalPassFailure();
  for (auto f : m.getOps<func::FuncOp>())
    if (!f.isExternal() && failed(Partitioner(f, *mesh).run()))
      return signalPassFailure();
}

} // namespace
