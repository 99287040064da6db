//===- Distill.cpp - --kiln-distill -----------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Knowledge distillation (docs/Compression.md, Hinton et al. 2015): after
// --kiln-attach-loss, the module holds the teacher's forward as @teacher
// (kiln ops, its parameters named "teacher/..."). The pass inlines it into
// @forward on the same data inputs, its parameters frozen (forward only, no
// gradient), and makes the loss
//
//   alpha * T^2 * KL(softmax(teacher / T) || softmax(student / T))
//     + (1 - alpha) * loss
//
// where `loss` is the attached cross-entropy with the labels and the KL
// divergence is summed over the class axis (the last) and averaged over the
// other positions (PyTorch's kl_div with reduction "batchmean" for [N, C]).
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace kiln {
#define GEN_PASS_DEF_KILNDISTILLPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

std::string nameOf(func::FuncOp f, unsigned i, bool result) {
  auto n = result ? f.getResultAttrOfType<StringAttr>(i, "onnx.name")
                  : f.getArgAttrOfType<StringAttr>(i, "onnx.name");
  if (n)
    return n.getValue().str();
  return (result ? "output_" : "arg") + std::to_string(i);
}

struct DistillPass : public kiln::impl::KilnDistillPassBase<DistillPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kForwardFuncName);
    auto t = m.lookupSymbol<func::FuncOp>("teacher");
    if (!f || f.isExternal() || !t || t.isExternal()) {
      m.emitError("--kiln-distill: the module needs @forward (with its loss "
                  "attached) and the teacher's @teacher");
      return signalPassFailure();
    }
    if (failed(distill(f, t)))
      return signalPassFailure();
    t.erase();
  }

  LogicalResult distill(func::FuncOp f, func::FuncOp t);
};

LogicalResult DistillPass::distill(func::FuncOp f, func::FuncOp t) {
  MLIRContext *ctx = f.getContext();
  if (!(alpha >= 0.0 && alpha <= 1.0))
    return f.emitError("--kiln-distill: alpha must be in [0, 1], got ") << (double)alpha;
  if (!(temperature > 0.0))
    return f.emitError("--kiln-distill: the temperature must be positive, got ")
           << (double)temperature;
  if (f.getNumResults() < 2 || !f.getResultAttr(0, kiln::KilnDialect::getLossAttrName()))
    return f.emitError("--kiln-distill: @forward has no attached loss; run "
                       "--kiln-attach-loss first");
  // The student's logits: the output named `logits`, or the one output
  // besides the loss.
  std::optional<unsigned> sIdx;
  for (unsigned i = 1; i < f.getNumResults(); ++i)
    if (logits.empty() ? f.getNumResults() == 2 : nameOf(f, i, true) == logits)
      sIdx = i;
  if (!sIdx)
    return f.emitError("--kiln-distill: the student has no output '")
           << logits << "' (name its logits with --logits)";
  if (t.getNumResults() != 1)
    return f.emitError("--kiln-distill: the teacher has ")
           << t.getNumResults() << " outputs; it needs exactly one, its logits";
  auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
  Value student = ret.getOperand(*sIdx);
  Type st = student.getType(), tt = t.getResultTypes()[0];
  if (st != tt)
    return f.emitError("--kiln-distill: the teacher's output '")
           << nameOf(t, 0, true) << "' has type " << tt << ", the student's logits '"
           << nameOf(f, *sIdx, true) << "' have " << st;

  // The teacher's arguments: its parameters become frozen parameters of
  // @forward; its data inputs are the student's of the same name and type.
  IRMapping map;
  for (unsigned i = 0; i < t.getNumArguments(); ++i) {
    BlockArgument a = t.getArgument(i);
    std::string n = nameOf(t, i, false);
    if (kiln::isParam(t, i)) {
      unsigned at = f.getNumArguments();
      if (failed(f.insertArgument(at, a.getType(), t.getArgAttrDict(i), a.getLoc())))
        return failure();
      kiln::setRole(f, at, kiln::ParamRole::Frozen);
      map.map(a, f.getArgument(at));
      continue;
    }
    std::optional<unsigned> same;
    for (unsigned j = 0; j < f.getNumArguments(); ++j)
      if (!kiln::isParam(f, j) && nameOf(f, j, false) == n)
        same = j;
    if (!same)
      return f.emitError("--kiln-distill: the teacher's input '")
             << n << "' is not an input of the student";
    if (f.getArgument(*same).getType() != a.getType())
      return f.emitError("--kiln-distill: the teacher's input '")
             << n << "' has type " << a.getType() << ", the student's "
             << f.getArgument(*same).getType();
    map.map(a, f.getArgument(*same));
  }
  OpBuilder b(ret);
  for (Operation &op : t.getBody().front().without_terminator())
    b.clone(op, map);
  Value teacher = map.lookup(t.getBody().front().getTerminator()->getOperand(0));

  // The loss.
  Location loc = NameLoc::get(StringAttr::get(ctx, "distill"));
  auto type = cast<RankedTensorType>(st);
  Type elt = type.getElementType();
  int64_t classAxis = type.getRank() - 1;
  if (classAxis < 1)
    return f.emitError("--kiln-distill: the logits need a batch and a class axis, got ")
           << st;
  auto scalar = [&](double v) {
    return kiln::ConstantOp::create(
        b, loc, DenseElementsAttr::get(RankedTensorType::get({}, elt), b.getFloatAttr(elt, v)));
  };
  Value invT = scalar(1.0 / temperature);
  Value sT = kiln::MulOp::create(b, loc, student, invT);
  Value tT = kiln::MulOp::create(b, loc, teacher, invT);
  auto axis = b.getI64IntegerAttr(classAxis);
  Value logPs = kiln::LogSoftmaxOp::create(b, loc, sT, axis);
  Value logPt = kiln::LogSoftmaxOp::create(b, loc, tT, axis);
  Value pT = kiln::SoftmaxOp::create(b, loc, tT, axis);
  Value diff = kiln::SubOp::create(b, loc, logPt, logPs);
  Value prod = kiln::MulOp::create(b, loc, pT, diff);
  Value perPos = kiln::ReduceSumOp::create(b, loc, prod, b.getDenseI64ArrayAttr({classAxis}),
                                           b.getBoolAttr(false));
  SmallVector<int64_t> rest;
  for (int64_t d = 0; d < classAxis; ++d)
    rest.push_back(d);
  Value kl = kiln::ReduceMeanOp::create(b, loc, perPos, b.getDenseI64ArrayAttr(rest),
                                        b.getBoolAttr(false));
  Value hard = ret.getOperand(0);
  double T = temperature;
  Value soft = kiln::MulOp::create(b, loc, kl, scalar(alpha * T * T));
  Value loss = kiln::AddOp::create(b, loc, soft,
                                   kiln::MulOp::create(b, loc, hard, scalar(1.0 - alpha)));
  ret.setOperand(0, loss);
  return success();
}

} // namespace
