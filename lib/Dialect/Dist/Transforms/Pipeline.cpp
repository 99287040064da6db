//===- Pipeline.cpp - --kiln-pipeline ---------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Splits @train_step into one program per pipeline rank (Passes.td has the
// contract). Every op gets a place (a stage, a microbatch, forward or
// backward) from its tags or, when a later pass built it, from the values
// it reads; a value read on another rank becomes a dist.send / dist.recv
// pair; each program is then ordered by its rank's instruction list from
// kiln/runtime/PipelineSchedule.h. The pass knows no op by name.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Dist/Transforms/Passes.h"

#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "kiln/runtime/PipelineSchedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <set>

namespace kiln::dist {
#define GEN_PASS_DEF_KILNPIPELINEPASS
#include "kiln/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace kiln::dist

using namespace mlir;
using kiln::KilnDialect;
using namespace kiln::dist;
namespace rt = kiln::rt;

namespace {

/// The mesh axis of the pipeline's point to point.
constexpr llvm::StringLiteral kPipelineAxis = "pp";

/// Where an op runs and in which part of the step.
struct Place {
  /// The model stage; -1: anywhere (reads only constants and per-step
  /// scalars: copied to each rank that uses it).
  int64_t stage = -1;
  /// -1: not one microbatch's (shared before them, or after them: the
  /// accumulated gradients' reduction and the optimizer).
  int64_t microbatch = -1;
  bool backward = false;
  /// Reads (directly or not) values of some microbatch, without being one
  /// microbatch's: runs after every microbatch.
  bool after = false;
};

/// The elements of a tensor value (1 for a scalar or a non-tensor).
int64_t elementsOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() ? std::max<int64_t>(1, t.getNumElements()) : 1;
}

std::string describe(Operation *op) {
  std::string s = "'" + op->getName().getStringRef().str() + "'";
  if (auto n = dyn_cast<NameLoc>(op->getLoc()))
    s += " (node '" + n.getName().getValue().str() + "')";
  return s;
}

struct PipelinePass : public kiln::dist::impl::KilnPipelinePassBase<PipelinePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    rt::PipelineScheduleKind kind;
    if (!rt::parsePipelineSchedule(schedule, kind)) {
      m.emitError("--kiln-pipeline: unknown schedule '")
          << schedule << "' (gpipe, 1f1b, interleaved or zb)";
      return signalPassFailure();
    }
    std::string err;
    if (!rt::buildPipelineSchedule(kind, (int)stages, (int)microbatches,
                                   (int)virtualStages, plan, err)) {
      m.emitError("--kiln-pipeline: ") << err;
      return signalPassFailure();
    }
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kTrainStepFuncName);
    if (!f || f.isExternal()) {
      m.emitError("--kiln-pipeline: the module has no @train_step");
      return signalPassFailure();
    }
    if (failed(split(m, f)))
      signalPassFailure();
  }

  LogicalResult place(func::FuncOp f);
  LogicalResult split(ModuleOp m, func::FuncOp f);
  LogicalResult order(func::FuncOp g, int64_t rank,
                      const llvm::DenseMap<Operation *, Place> &places);
  LogicalResult checkDeadlockFree(ArrayRef<func::FuncOp> programs);

  rt::PipelineSchedule plan;
  llvm::DenseMap<Operation *, Place> places;
  llvm::DenseMap<Value, int64_t> argStage; // parameters: their stage
  /// Parameters several stages read (tied weights): those stages. The
  /// parameter's stage is the last; the others receive its update.
  llvm::DenseMap<Value, std::set<int64_t>> tiedStages;
  int64_t rankOf(int64_t stage) const { return stage < 0 ? -1 : stage % stages; }
};

/// Each op's place: its tags, else the values it reads.
LogicalResult PipelinePass::place(func::FuncOp f) {
  Block &body = f.getBody().front();
  const int64_t modelStages = stages * virtualStages;
  // The parameters' stages: the tagged ops that read them, directly or
  // through untagged ops a later pass put between (tensor parallelism's
  // slice of a whole parameter to its block).
  for (BlockArgument a : f.getArguments()) {
    if (!kiln::isParam(f, a.getArgNumber()))
      continue;
    std::optional<int64_t> s;
    SmallVector<Operation *> work(a.getUsers().begin(), a.getUsers().end());
    llvm::DenseSet<Operation *> seen;
    while (!work.empty()) {
      Operation *u = work.pop_back_val();
      if (!seen.insert(u).second)
        continue;
      auto t = u->getAttrOfType<IntegerAttr>(KilnDialect::getStageAttrName());
      if (!t) {
        // Only ops that transform the parameter itself (one operand).
        if (u->getNumOperands() == 1 && !isa<func::ReturnOp>(u))
          for (Value r : u->getResults())
            work.append(r.getUsers().begin(), r.getUsers().end());
        continue;
      }
      // Tied weights (read by several stages): each of them holds the
      // parameter, the last updates it (the partial gradients summed
      // there) and sends the new value to the others.
      if (s && *s != t.getInt()) {
        tiedStages[a].insert(*s);
        tiedStages[a].insert(t.getInt());
      }
      s = s ? std::max(*s, t.getInt()) : t.getInt();
    }
    if (s)
      argStage[a] = *s;
  }
  const bool microbatched = microbatches > 1;
  for (Operation &op : body.without_terminator()) {
    Place p;
    auto stage = op.getAttrOfType<IntegerAttr>(KilnDialect::getStageAttrName());
    auto mb = op.getAttrOfType<IntegerAttr>(KilnDialect::getMicrobatchAttrName());
    p.backward = op.hasAttr(KilnDialect::getBackwardAttrName());
    std::set<int64_t> stagesRead, microbatchesRead;
    std::map<int64_t, int64_t> elementsRead; // stage -> elements it gives
    bool readsAfter = false, readsBackward = false;
    BlockArgument unplacedArg;
    for (Value v : op.getOperands()) {
      if (auto a = dyn_cast<BlockArgument>(v)) {
        // A parameter the model reads: its stage's. One it does not (an
        // optimizer's state): it goes where its reader does.
        if (auto it = argStage.find(a); it != argStage.end()) {
          stagesRead.insert(it->second);
          elementsRead[it->second] += elementsOf(v);
        }
        else if (kiln::isParam(f, a.getArgNumber()) && !unplacedArg)
          unplacedArg = a;
        continue;
      }
      const Place &q = places[v.getDefiningOp()];
      if (q.stage >= 0) {
        stagesRead.insert(q.stage);
        elementsRead[q.stage] += elementsOf(v);
      }
      if (q.microbatch >= 0)
        microbatchesRead.insert(q.microbatch);
      readsAfter |= q.after;
      readsBackward |= q.backward;
    }
    if (stage) {
      p.stage = stage.getInt();
    } else if (stagesRead.size() == 1) {
      p.stage = *stagesRead.begin();
    } else if (stagesRead.size() > 1) {
      // Values of several stages (the gradients' global norm, a gradient
      // scaled by the clipping coefficient, an update that reads it): on
      // the stage that gives the most elements, the others' sent to it (a
      // parameter's update stays with the parameter; the scalar sums of
      // the norm, a tie, move to the later stage, in the 1-rank order).
      int64_t best = -1, most = -1;
      for (auto [st, n] : elementsRead)
        if (n >= most) {
          best = st;
          most = n;
        }
      p.stage = best;
    } else if (unplacedArg) {
      return op.emitOpError("reads parameter '")
             << f.getArgAttrOfType<StringAttr>(unplacedArg.getArgNumber(), "onnx.name")
             << "' and no pipeline stage's value: --kiln-pipeline cannot place "
             << describe(&op);
    } else if (!isMemoryEffectFree(&op)) {
      return op.emitOpError("has side effects but reads no pipeline stage's "
                            "value: --kiln-pipeline cannot place it");
    }
    if (p.stage >= modelStages)
      return op.emitOpError("is tagged pipeline stage ")
             << p.stage << ", beyond the " << modelStages << " stages";
    if (!stage)
      p.backward = readsBackward;
    if (mb) {
      p.microbatch = mb.getInt();
    } else if (!microbatched && p.stage >= 0 && !readsAfter) {
      p.microbatch = 0; // one microbatch: the step's forward and backward
    } else if (microbatchesRead.size() == 1 && !readsAfter && !stage) {
      p.microbatch = *microbatchesRead.begin();
    } else if (!microbatchesRead.empty() || readsAfter) {
      p.after = true;
    }
    // A tagged op of no microbatch (a function of the weights alone) that
    // reads accumulated values runs after them.
    if (p.microbatch < 0 && readsAfter)
      p.after = true;
    if (p.microbatch >= microbatches)
      return op.emitOpError("is tagged microbatch ")
             << p.microbatch << " of " << (int64_t)microbatches;
    places[&op] = p;
  }
  return success();
}

LogicalResult PipelinePass::split(ModuleOp m, func::FuncOp f) {
  if (!f.getBody().hasOneBlock())
    return f.emitOpError("must have one block");
  if (failed(place(f)))
    return failure();
  Block &body = f.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  const int64_t S = stages;

  // The loss, which every rank returns (the last stage computes it).
  std::optional<unsigned> lossResult;
  for (unsigned r = 0; r < f.getNumResults(); ++r)
    if (kiln::isLoss(f, r))
      lossResult = r;
  if (!lossResult)
    return f.emitOpError("has no loss result");
  Value loss = ret.getOperand(*lossResult);
  Operation *lossOp = loss.getDefiningOp();
  if (!lossOp || rankOf(places[lossOp].stage) < 0)
    return f.emitOpError("computes its loss on no pipeline stage");

  // The step's scalar results that are no parameter's update (the loss,
  // grad_norm): every rank returns them, so that each sees the step's
  // metrics (and a loss scale's finite check) alike.
  llvm::DenseSet<Value> returnedToAll;
  for (unsigned r = 0; r < f.getNumResults(); ++r) {
    Value v = ret.getOperand(r);
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (v.getDefiningOp() && t && t.getRank() == 0 &&
        !f.getResultAttr(r, KilnDialect::getUpdateAttrName()))
      returnedToAll.insert(v);
  }

  // A tied parameter's update: returned by every rank of its stages too.
  llvm::DenseMap<Value, std::set<int64_t>> updateTo;
  for (unsigned r = 0; r < f.getNumResults(); ++r)
    if (auto u = f.getResultAttrOfType<IntegerAttr>(r, KilnDialect::getUpdateAttrName()))
      if (u.getInt() >= 0 && u.getInt() < (int64_t)f.getNumArguments())
        if (auto it = tiedStages.find(f.getArgument(u.getInt())); it != tiedStages.end())
          for (int64_t st : it->second)
            updateTo[ret.getOperand(r)].insert(rankOf(st));

  // The transfers: (value, from rank, to rank), numbered in op order.
  struct Transfer {
    Value value;
    int64_t from, to, tag;
  };
  std::vector<Transfer> transfers;
  llvm::DenseMap<Value, SmallVector<int64_t>> transfersOf; // value -> indices
  for (Operation &op : body.without_terminator()) {
    int64_t from = rankOf(places[&op].stage);
    if (from < 0)
      continue;
    for (Value r : op.getResults()) {
      std::set<int64_t> to;
      for (Operation *u : r.getUsers()) {
        if (isa<func::ReturnOp>(u))
          continue;
        int64_t q = rankOf(places[u].stage);
        if (q >= 0 && q != from)
          to.insert(q);
      }
      if (returnedToAll.contains(r))
        for (int64_t q = 0; q < S; ++q)
          if (q != from)
            to.insert(q);
      if (auto it = updateTo.find(r); it != updateTo.end())
        for (int64_t q : it->second)
          if (q != from)
            to.insert(q);
      for (int64_t q : to) {
        transfersOf[r].push_back(transfers.size());
        transfers.push_back({r, from, q, (int64_t)transfers.size()});
      }
    }
  }
  if (transfers.size() > 32768)
    return f.emitOpError("needs ")
           << transfers.size() << " transfers between pipeline stages per "
           << "step, more than the 32768 tags a communicator may name";

  OpBuilder b(m.getContext());
  SmallVector<func::FuncOp> programs;
  for (int64_t rank = 0; rank < S; ++rank) {
    // A copy of the step, then everything another rank computes removed.
    auto g = cast<func::FuncOp>(f->clone());
    g.setName((kiln::kTrainStepFuncName + "_pp" + std::to_string(rank)).str());
    m.insert(Block::iterator(f), g);
    Block &gb = g.getBody().front();
    llvm::DenseMap<Operation *, Place> gPlaces;
    llvm::DenseMap<Value, Value> fromClone; // the copy's value -> the original
    for (auto [o, c] : llvm::zip(body.without_terminator(), gb.without_terminator())) {
      gPlaces[&c] = places[&o];
      for (auto [ro, rc] : llvm::zip(o.getResults(), c.getResults()))
        fromClone[rc] = ro;
    }
    auto gret = cast<func::ReturnOp>(gb.getTerminator());
    SmallVector<Operation *> foreign;
    // Walk the copy in order with the original's places.
    SmallVector<Operation *> copyOps;
    for (Operation &c : gb.without_terminator())
      copyOps.push_back(&c);
    for (Operation *c : copyOps) {
      const Place &p = gPlaces[c];
      int64_t owner = rankOf(p.stage);
      if (owner < 0)
        continue; // copied where it is used; unused copies are removed below
      for (Value r : c->getResults()) {
        Value orig = fromClone.lookup(r);
        auto it = transfersOf.find(orig);
        if (it == transfersOf.end())
          continue;
        for (int64_t t : it->second) {
          const Transfer &tr = transfers[t];
          if (owner == rank && tr.from == rank) {
            b.setInsertionPointAfter(c);
            auto send = SendOp::create(b, c->getLoc(), r, kPipelineAxis, tr.to, tr.tag);
            gPlaces[send] = p;
          } else if (owner != rank && tr.to == rank) {
            b.setInsertionPoint(c);
            auto recv = RecvOp::create(b, c->getLoc(), r.getType(), kPipelineAxis,
                                       tr.from, tr.tag);
            gPlaces[recv] = p;
            // The other rank returns its own results (the loss: everyone).
            r.replaceUsesWithIf(recv.getResult(), [&](OpOperand &u) {
              return !isa<func::ReturnOp>(u.getOwner()) ||
                     returnedToAll.contains(orig) ||
                     [&] {
                       auto it = updateTo.find(orig);
                       return it != updateTo.end() && it->second.count(rank);
                     }();
            });
          }
        }
      }
      if (owner != rank)
        foreign.push_back(c);
    }
    llvm::DenseSet<Operation *> foreignSet(foreign.begin(), foreign.end()), erased;
    for (Operation *c : llvm::reverse(foreign)) {
      if (!c->use_empty()) {
        // Read by the return, or by another rank's op the return reads:
        // both go with the other ranks' results below.
        for (Operation *u : c->getUsers())
          if (!isa<func::ReturnOp>(u) && !foreignSet.contains(u))
            return u->emitOpError("on pipeline rank ")
                   << rank << " reads a value of rank "
                   << rankOf(gPlaces[c].stage) << " that was not sent to it";
        // Read only by the return: a result of another rank.
        continue;
      }
      c->erase();
      erased.insert(c);
    }
    // The results this rank computes (the loss: every rank).
    llvm::BitVector dropResults(g.getNumResults());
    for (auto [i, v] : llvm::enumerate(gret.getOperands())) {
      Operation *d = v.getDefiningOp();
      bool mine = d && (isa<RecvOp>(d) || rankOf(gPlaces[d].stage) == rank ||
                        (rankOf(gPlaces[d].stage) < 0 && rank == 0));
      if (!d) // an argument returned as is: the parameter's owner's
        mine = rank == 0;
      if (!mine)
        dropResults.set(i);
    }
    gret->eraseOperands(dropResults);
    if (failed(g.eraseResults(dropResults)))
      return g.emitOpError("could not drop the other ranks' results");
    // The other ranks' ops read only by the return are gone with it.
    for (Operation *c : llvm::reverse(foreign))
      if (!erased.contains(c) && c->use_empty())
        c->erase();
    // Unused copies of the anywhere ops, then unused arguments.
    bool changed = true;
    while (changed) {
      changed = false;
      SmallVector<Operation *> all;
      for (Operation &c : gb.without_terminator())
        all.push_back(&c);
      for (Operation *c : llvm::reverse(all))
        if (c->use_empty() && isMemoryEffectFree(c)) {
          c->erase();
          changed = true;
        }
    }
    llvm::BitVector dropArgs(g.getNumArguments());
    for (BlockArgument a : g.getArguments())
      if (a.use_empty())
        dropArgs.set(a.getArgNumber());
    // The updates name their argument by number: renumbered past the
    // dropped ones.
    for (unsigned r = 0; r < g.getNumResults(); ++r)
      if (auto u = g.getResultAttrOfType<IntegerAttr>(r, KilnDialect::getUpdateAttrName())) {
        int64_t old = u.getInt();
        if (old < 0 || old >= (int64_t)dropArgs.size() || dropArgs.test(old))
          return g.emitOpError("result ")
                 << r << " updates argument " << old << ", which this pipeline rank lacks";
        int64_t renumbered = old;
        for (int64_t a = 0; a < old; ++a)
          renumbered -= dropArgs.test(a);
        g.setResultAttr(r, KilnDialect::getUpdateAttrName(),
                        IntegerAttr::get(u.getType(), renumbered));
      }
    if (failed(g.eraseArguments(dropArgs)))
      return g.emitOpError("could not drop the arguments it does not read");
    if (failed(order(g, rank, gPlaces)))
      return failure();
    programs.push_back(g);
  }
  f.erase();
  return checkDeadlockFree(programs);
}

/// The ranks' programs run to the end: sends do not wait (the communicator
/// keeps a copy), a receive waits for its send. Run them so, in turn, and
/// name the receives they would wait on forever.
LogicalResult PipelinePass::checkDeadlockFree(ArrayRef<func::FuncOp> programs) {
  struct Step {
    Operation *op;
    bool send;
    int64_t peer, tag;
  };
  std::vector<std::vector<Step>> steps(programs.size());
  for (size_t r = 0; r < programs.size(); ++r)
    for (Operation &c : func::FuncOp(programs[r]).getBody().front()) {
      if (auto s = dyn_cast<SendOp>(c))
        steps[r].push_back({&c, true, (int64_t)s.getPeer(), (int64_t)s.getTag()});
      else if (auto v = dyn_cast<RecvOp>(c))
        steps[r].push_back({&c, false, (int64_t)v.getPeer(), (int64_t)v.getTag()});
    }
  std::set<std::tuple<int64_t, int64_t, int64_t>> posted; // (from, to, tag)
  std::vector<size_t> at(programs.size(), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t r = 0; r < steps.size(); ++r)
      while (at[r] < steps[r].size()) {
        const Step &st = steps[r][at[r]];
        if (st.send) {
          posted.insert({(int64_t)r, st.peer, st.tag});
        } else if (!posted.erase({st.peer, (int64_t)r, st.tag})) {
          break;
        }
        ++at[r];
        moved = true;
      }
  }
  std::string stuck;
  Operation *first = nullptr;
  for (size_t r = 0; r < steps.size(); ++r)
    if (at[r] < steps[r].size()) {
      const Step &st = steps[r][at[r]];
      first = first ? first : st.op;
      stuck += (stuck.empty() ? "" : ", ") + std::string("rank ") +
               std::to_string(r) + " on tag " + std::to_string(st.tag) +
               " from rank " + std::to_string(st.peer) + " (" + describe(st.op) + ")";
    }
  if (first)
    return first->emitOpError("--kiln-pipeline: the ")
           << rt::pipelineScheduleName(plan.kind)
           << " order deadlocks, each rank waiting on a receive: " << stuck;
  return success();
}

/// Orders rank `rank`'s program by its instruction list.
LogicalResult PipelinePass::order(func::FuncOp g, int64_t rank,
                                  const llvm::DenseMap<Operation *, Place> &gPlaces) {
  Block &gb = g.getBody().front();
  const bool zb = plan.kind == rt::PipelineScheduleKind::ZeroBubble;
  // The slot of each (phase, microbatch, chunk) in the list.
  std::map<std::tuple<int, int, int>, int64_t> slot; // (0 F | 1 B | 2 W, m, c)
  std::vector<rt::PipelineInstr> list = plan.computeOrder((int)rank);
  for (auto [i, in] : llvm::enumerate(list)) {
    int phase = in.kind == rt::PipelineInstr::Forward          ? 0
                : in.kind == rt::PipelineInstr::BackwardWeight ? 2
                                                               : 1;
    slot[{phase, in.microbatch, in.chunk}] = (int64_t)i + 1;
  }
  const int64_t last = (int64_t)list.size() + 1;

  // zb: a microbatch's backward ops that the gradients sent to the previous
  // stage need are its input part; the others its weight part.
  llvm::DenseSet<Operation *> inputPart;
  if (zb) {
    SmallVector<Operation *> work;
    for (Operation &c : gb)
      if (auto s = dyn_cast<SendOp>(c))
        if (gPlaces.lookup(&c).backward) {
          // The send itself too: the previous stage waits on it.
          inputPart.insert(&c);
          work.push_back(&c);
        }
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      for (Value v : op->getOperands())
        if (Operation *d = v.getDefiningOp()) {
          const Place &p = gPlaces.lookup(d);
          if (p.backward && p.microbatch >= 0 && inputPart.insert(d).second)
            work.push_back(d);
        }
    }
  }

  llvm::DenseMap<Operation *, int64_t> key;
  SmallVector<Operation *> ops;
  for (Operation &c : gb.without_terminator())
    ops.push_back(&c);
  auto keyOf = [&](Operation *c) -> int64_t {
    auto it = gPlaces.find(c);
    Place p = it == gPlaces.end() ? Place() : it->second;
    if (p.after)
      return last;
    if (p.microbatch < 0)
      return p.stage < 0 ? -1 : 0; // shared ops first
    int chunk = p.stage < 0 ? 0 : (int)(p.stage / stages);
    int phase = !p.backward ? 0 : (zb && !inputPart.count(c) ? 2 : 1);
    auto s = slot.find({phase, (int)p.microbatch, chunk});
    if (s == slot.end())
      s = slot.find({1, (int)p.microbatch, chunk});
    return s == slot.end() ? last : s->second;
  };
  for (Operation *c : ops)
    key[c] = keyOf(c);
  // Receives and anywhere ops run in the slot of their first reader, sends
  // in their producer's.
  for (Operation *c : llvm::reverse(ops)) {
    const Place p = gPlaces.lookup(c);
    if (!isa<RecvOp>(c) && p.stage >= 0)
      continue;
    int64_t k = last;
    for (Operation *u : c->getUsers())
      if (!isa<func::ReturnOp>(u))
        k = std::min(k, key[u]);
    key[c] = k;
  }
  for (Operation *c : ops)
    if (auto s = dyn_cast<SendOp>(c))
      if (Operation *d = s.getInput().getDefiningOp())
        key[c] = std::max(key[c], key[d]);
  // Work after the microbatches that reads only values they computed (the
  // microbatches' gradient sums, their mean, the norm's squares) runs as
  // soon as its last input exists, and a bucket's all-reduce then starts
  // there: while the stage's last backward goes on (its wait stays where
  // the optimizer reads it). What reads a parameter or optimizer state
  // (the updates) or a value received after the microbatches stays after.
  // Within a slot the program order, except that such moved work goes
  // right after its last input.
  llvm::DenseMap<Operation *, double> order;
  for (auto [i, c] : llvm::enumerate(ops))
    order[c] = (double)i;
  for (Operation *c : ops) {
    if (key[c] != last || c->getNumOperands() == 0 ||
        !(isMemoryEffectFree(c) || isa<AllReduceStartOp>(c)))
      continue;
    int64_t k = -1;
    bool ready = true;
    SmallVector<Operation *> constants; // copied where read: they move too
    for (Value v : c->getOperands()) {
      Operation *d = v.getDefiningOp();
      if (d && d->getNumOperands() == 0 && isMemoryEffectFree(d)) {
        constants.push_back(d);
        continue;
      }
      auto it = d ? key.find(d) : key.end();
      if (!d || it == key.end() || it->second == last) {
        ready = false;
        break;
      }
      k = std::max(k, it->second);
    }
    if (!ready || k < 0)
      continue;
    key[c] = k;
    double after = -1;
    for (Value v : c->getOperands())
      if (Operation *d = v.getDefiningOp(); d && key[d] == k)
        after = std::max(after, order[d]);
    order[c] = after + 1e-3 * (1.0 - 1.0 / (double)(order.size() + 2)) ;
    for (Operation *d : constants) {
      key[d] = std::min(key[d], k);
      order[d] = std::min(order[d], order[c] - 1e-6);
    }
  }
  std::stable_sort(ops.begin(), ops.end(), [&](Operation *a, Operation *b) {
    return key[a] < key[b] || (key[a] == key[b] && order[a] < order[b]);
  });
  Operation *term = gb.getTerminator();
  for (Operation *c : ops)
    c->moveBefore(term);
  // Every operand still defined before its use.
  llvm::DenseSet<Operation *> seen;
  for (Operation &c : gb) {
    for (Value v : c.getOperands())
      if (Operation *d = v.getDefiningOp(); d && !seen.count(d))
        return c.emitOpError("on pipeline rank ")
               << rank << " would run before " << describe(d)
               << ", whose result it reads, in the "
               << rt::pipelineScheduleName(plan.kind) << " order";
    seen.insert(&c);
  }
  return success();
}

} // namespace
