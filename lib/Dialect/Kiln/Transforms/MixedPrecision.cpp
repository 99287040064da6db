//===- MixedPrecision.cpp - --kiln-mixed-precision --------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Retypes one function's ops to bf16 or fp16 by their PrecisionOpInterface
// class (Passes.td has the contract). One forward sweep in block order: an
// op's operands are final when it is reached, so each op decides from its
// operands' current types, casts them, and retypes its f32 results.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "kiln/Support/ONNXOrigin.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

namespace kiln {
#define GEN_PASS_DEF_KILNMIXEDPRECISIONPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

Type elementOf(Value v) { return getElementTypeOrSelf(v.getType()); }

struct Retyper {
  Type f32, low;
  OpBuilder b;
  /// (value, element type) -> its cast: one copy per value and type.
  DenseMap<std::pair<Value, Type>, Value> casts;
  /// Values computed from parameters and constants only (no data input):
  /// they follow the activations they meet.
  DenseSet<Value> weights;

  Retyper(MLIRContext *ctx, Type low) : f32(Float32Type::get(ctx)), low(low), b(ctx) {}

  bool retypable(Type elt) const { return elt == f32 || elt == low; }

  /// `v` as element type `elt`, cast once right after its definition.
  Value castTo(Value v, Type elt) {
    if (elementOf(v) == elt)
      return v;
    auto key = std::make_pair(v, elt);
    if (Value c = casts.lookup(key))
      return c;
    // A round trip to the type it came from is the original.
    if (auto back = v.getDefiningOp<CastOp>())
      if (elementOf(back.getInput()) == elt && retypable(elementOf(back.getInput())))
        return casts[key] = back.getInput();
    OpBuilder::InsertionGuard guard(b);
    if (Operation *def = v.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(v).getOwner());
    auto type = RankedTensorType::get(cast<RankedTensorType>(v.getType()).getShape(), elt);
    Value c = CastOp::create(b, v.getLoc(), type, v);
    if (weights.contains(v))
      weights.insert(c);
    return casts[key] = c;
  }

  /// Casts the op's retypable float operands to `elt` and turns its f32
  /// results into `elt`.
  void computeIn(Operation *op, Type elt) {
    for (OpOperand &o : op->getOpOperands())
      if (retypable(elementOf(o.get())))
        o.set(castTo(o.get(), elt));
    for (OpResult r : op->getResults())
      if (elt != f32 && elementOf(r) == f32)
        r.setType(RankedTensorType::get(cast<RankedTensorType>(r.getType()).getShape(), elt));
  }

  /// A follow op's type: the widest of its activation operands', else of
  /// all its float operands'; null when it has none to retype.
  Type followType(Operation *op) {
    Type act, any;
    for (Value v : op->getOperands()) {
      Type e = elementOf(v);
      if (!retypable(e))
        continue;
      Type &slot = weights.contains(v) ? any : act;
      if (!slot || e == f32)
        slot = e;
      if (!any || e == f32)
        any = e;
    }
    return act ? act : any;
  }

  void noteWeights(Operation *op) {
    if (isa<ConstantOp>(op)) {
      weights.insert(op->result_begin(), op->result_end());
      return;
    }
    if (op->getNumOperands() &&
        llvm::all_of(op->getOperands(), [&](Value v) { return weights.contains(v); }))
      weights.insert(op->result_begin(), op->result_end());
  }
};

struct KilnMixedPrecisionPass
    : public kiln::impl::KilnMixedPrecisionPassBase<KilnMixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = module.lookupSymbol<func::FuncOp>(func);
    if (!f || f.isExternal()) {
      module.emitError() << "--kiln-mixed-precision: no function @" << func;
      return signalPassFailure();
    }
    MLIRContext *ctx = &getContext();
    Type low = dtype == LowPrecision::BF16 ? Type(BFloat16Type::get(ctx))
                                           : Type(Float16Type::get(ctx));
    llvm::StringSet<> fp32;
    for (const std::string &t : fp32Ops)
      fp32.insert(t);

    Retyper rt(ctx, low);
    Block &body = f.getBody().front();
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (isParam(f, i))
        rt.weights.insert(f.getArgument(i));

    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        // The function keeps its result types.
        for (OpOperand &o : ret->getOpOperands()) {
          Type want = getElementTypeOrSelf(f.getResultTypes()[o.getOperandNumber()]);
          if (want != elementOf(o.get()) && rt.retypable(want))
            o.set(rt.castTo(o.get(), want));
        }
        continue;
      }
      auto iface = dyn_cast<PrecisionOpInterface>(op);
      if (!iface)
        continue;
      PrecisionClass cls = iface.getPrecisionClass();
      if (cls != PrecisionClass::Keep)
        if (std::optional<StringRef> t = onnxOpTypeOf(op->getLoc()); t && fp32.contains(*t))
          cls = PrecisionClass::Float32;
      switch (cls) {
      case PrecisionClass::Low:
        rt.computeIn(op, low);
        break;
      case PrecisionClass::Float32:
        rt.computeIn(op, rt.f32);
        break;
      case PrecisionClass::Follow:
        if (Type t = rt.followType(op))
          rt.computeIn(op, t);
        break;
      case PrecisionClass::Keep:
        break;
      }
      rt.noteWeights(op);
    }
  }
};

} // namespace
