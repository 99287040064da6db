//===- KilnToKRT.cpp - kiln tensors to krt kernel launches ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// --kiln-lower-to-runtime: every kiln op becomes a krt.launch of the runtime
// kernel of the same name on buffers. The walk is generic: an op's kernel
// name is its mnemonic, its params are its attributes, and whether it may run
// in place is its InPlaceElementwise trait, so a new kiln op needs no change
// here, only a runtime kernel. The other ops lowered are upstream's
// `shard.all_reduce` and `shard.broadcast` (--kiln-data-parallel), which
// become launches of the `all_reduce` and `mesh_broadcast` kernels naming their
// reduction or root and their mesh axis by name (KRTKernels.td), and the
// dist dialect's buckets (--kiln-bucket-all-reduce), which become an
// `all_reduce_start` launch packing the tensors into one buffer and an
// `all_reduce_wait` launch unpacking it; the runtime runs them on the
// executable's communicator.
//===----------------------------------------------------------------------===//
#include "kiln/Conversion/Passes.h"

#include "kiln/Dialect/Dist/IR/DistOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERTORUNTIMEPASS
#include "kiln/Conversion/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

MemRefType bufferType(Type t) {
  auto tensor = cast<RankedTensorType>(t);
  return MemRefType::get(tensor.getShape(), tensor.getElementType());
}

struct KilnLowerToRuntimePass
    : public kiln::impl::KilnLowerToRuntimePassBase<KilnLowerToRuntimePass> {
  using Base::Base;

  void runOnOperation() override {
    // `target` is a TargetKind, whose only case is the CPU: the option
    // parser refuses any other name.
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(lower(func)))
        return signalPassFailure();
  }

  LogicalResult lower(func::FuncOp func);
  LogicalResult checkTypes(Operation *op);
  /// The params of the kernel a shard collective becomes: all_reduce
  /// {reduction, axis} or broadcast {root, axis}, the axis named by its
  /// grid's kiln.axis_names.
  FailureOr<DictionaryAttr> collectiveParams(Operation *op);
  LogicalResult writeUpdates(func::FuncOp func);
};

FailureOr<DictionaryAttr>
KilnLowerToRuntimePass::collectiveParams(Operation *op) {
  auto ar = dyn_cast<shard::AllReduceOp>(op);
  auto bc = dyn_cast<shard::BroadcastOp>(op);
  auto start = dyn_cast<kiln::dist::AllReduceStartOp>(op);
  auto wait = dyn_cast<kiln::dist::AllReduceWaitOp>(op);
  if (wait) {
    // The wait averages over the ranks its start reduced over.
    start = wait.getStart();
    if (!start)
      return op->emitOpError() << "cannot be lowered to the runtime: its "
                                  "bucket does not come from a "
                                  "dist.all_reduce_start";
  }
  auto rs = dyn_cast<shard::ReduceScatterOp>(op);
  auto ag = dyn_cast<shard::AllGatherOp>(op);
  auto sl = dyn_cast<shard::AllSliceOp>(op);
  auto a2a = dyn_cast<shard::AllToAllOp>(op);
  FlatSymbolRefAttr gridRef = ar      ? ar.getGridAttr()
                              : bc    ? bc.getGridAttr()
                              : rs    ? rs.getGridAttr()
                              : ag    ? ag.getGridAttr()
                              : sl    ? sl.getGridAttr()
                              : a2a   ? a2a.getGridAttr()
                                      : start.getGridAttr();
  ArrayRef<int16_t> axes = ar      ? ar.getGridAxes()
                           : bc    ? bc.getGridAxes()
                           : rs    ? rs.getGridAxes()
                           : ag    ? ag.getGridAxes()
                           : sl    ? sl.getGridAxes()
                           : a2a   ? a2a.getGridAxes()
                                   : start.getGridAxes();
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, gridRef);
  if (!grid)
    return op->emitOpError() << "names the grid " << gridRef
                             << ", which the module does not declare";
  auto names = grid->getAttrOfType<ArrayAttr>(
      kiln::KilnDialect::getAxisNamesAttrName());
  if (!names)
    return grid.emitOpError()
           << "has no " << kiln::KilnDialect::getAxisNamesAttrName()
           << ": the runtime finds a collective's group by its axis name";
  // Over several axes: the group of all of them, named by their names
  // joined with '+' in grid order (the runtime builds one communicator per
  // set of axes).
  if (axes.empty())
    return op->emitOpError() << "cannot be lowered to the runtime: it names "
                                "no grid axis";
  std::string axisName;
  for (size_t k = 0; k < axes.size(); ++k) {
    if (axes[k] < 0 || (size_t)axes[k] >= names.size())
      return op->emitOpError() << "names grid axis " << axes[k]
                               << ", which the grid does not have";
    if (k && axes[k] <= axes[k - 1])
      return op->emitOpError() << "cannot be lowered to the runtime: its grid "
                                  "axes must be in increasing order";
    axisName += (k ? "+" : "") + cast<StringAttr>(names[axes[k]]).getValue().str();
  }
  if (axes.size() > 1 && !ar && !start)
    return op->emitOpError() << "cannot be lowered to the runtime: only an "
                                "all-reduce works over several grid axes";
  // Shape and element type of a one-tensor collective: the operand may
  // already be a converted (memref) function argument. (A bucket's start
  // and wait are checked by the dist verifiers.)
  if (ar || bc) {
    auto inT = cast<ShapedType>(op->getOperand(0).getType());
    auto outT = cast<ShapedType>(op->getResult(0).getType());
    if (inT.getShape() != outT.getShape() ||
        inT.getElementType() != outT.getElementType())
      return op->emitOpError() << "cannot be lowered to the runtime: the "
                                  "result type must be the input's";
  }
  Builder b(op->getContext());
  NamedAttribute axis = b.getNamedAttr("axis", b.getStringAttr(axisName));
  // The kernels split and join along any dimension (`dim`).
  std::optional<NamedAttribute> dimAttr;
  if (rs || ag || sl) {
    APInt dim = rs ? rs.getScatterAxis() : ag ? ag.getGatherAxis() : sl.getSliceAxis();
    auto inT = cast<ShapedType>(op->getOperand(0).getType());
    auto outT = cast<ShapedType>(op->getResult(0).getType());
    if (dim.getZExtValue() >= (uint64_t)inT.getRank())
      return op->emitOpError() << "splits or joins along dimension "
                               << dim.getZExtValue() << " of a rank-"
                               << inT.getRank() << " tensor";
    if (inT.getElementType() != outT.getElementType())
      return op->emitOpError() << "cannot be lowered to the runtime: the "
                                  "element types differ";
    dimAttr = b.getNamedAttr("dim", b.getI64IntegerAttr(dim.getZExtValue()));
    if (ag || sl)
      return b.getDictionaryAttr({axis, *dimAttr});
  }
  // An all-to-all cuts along split_dim, sends block j to rank j and joins
  // what it receives along concat_dim.
  if (a2a) {
    auto inT = cast<ShapedType>(a2a.getInput().getType());
    uint64_t split = a2a.getSplitAxis().getZExtValue(),
             concat = a2a.getConcatAxis().getZExtValue();
    if (split >= (uint64_t)inT.getRank() || concat >= (uint64_t)inT.getRank())
      return op->emitOpError() << "splits or joins outside its rank-" << inT.getRank()
                               << " operand";
    return b.getDictionaryAttr(
        {axis, b.getNamedAttr("split_dim", b.getI64IntegerAttr(split)),
         b.getNamedAttr("concat_dim", b.getI64IntegerAttr(concat))});
  }
  if (bc) {
    if (bc.getRoot().size() != 1 || !bc.getRootDynamic().empty())
      return op->emitOpError() << "cannot be lowered to the runtime: the root "
                                  "must be one static index";
    int64_t root = bc.getRoot()[0];
    if (root < 0 || root >= grid.getShape()[axes[0]])
      return op->emitOpError() << "root " << root << " is not a rank of axis '"
                               << cast<StringAttr>(names[axes[0]]).getValue()
                               << "'";
    return b.getDictionaryAttr({axis, b.getNamedAttr("root", b.getI64IntegerAttr(root))});
  }
  shard::ReductionKind kind = ar   ? ar.getReduction()
                              : rs ? rs.getReduction()
                                   : start.getReduction();
  Type element = ar   ? cast<ShapedType>(ar.getType()).getElementType()
                 : rs ? cast<ShapedType>(rs.getType()).getElementType()
                      : start.getBucket().getType().getElementType();
  StringRef reduction;
  switch (kind) {
  case shard::ReductionKind::Sum: reduction = "sum"; break;
  case shard::ReductionKind::Max: reduction = "max"; break;
  case shard::ReductionKind::Min: reduction = "min"; break;
  case shard::ReductionKind::Average: reduction = "average"; break;
  default:
    return op->emitOpError() << "cannot be lowered to the runtime: reduction "
                             << shard::stringifyReductionKind(kind)
                             << " has no kernel (sum, max, min, average)";
  }
  if (reduction == "average" && !isa<FloatType>(element))
    return op->emitOpError() << "cannot be lowered to the runtime: an average "
                                "needs floating-point values";
  NamedAttribute red = b.getNamedAttr("reduction", b.getStringAttr(reduction));
  if (rs)
    return b.getDictionaryAttr({axis, *dimAttr, red});
  if (wait)
    return b.getDictionaryAttr({axis, red});
  StringAttr wire =
      ar ? op->getAttrOfType<StringAttr>(
               kiln::KilnDialect::getCompressionAttrName())
         : start.getCompressionAttr();
  // Every parameter with its default filled in (KRTKernels.td): the wire
  // format is none unless the op names one.
  return b.getDictionaryAttr(
      {axis,
       b.getNamedAttr("compression", wire ? wire : b.getStringAttr("none")),
       red});
}

/// Results tagged `kiln.update = <argument>` (training: new parameter and
/// optimizer-state values) are written into the argument's own storage and
/// leave the result list. An in-place kernel that reads the argument last
/// writes its output there directly; anything else gets a `copy` step
/// before the return.
LogicalResult KilnLowerToRuntimePass::writeUpdates(func::FuncOp func) {
  Block &body = func.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<DictionaryAttr> attrs;
  func.getAllResultAttrs(attrs);
  SmallVector<Value> kept;
  SmallVector<DictionaryAttr> keptAttrs;
  llvm::SmallDenseSet<unsigned> written;
  OpBuilder b(ret);
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    Value v = ret.getOperand(i);
    std::optional<unsigned> up = kiln::getUpdateOf(attrs[i]);
    if (!up) {
      kept.push_back(v);
      keptAttrs.push_back(attrs[i] ? attrs[i] : DictionaryAttr::get(func.getContext()));
      continue;
    }
    int64_t k = *up;
    if (k < 0 || k >= (int64_t)body.getNumArguments() ||
        v.getType() != body.getArgument(k).getType())
      return func.emitOpError() << "result #" << i << " updates argument #" << k
                                << ", which does not exist or has another type";
    if (!written.insert(k).second)
      return func.emitOpError() << "argument #" << k << " is updated twice";
    BlockArgument p = body.getArgument(k);
    if (v == p)
      continue;
    kiln::krt::LaunchOp writer;
    auto alloc = v.getDefiningOp<kiln::krt::AllocOp>();
    if (alloc)
      for (Operation *user : alloc->getUsers())
        if (auto l = dyn_cast<kiln::krt::LaunchOp>(user))
          if (llvm::is_contained(l.getOuts(), v))
            writer = l;
    bool direct = writer && writer.getInPlace() &&
                  llvm::is_contained(writer.getIns(), p) &&
                  llvm::all_of(p.getUsers(), [&](Operation *u) {
                    return u == writer || u->isBeforeInBlock(writer);
                  });
    if (direct) {
      alloc.getResult().replaceAllUsesWith(p);
      continue;
    }
    kiln::krt::LaunchOp::create(b, ret.getLoc(), "copy", ValueRange{v},
                                ValueRange{p}, DictionaryAttr::get(func.getContext()),
                                /*inPlace=*/false, /*stream=*/0, /*flops=*/IntegerAttr());
    ++numLaunches;
  }
  if (kept.size() == ret.getNumOperands())
    return success();
  func::ReturnOp::create(b, ret.getLoc(), kept);
  ret.erase();
  for (Operation &op : llvm::make_early_inc_range(body))
    if (auto a = dyn_cast<kiln::krt::AllocOp>(op); a && a->use_empty())
      a.erase();
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 ValueRange(kept).getTypes()));
  func.setAllResultAttrs(keptAttrs);
  return success();
}

LogicalResult KilnLowerToRuntimePass::checkTypes(Operation *op) {
  for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(t);
    if (!tensor || !tensor.hasStaticShape())
      return op->emitOpError()
             << "cannot be lowered to the runtime: type " << t
             << " is not a statically shaped tensor";
    if (tensor.getEncoding())
      return op->emitOpError() << "cannot be lowered to the runtime: tensor "
                               << "encodings are not supported";
  }
  return success();
}

LogicalResult KilnLowerToRuntimePass::lower(func::FuncOp func) {
  if (!func.getBody().hasOneBlock())
    return func.emitOpError() << "must have one block to be lowered to the "
                                 "runtime";
  Block &body = func.getBody().front();
  // Already lowered (or empty): nothing to do.
  if (llvm::all_of(func.getArgumentTypes(), llvm::IsaPred<MemRefType>) &&
      llvm::all_of(func.getResultTypes(), llvm::IsaPred<MemRefType>) &&
      llvm::none_of(body, [](Operation &op) {
        return isa<kiln::KilnDialect, kiln::dist::DistDialect>(op.getDialect());
      }))
    return success();

  // Check everything before changing anything.
  for (Operation &op : body) {
    if (isa<func::ReturnOp>(op))
      continue;
    if (isa<shard::AllReduceOp, shard::BroadcastOp, shard::ReduceScatterOp,
            shard::AllGatherOp, shard::AllSliceOp, shard::AllToAllOp,
            kiln::dist::AllReduceStartOp,
            kiln::dist::AllReduceWaitOp>(op)) {
      if (failed(collectiveParams(&op)))
        return failure();
      continue;
    }
    if (isa<kiln::dist::SendOp, kiln::dist::RecvOp>(op)) {
      if (failed(checkTypes(&op)))
        return failure();
      continue;
    }
    if (!isa<kiln::KilnDialect>(op.getDialect()))
      return op.emitOpError()
             << "cannot be lowered to the runtime: only kiln ops have "
                "kernels (run --convert-onnx-to-kiln first)";
    if (op.getNumRegions() != 0)
      return op.emitOpError() << "cannot be lowered to the runtime: ops with "
                                 "regions have no kernel";
    if (failed(checkTypes(&op)))
      return failure();
  }

  // Arguments become buffers in place.
  for (BlockArgument arg : body.getArguments()) {
    auto tensor = dyn_cast<RankedTensorType>(arg.getType());
    if (!tensor || !tensor.hasStaticShape())
      return func.emitOpError() << "argument #" << arg.getArgNumber()
                                << " has type " << arg.getType()
                                << "; the runtime needs static tensor shapes";
    arg.setType(bufferType(tensor));
  }

  IRMapping map;
  SmallVector<Operation *> old;
  for (Operation &op : body) {
    old.push_back(&op);
    OpBuilder b(&op);
    Location loc = op.getLoc();
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      SmallVector<Value> values;
      for (Value v : ret.getOperands())
        values.push_back(map.lookupOrDefault(v));
      func::ReturnOp::create(b, loc, values);
      continue;
    }

    if (auto c = dyn_cast<kiln::ConstantOp>(op)) {
      auto k = kiln::krt::ConstantOp::create(
          b, loc, bufferType(c.getType()), c.getValue());
      map.map(c.getResult(), k.getResult());
      continue;
    }
    if (auto r = dyn_cast<kiln::ReshapeOp>(op)) {
      auto v = kiln::krt::ViewOp::create(b, loc, bufferType(r.getType()),
                                         map.lookupOrDefault(r.getInput()));
      map.map(r.getResult(), v.getResult());
      ++numViews;
      continue;
    }

    // A bucket: the start packs its inputs into one buffer (the bucket in
    // flight, which the communicator writes until the wait); the wait
    // unpacks it into a buffer per result.
    // A bucket of one tensor has that tensor's shape and may take its
    // buffer (in place): no packing, no unpacking.
    if (auto start = dyn_cast<kiln::dist::AllReduceStartOp>(op)) {
      auto t = start.getBucket().getType();
      bool single = start.getInputs().size() == 1;
      auto alloc = kiln::krt::AllocOp::create(
          b, loc,
          single ? bufferType(start.getInputs()[0].getType())
                 : MemRefType::get({t.getSize()}, t.getElementType()),
          IntegerAttr());
      map.map(start.getBucket(), alloc.getResult());
      SmallVector<Value> ins;
      for (Value v : start.getInputs())
        ins.push_back(map.lookupOrDefault(v));
      kiln::krt::LaunchOp::create(b, loc, "all_reduce_start", ins,
                                  ValueRange{alloc.getResult()},
                                  *collectiveParams(&op), /*inPlace=*/single,
                                  /*stream=*/0, /*flops=*/IntegerAttr());
      ++numLaunches;
      continue;
    }
    if (auto wait = dyn_cast<kiln::dist::AllReduceWaitOp>(op)) {
      SmallVector<Value> outs;
      for (Value r : wait.getResults()) {
        auto alloc = kiln::krt::AllocOp::create(b, loc, bufferType(r.getType()),
                                                IntegerAttr());
        outs.push_back(alloc.getResult());
        map.map(r, alloc.getResult());
      }
      kiln::krt::LaunchOp::create(b, loc, "all_reduce_wait",
                                  ValueRange{map.lookupOrDefault(wait.getBucket())},
                                  outs, *collectiveParams(&op),
                                  /*inPlace=*/outs.size() == 1, /*stream=*/0, /*flops=*/IntegerAttr());
      ++numLaunches;
      continue;
    }
    // A pipeline's point to point: the kernels name the axis, the peer
    // and the tag.
    if (isa<kiln::dist::SendOp, kiln::dist::RecvOp>(op)) {
      NamedAttrList params;
      for (StringRef n : {"axis", "peer", "tag"})
        params.push_back(b.getNamedAttr(n, op.getAttr(n)));
      DictionaryAttr dict = params.getDictionary(op.getContext());
      if (auto send = dyn_cast<kiln::dist::SendOp>(op)) {
        kiln::krt::LaunchOp::create(b, loc, "send",
                                    ValueRange{map.lookupOrDefault(send.getInput())},
                                    ValueRange{}, dict, /*inPlace=*/false,
                                    /*stream=*/0, /*flops=*/IntegerAttr());
      } else {
        auto recv = cast<kiln::dist::RecvOp>(op);
        auto alloc = kiln::krt::AllocOp::create(
            b, loc, bufferType(recv.getType()), IntegerAttr());
        map.map(recv.getResult(), alloc.getResult());
        kiln::krt::LaunchOp::create(b, loc, "recv", ValueRange{},
                                    ValueRange{alloc.getResult()}, dict,
                                    /*inPlace=*/false, /*stream=*/0,
                                    /*flops=*/IntegerAttr());
      }
      ++numLaunches;
      continue;
    }
    if (isa<shard::AllReduceOp, shard::BroadcastOp, shard::ReduceScatterOp,
            shard::AllGatherOp, shard::AllSliceOp, shard::AllToAllOp>(op)) {
      Value in = op.getOperand(0), out = op.getResult(0);
      auto alloc = kiln::krt::AllocOp::create(b, loc, bufferType(out.getType()),
                                              IntegerAttr());
      map.map(out, alloc.getResult());
      StringRef kernel = isa<shard::AllReduceOp>(op)       ? "all_reduce"
                         : isa<shard::BroadcastOp>(op)     ? "mesh_broadcast"
                         : isa<shard::ReduceScatterOp>(op) ? "reduce_scatter"
                         : isa<shard::AllGatherOp>(op)     ? "all_gather"
                         : isa<shard::AllToAllOp>(op)      ? "all_to_all"
                                                           : "all_slice";
      kiln::krt::LaunchOp::create(
          b, loc, kernel,
          ValueRange{map.lookupOrDefault(in)}, ValueRange{alloc.getResult()},
          *collectiveParams(&op), /*inPlace=*/false, /*stream=*/0, /*flops=*/IntegerAttr());
      ++numLaunches;
      continue;
    }

    SmallVector<Value> ins, outs;
    for (Value v : op.getOperands())
      ins.push_back(map.lookupOrDefault(v));
    for (Value r : op.getResults()) {
      auto alloc = kiln::krt::AllocOp::create(b, loc, bufferType(r.getType()),
                                              IntegerAttr());
      outs.push_back(alloc.getResult());
      map.map(r, alloc.getResult());
    }
    // The op's attributes with their defaults, so the kernel sees every one.
    // (Not the discardable kiln.* annotations: names, shardings.)
    NamedAttrList params;
    for (NamedAttribute a : op.getAttrDictionary())
      if (!a.getName().getValue().starts_with("kiln."))
        params.push_back(a);
    op.getName().populateDefaultAttrs(params);
    auto launch = kiln::krt::LaunchOp::create(
        b, loc, op.getName().stripDialect(), ins, outs,
        params.getDictionary(op.getContext()),
        op.hasTrait<kiln::trait::InPlaceElementwise>(), /*stream=*/0, /*flops=*/IntegerAttr());
    // The op's work, for the profiler's achieved GFLOP/s.
    if (auto cost = dyn_cast<kiln::CostOpInterface>(op))
      if (int64_t flops = cost.getFlops(); flops > 0)
        launch.setFlopsAttr(b.getI64IntegerAttr(flops));
    ++numLaunches;
  }
  for (Operation *op : llvm::reverse(old)) {
    op->dropAllUses();
    op->erase();
  }

  if (failed(writeUpdates(func)))
    return failure();

  SmallVector<Type> results;
  for (Value v : body.getTerminator()->getOperands())
    results.push_back(v.getType());
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 results));
  return success();
}

} // namespace
