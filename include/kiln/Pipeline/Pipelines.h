//===- Pipelines.h - Kiln's compilation pipelines ---------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The pass sequences the drivers run, and the one-call ONNX-to-plan
// compilation kiln-run uses.
//===----------------------------------------------------------------------===//
#ifndef KILN_PIPELINE_PIPELINES_H
#define KILN_PIPELINE_PIPELINES_H

#include "kiln/Target/ONNX/Import.h"
#include "mlir/Pass/PassManager.h"

#include <memory>
#include <string>

namespace kiln {

/// onnx dialect -> kiln -> canonicalized kiln: the graph Kiln optimises.
void buildONNXToKilnPipeline(mlir::OpPassManager &pm);
/// kiln -> krt with buffers assigned: what the plan writer serialises.
void buildKilnToRuntimePipeline(mlir::OpPassManager &pm);

/// What compileONNXToPlan reports.
struct CompileResult {
  std::string plan;    // the plan bytes (docs/PlanFormat.md)
  std::string error;   // one line when compilation failed
  std::string stage;   // "import", "convert", "lower", "plan" on failure
  int64_t arenaBytes = 0;
};

/// Imports the ONNX model at `path`, converts, lowers and writes @forward as
/// a plan. Never crashes on a bad model: failures come back in `error`.
bool compileONNXToPlan(const std::string &path, const ImportOptions &opts,
                       CompileResult &result);

} // namespace kiln


namespace kiln {

/// What kiln-compile asks for (CONTRACT.md's flags).
struct TrainCompileOptions {
  ImportOptions import;
  std::string loss = "cross-entropy"; // cross-entropy | mse | output
  std::string logits, labels = "labels", lossOutput;
  /// With cross-entropy: float labels of the logits' shape, a probability
  /// row per position (--soft-labels), instead of class indices.
  bool softLabels = false;
  std::string optimizer = "sgd";
  double lr = -1; // -1: 0.01 for sgd/momentum, 0.001 for adam/adamw
  double momentum = 0.9, weightDecay = -1, beta1 = 0.9, beta2 = 0.999,
         eps = 1e-8, clipNorm = 0;
  bool nesterov = false;
  std::string freeze;
  std::string schedule = "constant"; // constant | linear-warmup | cosine
  int64_t warmupSteps = 0, totalSteps = 0;
  double minLr = 0;
  std::string bnRunningVar = "unbiased";
  /// Ranks on the data-parallel mesh axis (--mesh dp=N). With dp > 1,
  /// import.batchSize is the global batch: each rank's plan takes
  /// batchSize / dp samples, and --kiln-data-parallel averages the
  /// gradients and the loss over the ranks.
  int64_t dp = 1;
  /// Ranks on the tensor-parallel mesh axis (--mesh dp=N,tp=M): tp groups
  /// of consecutive ranks inside dp; the world is dp x tp ranks. Each rank
  /// holds its block of the parameters `shard` splits over tp.
  int64_t tp = 1;
  /// Ranks on the expert-parallel mesh axis (--mesh ep=E, dp=N,ep=E): ep
  /// groups of consecutive ranks inside dp; the world is dp x ep ranks,
  /// each on batchSize / (dp ep) samples, and --kiln-expert-parallel splits
  /// the stacked expert weights by expert over ep.
  int64_t ep = 1;
  /// Microbatches per step (--microbatches M): forward and backward run
  /// once per microbatch of batchSize / M samples and the gradients
  /// accumulate (--kiln-microbatch); with pp > 1 they are what the
  /// pipeline's stages pass along.
  int64_t microbatches = 1;
  /// Pipeline stages (--mesh pp=S), the outermost mesh axis.
  int64_t pp = 1;
  /// With pp > 1: gpipe, 1f1b, interleaved or zb (--schedule), and the
  /// model chunks per rank of the interleaved schedule (--virtual-stages).
  std::string pipelineSchedule = "1f1b";
  int64_t virtualStages = 1;
  /// With pp > 1: the ONNX values the stages start at (--stage-boundaries,
  /// S - 1 names in order); empty: balanced by the ops' cost.
  std::vector<std::string> stageBoundaries;
  /// With pp > 1: a kiln-train --profile trace whose kernel times per ONNX
  /// node calibrate the stage balance (--stage-costs); empty: estimates.
  std::string stageCosts;
  /// Activation recompute (--recompute, --memory-budget): none, selective
  /// or full (--kiln-recompute's modes), and the peak of live
  /// intermediates (the arena) each step program must fit in, MiB (0: none).
  std::string recompute = "none";
  double memoryBudgetMb = 0;
  /// User shardings (--shard REGEX=SPEC, one per entry): the parameters
  /// (or inputs) whose ONNX name matches REGEX are held as SPEC, one entry
  /// per dimension, `tp` or `-` (whole).
  std::vector<std::string> shard;
  /// A tensor-parallel strategy (--tp megatron; empty: annotations only):
  /// --kiln-tp-megatron finds the attention and MLP blocks and splits them
  /// over tp. With no block found the tp ranks become data-parallel ones.
  std::string tpStrategy;
  /// With --tp megatron: Megatron's sequence parallelism
  /// (--sequence-parallel).
  bool sequenceParallel = false;
  /// The gradient all-reduces' wire format with dp > 1: none, bf16, fp16 or
  /// int8 (--grad-compression).
  std::string gradCompression = "none";
  /// With dp > 1, the largest gradient bucket in MiB (--bucket-mb): the
  /// all-reduces are grouped into buckets that start as soon as their last
  /// gradient is computed and are waited for where the optimizer reads
  /// them (--kiln-bucket-all-reduce). 0: one synchronous all-reduce per
  /// gradient.
  double bucketMB = 25.0;
  /// With dp > 1, the ZeRO stage (--zero): 1 shards the optimizer state
  /// over the ranks (--kiln-zero).
  int64_t zero = 0;
  /// BatchNorm over the global batch (--sync-batchnorm): training BatchNorm
  /// is expanded into reductions (--kiln-expand-batch-norm), which the
  /// data-parallel partitioning all-reduces. Off: per-rank statistics, as
  /// PyTorch DDP.
  bool syncBatchNorm = false;
  /// The training precision (--precision): fp32, or bf16 / fp16, where
  /// --kiln-mixed-precision computes GEMMs, convolutions and the ops between
  /// them in that type and keeps float32 master weights.
  std::string precision = "fp32";
  /// ONNX op types that compute in float32 whatever their precision class
  /// (--fp32-ops).
  std::vector<std::string> fp32Ops;
  /// Loss scaling (--loss-scale): "dynamic" (GradScaler's rule), "none", or
  /// a static scale as a number; "" picks dynamic for fp16, none otherwise.
  std::string lossScale;
  /// The dynamic scale's first value (--init-scale) and the clean steps
  /// after which it doubles (--scale-growth-interval).
  double initScale = 65536.0;
  int64_t scaleGrowthInterval = 2000;
  /// Testing aid (kiln-compile's hidden --test-break-vjp): the VJP of the
  /// kiln op with this name is made wrong (--kiln-autodiff's break-vjp), so
  /// that kiln-gradcheck can be shown to catch it. Empty: none.
  std::string testBreakVJP;
  /// Magnitude pruning (--prune magnitude=S): the final sparsity of each
  /// weight of rank >= 2 (< 0: no pruning), reached on the cubic schedule
  /// from step pruneAt to pruneEnd (0-based; equal: at once), a pruning
  /// point every pruneEvery steps (--kiln-prune-magnitude).
  double pruneSparsity = -1;
  int64_t pruneAt = 0, pruneEnd = -1, pruneEvery = 1;
  /// Quantization-aware training (--qat int8, --kiln-qat): off unless
  /// set; its observers fix their ranges after qatFreeze batches (< 0:
  /// never).
  /// Structured L1 channel pruning (--prune l1-channel=R,
  /// --kiln-prune-channels) of the model's weights before training: the
  /// ratio of each layer's channels removed (< 0: none).
  double pruneChannels = -1;
  /// With pruneChannels and pruneAt == 0: prune only the classes a run
  /// pruning at a later step masks (the smaller plan it switches to).
  bool pruneMaskable = false;
  bool qat = false;
  int64_t qatFreeze = -1;
  /// Knowledge distillation (--teacher T.onnx, --kiln-distill): the
  /// teacher model's path (empty: none), the weight of the distillation
  /// term and the softmax temperature.
  std::string teacher;
  double distillAlpha = 0.5, distillTemperature = 2.0;
};

/// The loss scaling TrainCompileOptions ask for (--loss-scale, with its
/// default by --precision, and --init-scale).
struct LossScaleChoice {
  bool on = false, dynamic = false;
  double staticScale = 0; // --loss-scale F
};
/// Resolves it; false with `err`, one line naming the flag at fault. The
/// driver and compileONNXToTraining both check with it.
bool resolveLossScale(const TrainCompileOptions &opts, LossScaleChoice &out,
                      std::string &err);

/// The learning rate an optimizer gets when --lr is not given: 0.01 for sgd
/// and momentum, 0.001 for adam and adamw.
inline double defaultLr(const std::string &optimizer) {
  return optimizer == "adam" || optimizer == "adamw" ? 1e-3 : 1e-2;
}

/// What compileONNXToTraining produces.
struct TrainCompileResult {
  std::string trainPlan; // @train_step (outputs loss, grad_norm)
  std::string evalPlan;  // @forward in eval mode (outputs loss, model outputs)
  std::string config;    // the executable's config JSON (docs/Training.md)
  std::string mlir;      // the kiln-level module with @train_step
  /// With --prune l1-channel: the ONNX model with the pruned shapes (what
  /// the executable embeds and exports), and a line saying what was pruned.
  std::string model, pruneSummary;
  /// With --prune l1-channel at step 0: the model's parameter elements
  /// before and after.
  int64_t paramsBefore = 0, paramsAfter = 0;
  std::string error, stage;
  /// With --tp megatron: what it found, one line.
  std::string tpSummary;
  /// Warnings to show (one line each), e.g. a --shard that matches nothing.
  std::vector<std::string> warnings;
  int64_t trainArenaBytes = 0;
  /// Each step program's arena (one per pipeline rank; one without pp).
  std::vector<int64_t> stageArenaBytes;
  /// With --recompute / --memory-budget: one line per step program.
  std::vector<std::string> recomputeSummary;
  /// Parameter bytes of one rank's plan and of the whole model (they
  /// differ under tensor parallelism and ZeRO-3).
  int64_t rankParamBytes = 0, modelParamBytes = 0;
  /// With --prune l1-channel --prune-at S > 0: the smaller model's
  /// compilation (its plans, config and pruned ONNX), which the run
  /// switches to after step S (the payload's "then" part).
  std::shared_ptr<TrainCompileResult> then;
};

/// Imports, converts, attaches the loss, differentiates, attaches the
/// optimizer, lowers and writes both plans. Never crashes on a bad model.
bool compileONNXToTraining(const std::string &path,
                           const TrainCompileOptions &opts,
                           TrainCompileResult &result);

} // namespace kiln

#endif // KILN_PIPELINE_PIPELINES_H
