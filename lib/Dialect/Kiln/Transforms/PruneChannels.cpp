//===- PruneChannels.cpp - --kiln-prune-channels ----------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Structured L1 channel pruning (docs/Compression.md): removes the output
// channels of convolutions and the output features of Linears with the
// smallest L1 norm, and shrinks every tensor those channels run through.
//
// The channels are found through the ops' sharding rules (ShardingRule.h),
// not by names: every dimension of every value is a slot; an op's rule ties
// the slots that are one factor (a conv's output channels and its weight's
// dimension 0; a BatchNorm's channels and its [C] parameters; an add's
// operands and result, which ties a residual's branches; a reshape's outer
// dimension of a group, which ties a flattened feature axis to the channels
// it is made of, each channel a block of the inner size). A class of tied
// slots is pruned when it holds the output dimension of some trained
// weight (its producers) and nothing needs it whole: no model input or
// output, no dimension an op keeps whole (a softmax axis, a concat axis, a
// constant). A concat along the channels makes its result's class the
// parts' side by side: each part pruned as its own class, the result (and
// what reads it: the next conv's input channels) keeps the parts' kept
// channels at their offsets. Each class keeps the round((1 - ratio) * C) channels (at least
// one) of largest summed L1 norm over its producers' slices; every slot of
// the class shrinks to them, and the parameters' values are sliced alike.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"
#include "kiln/Dialect/Kiln/IR/ShardingRule.h"
#include "kiln/runtime/SliceTensor.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseMap.h"

#include <cmath>
#include <numeric>

namespace kiln {
#define GEN_PASS_DEF_KILNPRUNECHANNELSPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using kiln::argName;

namespace {

struct PruneChannelsPass
    : public kiln::impl::KilnPruneChannelsPassBase<PruneChannelsPass> {
  using Base::Base;
  PruneChannelsPass(const kiln::KilnPruneChannelsPassOptions &o,
                    kiln::ChannelPruning *io)
      : Base(o), io(io) {}

  kiln::ChannelPruning *io = nullptr;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kForwardFuncName);
    if (!f || f.isExternal()) {
      m.emitError("--kiln-prune-channels: the module has no @forward");
      return signalPassFailure();
    }
    if (failed(prune(f)))
      signalPassFailure();
  }

  LogicalResult prune(func::FuncOp f);
};

LogicalResult PruneChannelsPass::prune(func::FuncOp f) {
  if (!(ratio >= 0.0 && ratio < 1.0))
    return f.emitError("--kiln-prune-channels: ratio must be in [0, 1), got ")
           << (double)ratio;
  bool byL1 = importance == "l1";
  if (!byL1 && importance != "index")
    return f.emitError("--kiln-prune-channels: importance must be l1 or index, got '")
           << importance << "'";
  if (byL1 && at == 0 && (!io || !io->params))
    return f.emitError("--kiln-prune-channels: importance=l1 needs the "
                       "parameters' values (kiln-compile --prune l1-channel=R "
                       "passes them); importance=index keeps the first channels");

  // The classes masks can prune (at step S, and the smaller plan a run
  // switches to after it).
  const bool asMasks = at > 0 || maskable;

  // Slots and their classes (union-find).
  llvm::DenseMap<std::pair<Value, unsigned>, int> slotOf;
  SmallVector<std::pair<Value, unsigned>> slots;
  SmallVector<int> parent;
  SmallVector<bool> blocked;
  auto slot = [&](Value v, unsigned d) {
    auto [it, fresh] = slotOf.try_emplace({v, d}, (int)slots.size());
    if (fresh) {
      slots.push_back({v, d});
      parent.push_back((int)parent.size());
      blocked.push_back(false);
    }
    return it->second;
  };
  std::function<int(int)> find = [&](int s) {
    while (parent[s] != s)
      s = parent[s] = parent[parent[s]];
    return s;
  };
  auto unite = [&](int a, int b) { parent[find(a)] = find(b); };
  auto dims = [](Value v) -> ArrayRef<int64_t> {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t ? t.getShape() : ArrayRef<int64_t>();
  };
  auto blockAll = [&](Value v) {
    for (unsigned d = 0; d < dims(v).size(); ++d)
      blocked[slot(v, d)] = true;
  };

  struct Concat {
    int result;
    SmallVector<int> parts; // operand slots, in order
  };
  SmallVector<Concat> concats;

  Block &body = f.getBody().front();
  for (BlockArgument a : body.getArguments()) {
    for (unsigned d = 0; d < dims(a).size(); ++d)
      slot(a, d);
    if (!kiln::isParam(f, a.getArgNumber()))
      blockAll(a); // data inputs and labels keep their shapes
  }
  for (Operation &op : body) {
    if (isa<func::ReturnOp>(op)) {
      for (Value v : op.getOperands())
        blockAll(v); // model outputs keep their shapes
      continue;
    }
    auto iface = dyn_cast<kiln::ShardingRuleOpInterface>(op);
    if (!iface || op.getNumRegions()) {
      for (Value v : op.getOperands())
        blockAll(v);
      for (Value v : op.getResults())
        blockAll(v);
      continue;
    }
    kiln::ShardingRule rule = iface.getShardingRule();
    SmallVector<int> first(rule.factors.size(), -1);
    // A concat's axis: the result's channels are its operands' side by
    // side (a composite class, pruned as its parts are).
    int concatAxis = -1;
    if (auto c = dyn_cast<kiln::ConcatOp>(op)) {
      concatAxis = (int)c.getAxis();
      Concat cc{slot(c.getResult(), concatAxis), {}};
      for (Value v : c.getOperands())
        cc.parts.push_back(slot(v, concatAxis));
      concats.push_back(cc);
    }
    bool contracts = isa<kiln::MatmulOp, kiln::ConvOp>(op);
    auto visit = [&](Value v, ArrayRef<int> fs) {
      for (unsigned d = 0; d < dims(v).size() && d < fs.size(); ++d) {
        int s = slot(v, d);
        if ((int)d == concatAxis)
          continue;
        // A masked channel's values are not zero everywhere (a sigmoid of
        // 0); where an op sums over channels, only a masked weight (a
        // matmul's, a conv's) makes them not count.
        if (asMasks && fs[d] >= 0 && !contracts &&
            rule.factors[fs[d]].kind == kiln::FactorKind::Reduction)
          blocked[s] = true;
        if (fs[d] < 0) {
          if (dims(v)[d] != 1)
            blocked[s] = true;
          continue;
        }
        if (first[fs[d]] < 0)
          first[fs[d]] = s;
        else
          unite(first[fs[d]], s);
      }
    };
    for (auto [i, v] : llvm::enumerate(op.getOperands()))
      if (i < rule.operands.size())
        visit(v, rule.operands[i]);
    for (auto [i, v] : llvm::enumerate(op.getResults()))
      if (i < rule.results.size())
        visit(v, rule.results[i]);
  }

  // The producers: a trained weight's output dimension.
  auto paramOf = [&](Value w) -> std::optional<unsigned> {
    if (auto s = w.getDefiningOp<kiln::SliceOp>())
      w = s.getInput();
    auto a = dyn_cast<BlockArgument>(w);
    if (!a || a.getOwner() != &body || !kiln::isParam(f, a.getArgNumber()))
      return std::nullopt;
    return a.getArgNumber();
  };
  llvm::DenseMap<int, SmallVector<std::pair<unsigned, unsigned>>> producers; // class -> (arg, dim)
  for (Operation &op : body) {
    if (auto c = dyn_cast<kiln::ConvOp>(op)) {
      if (auto p = paramOf(c.getWeight()))
        producers[find(slot(f.getArgument(*p), 0))].push_back({*p, 0});
    } else if (auto mm = dyn_cast<kiln::MatmulOp>(op)) {
      int64_t r = dims(mm.getRhs()).size(), l = dims(mm.getLhs()).size();
      if (auto p = paramOf(mm.getRhs())) {
        unsigned d = mm.getTransposeRhs() ? r - 2 : r - 1;
        producers[find(slot(f.getArgument(*p), d))].push_back({*p, d});
      } else if (auto p = paramOf(mm.getLhs())) {
        unsigned d = mm.getTransposeLhs() ? l - 1 : l - 2;
        producers[find(slot(f.getArgument(*p), d))].push_back({*p, d});
      }
    }
  }

  // Each class: its slots, its channel count and whether it can be pruned.
  llvm::DenseMap<int, SmallVector<int>> members;
  for (int s = 0; s < (int)slots.size(); ++s)
    members[find(s)].push_back(s);
  struct Pruned {
    int64_t channels = 0;
    std::vector<int64_t> kept; // channel indices, ascending
  };
  llvm::DenseMap<int, Pruned> plan;
  // A class is whole when any of its slots is; a concat's result class and
  // its parts: a whole result (or one that is itself a part or has
  // producers) keeps every part whole, and a whole part keeps the others.
  llvm::DenseMap<int, bool> whole;
  for (auto &[root, ms] : members)
    for (int s : ms)
      whole[root] = whole[root] || blocked[s];
  llvm::DenseMap<int, int> partOf; // part class -> concat result class
  for (const Concat &c : concats) {
    int r = find(c.result);
    bool bad = whole[r] || producers.count(r) || partOf.count(r);
    for (int p : c.parts) {
      int q = find(p);
      bad |= q == r || partOf.count(q) ||
             llvm::any_of(concats, [&](const Concat &o) { return find(o.result) == q; });
    }
    if (bad) {
      whole[r] = true;
      for (int p : c.parts)
        whole[find(p)] = true;
    } else {
      for (int p : c.parts)
        partOf[find(p)] = r;
    }
  }
  auto channelCount = [&](int root, int64_t &c) {
    c = INT64_MAX;
    for (int s : members[root])
      c = std::min(c, dims(slots[s].first)[slots[s].second]);
    bool ok = c > 0;
    for (int s : members[root])
      ok &= ok && dims(slots[s].first)[slots[s].second] % c == 0;
    return ok;
  };
  for (auto &[root, ms] : members) {
    auto pr = producers.find(root);
    if (pr == producers.end())
      continue;
    int64_t c = 0;
    bool ok = !whole[root] && channelCount(root, c);
    if (!ok || c < 2)
      continue;
    int64_t removed = (int64_t)std::llround(ratio * (double)c);
    int64_t keep = c - removed;
    if (keep < 1) {
      std::string w = "--prune l1-channel=" + std::to_string(ratio).substr(0, 4) +
                      " would remove all " + std::to_string(c) + " channels of '" +
                      argName(f, pr->second.front().first) + "'; keeping one";
      if (io)
        io->warnings.push_back(w);
      else
        f.emitWarning(w);
      keep = 1;
    }
    if (keep == c)
      continue;
    std::vector<double> score((size_t)c, 0.0);
    if (byL1 && at == 0) {
      for (auto [arg, d] : pr->second) {
        std::string name = argName(f, arg);
        auto it = io->params->find(name);
        auto t = cast<RankedTensorType>(f.getArgument(arg).getType());
        if (it == io->params->end() || !t.getElementType().isF32())
          return f.emitError("--kiln-prune-channels: no float32 value for '") << name << "'";
        const float *w = reinterpret_cast<const float *>(it->second.data());
        ArrayRef<int64_t> s = t.getShape();
        if ((int64_t)it->second.size() != t.getNumElements() * 4)
          return f.emitError("--kiln-prune-channels: the value of '") << name
                 << "' has the wrong size";
        int64_t block = s[d] / c, inner = 1, outer = 1;
        for (size_t i = d + 1; i < s.size(); ++i)
          inner *= s[i];
        for (size_t i = 0; i < d; ++i)
          outer *= s[i];
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t j = 0; j < s[d]; ++j)
            for (int64_t i = 0; i < inner; ++i)
              score[(size_t)(j / block)] += std::fabs(w[(o * s[d] + j) * inner + i]);
      }
    }
    std::vector<int64_t> order((size_t)c);
    std::iota(order.begin(), order.end(), 0);
    if (byL1)
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return score[a] > score[b]; });
    order.resize((size_t)keep);
    std::sort(order.begin(), order.end());
    plan[root] = {c, order};
  }
  // A concat's result keeps its parts' kept channels, each at its offset.
  for (const Concat &c : concats) {
    int r = find(c.result);
    if (whole[r])
      continue;
    bool any = false;
    std::vector<int64_t> kept;
    int64_t offset = 0, total = 0;
    bool ok = channelCount(r, total);
    for (int p : c.parts) {
      int q = find(p);
      int64_t n = dims(slots[p].first)[slots[p].second];
      auto it = plan.find(q);
      if (it != plan.end()) {
        any = true;
        ok &= it->second.channels == n;
        for (int64_t k : it->second.kept)
          kept.push_back(offset + k);
      } else {
        for (int64_t k = 0; k < n; ++k)
          kept.push_back(offset + k);
      }
      offset += n;
    }
    if (!any)
      continue;
    if (!ok || offset != total) {
      // Blocks of another size along the axis: leave the parts whole.
      for (int p : c.parts)
        plan.erase(find(p));
      continue;
    }
    plan[r] = {total, kept};
  }
  if (plan.empty())
    return success();

  if (at > 0) {
    // Record the classes for --kiln-mask-channels; shapes stay.
    MLIRContext *ctx = f.getContext();
    Builder b(ctx);
    SmallVector<Attribute> classes;
    // What every class records: its channels, how many it keeps, the step,
    // and its members (the parameters with a dimension of these channels).
    auto classAttrs = [&](int root, const Pruned &p) {
      SmallVector<Attribute> params;
      SmallVector<int64_t> axes, blocks;
      for (int s : members[root]) {
        auto a = dyn_cast<BlockArgument>(slots[s].first);
        if (!a || a.getOwner() != &body || !kiln::isParam(f, a.getArgNumber()))
          continue;
        params.push_back(b.getStringAttr(argName(f, a.getArgNumber())));
        axes.push_back(slots[s].second);
        blocks.push_back(dims(a)[slots[s].second] / p.channels);
      }
      NamedAttrList d;
      d.set("channels", b.getI64IntegerAttr(p.channels));
      d.set("keep", b.getI64IntegerAttr((int64_t)p.kept.size()));
      d.set("at", b.getI64IntegerAttr(at));
      d.set("params", b.getArrayAttr(params));
      d.set("axes", b.getDenseI64ArrayAttr(axes));
      d.set("blocks", b.getDenseI64ArrayAttr(blocks));
      return d;
    };
    llvm::DenseMap<int, int64_t> indexOf; // class root -> its entry
    for (auto &[root, p] : plan) {
      auto pr = producers.find(root);
      if (pr == producers.end())
        continue;
      indexOf[root] = (int64_t)classes.size();
      SmallVector<Attribute> prodNames;
      SmallVector<int64_t> prodAxes, prodBlocks;
      for (auto [arg, d] : pr->second) {
        prodNames.push_back(b.getStringAttr(argName(f, arg)));
        prodAxes.push_back(d);
        prodBlocks.push_back(dims(f.getArgument(arg))[d] / p.channels);
      }
      NamedAttrList d = classAttrs(root, p);
      d.set("producers", b.getArrayAttr(prodNames));
      d.set("producer_axes", b.getDenseI64ArrayAttr(prodAxes));
      d.set("producer_blocks", b.getDenseI64ArrayAttr(prodBlocks));
      classes.push_back(d.getDictionary(ctx));
      if (io)
        io->layers.push_back({argName(f, pr->second.front().first), p.channels,
                              (int64_t)p.kept.size()});
    }
    // A concat's result: its parts side by side (the entries of the parts
    // that are pruned, -1 for a whole one, and each part's channels).
    for (const Concat &c : concats) {
      int r = find(c.result);
      auto it = plan.find(r);
      if (it == plan.end() || producers.count(r))
        continue;
      SmallVector<int64_t> parts, partChannels;
      for (int q : c.parts) {
        auto ix = indexOf.find(find(q));
        parts.push_back(ix == indexOf.end() ? -1 : ix->second);
        partChannels.push_back(dims(slots[q].first)[slots[q].second]);
      }
      NamedAttrList d = classAttrs(r, it->second);
      d.set("parts", b.getDenseI64ArrayAttr(parts));
      d.set("part_channels", b.getDenseI64ArrayAttr(partChannels));
      classes.push_back(d.getDictionary(ctx));
    }
    if (io)
      llvm::sort(io->layers, [](const auto &x, const auto &y) { return x.weight < y.weight; });
    f->getParentOfType<ModuleOp>()->setAttr("kiln.channel_classes",
                                            b.getArrayAttr(classes));
    return success();
  }

  // Shrink every slot of a pruned class; slice the parameters.
  auto keptFor = [&](int s) -> std::optional<std::vector<int64_t>> {
    auto it = plan.find(find(s));
    if (it == plan.end())
      return std::nullopt;
    int64_t size = dims(slots[s].first)[slots[s].second];
    int64_t block = size / it->second.channels;
    std::vector<int64_t> idx;
    for (int64_t ch : it->second.kept)
      for (int64_t b = 0; b < block; ++b)
        idx.push_back(ch * block + b);
    return idx;
  };
  auto retype = [&](Value v, kiln::KeptIndices *kept) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t)
      return;
    SmallVector<int64_t> shape(t.getShape());
    bool changed = false;
    for (unsigned d = 0; d < shape.size(); ++d) {
      auto it = slotOf.find({v, d});
      if (it == slotOf.end())
        continue;
      if (auto idx = keptFor(it->second)) {
        shape[d] = (int64_t)idx->size();
        if (kept)
          (*kept)[d] = *idx;
        changed = true;
      }
    }
    if (changed)
      v.setType(RankedTensorType::get(shape, t.getElementType()));
  };
  int64_t before = 0, after = 0;
  for (BlockArgument a : body.getArguments()) {
    if (!kiln::isParam(f, a.getArgNumber()))
      continue;
    auto t = cast<RankedTensorType>(a.getType());
    before += t.getNumElements();
    kiln::KeptIndices kept;
    retype(a, &kept);
    after += cast<RankedTensorType>(a.getType()).getNumElements();
    if (kept.empty())
      continue;
    std::string name = argName(f, a.getArgNumber());
    if (io) {
      io->kept[name] = kept;
      if (io->params) {
        auto it = io->params->find(name);
        if (it != io->params->end()) {
          size_t elt = (t.getElementTypeBitWidth() + 7) / 8;
          std::vector<int64_t> shape(t.getShape().begin(), t.getShape().end());
          std::string sliced = kiln::sliceTensorBytes(it->second, shape, elt, kept);
          if (sliced.empty())
            return f.emitError("--kiln-prune-channels: the value of '") << name
                   << "' does not match its type";
          it->second = std::move(sliced);
        }
      }
    }
  }
  for (Operation &op : body)
    for (Value r : op.getResults())
      retype(r, nullptr);
  for (Operation &op : body)
    if (auto iface = dyn_cast<kiln::ShardingRuleOpInterface>(op))
      iface.localizeAttributes({}, {}, {}, {});
  f.setType(FunctionType::get(f.getContext(), body.getArgumentTypes(),
                              f.getResultTypes()));
  if (io) {
    io->paramsBefore = before;
    io->paramsAfter = after;
    for (auto &[root, p] : plan) {
      auto pr = producers.find(root);
      if (pr == producers.end())
        continue; // a concat's result: its parts are reported
      io->layers.push_back({argName(f, pr->second.front().first), p.channels,
                            (int64_t)p.kept.size()});
    }
    llvm::sort(io->layers, [](const auto &a, const auto &b) { return a.weight < b.weight; });
  }
  if (failed(verify(f)))
    return f.emitError("--kiln-prune-channels: internal error: the pruned "
                       "function does not verify");
  return success();
}

} // namespace

std::unique_ptr<Pass>
kiln::createKilnPruneChannelsPass(const KilnPruneChannelsPassOptions &options,
                                  ChannelPruning *io) {
  return std::make_unique<PruneChannelsPass>(options, io);
}
