//===- Stages.cpp - --kiln-pipeline-stages ----------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Cuts @forward into S pipeline stages (Passes.td has the contract): the
// ops in order, cut into contiguous runs balanced by each op's cost
// (CostOpInterface, calibrated by a profile's kernel times when given), or
// at the ONNX values the user names. The pass knows
// no op: the cost is the interface's, what crosses a cut is the def-use
// graph's.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"
#include "kiln/Support/TensorSize.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <limits>
#include <map>

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

/// Per ONNX node, its kernels' microseconds per step in a Chrome trace of
/// kiln-train --profile: each rank's sum over the profiled steps divided
/// by its steps, the largest over the ranks. False with `err` on a file
/// that is missing, too large, not such a trace or without steps.
bool readNodeTimes(const std::string &path, std::map<std::string, double> &out,
                   std::string &err) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf) {
    err = "cannot read '" + path + "': " + buf.getError().message();
    return false;
  }
  if ((*buf)->getBufferSize() > (size_t(1) << 31)) {
    err = "'" + path + "' is larger than 2 GiB";
    return false;
  }
  llvm::Expected<llvm::json::Value> v = llvm::json::parse((*buf)->getBuffer());
  if (!v) {
    err = "'" + path + "' is not JSON: " + llvm::toString(v.takeError());
    return false;
  }
  const llvm::json::Object *top = v->getAsObject();
  const llvm::json::Array *events = top ? top->getArray("traceEvents") : nullptr;
  if (!events) {
    err = "'" + path + "' is not a kiln-train --profile trace (no traceEvents)";
    return false;
  }
  std::map<int64_t, std::map<std::string, double>> perRank;
  std::map<int64_t, int64_t> steps;
  for (const llvm::json::Value &e : *events) {
    const llvm::json::Object *o = e.getAsObject();
    if (!o)
      continue;
    std::optional<llvm::StringRef> cat = o->getString("cat");
    std::optional<double> dur = o->getNumber("dur");
    std::optional<int64_t> pid = o->getInteger("pid");
    if (!cat || !dur || !pid || !(*dur >= 0))
      continue;
    if (*cat == "step")
      ++steps[*pid];
    if (*cat != "kernel")
      continue;
    const llvm::json::Object *args = o->getObject("args");
    std::optional<llvm::StringRef> node = args ? args->getString("node") : std::nullopt;
    if (node && !node->empty())
      perRank[*pid][node->str()] += *dur;
  }
  for (auto &[pid, nodes] : perRank) {
    int64_t n = steps[pid];
    if (n <= 0) {
      err = "'" + path + "' has no profiled step on rank " + std::to_string(pid);
      return false;
    }
    for (auto &[node, us] : nodes)
      out[node] = std::max(out[node], us / (double)n);
  }
  if (out.empty()) {
    err = "'" + path + "' holds no kernel of an ONNX node";
    return false;
  }
  return true;
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
  SmallVector<double> est(N, 0.0);
  for (int64_t i = 0; i < N; ++i)
    if (!isa<kiln::ConstantOp>(ops[i]))
      if (auto cost = dyn_cast<kiln::CostOpInterface>(ops[i]))
        est[i] = (double)cost.getFlops() / flopsPerByte + (double)cost.getBytesAccessed();
  // Calibrated by a trace's measured times per ONNX node, where given.
  if (!costs.empty()) {
    std::map<std::string, double> measured;
    std::string err;
    if (!readNodeTimes(costs, measured, err))
      return f.emitOpError("--kiln-pipeline-stages: costs: ") << err;
    auto nodeOf = [](Operation *op) -> std::string {
      if (auto n = dyn_cast<NameLoc>(op->getLoc()))
        return n.getName().getValue().str();
      return "";
    };
    std::map<std::string, double> estOfNode;
    for (int64_t i = 0; i < N; ++i)
      if (measured.count(nodeOf(ops[i])))
        estOfNode[nodeOf(ops[i])] += est[i];
    double estMeasured = 0, usMeasured = 0;
    for (auto &[node, e] : estOfNode) {
      estMeasured += e;
      usMeasured += measured[node];
    }
    if (usMeasured <= 0)
      return f.emitOpError("--kiln-pipeline-stages: costs: the trace '")
             << costs << "' times none of this model's ONNX nodes";
    const double perUs = estMeasured > 0 ? estMeasured / usMeasured : 1.0;
    for (int64_t i = 0; i < N; ++i) {
      std::string node = nodeOf(ops[i]);
      auto e = estOfNode.find(node);
      if (e == estOfNode.end())
        continue;
      // The node's time, shared by its ops' estimates (evenly if none).
      int64_t peers = 0;
      for (int64_t j = 0; j < N; ++j)
        peers += nodeOf(ops[j]) == node;
      double share = e->second > 0 ? est[i] / e->second : 1.0 / (double)peers;
      est[i] = measured[node] * share * perUs;
    }
  }
  SmallVector<double> prefix(N + 1, 0.0);
  int64_t costed = 0;
  for (int64_t i = 0; i < N; ++i) {
    costed += est[i] > 0;
    prefix[i + 1] = prefix[i] + est[i];
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

  // A weight read in several stages (tied embeddings) is held by each;
  // --kiln-pipeline sums its gradient on the last and sends the update back.
  return success();
}

} // namespace
