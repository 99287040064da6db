//===- kiln-compile.cpp - ONNX model to training executable -----*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
//   kiln-compile MODEL.onnx -o OUT [--target cpu] [--emit exe|mlir|plan|schedule]
//     [--batch-size N] [--mesh dp=N [--grad-compression none|bf16|fp16|int8] [--bucket-mb F] [--zero 0|1|2|3] [--sync-batchnorm]] [--loss cross-entropy|mse|output] [--logits NAME]
//     [--labels NAME] [--soft-labels] [--loss-output NAME]
//     [--optimizer sgd|momentum|adam|adamw] [--lr F] [--momentum F]
//     [--nesterov] [--weight-decay F] [--beta1 F] [--beta2 F] [--eps F]
//     [--freeze REGEX] [--clip-grad-norm F]
//     [--lr-schedule constant|linear-warmup|cosine] [--warmup-steps N]
//     [--total-steps N] [--min-lr F] [--dim NAME=N]
//     [--prune magnitude=S [--prune-at STEP] [--prune-end STEP] [--prune-every N]]
//     [--qat int8 [--qat-freeze-step STEP]]
//     [--teacher T.onnx [--distill-alpha A] [--distill-temperature T]]
//
// --emit exe (default) copies kiln-train (next to this tool, or
// $KILN_TRAIN_RUNTIME) to OUT and appends the train plan, the config, the
// ONNX model and the eval plan with a trailer; --emit plan writes the
// @train_step plan; --emit mlir the kiln-level module with @train_step.
//===----------------------------------------------------------------------===//
#include "kiln/Conversion/ONNXToKiln/ONNXToKiln.h"
#include "kiln/Pipeline/Pipelines.h"
#include "kiln/runtime/InputFile.h"
#include "kiln/runtime/FileIO.h"
#include "kiln/runtime/PipelineSchedule.h"
#include "kiln/runtime/TrainPayload.h"

#include "kiln/Dialect/Kiln/IR/KilnEnums.h"
#include "kiln/Tools/CommandLine.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>

using namespace kiln;

namespace {

[[noreturn]] void die(const std::string &msg) {
  llvm::errs() << "kiln-compile: " << msg << "\n";
  llvm::errs().flush();
  std::exit(1);
}

//===----------------------------------------------------------------------===//
// Flags (CONTRACT.md's kiln-compile)
//===----------------------------------------------------------------------===//

namespace cl = llvm::cl;
using tool::IntParser;
using tool::IntRange;
using tool::NumberParser;
using tool::NumberRange;

/// The defaults the flags start from are the pipeline's own.
const TrainCompileOptions kDefaults;

cl::OptionCategory kilnCategory("kiln-compile options");

cl::list<std::string> positional(cl::Positional, cl::desc("<MODEL.onnx>"),
                                 cl::cat(kilnCategory));
cl::opt<std::string> output("o",
                            cl::desc("the training executable (or the file "
                                     "--emit mlir|plan writes)"),
                            cl::value_desc("OUT"), cl::cat(kilnCategory));
cl::alias outputLong("output", cl::desc("alias for -o"), cl::aliasopt(output),
                     cl::cat(kilnCategory));
// Only what this build can target is advertised; --target cuda is refused
// with its own message.
cl::opt<std::string> target("target",
                            cl::desc("what the executable runs on: cpu (cuda: "
                                     "not built)"),
                            cl::value_desc("cpu"), cl::init("cpu"),
                            cl::cat(kilnCategory));
cl::opt<std::string> emit("emit",
                          cl::desc("exe (default), mlir (@train_step in kiln), "
                                   "plan (the @train_step plan) or schedule "
                                   "(with --mesh pp=S: each pipeline rank's "
                                   "instruction list)"),
                          cl::value_desc("exe|mlir|plan|schedule"), cl::init("exe"),
                          cl::cat(kilnCategory));
cl::opt<long long, false, IntParser> batchSize(
    "batch-size",
    cl::desc("global batch (static shapes are compiled for it)"),
    cl::value_desc("N"),
    IntRange{1, tool::kMaxDimFlag,
             "a larger batch could overflow int64 tensor sizes"},
    cl::cat(kilnCategory));
cl::opt<std::string> mesh("mesh",
                          cl::desc("the device mesh: dp=N trains on N ranks "
                                   "(mpirun -np N), each on batch-size / N "
                                   "samples of every global batch; tp=M splits "
                                   "the parameters --shard names over M ranks "
                                   "(dp=N,tp=M: N x M ranks); ep=E splits "
                                   "a mixture of experts' stacked expert "
                                   "weights by expert over E ranks that are "
                                   "data-parallel elsewhere (dp=N,ep=E)"),
                          cl::value_desc("dp=N[,tp=M|,ep=E]"), cl::cat(kilnCategory));
cl::opt<long long, false, IntParser> microbatches(
    "microbatches",
    cl::desc("forward and backward run on M microbatches of batch-size / M "
             "samples each step, the gradients accumulated (with --mesh "
             "pp=S: what the pipeline stages pass along)"),
    cl::value_desc("M"), cl::init(1), IntRange{1, 4096, ""},
    cl::cat(kilnCategory));
cl::opt<std::string> pipelineSchedule(
    "schedule",
    cl::desc("with --mesh pp=S: the pipeline schedule, gpipe, 1f1b (default), "
             "interleaved (with --virtual-stages V) or zb (zero bubble, ZB-H1)"),
    cl::value_desc("gpipe|1f1b|interleaved|zb"), cl::init("1f1b"),
    cl::cat(kilnCategory));
cl::opt<long long, false, IntParser> virtualStages(
    "virtual-stages",
    cl::desc("with --schedule interleaved: model chunks per pipeline rank"),
    cl::value_desc("V"), cl::init(1), IntRange{1, 64, ""}, cl::cat(kilnCategory));
cl::list<std::string> stageBoundaries(
    "stage-boundaries",
    cl::desc("with --mesh pp=S: the ONNX values where stages 1..S-1 start "
             "(comma-separated, in order); default: stages balanced by cost"),
    cl::value_desc("NAME,..."), cl::CommaSeparated, cl::cat(kilnCategory));
cl::opt<std::string> stageCosts(
    "stage-costs",
    cl::desc("with --mesh pp=S: a kiln-train --profile trace (of any run of "
             "the model) whose measured kernel times per ONNX node balance the "
             "stages instead of the FLOPs and bytes estimates"),
    cl::value_desc("TRACE.json"), cl::cat(kilnCategory));
cl::opt<std::string> recompute(
    "recompute",
    cl::desc("activation recompute: selective rebuilds the activations that "
             "cost at most 32 FLOPs per byte (elementwise, normalisation, "
             "data movement) in backward instead of keeping them from forward; "
             "full rebuilds every one (with --mesh pp=S a stage keeps only what "
             "it receives); none (default)"),
    cl::value_desc("none|selective|full"), cl::init("none"), cl::cat(kilnCategory));
cl::opt<double> memoryBudget(
    "memory-budget",
    cl::desc("the most MiB of intermediates (the arena: activations, "
             "gradients, temporaries; not parameters or optimizer state) a "
             "step program may hold: activations are recomputed, cheapest "
             "first, until it fits (with --recompute selective: only those)"),
    cl::value_desc("MB"), cl::init(0.0), cl::cat(kilnCategory));
cl::opt<std::string> tpStrategy(
    "tp",
    cl::desc("tensor-parallel strategy with --mesh ...,tp=M: megatron finds "
             "the attention and MLP blocks by structure and splits their "
             "heads and hidden features over the tp ranks (one all-reduce per "
             "block in forward)"),
    cl::value_desc("megatron"), cl::cat(kilnCategory));
cl::opt<bool> sequenceParallel(
    "sequence-parallel",
    cl::desc("with --tp megatron: split the LayerNorm, dropout and residual "
             "regions on the sequence over tp (Megatron's sequence "
             "parallelism: all-reduces become reduce-scatter + all-gather)"),
    cl::init(false), cl::cat(kilnCategory));
cl::list<std::string> shardSpecs(
    "shard",
    cl::desc("hold the parameters (or inputs) whose ONNX name matches REGEX "
             "split as SPEC: one entry per dimension, tp or - (whole), e.g. "
             "'fc1.weight=tp,-' (repeatable)"),
    cl::value_desc("REGEX=SPEC"), cl::cat(kilnCategory));
cl::opt<double> bucketMB(
    "bucket-mb",
    cl::desc("with --mesh dp=N: gradients travel in buckets of at most this "
             "many MiB, each started as soon as its last gradient is computed "
             "(0: one synchronous all-reduce per gradient)"),
    cl::value_desc("MiB"), cl::init(25.0), cl::cat(kilnCategory));
cl::opt<int> zeroStage(
    "zero",
    cl::desc("with --mesh dp=N: ZeRO stage; 1 shards the optimizer state over "
             "the ranks (each keeps 1/N of it), 2 also the gradients, 3 also "
             "the parameters (all-gathered before each use)"),
    cl::value_desc("0|1|2|3"), cl::init(0), cl::cat(kilnCategory));
cl::opt<bool> syncBatchNorm(
    "sync-batchnorm",
    cl::desc("with --mesh dp=N: BatchNorm normalises by the statistics of the "
             "global batch, all-reduced over the ranks (PyTorch's "
             "SyncBatchNorm); default: each rank's own, as DDP"),
    cl::init(false), cl::cat(kilnCategory));
cl::opt<std::string> gradCompression(
    "grad-compression",
    cl::desc("wire format of the gradient all-reduces with --mesh dp=N: "
             "none, bf16, fp16, int8 (with error feedback)"),
    cl::value_desc("none|bf16|fp16|int8"), cl::init("none"),
    cl::cat(kilnCategory));
cl::opt<std::string> precision(
    "precision",
    cl::desc("training precision: fp32, or bf16 / fp16 (matmuls, convolutions "
             "and the ops between them in that type; float32 master weights, "
             "softmax, norms, reductions and losses)"),
    cl::value_desc("fp32|bf16|fp16"), cl::init("fp32"), cl::cat(kilnCategory));
cl::list<std::string> fp32Ops(
    "fp32-ops",
    cl::desc("with --precision bf16|fp16: ONNX op types that compute in "
             "float32 all the same (comma-separated, as Softmax,Gelu)"),
    cl::value_desc("OP,..."), cl::CommaSeparated, cl::cat(kilnCategory));
cl::opt<std::string> lossScale(
    "loss-scale",
    cl::desc("loss scaling: dynamic (as torch's GradScaler: a step with "
             "non-finite gradients is skipped and halves the scale, "
             "--scale-growth-interval clean steps double it), none, or a "
             "static scale F (default: dynamic with fp16, none otherwise)"),
    cl::value_desc("dynamic|none|F"), cl::cat(kilnCategory));
cl::opt<double, false, NumberParser> initScale(
    "init-scale", cl::desc("the dynamic loss scale's first value (2^16)"),
    cl::value_desc("F"), cl::init(kDefaults.initScale), cl::cat(kilnCategory));
cl::opt<long long, false, IntParser> scaleGrowthInterval(
    "scale-growth-interval",
    cl::desc("clean steps after which the dynamic loss scale doubles (2000)"),
    cl::value_desc("N"), cl::init(kDefaults.scaleGrowthInterval),
    IntRange{1, int64_t(1) << 40, ""}, cl::cat(kilnCategory));
cl::list<std::string> dims("dim", cl::desc("value of a symbolic dimension"),
                           cl::value_desc("NAME=N"), cl::cat(kilnCategory));
cl::opt<std::string> loss("loss", cl::desc("the loss to minimise"),
                          cl::value_desc("cross-entropy|mse|output"),
                          cl::init(kDefaults.loss), cl::cat(kilnCategory));
cl::opt<std::string> logits("logits",
                            cl::desc("model output the appended loss reads "
                                     "(default: the only output)"),
                            cl::value_desc("NAME"), cl::cat(kilnCategory));
cl::opt<std::string> labels("labels",
                            cl::desc("name of the labels input an appended "
                                     "loss adds (default: labels)"),
                            cl::value_desc("NAME"), cl::init(kDefaults.labels),
                            cl::cat(kilnCategory));
cl::opt<bool> softLabels(
    "soft-labels",
    cl::desc("with --loss cross-entropy: the labels are float probability "
             "rows of the logits' shape (mixup, cutmix) instead of class "
             "indices"),
    cl::init(kDefaults.softLabels), cl::cat(kilnCategory));
cl::opt<std::string> lossOutput("loss-output",
                                cl::desc("with --loss output: the scalar model "
                                         "output to minimise"),
                                cl::value_desc("NAME"), cl::cat(kilnCategory));
cl::opt<std::string>
    optimizer("optimizer",
              cl::desc("the update; none (with --emit plan or mlir): the plan "
                       "outputs the loss and every gradient"),
              cl::value_desc("sgd|momentum|adam|adamw|none"),
              cl::init(kDefaults.optimizer), cl::cat(kilnCategory));
cl::opt<double, false, NumberParser>
    lr("lr",
       cl::desc("learning rate (default: 0.01 for sgd and momentum, 0.001 for "
                "adam and adamw)"),
       cl::value_desc("F"), cl::init(kDefaults.lr), NumberRange::positive(),
       cl::cat(kilnCategory));
cl::opt<double, false, NumberParser>
    momentum("momentum", cl::desc("momentum factor, in [0, 1)"),
             cl::value_desc("F"), cl::init(kDefaults.momentum),
             NumberRange::unit(), cl::cat(kilnCategory));
cl::opt<bool> nesterov("nesterov", cl::desc("Nesterov momentum"),
                       cl::init(kDefaults.nesterov), cl::cat(kilnCategory));
cl::opt<double, false, NumberParser>
    weightDecay("weight-decay",
                cl::desc("weight decay (as torch.optim), >= 0"),
                cl::value_desc("F"), cl::init(kDefaults.weightDecay),
                NumberRange::nonNegative(), cl::cat(kilnCategory));
cl::opt<double, false, NumberParser>
    beta1("beta1", cl::desc("Adam's beta1, in [0, 1)"), cl::value_desc("F"),
          cl::init(kDefaults.beta1), NumberRange::unit(),
          cl::cat(kilnCategory));
cl::opt<double, false, NumberParser>
    beta2("beta2", cl::desc("Adam's beta2, in [0, 1)"), cl::value_desc("F"),
          cl::init(kDefaults.beta2), NumberRange::unit(),
          cl::cat(kilnCategory));
cl::opt<double, false, NumberParser>
    eps("eps", cl::desc("Adam's epsilon, > 0"), cl::value_desc("F"),
        cl::init(kDefaults.eps), NumberRange::positive(),
        cl::cat(kilnCategory));
cl::opt<std::string> freeze("freeze",
                            cl::desc("parameters whose names match are not "
                                     "trained"),
                            cl::value_desc("REGEX"), cl::cat(kilnCategory));
cl::opt<double, false, NumberParser>
    clipGradNorm("clip-grad-norm",
                 cl::desc("global gradient-norm clipping, >= 0 (0: none)"),
                 cl::value_desc("F"), cl::init(kDefaults.clipNorm),
                 NumberRange::nonNegative(), cl::cat(kilnCategory));
cl::opt<std::string> lrSchedule("lr-schedule",
                                cl::desc("learning-rate schedule"),
                                cl::value_desc("constant|linear-warmup|cosine"),
                                cl::init(kDefaults.schedule),
                                cl::cat(kilnCategory));
cl::opt<long long, false, IntParser>
    warmupSteps("warmup-steps", cl::desc("linear warm-up steps"),
                cl::value_desc("N"), cl::init(kDefaults.warmupSteps),
                cl::cat(kilnCategory));
cl::opt<long long, false, IntParser>
    totalSteps("total-steps",
               cl::desc("steps of the cosine schedule, at least "
                        "--warmup-steps (0: the run's length)"),
               cl::value_desc("N"), cl::init(kDefaults.totalSteps),
               cl::cat(kilnCategory));
cl::opt<double, false, NumberParser>
    minLr("min-lr", cl::desc("the cosine schedule's floor, in [0, --lr]"),
          cl::value_desc("F"), cl::init(kDefaults.minLr),
          NumberRange::nonNegative(), cl::cat(kilnCategory));
cl::opt<std::string>
    bnRunningVar("bn-running-var",
                 cl::desc("BatchNorm running variance: unbiased (as PyTorch) "
                          "or biased"),
                 cl::value_desc("unbiased|biased"),
                 cl::init(kDefaults.bnRunningVar), cl::cat(kilnCategory));
cl::opt<std::string>
    prune("prune",
          cl::desc("compression: magnitude=S prunes each weight of rank >= 2 "
                   "to sparsity S in [0, 1), the smallest |w| first, and keeps "
                   "the pruned elements (and their optimizer state) zero"),
          cl::value_desc("magnitude=S"), cl::cat(kilnCategory));
cl::opt<long long, false, IntParser>
    pruneAt("prune-at",
            cl::desc("the step (0-based) pruning starts (default 0: the first)"),
            cl::value_desc("STEP"), cl::init(0), cl::cat(kilnCategory));
cl::opt<long long, false, IntParser>
    pruneEnd("prune-end",
             cl::desc("the step the final sparsity is reached, on the cubic "
                      "schedule from --prune-at (default: --prune-at, at once)"),
             cl::value_desc("STEP"), cl::init(-1), cl::cat(kilnCategory));
cl::opt<long long, false, IntParser>
    pruneEvery("prune-every",
               cl::desc("steps between pruning points of the schedule (default 1)"),
               cl::value_desc("N"), cl::init(1), cl::cat(kilnCategory));

cl::opt<std::string>
    qat("qat",
        cl::desc("compression: quantization-aware training; int8 fake-quantizes "
                 "each MatMul, Gemm and Conv with a trained weight (weights "
                 "symmetric per output channel, activations per tensor from "
                 "moving-average observers, straight-through gradients)"),
        cl::value_desc("int8"), cl::cat(kilnCategory));
cl::opt<long long, false, IntParser>
    qatFreeze("qat-freeze-step",
              cl::desc("the observers fix their ranges after this many "
                       "training steps (default: never)"),
              cl::value_desc("STEP"), cl::init(-1), cl::cat(kilnCategory));

cl::opt<std::string>
    teacher("teacher",
            cl::desc("compression: knowledge distillation from the model "
                     "T.onnx (frozen, forward only, in the same step; its "
                     "logits must have the student's shape)"),
            cl::value_desc("T.onnx"), cl::cat(kilnCategory));
cl::opt<double>
    distillAlpha("distill-alpha",
                 cl::desc("with --teacher: the weight A of the distillation "
                          "term, A*T^2*KL + (1-A)*CE (default 0.5)"),
                 cl::value_desc("A"), cl::init(0.5), cl::cat(kilnCategory));
cl::opt<double>
    distillTemperature("distill-temperature",
                       cl::desc("with --teacher: the softmax temperature T "
                                "(default 2)"),
                       cl::value_desc("T"), cl::init(2.0), cl::cat(kilnCategory));

// A testing aid, hidden from --help: kiln-gradcheck's tests break one VJP
// to show that the check finds and names it.
cl::opt<std::string> testBreakVJP(
    "test-break-vjp",
    cl::desc("testing aid: scale the gradients the VJP of kiln op OP (as "
             "kiln.relu) produces by 1.5, a deliberately wrong gradient"),
    cl::value_desc("OP"), cl::Hidden, cl::cat(kilnCategory));

/// Parses and checks the command line; every error exits with one line.
void parseArgs(int argc, char **argv, TrainCompileOptions &opts,
               std::string &model, std::string &out, std::string &emitKind) {
  tool::parseCommandLine(argc, argv, "kiln-compile", kilnCategory,
                         "Kiln: compile an ONNX model into an executable "
                         "that trains it\n");
  if (batchSize.getNumOccurrences())
    opts.import.batchSize = batchSize;
  for (const std::string &d : dims) {
    auto [name, value] = tool::splitNameValue("--dim", d, "NAME=N");
    opts.import.dimValues[name] =
        tool::parseInt("--dim", value, 0, tool::kMaxDimFlag);
  }
  if (mesh.getNumOccurrences()) {
    llvm::SmallVector<llvm::StringRef> axes;
    llvm::StringRef(mesh).split(axes, ',');
    std::set<std::string> seen;
    for (llvm::StringRef a : axes) {
      auto [axis, value] = tool::splitNameValue("--mesh", a.trim().str(),
                                                "dp=N[,tp=M|,ep=E]");
      if (axis != "dp" && axis != "tp" && axis != "ep" && axis != "pp")
        die("--mesh: mesh axes are pp (pipeline stages), dp (data "
            "parallelism), tp (tensor parallelism) and ep (expert "
            "parallelism), got '" + axis + "'");
      if (!seen.insert(axis).second)
        die("--mesh: axis " + axis + " appears twice");
      (axis == "dp" ? opts.dp : axis == "tp" ? opts.tp
                              : axis == "ep" ? opts.ep : opts.pp) =
          tool::parseInt("--mesh " + axis, value, 1, int64_t(1) << 20);
    }
    if (opts.ep > 1 && opts.tp > 1)
      die("--mesh " + mesh + ": a mesh with both ep and tp is not supported yet "
          "(dp,ep and dp,tp are)");
    if (opts.ep > 1 && !batchSize.getNumOccurrences())
      die("--mesh ep=" + std::to_string(opts.ep) +
          " needs --batch-size (the global batch, split over dp x ep)");
    if (opts.ep > 1 && batchSize % (opts.dp * opts.ep))
      die("--batch-size " + std::to_string((long long)batchSize) +
          " does not divide over the " + std::to_string(opts.dp * opts.ep) +
          " ranks of --mesh " + mesh);
    if (opts.pp * opts.dp * opts.tp * opts.ep > (int64_t(1) << 20))
      die("--mesh " + mesh + ": more than 2^20 ranks");
    if (opts.dp > 1 && !batchSize.getNumOccurrences())
      die("--mesh dp=" + std::to_string(opts.dp) +
          " needs --batch-size (the global batch)");
    if (opts.dp > 1 && batchSize % opts.dp)
      die("--batch-size " + std::to_string((long long)batchSize) +
          " does not divide over --mesh dp=" + std::to_string(opts.dp) +
          " ranks");
  }
  opts.microbatches = microbatches;
  if (opts.microbatches > 1 && !batchSize.getNumOccurrences())
    die("--microbatches " + std::to_string(opts.microbatches) +
        " needs --batch-size (the global batch, split into microbatches)");
  {
    const int64_t dataRanks = opts.dp * opts.ep;
    if (opts.microbatches > 1 && batchSize % (opts.microbatches * dataRanks))
      die("--microbatches " + std::to_string(opts.microbatches) +
          " does not divide the batch: --batch-size " +
          std::to_string((long long)batchSize) + " must be a multiple of " +
          std::to_string(opts.microbatches * dataRanks) +
          (dataRanks > 1 ? " (microbatches x data-parallel ranks)"
                         : " (the microbatches)"));
  }
  if (pipelineSchedule.getNumOccurrences() && opts.pp < 2)
    die("--schedule orders a pipeline's stages: it needs --mesh pp=S with S > 1");
  if (pipelineSchedule != "gpipe" && pipelineSchedule != "1f1b" &&
      pipelineSchedule != "interleaved" && pipelineSchedule != "zb")
    die("--schedule must be gpipe, 1f1b, interleaved or zb, got '" +
        pipelineSchedule + "'");
  opts.pipelineSchedule = pipelineSchedule;
  if (virtualStages > 1 && opts.pipelineSchedule != "interleaved")
    die("--virtual-stages " + std::to_string((long long)virtualStages) +
        " needs --schedule interleaved");
  opts.virtualStages = virtualStages;
  if (!stageBoundaries.empty() && opts.pp < 2)
    die("--stage-boundaries cut the model into pipeline stages: it needs "
        "--mesh pp=S with S > 1");
  opts.stageBoundaries.assign(stageBoundaries.begin(), stageBoundaries.end());
  if (!stageCosts.empty() && opts.pp < 2)
    die("--stage-costs balances pipeline stages: it needs --mesh pp=S with S > 1");
  if (!stageCosts.empty() && !stageBoundaries.empty())
    die("--stage-costs and --stage-boundaries both choose the cuts: give one");
  opts.stageCosts = stageCosts;
  if (recompute != "none" && recompute != "selective" && recompute != "full")
    die("--recompute must be none, selective or full, got '" + recompute + "'");
  opts.recompute = recompute;
  if (memoryBudget.getNumOccurrences() && !(memoryBudget > 0.0 && memoryBudget < 1e9))
    die("--memory-budget must be a positive number of MiB, got " +
        std::to_string((double)memoryBudget));
  opts.memoryBudgetMb = memoryBudget;
  for (const std::string &a : shardSpecs) {
    if (a.find(';') != std::string::npos || a.find('=') == std::string::npos)
      die("--shard '" + a + "' is not REGEX=SPEC (SPEC: one entry per "
          "dimension, tp or -, e.g. fc1.weight=tp,-)");
    opts.shard.push_back(a);
  }
  if (tpStrategy.getNumOccurrences()) {
    if (tpStrategy != "megatron")
      die("--tp: unknown strategy '" + tpStrategy + "' (megatron)");
    if (opts.tp < 2)
      die("--tp megatron splits blocks over the tensor-parallel ranks: it "
          "needs --mesh tp=M (or dp=N,tp=M) with M > 1");
    opts.tpStrategy = tpStrategy;
  }
  if (sequenceParallel && opts.tpStrategy.empty())
    die("--sequence-parallel splits the regions between Megatron's blocks: "
        "it needs --tp megatron");
  opts.sequenceParallel = sequenceParallel;
  if (!opts.shard.empty() && opts.tp < 2)
    die("--shard splits parameters over the tensor-parallel ranks: it needs "
        "--mesh tp=M (or dp=N,tp=M) with M > 1");
  opts.gradCompression = gradCompression;
  if (!(bucketMB >= 0) || !(bucketMB <= 1e6))
    die("--bucket-mb must be in [0, 1e6] MiB, got " + std::to_string(bucketMB));
  if (bucketMB.getNumOccurrences() && opts.dp < 2)
    die("--bucket-mb groups the gradients' all-reduces: it needs --mesh dp=N "
        "with N > 1");
  opts.bucketMB = bucketMB;
  if (zeroStage < 0 || zeroStage > 3)
    die("--zero must be 0, 1, 2 or 3, got " + std::to_string(zeroStage));
  if (zeroStage > 0 && opts.dp < 2)
    die("--zero " + std::to_string(zeroStage) +
        " shards over the data-parallel ranks: it needs --mesh dp=N with N > 1");
  opts.zero = zeroStage;
  opts.syncBatchNorm = syncBatchNorm;
  if (precision != "fp32" && precision != "bf16" && precision != "fp16")
    die("--precision must be fp32, bf16 or fp16, got '" + precision + "'");
  opts.precision = precision;
  if (!fp32Ops.empty() && opts.precision == "fp32")
    die("--fp32-ops keeps ops in float32 under --precision bf16|fp16; with "
        "fp32 everything already is");
  for (const std::string &t : fp32Ops)
    if (!getONNXPatternRegistry().knowsOpType("", t))
      die("--fp32-ops: '" + t + "' is not an ONNX op type Kiln imports "
          "(names are case-sensitive, as Softmax)");
  opts.fp32Ops.assign(fp32Ops.begin(), fp32Ops.end());
  opts.lossScale = lossScale;
  opts.initScale = initScale;
  opts.scaleGrowthInterval = scaleGrowthInterval;
  LossScaleChoice scaling;
  std::string scaleErr;
  if (!resolveLossScale(opts, scaling, scaleErr))
    die(scaleErr);
  if ((initScale.getNumOccurrences() || scaleGrowthInterval.getNumOccurrences()) &&
      !scaling.dynamic)
    die("--init-scale and --scale-growth-interval set the dynamic loss scale: "
        "they need --loss-scale dynamic (the default with --precision fp16)");
  if (opts.gradCompression != "none" && opts.gradCompression != "bf16" &&
      opts.gradCompression != "fp16" && opts.gradCompression != "int8")
    die("--grad-compression must be none, bf16, fp16 or int8, got '" +
        opts.gradCompression + "'");
  if (opts.gradCompression != "none" && opts.dp < 2)
    die("--grad-compression " + opts.gradCompression +
        " compresses the gradients' all-reduce: it needs --mesh dp=N with N > 1");
  opts.loss = loss;
  opts.logits = logits;
  opts.labels = labels;
  opts.softLabels = softLabels;
  opts.lossOutput = lossOutput;
  opts.optimizer = optimizer;
  opts.lr = lr;
  opts.momentum = momentum;
  opts.nesterov = nesterov;
  opts.weightDecay = weightDecay;
  opts.beta1 = beta1;
  opts.beta2 = beta2;
  opts.eps = eps;
  opts.freeze = freeze;
  opts.clipNorm = clipGradNorm;
  opts.schedule = lrSchedule;
  opts.warmupSteps = warmupSteps;
  opts.totalSteps = totalSteps;
  opts.minLr = minLr;
  opts.bnRunningVar = bnRunningVar;
  opts.testBreakVJP = testBreakVJP;
  if (!prune.empty()) {
    std::string spec = prune;
    size_t eq = spec.find('=');
    std::string kind = spec.substr(0, eq);
    if ((kind != "magnitude" && kind != "l1-channel") || eq == std::string::npos)
      die("--prune needs magnitude=S or l1-channel=R, got '" + spec + "'");
    std::string num = spec.substr(eq + 1);
    char *endp = nullptr;
    double v = num.empty() ? NAN : std::strtod(num.c_str(), &endp);
    bool inRange = !num.empty() && *endp == '\0' && v >= 0.0 && v < 1.0;
    if (kind == "l1-channel") {
      if (!inRange)
        die("--prune l1-channel=R needs a ratio R in [0, 1), got '" + num + "'");
      if (pruneAt < 0)
        die("--prune-at needs a step >= 0, got " + std::to_string(pruneAt));
      if (pruneEnd.getNumOccurrences() || pruneEvery.getNumOccurrences())
        die("--prune-end and --prune-every go with --prune magnitude=S");
      opts.pruneChannels = v;
      opts.pruneAt = pruneAt;
    }
  }
  if (!prune.empty() && opts.pruneChannels < 0) {
    std::string spec = prune;
    std::string num = spec.substr(spec.find('=') + 1);
    char *endp = nullptr;
    double v = num.empty() ? NAN : std::strtod(num.c_str(), &endp);
    if (num.empty() || *endp != '\0' || !(v >= 0.0 && v < 1.0))
      die("--prune magnitude=S needs a sparsity S in [0, 1), got '" + num + "'");
    opts.pruneSparsity = v;
    if (pruneAt < 0)
      die("--prune-at needs a step >= 0, got " + std::to_string(pruneAt));
    if (pruneEnd.getNumOccurrences() && pruneEnd < pruneAt)
      die("--prune-end " + std::to_string(pruneEnd) + " is before --prune-at " +
          std::to_string(pruneAt));
    if (pruneEvery < 1)
      die("--prune-every needs a positive number of steps, got " +
          std::to_string(pruneEvery));
    opts.pruneAt = pruneAt;
    opts.pruneEnd = pruneEnd.getNumOccurrences() ? (int64_t)pruneEnd : (int64_t)pruneAt;
    opts.pruneEvery = pruneEvery;
  } else if (prune.empty() && (pruneAt.getNumOccurrences() || pruneEnd.getNumOccurrences() ||
                                pruneEvery.getNumOccurrences())) {
    die("--prune-at, --prune-end and --prune-every need --prune magnitude=S");
  }
  if (!qat.empty()) {
    if (qat != "int8")
      die("--qat needs int8, got '" + qat + "'");
    opts.qat = true;
    if (qatFreeze.getNumOccurrences()) {
      if (qatFreeze < 1)
        die("--qat-freeze-step needs a step >= 1, got " + std::to_string(qatFreeze));
      opts.qatFreeze = qatFreeze;
    }
  } else if (qatFreeze.getNumOccurrences()) {
    die("--qat-freeze-step needs --qat int8");
  }
  if (!teacher.empty()) {
    if (!(distillAlpha >= 0 && distillAlpha <= 1))
      die("--distill-alpha needs A in [0, 1], got " + std::to_string(distillAlpha));
    if (!(distillTemperature > 0) || !std::isfinite(distillTemperature))
      die("--distill-temperature needs T > 0, got " + std::to_string(distillTemperature));
    opts.teacher = teacher;
    opts.distillAlpha = distillAlpha;
    opts.distillTemperature = distillTemperature;
  } else if (distillAlpha.getNumOccurrences() || distillTemperature.getNumOccurrences()) {
    die("--distill-alpha and --distill-temperature need --teacher T.onnx");
  }

  emitKind = emit;
  out = output;

  if (positional.empty())
    die("no model given (usage: kiln-compile MODEL.onnx -o OUT)");
  if (positional.size() > 1)
    die("unexpected argument '" + positional[1] + "' (one model per run)");
  model = positional[0];
  if (out.empty())
    die("no output given: pass -o OUT");
  if (target == "cuda")
    die("--target cuda: this build has no CUDA runtime (cpu only)");
  if (target != "cpu")
    die("--target must be cpu or cuda, got '" + target + "'");
  if (emitKind != "exe" && emitKind != "mlir" && emitKind != "plan" &&
      emitKind != "schedule")
    die("--emit must be exe, mlir, plan or schedule, got '" + emitKind + "'");
  if (emitKind == "schedule" && opts.pp < 2)
    die("--emit schedule prints a pipeline's instruction lists: it needs "
        "--mesh pp=S with S > 1");
  if (!symbolizeLossKind(opts.loss))
    die("--loss must be cross-entropy, mse or output, got '" + opts.loss + "'");
  if (opts.softLabels && opts.loss != "cross-entropy")
    die("--soft-labels goes with --loss cross-entropy, got --loss " + opts.loss);
  if (opts.loss == "output" && opts.lossOutput.empty())
    die("--loss output needs --loss-output NAME (the scalar model output to minimise)");
  if (opts.optimizer == "none" && emitKind == "exe")
    die("--optimizer none (gradients as plan outputs) needs --emit plan or mlir");
  if (!symbolizeOptimizerKind(opts.optimizer) && opts.optimizer != "none")
    die("--optimizer must be sgd, momentum, adam or adamw, got '" + opts.optimizer + "'");
  if (!symbolizeLRSchedule(opts.schedule))
    die("--lr-schedule must be constant, linear-warmup or cosine, got '" +
        opts.schedule + "'");
  // Each numeric flag's own range is checked as it is parsed (NumberRange,
  // IntRange above); what remains are the names and the flags' relations.
  for (auto [flag, opt] : {std::pair<const char *, cl::opt<std::string> *>{
                               "--labels", &labels},
                           {"--logits", &logits},
                           {"--loss-output", &lossOutput}})
    if (opt->getNumOccurrences() && opt->getValue().empty())
      die(std::string(flag) + " must name a tensor, got ''");
  if (opts.schedule == "cosine" && opts.totalSteps > 0 &&
      opts.totalSteps < opts.warmupSteps)
    die("--total-steps must be 0 (the run's length) or at least --warmup-steps "
        "(" + std::to_string(opts.warmupSteps) + ") with --lr-schedule "
        "cosine, got " + std::to_string(opts.totalSteps));
  double peakLr = opts.lr > 0 ? opts.lr : defaultLr(opts.optimizer);
  if (opts.minLr > peakLr)
    die(llvm::formatv("--min-lr must be in [0, {0}] (at most the {1}--lr), "
                      "got {2}",
                      llvm::format("%g", peakLr),
                      lr.getNumOccurrences() ? "" : "default ",
                      llvm::format("%g", opts.minLr))
            .str());
  if (!symbolizeBNRunningVar(opts.bnRunningVar))
    die("--bn-running-var must be unbiased or biased");
}

std::string findRuntime() {
  if (const char *env = std::getenv("KILN_TRAIN_RUNTIME"))
    return env;
  static int anchor;
  std::string self = llvm::sys::fs::getMainExecutable("kiln-compile", &anchor);
  llvm::SmallString<256> p(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(p, "kiln-train");
  return std::string(p);
}

/// Writes an output through the runtime's atomic writer (PATH.tmp, fsync,
/// rename, fsync of the directory): the one definition kiln-train uses too.
void writeAtomically(const std::string &path, const std::string &bytes,
                     bool executable) {
  std::string err;
  if (!rt::writeFileAtomic(path, {bytes}, err, executable ? 0755 : 0644))
    die(err);
}

} // namespace

int main(int argc, char **argv) {
  TrainCompileOptions opts;
  std::string model, out, emit;
  parseArgs(argc, argv, opts, model, out, emit);
  if (!llvm::sys::fs::exists(model))
    die(model + ": no such file");
  // Every file is checked before it is opened for good: a FIFO would block.
  std::string err;
  if (!rt::checkRegularFile(model, err))
    die(err);
  if (!rt::checkOutputPath("-o", out, {{model, "the model"}}, err))
    die(err);

  std::string runtime;
  if (emit == "exe") {
    runtime = findRuntime();
    if (!llvm::sys::fs::exists(runtime))
      die("the training runtime '" + runtime +
          "' is missing (build the kiln-train target, or set KILN_TRAIN_RUNTIME)");
  }

  if (emit == "schedule") {
    // The instruction lists a compile orders each stage's program by; they
    // depend on S, M and V alone, so the model is not compiled.
    rt::PipelineScheduleKind kind;
    rt::PipelineSchedule schedule;
    if (!rt::parsePipelineSchedule(opts.pipelineSchedule, kind) ||
        !rt::buildPipelineSchedule(kind, (int)opts.pp, (int)opts.microbatches,
                                   (int)opts.virtualStages, schedule, err))
      die(err);
    writeAtomically(out, schedule.describe(), false);
    return 0;
  }
  auto t0 = std::chrono::steady_clock::now();
  TrainCompileResult r;
  if (!compileONNXToTraining(model, opts, r))
    die(model + ": " + r.error);
  for (const std::string &w : r.warnings)
    llvm::errs() << "kiln-compile: warning: " << w << "\n";

  if (emit == "mlir") {
    writeAtomically(out, r.mlir, false);
    return 0;
  }
  if (emit == "plan") {
    writeAtomically(out, r.trainPlan, false);
    return 0;
  }
  std::string bytes, onnx;
  if (!rt::readRegularFile(runtime, bytes, err) ||
      !rt::readRegularFile(model, onnx, err))
    die(err);
  rt::TrainPayloadParts parts;
  parts[rt::TrainPart::Plan] = r.trainPlan;
  parts[rt::TrainPart::Config] = r.config;
  // Structured pruning embeds the model with its pruned shapes.
  parts[rt::TrainPart::Model] = r.model.empty() ? onnx : r.model;
  parts[rt::TrainPart::Eval] = r.evalPlan;
  // --prune l1-channel --prune-at S: the smaller model's payload, which the
  // run continues on after step S.
  std::string then;
  if (r.then) {
    rt::TrainPayloadParts tp;
    tp[rt::TrainPart::Plan] = r.then->trainPlan;
    tp[rt::TrainPart::Config] = r.then->config;
    tp[rt::TrainPart::Model] = r.then->model;
    tp[rt::TrainPart::Eval] = r.then->evalPlan;
    rt::appendTrainPayload(then, tp);
    parts[rt::TrainPart::Then] = then;
  }
  rt::appendTrainPayload(bytes, parts);
  writeAtomically(out, bytes, true);
  if (!r.pruneSummary.empty())
    llvm::errs() << "kiln-compile: " << r.pruneSummary << "\n";
  if (!r.tpSummary.empty())
    llvm::errs() << "kiln-compile: " << r.tpSummary << "\n";
  if (r.modelParamBytes != r.rankParamBytes && (opts.tp > 1 || opts.ep > 1))
    llvm::errs() << llvm::format(
        "kiln-compile: %s parallelism over %s=%lld: each rank holds %.2f "
        "MiB of the model's %.2f MiB of parameters and optimizer state\n",
        opts.tp > 1 ? "tensor" : "expert", opts.tp > 1 ? "tp" : "ep",
        (long long)(opts.tp > 1 ? opts.tp : opts.ep), r.rankParamBytes / 1048576.0,
        r.modelParamBytes / 1048576.0);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string &line : r.recomputeSummary)
    llvm::errs() << "kiln-compile: recompute: " << line << "\n";
  std::string stages;
  if (r.stageArenaBytes.size() > 1) {
    stages = "; per stage";
    for (int64_t b : r.stageArenaBytes)
      stages += llvm::formatv(" {0:F2}", b / 1048576.0).str();
  }
  llvm::errs() << llvm::format("kiln-compile: wrote %s (train arena %.2f MiB%s, compiled in %.1f s)\n",
                               out.c_str(), r.trainArenaBytes / 1048576.0, stages.c_str(),
                               secs);
  return 0;
}
