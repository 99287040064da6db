//===- QuantizeAware.cpp - --kiln-qat ---------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Quantization-aware training (docs/Compression.md): every matmul and
// convolution with a trained weight (a Linear, a Gemm, a Conv) computes on
// fake-quantized operands: the weight symmetric int8 per output channel
// (kiln.absmax_scale, zero point 0), the activation asymmetric uint8 per
// tensor with a moving-average min/max observer (kiln.minmax_observe, state
// `<node>/observer`). Straight-through gradients come from fake_quant's VJP.
// The sites are listed on the module (`kiln.qat_sites`) for --export-onnx,
// which writes the QDQ model from them.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "kiln/runtime/Quantize.h"

#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNQUANTIZEAWAREPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
namespace quant = kiln::rt::quant;

namespace {

/// The ONNX node index (the importer's FileLineColLoc line - 1) and name
/// (its NameLoc) of an op.
std::pair<int64_t, std::string> onnxNode(Location loc) {
  int64_t index = -1;
  std::string name;
  loc->walk([&](Location l) {
    if (auto n = dyn_cast<NameLoc>(l); n && name.empty())
      name = n.getName().getValue().str();
    if (auto f = dyn_cast<FileLineColLoc>(l); f && index < 0)
      index = (int64_t)f.getLine() - 1;
    return WalkResult::advance();
  });
  return {index, name};
}

struct QuantizeAwarePass
    : public kiln::impl::KilnQuantizeAwarePassBase<QuantizeAwarePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp m = getOperation();
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kForwardFuncName);
    if (!f || f.isExternal()) {
      m.emitError("--kiln-qat: the module has no @forward");
      return signalPassFailure();
    }
    if (failed(quantize(m, f)))
      signalPassFailure();
  }

  LogicalResult quantize(ModuleOp m, func::FuncOp f);
};

LogicalResult QuantizeAwarePass::quantize(ModuleOp m, func::FuncOp f) {
  MLIRContext *ctx = f.getContext();
  if (!(averaging > 0.0 && averaging <= 1.0))
    return f.emitError("--kiln-qat: averaging must be in (0, 1], got ")
           << (double)averaging;
  if (freeze < 1)
    return f.emitError("--kiln-qat: freeze must be at least 1 (batches "
                       "observed before the ranges are fixed), got ")
           << (int64_t)freeze;
  auto name = [&](unsigned i) {
    auto n = f.getArgAttrOfType<StringAttr>(i, "onnx.name");
    return n ? n.getValue().str() : "arg" + std::to_string(i);
  };
  // A weight of rank >= 2 read by the op, and its output-channel
  // axis; the other float operand is the activation.
  struct Site {
    Operation *op;
    unsigned weightOperand, actOperand;
    unsigned param;
    int64_t axis;
  };
  SmallVector<Site> sites;
  auto weightArg = [&](Value v) -> std::optional<unsigned> {
    auto a = dyn_cast<BlockArgument>(v);
    if (!a || a.getOwner() != &f.getBody().front())
      return std::nullopt;
    auto t = dyn_cast<RankedTensorType>(v.getType());
    // Before autodiff gives roles: a float parameter of the model (not one
    // a pass added, as an observer).
    if (!t || t.getRank() < 2 || !t.getElementType().isF32() ||
        !kiln::isParam(f, a.getArgNumber()) || kiln::getInit(f, a.getArgNumber()))
      return std::nullopt;
    return a.getArgNumber();
  };
  f.walk([&](Operation *op) {
    if (auto mm = dyn_cast<kiln::MatmulOp>(op)) {
      int64_t r = cast<RankedTensorType>(mm.getRhs().getType()).getRank();
      if (auto p = weightArg(mm.getRhs())) {
        // The output features: rhs [.., K, N] -> N; transposed [.., N, K] -> N.
        sites.push_back({op, 1, 0, *p, mm.getTransposeRhs() ? r - 2 : r - 1});
      } else if (auto p = weightArg(mm.getLhs())) {
        int64_t l = cast<RankedTensorType>(mm.getLhs().getType()).getRank();
        sites.push_back({op, 0, 1, *p, mm.getTransposeLhs() ? l - 1 : l - 2});
      }
    } else if (auto c = dyn_cast<kiln::ConvOp>(op)) {
      if (auto p = weightArg(c.getWeight()))
        sites.push_back({op, 1, 0, *p, 0});
    }
  });
  if (sites.empty())
    return f.emitError("--kiln-qat: the model has no quantizable op (a "
                       "MatMul, Gemm or Conv with a trained weight)");

  Block &body = f.getBody().front();
  llvm::DenseMap<unsigned, Value> quantizedWeight;
  llvm::DenseMap<unsigned, int64_t> weightAxis;
  llvm::DenseMap<Value, std::pair<Value, std::string>> quantizedAct;
  SmallVector<Attribute> records;
  auto i64 = [&](int64_t v) { return IntegerAttr::get(IntegerType::get(ctx, 64), v); };
  for (Site &s : sites) {
    auto [nodeIndex, nodeName] = onnxNode(s.op->getLoc());
    if (nodeName.empty())
      nodeName = "node" + std::to_string(nodeIndex);
    // The weight, once per parameter, at the top of the body.
    Value w = f.getArgument(s.param);
    auto wt = cast<RankedTensorType>(w.getType());
    if (auto it = weightAxis.find(s.param); it != weightAxis.end() && it->second != s.axis)
      return s.op->emitOpError("--kiln-qat: weight '")
             << name(s.param) << "' is read along two different output axes";
    Value wq = quantizedWeight.lookup(s.param);
    if (!wq) {
      OpBuilder b(&body, body.begin());
      Location loc = NameLoc::get(StringAttr::get(ctx, name(s.param) + "/fake_quant"));
      auto st = RankedTensorType::get({wt.getDimSize(s.axis)}, b.getF32Type());
      Value scale = kiln::AbsMaxScaleOp::create(b, loc, st, w, i64(s.axis),
                                                i64(quant::kWeightMax));
      Value zero = kiln::ConstantOp::create(
          b, loc, DenseElementsAttr::get(st, b.getF32FloatAttr(0.0f)));
      wq = kiln::FakeQuantOp::create(b, loc, wt, w, scale, zero, i64(s.axis),
                                     i64(quant::kWeightMin), i64(quant::kWeightMax));
      quantizedWeight[s.param] = wq;
      weightAxis[s.param] = s.axis;
    }
    s.op->setOperand(s.weightOperand, wq);
    // The activation, once per value, where it is defined.
    Value x = s.op->getOperand(s.actOperand);
    auto [xq, observer] = quantizedAct.lookup(x);
    if (!xq) {
      observer = nodeName + "/observer";
      NamedAttrList a;
      a.set("onnx.name", StringAttr::get(ctx, observer));
      kiln::addParamAttrs(ctx, a, kiln::ParamRole::State, kiln::ParamInit::Zeros);
      auto ot = RankedTensorType::get({3}, Float32Type::get(ctx));
      unsigned at = f.getNumArguments();
      Location loc = NameLoc::get(StringAttr::get(ctx, observer));
      if (failed(f.insertArgument(at, ot, a.getDictionary(ctx), loc)))
        return failure();
      OpBuilder b(ctx);
      if (Operation *d = x.getDefiningOp())
        b.setInsertionPointAfter(d);
      else
        b.setInsertionPointToStart(&body);
      auto scalar = RankedTensorType::get({}, b.getF32Type());
      SmallVector<int64_t> axes(cast<RankedTensorType>(x.getType()).getRank());
      for (size_t d = 0; d < axes.size(); ++d)
        axes[d] = (int64_t)d;
      auto all = b.getDenseI64ArrayAttr(axes);
      Value lo = kiln::ReduceMinOp::create(b, loc, x, all, b.getBoolAttr(false));
      Value hi = kiln::ReduceMaxOp::create(b, loc, x, all, b.getBoolAttr(false));
      auto obs = kiln::MinMaxObserveOp::create(
          b, loc, TypeRange{scalar, scalar, ot}, lo, hi, f.getArgument(at),
          b.getF32FloatAttr(averaging), i64(freeze), i64(quant::kActMin),
          i64(quant::kActMax));
      xq = kiln::FakeQuantOp::create(b, loc, x.getType(), x, obs.getScale(),
                                     obs.getZeroPoint(), IntegerAttr(),
                                     i64(quant::kActMin), i64(quant::kActMax));
      quantizedAct[x] = {xq, observer};
    }
    s.op->setOperand(s.actOperand, xq);
    NamedAttrList r;
    r.set("node", i64(nodeIndex));
    r.set("name", StringAttr::get(ctx, nodeName));
    r.set("weight", StringAttr::get(ctx, name(s.param)));
    r.set("axis", i64(s.axis));
    r.set("observer", StringAttr::get(ctx, observer));
    records.push_back(r.getDictionary(ctx));
  }
  m->setAttr(kiln::KilnDialect::getQatSitesAttrName(), ArrayAttr::get(ctx, records));
  return success();
}

} // namespace
