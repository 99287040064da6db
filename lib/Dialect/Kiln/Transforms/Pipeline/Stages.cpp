//===- Stages.cpp - --kiln-pipeline-stages ----------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Cuts @forward into S pipeline stages (Passes.td has the contract): the
// ops in order, cut into contiguous runs balanced by each op's cost
// (CostOpInterface), or at the ONNX values the user names. The pass knows
// no op: the cost is the interface's, what crosses a cut is the def-use
// graph's.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"
#include "kiln/Support/TensorSize.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <limits>

namespace kiln {
#define GEN_PASS_DEF_KILNPIPELINESTAGESPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using kiln::argName;

namespace {

/// A value's bytes (kiln/Support/TensorSize.h); 0 for an unsized one.
int64_t bytesOf(Type t) {
  int64_t bytes = 0;
  auto r = dyn_cast<RankedTensorType>(t);
  return r && kiln::checkedTypeBytes(r, bytes) ? bytes : 0;
}

struct PipelineStagesPass
    : public kiln::impl::KilnPipelineStagesPassBase<PipelineStagesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    if (stages < 1) {
      m.emitError("--kiln-pipeline-stages: stages must be at least 1, got ")
          << (int64_t)stages;
      return signalPassFailure();
    }
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kForwardFuncName);
    if (!f || f.isExternal()) {
      m.emitError("--kiln-pipeline-stages: the module has no @forward function");
      return signalPassFailure();
    }
    if (failed(assign(f)))
      signalPassFailure();
  }

  LogicalResult assign(func::FuncOp f);
};

LogicalResult PipelineStagesPass::assign(func::FuncOp f) {
  const int64_t S = stages;
  if (!f.getBody().hasOneBlock())
    return f.emitOpError("must have one block");
  Block &body = f.getBody().front();
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  const int64_t N = ops.size();
  llvm::DenseMap<Operation *, int64_t> index;
  for (auto [i, op] : llvm::enumerate(ops))
    index[op] = i;

  // Values that depend on the batch (not functions of the weights alone):
  // what a cut must pass on.
  llvm::DenseSet<Value> batchDependent;
  for (unsigned i = 0; i < f.getNumArguments(); ++i)
    if (!kiln::isParam(f, i))
      batchDependent.insert(f.getArgument(i));
  for (Operation *op : ops)
    if (llvm::any_of(op->getOperands(),
                     [&](Value v) { return batchDependent.count(v); }))
      for (Value r : op->getResults())
        batchDependent.insert(r);

  // Each op's estimated time, in units of one byte moved.
  SmallVector<double> prefix(N + 1, 0.0);
  int64_t costed = 0;
  for (int64_t i = 0; i < N; ++i) {
    double c = 0;
    if (!isa<kiln::ConstantOp>(ops[i]))
      if (auto cost = dyn_cast<kiln::CostOpInterface>(ops[i]))
        c = (double)cost.getFlops() / flopsPerByte + (double)cost.getBytesAccessed();
    costed += c > 0;
    prefix[i + 1] = prefix[i] + c;
  }
  if (costed < S)
    return f.emitOpError("has ")
           << costed << " ops with a cost to split into " << S
           << " pipeline stages: use fewer stages (--mesh pp=S with S <= "
           << costed << ")";

  // The bytes of the batch-dependent values crossing a cut before op c.
  SmallVector<int64_t> lastUse(N, -1);
  for (int64_t i = 0; i < N; ++i)
    for (Value r : ops[i]->getResults())
      for (Operation *u : r.getUsers())
        if (auto it = index.find(u); it != index.end())
          lastUse[i] = std::max(lastUse[i], it->second);
        else
          lastUse[i] = N; // the return
  auto crossing = [&](int64_t c) {
    int64_t bytes = 0;
    for (int64_t i = 0; i < c; ++i)
      if (lastUse[i] >= c)
        for (Value r : ops[i]->getResults())
          if (batchDependent.count(r))
            bytes += bytesOf(r.getType());
    return bytes;
  };

  SmallVector<int64_t> cuts; // stage k runs ops [cuts[k], cuts[k+1])
  if (!boundaries.empty()) {
    if ((int64_t)boundaries.size() != S - 1)
      return f.emitOpError("--stage-boundaries names ")
             << boundaries.size() << " values; " << S << " stages need "
             << S - 1;
    cuts.push_back(0);
    for (const std::string &name : boundaries) {
      int64_t at = -1;
      Value v;
      for (int64_t i = 0; i < N && at < 0; ++i)
        if (auto names = ops[i]->getAttrOfType<ArrayAttr>(
                kiln::KilnDialect::getOnnxNamesAttrName()))
          for (auto [k, n] : llvm::enumerate(names))
            if (cast<StringAttr>(n).getValue() == name) {
              at = i + 1;
              v = ops[i]->getResult(k);
            }
      if (at < 0)
        return f.emitOpError("--stage-boundaries: no value is named '")
               << name << "' in the model (an ONNX node output)";
      if (at <= cuts.back())
        return f.emitOpError("--stage-boundaries: '")
               << name << "' does not come after the previous boundary";
      if (at >= N)
        return f.emitOpError("--stage-boundaries: '")
               << name << "' leaves nothing for the stage after it";
      // The only batch-dependent value crossing the cut.
      std::string others;
      for (int64_t i = 0; i < at; ++i)
        if (lastUse[i] >= at)
          for (auto [k, r] : llvm::enumerate(ops[i]->getResults()))
            if (batchDependent.count(r) && r != v) {
              auto names = ops[i]->getAttrOfType<ArrayAttr>(
                  kiln::KilnDialect::getOnnxNamesAttrName());
              std::string n = names && k < names.size()
                                  ? cast<StringAttr>(names[k]).getValue().str()
                                  : "";
              if (n.empty())
                n = "a result of " + ops[i]->getName().getStringRef().str();
              others += (others.empty() ? "'" : ", '") + n + "'";
            }
      if (!others.empty())
        return f.emitOpError("--stage-boundaries: '")
               << name << "' does not cut the graph: " << others
               << " also cross" << (others.find(',') == std::string::npos ? "es" : "")
               << " from the stage before it";
      if (!v.getUsers().empty() && lastUse[index[v.getDefiningOp()]] < at)
        return f.emitOpError("--stage-boundaries: '")
               << name << "' is not used after it";
      cuts.push_back(at);
    }
    cuts.push_back(N);
  } else {
    // The smallest time of the slowest stage (a linear partition).
    const double inf = std::numeric_limits<double>::infinity();
    auto cost = [&](int64_t a, int64_t b) { return prefix[b] - prefix[a]; };
    std::vector<std::vector<double>> best(S + 1, std::vector<double>(N + 1, inf));
    best[0][0] = 0;
    for (int64_t k = 1; k <= S; ++k)
      for (int64_t i = 1; i <= N; ++i)
        for (int64_t j = k - 1; j < i; ++j)
          if (best[k - 1][j] < inf && cost(j, i) > 0)
            best[k][i] = std::min(best[k][i], std::max(best[k - 1][j], cost(j, i)));
    const double cap = best[S][N] * 1.05;
    // Among the cuts within 5% of it, the fewest bytes crossing.
    SmallVector<int64_t> cross(N + 1, 0);
    for (int64_t c = 1; c < N; ++c)
      cross[c] = crossing(c);
    const int64_t big = std::numeric_limits<int64_t>::max() / 4;
    std::vector<std::vector<int64_t>> bytes(S + 1, std::vector<int64_t>(N + 1, big));
    std::vector<std::vector<int64_t>> from(S + 1, std::vector<int64_t>(N + 1, -1));
    bytes[0][0] = 0;
    for (int64_t k = 1; k <= S; ++k)
      for (int64_t i = 1; i <= N; ++i)
        for (int64_t j = k - 1; j < i; ++j) {
          double c = cost(j, i);
          if (bytes[k - 1][j] >= big || !(c > 0) || c > cap)
            continue;
          int64_t b = bytes[k - 1][j] + (j > 0 ? cross[j] : 0);
          if (b < bytes[k][i]) {
            bytes[k][i] = b;
            from[k][i] = j;
          }
        }
    if (from[S][N] < 0)
      return f.emitOpError("cannot be cut into ") << S << " stages that each "
                                                     "have work";
    cuts.assign(S + 1, 0);
    cuts[S] = N;
    for (int64_t k = S; k > 0; --k)
      cuts[k - 1] = from[k][cuts[k]];
  }

  OpBuilder b(f.getContext());
  for (int64_t k = 0; k < S; ++k)
    for (int64_t i = cuts[k]; i < cuts[k + 1]; ++i)
      ops[i]->setAttr(kiln::KilnDialect::getStageAttrName(), b.getI64IntegerAttr(k));

  // One stage per parameter: a weight read in two would need its gradient
  // summed across them and its update sent back.
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    if (!kiln::isParam(f, i))
      continue;
    std::optional<int64_t> first;
    for (Operation *u : f.getArgument(i).getUsers()) {
      auto it = index.find(u);
      if (it == index.end())
        continue;
      int64_t s = llvm::upper_bound(cuts, it->second) - cuts.begin() - 1;
      if (first && *first != s)
        return f.emitOpError("parameter '")
               << argName(f, i) << "' is read by pipeline stages " << *first
               << " and " << s
               << " (tied weights across stages are not supported yet; "
                  "choose --stage-boundaries that keep its uses in one stage)";
      first = s;
    }
  }
  return success();
}

} // namespace
