//===- KilnShardingRules.cpp - every kiln op's sharding rule ----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// ShardingRuleOpInterface for each op (ShardingRule.h has the model). A rule
// only says which dimensions move together and how partial results combine;
// what to shard is propagation's choice, and a dimension with no factor is
// simply kept whole (the partitioner gathers it if it arrives sharded).
//
// Dimensions that are whole here, and why: windows (convolution and pooling
// spatial dimensions: a shard would need its neighbours' halo), the axis a
// softmax, layer norm, argmax, concat, pad, slice or gather works along
// (each output element needs the whole axis), and a reshape's inner
// dimensions.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace kiln;
using shard::ReductionKind;

//===----------------------------------------------------------------------===//
// ShardingRule
//===----------------------------------------------------------------------===//

static int64_t rankOf(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt ? rt.getRank() : 0;
}
static ArrayRef<int64_t> dimsOf(Value v) {
  auto rt = dyn_cast<RankedTensorType>(v.getType());
  return rt ? rt.getShape() : ArrayRef<int64_t>{};
}

ShardingRule ShardingRule::allWhole(Operation *op) {
  ShardingRule r;
  for (Type t : op->getOperandTypes())
    r.operands.emplace_back(rankOf(t), -1);
  for (Type t : op->getResultTypes())
    r.results.emplace_back(rankOf(t), -1);
  return r;
}

int ShardingRule::add(int64_t size, FactorKind kind,
                      std::optional<ReductionKind> combine) {
  ShardingFactor f;
  f.size = size;
  f.kind = kind;
  f.combine = combine;
  factors.push_back(f);
  return (int)factors.size() - 1;
}

std::string ShardingRule::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  auto name = [](int f) -> std::string {
    if (f < 0)
      return "_";
    std::string n(1, char('a' + f % 26));
    return f < 26 ? n : n + std::to_string(f / 26);
  };
  auto list = [&](ArrayRef<SmallVector<int>> vs) {
    llvm::interleaveComma(vs, os, [&](const SmallVector<int> &dims) {
      os << "(";
      llvm::interleaveComma(dims, os, [&](int f) { os << name(f); });
      os << ")";
    });
  };
  list(operands);
  os << " -> ";
  list(results);
  for (auto [i, f] : llvm::enumerate(factors)) {
    if (f.kind == FactorKind::Parallel && !f.dividesBySize)
      continue;
    os << "; " << name(i) << ": "
       << (f.kind == FactorKind::Reduction ? "reduction"
           : f.kind == FactorKind::PerShard ? "per-shard"
                                            : "parallel");
    if (f.kind != FactorKind::Parallel)
      os << " " << (f.combine ? shard::stringifyReductionKind(*f.combine)
                              : StringRef("none"));
    if (f.dividesBySize)
      os << ", divides by its size";
  }
  return s;
}

ShardingRule kiln::detail::broadcastRule(Operation *op) {
  ShardingRule r = ShardingRule::allWhole(op);
  if (op->getNumResults() == 0)
    return r;
  ArrayRef<int64_t> out = dimsOf(op->getResult(0));
  int64_t rank = out.size();
  SmallVector<int> f;
  for (int64_t d : out)
    f.push_back(r.add(d));
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    if (dimsOf(v) == out)
      r.results[i].assign(f.begin(), f.end());
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    ArrayRef<int64_t> in = dimsOf(v);
    if ((int64_t)in.size() > rank)
      continue;
    int64_t off = rank - in.size();
    for (size_t j = 0; j < in.size(); ++j)
      if (in[j] == out[off + j])
        r.operands[i][j] = f[off + j];
  }
  return r;
}

void kiln::detail::reshapeRule(ArrayRef<int64_t> in, ArrayRef<int64_t> out,
                               ShardingRule &r) {
  size_t i = 0, j = 0;
  while (i < in.size() && j < out.size()) {
    // Dimensions of 1 carry nothing.
    if (in[i] == 1) {
      ++i;
      continue;
    }
    if (out[j] == 1) {
      ++j;
      continue;
    }
    size_t gi = i, gj = j;
    int64_t a = in[i++], b = out[j++];
    while (a != b) {
      if (a < b && i < in.size())
        a *= in[i++];
      else if (b < a && j < out.size())
        b *= out[j++];
      else
        return;
    }
    int f = r.add(std::min(in[gi], out[gj]));
    r.operands[0][gi] = f;
    r.results[0][gj] = f;
  }
}

//===----------------------------------------------------------------------===//
// Elementwise and broadcasting ops, optimizer updates
//===----------------------------------------------------------------------===//

#define KILN_BROADCAST_RULE(Op)                                                \
  ShardingRule Op::getShardingRule() {                                         \
    return kiln::detail::broadcastRule(getOperation());                              \
  }
KILN_BROADCAST_RULE(NegOp)
KILN_BROADCAST_RULE(AbsOp)
KILN_BROADCAST_RULE(SignOp)
KILN_BROADCAST_RULE(ExpOp)
KILN_BROADCAST_RULE(LogOp)
KILN_BROADCAST_RULE(TanhOp)
KILN_BROADCAST_RULE(SigmoidOp)
KILN_BROADCAST_RULE(ReluOp)
KILN_BROADCAST_RULE(SqrtOp)
KILN_BROADCAST_RULE(RsqrtOp)
KILN_BROADCAST_RULE(ReciprocalOp)
KILN_BROADCAST_RULE(ErfOp)
KILN_BROADCAST_RULE(SoftplusOp)
KILN_BROADCAST_RULE(FloorOp)
KILN_BROADCAST_RULE(RoundOp)
KILN_BROADCAST_RULE(CeilOp)
KILN_BROADCAST_RULE(SinOp)
KILN_BROADCAST_RULE(CosOp)
KILN_BROADCAST_RULE(NotOp)
KILN_BROADCAST_RULE(LeakyReluOp)
KILN_BROADCAST_RULE(EluOp)
KILN_BROADCAST_RULE(GeluOp)
ShardingRule CastOp::getShardingRule() {
  ShardingRule r = kiln::detail::broadcastRule(getOperation());
  // Widening a float: the sum of the widened partial results is the
  // widened sum, to rounding (and no worse).
  auto from = dyn_cast<FloatType>(getElementTypeOrSelf(getInput()));
  auto to = dyn_cast<FloatType>(getElementTypeOrSelf(getType()));
  r.carriesReductions =
      from && to && from != to &&
      llvm::APFloat::isRepresentableBy(from.getFloatSemantics(),
                                       to.getFloatSemantics());
  return r;
}
ShardingRule AddOp::getShardingRule() {
  ShardingRule r = kiln::detail::broadcastRule(getOperation());
  r.sumsOperands = getLhs().getType() == getType() && getRhs().getType() == getType();
  return r;
}
ShardingRule SubOp::getShardingRule() {
  ShardingRule r = kiln::detail::broadcastRule(getOperation());
  r.sumsOperands = getLhs().getType() == getType() && getRhs().getType() == getType();
  return r;
}
KILN_BROADCAST_RULE(MulOp)
KILN_BROADCAST_RULE(DivOp)
KILN_BROADCAST_RULE(PowOp)
KILN_BROADCAST_RULE(MaxOp)
KILN_BROADCAST_RULE(MinOp)
KILN_BROADCAST_RULE(EqualOp)
KILN_BROADCAST_RULE(LessOp)
KILN_BROADCAST_RULE(LessEqualOp)
KILN_BROADCAST_RULE(GreaterOp)
KILN_BROADCAST_RULE(GreaterEqualOp)
KILN_BROADCAST_RULE(AndOp)
KILN_BROADCAST_RULE(OrOp)
KILN_BROADCAST_RULE(XorOp)
KILN_BROADCAST_RULE(SelectOp)
KILN_BROADCAST_RULE(BroadcastOp)
KILN_BROADCAST_RULE(ReluGradOp)
KILN_BROADCAST_RULE(GeluGradOp)
KILN_BROADCAST_RULE(DropoutGradOp)
KILN_BROADCAST_RULE(SgdUpdateOp)
KILN_BROADCAST_RULE(MomentumUpdateOp)
KILN_BROADCAST_RULE(AdamUpdateOp)
// Any dimension may split: the kernel numbers each element in the whole
// tensor (localizeAttributes records where the rank's block lies), so every
// element gets the 1-rank run's mask.
KILN_BROADCAST_RULE(DropoutOp)
#undef KILN_BROADCAST_RULE

/// The '+'-joined axis names of dimension `d` of `sharding` ("" whole).
static std::string axesOfDim(Attribute sharding, int64_t d) {
  auto dims = dyn_cast_or_null<ArrayAttr>(sharding);
  std::string n;
  if (!dims || d < 0 || d >= (int64_t)dims.size())
    return n;
  for (Attribute a : cast<ArrayAttr>(dims[d]))
    n += (n.empty() ? "" : "+") + cast<StringAttr>(a).getValue().str();
  return n;
}
void DropoutOp::localizeAttributes(ArrayRef<Attribute>,
                                   ArrayRef<Attribute> resultShardings, TypeRange,
                                   TypeRange wholeResultTypes) {
  // A batch split over dp alone is the kernel's batch shard; anything else
  // names, per dimension, the axes splitting it ('+'-joined, "" whole).
  auto dims = resultShardings.empty()
                  ? ArrayAttr()
                  : dyn_cast_or_null<ArrayAttr>(resultShardings[0]);
  auto whole = wholeResultTypes.empty()
                   ? RankedTensorType()
                   : dyn_cast<RankedTensorType>(wholeResultTypes[0]);
  if (!dims || !whole)
    return;
  std::vector<std::string> names;
  bool beyondBatch = false;
  for (int64_t d = 0; d < (int64_t)dims.size(); ++d) {
    std::string n = axesOfDim(dims, d);
    beyondBatch |= !n.empty() && (d != 0 || n != "dp");
    names.push_back(n);
  }
  if (!beyondBatch)
    return;
  Builder b(getContext());
  SmallVector<Attribute> attrs;
  for (const std::string &n : names)
    attrs.push_back(b.getStringAttr(n));
  setSplitAttr(b.getArrayAttr(attrs));
  setWholeShapeAttr(b.getDenseI64ArrayAttr(whole.getShape()));
}

// Which channels go depends on the whole weights.
ShardingRule ChannelPruneOp::getShardingRule() {
  return ShardingRule::allWhole(getOperation());
}
// The elements a magnitude prune keeps depend on the whole parameter.
ShardingRule MagnitudePruneOp::getShardingRule() {
  return ShardingRule::allWhole(getOperation());
}

/// Fake quantization is elementwise: every dimension of the tensors a
/// parallel factor; a per-axis scale and zero point are that axis's.
static ShardingRule fakeQuantRule(Operation *op, ArrayRef<unsigned> tensors,
                                  ArrayRef<unsigned> params,
                                  std::optional<uint64_t> axis) {
  ShardingRule r = ShardingRule::allWhole(op);
  ArrayRef<int64_t> shape = dimsOf(op->getResult(0));
  for (int64_t d = 0; d < (int64_t)shape.size(); ++d) {
    int f = r.add(shape[d]);
    r.results[0][d] = f;
    for (unsigned i : tensors)
      r.operands[i][d] = f;
    if (axis && (int64_t)*axis == d)
      for (unsigned i : params)
        r.operands[i][0] = f;
  }
  return r;
}
ShardingRule FakeQuantOp::getShardingRule() {
  return fakeQuantRule(getOperation(), {0}, {1, 2}, getAxis());
}
ShardingRule FakeQuantGradOp::getShardingRule() {
  return fakeQuantRule(getOperation(), {0, 1}, {2, 3}, getAxis());
}
// Scalars in, scalars and the observer's state out.
ShardingRule MinMaxObserveOp::getShardingRule() {
  return ShardingRule::allWhole(getOperation());
}
// The channel axis is parallel; the other axes reduce with max.
ShardingRule AbsMaxScaleOp::getShardingRule() {
  ShardingRule r = ShardingRule::allWhole(getOperation());
  ArrayRef<int64_t> in = dimsOf(getInput());
  for (int64_t d = 0; d < (int64_t)in.size(); ++d) {
    if (d == (int64_t)getAxis()) {
      r.operands[0][d] = r.results[0][0] = r.add(in[d]);
      continue;
    }
    r.operands[0][d] = r.add(in[d], FactorKind::Reduction, ReductionKind::Max);
  }
  return r;
}

// A constant is whole on every rank; a consumer that needs a shard of it
// slices it locally.
ShardingRule ConstantOp::getShardingRule() {
  return ShardingRule::allWhole(getOperation());
}

//===----------------------------------------------------------------------===//
// Ops along one axis
//===----------------------------------------------------------------------===//

/// The broadcast rule with `axis` of every operand and result kept whole.
static ShardingRule wholeAxis(Operation *op, int64_t axis) {
  ShardingRule r = kiln::detail::broadcastRule(op);
  for (auto &dims : llvm::concat<SmallVector<int>>(r.operands, r.results)) {
    int64_t a = axis < 0 ? axis + (int64_t)dims.size() : axis;
    if (a >= 0 && a < (int64_t)dims.size())
      dims[a] = -1;
  }
  return r;
}

ShardingRule SoftmaxOp::getShardingRule() {
  return wholeAxis(getOperation(), getAxis());
}
ShardingRule LogSoftmaxOp::getShardingRule() {
  return wholeAxis(getOperation(), getAxis());
}
ShardingRule SoftmaxGradOp::getShardingRule() {
  return wholeAxis(getOperation(), getAxis());
}
ShardingRule LogSoftmaxGradOp::getShardingRule() {
  return wholeAxis(getOperation(), getAxis());
}

ShardingRule ConcatOp::getShardingRule() {
  ShardingRule r = ShardingRule::allWhole(getOperation());
  ArrayRef<int64_t> out = dimsOf(getResult());
  for (int64_t d = 0; d < (int64_t)out.size(); ++d) {
    if (d == (int64_t)getAxis())
      continue;
    int f = r.add(out[d]);
    r.results[0][d] = f;
    for (auto &o : r.operands)
      o[d] = f;
  }
  return r;
}

/// Slice-like: dimension d of operand 0 and result 0 is one factor where
/// `untouched(d)`, else whole.
static ShardingRule untouchedDims(Operation *op,
                                  llvm::function_ref<bool(int64_t)> untouched) {
  ShardingRule r = ShardingRule::allWhole(op);
  ArrayRef<int64_t> in = dimsOf(op->getOperand(0));
  ArrayRef<int64_t> out = dimsOf(op->getResult(0));
  for (int64_t d = 0; d < (int64_t)std::min(in.size(), out.size()); ++d)
    if (untouched(d) && in[d] == out[d])
      r.operands[0][d] = r.results[0][d] = r.add(out[d]);
  return r;
}

ShardingRule SliceOp::getShardingRule() {
  ArrayRef<int64_t> in = dimsOf(getInput());
  return untouchedDims(getOperation(), [&](int64_t d) {
    return getStarts()[d] == 0 && getLimits()[d] == in[d] &&
           getStrides()[d] == 1;
  });
}
ShardingRule SliceGradOp::getShardingRule() {
  ArrayRef<int64_t> out = dimsOf(getResult());
  return untouchedDims(getOperation(), [&](int64_t d) {
    return getStarts()[d] == 0 && getLimits()[d] == out[d] &&
           getStrides()[d] == 1;
  });
}
/// A slice's limits over the dimensions it leaves whole, once the operand
/// `full` (the sliced tensor) holds this rank's block: a limit beyond the
/// block's size spelled the whole dimension.
static SmallVector<int64_t> localLimits(ArrayRef<int64_t> starts,
                                        ArrayRef<int64_t> limits,
                                        ArrayRef<int64_t> strides,
                                        ArrayRef<int64_t> full) {
  SmallVector<int64_t> out(limits);
  for (size_t d = 0; d < out.size() && d < full.size(); ++d)
    if (starts[d] == 0 && strides[d] == 1 && out[d] > full[d])
      out[d] = full[d];
  return out;
}
void SliceOp::localizeAttributes(ArrayRef<Attribute>, ArrayRef<Attribute>,
                                 TypeRange, TypeRange) {
  setLimits(localLimits(getStarts(), getLimits(), getStrides(),
                        dimsOf(getInput())));
}
void SliceGradOp::localizeAttributes(ArrayRef<Attribute>, ArrayRef<Attribute>,
                                     TypeRange, TypeRange) {
  setLimits(localLimits(getStarts(), getLimits(), getStrides(),
                        dimsOf(getResult())));
}
ShardingRule PadOp::getShardingRule() {
  return untouchedDims(getOperation(), [&](int64_t d) {
    return getLow()[d] == 0 && getHigh()[d] == 0;
  });
}
ShardingRule TransposeOp::getShardingRule() {
  ShardingRule r = ShardingRule::allWhole(getOperation());
  ArrayRef<int64_t> out = dimsOf(getResult());
  ArrayRef<int64_t> perm = getPerm();
  for (int64_t d = 0; d < (int64_t)out.size(); ++d)
    r.results[0][d] = r.operands[0][perm[d]] = r.add(out[d]);
  r.carriesReductions = true;
  return r;
}
ShardingRule ReshapeOp::getShardingRule() {
  ShardingRule r = ShardingRule::allWhole(getOperation());
  kiln::detail::reshapeRule(dimsOf(getInput()), dimsOf(getResult()), r);
  r.carriesReductions = true;
  return r;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// `axes` of the input reduce with `combine` (none: they stay whole);
/// `keepdims` keeps them as dimensions of 1.
static ShardingRule reduceRule(Operation *op, ArrayRef<int64_t> axes,
                               bool keepdims,
                               std::optional<ReductionKind> combine) {
  ShardingRule r = ShardingRule::allWhole(op);
  ArrayRef<int64_t> in = dimsOf(op->getOperand(0));
  int64_t rank = in.size();
  int64_t out = 0;
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = axes.empty() || llvm::is_contained(axes, d) ||
                   llvm::is_contained(axes, d - rank);
    if (!reduced) {
      r.operands[0][d] = r.results[0][out++] = r.add(in[d]);
      continue;
    }
    if (combine)
      r.operands[0][d] = r.add(in[d], FactorKind::Reduction, combine);
    if (keepdims)
      ++out;
  }
  return r;
}

ShardingRule ReduceSumOp::getShardingRule() {
  return reduceRule(getOperation(), getAxes(), getKeepdims(),
                    ReductionKind::Sum);
}
ShardingRule ReduceSumSquareOp::getShardingRule() {
  return reduceRule(getOperation(), getAxes(), getKeepdims(),
                    ReductionKind::Sum);
}
// The shards are equal in size, so the mean of their means is the mean.
ShardingRule ReduceMeanOp::getShardingRule() {
  return reduceRule(getOperation(), getAxes(), getKeepdims(),
                    ReductionKind::Average);
}
ShardingRule ReduceMaxOp::getShardingRule() {
  return reduceRule(getOperation(), getAxes(), getKeepdims(),
                    ReductionKind::Max);
}
ShardingRule ReduceMinOp::getShardingRule() {
  return reduceRule(getOperation(), getAxes(), getKeepdims(),
                    ReductionKind::Min);
}
ShardingRule ReduceProdOp::getShardingRule() {
  return reduceRule(getOperation(), getAxes(), getKeepdims(),
                    ReductionKind::Product);
}
// An index into the whole axis needs the whole axis.
ShardingRule ArgMaxOp::getShardingRule() {
  return reduceRule(getOperation(), {(int64_t)getAxis()}, getKeepdims(), std::nullopt);
}
ShardingRule ArgMinOp::getShardingRule() {
  return reduceRule(getOperation(), {(int64_t)getAxis()}, getKeepdims(), std::nullopt);
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

ShardingRule MatmulOp::getShardingRule() {
  ShardingRule r = ShardingRule::allWhole(getOperation());
  ArrayRef<int64_t> l = dimsOf(getLhs()), rt = dimsOf(getRhs()),
                    out = dimsOf(getResult());
  int64_t rank = out.size();
  // Batch dimensions broadcast as in NumPy.
  for (int64_t d = 0; d < rank - 2; ++d) {
    int f = r.add(out[d]);
    r.results[0][d] = f;
    for (auto [o, shape] : {std::pair{0, l}, std::pair{1, rt}}) {
      int64_t j = d - (rank - (int64_t)shape.size());
      if (j >= 0 && shape[j] == out[d])
        r.operands[o][j] = f;
    }
  }
  int64_t lr = l.size(), rr = rt.size();
  int m = r.add(out[rank - 2]), n = r.add(out[rank - 1]);
  int k = r.add(getTransposeLhs() ? l[lr - 2] : l[lr - 1],
                FactorKind::Reduction, ReductionKind::Sum);
  r.results[0][rank - 2] = m;
  r.results[0][rank - 1] = n;
  r.operands[0][lr - 2] = getTransposeLhs() ? k : m;
  r.operands[0][lr - 1] = getTransposeLhs() ? m : k;
  r.operands[1][rr - 2] = getTransposeRhs() ? n : k;
  r.operands[1][rr - 1] = getTransposeRhs() ? k : n;
  return r;
}

/// Convolution-shaped ops: the batch factor, and with one group the output
/// and input channel factors; windows stay whole.
struct ConvDims {
  int batch = -1, cout = -1, cin = -1;
};
static ConvDims convFactors(ShardingRule &r, int64_t batch, int64_t groups,
                            int64_t cout, int64_t cin,
                            FactorKind batchKind = FactorKind::Parallel) {
  ConvDims c;
  c.batch = r.add(batch, batchKind);
  if (groups == 1) {
    c.cout = r.add(cout);
    c.cin = r.add(cin);
  }
  return c;
}

ShardingRule ConvOp::getShardingRule() {
  ShardingRule r = ShardingRule::allWhole(getOperation());
  ArrayRef<int64_t> w = dimsOf(getWeight()), x = dimsOf(getInput());
  ConvDims c = convFactors(r, x[0], getGroups(), w[0], w[1]);
  r.operands[0][0] = r.results[0][0] = c.batch;
  if (c.cout >= 0) {
    r.factors[c.cin].kind = FactorKind::Reduction;
    r.operands[0][1] = r.operands[1][1] = c.cin;
    r.operands[1][0] = r.results[0][1] = c.cout;
  }
  return r;
}
ShardingRule ConvInputGradOp::getShardingRule() {
  // dy [N, Co, ...], weight [Co, Ci, ...] -> dx [N, Ci, ...]
  ShardingRule r = ShardingRule::allWhole(getOperation());
  ArrayRef<int64_t> w = dimsOf(getWeight()), dy = dimsOf(getDy());
  ConvDims c = convFactors(r, dy[0], getGroups(), w[0], w[1]);
  r.operands[0][0] = r.results[0][0] = c.batch;
  if (c.cout >= 0) {
    r.factors[c.cout].kind = FactorKind::Reduction;
    r.operands[0][1] = r.operands[1][0] = c.cout;
    r.operands[1][1] = r.results[0][1] = c.cin;
  }
  return r;
}
ShardingRule ConvWeightGradOp::getShardingRule() {
  // x [N, Ci, ...], dy [N, Co, ...] -> dw [Co, Ci, ...]
  ShardingRule r = ShardingRule::allWhole(getOperation());
  ArrayRef<int64_t> x = dimsOf(getInput()), dw = dimsOf(getResult());
  ConvDims c = convFactors(r, x[0], getGroups(), dw[0], dw[1],
                           FactorKind::Reduction);
  r.operands[0][0] = r.operands[1][0] = c.batch;
  if (c.cout >= 0) {
    r.operands[1][1] = r.results[0][0] = c.cout;
    r.operands[0][1] = r.results[0][1] = c.cin;
  }
  return r;
}
ShardingRule ConvTransposeOp::getShardingRule() {
  ShardingRule r = ShardingRule::allWhole(getOperation());
  r.operands[0][0] = r.results[0][0] = r.add(dimsOf(getInput())[0]);
  return r;
}

/// Pooling: batch and channel of operand(s) `ins` and the result; windows
/// whole.
static ShardingRule poolRule(Operation *op, ArrayRef<unsigned> ins) {
  ShardingRule r = ShardingRule::allWhole(op);
  ArrayRef<int64_t> out = dimsOf(op->getResult(0));
  for (int64_t d = 0; d < 2 && d < (int64_t)out.size(); ++d) {
    int f = r.add(out[d]);
    r.results[0][d] = f;
    for (unsigned i : ins)
      r.operands[i][d] = f;
  }
  return r;
}
ShardingRule MaxPoolOp::getShardingRule() {
  return poolRule(getOperation(), {0});
}
ShardingRule AvgPoolOp::getShardingRule() {
  return poolRule(getOperation(), {0});
}
ShardingRule MaxPoolGradOp::getShardingRule() {
  return poolRule(getOperation(), {0, 1});
}
ShardingRule AvgPoolGradOp::getShardingRule() {
  return poolRule(getOperation(), {0});
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

/// [N, C, spatial...] with per-channel operands `perChannel` and results
/// `perChannelResults` ([C]); the batch factor has `batchKind`.
static ShardingRule channelRule(Operation *op, FactorKind batchKind,
                                std::optional<ReductionKind> combine,
                                bool spatial) {
  ShardingRule r = ShardingRule::allWhole(op);
  ArrayRef<int64_t> x = dimsOf(op->getOperand(0));
  int n = r.add(x[0], batchKind, combine);
  int c = x.size() > 1 ? r.add(x[1]) : -1;
  SmallVector<int> sp;
  for (size_t d = 2; d < x.size(); ++d)
    sp.push_back(spatial ? r.add(x[d], batchKind, combine) : -1);
  auto mapValue = [&](Value v, SmallVector<int> &dims) {
    ArrayRef<int64_t> s = dimsOf(v);
    if (s == x) {
      dims[0] = n;
      if (c >= 0)
        dims[1] = c;
      for (size_t d = 2; d < s.size(); ++d)
        dims[d] = sp[d - 2];
    } else if (s.size() == 1 && c >= 0 && s[0] == x[1]) {
      dims[0] = c;
    }
  };
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    mapValue(v, r.operands[i]);
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    mapValue(v, r.results[i]);
  return r;
}

// Inference: elementwise per channel.
ShardingRule BatchNormOp::getShardingRule() {
  return channelRule(getOperation(), FactorKind::Parallel, ReductionKind::Sum,
                     /*spatial=*/true);
}
// Training: the statistics are over the batch (and spatial dimensions). A
// sharded batch gives per-rank statistics, as PyTorch DDP's BatchNorm: the
// new running statistics are per-rank values.
ShardingRule BatchNormTrainOp::getShardingRule() {
  return channelRule(getOperation(), FactorKind::PerShard, std::nullopt,
                     /*spatial=*/false);
}
// Its gradient under the same per-rank statistics; the scale and bias
// gradients are sums over the batch.
ShardingRule BatchNormTrainGradOp::getShardingRule() {
  return channelRule(getOperation(), FactorKind::PerShard, ReductionKind::Sum,
                     /*spatial=*/false);
}

/// LayerNorm-shaped: dimensions before `axis` are rows (one factor each),
/// the normalised ones are whole; results that lack the rows (the
/// gradients of scale and bias) are sums over them.
static ShardingRule rowsRule(Operation *op, int64_t axis) {
  ShardingRule r = ShardingRule::allWhole(op);
  ArrayRef<int64_t> x = dimsOf(op->getOperand(0));
  SmallVector<int> rows;
  for (int64_t d = 0; d < axis; ++d)
    rows.push_back(r.add(x[d]));
  auto mapValue = [&](Value v, SmallVector<int> &dims) {
    ArrayRef<int64_t> s = dimsOf(v);
    if (s.size() != x.size())
      return;
    for (int64_t d = 0; d < axis; ++d)
      if (s[d] == x[d])
        dims[d] = rows[d];
  };
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    mapValue(v, r.operands[i]);
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    mapValue(v, r.results[i]);
  return r;
}
ShardingRule LayerNormOp::getShardingRule() {
  return rowsRule(getOperation(), getAxis());
}
ShardingRule LayerNormGradOp::getShardingRule() {
  return rowsRule(getOperation(), getAxis());
}

//===----------------------------------------------------------------------===//
// Gathers
//===----------------------------------------------------------------------===//

// result = input[:axis] ++ indices ++ input[axis+1:]; the gathered axis is
// whole (any index may point anywhere).
// The gathered axis of the table may split (a vocab-parallel embedding):
// each rank looks up the rows it holds and zeroes the others, and the sum
// over the ranks is the whole lookup.
ShardingRule GatherOp::getShardingRule() {
  ShardingRule r = ShardingRule::allWhole(getOperation());
  ArrayRef<int64_t> in = dimsOf(getInput()), idx = dimsOf(getIndices());
  int64_t axis = getAxis(), out = 0;
  for (int64_t d = 0; d < (int64_t)in.size(); ++d) {
    if (d == axis) {
      r.operands[0][d] = r.add(in[d], FactorKind::Reduction, ReductionKind::Sum);
      for (size_t j = 0; j < idx.size(); ++j)
        r.operands[1][j] = r.results[0][out++] = r.add(idx[j]);
      continue;
    }
    r.operands[0][d] = r.results[0][out++] = r.add(in[d]);
  }
  return r;
}
// The scatter-add of dy's rows into the table: the index dimensions are
// summed over. The table's gathered axis may split: each rank adds the rows
// it holds.
ShardingRule GatherGradOp::getShardingRule() {
  ShardingRule r = ShardingRule::allWhole(getOperation());
  ArrayRef<int64_t> table = dimsOf(getResult()), idx = dimsOf(getIndices());
  int64_t axis = getAxis(), dy = 0;
  for (int64_t d = 0; d < (int64_t)table.size(); ++d) {
    if (d == axis) {
      r.results[0][d] = r.add(table[d]);
      for (size_t j = 0; j < idx.size(); ++j)
        r.operands[1][j] = r.operands[0][dy++] =
            r.add(idx[j], FactorKind::Reduction, ReductionKind::Sum);
      continue;
    }
    r.operands[0][dy++] = r.results[0][d] = r.add(table[d]);
  }
  return r;
}
/// A gather's (or its gradient's) table split on the gathered axis: the
/// axes splitting it and its whole size, for the kernel.
template <typename Op>
static void recordGatheredSplit(Op op, Attribute sharding, Type whole) {
  std::string n = axesOfDim(sharding, op.getAxis());
  auto t = dyn_cast_or_null<RankedTensorType>(whole);
  if (n.empty() || !t)
    return;
  Builder b(op.getContext());
  op.setSplitAttr(b.getStringAttr(n));
  op.setWholeSizeAttr(b.getI64IntegerAttr(t.getDimSize(op.getAxis())));
}
void GatherOp::localizeAttributes(ArrayRef<Attribute> operandShardings,
                                  ArrayRef<Attribute>, TypeRange wholeOperandTypes,
                                  TypeRange) {
  if (!operandShardings.empty() && !wholeOperandTypes.empty())
    recordGatheredSplit(*this, operandShardings[0], wholeOperandTypes[0]);
}
void GatherGradOp::localizeAttributes(ArrayRef<Attribute>,
                                      ArrayRef<Attribute> resultShardings,
                                      TypeRange, TypeRange wholeResultTypes) {
  if (!resultShardings.empty() && !wholeResultTypes.empty())
    recordGatheredSplit(*this, resultShardings[0], wholeResultTypes[0]);
}
/// gather_elements, its gradient and scatter_elements: the dimensions off
/// `axis` that the data (`in`) and the indices share are one parallel
/// factor each, on the listed operands and the result; the axis is whole
/// (an index may point anywhere along it).
static ShardingRule alongIndicesRule(Operation *op, ArrayRef<int64_t> in,
                                     ArrayRef<int64_t> idx, int64_t axis,
                                     ArrayRef<int> operands) {
  ShardingRule r = ShardingRule::allWhole(op);
  for (int64_t d = 0; d < (int64_t)idx.size(); ++d)
    if (d != axis && in[d] == idx[d]) {
      int f = r.add(idx[d]);
      for (int o : operands)
        r.operands[o][d] = f;
      r.results[0][d] = f;
    }
  return r;
}
ShardingRule GatherElementsOp::getShardingRule() {
  return alongIndicesRule(getOperation(), dimsOf(getInput()), dimsOf(getIndices()),
                          getAxis(), {0, 1});
}

ShardingRule GatherElementsGradOp::getShardingRule() {
  return alongIndicesRule(getOperation(), dimsOf(getResult()), dimsOf(getIndices()),
                          getAxis(), {0, 1});
}
ShardingRule ScatterElementsOp::getShardingRule() {
  return alongIndicesRule(getOperation(), dimsOf(getData()), dimsOf(getIndices()),
                          getAxis(), {0, 1, 2});
}
// An index may write anywhere in the data: every dimension whole.
ShardingRule ScatterNDOp::getShardingRule() {
  return ShardingRule::allWhole(getOperation());
}
// The selection needs the whole axis; the other dimensions are parallel.
ShardingRule TopKOp::getShardingRule() {
  ShardingRule r = ShardingRule::allWhole(getOperation());
  ArrayRef<int64_t> in = dimsOf(getInput());
  for (int64_t d = 0; d < (int64_t)in.size(); ++d)
    if (d != (int64_t)getAxis())
      r.operands[0][d] = r.results[0][d] = r.results[1][d] = r.add(in[d]);
  return r;
}
// A running sum needs the whole axis.
ShardingRule CumSumOp::getShardingRule() {
  ShardingRule r = ShardingRule::allWhole(getOperation());
  ArrayRef<int64_t> in = dimsOf(getInput());
  for (int64_t d = 0; d < (int64_t)in.size(); ++d)
    if (d != (int64_t)getAxis())
      r.operands[0][d] = r.results[0][d] = r.add(in[d]);
  return r;
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// Classification losses over logits [N, C, d...] (class at `classAxis`)
/// and labels [N, d...]. Their sample dimensions are one factor each,
/// combined as the reduction says ("mean": the average of equal shards'
/// means; "sum"; "none": parallel). A weighted or ignore_index mean divides
/// by a count the shards do not share, so those samples stay whole.
static ShardingRule classLossRule(Operation *op, Value logits, Value labels,
                                  StringRef reduction, bool weighted,
                                  bool ignoreIndex, int64_t classAxis,
                                  bool isGrad) {
  ShardingRule r = ShardingRule::allWhole(op);
  if (reduction == "mean" && (weighted || ignoreIndex))
    return r;
  ArrayRef<int64_t> lab = dimsOf(labels);
  FactorKind kind = reduction == "none" ? FactorKind::Parallel
                    : isGrad            ? FactorKind::Parallel
                                        : FactorKind::Reduction;
  std::optional<ReductionKind> combine =
      reduction == "mean" ? ReductionKind::Average : ReductionKind::Sum;
  SmallVector<int> samples;
  for (int64_t s : lab) {
    int f = r.add(s, kind, combine);
    r.factors[f].dividesBySize = isGrad && reduction == "mean";
    samples.push_back(f);
  }
  auto mapSamples = [&](Value v, SmallVector<int> &dims, bool hasClass) {
    if (!v)
      return;
    ArrayRef<int64_t> s = dimsOf(v);
    if (s.size() != lab.size() + (hasClass ? 1 : 0))
      return;
    for (size_t j = 0, d = 0; d < s.size(); ++d) {
      if (hasClass && (int64_t)d == classAxis)
        continue;
      dims[d] = samples[j++];
    }
  };
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    if (v == labels)
      mapSamples(v, r.operands[i], false);
    else if (v == logits)
      mapSamples(v, r.operands[i], true);
    else if (reduction == "none" && dimsOf(v) == lab)
      mapSamples(v, r.operands[i], false); // dloss of "none"
  }
  if (isGrad)
    mapSamples(op->getResult(0), r.results[0], true);
  else if (reduction == "none")
    mapSamples(op->getResult(0), r.results[0], false);
  return r;
}

ShardingRule SoftmaxCrossEntropyOp::getShardingRule() {
  return classLossRule(getOperation(), getLogits(), getLabels(),
                       getReduction(), bool(getWeight()),
                       getIgnoreIndex().has_value(), getClassAxis(), false);
}
ShardingRule NllLossOp::getShardingRule() {
  return classLossRule(getOperation(), getLogits(), getLabels(),
                       getReduction(), bool(getWeight()),
                       getIgnoreIndex().has_value(), getClassAxis(), false);
}
ShardingRule SoftmaxCrossEntropyGradOp::getShardingRule() {
  return classLossRule(getOperation(), getLogits(), getLabels(),
                       getReduction(), bool(getWeight()),
                       getIgnoreIndex().has_value(), getClassAxis(), true);
}
ShardingRule NllLossGradOp::getShardingRule() {
  return classLossRule(getOperation(), Value(), getLabels(), getReduction(),
                       bool(getWeight()), getIgnoreIndex().has_value(),
                       getClassAxis(), true);
}
ShardingRule MseLossOp::getShardingRule() {
  ShardingRule r = kiln::detail::broadcastRule(getOperation());
  if (getReduction() == "none")
    return r;
  // Every element is summed (or averaged): the input's dimensions are
  // reductions, the scalar result has none.
  ArrayRef<int64_t> in = dimsOf(getInput());
  ShardingRule red = ShardingRule::allWhole(getOperation());
  std::optional<ReductionKind> combine = getReduction() == "mean"
                                             ? ReductionKind::Average
                                             : ReductionKind::Sum;
  for (size_t d = 0; d < in.size(); ++d) {
    int f = red.add(in[d], FactorKind::Reduction, combine);
    red.operands[0][d] = f;
    if (dimsOf(getTarget()) == in)
      red.operands[1][d] = f;
  }
  return red;
}
