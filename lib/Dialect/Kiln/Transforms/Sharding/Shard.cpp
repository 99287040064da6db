//===- Shard.cpp - --kiln-shard: the mesh and the seed shardings -*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Declares @kiln_mesh and writes `kiln.sharding` on function arguments: the
// data inputs' batch over the batch axis, and the user's REGEX=SPEC
// annotations (Passes.td has the contract).
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "kiln/Dialect/Kiln/Transforms/Sharding.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

namespace kiln {
#define GEN_PASS_DEF_KILNSHARDPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using namespace kiln::sharding;

namespace {

struct ShardPass : public kiln::impl::KilnShardPassBase<ShardPass> {
  using Base::Base;
  void runOnOperation() override;
  LogicalResult declareMesh(ModuleOp m);
};

/// "dp=2,tp=2" -> names and sizes.
LogicalResult parseMesh(ModuleOp m, StringRef text,
                        SmallVectorImpl<std::string> &names,
                        SmallVectorImpl<int64_t> &sizes) {
  SmallVector<StringRef> parts;
  text.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef p : parts) {
    auto [name, size] = p.trim().split('=');
    int64_t n = 0;
    if (name.empty() || size.trim().getAsInteger(10, n) || n < 1)
      return m.emitError() << "--kiln-shard: mesh axis '" << p
                           << "' is not NAME=SIZE with SIZE >= 1";
    if (llvm::is_contained(names, name.str()))
      return m.emitError() << "--kiln-shard: mesh axis '" << name
                           << "' appears twice";
    names.push_back(name.str());
    sizes.push_back(n);
  }
  if (names.empty())
    return m.emitError() << "--kiln-shard: mesh is empty: give "
                            "NAME=SIZE[,NAME=SIZE...], e.g. dp=2";
  return success();
}

LogicalResult ShardPass::declareMesh(ModuleOp m) {
  auto grid = m.lookupSymbol<shard::GridOp>(kMeshName);
  if (mesh.empty()) {
    if (!grid)
      return m.emitError() << "--kiln-shard: give mesh=NAME=SIZE[,...]: the "
                              "module declares no @"
                           << kMeshName;
    return success();
  }
  SmallVector<std::string> names;
  SmallVector<int64_t> sizes;
  if (failed(parseMesh(m, mesh, names, sizes)))
    return failure();
  MLIRContext *ctx = m.getContext();
  if (grid) {
    FailureOr<Mesh> have = getMesh(m, "--kiln-shard");
    if (failed(have))
      return failure();
    if (have->names != names || have->sizes != sizes)
      return grid.emitOpError()
             << "is the mesh " << have->str() << ", which does not match "
             << "--kiln-shard mesh=" << mesh;
    return success();
  }
  OpBuilder b = OpBuilder::atBlockBegin(m.getBody());
  grid = shard::GridOp::create(b, NameLoc::get(StringAttr::get(ctx, "mesh")),
                               kMeshName, sizes);
  SmallVector<Attribute> nameAttrs;
  for (const std::string &n : names)
    nameAttrs.push_back(b.getStringAttr(n));
  grid->setAttr(KilnDialect::getAxisNamesAttrName(), b.getArrayAttr(nameAttrs));
  return success();
}

void ShardPass::runOnOperation() {
  ModuleOp m = getOperation();
  MLIRContext *ctx = m.getContext();
  if (failed(declareMesh(m)))
    return signalPassFailure();
  FailureOr<Mesh> meshOr = getMesh(m, "--kiln-shard");
  if (failed(meshOr))
    return signalPassFailure();
  const Mesh &meshInfo = *meshOr;

  // The user's annotations: REGEX=SPEC;...
  struct Annotation {
    std::string regex;
    llvm::Regex re;
    SmallVector<Attribute> dims;
    bool matched = false;
  };
  SmallVector<Annotation> annotations;
  SmallVector<StringRef> entries;
  StringRef(shard).split(entries, ';', -1, /*KeepEmpty=*/false);
  for (StringRef e : entries) {
    auto [regex, spec] = e.trim().rsplit('=');
    Annotation a;
    a.regex = regex.str();
    a.re = llvm::Regex(("^(" + regex + ")$").str());
    std::string err;
    if (regex.empty() || spec.empty() || !a.re.isValid(err)) {
      m.emitError() << "--kiln-shard: '" << e
                    << "' is not REGEX=SPEC (SPEC: one entry per dimension, "
                       "e.g. tp,-)"
                    << (err.empty() ? "" : ": " + err);
      return signalPassFailure();
    }
    SmallVector<StringRef> dims;
    spec.split(dims, ',');
    for (StringRef d : dims) {
      SmallVector<Attribute> axes;
      d = d.trim();
      if (d != "-") {
        SmallVector<StringRef> names;
        d.split(names, '+');
        for (StringRef n : names) {
          if (meshInfo.axis(n.trim()) < 0) {
            m.emitError() << "--kiln-shard: '" << e << "' names mesh axis '"
                          << n.trim() << "', which the mesh ("
                          << meshInfo.str() << ") does not have";
            return signalPassFailure();
          }
          axes.push_back(StringAttr::get(ctx, n.trim()));
        }
      }
      a.dims.push_back(ArrayAttr::get(ctx, axes));
    }
    annotations.push_back(std::move(a));
  }

  if (!func.empty() && !m.lookupSymbol<func::FuncOp>(func)) {
    m.emitError() << "--kiln-shard: the module has no function @" << func;
    return signalPassFailure();
  }
  // The batch axes present in the mesh, outermost first ("dp+ep").
  Axes batch;
  {
    SmallVector<StringRef> names;
    StringRef(batchAxis).split(names, '+', -1, /*KeepEmpty=*/false);
    for (StringRef n : names)
      if (int a = meshInfo.axis(n.trim()); a >= 0)
        batch.push_back((shard::GridAxis)a);
  }
  for (auto f : m.getOps<func::FuncOp>()) {
    if (f.isExternal() || (!func.empty() && f.getSymName() != func))
      continue;
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      auto t = dyn_cast<RankedTensorType>(f.getArgument(i).getType());
      if (!t)
        continue;
      auto name = f.getArgAttrOfType<StringAttr>(i, "onnx.name");
      ArrayAttr chosen;
      const Annotation *by = nullptr;
      for (Annotation &a : annotations) {
        if (!name || !a.re.match(name.getValue()))
          continue;
        if ((int64_t)a.dims.size() != t.getRank()) {
          f.emitError() << "--kiln-shard: '" << a.regex << "' gives "
                        << a.dims.size() << " dimensions to argument '"
                        << name.getValue() << "' of type " << t;
          return signalPassFailure();
        }
        a.matched = true;
        ArrayAttr mine = ArrayAttr::get(ctx, a.dims);
        // Two annotations that hold one argument differently: the user
        // forced both, so neither wins silently.
        if (chosen && mine != chosen) {
          f.emitError() << "--kiln-shard: '" << by->regex << "' and '" << a.regex
                        << "' both match argument '" << name.getValue()
                        << "' and shard it differently";
          return signalPassFailure();
        }
        chosen = mine;
        by = &a;
      }
      bool data = !isParam(f, i) && t.getRank() >= 1 &&
                  !(name && (name.getValue() == kLrInputName ||
                             name.getValue() == kStepInputName));
      // A sharding already written (by hand, or by an earlier strategy)
      // stays, checked against the mesh.
      if (!chosen)
        chosen = f.getArgAttrOfType<ArrayAttr>(i, KilnDialect::getShardingAttrName());
      if (!chosen && data && !batch.empty()) {
        Sharding s = whole(t.getRank());
        s[0] = batch;
        chosen = shardingAttr(s, meshInfo, ctx);
      }
      if (!chosen)
        continue;
      std::string what =
          "argument '" + (name ? name.getValue().str() : std::to_string(i)) +
          "'";
      if (failed(parseSharding(chosen, meshInfo, t.getShape(),
                               f.getArgument(i).getLoc(), what)))
        return signalPassFailure();
      f.setArgAttr(i, KilnDialect::getShardingAttrName(), chosen);
    }
  }
  // Activations, by ONNX value name (kiln.onnx_names, kept by the import
  // when --shard is given): the annotation pins the op's result
  // (kiln.shardings), which propagation keeps as the user's and reshards
  // to where the rules need otherwise.
  for (auto f : m.getOps<func::FuncOp>()) {
    if (f.isExternal() || (!func.empty() && f.getSymName() != func))
      continue;
    WalkResult walk = f.walk([&](Operation *op) {
      auto names = op->getAttrOfType<ArrayAttr>(KilnDialect::getOnnxNamesAttrName());
      if (!names)
        return WalkResult::advance();
      for (auto [r, n] : llvm::enumerate(names)) {
        StringRef name = cast<StringAttr>(n).getValue();
        if (name.empty())
          continue;
        ArrayAttr chosen;
        const Annotation *by = nullptr;
        for (Annotation &a : annotations) {
          if (!a.re.match(name))
            continue;
          auto t = cast<RankedTensorType>(op->getResult(r).getType());
          if ((int64_t)a.dims.size() != t.getRank()) {
            op->emitError() << "--kiln-shard: '" << a.regex << "' gives " << a.dims.size()
                            << " dimensions to value '" << name << "' of type " << t;
            return WalkResult::interrupt();
          }
          if (op->getNumResults() != 1) {
            op->emitError() << "--kiln-shard: '" << a.regex << "' matches value '" << name
                            << "', an output of a " << op->getNumResults()
                            << "-result op; only single-output ops' values can be "
                               "annotated";
            return WalkResult::interrupt();
          }
          a.matched = true;
          ArrayAttr mine = ArrayAttr::get(ctx, a.dims);
          if (chosen && mine != chosen) {
            op->emitError() << "--kiln-shard: '" << by->regex << "' and '" << a.regex
                            << "' both match value '" << name << "' and shard it differently";
            return WalkResult::interrupt();
          }
          chosen = mine;
          by = &a;
        }
        if (!chosen)
          continue;
        auto t = cast<RankedTensorType>(op->getResult(r).getType());
        if (failed(parseSharding(chosen, meshInfo, t.getShape(), op->getLoc(),
                                 "value '" + name.str() + "'")))
          return WalkResult::interrupt();
        op->setAttr(KilnDialect::getShardingsAttrName(), ArrayAttr::get(ctx, {chosen}));
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
  }
  // A parameter's gradient and its update leave as the parameter is held,
  // unless a result says otherwise.
  for (auto f : m.getOps<func::FuncOp>()) {
    if (f.isExternal() || (!func.empty() && f.getSymName() != func))
      continue;
    for (unsigned i = 0; i < f.getNumResults(); ++i) {
      if (f.getResultAttr(i, KilnDialect::getShardingAttrName()))
        continue;
      auto of = f.getResultAttrOfType<IntegerAttr>(i, KilnDialect::getGradOfAttrName());
      if (!of)
        of = f.getResultAttrOfType<IntegerAttr>(i, KilnDialect::getUpdateAttrName());
      if (!of || of.getInt() < 0 || of.getInt() >= f.getNumArguments() ||
          f.getArgument(of.getInt()).getType() != f.getResultTypes()[i])
        continue;
      if (Attribute a = f.getArgAttr(of.getInt(),
                                     KilnDialect::getShardingAttrName()))
        f.setResultAttr(i, KilnDialect::getShardingAttrName(), a);
    }
  }
  for (Annotation &a : annotations)
    if (!a.matched) {
      if (warnUnmatched) {
        m.emitWarning() << "--shard '" << a.regex
                        << "' matches no parameter, input or value name; it is ignored";
        continue;
      }
      m.emitError() << "--kiln-shard: '" << a.regex
                    << "' matches no argument's onnx.name";
      return signalPassFailure();
    }
}

} // namespace
