//===- Sharding.cpp - meshes, shardings, factor assignment ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Sharding.h"
#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::sharding;

int Mesh::axis(StringRef name) const {
  for (auto [i, n] : llvm::enumerate(names))
    if (n == name)
      return i;
  return -1;
}

int64_t Mesh::ranks(ArrayRef<shard::GridAxis> axes) const {
  int64_t n = 1;
  for (shard::GridAxis a : axes)
    n *= sizes[a];
  return n;
}

std::string Mesh::str() const {
  std::string s;
  for (auto [i, n] : llvm::enumerate(names))
    s += (i ? "," : "") + n + "=" + std::to_string(sizes[i]);
  return s;
}

FailureOr<Mesh> sharding::getMesh(ModuleOp m, StringRef user) {
  auto grid = m.lookupSymbol<shard::GridOp>(kMeshName);
  if (!grid)
    return m.emitError() << user << " needs the mesh: a shard.grid @"
                         << kMeshName << " (run --kiln-shard{mesh=...})";
  auto names =
      grid->getAttrOfType<ArrayAttr>(KilnDialect::getAxisNamesAttrName());
  if (!names)
    return grid.emitOpError()
           << "has no " << KilnDialect::getAxisNamesAttrName()
           << ": shardings name mesh axes";
  Mesh mesh;
  mesh.grid = grid;
  for (auto [n, size] : llvm::zip(names, grid.getShape())) {
    if (size < 1)
      return grid.emitOpError() << "needs a static size for every axis";
    mesh.names.push_back(cast<StringAttr>(n).getValue().str());
    mesh.sizes.push_back(size);
  }
  return mesh;
}

Sharding sharding::whole(int64_t rank) { return Sharding(rank); }

bool sharding::isWhole(const Sharding &s) {
  return llvm::all_of(s, [](const Axes &a) { return a.empty(); });
}

FailureOr<Sharding> sharding::parseSharding(Attribute a, const Mesh &mesh,
                                            ArrayRef<int64_t> shape,
                                            Location loc, const Twine &what) {
  // The dialect verifier checked the form (one array of names per
  // dimension, no axis twice).
  auto dims = cast<ArrayAttr>(a);
  Sharding s;
  for (auto [d, axesAttr] : llvm::enumerate(dims)) {
    Axes axes;
    for (Attribute x : cast<ArrayAttr>(axesAttr)) {
      StringRef name = cast<StringAttr>(x).getValue();
      int i = mesh.axis(name);
      if (i < 0)
        return emitError(loc) << what << " is sharded over mesh axis '"
                              << name << "', which @" << kMeshName << " ("
                              << mesh.str() << ") does not have";
      axes.push_back(i);
    }
    int64_t n = mesh.ranks(axes);
    if (d < shape.size() && shape[d] % n != 0)
      return emitError(loc) << what << ": dimension " << d << " ("
                            << shape[d] << ") does not divide over "
                            << n << " ranks of mesh axes "
                            << cast<ArrayAttr>(axesAttr);
    s.push_back(std::move(axes));
  }
  return s;
}

ArrayAttr sharding::shardingAttr(const Sharding &s, const Mesh &mesh,
                                 MLIRContext *ctx) {
  SmallVector<Attribute> dims;
  for (const Axes &axes : s) {
    SmallVector<Attribute> names;
    for (shard::GridAxis a : axes)
      names.push_back(StringAttr::get(ctx, mesh.names[a]));
    dims.push_back(ArrayAttr::get(ctx, names));
  }
  return ArrayAttr::get(ctx, dims);
}

FailureOr<Sharding> sharding::argSharding(func::FuncOp f, unsigned i,
                                          const Mesh &mesh) {
  auto t = cast<RankedTensorType>(f.getArgumentTypes()[i]);
  Attribute a = f.getArgAttr(i, KilnDialect::getShardingAttrName());
  if (!a)
    return whole(t.getRank());
  auto name = f.getArgAttrOfType<StringAttr>(i, "onnx.name");
  return parseSharding(a, mesh, t.getShape(), f.getArgument(i).getLoc(),
                       "argument '" +
                           (name ? name.getValue().str() : std::to_string(i)) +
                           "'");
}

FailureOr<Sharding> sharding::resultSharding(func::FuncOp f, unsigned i,
                                             const Mesh &mesh) {
  auto t = cast<RankedTensorType>(f.getResultTypes()[i]);
  Attribute a = f.getResultAttr(i, KilnDialect::getShardingAttrName());
  if (!a)
    return whole(t.getRank());
  return parseSharding(a, mesh, t.getShape(), f.getLoc(),
                       "result " + std::to_string(i));
}

FailureOr<SmallVector<Sharding>> sharding::writtenShardings(Operation *op,
                                                            const Mesh &mesh) {
  SmallVector<Sharding> out;
  auto given = op->getAttrOfType<ArrayAttr>(KilnDialect::getShardingsAttrName());
  if (!given)
    return out;
  for (auto [a, v] : llvm::zip(given, op->getResults())) {
    FailureOr<Sharding> s = parseSharding(
        a, mesh, cast<RankedTensorType>(v.getType()).getShape(), op->getLoc(),
        "result " + std::to_string(cast<OpResult>(v).getResultNumber()));
    if (failed(s))
      return failure();
    out.push_back(std::move(*s));
  }
  return out;
}

SmallVector<int64_t> sharding::localShape(ArrayRef<int64_t> shape,
                                          const Sharding &s,
                                          const Mesh &mesh) {
  SmallVector<int64_t> out(shape);
  for (size_t d = 0; d < out.size() && d < s.size(); ++d)
    out[d] /= mesh.ranks(s[d]);
  return out;
}

FailureOr<ShardingRule> sharding::ruleOf(Operation *op) {
  auto iface = dyn_cast<ShardingRuleOpInterface>(op);
  if (!iface)
    return op->emitOpError()
           << "has no sharding rule (ShardingRuleOpInterface): the sharding "
              "passes cannot tell how its dimensions split";
  ShardingRule rule = iface.getShardingRule();
  auto check = [&](TypeRange types, ArrayRef<SmallVector<int>> dims) {
    if (types.size() != dims.size())
      return false;
    for (auto [t, d] : llvm::zip(types, dims)) {
      auto rt = dyn_cast<RankedTensorType>(t);
      if ((rt ? rt.getRank() : 0) != (int64_t)d.size() ||
          llvm::any_of(d, [&](int f) {
            return f >= (int)rule.factors.size() || f < -1;
          }))
        return false;
    }
    return true;
  };
  if (!check(op->getOperandTypes(), rule.operands) ||
      !check(op->getResultTypes(), rule.results))
    return op->emitOpError() << "has a malformed sharding rule: "
                             << rule.str();
  return rule;
}

OpSharding sharding::assignFactors(Operation *op, const ShardingRule &rule,
                                   ArrayRef<const Sharding *> operands,
                                   ArrayRef<const Sharding *> results,
                                   const Mesh &mesh,
                                   TypeRange operandTypes) {
  OpSharding o;
  o.factorAxes.resize(rule.factors.size());
  // Every dimension of each factor, to check that its axes divide them.
  SmallVector<SmallVector<int64_t>> factorDims(rule.factors.size());
  auto collect = [&](TypeRange types, ArrayRef<SmallVector<int>> dims) {
    for (auto [t, ds] : llvm::zip(types, dims)) {
      auto rt = dyn_cast<RankedTensorType>(t);
      for (auto [d, f] : llvm::enumerate(ds))
        if (f >= 0)
          factorDims[f].push_back(rt.getDimSize(d));
    }
  };
  collect(operandTypes.empty() ? TypeRange(op->getOperandTypes())
                              : operandTypes,
          rule.operands);
  collect(op->getResultTypes(), rule.results);

  SmallVector<bool> used(mesh.sizes.size(), false);
  auto offer = [&](const Sharding *s, ArrayRef<int> dims) {
    if (!s)
      return;
    for (auto [d, f] : llvm::enumerate(dims)) {
      if (f < 0 || d >= s->size() || (*s)[d].empty() ||
          !o.factorAxes[f].empty())
        continue;
      // The axes not yet taken, up to the first that is: a block of that
      // prefix of the axes is still a block (the tokens split over dp and
      // ep keep dp where an expert weight takes ep).
      Axes axes;
      for (shard::GridAxis a : (*s)[d]) {
        if (used[a])
          break;
        axes.push_back(a);
      }
      if (axes.empty())
        continue;
      int64_t n = mesh.ranks(axes);
      if (llvm::any_of(factorDims[f], [&](int64_t size) { return size % n; }))
        continue;
      o.factorAxes[f] = axes;
      for (shard::GridAxis a : axes)
        used[a] = true;
    }
  };
  // Parameters' shardings first, then the results', then the other
  // operands': where a split weight and a split activation want the same
  // axis, the activation moves (a weight is the larger and persists:
  // Megatron's sequence parallelism gathers the sequence, never a weight,
  // and an expert weight split over ep takes the tokens to it, whatever
  // its result's users want).
  auto isParamOperand = [&](unsigned i) {
    auto a = dyn_cast<BlockArgument>(op->getOperand(i));
    auto f = a ? dyn_cast<FunctionOpInterface>(a.getOwner()->getParentOp())
               : FunctionOpInterface();
    return f && kiln::isParam(f, a.getArgNumber());
  };
  auto offerOperands = [&](bool params) {
    for (auto [i, sd] : llvm::enumerate(llvm::zip(operands, rule.operands)))
      if (i < op->getNumOperands() && isParamOperand(i) == params)
        offer(std::get<0>(sd), std::get<1>(sd));
  };
  offerOperands(true);
  for (auto [s, dims] : llvm::zip(results, rule.results))
    offer(s, dims);
  offerOperands(false);

  auto implied = [&](ArrayRef<SmallVector<int>> all,
                     SmallVectorImpl<Sharding> &out) {
    for (const SmallVector<int> &dims : all) {
      Sharding s;
      for (int f : dims)
        s.push_back(f < 0 ? Axes{} : o.factorAxes[f]);
      out.push_back(std::move(s));
    }
  };
  implied(rule.operands, o.operands);
  implied(rule.results, o.results);
  return o;
}
