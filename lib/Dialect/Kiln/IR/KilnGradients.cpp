//===- KilnGradients.cpp - reverse-mode sweep over kiln ops -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/IR/KilnGradients.h"

#include "kiln/Dialect/Kiln/IR/KilnOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace {
bool isFloatTensor(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && isa<FloatType>(r.getElementType());
}

/// "'kiln.x' (node 'N')" for messages.
std::string describe(Operation *op) {
  std::string s = "'" + op->getName().getStringRef().str() + "'";
  if (auto n = dyn_cast<NameLoc>(op->getLoc()))
    s += " (node '" + n.getName().getValue().str() + "')";
  return s;
}

/// 1.5 * g: the wrong VJP of the break-vjp testing aid.
Value breakGradient(OpBuilder &b, Location loc, Value g) {
  auto t = cast<RankedTensorType>(g.getType());
  auto scalarType = RankedTensorType::get({}, t.getElementType());
  Value k = kiln::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(scalarType,
                             b.getFloatAttr(t.getElementType(), 1.5)));
  return kiln::MulOp::create(b, loc, g, k);
}
} // namespace

LogicalResult kiln::buildGradients(OpBuilder &b, ArrayRef<Operation *> ops,
                                   Value y, Value seed, ArrayRef<Value> xs,
                                   SmallVectorImpl<Value> &grads,
                                   StringRef xsWhat, StringRef yWhat,
                                   StringRef breakVJP) {
  // Values y depends on, and values that depend on some x (and are floats).
  llvm::DenseSet<Value> useful = {y};
  for (Operation *op : llvm::reverse(ops))
    if (llvm::any_of(op->getResults(), [&](Value r) { return useful.count(r); }))
      for (Value v : op->getOperands())
        useful.insert(v);
  llvm::DenseSet<Value> active(xs.begin(), xs.end());
  for (Operation *op : ops)
    if (llvm::any_of(op->getOperands(), [&](Value v) { return active.count(v); }))
      for (Value r : op->getResults())
        if (isFloatTensor(r.getType()))
          active.insert(r);

  Block *block = b.getInsertionBlock();
  Block::iterator at = b.getInsertionPoint();
  llvm::DenseMap<Value, Value> acc;
  acc[y] = seed;
  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> rg;
    bool any = false;
    for (Value r : op->getResults()) {
      Value g = active.count(r) && useful.count(r) ? acc.lookup(r) : Value();
      rg.push_back(g);
      any |= bool(g);
    }
    if (!any)
      continue;
    auto d = dyn_cast<DifferentiableOpInterface>(op);
    if (!d)
      return op->emitOpError("is on the path from ")
             << xsWhat << " to " << yWhat << " but has no gradient rule (op "
             << describe(op) << ")";
    SmallVector<Value> og;
    b.setInsertionPoint(block, at);
    // The ops built for this VJP lie between `before` and `at`.
    Operation *before = at == block->begin() ? nullptr : &*std::prev(at);
    if (failed(d.buildVJP(b, rg, og)))
      return failure();
    if (og.size() != op->getNumOperands())
      return op->emitOpError("gradient rule returned ")
             << og.size() << " gradients for " << op->getNumOperands()
             << " operands";
    for (auto [v, g] : llvm::zip(op->getOperands(), og)) {
      if (!g || !active.count(v))
        continue;
      if (g.getType() != v.getType())
        return op->emitOpError("gradient rule produced ")
               << g.getType() << " for an operand of type " << v.getType();
      if (!breakVJP.empty() && op->getName().getStringRef() == breakVJP)
        g = breakGradient(b, op->getLoc(), g);
      Value &sum = acc[v];
      sum = sum ? AddOp::create(b, op->getLoc(), sum, g).getResult() : g;
    }
    // A pipeline stage's op: its backward runs on the same stage.
    if (auto stage = op->getAttr(KilnDialect::getStageAttrName()))
      for (Block::iterator i = before ? std::next(before->getIterator())
                                      : block->begin();
           i != at; ++i) {
        i->setAttr(KilnDialect::getStageAttrName(), stage);
        i->setAttr(KilnDialect::getBackwardAttrName(), b.getUnitAttr());
      }
  }
  b.setInsertionPoint(block, at);
  grads.clear();
  for (Value x : xs)
    grads.push_back(acc.lookup(x));
  return success();
}
