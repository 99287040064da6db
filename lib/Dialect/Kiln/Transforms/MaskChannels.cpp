//===- MaskChannels.cpp - --kiln-mask-channels ------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// Structured channel pruning at step S of a run (docs/Compression.md): the
// classes --kiln-prune-channels at=S found stay full size in the plan; a
// kiln.channel_prune per class chooses, from the weights after step S's
// update, the channels to remove, and from then on every updated parameter
// of the class and its optimizer state is multiplied by 1 - pruned along
// its channel axis after each update. A pruned channel's weights, biases,
// BatchNorm scale and shift and the weights that read it are zero, so the
// plan computes what the smaller model computes; --export-onnx cuts them.
//===----------------------------------------------------------------------===//
#include "kiln/Dialect/Kiln/Transforms/Passes.h"

#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <map>

namespace kiln {
#define GEN_PASS_DEF_KILNMASKCHANNELSPASS
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using kiln::argName;

namespace {

struct MaskChannelsPass
    : public kiln::impl::KilnMaskChannelsPassBase<MaskChannelsPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp m = getOperation();
    auto classes = m->getAttrOfType<ArrayAttr>(kiln::KilnDialect::getChannelClassesAttrName());
    auto f = m.lookupSymbol<func::FuncOp>(kiln::kTrainStepFuncName);
    if (!classes || !f || f.isExternal()) {
      m.emitError("--kiln-mask-channels: needs @train_step and the classes "
                  "--kiln-prune-channels at=S records");
      return signalPassFailure();
    }
    if (failed(mask(f, classes)))
      signalPassFailure();
  }

  LogicalResult mask(func::FuncOp f, ArrayAttr classes);
};

LogicalResult MaskChannelsPass::mask(func::FuncOp f, ArrayAttr classes) {
  MLIRContext *ctx = f.getContext();
  std::map<std::string, unsigned> byName;
  std::optional<unsigned> stepArg;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    byName[argName(f, i)] = i;
    if (argName(f, i) == kiln::kStepInputName)
      stepArg = i;
  }
  if (!stepArg)
    return f.emitError("--kiln-mask-channels: @train_step has no '")
           << kiln::kStepInputName << "'; run --kiln-attach-optimizer first";
  // Each parameter's update: its new value and new optimizer state.
  struct Update {
    Operation *op;
    Value newParam;
    SmallVector<Value, 2> newState;
  };
  std::map<unsigned, Update> updates;
  f.walk([&](Operation *op) {
    Value p, np;
    SmallVector<Value, 2> st;
    if (auto u = dyn_cast<kiln::SgdUpdateOp>(op)) {
      p = u.getParam();
      np = u.getResult();
    } else if (auto u = dyn_cast<kiln::MomentumUpdateOp>(op)) {
      p = u.getParam();
      np = u.getNewParam();
      st.push_back(u.getNewBuf());
    } else if (auto u = dyn_cast<kiln::AdamUpdateOp>(op)) {
      p = u.getParam();
      np = u.getNewParam();
      st.push_back(u.getNewM());
      st.push_back(u.getNewV());
    } else {
      return;
    }
    if (auto a = dyn_cast<BlockArgument>(p))
      updates[a.getArgNumber()] = {op, np, st};
  });
  Block &body = f.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Value> masks; // returned after the existing results
  SmallVector<DictionaryAttr> resAttrs;
  f.getAllResultAttrs(resAttrs);
  auto f32 = Float32Type::get(ctx);
  // Every class ranks its channels on the weights as this step's update
  // left them, before any class masks them.
  std::map<unsigned, Value> updated;
  for (auto &[arg, u] : updates)
    updated[arg] = u.newParam;
  // Every updated parameter of a class (and its optimizer state) times
  // 1 - pruned along its channel axis; `prune` (the class's channel_prune,
  // if any) keeps reading the unmasked value.
  auto maskParams = [&](DictionaryAttr d, Value pruned, int64_t c, OpBuilder &b,
                        Location loc, Operation *prune) -> LogicalResult {
    Value one = kiln::ConstantOp::create(
        b, loc, DenseElementsAttr::get(RankedTensorType::get({}, f32), b.getF32FloatAttr(1.0f)));
    Value keepV = kiln::SubOp::create(b, loc, one, pruned);
    auto axes = d.getAs<DenseI64ArrayAttr>("axes");
    auto blocks = d.getAs<DenseI64ArrayAttr>("blocks");
    for (auto [i, n] : llvm::enumerate(d.getAs<ArrayAttr>("params"))) {
      auto it = byName.find(cast<StringAttr>(n).getValue().str());
      if (it == byName.end() || !updates.count(it->second))
        continue; // not trained (BatchNorm's running statistics): cut at export
      Update &u = updates[it->second];
      auto t = cast<RankedTensorType>(u.newParam.getType());
      int64_t axis = axes[i], block = blocks[i];
      Value kv = keepV;
      if (block > 1) {
        kv = kiln::ReshapeOp::create(b, loc, RankedTensorType::get({c, 1}, f32), kv);
        kv = kiln::BroadcastOp::create(b, loc, RankedTensorType::get({c, block}, f32), kv);
        kv = kiln::ReshapeOp::create(b, loc, RankedTensorType::get({c * block}, f32), kv);
      }
      SmallVector<int64_t> shape(t.getRank(), 1);
      shape[axis] = c * block;
      if (t.getRank() != 1)
        kv = kiln::ReshapeOp::create(b, loc, RankedTensorType::get(shape, f32), kv);
      auto masked = kiln::MulOp::create(b, loc, u.newParam, kv);
      SmallPtrSet<Operation *, 2> keep{masked.getOperation()};
      if (prune)
        keep.insert(prune);
      u.newParam.replaceAllUsesExcept(masked, keep);
      u.newParam = masked;
      for (Value &st : u.newState) {
        auto ms = kiln::MulOp::create(b, loc, st, kv);
        st.replaceAllUsesExcept(ms, ms.getOperation());
        st = ms;
      }
    }
    return success();
  };
  int64_t k = 0;
  SmallVector<Value> prunedOf; // per entry: its [C] mask after this step
  for (Attribute a : classes) {
    auto d = cast<DictionaryAttr>(a);
    int64_t c = d.getAs<IntegerAttr>("channels").getInt();
    int64_t keep = d.getAs<IntegerAttr>("keep").getInt();
    auto maskType = RankedTensorType::get({c}, f32);
    if (auto parts = d.getAs<DenseI64ArrayAttr>("parts")) {
      // A concat's result: its parts' masks side by side (a whole part
      // keeps all of its channels); no state of its own.
      ++k;
      OpBuilder b(ret);
      Location loc = f.getLoc();
      auto sizes = d.getAs<DenseI64ArrayAttr>("part_channels");
      SmallVector<Value> pieces;
      for (auto [i, e] : llvm::enumerate(parts.asArrayRef())) {
        if (e >= 0 && e < (int64_t)prunedOf.size() && prunedOf[e]) {
          pieces.push_back(prunedOf[e]);
          continue;
        }
        auto t = RankedTensorType::get({sizes[i]}, f32);
        pieces.push_back(kiln::ConstantOp::create(
            b, loc, DenseElementsAttr::get(t, b.getF32FloatAttr(0.0f))));
      }
      Value cat = kiln::ConcatOp::create(b, loc, pieces, b.getI64IntegerAttr(0));
      if (cast<RankedTensorType>(cat.getType()).getDimSize(0) != c)
        return f.emitError("--kiln-mask-channels: a concat's class of ")
               << c << " channels has parts of another total";
      prunedOf.push_back(cat);
      if (selectOnly)
        continue;
      if (failed(maskParams(d, cat, c, b, loc, nullptr)))
        return failure();
      continue;
    }
    std::string maskName = "channels/" + std::to_string(k++) + "/pruned";
    NamedAttrList ma;
    ma.set("onnx.name", StringAttr::get(ctx, maskName));
    kiln::addParamAttrs(ctx, ma, kiln::ParamRole::Optimizer, kiln::ParamInit::Zeros);
    unsigned at = f.getNumArguments();
    Location loc = NameLoc::get(StringAttr::get(ctx, maskName));
    if (failed(f.insertArgument(at, maskType, ma.getDictionary(ctx), loc)))
      return failure();
    Value maskArg = f.getArgument(at);
    // The producers' values after their updates.
    SmallVector<Value> prods;
    for (Attribute n : d.getAs<ArrayAttr>("producers")) {
      auto it = byName.find(cast<StringAttr>(n).getValue().str());
      if (it == byName.end() || !updates.count(it->second))
        return f.emitError("--kiln-mask-channels: producer '")
               << cast<StringAttr>(n).getValue() << "' has no optimizer update";
      prods.push_back(updated[it->second]);
    }
    // At the end of the step, after every update (a parameter in two
    // classes, as a conv's weight along its output and input channels, is
    // masked by both in turn).
    OpBuilder b(ret);
    auto prune = kiln::ChannelPruneOp::create(
        b, loc, maskType, prods, maskArg, f.getArgument(*stepArg),
        d.getAs<DenseI64ArrayAttr>("producer_axes"),
        d.getAs<DenseI64ArrayAttr>("producer_blocks"), b.getI64IntegerAttr(keep),
        b.getI64IntegerAttr(d.getAs<IntegerAttr>("at").getInt()));
    Value pruned = prune.getNewPruned();
    masks.push_back(pruned);
    prunedOf.push_back(pruned);
    NamedAttrList r;
    r.set("onnx.name", StringAttr::get(ctx, maskName));
    r.set(kiln::KilnDialect::getUpdateAttrName(), b.getI64IntegerAttr(at));
    resAttrs.push_back(r.getDictionary(ctx));
    if (selectOnly)
      continue; // the run continues on the smaller plan after step S
    if (failed(maskParams(d, pruned, c, b, loc, prune.getOperation())))
      return failure();
  }
  // The return as the masking left it (its operands now the masked
  // values), then the masks.
  SmallVector<Value> results(ret.getOperands());
  results.append(masks.begin(), masks.end());
  OpBuilder rb(ret);
  func::ReturnOp::create(rb, ret.getLoc(), results);
  ret.erase();
  SmallVector<Type> types;
  for (Value v : results)
    types.push_back(v.getType());
  f.setType(FunctionType::get(ctx, f.getArgumentTypes(), types));
  f.setAllResultAttrs(resAttrs);
  return success();
}

} // namespace
