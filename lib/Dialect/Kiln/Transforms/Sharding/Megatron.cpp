//===- Megatron.cpp - --kiln-tp-megatron: Megatron-LM's blocks ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The Megatron-LM tensor-parallel strategy (Passes.td has the contract),
// found by graph structure, not by names:
//   - an attention block: a projection (matmul by a 2-D parameter, plus an
//     optional bias parameter) whose result is cut into Q, K, V (slices of
//     equal width along its last dimension) that are reshaped into heads,
//     or three projections of one input reshaped into heads; and the first
//     matmul by a 2-D parameter their heads reach (the output projection);
//   - an MLP block: a projection, a chain of elementwise ops (bias,
//     activation), and the matmul by a 2-D parameter the chain feeds.
// The projections into heads and the MLP's up projection are held
// column-parallel (their output features, and bias, split over tp), the
// output and down projections row-parallel (their input features): the
// sharding rules then give one all-reduce per block in forward (and one
// for the block input's gradient in backward), as Megatron-LM does. A
// fused QKV weight [3C, Cin] is retyped as [3, C, Cin] (its bias [3, C])
// and split along C, so each rank holds its heads' rows of Q, K and V;
// kiln.model_shape keeps the model's shape for checkpoints and export.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "kiln/Dialect/Kiln/Transforms/Sharding.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNTPMEGATRONPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// The 2-D parameter argument `v` is, or null.
BlockArgument param2D(func::FuncOp f, Value v) {
  auto a = dyn_cast<BlockArgument>(v);
  if (!a || a.getOwner() != &f.getBody().front() || !kiln::isParam(f, a.getArgNumber()))
    return {};
  auto t = cast<RankedTensorType>(a.getType());
  return t.getRank() == 2 ? a : BlockArgument();
}

/// A projection: x @ W (W a 2-D parameter, as rhs), plus an optional bias
/// parameter of W's output features added to it.
struct Projection {
  mutable kiln::MatmulOp mm;
  BlockArgument weight, bias;
  mutable kiln::AddOp biasAdd;
  /// The projection's value (after the bias).
  Value out() const { return biasAdd ? biasAdd.getResult() : mm.getResult(); }
  /// W's dimension of output features (1 - of input features).
  int64_t outDim() const { return mm.getTransposeRhs() ? 0 : 1; }
  int64_t outFeatures() const {
    return cast<RankedTensorType>(weight.getType()).getDimSize(outDim());
  }
};

std::optional<Projection> projectionAt(func::FuncOp f, kiln::MatmulOp mm) {
  if (mm.getTransposeLhs())
    return std::nullopt;
  Projection p;
  p.mm = mm;
  p.weight = param2D(f, mm.getRhs());
  if (!p.weight)
    return std::nullopt;
  if (mm->hasOneUse())
    if (auto add = dyn_cast<kiln::AddOp>(*mm->getUsers().begin())) {
      Value other = add.getLhs() == mm.getResult() ? add.getRhs() : add.getLhs();
      auto b = dyn_cast<BlockArgument>(other);
      auto bt = b ? cast<RankedTensorType>(b.getType()) : RankedTensorType();
      if (b && b.getOwner() == &f.getBody().front() &&
          kiln::isParam(f, b.getArgNumber()) && bt.getRank() == 1 &&
          bt.getDimSize(0) == p.outFeatures() && add.getType() == mm.getType()) {
        p.bias = b;
        p.biasAdd = add;
      }
    }
  return p;
}

/// Whether `v` ([..., F]) is reshaped into heads [..., H, F / H] by its
/// only use (H > 1); H then.
std::optional<int64_t> headsOf(Value v) {
  if (!v.hasOneUse())
    return std::nullopt;
  auto r = dyn_cast<kiln::ReshapeOp>(*v.getUsers().begin());
  if (!r)
    return std::nullopt;
  auto in = cast<RankedTensorType>(v.getType());
  auto out = cast<RankedTensorType>(r.getType());
  if (out.getRank() != in.getRank() + 1 ||
      in.getShape().drop_back() != out.getShape().drop_back(2) ||
      out.getDimSize(out.getRank() - 2) * out.getDimSize(out.getRank() - 1) !=
          in.getDimSize(in.getRank() - 1) ||
      out.getDimSize(out.getRank() - 2) < 2)
    return std::nullopt;
  return out.getDimSize(out.getRank() - 2);
}

/// The first matmul by a 2-D parameter (as rhs) that `from` reaches
/// forward (breadth first), other than through `stop`; null if none
/// within a bound.
kiln::MatmulOp firstProjectionAfter(func::FuncOp f, ArrayRef<Value> from) {
  SmallVector<Value> work(from.begin(), from.end());
  llvm::SmallPtrSet<Operation *, 32> seen;
  for (size_t i = 0; i < work.size() && i < 256; ++i)
    for (Operation *u : work[i].getUsers()) {
      if (!seen.insert(u).second)
        continue;
      if (auto mm = dyn_cast<kiln::MatmulOp>(u))
        if (mm.getLhs() == work[i] && param2D(f, mm.getRhs()))
          return mm;
      for (Value r : u->getResults())
        work.push_back(r);
    }
  return {};
}

struct Block {
  std::string kind; // "attention" | "mlp"
  SmallVector<Projection> column; // split on output features
  Projection row;                 // split on input features
  int64_t heads = 0;
  /// A fused QKV projection cut into `parts` slices (0: none).
  int64_t parts = 0;
  SmallVector<kiln::SliceOp> slices;
};

struct MegatronPass : public kiln::impl::KilnTpMegatronPassBase<MegatronPass> {
  using Base::Base;
  void runOnOperation() override;
  /// Retypes a fused projection's weight and bias into [parts, C, ...] and
  /// replaces the slices by one projection per part.
  void unfuse(func::FuncOp f, Block &b);
  /// Sequence parallelism: pins (kiln.shardings) the column projections'
  /// outputs split on their features, and the row projections' outputs
  /// (after their bias) and every LayerNorm split on the sequence, so the
  /// propagation splits the residual stream on the sequence between them.
  void pinSequenceParallel(func::FuncOp f, ArrayRef<Block> blocks);
};

ArrayAttr spec(MLIRContext *ctx, int64_t rank, int64_t dim) {
  SmallVector<Attribute> dims;
  for (int64_t d = 0; d < rank; ++d)
    dims.push_back(d == dim ? ArrayAttr::get(ctx, {StringAttr::get(ctx, "tp")})
                            : ArrayAttr::get(ctx, {}));
  return ArrayAttr::get(ctx, dims);
}

void MegatronPass::unfuse(func::FuncOp f, Block &b) {
  MLIRContext *ctx = f.getContext();
  Projection &p = b.column[0];
  auto wt = cast<RankedTensorType>(p.weight.getType());
  int64_t od = p.outDim(), parts = b.parts, c = p.outFeatures() / parts;
  // [parts * C, Cin] -> [parts, C, Cin] (or [Cin, parts * C] -> [Cin, parts, C]).
  SmallVector<int64_t> view(wt.getShape());
  view[od] = c;
  view.insert(view.begin() + od, parts);
  auto viewT = RankedTensorType::get(view, wt.getElementType());
  unsigned wArg = p.weight.getArgNumber();
  f.setArgAttr(wArg, kiln::KilnDialect::getModelShapeAttrName(),
               DenseI64ArrayAttr::get(ctx, wt.getShape()));
  p.weight.setType(viewT);
  RankedTensorType biasView;
  if (p.bias) {
    auto bt = cast<RankedTensorType>(p.bias.getType());
    f.setArgAttr(p.bias.getArgNumber(), kiln::KilnDialect::getModelShapeAttrName(),
                 DenseI64ArrayAttr::get(ctx, bt.getShape()));
    biasView = RankedTensorType::get({parts, c}, bt.getElementType());
    p.bias.setType(biasView);
  }
  OpBuilder bld(p.mm);
  Location loc = p.mm.getLoc();
  // Part i of a [parts, ...] view, without its leading dimension.
  auto part = [&](Value v, RankedTensorType t, int64_t at, int64_t i) {
    SmallVector<int64_t> starts(t.getRank(), 0), limits(t.getShape()),
        strides(t.getRank(), 1), shape(t.getShape());
    starts[at] = i;
    limits[at] = i + 1;
    shape[at] = 1;
    Value s = kiln::SliceOp::create(
        bld, loc, RankedTensorType::get(shape, t.getElementType()), v,
        bld.getDenseI64ArrayAttr(starts), bld.getDenseI64ArrayAttr(limits),
        bld.getDenseI64ArrayAttr(strides));
    shape.erase(shape.begin() + at);
    return kiln::ReshapeOp::create(bld, loc,
                                   RankedTensorType::get(shape, t.getElementType()),
                                   s)
        .getResult();
  };
  for (auto [i, sl] : llvm::enumerate(b.slices)) {
    Value w = part(p.weight, viewT, od, (int64_t)i);
    Value y = kiln::MatmulOp::create(bld, loc, sl.getType(), p.mm.getLhs(), w,
                                     p.mm.getTransposeLhsAttr(),
                                     p.mm.getTransposeRhsAttr());
    if (p.bias) {
      Value bi = part(p.bias, biasView, 0, (int64_t)i);
      y = p.biasAdd.getLhs() == p.mm.getResult()
              ? kiln::AddOp::create(bld, loc, sl.getType(), y, bi).getResult()
              : kiln::AddOp::create(bld, loc, sl.getType(), bi, y).getResult();
    }
    sl.getResult().replaceAllUsesWith(y);
  }
  for (kiln::SliceOp sl : b.slices)
    sl->erase();
  if (p.biasAdd)
    p.biasAdd->erase();
  p.mm->erase();
  f.setType(FunctionType::get(ctx, f.getBody().getArgumentTypes(),
                              f.getResultTypes()));
  // Split along C: the view's dimension after `parts`.
  f.setArgAttr(wArg, kiln::KilnDialect::getShardingAttrName(),
               spec(ctx, viewT.getRank(), od + 1));
  if (p.bias)
    f.setArgAttr(p.bias.getArgNumber(), kiln::KilnDialect::getShardingAttrName(),
                 spec(ctx, 2, 1));
}

void MegatronPass::pinSequenceParallel(func::FuncOp f, ArrayRef<Block> blocks) {
  MLIRContext *ctx = f.getContext();
  auto axes = [&](std::initializer_list<StringRef> names) {
    SmallVector<Attribute> a;
    for (StringRef n : names)
      if (!n.empty())
        a.push_back(StringAttr::get(ctx, n));
    return ArrayAttr::get(ctx, a);
  };
  StringRef batch = batchAxis;
  // [B, T, ...]: the batch on dp (if any), dim `split` on tp.
  auto pinned = [&](Value v, int64_t split) -> Attribute {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() != 3 || t.getDimSize(split) % tp)
      return {};
    SmallVector<Attribute> dims;
    for (int64_t d = 0; d < 3; ++d)
      dims.push_back(d == split ? axes({"tp"}) : d == 0 ? axes({batch}) : axes({}));
    return ArrayAttr::get(ctx, dims);
  };
  auto pin = [&](Operation *op, ArrayRef<int64_t> splits) {
    SmallVector<Attribute> rs;
    for (auto [r, d] : llvm::zip(op->getResults(), splits)) {
      Attribute a = pinned(r, d);
      if (!a)
        return;
      rs.push_back(a);
    }
    op->setAttr(kiln::KilnDialect::getShardingsAttrName(), ArrayAttr::get(ctx, rs));
  };
  // The column projections' matmuls: on their output features (the
  // sequence-split input is all-gathered before them).
  f.walk([&](kiln::MatmulOp mm) {
    BlockArgument w = param2D(f, mm.getRhs());
    if (!w || !f.getArgAttr(w.getArgNumber(), kiln::KilnDialect::getShardingAttrName()))
      return;
    // A slice of a fused QKV view, or a 2-D weight split on its outputs.
    auto sh = f.getArgAttrOfType<ArrayAttr>(w.getArgNumber(),
                                            kiln::KilnDialect::getShardingAttrName());
    int64_t outDim = mm.getTransposeRhs() ? 0 : 1;
    if (sh && sh.size() == 2 && !cast<ArrayAttr>(sh[outDim]).empty())
      pin(mm, {2});
  });
  f.walk([&](kiln::MatmulOp mm) {
    // Per-part matmuls of an unfused QKV: rhs is a reshape of a slice of a
    // split view.
    auto r = mm.getRhs().getDefiningOp<kiln::ReshapeOp>();
    auto s = r ? r.getInput().getDefiningOp<kiln::SliceOp>() : kiln::SliceOp();
    auto w = s ? dyn_cast<BlockArgument>(s.getInput()) : BlockArgument();
    if (w && f.getArgAttr(w.getArgNumber(), kiln::KilnDialect::getModelShapeAttrName()))
      pin(mm, {2});
  });
  // The row projections: their output after the bias, on the sequence
  // (the partial sums reduce-scattered into it). Without a bias the
  // matmul itself would be pinned, and its contraction could not take tp.
  for (const Block &b : blocks)
    if (b.row.biasAdd)
      pin(b.row.biasAdd, {1});
  // Every LayerNorm (result, mean, inverse deviation) on the sequence.
  f.walk([&](kiln::LayerNormOp ln) {
    if (ln.getAxis() == 2)
      pin(ln, {1, 1, 1});
  });
}

void MegatronPass::runOnOperation() {
  ModuleOp m = getOperation();
  MLIRContext *ctx = &getContext();
  auto f = m.lookupSymbol<func::FuncOp>(kiln::kForwardFuncName);
  if (!f || f.isExternal()) {
    m.emitError("--kiln-tp-megatron: the module has no @forward");
    return signalPassFailure();
  }
  if (tp < 2) {
    m.emitError("--kiln-tp-megatron: tp must be at least 2, got ") << (int64_t)tp;
    return signalPassFailure();
  }
  // A weight used more than once (tied) or by another block stays whole.
  llvm::DenseSet<Value> claimed;
  auto usable = [&](const Projection &p) {
    return p.weight.hasOneUse() && !claimed.contains(p.weight) &&
           (!p.bias || p.bias.hasOneUse());
  };
  SmallVector<Block> blocks;
  SmallVector<std::string> skipped;

  // Attention: a fused projection cut into equal slices of its last
  // dimension, each reshaped into the same number of heads.
  SmallVector<kiln::MatmulOp> matmuls;
  f.walk([&](kiln::MatmulOp mm) { matmuls.push_back(mm); });
  for (kiln::MatmulOp mm : matmuls) {
    std::optional<Projection> p = projectionAt(f, mm);
    if (!p || !usable(*p))
      continue;
    Value out = p->out();
    auto ot = cast<RankedTensorType>(out.getType());
    int64_t n = ot.getDimSize(ot.getRank() - 1);
    SmallVector<kiln::SliceOp> slices;
    bool cut = !out.use_empty();
    for (Operation *u : out.getUsers()) {
      auto s = dyn_cast<kiln::SliceOp>(u);
      if (!s) {
        cut = false;
        break;
      }
      slices.push_back(s);
    }
    if (!cut || slices.size() < 2 || n % (int64_t)slices.size())
      continue;
    int64_t width = n / (int64_t)slices.size();
    llvm::sort(slices, [](kiln::SliceOp a, kiln::SliceOp b) {
      return a.getStarts().back() < b.getStarts().back();
    });
    std::optional<int64_t> heads;
    SmallVector<Value> headValues;
    for (auto [i, s] : llvm::enumerate(slices)) {
      ArrayRef<int64_t> st = s.getStarts(), li = s.getLimits(), sd = s.getStrides();
      bool whole = true;
      for (int64_t d = 0; d + 1 < ot.getRank(); ++d)
        whole &= st[d] == 0 && li[d] == ot.getDimSize(d) && sd[d] == 1;
      std::optional<int64_t> h = headsOf(s.getResult());
      if (!whole || st.back() != (int64_t)i * width ||
          li.back() != (int64_t)(i + 1) * width || sd.back() != 1 || !h ||
          (heads && *heads != *h)) {
        heads.reset();
        break;
      }
      heads = h;
      headValues.push_back(s.getResult());
    }
    if (!heads || headValues.size() != slices.size())
      continue;
    kiln::MatmulOp o = firstProjectionAfter(f, headValues);
    std::optional<Projection> op = o ? projectionAt(f, o) : std::nullopt;
    if (!op || !usable(*op))
      continue;
    if (*heads % tp || width % tp) {
      skipped.push_back("an attention block of " + std::to_string(*heads) +
                        " heads (" + std::to_string(tp) + " ranks do not divide them)");
      continue;
    }
    Block b;
    b.kind = "attention";
    b.column.push_back(*p);
    b.row = *op;
    b.heads = *heads;
    b.parts = (int64_t)slices.size();
    b.slices = slices;
    claimed.insert(p->weight);
    claimed.insert(op->weight);
    blocks.push_back(std::move(b));
  }
  // Attention with separate projections: matmuls of one input by 2-D
  // parameters, each reshaped into the same number of heads.
  llvm::MapVector<Value, SmallVector<Projection>> byInput;
  for (kiln::MatmulOp mm : matmuls) {
    if (!mm->getBlock())
      continue;
    std::optional<Projection> p = projectionAt(f, mm);
    if (p && usable(*p) && headsOf(p->out()))
      byInput[mm.getLhs()].push_back(*p);
  }
  for (auto &[input, ps] : byInput) {
    if (ps.size() < 2)
      continue;
    std::optional<int64_t> heads = headsOf(ps[0].out());
    SmallVector<Value> outs;
    bool same = true;
    for (const Projection &p : ps) {
      same &= headsOf(p.out()) == heads;
      outs.push_back(p.out());
    }
    kiln::MatmulOp o = same ? firstProjectionAfter(f, outs) : kiln::MatmulOp();
    std::optional<Projection> op = o ? projectionAt(f, o) : std::nullopt;
    if (!op || !usable(*op))
      continue;
    if (*heads % tp) {
      skipped.push_back("an attention block of " + std::to_string(*heads) +
                        " heads (" + std::to_string(tp) + " ranks do not divide them)");
      continue;
    }
    Block b;
    b.kind = "attention";
    b.column.assign(ps.begin(), ps.end());
    b.row = *op;
    b.heads = *heads;
    for (const Projection &p : ps)
      claimed.insert(p.weight);
    claimed.insert(op->weight);
    blocks.push_back(std::move(b));
  }
  // MLP: a projection, elementwise ops, and the matmul by a 2-D parameter
  // they feed (as its lhs).
  for (kiln::MatmulOp mm : matmuls) {
    if (!mm->getBlock())
      continue;
    std::optional<Projection> up = projectionAt(f, mm);
    if (!up || !usable(*up))
      continue;
    llvm::SetVector<Value> chain;
    chain.insert(up->out());
    kiln::MatmulOp down;
    bool ok = true;
    for (size_t i = 0; i < chain.size() && ok; ++i) {
      if (chain.size() > 64) {
        ok = false;
        break;
      }
      for (Operation *u : chain[i].getUsers()) {
        if (auto d = dyn_cast<kiln::MatmulOp>(u);
            d && d.getLhs() == chain[i] && d.getRhs() != chain[i] &&
            param2D(f, d.getRhs())) {
          if (down && down != d)
            ok = false;
          down = d;
          continue;
        }
        if (!u->hasTrait<kiln::trait::InPlaceElementwise>() && !isa<kiln::CastOp>(u)) {
          ok = false;
          break;
        }
        for (Value r : u->getResults())
          chain.insert(r);
      }
    }
    // The chain is elementwise (an activation) and reaches the down
    // projection only through its lhs.
    if (!ok || !down || chain.size() < 2)
      continue;
    std::optional<Projection> dn = projectionAt(f, down);
    if (!dn || !usable(*dn))
      continue;
    if (up->outFeatures() % tp) {
      skipped.push_back("an MLP block of " + std::to_string(up->outFeatures()) +
                        " hidden features (" + std::to_string(tp) +
                        " ranks do not divide them)");
      continue;
    }
    Block b;
    b.kind = "mlp";
    b.column.push_back(*up);
    b.row = *dn;
    claimed.insert(up->weight);
    claimed.insert(dn->weight);
    blocks.push_back(std::move(b));
  }

  // The LM head: the projection whose output features are a softmax
  // cross-entropy's classes (through reshapes), split over tp
  // (vocab-parallel); --kiln-expand-cross-entropy then keeps the logits
  // split through the loss.
  SmallVector<Projection> heads;
  f.walk([&](kiln::SoftmaxCrossEntropyOp ce) {
    if (ce.getWeight() || ce.getReduction() == "none")
      return;
    Value v = ce.getLogits();
    while (auto r = v.getDefiningOp<kiln::ReshapeOp>())
      v = r.getInput();
    auto mm = v.getDefiningOp<kiln::MatmulOp>();
    if (!mm)
      if (auto add = v.getDefiningOp<kiln::AddOp>())
        mm = add.getLhs().getDefiningOp<kiln::MatmulOp>()
                 ? add.getLhs().getDefiningOp<kiln::MatmulOp>()
                 : add.getRhs().getDefiningOp<kiln::MatmulOp>();
    std::optional<Projection> p = mm ? projectionAt(f, mm) : std::nullopt;
    auto lt = cast<RankedTensorType>(ce.getLogits().getType());
    int64_t axis = ce.getClassAxis() < 0 ? ce.getClassAxis() + lt.getRank()
                                         : ce.getClassAxis();
    if (!p || p->out() != v || !usable(*p) || axis != lt.getRank() - 1 ||
        lt.getDimSize(axis) != p->outFeatures())
      return;
    if (p->outFeatures() % tp) {
      skipped.push_back("the LM head of " + std::to_string(p->outFeatures()) +
                        " classes (" + std::to_string(tp) +
                        " ranks do not divide them)");
      return;
    }
    claimed.insert(p->weight);
    heads.push_back(*p);
  });

  // The token embedding: a gather of rows of a 2-D parameter by the data's
  // indices (not computed ones: a position embedding stays whole), split on
  // its rows (vocab-parallel): each rank looks up the tokens it holds and
  // the partitioner sums the ranks' lookups.
  SmallVector<BlockArgument> embeddings;
  f.walk([&](kiln::GatherOp g) {
    BlockArgument table = param2D(f, g.getInput());
    auto ids = dyn_cast<BlockArgument>(g.getIndices());
    if (!table || g.getAxis() != 0 || !table.hasOneUse() || claimed.contains(table) ||
        !ids || ids.getOwner() != &f.getBody().front() ||
        kiln::isParam(f, ids.getArgNumber()))
      return;
    int64_t rows = cast<RankedTensorType>(table.getType()).getDimSize(0);
    if (rows % tp) {
      skipped.push_back("the embedding of " + std::to_string(rows) + " rows (" +
                        std::to_string(tp) + " ranks do not divide them)");
      return;
    }
    claimed.insert(table);
    embeddings.push_back(table);
  });

  // The shardings; fused projections are retyped first.
  SmallVector<Attribute> records;
  for (Block &b : blocks) {
    SmallVector<Attribute> names;
    auto nameOf = [&](BlockArgument a) {
      auto n = f.getArgAttrOfType<StringAttr>(a.getArgNumber(), "onnx.name");
      return n ? n : StringAttr::get(ctx, "arg" + std::to_string(a.getArgNumber()));
    };
    for (const Projection &p : b.column) {
      names.push_back(nameOf(p.weight));
      if (p.bias)
        names.push_back(nameOf(p.bias));
    }
    names.push_back(nameOf(b.row.weight));
    if (b.parts) {
      unfuse(f, b);
    } else {
      for (const Projection &p : b.column) {
        f.setArgAttr(p.weight.getArgNumber(), kiln::KilnDialect::getShardingAttrName(),
                     spec(ctx, 2, p.outDim()));
        if (p.bias)
          f.setArgAttr(p.bias.getArgNumber(), kiln::KilnDialect::getShardingAttrName(),
                       spec(ctx, 1, 0));
      }
    }
    f.setArgAttr(b.row.weight.getArgNumber(), kiln::KilnDialect::getShardingAttrName(),
                 spec(ctx, 2, 1 - b.row.outDim()));
    NamedAttrList r;
    r.set("kind", StringAttr::get(ctx, b.kind));
    r.set("params", ArrayAttr::get(ctx, names));
    if (b.heads)
      r.set("heads", IntegerAttr::get(IntegerType::get(ctx, 64), b.heads));
    records.push_back(r.getDictionary(ctx));
  }
  for (const Projection &p : heads) {
    f.setArgAttr(p.weight.getArgNumber(), kiln::KilnDialect::getShardingAttrName(),
                 spec(ctx, 2, p.outDim()));
    SmallVector<Attribute> names;
    auto n = f.getArgAttrOfType<StringAttr>(p.weight.getArgNumber(), "onnx.name");
    names.push_back(n ? n : StringAttr::get(ctx, "arg"));
    if (p.bias) {
      f.setArgAttr(p.bias.getArgNumber(), kiln::KilnDialect::getShardingAttrName(),
                   spec(ctx, 1, 0));
      if (auto bn = f.getArgAttrOfType<StringAttr>(p.bias.getArgNumber(), "onnx.name"))
        names.push_back(bn);
    }
    NamedAttrList r;
    r.set("kind", StringAttr::get(ctx, "lm_head"));
    r.set("params", ArrayAttr::get(ctx, names));
    records.push_back(r.getDictionary(ctx));
  }
  for (BlockArgument t : embeddings) {
    f.setArgAttr(t.getArgNumber(), kiln::KilnDialect::getShardingAttrName(),
                 spec(ctx, 2, 0));
    auto n = f.getArgAttrOfType<StringAttr>(t.getArgNumber(), "onnx.name");
    NamedAttrList r;
    r.set("kind", StringAttr::get(ctx, "embedding"));
    r.set("params", ArrayAttr::get(ctx, {n ? n : StringAttr::get(ctx, "arg")}));
    records.push_back(r.getDictionary(ctx));
  }
  if (sequenceParallel && !blocks.empty())
    pinSequenceParallel(f, blocks);
  m->setAttr(kiln::KilnDialect::getTpBlocksAttrName(), ArrayAttr::get(ctx, records));
  for (const std::string &s : skipped)
    m.emitWarning() << "--tp megatron: " << s << " stays whole";
}

} // namespace
