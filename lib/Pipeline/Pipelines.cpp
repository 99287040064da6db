//===- Pipelines.cpp - Kiln's compilation pipelines -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#include "kiln/Pipeline/Pipelines.h"

#include "kiln/Conversion/ONNXToKiln/ONNXToKiln.h"
#include "kiln/Conversion/Passes.h"
#include "kiln/Dialect/KRT/Transforms/Passes.h"
#include "kiln/Dialect/Kiln/Transforms/Passes.h"
#include "kiln/Dialect/Kiln/Transforms/Sharding.h"
#include "kiln/Dialect/Dist/Transforms/Passes.h"
#include "kiln/InitAllDialects.h"
#include "kiln/Target/Plan/ExportPlan.h"
#include "kiln/Target/Plan/PlanDType.h"
#include "kiln/Target/ONNX/Rewrite.h"
#include "kiln/runtime/InputFile.h"
#include "kiln/Support/TensorSize.h"
#include "kiln/runtime/TrainConfig.h"
#include "kiln/runtime/TrainPayload.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"

#include <cmath>

using namespace mlir;

void kiln::buildONNXToKilnPipeline(OpPassManager &pm) {
  pm.addPass(createConvertONNXToKilnPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void kiln::buildKilnToRuntimePipeline(OpPassManager &pm) {
  pm.addPass(createKilnLowerToRuntimePass());
  pm.addPass(krt::createKilnAssignBuffersPass());
}

namespace {
/// Keeps the first error as one line ("loc: message").
struct FirstError {
  std::string text;
  std::vector<std::string> *warnings = nullptr;
  void note(Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Warning && warnings) {
      warnings->push_back(d.str());
      return;
    }
    if (d.getSeverity() != DiagnosticSeverity::Error || !text.empty())
      return;
    llvm::raw_string_ostream os(text);
    if (auto file = dyn_cast<FileLineColLoc>(d.getLocation()))
      os << file.getFilename().getValue() << ":" << file.getLine() << ": ";
    std::string message = d.str();
    if (auto name = dyn_cast<NameLoc>(d.getLocation())) {
      // Conversion errors already start "node 'NAME' (Op): "; name the node
      // only for messages that do not.
      std::string prefix = ("node '" + name.getName().getValue() + "'").str();
      if (!StringRef(message).starts_with(prefix))
        os << prefix << ": ";
    }
    os << message;
    for (char &c : text)
      if (c == '\n')
        c = ' ';
  }
};
} // namespace

bool kiln::compileONNXToPlan(const std::string &path,
                             const ImportOptions &opts, CompileResult &result) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  FirstError first;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    first.note(d);
    return success();
  });
  auto fail = [&](const char *stage) {
    result.stage = stage;
    result.error = first.text.empty() ? std::string(stage) + " failed"
                                      : first.text;
    return false;
  };

  ParamData params;
  ImportOptions importOpts = opts;
  importOpts.paramData = &params;
  OwningOpRef<ModuleOp> module = importONNX(path, ctx, importOpts);
  if (!module)
    return fail("import");
  {
    PassManager pm(&ctx);
    buildONNXToKilnPipeline(pm);
    if (failed(pm.run(*module)))
      return fail("convert");
  }
  {
    PassManager pm(&ctx);
    buildKilnToRuntimePipeline(pm);
    if (failed(pm.run(*module)))
      return fail("lower");
  }
  if (failed(exportPlan(*module, kForwardFuncName, params, result.plan)))
    return fail("plan");
  if (auto f = module->lookupSymbol<func::FuncOp>(kForwardFuncName))
    if (auto a = f->getAttrOfType<IntegerAttr>(
            krt::KRTDialect::getArenaBytesAttrName()))
      result.arenaBytes = a.getInt();
  return true;
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

bool kiln::resolveLossScale(const TrainCompileOptions &opts,
                            LossScaleChoice &out, std::string &err) {
  // Dynamic by default for fp16, off otherwise.
  std::string mode = opts.lossScale.empty()
                         ? (opts.precision == "fp16" ? "dynamic" : "none")
                         : opts.lossScale;
  out = LossScaleChoice();
  out.on = mode != "none";
  out.dynamic = mode == "dynamic";
  if (out.on && !out.dynamic) {
    if (!llvm::to_float(mode, out.staticScale) || !(out.staticScale > 0) ||
        !std::isfinite(out.staticScale) || out.staticScale > 3.0e38) {
      err = "--loss-scale must be dynamic, none or a positive finite scale, "
            "got '" + mode + "'";
      return false;
    }
  }
  if (!(opts.initScale > 0) || !std::isfinite(opts.initScale) ||
      opts.initScale > 3.0e38) {
    err = "--init-scale must be a positive float32 scale, got " +
          std::to_string(opts.initScale);
    return false;
  }
  return true;
}

namespace {
/// "parameters A -> B (x%)": what channel pruning leaves of the model.
std::string prunedParamsText(int64_t before, int64_t after) {
  char frac[64];
  std::snprintf(frac, sizeof frac, "%.1f%%",
                100.0 * (double)after / (double)std::max<int64_t>(before, 1));
  return "parameters " + std::to_string(before) + " -> " + std::to_string(after) +
         " (" + frac + ")";
}
} // namespace

bool kiln::compileONNXToTraining(const std::string &path,
                                 const TrainCompileOptions &opts,
                                 TrainCompileResult &result) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  FirstError first;
  first.warnings = &result.warnings;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    first.note(d);
    return success();
  });
  auto fail = [&](const char *stage) {
    result.stage = stage;
    result.error = first.text.empty() ? std::string(stage) + " failed"
                                      : first.text;
    return false;
  };
  auto failWith = [&](const char *stage, const std::string &msg) {
    result.stage = stage;
    result.error = msg;
    return false;
  };

  std::string bytes, readErr;
  if (!rt::readRegularFile(path, bytes, readErr))
    return failWith("import", readErr);

  if (opts.dp < 1)
    return failWith("mesh", "dp must be at least 1, got " +
                                std::to_string(opts.dp));
  if (opts.dp > 1 && opts.import.batchSize <= 0)
    return failWith("mesh", "--mesh dp=" + std::to_string(opts.dp) +
                                " needs --batch-size (the global batch)");
  if (opts.tp < 1)
    return failWith("mesh", "tp must be at least 1, got " +
                                std::to_string(opts.tp));
  if (opts.ep < 1)
    return failWith("mesh", "ep must be at least 1, got " + std::to_string(opts.ep));
  if (opts.ep > 1 && opts.tp > 1)
    return failWith("mesh", "a mesh with both ep and tp is not supported yet "
                            "(dp x ep and dp x tp are)");
  if ((opts.ep > 1 || opts.tp > 1) && opts.zero > 0 && opts.dp < 2)
    return failWith("mesh", "--zero shards the optimizer state over dp: it "
                            "needs --mesh dp=N,... with N > 1");
  if (opts.ep > 1 && opts.pruneAt > 0 &&
      (opts.pruneChannels >= 0 || opts.pruneSparsity >= 0))
    return failWith("mesh", "pruning during the run with expert parallelism "
                            "(--mesh ...,ep=E) is not supported yet");
  if (opts.ep > 1 && (opts.import.batchSize <= 0 ||
                      opts.import.batchSize % (opts.dp * opts.ep)))
    return failWith("mesh", "the global batch " + std::to_string(opts.import.batchSize) +
                                " does not divide over the " +
                                std::to_string(opts.dp * opts.ep) +
                                " ranks of dp x ep (expert parallelism's ranks "
                                "each take their share of the batch)");

  if (opts.tp > 1 && opts.pruneAt > 0 &&
      (opts.pruneChannels >= 0 || opts.pruneSparsity >= 0))
    return failWith("mesh", "pruning during the run with tensor parallelism "
                            "(--mesh ...,tp=N) is not supported yet: the "
                            "pruned elements are chosen over whole weights");
  if (opts.dp > 1 && opts.import.batchSize % opts.dp)
    return failWith("mesh", "the global batch " +
                                std::to_string(opts.import.batchSize) +
                                " does not divide over dp=" +
                                std::to_string(opts.dp) + " ranks");
  if (opts.microbatches < 1)
    return failWith("microbatch", "--microbatches must be at least 1, got " +
                                      std::to_string(opts.microbatches));
  if (opts.microbatches > 1 &&
      (opts.import.batchSize <= 0 ||
       opts.import.batchSize % (opts.microbatches * opts.dp * opts.ep)))
    return failWith("microbatch",
                    "--microbatches " + std::to_string(opts.microbatches) +
                        " does not divide the batch: the global batch " +
                        std::to_string(opts.import.batchSize) +
                        " must be a multiple of " +
                        std::to_string(opts.microbatches * opts.dp * opts.ep) +
                        " (microbatches x data-parallel ranks)");
  if (opts.pp < 1)
    return failWith("mesh", "pp must be at least 1, got " + std::to_string(opts.pp));
  if (opts.pp > 1) {
    // What pipeline parallelism does not compose with yet, each said once.
    auto notYet = [&](const std::string &what) {
      return failWith("mesh", "--mesh pp=" + std::to_string(opts.pp) + " with " +
                                  what + " is not supported yet");
    };
    if (opts.ep > 1)
      return notYet("an ep axis (pp x dp, pp x tp and pp x dp x tp are)");
    if (opts.pruneAt > 0 || opts.pruneChannels >= 0 || opts.pruneSparsity >= 0)
      return notYet("--prune");
    if (!opts.teacher.empty())
      return notYet("--teacher");
    if (opts.optimizer == "none")
      return notYet("--optimizer none");
  }
  ParamData params;
  // At the global batch: --kiln-data-parallel splits it over the ranks.
  ImportOptions importOpts = opts.import;
  importOpts.paramData = &params;
  importOpts.overrideBatch = importOpts.batchSize > 0;
  // Microbatches: the step is built for one (--kiln-microbatch then
  // feeds it the M microbatches of the global batch).
  if (opts.microbatches > 1)
    importOpts.batchSize /= opts.microbatches;
  // --shard may name activations: keep the ONNX value names.
  importOpts.valueNames = !opts.shard.empty() || !opts.stageBoundaries.empty();
  OwningOpRef<ModuleOp> module = importONNX(path, ctx, importOpts);
  if (!module)
    return fail("import");
  // The driver's names for the pass options' enums (kiln-compile checked
  // them; a caller that did not gets the same one-line error).
  std::optional<LossKind> loss = symbolizeLossKind(opts.loss);
  if (!loss)
    return failWith("loss", "unknown loss '" + opts.loss + "'");
  std::optional<BNRunningVar> bnRunningVar =
      symbolizeBNRunningVar(opts.bnRunningVar);
  if (!bnRunningVar)
    return failWith("autodiff",
                    "unknown bn-running-var '" + opts.bnRunningVar + "'");
  // "none" keeps the gradients as results (gradient checks, debugging).
  bool attachOptimizer = opts.optimizer != "none";
  std::optional<OptimizerKind> optimizer =
      symbolizeOptimizerKind(opts.optimizer);
  if (attachOptimizer && !optimizer)
    return failWith("autodiff", "unknown optimizer '" + opts.optimizer + "'");

  {
    PassManager pm(&ctx);
    buildONNXToKilnPipeline(pm);
    KilnAttachLossPassOptions lo;
    lo.loss = *loss;
    lo.logits = opts.logits;
    lo.labels = opts.labels;
    lo.lossOutput = opts.lossOutput;
    lo.softLabels = opts.softLabels;
    pm.addPass(createKilnAttachLossPass(lo));
    if (failed(pm.run(*module)))
      return fail("loss");
  }
  if (opts.pruneChannels >= 0) {
    // On the model as imported: every later pass sees the smaller shapes.
    ChannelPruning io;
    io.params = &params;
    PassManager pm(&ctx);
    KilnPruneChannelsPassOptions po;
    po.ratio = opts.pruneChannels;
    po.at = opts.pruneAt;
    po.maskable = opts.pruneMaskable;
    pm.addPass(createKilnPruneChannelsPass(po, &io));
    if (failed(pm.run(*module)))
      return fail("prune");
    if (io.layers.empty())
      return failWith("prune", "--prune l1-channel: no layer has channels to "
                               "prune (every convolution's and Linear's output "
                               "reaches a model output or an op that needs it "
                               "whole)");
    std::string s;
    if (opts.pruneAt == 0) {
      std::string pruned, perr;
      if (!pruneONNXInitializers(bytes, io.kept, pruned, perr))
        return failWith("prune", "--prune l1-channel: " + perr);
      result.model = std::move(pruned);
      s = "pruned " + std::to_string(io.layers.size()) + " layers' channels (";
    } else {
      s = "at step " + std::to_string(opts.pruneAt) + " prunes " +
          std::to_string(io.layers.size()) + " layers' channels (";
    }
    for (size_t i = 0; i < io.layers.size(); ++i)
      s += (i ? ", " : "") + io.layers[i].weight + " " +
           std::to_string(io.layers[i].before) + "->" + std::to_string(io.layers[i].after);
    if (opts.pruneAt == 0) {
      result.paramsBefore = io.paramsBefore;
      result.paramsAfter = io.paramsAfter;
      s += "); " + prunedParamsText(io.paramsBefore, io.paramsAfter);
    } else {
      s += ")";
    }
    for (const std::string &w : io.warnings)
      s += "\nkiln-compile: warning: " + w;
    result.pruneSummary = s;
  }
  if (opts.qat) {
    // Before the precision pass (the fake quantization computes in f32)
    // and the eval copy (evaluation sees the quantized model).
    PassManager pm(&ctx);
    KilnQuantizeAwarePassOptions qo;
    if (opts.qatFreeze > 0)
      qo.freeze = opts.qatFreeze;
    pm.addPass(createKilnQuantizeAwarePass(qo));
    if (failed(pm.run(*module)))
      return fail("qat");
  }
  if (opts.precision != "fp32") {
    std::optional<LowPrecision> low = symbolizeLowPrecision(opts.precision);
    if (!low)
      return failWith("precision", "unknown precision '" + opts.precision +
                                       "' (expected fp32, bf16 or fp16)");
    const ONNXPatternRegistry &onnxOps = getONNXPatternRegistry();
    for (const std::string &t : opts.fp32Ops)
      if (!onnxOps.knowsOpType("", t))
        return failWith("precision", "--fp32-ops: '" + t +
                                         "' is not an ONNX op type Kiln "
                                         "imports (names are case-sensitive, "
                                         "as Softmax)");
    // Before the eval copy: evaluation computes in the training precision.
    PassManager pm(&ctx);
    KilnMixedPrecisionPassOptions mo;
    mo.dtype = *low;
    mo.fp32Ops.assign(opts.fp32Ops.begin(), opts.fp32Ops.end());
    pm.addPass(createKilnMixedPrecisionPass(mo));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    if (failed(pm.run(*module)))
      return fail("precision");
  }
  OwningOpRef<ModuleOp> evalModule = module->clone();

  // Distillation after the eval copy: evaluation is the student's alone.
  if (!opts.teacher.empty()) {
    if (*loss != LossKind::CrossEntropy || opts.softLabels)
      return failWith("distill", "--teacher needs --loss cross-entropy with "
                                 "class labels");
    if (opts.qat || opts.precision != "fp32")
      return failWith("distill", "--teacher with --qat or --precision is not "
                                 "supported yet");
    std::string teacherBytes;
    if (!rt::readRegularFile(opts.teacher, teacherBytes, readErr))
      return failWith("distill", "--teacher: " + readErr);
    ParamData teacherParams;
    ImportOptions to = opts.import;
    to.paramData = &teacherParams;
    to.overrideBatch = to.batchSize > 0;
    OwningOpRef<ModuleOp> tm = importONNX(opts.teacher, ctx, to);
    if (!tm)
      return fail("teacher");
    {
      PassManager pm(&ctx);
      buildONNXToKilnPipeline(pm);
      if (failed(pm.run(*tm)))
        return fail("teacher");
    }
    auto tf = tm->lookupSymbol<func::FuncOp>(kForwardFuncName);
    if (!tf)
      return failWith("teacher", "--teacher: the model has no forward function");
    // Its parameters as "teacher/<name>", apart from the student's.
    for (unsigned i = 0; i < tf.getNumArguments(); ++i)
      if (isParam(tf, i))
        if (auto n = tf.getArgAttrOfType<StringAttr>(i, "onnx.name"))
          tf.setArgAttr(i, "onnx.name",
                        StringAttr::get(&ctx, "teacher/" + n.getValue().str()));
    for (auto &[name, bytes] : teacherParams)
      params["teacher/" + name] = std::move(bytes);
    tf->remove();
    tf.setName("teacher");
    module->push_back(tf);
    PassManager pm(&ctx);
    KilnDistillPassOptions d;
    d.alpha = opts.distillAlpha;
    d.temperature = opts.distillTemperature;
    d.logits = opts.logits;
    pm.addPass(createKilnDistillPass(d));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    if (failed(pm.run(*module)))
      return fail("distill");
  }

  // Tensor parallelism by strategy: on @forward (autodiff copies the
  // shardings to @train_step), after the eval copy (evaluation runs the
  // model whole, in its own shapes).
  int64_t dp = opts.dp, tp = opts.tp, ep = opts.ep;
  // Expert parallelism: the stacked expert weights split by expert.
  if (ep > 1) {
    PassManager pm(&ctx);
    KilnExpertParallelPassOptions eo;
    eo.ep = ep;
    pm.addPass(createKilnExpertParallelPass(eo));
    if (failed(pm.run(*module)))
      return fail("ep");
    int64_t layers = 0, params = 0, experts = 0;
    if (auto found = (*module)->getAttrOfType<ArrayAttr>(KilnDialect::getEpLayersAttrName()))
      for (Attribute a : found) {
        auto d = cast<DictionaryAttr>(a);
        ++layers;
        params += (int64_t)d.getAs<ArrayAttr>("params").size();
        experts = d.getAs<IntegerAttr>("experts").getInt();
      }
    if (!layers) {
      // Say so and go on as data parallelism over all the ranks.
      result.warnings.push_back(
          "--mesh ep=" + std::to_string(ep) + " found no expert layer (a batched "
          "matmul by stacked expert weights [E, in, out]) to split; the " +
          std::to_string(dp * ep) + " ranks train as data parallelism (dp=" +
          std::to_string(dp * ep) + ")");
      dp *= ep;
      ep = 1;
    } else {
      result.tpSummary = "--mesh ep=" + std::to_string(ep) + ": " +
                         std::to_string(layers) + " expert projection" +
                         (layers == 1 ? "" : "s") + " (" + std::to_string(params) +
                         " parameters) split by expert, " +
                         std::to_string(experts / ep) + " of " +
                         std::to_string(experts) + " experts per rank";
    }
  }
  // The strategy split an LM head: its cross-entropy is expanded so the
  // logits stay split.
  bool vocabParallel = false;
  if (!opts.tpStrategy.empty()) {
    if (opts.tpStrategy != "megatron")
      return failWith("mesh", "--tp: unknown strategy '" + opts.tpStrategy +
                                  "' (megatron)");
    if (tp < 2)
      return failWith("mesh", "--tp megatron splits blocks over the tensor-"
                              "parallel ranks: it needs --mesh tp=M (or "
                              "dp=N,tp=M) with M > 1");
    PassManager pm(&ctx);
    KilnTpMegatronPassOptions mo;
    mo.tp = tp;
    mo.sequenceParallel = opts.sequenceParallel;
    if (dp > 1)
      mo.batchAxis = "dp";
    pm.addPass(createKilnTpMegatronPass(mo));
    if (failed(pm.run(*module)))
      return fail("tp");
    int64_t attention = 0, mlp = 0, embedding = 0;
    if (auto blocks = (*module)->getAttrOfType<ArrayAttr>(KilnDialect::getTpBlocksAttrName()))
      for (Attribute a : blocks) {
        StringRef kind = cast<DictionaryAttr>(a).getAs<StringAttr>("kind").getValue();
        attention += kind == "attention";
        mlp += kind == "mlp";
        embedding += kind == "embedding";
        vocabParallel |= kind == "lm_head";
      }
    if (attention + mlp + embedding == 0 && !vocabParallel) {
      // Say so and go on as data parallelism over all the ranks.
      if (opts.import.batchSize <= 0 || opts.import.batchSize % (dp * tp))
        return failWith("mesh", "--tp megatron found no attention or MLP block "
                                "to split, and the global batch " +
                                    std::to_string(opts.import.batchSize) +
                                    " does not divide over the " +
                                    std::to_string(dp * tp) +
                                    " ranks as data parallelism");
      result.warnings.push_back(
          "--tp megatron found no attention or MLP block to split; the " +
          std::to_string(dp * tp) + " ranks train as data parallelism (dp=" +
          std::to_string(dp * tp) + ")");
      dp *= tp;
      tp = 1;
    } else {
      std::vector<std::string> found;
      auto count = [](int64_t n, const char *what) {
        return std::to_string(n) + " " + what + (n == 1 ? " block" : " blocks");
      };
      if (attention)
        found.push_back(count(attention, "attention"));
      if (mlp)
        found.push_back(count(mlp, "MLP"));
      if (embedding)
        found.push_back("the token embedding");
      if (vocabParallel)
        found.push_back("the LM head");
      std::string list;
      for (size_t k = 0; k < found.size(); ++k)
        list += (k ? (k + 1 == found.size() ? " and " : ", ") : "") + found[k];
      result.tpSummary = "--tp megatron: " + list + " split over tp=" +
                         std::to_string(tp) +
                         (embedding || vocabParallel ? " (vocab-parallel)" : "");
    }
  }

  double lr = opts.lr >= 0 ? opts.lr : defaultLr(opts.optimizer);
  double wd = opts.weightDecay >= 0
                  ? opts.weightDecay
                  : (optimizer == OptimizerKind::AdamW ? 0.01 : 0.0);
  LossScaleChoice scaling;
  std::string scaleErr;
  if (!resolveLossScale(opts, scaling, scaleErr))
    return failWith("loss scale", scaleErr);
  bool lossScaling = scaling.on;
  double staticScale = scaling.staticScale;
  if (lossScaling && !attachOptimizer)
    return failWith("loss scale", "--loss-scale needs an optimizer (it skips "
                                  "the update of a step with non-finite "
                                  "gradients)");
  // Pipeline stages on @forward: autodiff gives each op's VJP its stage.
  const int64_t modelStages = opts.pp * opts.virtualStages;
  if (opts.pp > 1) {
    PassManager pm(&ctx);
    KilnPipelineStagesPassOptions so;
    so.stages = modelStages;
    so.boundaries.assign(opts.stageBoundaries.begin(), opts.stageBoundaries.end());
    so.costs = opts.stageCosts;
    pm.addPass(createKilnPipelineStagesPass(so));
    if (failed(pm.run(*module)))
      return fail("pipeline");
  }
  {
    PassManager pm(&ctx);
    KilnAutodiffPassOptions ao;
    ao.freeze = opts.freeze;
    ao.bnRunningVar = *bnRunningVar;
    ao.lossScale = lossScaling;
    ao.breakVJP = opts.testBreakVJP;
    pm.addPass(createKilnAutodiffPass(ao));
    if (opts.syncBatchNorm)
      pm.addPass(createKilnExpandBatchNormPass());
    // A loss averaged over valid labels splits over the ranks as a sum
    // over a count (its mean form keeps the batch whole).
    if (dp > 1 || ep > 1 || vocabParallel)
      pm.addPass(createKilnExpandLossMeanPass());
    // A vocab-parallel LM head: the loss and its gradient on split logits.
    if (vocabParallel)
      pm.addPass(createKilnExpandCrossEntropyPass());
    // Gradient accumulation: forward and backward once per microbatch (on
    // the global batch, so that dp then splits each microbatch).
    if (opts.microbatches > 1) {
      KilnMicrobatchPassOptions mbo;
      mbo.microbatches = opts.microbatches;
      pm.addPass(createKilnMicrobatchPass(mbo));
    }
    // The batch split over the ranks, the gradients summed over them before
    // the optimizer sees them.
    KilnDataParallelPassOptions dpo;
    dpo.dp = dp;
    dpo.tp = tp;
    dpo.ep = ep;
    for (const std::string &a : opts.shard)
      dpo.shard += (dpo.shard.empty() ? "" : ";") + a;
    dpo.compression = opts.gradCompression;
    pm.addPass(createKilnDataParallelPass(dpo));
    KilnAttachOptimizerPassOptions oo;
    if (optimizer)
      oo.optimizer = *optimizer;
    oo.momentum = opts.momentum;
    oo.nesterov = opts.nesterov;
    oo.weightDecay = wd;
    oo.beta1 = opts.beta1;
    oo.beta2 = opts.beta2;
    oo.eps = opts.eps;
    oo.clipNorm = opts.clipNorm;
    oo.lossScale = lossScaling;
    if (attachOptimizer)
      pm.addPass(createKilnAttachOptimizerPass(oo));
    if (opts.pruneChannels >= 0 && opts.pruneAt > 0) {
      if (!attachOptimizer)
        return failWith("prune", "--prune l1-channel --prune-at needs an "
                                 "optimizer (the channels are cut after an update)");
      if (opts.zero > 0)
        return failWith("prune", "--prune l1-channel --prune-at with --zero is "
                                 "not supported yet: the channels are chosen over "
                                 "whole weights, which ZeRO updates in shards");
      if (opts.gradCompression != "none")
        return failWith("prune", "--prune l1-channel --prune-at with "
                                 "--grad-compression is not supported yet: the "
                                 "compression's residuals are sized for the "
                                 "full plan the run leaves after step S");
      // The run switches to the smaller plan after step S: the full plan
      // only chooses the channels.
      KilnMaskChannelsPassOptions mo;
      mo.selectOnly = true;
      pm.addPass(createKilnMaskChannelsPass(mo));
    }
    if (opts.pruneSparsity >= 0) {
      if (!attachOptimizer)
        return failWith("prune", "--prune needs an optimizer (pruning follows "
                                 "each update)");
      if (opts.zero > 0)
        return failWith("prune", "--prune with --zero is not supported yet: "
                                 "the pruned elements are chosen over the whole "
                                 "weight, which ZeRO updates in shards");
      KilnPruneMagnitudePassOptions po;
      po.sparsity = opts.pruneSparsity;
      po.start = opts.pruneAt;
      po.end = opts.pruneEnd < 0 ? opts.pruneAt : opts.pruneEnd;
      po.every = opts.pruneEvery;
      pm.addPass(createKilnPruneMagnitudePass(po));
    }
    if (attachOptimizer && dp > 1 && opts.zero > 0) {
      KilnZeroPassOptions zo;
      zo.stage = opts.zero;
      pm.addPass(createKilnZeroPass(zo));
    }
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    // Buckets once the optimizer reads the gradients: each waits where the
    // first update needs it.
    if (dp > 1) {
      dist::KilnBucketAllReducePassOptions bo;
      bo.bucketMB = opts.bucketMB;
      pm.addNestedPass<func::FuncOp>(dist::createKilnBucketAllReducePass(bo));
    }
    if (failed(pm.run(*module)))
      return fail("autodiff");
  }
  // The training module keeps only @train_step.
  if (auto fwd = module->lookupSymbol<func::FuncOp>(kForwardFuncName))
    fwd.erase();
  auto step = module->lookupSymbol<func::FuncOp>(kTrainStepFuncName);
  // Activation recompute on the step as it runs: here for one program,
  // after the pipeline split for a pipeline's rank programs (their order
  // is the schedule's). No CSE runs after it.
  const bool recomputing = opts.recompute != "none" || opts.memoryBudgetMb > 0;
  auto addRecompute = [&](PassManager &pm) {
    KilnRecomputePassOptions ro;
    ro.mode = opts.recompute;
    ro.budgetMb = opts.memoryBudgetMb;
    pm.addPass(createKilnRecomputePass(ro));
  };
  if (recomputing && opts.pp < 2) {
    PassManager pm(&ctx);
    addRecompute(pm);
    if (failed(pm.run(*module)))
      return fail("recompute");
  }
  {
    llvm::raw_string_ostream os(result.mlir);
    module->print(os);
  }

  // The executable's config, from @train_step's signature. Every key comes
  // from the runtime's field table (kiln/runtime/TrainConfig.h), which the
  // reader and the schema follow too.
  using K = rt::TrainConfigKey;
  auto key = [](K k) { return llvm::StringRef(rt::trainConfigKey(k)); };
  llvm::json::Array data;
  int64_t batch = dp * ep > 1 ? opts.import.batchSize / (dp * ep)
                              : opts.import.batchSize;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    if (isParam(step, i))
      continue;
    auto name = step.getArgAttrOfType<StringAttr>(i, "onnx.name");
    std::string n = name ? name.getValue().str() : "arg" + std::to_string(i);
    if (n == kLrInputName || n == kStepInputName || n == kLossScaleInputName)
      continue;
    auto t = cast<RankedTensorType>(step.getArgument(i).getType());
    if (t.getRank() < 1)
      return failWith("config", "input '" + n +
                                    "' is a scalar; training data needs a "
                                    "batch axis 0");
    if (batch <= 0)
      batch = t.getDimSize(0);
    if (t.getDimSize(0) != batch)
      return failWith("config", "input '" + n + "' has " +
                                    std::to_string(t.getDimSize(0)) +
                                    " rows on axis 0, the batch is " +
                                    std::to_string(batch) +
                                    "; every input needs the batch on axis 0");
    // The executable reads batch x sample elements of each input a step:
    // that size must hold (kiln/runtime/CheckedMath.h).
    int64_t stepBytes;
    if (!checkedTypeBytes(t, stepBytes))
      return failWith("config",
                      tooLargeText("input '" + n + "'", t) + " (the batch, " +
                          std::to_string(batch) + ", times a sample of " +
                          tensorTypeText(RankedTensorType::get(
                              t.getShape().drop_front(), t.getElementType())) +
                          ")");
    std::optional<rt::DType> dt = planDType(t.getElementType());
    if (!dt)
      return failWith("config", "input '" + n + "' has element type " +
                                    llvm::formatv("{0}", t.getElementType()).str() +
                                    ", which has no plan dtype");
    llvm::json::Array shape;
    for (int64_t d : t.getShape().drop_front())
      shape.push_back(d);
    data.push_back(llvm::json::Object{{key(K::DataName), n},
                                      {key(K::DataDType), rt::dtypeName(*dt)},
                                      {key(K::DataSampleShape), std::move(shape)}});
  }
  llvm::json::Value numClasses = nullptr;
  if (loss == LossKind::CrossEntropy)
    step.walk([&](kiln::SoftmaxCrossEntropyOp ce) {
      auto lt = cast<RankedTensorType>(ce.getLogits().getType());
      numClasses = lt.getDimSize(ce.getClassAxis());
    });
  // Soft labels have the logits' shape: the class axis is their last.
  if (loss == LossKind::CrossEntropy && opts.softLabels)
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (auto n = step.getArgAttrOfType<StringAttr>(i, "onnx.name"))
        if (n.getValue() == opts.labels && !isParam(step, i))
          numClasses = cast<RankedTensorType>(step.getArgument(i).getType())
                           .getShape()
                           .back();
  auto digest = llvm::SHA256::hash(llvm::arrayRefFromStringRef(bytes));
  llvm::json::Object config{
      {key(K::Format), rt::kTrainConfigFormat},
      {key(K::Version), rt::kTrainConfigVersion},
      {key(K::Model), llvm::sys::path::filename(path).str()},
      {key(K::ModelSha256), llvm::toHex(digest, /*LowerCase=*/true)},
      {key(K::BatchSize), batch},
      {key(K::Loss), opts.loss},
      {key(K::Logits), opts.logits},
      {key(K::Labels), opts.labels},
      {key(K::NumClasses), std::move(numClasses)},
      {key(K::IgnoreIndex), nullptr},
      {key(K::Data), std::move(data)},
      {key(K::Optimizer),
       llvm::json::Object{{key(K::OptimizerName), opts.optimizer},
                          {key(K::OptimizerLr), lr},
                          {key(K::OptimizerBeta1), opts.beta1},
                          {key(K::OptimizerBeta2), opts.beta2},
                          {key(K::OptimizerEps), opts.eps},
                          {key(K::OptimizerWeightDecay), wd},
                          {key(K::OptimizerMomentum),
                           optimizer == OptimizerKind::Momentum ? opts.momentum : 0.0},
                          {key(K::OptimizerNesterov), opts.nesterov},
                          {key(K::OptimizerClipNorm), opts.clipNorm}}},
      {key(K::Schedule),
       llvm::json::Object{{key(K::ScheduleKind), opts.schedule},
                          {key(K::ScheduleWarmupSteps), opts.warmupSteps},
                          {key(K::ScheduleTotalSteps), opts.totalSteps},
                          {key(K::ScheduleMinLr), opts.minLr}}},
      {key(K::LrInput), kLrInputName},
      {key(K::StepInput), kStepInputName}};
  config[key(K::Precision)] = opts.precision;
  if (opts.softLabels)
    config[key(K::SoftLabels)] = true;
  if (opts.pruneChannels >= 0 && opts.pruneAt > 0) {
    llvm::json::Array chans;
    int64_t k = 0;
    if (auto cls = (*module)->getAttrOfType<ArrayAttr>(KilnDialect::getChannelClassesAttrName()))
      for (Attribute a : cls) {
        auto d = cast<DictionaryAttr>(a);
        llvm::json::Array ps, as, bs;
        for (Attribute n : d.getAs<ArrayAttr>("params"))
          ps.push_back(cast<StringAttr>(n).getValue().str());
        for (int64_t v : d.getAs<DenseI64ArrayAttr>("axes").asArrayRef())
          as.push_back(v);
        for (int64_t v : d.getAs<DenseI64ArrayAttr>("blocks").asArrayRef())
          bs.push_back(v);
        llvm::json::Object e{
            {key(K::PruneChannelCount), d.getAs<IntegerAttr>("channels").getInt()},
            {key(K::PruneChannelParams), std::move(ps)},
            {key(K::PruneChannelAxes), std::move(as)},
            {key(K::PruneChannelBlocks), std::move(bs)}};
        if (auto parts = d.getAs<DenseI64ArrayAttr>("parts")) {
          // A concat's result: its parts side by side (no mask of its own).
          llvm::json::Array pa, pc;
          for (int64_t v : parts.asArrayRef())
            pa.push_back(v);
          for (int64_t v : d.getAs<DenseI64ArrayAttr>("part_channels").asArrayRef())
            pc.push_back(v);
          e[key(K::PruneChannelParts)] = std::move(pa);
          e[key(K::PruneChannelPartChannels)] = std::move(pc);
          ++k;
        } else {
          e[key(K::PruneChannelMask)] = "channels/" + std::to_string(k++) + "/pruned";
        }
        chans.push_back(std::move(e));
      }
    config[key(K::Prune)] = llvm::json::Object{
        {key(K::PruneKind), "l1-channel"},
        {key(K::PruneSparsity), opts.pruneChannels},
        {key(K::PruneStart), opts.pruneAt},
        {key(K::PruneEnd), opts.pruneAt},
        {key(K::PruneEvery), 1},
        {key(K::PruneChannels), std::move(chans)}};
  }
  if (opts.pruneSparsity >= 0)
    config[key(K::Prune)] = llvm::json::Object{
        {key(K::PruneKind), "magnitude"},
        {key(K::PruneSparsity), opts.pruneSparsity},
        {key(K::PruneStart), opts.pruneAt},
        {key(K::PruneEnd), opts.pruneEnd < 0 ? opts.pruneAt : opts.pruneEnd},
        {key(K::PruneEvery), opts.pruneEvery}};
  if (opts.qat) {
    llvm::json::Array sites;
    if (auto recs = (*module)->getAttrOfType<ArrayAttr>(KilnDialect::getQatSitesAttrName()))
      for (Attribute a : recs) {
        auto d = cast<DictionaryAttr>(a);
        auto i = [&](StringRef k) { return cast<IntegerAttr>(d.get(k)).getInt(); };
        auto str = [&](StringRef k) { return cast<StringAttr>(d.get(k)).getValue().str(); };
        sites.push_back(llvm::json::Object{{key(K::QatSiteNode), i("node")},
                                           {key(K::QatSiteName), str("name")},
                                           {key(K::QatSiteWeight), str("weight")},
                                           {key(K::QatSiteAxis), i("axis")},
                                           {key(K::QatSiteObserver), str("observer")}});
      }
    llvm::json::Object q{{key(K::QatKind), "int8"},
                         {key(K::QatAveraging), 0.01},
                         {key(K::QatSites), std::move(sites)}};
    if (opts.qatFreeze > 0)
      q[key(K::QatFreeze)] = opts.qatFreeze;
    else
      q[key(K::QatFreeze)] = nullptr;
    config[key(K::Qat)] = std::move(q);
  }
  if (lossScaling)
    config[key(K::LossScale)] = llvm::json::Object{
        {key(K::LossScaleMode), staticScale > 0 ? "static" : "dynamic"},
        {key(K::LossScaleInit), staticScale > 0 ? staticScale : opts.initScale},
        {key(K::LossScaleGrowthFactor), 2.0},
        {key(K::LossScaleBackoffFactor), 0.5},
        {key(K::LossScaleGrowthInterval), opts.scaleGrowthInterval},
        {key(K::LossScaleMin), 1.0},
        {key(K::LossScaleInput), kLossScaleInputName}};
  // Parameter bytes per rank and of the whole model (tensor parallelism
  // holds a block of each split parameter; ZeRO-3 a block of each weight).
  std::map<std::string, int64_t> meshSizes;
  if (module->lookupSymbol<shard::GridOp>(sharding::kMeshName))
    if (FailureOr<sharding::Mesh> mesh = sharding::getMesh(*module, "config"); succeeded(mesh))
      for (auto [n, size] : llvm::zip(mesh->names, mesh->sizes))
        meshSizes[n] = size;
  // A split parameter's whole shape: its local one times the ranks of the
  // axes that split each dimension.
  auto splitOf = [&](unsigned i, llvm::json::Array *dimsOut)
      -> std::optional<SmallVector<int64_t>> {
    if (!isParam(step, i))
      return std::nullopt;
    auto sh = step.getArgAttrOfType<ArrayAttr>(i, KilnDialect::getShardingAttrName());
    if (!sh)
      return std::nullopt;
    auto t = cast<RankedTensorType>(step.getArgument(i).getType());
    SmallVector<int64_t> shape(t.getShape());
    // ZeRO on a mesh of several axes: the plan holds a dp block of the
    // flattened split block, whose shape kiln.sharded_shape keeps.
    if (auto zs = step.getArgAttrOfType<DenseI64ArrayAttr>(
            i, KilnDialect::getShardedShapeAttrName()))
      shape.assign(zs.asArrayRef().begin(), zs.asArrayRef().end());
    bool split = false;
    for (auto [d, dim] : llvm::enumerate(sh)) {
      llvm::json::Array axes;
      for (Attribute a : cast<ArrayAttr>(dim)) {
        std::string n = cast<StringAttr>(a).getValue().str();
        if (d < shape.size())
          shape[d] *= meshSizes.count(n) ? meshSizes[n] : 1;
        axes.push_back(n);
        split = true;
      }
      if (dimsOut)
        dimsOut->push_back(std::move(axes));
    }
    if (!split)
      return std::nullopt;
    return shape;
  };
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    if (!isParam(step, i))
      continue;
    auto t = cast<RankedTensorType>(step.getArgument(i).getType());
    int64_t local = 0, whole = 0;
    checkedTypeBytes(t, local);
    whole = local;
    if (auto shape = splitOf(i, nullptr))
      checkedTypeBytes(RankedTensorType::get(*shape, t.getElementType()), whole);
    else if (auto zs = step.getArgAttrOfType<DenseI64ArrayAttr>(
                 i, KilnDialect::getShardedShapeAttrName()))
      checkedTypeBytes(RankedTensorType::get(zs.asArrayRef(), t.getElementType()),
                       whole);
    result.rankParamBytes += local;
    result.modelParamBytes += whole;
  }
  if (dp > 1 || tp > 1 || ep > 1 || opts.pp > 1 || opts.microbatches > 1) {
    // ZeRO's sharded parameters: name -> the whole tensor's shape.
    llvm::json::Object sharded;
    for (unsigned i = 0; i < step.getNumArguments(); ++i) {
      auto shape = step.getArgAttrOfType<DenseI64ArrayAttr>(
          i, kiln::KilnDialect::getShardedShapeAttrName());
      auto name = step.getArgAttrOfType<StringAttr>(i, "onnx.name");
      if (!shape || !name)
        continue;
      llvm::json::Array dims;
      for (int64_t d : shape.asArrayRef())
        dims.push_back(d);
      sharded[name.getValue()] = std::move(dims);
    }
    // Tensor parallelism's split parameters (and their optimizer state):
    // name -> the whole shape and, per dimension, the axes splitting it.
    llvm::json::Object split;
    for (unsigned i = 0; i < step.getNumArguments(); ++i) {
      llvm::json::Array dims;
      auto shape = splitOf(i, &dims);
      auto name = step.getArgAttrOfType<StringAttr>(i, "onnx.name");
      if (!shape || !name)
        continue;
      llvm::json::Array whole;
      for (int64_t d : *shape)
        whole.push_back(d);
      llvm::json::Object e{{key(K::MeshSplitDims), std::move(dims)}};
      // A parameter a strategy retyped (a fused QKV weight as [3, C, Cin]):
      // the plan splits the view, checkpoints hold the model's shape.
      if (auto ms = step.getArgAttrOfType<DenseI64ArrayAttr>(
              i, KilnDialect::getModelShapeAttrName())) {
        llvm::json::Array model;
        for (int64_t d : ms.asArrayRef())
          model.push_back(d);
        e[key(K::MeshSplitShape)] = std::move(model);
        e[key(K::MeshSplitView)] = std::move(whole);
      } else {
        e[key(K::MeshSplitShape)] = std::move(whole);
      }
      split[name.getValue()] = std::move(e);
    }
    config[key(K::Mesh)] = llvm::json::Object{{key(K::MeshDp), dp},
                                              {key(K::MeshTp), tp},
                                              {key(K::MeshEp), ep},
                                              {key(K::MeshPp), opts.pp},
                                              {key(K::MeshMicrobatches), opts.microbatches},
                                              {key(K::MeshSchedule), opts.pipelineSchedule},
                                              {key(K::MeshVirtualStages), opts.virtualStages},
                                              {key(K::MeshZero), opts.zero},
                                              {key(K::MeshSharded), std::move(sharded)},
                                              {key(K::MeshSplit), std::move(split)}};
  }
  {
    llvm::raw_string_ostream os(result.config);
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(config)));
  }

  // Pipeline parallelism: one program per stage rank, ordered by the
  // schedule (the config above is the whole step's).
  if (opts.pp > 1) {
    PassManager pm(&ctx);
    dist::KilnPipelinePassOptions po;
    po.stages = opts.pp;
    po.microbatches = opts.microbatches;
    po.schedule = opts.pipelineSchedule;
    po.virtualStages = opts.virtualStages;
    pm.addPass(dist::createKilnPipelinePass(po));
    if (recomputing)
      addRecompute(pm);
    if (failed(pm.run(*module)))
      return fail("pipeline");
    result.mlir.clear();
    llvm::raw_string_ostream os(result.mlir);
    module->print(os);
  }
  {
    PassManager pm(&ctx);
    buildKilnToRuntimePipeline(pm);
    if (failed(pm.run(*module)))
      return fail("lower");
  }
  std::vector<std::string> stepFuncs;
  if (opts.pp > 1)
    for (int64_t r = 0; r < opts.pp; ++r)
      stepFuncs.push_back((kTrainStepFuncName + "_pp" + std::to_string(r)).str());
  else
    stepFuncs.push_back(kTrainStepFuncName.str());
  std::vector<std::string> stagePlans(stepFuncs.size());
  for (size_t r = 0; r < stepFuncs.size(); ++r) {
    if (failed(exportPlan(*module, stepFuncs[r], params, stagePlans[r])))
      return fail("plan");
    if (auto rc = module->lookupSymbol<func::FuncOp>(stepFuncs[r])
                      ->getAttrOfType<DictionaryAttr>(KilnDialect::getRecomputeAttrName())) {
      auto get = [&](StringRef k) {
        auto i = rc.getAs<IntegerAttr>(k);
        return i ? i.getInt() : 0;
      };
      result.recomputeSummary.push_back(llvm::formatv(
          "@{0}: {1} activations recomputed in backward ({2:F1} MFLOP per "
          "step); live intermediates {3:F2} -> {4:F2} MiB (estimate)",
          stepFuncs[r], get("activations"), get("flops") / 1e6,
          get("peak_before") / 1048576.0, get("peak_after") / 1048576.0));
    }
    if (auto a = module->lookupSymbol<func::FuncOp>(stepFuncs[r])
                     ->getAttrOfType<IntegerAttr>(
                         krt::KRTDialect::getArenaBytesAttrName()))
    {
      result.trainArenaBytes = std::max<int64_t>(result.trainArenaBytes, a.getInt());
      result.stageArenaBytes.push_back(a.getInt());
      // The budget holds for the arena the assignment placed, not only for
      // the recompute pass's estimate of it.
      const double mib = (double)a.getInt() / (1024.0 * 1024.0);
      if (opts.memoryBudgetMb > 0 && mib > opts.memoryBudgetMb)
        return failWith("recompute", llvm::formatv("--memory-budget {0:F2} MiB: @{1}'s arena is "
                                  "{2:F2} MiB after recompute (fragmentation "
                                  "of its buffers); give a larger budget",
                                  opts.memoryBudgetMb, stepFuncs[r], mib)
                        .str());
    }
  }
  result.trainPlan = opts.pp > 1
                         ? rt::pipelinePlans(stagePlans.data(), stagePlans.size())
                         : std::move(stagePlans[0]);

  {
    PassManager pm(&ctx);
    pm.addPass(createKilnEvalModePass());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    buildKilnToRuntimePipeline(pm);
    if (failed(pm.run(*evalModule)))
      return fail("eval");
  }
  if (failed(
          exportPlan(*evalModule, kForwardFuncName, params, result.evalPlan)))
    return fail("eval plan");

  if (opts.pruneChannels >= 0 && opts.pruneAt > 0) {
    // The smaller plan the run continues on after step S: the same model
    // pruned now, of the classes the masks prune (the channels it keeps
    // here are placeholders: the run gathers the ones step S chose).
    TrainCompileOptions small = opts;
    small.pruneAt = 0;
    small.pruneMaskable = true;
    auto then = std::make_shared<TrainCompileResult>();
    if (!compileONNXToTraining(path, small, *then)) {
      result.stage = then->stage;
      result.error = "the smaller plan after --prune-at: " + then->error;
      return false;
    }
    // Before the warnings (each on a line of its own).
    size_t nl = result.pruneSummary.find('\n');
    result.pruneSummary.insert(
        nl == std::string::npos ? result.pruneSummary.size() : nl,
        ", then trains the smaller plan: " +
            prunedParamsText(then->paramsBefore, then->paramsAfter));
    result.then = std::move(then);
  }
  return true;
}
