//===- Main.cpp - kiln-train: the training executable -----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// kiln-compile appends a @train_step plan, a config, the ONNX model and an
// eval plan to a copy of this binary (Payload.h). Run, it trains:
//
//   OUT --data NAME=FILE.npy|GLOB|DIR [--data ...] (--steps N | --epochs N)
//       [--no-shuffle] [--seed S] [--loader-threads N] [--drop-nonfinite]
//       [--log-every N] [--metrics FILE.jsonl]
//       [--export-onnx FILE.onnx] [--checkpoint-dir DIR] [--checkpoint-every N]
//       [--keep-checkpoints K] [--resume] [--eval-data NAME=FILE.npy ...]
//       [--eval-every N] [--threads N] [--ranks-per-node N] [--debug-nan]
//       [--augment SPEC] [--profile FILE.json [--profile-steps A:B]]
//       [--tensorboard DIR [--histogram-every N] [--tensorboard-ranks 0|all]]
//       [--alert KIND=THRESHOLD ...]
//
// Step s (from 0) feeds the plan the batch of samples [p·B, (p+1)·B) of its
// epoch's order (Data.h), the learning rate of the schedule as `kiln.lr` and
// s+1 as `kiln.step`, with the program's ExecContext at (seed, s); the loss
// reported for step s is that run's `loss` output (the forward pass before
// the update). Any user error is one line on stderr and exit status 1.
//===----------------------------------------------------------------------===//
#include "Alerts.h"
#include "Augment.h"
#include "Checkpoint.h"
#include "Config.h"
#include "Data.h"
#include "Eval.h"
#include "kiln/comm/Communicator.h"
#include "kiln/comm/MeshCollectives.h"
#include "ExportOnnx.h"
#include "Log.h"
#include "LossScale.h"
#include "Profile.h"
#include "Payload.h"
#include "PipelineStages.h"
#include "PruneChannels.h"
#include "Sha256.h"
#include "TensorBoard.h"
#include "TensorSplit.h"
#include "SystemMetrics.h"
#include "Util.h"

#include "kiln/runtime/FileIO.h"
#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/ToolFlags.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>

using namespace kiln;
using namespace kiln::train;

namespace {

const char *kUsage =
    "usage: %s --data NAME=FILE.npy [--data ...] (--steps N | --epochs N) [options]\n"
    "\n"
    "Trains the model compiled into this executable (kiln-compile).\n"
    "\n"
    "  --data NAME=FILE.npy     bind a model input (or the labels) to a NumPy array\n"
    "                           whose first axis indexes samples (repeatable);\n"
    "                           NAME=GLOB ('x-*.npy', sorted by name) or NAME=DIR\n"
    "                           (DIR/manifest.json lists the files) bind shards\n"
    "                           read as one array\n"
    "  --steps N                run until N steps are done\n"
    "  --epochs N               run N epochs (floor(samples / batch) steps each)\n"
    "  --no-shuffle             use the file order (default: shuffle every epoch)\n"
    "  --seed S                 data order and dropout seed (default 0)\n"
    "  --loader-threads N       threads gathering batches ahead of the step\n"
    "                           (default 2)\n"
    "  --drop-nonfinite         leave out the samples with a NaN or an infinity\n"
    "  --augment SPEC           augment each sample on the loader threads, the\n"
    "                           same for any rank count and on resume (crop=,\n"
    "                           flip, jitter=, normalize=, mixup=, cutmix=,\n"
    "                           mask=, substitute=; docs/Training.md)\n"
    "  --log-every N            a log line every N steps (default 10; 0: none)\n"
    "  --metrics FILE.jsonl     one JSON object per step\n"
    "  --export-onnx FILE.onnx  write the model with its trained initializers\n"
    "  --checkpoint-dir DIR     save checkpoints under DIR (at the end, and\n"
    "  --checkpoint-every N     every N steps)\n"
    "  --keep-checkpoints K     keep the newest K (default 3)\n"
    "  --resume                 continue from the newest good checkpoint in DIR\n"
    "  --eval-data NAME=FILE    held-out data for the eval plan (repeatable; FILE,\n"
    "                           GLOB or DIR as for --data);\n"
    "                           evaluated at the end\n"
    "  --eval-every N           ... and every N steps\n"
    "  --threads N              worker threads (default: OpenMP's)\n"
    "  --ranks-per-node N       data-parallel runs all-reduce hierarchically\n"
    "                           over nodes of N ranks (default 0: the ranks\n"
    "                           sharing memory form a node)\n"
    "  --profile FILE.json      a Chrome/Perfetto trace of kernels, collectives,\n"
    "                           data loading and checkpoints (every rank), and\n"
    "                           a summary in the log\n"
    "  --profile-steps A:B      the steps it covers, A to B-1 (default: the ten\n"
    "                           after the run's first)\n"
    "  --tensorboard DIR        TensorBoard event files: every step's scalars\n"
    "                           (loss, lr, grad norm, throughput, memory, ...)\n"
    "  --histogram-every N      and histograms of every parameter and gradient\n"
    "                           every N steps (default 100; 0: none)\n"
    "  --tensorboard-ranks R    0 (default): rank 0 writes DIR; all: rank r\n"
    "                           writes DIR/rank-r\n"
    "  --alert KIND=THRESHOLD   warn once (stderr, with the rank and step) when\n"
    "                           memory=P% (of the memory limit), step-time=Fx\n"
    "                           or loss-spike=Fx (of the running median), nan;\n"
    "                           repeatable; none: no alerts (default:\n"
    "                           memory=90% and nan)\n"
    "  --debug-nan              keep the parameters before each step so that a\n"
    "                           non-finite loss is traced on the exact step\n"
    "  --help                   this text\n";

struct Options {
  std::vector<std::pair<std::string, std::string>> data, evalData;
  std::optional<int64_t> steps, epochs;
  bool shuffle = true, noShuffleGiven = false;
  uint64_t seed = 0;
  bool seedGiven = false;
  int64_t logEvery = 10;
  std::string metrics, exportOnnx, checkpointDir;
  int64_t checkpointEvery = 0, keepCheckpoints = 3, evalEvery = 0;
  bool resume = false, debugNan = false;
  int64_t threads = 0;
  int64_t loaderThreads = 2;
  bool dropNonFinite = false;
  std::string augment;
  int64_t ranksPerNode = 0; // 0: the ranks sharing memory form a node
  std::string profile, profileSteps;
  std::vector<std::string> alerts;
  std::string tensorboard, tensorboardRanks;
  int64_t histogramEvery = 100;
};

// The largest step count: step numbers, epoch × steps-per-epoch and the
// schedules' arithmetic stay far from int64 overflow.
constexpr int64_t kMaxSteps = int64_t(1) << 62;
constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

std::pair<std::string, std::string> parseBinding(const std::string &flag,
                                                 const std::string &v) {
  size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
    fail(flag + " needs NAME=FILE.npy, got '" + v + "'");
  return {v.substr(0, eq), v.substr(eq + 1)};
}

/// Returns false for --help.
bool parseArgs(int argc, char **argv, Options &o) {
  std::vector<std::string> data, evalData, positional;
  int64_t steps = 0, epochs = 0;
  bool stepsGiven = false, epochsGiven = false, noShuffle = false;
  rt::FlagParser flags;
  flags.list("--data", data)
      .list("--eval-data", evalData)
      .integer("--steps", steps, 1, kMaxSteps, &stepsGiven)
      .integer("--epochs", epochs, 1, kMaxSteps, &epochsGiven)
      .flag("--no-shuffle", noShuffle)
      .unsignedInteger("--seed", o.seed, &o.seedGiven)
      .integer("--loader-threads", o.loaderThreads, 1, 256)
      .flag("--drop-nonfinite", o.dropNonFinite)
      .text("--augment", o.augment)
      .integer("--log-every", o.logEvery, 0, kNoMax)
      .text("--metrics", o.metrics)
      .text("--export-onnx", o.exportOnnx)
      .text("--checkpoint-dir", o.checkpointDir)
      .integer("--checkpoint-every", o.checkpointEvery, 1, kNoMax)
      .integer("--keep-checkpoints", o.keepCheckpoints, 1, kNoMax)
      .flag("--resume", o.resume)
      .integer("--eval-every", o.evalEvery, 1, kNoMax)
      .integer("--threads", o.threads, 1, 1024)
      .integer("--ranks-per-node", o.ranksPerNode, 0, 1 << 20)
      .text("--profile", o.profile)
      .text("--profile-steps", o.profileSteps)
      .list("--alert", o.alerts)
      .text("--tensorboard", o.tensorboard)
      .text("--tensorboard-ranks", o.tensorboardRanks)
      .integer("--histogram-every", o.histogramEvery, 0, kNoMax)
      .flag("--debug-nan", o.debugNan);
  try {
    if (!flags.parse(argc, argv, positional))
      return false;
  } catch (const rt::FlagError &e) {
    fail(e.what());
  }
  if (!positional.empty())
    fail("unexpected argument '" + positional[0] +
         "' (inputs are given as --data NAME=FILE.npy)");
  for (const std::string &d : data)
    o.data.push_back(parseBinding("--data", d));
  for (const std::string &d : evalData)
    o.evalData.push_back(parseBinding("--eval-data", d));
  if (stepsGiven)
    o.steps = steps;
  if (epochsGiven)
    o.epochs = epochs;
  o.shuffle = !noShuffle;
  o.noShuffleGiven = noShuffle;
  if (o.steps && o.epochs)
    fail("give --steps or --epochs, not both");
  if (!o.steps && !o.epochs)
    fail("give --steps N or --epochs N");
  if (o.checkpointEvery && o.checkpointDir.empty())
    fail("--checkpoint-every needs --checkpoint-dir");
  if (o.resume && o.checkpointDir.empty())
    fail("--resume needs --checkpoint-dir");
  if (o.evalEvery && o.evalData.empty())
    fail("--eval-every needs --eval-data");
  if (o.data.empty())
    fail("give the training data with --data NAME=FILE.npy");
  if (o.tensorboard.empty() && !o.tensorboardRanks.empty())
    fail("--tensorboard-ranks needs --tensorboard DIR");
  if (!o.tensorboardRanks.empty() && o.tensorboardRanks != "0" &&
      o.tensorboardRanks != "all")
    fail("--tensorboard-ranks needs 0 or all, got '" + o.tensorboardRanks + "'");
  return true;
}

volatile std::sig_atomic_t gStopSignal = 0;

void onSignal(int sig) {
  gStopSignal = sig;
  std::signal(sig, SIG_DFL); // a second one ends the process
}

bool anyNonFinite(const rt::Program &p) {
  std::string err;
  for (const std::string &n : p.paramNames()) {
    rt::HostTensor t;
    if (!p.getParam(n, t, err) || !rt::isFloat(t.dtype()))
      continue;
    for (int64_t i = 0; i < t.numel(); ++i) {
      double v;
      switch (t.dtype()) {
      case rt::DType::F32: v = t.as<float>()[i]; break;
      case rt::DType::F64: v = t.as<double>()[i]; break;
      case rt::DType::F16: v = rt::halfToFloat(t.as<uint16_t>()[i]); break;
      default: v = rt::bf16ToFloat(t.as<uint16_t>()[i]); break;
      }
      if (!std::isfinite(v))
        return true;
    }
  }
  return false;
}

std::string fmt(const char *f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string evalLine(const EvalResult &r) {
  std::string s = "loss " + fmt("%.6f", r.loss);
  if (r.accuracy)
    s += "  accuracy " + fmt("%.4f", *r.accuracy);
  s += "  (" + std::to_string(r.samples) + " sample" +
       (r.samples == 1 ? "" : "s") + ")";
  return s;
}

int runTraining(int argc, char **argv) {
  Options opt;
  std::string prog = argc > 0 ? argv[0] : "kiln-train";
  if (!parseArgs(argc, argv, opt)) {
    std::printf(kUsage, prog.c_str());
    return 0;
  }
  if (opt.threads)
    omp_set_num_threads((int)opt.threads);
  AlertConfig alertConfig = AlertConfig::parse(opt.alerts);

  Payload payload;
  std::string err;
  if (!loadPayload(payload, err))
    fail(err);
  Config config = parseConfig(payload.config);
  if (config.modelSha256.empty() && !payload.model.empty())
    config.modelSha256 = sha256Hex(payload.model.data(), payload.model.size());

  // The ranks (docs/Distributed.md): a plan compiled with --mesh dp=N runs
  // as N processes under an MPI launcher, each on its slice of every global
  // batch; rank 0 reports, writes the metrics, checkpoints and exports (the
  // parameters are replicated). Without a launcher the world is one rank.
  comm::Communicator &world = comm::world();
  const int rank = world.rank();
  const bool lead = rank == 0;
  // A pipeline (--mesh pp=S): the plan part holds one plan per stage; this
  // rank runs its stage's.
  std::string_view planBytes = payload.plan;
  if (rt::isPipelinePlans(payload.plan) || config.pp > 1) {
    uint64_t count = 0;
    const int64_t stage = rank / std::max<int64_t>(1, config.stageRanks());
    if (!rt::pipelinePlan(payload.plan, (uint64_t)std::min(stage, config.pp - 1),
                          planBytes, count, err))
      fail("payload plan: " + err);
    if ((int64_t)count != config.pp)
      fail("payload plan: it holds " + std::to_string(count) +
           " pipeline stages' plans, the config's mesh has pp=" +
           std::to_string(config.pp));
  }
  std::unique_ptr<rt::Program> program =
      rt::Program::load(planBytes.data(), planBytes.size(), err);
  if (!program)
    fail("payload plan: " + err);
  // --prune l1-channel --prune-at S: the smaller model's plans, config and
  // ONNX, which the run continues on after step S (PruneChannels.h).
  rt::TrainPayloadParts then;
  std::unique_ptr<rt::Program> pruned;
  std::optional<Config> prunedConfig;
  const bool channelsAtStep =
      config.prune && config.prune->kind == "l1-channel" &&
      !config.prune->channels.empty();
  if (!payload.then.empty()) {
    if (!rt::parseTrainPayload(payload.then.data(), payload.then.size(), then, err))
      fail("payload: the plan after --prune-at: " + err);
    if (!channelsAtStep)
      fail("payload: it has a plan after --prune-at, but the config prunes no "
           "channels at a step");
    prunedConfig = parseConfig(then[rt::TrainPart::Config]);
    pruned = rt::Program::load(then[rt::TrainPart::Plan].data(),
                               then[rt::TrainPart::Plan].size(), err);
    if (!pruned)
      fail("payload: the plan after --prune-at: " + err);
  }

  Alerts alerts(alertConfig, rank);
  SystemMonitor monitor;
  std::string meshText;
  if (config.pp > 1)
    meshText = "pp=" + std::to_string(config.pp);
  for (auto [name, size] : {std::pair<const char *, int64_t>{"dp", config.dp},
                            {"ep", config.ep}, {"tp", config.tp}})
    if (size > 1 || (!std::strcmp(name, "dp") && config.ranks() == 1))
      meshText += (meshText.empty() ? "" : ",") + std::string(name) + "=" +
                  std::to_string(size);
  if (world.size() != config.ranks())
    fail(config.ranks() > 1
             ? "this executable trains on " + std::to_string(config.ranks()) +
                   (config.tp > 1 || config.ep > 1 || config.pp > 1
                        ? " ranks"
                        : " data-parallel ranks") +
                   " (compiled with --mesh " + meshText +
                   "): run it with mpirun -np " +
                   std::to_string(config.ranks()) + "; it was started as " +
                   std::to_string(world.size()) + " rank" +
                   (world.size() == 1 ? "" : "s")
             : "this executable trains on one rank, but " +
                   std::to_string(world.size()) +
                   " were started; compile with --mesh dp=" +
                   std::to_string(world.size()) + " to train on them");
  // The mesh dp x ep x tp, the last fastest: this rank's group along every
  // set of mesh axes a collective may name ("dp", "ep", "dp+ep", ...:
  // the axes of more than one rank, joined in mesh order).
  const MeshPosition meshPos = meshPositionOf(config, rank);
  // The samples this rank reads: its place over dp x ep.
  const int dataIndex = (int)(meshPos[0].index * meshPos[1].size + meshPos[1].index);
  comm::MeshCollectives collectives;
  std::vector<std::unique_ptr<comm::Communicator>> groups;
  std::unique_ptr<comm::Communicator> hierarchical;
  comm::Communicator *dpComm = &world;
  {
    std::vector<const rt::Program::MeshAxisPosition *> axes;
    for (const auto &p : meshPos)
      if (p.size > 1)
        axes.push_back(&p);
    const unsigned full = (1u << axes.size()) - 1;
    for (unsigned mask = 1; mask <= full; ++mask) {
      int64_t color = 0, key = 0;
      std::string name;
      for (size_t i = 0; i < axes.size(); ++i) {
        if (mask & (1u << i)) {
          key = key * axes[i]->size + axes[i]->index;
          name += (name.empty() ? "" : "+") + axes[i]->axis;
        } else {
          color = color * axes[i]->size + axes[i]->index;
        }
      }
      comm::Communicator *c = &world;
      if (mask != full) {
        groups.push_back(world.split((int)color, (int)key, name));
        c = groups.back().get();
      }
      if (name == "dp")
        dpComm = c;
      else
        collectives.addAxis(name, *c);
    }
    // A plan without a dp axis of its own (ep=E alone) still names none;
    // "dp" is the group of this rank alone then.
    if (config.dp == 1 && config.ranks() > 1) {
      groups.push_back(world.split(rank, 0, "dp"));
      dpComm = groups.back().get();
    }
  }
  // A pipeline's receives are posted when the step begins, so activations
  // and gradients move while the stage computes, when every rank's
  // communication thread has a core of its own (it polls while receives
  // are in flight); else each waits for its data where it runs, which is
  // faster on oversubscribed cores. KILN_RECV_PREPOST=0|1 decides instead.
  if (config.pp > 1) {
    std::unique_ptr<comm::Communicator> node = world.splitShared("node");
    const int64_t threads = opt.threads > 0 ? opt.threads : 1;
    bool post = (int64_t)std::thread::hardware_concurrency() >=
                (int64_t)node->size() * (threads + 1);
    if (const char *e = std::getenv("KILN_RECV_PREPOST"))
      post = std::string(e) != "0";
    collectives.setPostReceives(post);
  }
  // A pipeline stage's ranks (dp x tp of one stage), for gathering its
  // split parameters whole.
  std::unique_ptr<comm::Communicator> stageComm;
  if (config.pp > 1 && config.stageRanks() > 1)
    stageComm = world.split((int)(rank / config.stageRanks()),
                            (int)(rank % config.stageRanks()), "stage");
  if (config.dp > 1)
    hierarchical = comm::makeHierarchical(*dpComm, (int)opt.ranksPerNode);
  collectives.addAxis("dp", hierarchical ? *hierarchical : *dpComm);
  if (config.ranks() > 1)
    for (rt::Program *p : {program.get(), pruned.get()})
      if (p) {
        p->setCollectives(&collectives);
        p->setBatchShard(dataIndex, config.dataRanks());
        // Split parameters (and ZeRO-3's blocks over a mesh of several
        // axes) load this rank's block.
        if (!config.split.empty() ||
            (!config.sharded.empty() && config.meshBeyondDp()))
          p->setMeshPosition(meshPos);
      }
  const int64_t globalBatch = config.batchSize * config.dataRanks();

  // The plan's inputs: lr, step and the config's data entries.
  rt::HostTensor lrT(rt::TensorDesc{rt::DType::F32, {}});
  rt::HostTensor stepT(rt::TensorDesc{rt::DType::I64, {}});
  rt::HostTensor scaleT(rt::TensorDesc{rt::DType::F32, {}});
  std::vector<int> inputSource; // data index, -1 lr, -2 step, -3 loss scale
  int lossOut = -1, gradNormOut = -1;
  // Binds a plan's inputs and outputs (the plan after --prune-at's step is
  // bound again when the run switches to it).
  auto bindPlan = [&](const rt::Program &plan) {
    const auto &inNames = plan.inputNames();
    const auto &inDescs = plan.inputDescs();
    inputSource.clear();
    bool scaleFed = false;
    for (size_t k = 0; k < inNames.size(); ++k) {
      if (config.lossScale && inNames[k] == config.lossScale->input) {
        if (inDescs[k] != scaleT.desc())
          fail("payload plan: input '" + inNames[k] + "' is " +
               inDescs[k].str() + ", the loss scale is f32[]");
        inputSource.push_back(-3);
        scaleFed = true;
        continue;
      }
      if (inNames[k] == config.lrInput) {
        if (inDescs[k] != lrT.desc())
          fail("payload plan: input '" + inNames[k] + "' is " +
               inDescs[k].str() + ", the learning rate is f32[]");
        inputSource.push_back(-1);
        continue;
      }
      if (inNames[k] == config.stepInput) {
        if (inDescs[k] != stepT.desc())
          fail("payload plan: input '" + inNames[k] + "' is " +
               inDescs[k].str() + ", the step is i64[]");
        inputSource.push_back(-2);
        continue;
      }
      const DataSpec *spec = config.findData(inNames[k]);
      if (!spec)
        fail("payload config: plan input '" + inNames[k] +
             "' is not in 'data'");
      rt::TensorDesc want{spec->dtype, {config.batchSize}};
      want.shape.insert(want.shape.end(), spec->sampleShape.begin(),
                        spec->sampleShape.end());
      if (inDescs[k] != want)
        fail("payload config: data input '" + inNames[k] + "' is " +
             want.str() + ", the plan's input is " + inDescs[k].str());
      inputSource.push_back((int)(spec - config.data.data()));
    }
    // A pipeline stage's plan reads the inputs its ops use (the first
    // stage the samples, the last the labels).
    for (const DataSpec &d : config.data) {
      bool found = config.pp > 1;
      for (const std::string &n : inNames)
        found |= n == d.name;
      if (!found)
        fail("payload config: data input '" + d.name + "' is not a plan input");
    }
    lossOut = findOutput(plan, "loss");
    gradNormOut = findOutput(plan, "grad_norm");
    if (lossOut < 0)
      fail("payload plan: it has no 'loss' output");
    if (config.lossScale && !scaleFed)
      fail("payload plan: the config scales the loss, but the plan has no '" +
           config.lossScale->input + "' input");
    if (config.lossScale && gradNormOut < 0)
      fail("payload plan: loss scaling reads the skipped steps from the "
           "'grad_norm' output, which the plan lacks");
  };
  bindPlan(*program);
  std::optional<LossScaler> scaler;
  if (config.lossScale)
    scaler.emplace(*config.lossScale);

  // Everything the user gave, checked before the first step. Outputs first:
  // the atomic writer renames over its target, so an output naming an input,
  // the executable or a special file would replace it.
  {
    std::vector<rt::NamedInput> inputs;
    for (const auto &[name, value] : opt.data)
      for (const std::string &file : dataFiles("--data", name, value))
        inputs.push_back({file, "--data " + name});
    for (const auto &[name, value] : opt.evalData)
      for (const std::string &file : dataFiles("--eval-data", name, value))
        inputs.push_back({file, "--eval-data " + name});
    const char *payloadEnv = std::getenv("KILN_TRAIN_PAYLOAD");
    inputs.push_back({"/proc/self/exe", "the executable"});
    if (payloadEnv && *payloadEnv)
      inputs.push_back({payloadEnv, "KILN_TRAIN_PAYLOAD"});
    std::string err;
    if (!opt.metrics.empty() &&
        !rt::checkOutputPath("--metrics", opt.metrics, inputs, err))
      fail(err);
    if (!opt.metrics.empty())
      inputs.push_back({opt.metrics, "--metrics"});
    if (!opt.exportOnnx.empty() &&
        !rt::checkOutputPath("--export-onnx", opt.exportOnnx, inputs, err))
      fail(err);
    if (!opt.metrics.empty() && opt.metrics == opt.exportOnnx)
      fail("--export-onnx " + opt.exportOnnx + ": it is also the --metrics file");
    if (!opt.exportOnnx.empty())
      inputs.push_back({opt.exportOnnx, "--export-onnx"});
    if (!opt.profile.empty() &&
        !rt::checkOutputPath("--profile", opt.profile, inputs, err))
      fail(err);
  }
  if (!opt.exportOnnx.empty())
    checkExportable(payload.model, opt.exportOnnx);
  Dataset data;
  DataOptions dataOptions;
  dataOptions.dropNonFinite = opt.dropNonFinite;
  dataOptions.threads = (int)opt.loaderThreads;
  data.open(opt.data, config.data, config.batchSize, "--data",
            /*partialBatch=*/false, dataOptions);
  if (config.dataRanks() > 1)
    data.setShard(dataIndex, config.dataRanks()); // a tp group reads the same samples
  if (config.loss == "cross-entropy" && config.numClasses)
    data.checkLabels(config.labels, *config.numClasses, config.ignoreIndex);
  // --augment: checked against the inputs before the first step.
  std::unique_ptr<Augmenter> augmenter;
  if (!opt.augment.empty()) {
    std::vector<DataSpec> specs;
    for (const Source &src : data.sources())
      specs.push_back(src.spec);
    augmenter = Augmenter::parse(opt.augment, specs, config.labels,
                                 config.numClasses, data.numSamples());
  }
  std::unique_ptr<Evaluator> evaluator;
  if (!opt.evalData.empty() && lead)
    evaluator = std::make_unique<Evaluator>(payload.eval, config, opt.evalData);
  // --prune-at: from now on the smaller plan runs (its state set), with
  // the smaller model's eval plan.
  auto usePrunedPlan = [&]() {
    program = std::move(pruned);
    bindPlan(*program);
    if (evaluator)
      evaluator = std::make_unique<Evaluator>(then[rt::TrainPart::Eval],
                                              *prunedConfig, opt.evalData);
  };
  std::unique_ptr<CheckpointStore> store;
  if (!opt.checkpointDir.empty()) {
    store = std::make_unique<CheckpointStore>(
        opt.checkpointDir, opt.keepCheckpoints, config.modelSha256,
        [](const std::string &line) { std::fprintf(stderr, "%s\n", line.c_str()); });
    store->prepare();
    // A pipeline stage's checkpoints hold the whole model (rank 0 writes
    // every stage's parameters); a resume takes this stage's.
    if (config.pp > 1)
      store->setModelParams(stageParamNames(payload.plan));
  }

  const int64_t spe = data.stepsPerEpoch();
  int64_t total = 0;
  if (opt.steps)
    total = *opt.steps;
  else if (__builtin_mul_overflow(*opt.epochs, spe, &total) || total > kMaxSteps)
    fail("--epochs " + std::to_string(*opt.epochs) + " of " +
         std::to_string(spe) + " steps each is more than " +
         std::to_string(kMaxSteps) + " steps");
  // A cosine schedule over the run's steps that would never leave warmup.
  if (config.schedule.kind == "cosine" && config.schedule.totalSteps == 0 &&
      total < config.schedule.warmupSteps)
    fail("the cosine schedule warms up over " +
         std::to_string(config.schedule.warmupSteps) + " steps, more than this "
         "run's " + std::to_string(total) + "; train longer or compile with "
         "fewer --warmup-steps or a --total-steps");
  // Pruning that would never happen in this run.
  if (config.prune && config.prune->start >= total)
    fail("the model was compiled with --prune-at " +
         std::to_string(config.prune->start) + ", past this run's last step " +
         std::to_string(total - 1) + " (steps count from 0): nothing would be "
         "pruned; train longer or compile with an earlier --prune-at");
  TrainPosition pos;
  pos.seed = opt.seed;
  pos.shuffle = opt.shuffle;
  std::string resumedFrom;
  if (opt.resume) {
    TrainPosition got;
    std::vector<std::pair<std::string, rt::HostTensor>> rankState;
    // A checkpoint after --prune-at's step holds the smaller plan's state.
    auto programFor = [&](int64_t step) -> rt::Program & {
      return pruned && step > config.prune->start ? *pruned : *program;
    };
    store->setMeshPosition(meshPos);
    bool found = store->resume(programFor, config, got, resumedFrom,
                               [lead](const std::string &line) {
                                 if (lead)
                                   std::fprintf(stderr, "%s\n", line.c_str());
                               },
                               rank, world.size(), &rankState);
    if (found && !rankState.empty()) {
      std::vector<std::pair<std::string, std::vector<float>>> residuals;
      for (auto &[name, t] : rankState) {
        if (t.dtype() != rt::DType::F32 || t.shape().size() != 1)
          fail("--resume: " + resumedFrom + ": per-rank state '" + name +
               "' is " + t.desc().str() + ", not f32[n]");
        residuals.emplace_back(name, std::vector<float>(t.as<float>(),
                                                        t.as<float>() + t.desc().numel()));
      }
      std::string why;
      if (!collectives.restoreResiduals(residuals, why))
        fail("--resume: " + resumedFrom + ": " + why);
    }
    if (found) {
      if (opt.seedGiven && got.seed != opt.seed)
        fail("--resume: " + resumedFrom + " was made with --seed " +
             std::to_string(got.seed) + ", this run has --seed " +
             std::to_string(opt.seed));
      if (opt.noShuffleGiven && got.shuffle)
        fail("--resume: " + resumedFrom +
             " was made with shuffling; drop --no-shuffle to resume it");
      if (got.epoch != got.step / spe || got.position != got.step % spe)
        fail("--resume: " + resumedFrom + " is at epoch " +
             std::to_string(got.epoch) + " position " +
             std::to_string(got.position) + ", but step " +
             std::to_string(got.step) + " of this data (" +
             std::to_string(data.numSamples()) + " samples, " +
             std::to_string(spe) + " steps per epoch) is epoch " +
             std::to_string(got.step / spe) + " position " +
             std::to_string(got.step % spe) + "; the data differ");
      pos = got;
      if (scaler)
        scaler->restore(pos.lossScale);
      if (pruned && pos.step > config.prune->start) {
        usePrunedPlan(); // the state is the smaller plan's
      }
    } else if (lead) {
      std::fprintf(stderr, "--resume: no checkpoint in %s yet; starting at step 0\n",
                   store->dir().c_str());
    }
  }
  const int64_t first = pos.step;

  // --tensorboard: checked (created) before the first step.
  std::unique_ptr<TensorBoardWriter> tb;
  if (!opt.tensorboard.empty() && (lead || opt.tensorboardRanks == "all"))
    tb = std::make_unique<TensorBoardWriter>(
        opt.tensorboardRanks == "all"
            ? opt.tensorboard + "/rank-" + std::to_string(rank)
            : opt.tensorboard,
        first);
  // The trained weights (histograms), of whichever plan runs.
  auto weightsOf = [](const rt::Program &p) {
    std::vector<std::string> names;
    for (const std::string &n : p.paramNames())
      if (p.paramRole(n) == "weight")
        names.push_back(n);
    return names;
  };
  std::vector<std::string> weightNames = weightsOf(*program);
  std::map<std::string, rt::HostTensor> capturedGrads;

  Logger log(first, total, globalBatch, opt.logEvery);
  log.setSilent(!lead);
  if (!opt.metrics.empty() && lead)
    log.openMetrics(opt.metrics, opt.resume);
  {
    std::string head = "kiln-train: " + config.model + ": " +
                       std::to_string(data.numSamples()) + " samples, batch " +
                       std::to_string(globalBatch) +
                       (config.dataRanks() > 1 ? " (" + std::to_string(config.dataRanks()) +
                                            " ranks x " +
                                            std::to_string(config.batchSize) + ")"
                                      : "") +
                       ", " +
                       std::to_string(spe) + " steps/epoch, " +
                       config.optimizer + " lr " + fmt("%g", config.lr);
    if (config.precision != "fp32")
      head += ", " + config.precision;
    if (scaler)
      head += config.lossScale->dynamic
                  ? ", dynamic loss scale " + fmt("%g", scaler->scale()) +
                        " (x" + fmt("%g", config.lossScale->growthFactor) +
                        " every " + std::to_string(config.lossScale->growthInterval) +
                        " clean steps)"
                  : ", loss scale " + fmt("%g", scaler->scale());
    if (!resumedFrom.empty())
      head += "; resumed from " + resumedFrom + " at step " + std::to_string(first);
    log.message(head);
    if (augmenter)
      log.message("augment: " + augmenter->describe());
    if (opt.dropNonFinite)
      log.message("data: dropped " + std::to_string(data.dropped()) + " of " +
                  std::to_string(data.arraySamples()) + " samples with NaN/Inf" +
                  (data.dropped() ? " (first: " + data.firstDropped() + ")" : ""));
    if (config.ranks() > 1) {
      // What each rank holds: ZeRO-1 keeps 1/dp of the optimizer state,
      // ZeRO-3 also of the parameters it splits.
      // Tensor parallelism: each rank's blocks of the split parameters.
      double weights = 0, state = 0, splitWeights = 0, wholeBytes = 0;
      for (const std::string &n : program->paramNames()) {
        rt::TensorDesc d;
        program->getParamDesc(n, d);
        bool opt = program->paramRole(n) == "optimizer";
        (opt ? state : weights) += (double)d.bytes();
        if (!opt && config.sharded.count(n))
          splitWeights += (double)d.bytes();
        auto sp = config.split.find(n);
        wholeBytes += sp == config.split.end()
                          ? (double)d.bytes()
                          : (double)rt::TensorDesc{d.dtype, sp->second.shape}.bytes();
      }
      auto mib = [](double b) { return fmt("%.2f", b / (1024.0 * 1024.0)); };
      std::string part = "1/" + std::to_string(config.dp);
      if (!config.split.empty())
        log.message(std::string(config.tp > 1 ? "tensor" : "expert") + " parallelism (" +
                    (config.tp > 1 ? "tp=" + std::to_string(config.tp)
                                   : "ep=" + std::to_string(config.ep)) +
                    "): this rank holds " + mib(weights + state) + " MiB of the "
                    "model's " + mib(wholeBytes) + " MiB of parameters and "
                    "optimizer state (" + std::to_string(config.split.size()) +
                    " tensors split)");
      log.message("memory per rank: parameters " + mib(weights) + " MiB" +
                  (splitWeights > 0 ? " (ZeRO-3: " + mib(splitWeights) +
                                          " MiB of it is " + part +
                                          " of the split parameters)"
                                    : "") +
                  ", optimizer state " + mib(state) + " MiB" +
                  (config.zero ? " (ZeRO-" + std::to_string(config.zero) +
                                     ": " + part + " of it)"
                               : "") +
                  ", activations and gradients (arena) " +
                  mib((double)program->arenaBytes()) + " MiB");
    }
  }
  if (first >= total)
    log.message("nothing to train: " + std::to_string(first) +
                " steps are done, --" + (opt.steps ? "steps" : "epochs") +
                " asks for " + std::to_string(total));

  std::signal(SIGINT, onSignal);
  std::signal(SIGTERM, onSignal);

  std::vector<const rt::HostTensor *> inputs(inputSource.size());
  std::vector<rt::HostTensor> outputs, snapshot;
  std::vector<std::string> paramNames = program->paramNames();
  auto positionAfter = [&](int64_t step) {
    TrainPosition p = pos;
    p.step = step;
    p.epoch = step / spe;
    p.position = step % spe;
    if (scaler)
      p.lossScale = scaler->state();
    return p;
  };
  // ZeRO and tensor parallelism: every rank's blocks of the sharded or
  // split parameters and state, gathered into whole tensors (every rank
  // takes part, in the configs' name order).
  const bool splitParams =
      !config.sharded.empty() || !config.split.empty() || config.pp > 1;
  // Every rank's block of parameter `name`, in rank order.
  auto gatherBlocks = [&](const std::string &name, rt::HostTensor &block) {
    std::string err;
    if (!program->getParam(name, block, err))
      fail(err);
    // A pipeline stage's ranks hold its parameters: they gather among
    // themselves.
    comm::Communicator &over = stageComm ? *stageComm : world;
    std::vector<char> all(block.bytes() * (size_t)over.size());
    over.allGather(block.data(), all.data(), (size_t)block.desc().numel(),
                   block.dtype())
        .wait();
    return all;
  };
  // ZeRO over dp on a mesh of several axes (dp x ep, dp x tp): a rank's
  // plan block is its dp block of the flattened tensor its position on the
  // other axes holds (the whole tensor, or its expert or tensor-parallel
  // block), so the dp group's blocks are joined first.
  const bool zeroOnMesh = !config.sharded.empty() && config.meshBeyondDp();
  auto gatherSharded = [&](std::map<std::string, std::string> *stageRoles = nullptr) {
    std::map<std::string, rt::HostTensor> whole;
    rt::HostTensor block;
    rt::TensorDesc have;
    for (const auto &[name, spec] : config.split) {
      // (A pipeline stage joins its own split parameters.)
      if (config.sharded.count(name) || !program->getParamDesc(name, have))
        continue;
      std::vector<char> all = gatherBlocks(name, block);
      whole[name] = joinBlocks(all.data(), block.bytes(), block.dtype(), spec, config);
    }
    for (const auto &[name, shape] : config.sharded) {
      if (!program->getParamDesc(name, have))
        continue; // another pipeline stage's
      std::vector<char> all = gatherBlocks(name, block);
      if (!zeroOnMesh) {
        whole[name] = wholeOf(all.data(), block.dtype(), shape);
        continue;
      }
      const size_t bb = block.bytes();
      const size_t inner = (size_t)(config.ep * config.tp);
      rt::TensorDesc localDesc{block.dtype(), shape};
      const size_t lb = localDesc.bytes();
      // (A pipeline stage's ranks: the stage's dp x ep x tp.)
      const int span = (int)config.stageRanks();
      std::vector<char> dpJoined(bb * (size_t)config.dp), locals(lb * (size_t)span);
      for (int r = 0; r < span; ++r) {
        // The ranks of r's dp group (same place on the other axes), in dp order.
        for (int64_t d = 0; d < config.dp; ++d)
          std::memcpy(dpJoined.data() + (size_t)d * bb,
                      all.data() + ((size_t)d * inner + (size_t)r % inner) * bb, bb);
        if (lb)
          std::memcpy(locals.data() + (size_t)r * lb, dpJoined.data(), lb);
      }
      auto sp = config.split.find(name);
      whole[name] = sp == config.split.end()
                        ? wholeOf(locals.data(), block.dtype(), shape)
                        : joinBlocks(locals.data(), lb, block.dtype(), sp->second, config);
    }
    // A pipeline: every stage's parameters (split and sharded ones whole),
    // from its first rank to rank 0.
    if (config.pp > 1)
      gatherStages(world, *program, config, whole, stageRoles);
    return whole;
  };
  // ZeRO checkpoints: every rank writes its shard file (CheckpointRanks).
  CheckpointRanks ckRanks;
  ckRanks.rank = rank;
  ckRanks.ranks = world.size();
  ckRanks.allGather = [&](const std::string &mine) {
    std::vector<char> all(mine.size() * (size_t)world.size());
    world.allGather(mine.data(), all.data(), mine.size(), rt::DType::U8).wait();
    std::vector<std::string> out;
    for (int r = 0; r < world.size(); ++r)
      out.emplace_back(all.data() + (size_t)r * mine.size(), mine.size());
    return out;
  };
  auto saveCheckpoint = [&](int64_t step) {
    // Each rank's own state: the compressed all-reduces' error feedback.
    ckRanks.rankState.clear();
    for (auto &[name, values] : collectives.residualState()) {
      rt::HostTensor t(rt::TensorDesc{rt::DType::F32, {(int64_t)values.size()}});
      if (!values.empty())
        std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
      ckRanks.rankState.emplace_back(name, std::move(t));
    }
    // ZeRO over a 1-axis mesh writes shard files; over several axes the
    // sharded tensors are gathered whole, as tensor parallelism's are.
    bool perRank = (!config.sharded.empty() && !zeroOnMesh) || !ckRanks.rankState.empty();
    std::map<std::string, rt::HostTensor> whole;
    // A pipeline: the other stages' parameters and their roles, on rank 0.
    std::map<std::string, std::string> stageRoles;
    if (!config.split.empty() || zeroOnMesh || config.pp > 1)
      whole = gatherSharded(&stageRoles);
    if (!perRank && !lead)
      return; // rank 0 writes every parameter whole
    std::string path = store->save(*program, config, positionAfter(step),
                                   perRank ? &ckRanks : nullptr, &whole,
                                   config.pp > 1 ? &stageRoles : nullptr);
    log.message("checkpoint: " + path);
  };

  // --profile: steps [A, B) of the run (default: the ten after its first).
  std::unique_ptr<Profiler> profiler;
  if (!opt.profile.empty()) {
    int64_t a = std::min(first + 1, std::max<int64_t>(first, total - 1));
    int64_t b = std::min(total, a + 10);
    std::string err;
    if (!opt.profileSteps.empty() && !parseProfileSteps(opt.profileSteps, a, b, err))
      fail(err);
    profiler = std::make_unique<Profiler>(opt.profile, a, b);
    // Each profiled step: its kernels, the step, its data, a few
    // collectives per bucket.
    profiler->recorder().reserve(
        (size_t)std::min<int64_t>(b - a, 1 << 16) * (program->numSteps() * 2 + 16));
    program->setTrace(&profiler->recorder());
    collectives.setTrace(&profiler->recorder());
  } else if (!opt.profileSteps.empty()) {
    fail("--profile-steps needs --profile FILE.json");
  }

  // Fault injection for the tests: KILN_FAULT_STALL=R:S makes rank R stop
  // before step S as if stuck in compute (the others' collectives then time
  // out and name it).
  int64_t stallRank = -1, stallStep = -1;
  if (const char *f = std::getenv("KILN_FAULT_STALL")) {
    long long r = -1, st = -1;
    char extra = 0;
    if (std::sscanf(f, "%lld:%lld%c", &r, &st, &extra) != 2 || r < 0 || st < 0)
      fail("KILN_FAULT_STALL needs RANK:STEP, got '" + std::string(f) + "'");
    stallRank = r;
    stallStep = st;
  }
  // KILN_FAULT_SLOW=S:MS makes step S take MS milliseconds longer (the
  // step-time alert's test).
  int64_t slowStep = -1, slowMs = 0;
  if (const char *f = std::getenv("KILN_FAULT_SLOW")) {
    long long st = -1, ms = -1;
    char extra = 0;
    if (std::sscanf(f, "%lld:%lld%c", &st, &ms, &extra) != 2 || st < 0 || ms < 0)
      fail("KILN_FAULT_SLOW needs STEP:MS, got '" + std::string(f) + "'");
    slowStep = st;
    slowMs = ms;
  }

  std::optional<LoaderStats> loaderStats;
  if (first < total) {
    LoaderOptions loader;
    loader.threads = (int)opt.loaderThreads;
    if (augmenter) {
      // A function of (seed, epoch, sample) alone: any rank count, thread
      // count or resume sees the same augmented samples. Mixing partners are
      // positions [0, N) of the kept samples, read raw.
      FetchSample fetch = [&data](size_t input, uint64_t sample, void *dst) {
        data.copySample(input, data.sampleId(sample), dst);
      };
      loader.hook = [&augmenter, fetch, seed = pos.seed](
                        std::vector<rt::HostTensor> &batch, int64_t b,
                        uint64_t sampleId, uint64_t epoch) {
        augmenter->apply(batch, b, sampleId, seed, epoch, fetch);
      };
    }
    Prefetcher prefetch(data, pos.seed, pos.shuffle, first, total, loader);
    double commSentBefore =
        hierarchical ? (double)hierarchical->stats().bytesSent : 0.0;
    auto last = std::chrono::steady_clock::now();
    for (int64_t s = first; s < total; ++s) {
      if (stallRank == rank && stallStep == s)
        while (true)
          std::this_thread::sleep_for(std::chrono::seconds(1));
      if (profiler)
        profiler->beginStep(s);
      if (s == slowStep)
        std::this_thread::sleep_for(std::chrono::milliseconds(slowMs));
      auto dataStart = rt::TraceRecorder::Clock::now();
      const std::vector<rt::HostTensor> &batch = prefetch.get(s);
      if (profiler)
        profiler->host("data (batch " + std::to_string(s) + ")", "data",
                       dataStart, rt::TraceRecorder::Clock::now());
      for (size_t k = 0; k < inputSource.size(); ++k)
        inputs[k] = inputSource[k] == -1   ? &lrT
                    : inputSource[k] == -2 ? &stepT
                    : inputSource[k] == -3 ? &scaleT
                                           : &batch[inputSource[k]];
      double lr = config.learningRate(s, total);
      *lrT.as<float>() = (float)lr;
      // The optimizer's own step count (Adam's bias correction): skipped
      // steps do not count, as optimizer.step() did not run for them.
      int64_t skippedSoFar = scaler ? scaler->state().skipped : pos.lossScale.skipped;
      *stepT.as<int64_t>() = s + 1 - skippedSoFar;
      if (scaler)
        *scaleT.as<float>() = scaler->scale();
      program->setStep((uint64_t)s);
      program->setSeed(pos.seed);
      if (opt.debugNan) {
        snapshot.resize(paramNames.size());
        for (size_t k = 0; k < paramNames.size(); ++k)
          if (!program->getParam(paramNames[k], snapshot[k], err))
            fail(err);
      }
      const bool histograms =
          tb && opt.histogramEvery && (s + 1) % opt.histogramEvery == 0;
      if (histograms)
        program->captureGradients(&capturedGrads);
      if (!program->run(inputs, outputs, err))
        fail("step " + std::to_string(s) + ": " + err);
      // A pipeline stage's sends of this step, all received.
      if (config.pp > 1)
        collectives.flushSends();
      double loss = scalarValue(outputs[lossOut]);
      StepRecord rec;
      rec.step = s;
      rec.epoch = s / spe;
      rec.loss = loss;
      rec.lr = lr;
      if (gradNormOut >= 0)
        rec.gradNorm = scalarValue(outputs[gradNormOut]);
      auto now = std::chrono::steady_clock::now();
      rec.stepMs = std::chrono::duration<double, std::milli>(now - last).count();
      last = now;
      rec.time = std::chrono::duration<double>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
      {
        SystemSample sys = monitor.sample();
        rec.rssBytes = sys.rssBytes;
        rec.peakBytes = sys.peakBytes;
        rec.cpuUtil = sys.cpuUtil;
        if (hierarchical) {
          double sent = (double)hierarchical->stats().bytesSent;
          rec.commMB = (sent - commSentBefore) / 1e6;
          commSentBefore = sent;
        }
      }

      if (scaler) {
        // The plan skipped the update where the gradients' sum of squares
        // is not finite; grad_norm is its square root.
        bool finite = rec.gradNorm && std::isfinite(*rec.gradNorm);
        rec.lossScale = scaler->scale();
        rec.skipped = !finite;
        scaler->update(finite);
        if (scaler->collapsed()) {
          log.step(rec);
          std::string what =
              "step " + std::to_string(s) + ": the loss scale fell to " +
              fmt("%g", scaler->scale()) + ", below its minimum " +
              fmt("%g", config.lossScale->min) + ", after " +
              std::to_string(scaler->state().skippedInARow) +
              " skipped steps in a row: the gradients are not finite at any "
              "scale";
          std::string where;
          // The skipped step left the parameters as they were: the rerun
          // is the step exactly.
          if (!program->findNonFinite(inputs, where, err))
            fail(what + " (the rerun looking for the first non-finite value "
                        "failed: " + err + ")");
          fail(what + (where.empty() ? "" : "; first non-finite value: " + where));
        }
      }

      {
        AlertInput ai;
        ai.step = s;
        ai.loss = loss;
        ai.gradNorm = rec.gradNorm;
        ai.skipped = rec.skipped;
        ai.stopping = !std::isfinite(loss) && !scaler;
        ai.stepMs = rec.stepMs;
        ai.rssBytes = rec.rssBytes;
        ai.limitBytes = monitor.limitBytes();
        for (const std::string &line : alerts.check(ai, &rec.alerts))
          log.warning(line);
      }

      if (!std::isfinite(loss) && !scaler) {
        log.step(rec);
        std::string what = "step " + std::to_string(s) + ": loss is " +
                           (std::isnan(loss) ? "NaN" : "infinite");
        bool exact = opt.debugNan;
        if (exact)
          for (size_t k = 0; k < paramNames.size(); ++k)
            if (!program->setParam(paramNames[k], snapshot[k], err))
              fail(what + " (" + err + ")");
        bool poisoned = !exact && anyNonFinite(*program);
        std::string where;
        if (!program->findNonFinite(inputs, where, err))
          fail(what + " (the rerun looking for the first non-finite value "
                      "failed: " + err + ")");
        if (where.empty())
          fail(what + "; the rerun found no non-finite output");
        fail(what + "; first non-finite value: " + where +
             (poisoned ? " (rerun with the parameters after this step's update; "
                         "--debug-nan reruns the step exactly)"
                       : ""));
      }

      if (tb) {
        // Every step's scalars; flushed with each log line (and the last).
        double t = rec.time;
        tb->scalar("loss", s, rec.loss, t);
        tb->scalar("lr", s, rec.lr, t);
        if (rec.gradNorm)
          tb->scalar("grad_norm", s, *rec.gradNorm, t);
        if (rec.lossScale)
          tb->scalar("loss_scale", s, *rec.lossScale, t);
        if (rec.stepMs > 0)
          tb->scalar("throughput/samples_per_s", s,
                     (double)globalBatch * 1e3 / rec.stepMs, t);
        tb->scalar("time/step_ms", s, rec.stepMs, t);
        tb->scalar("memory/rss_mib", s, rec.rssBytes / 1048576.0, t);
        tb->scalar("memory/peak_mib", s, rec.peakBytes / 1048576.0, t);
        tb->scalar("memory/arena_mib", s,
                   (double)program->arenaBytes() / 1048576.0, t);
        tb->scalar("system/cpu_util", s, rec.cpuUtil, t);
        if (rec.commMB)
          tb->scalar("comm/mb_per_step", s, *rec.commMB, t);
        if (histograms) {
          for (const std::string &n : weightNames) {
            rt::HostTensor p;
            if (!program->getParam(n, p, err))
              fail(err);
            tb->histogram("params/" + n, s, p, t);
            auto g = capturedGrads.find(n);
            if (g != capturedGrads.end())
              tb->histogram("grads/" + n, s, g->second, t);
          }
          capturedGrads.clear();
        }
      }

      if (pruned && s == config.prune->start) {
        // Step S chose the channels (the masks): the run goes on with the
        // smaller plan, its state gathered at the kept channels.
        auto count = [](const rt::Program &p) {
          int64_t n = 0;
          for (const std::string &name : p.paramNames()) {
            rt::TensorDesc d;
            if (p.paramRole(name) != "optimizer" && p.getParamDesc(name, d))
              n += d.numel();
          }
          return n;
        };
        int64_t before = count(*program), after = count(*pruned);
        size_t arenaBefore = program->arenaBytes();
        size_t cut = moveToPrunedPlan(*program, *pruned, *config.prune);
        if (profiler)
          pruned->setTrace(&profiler->recorder());
        usePrunedPlan();
        inputs.assign(inputSource.size(), nullptr);
        paramNames = program->paramNames();
        weightNames = weightsOf(*program);
        log.message("--prune-at " + std::to_string(s) +
                    ": pruned the channels after step " + std::to_string(s + 1) +
                    "/" + std::to_string(total) +
                    "; the run goes on with the smaller plan: parameters " +
                    std::to_string(before) + " -> " + std::to_string(after) +
                    ", activations and gradients (arena) " +
                    fmt("%.2f", arenaBefore / 1048576.0) + " -> " +
                    fmt("%.2f", program->arenaBytes() / 1048576.0) + " MiB (" +
                    std::to_string(cut) + " tensors cut)");
      }

      bool more = s + 1 < total;
      bool evalNow = !opt.evalData.empty() && opt.evalEvery &&
                     (s + 1) % opt.evalEvery == 0 && more;
      std::map<std::string, rt::HostTensor> wholeNow;
      if (evalNow && splitParams)
        wholeNow = gatherSharded(); // every rank: the evaluator is rank 0's
      if (evaluator && evalNow) {
        auto t0 = rt::TraceRecorder::Clock::now();
        EvalResult r = evaluator->run(*program, s, &wholeNow);
        if (profiler)
          profiler->host("eval (step " + std::to_string(s + 1) + ")", "eval", t0,
                         rt::TraceRecorder::Clock::now());
        rec.evalLoss = r.loss;
        rec.evalAccuracy = r.accuracy;
        if (tb) {
          tb->scalar("eval/loss", s, r.loss, rec.time);
          if (r.accuracy)
            tb->scalar("eval/accuracy", s, *r.accuracy, rec.time);
        }
        log.step(rec);
        log.message("eval (step " + std::to_string(s + 1) + "): " + evalLine(r));
      } else {
        log.step(rec);
      }
      if (tb) {
        int64_t every = opt.logEvery ? opt.logEvery : 100;
        if ((s + 1) % every == 0 || s == first || !more)
          tb->flush();
      }
      if (store && opt.checkpointEvery && (s + 1) % opt.checkpointEvery == 0 &&
          more) {
        auto t0 = rt::TraceRecorder::Clock::now();
        saveCheckpoint(s + 1);
        if (profiler)
          profiler->host("checkpoint (step " + std::to_string(s + 1) + ")",
                         "checkpoint", t0, rt::TraceRecorder::Clock::now());
      }
      if (profiler)
        profiler->endStep(s);
      // A signal stops every rank after the same step: the ranks agree on
      // it (a rank that went on alone would wait for the others forever).
      int stopSig = gStopSignal;
      if (config.ranks() > 1)
        world.allReduce(&stopSig, &stopSig, 1, rt::DType::I32, comm::ReduceOp::Max)
            .wait();
      if (stopSig) {
        int sig = stopSig;
        std::string msg = std::string(sig == SIGINT ? "interrupted" : "terminated") +
                          " after step " + std::to_string(s + 1) + "/" +
                          std::to_string(total);
        if (store && more) {
          saveCheckpoint(s + 1);
          msg += "; --resume continues from it";
        }
        log.message(msg);
        if (more)
          return 128 + sig;
      }
      // Time spent on evals and checkpoints is no step's.
      last = std::chrono::steady_clock::now();
    }
    loaderStats = prefetch.stats();
    if (store)
      saveCheckpoint(total);
  }

  std::map<std::string, rt::HostTensor> wholeEnd;
  if ((!opt.exportOnnx.empty() || !opt.evalData.empty()) && splitParams)
    wholeEnd = gatherSharded(); // every rank: export and eval are rank 0's
  if (!opt.exportOnnx.empty() && lead) {
    // After the switch the state is the smaller model's, and so is the
    // model it is written into.
    const bool switched = !payload.then.empty() && !pruned;
    size_t n = exportOnnx(switched ? then[rt::TrainPart::Model] : payload.model,
                          *program, opt.exportOnnx, &wholeEnd,
                          config.qat ? &*config.qat : nullptr,
                          config.prune && !switched ? &*config.prune : nullptr);
    log.message("exported " + opt.exportOnnx + " (" + std::to_string(n) +
                " initializer" + (n == 1 ? "" : "s") + " updated)");
  }
  if (evaluator) {
    int64_t lastStep = std::max<int64_t>(first, total) - 1;
    EvalResult r = evaluator->run(*program, lastStep, &wholeEnd);
    log.message("eval: " + evalLine(r));
    if (tb) {
      double t = TensorBoardWriter::now();
      tb->scalar("eval/loss", lastStep, r.loss, t);
      if (r.accuracy)
        tb->scalar("eval/accuracy", lastStep, *r.accuracy, t);
    }
  }
  if (profiler) {
    try {
      for (const std::string &line : profiler->finish(world))
        log.message(line);
    } catch (const std::exception &e) {
      fail(e.what());
    }
  }
  if (hierarchical && total > first) {
    // What the plan's collectives sent, by the algorithm's count
    // (comm::CommStats): the figure --grad-compression reduces.
    comm::CommStats st = hierarchical->stats();
    double steps = double(total - first);
    log.message("communication: " + fmt("%.3f", st.bytesSent / steps / 1e6) +
                " MB sent per step by each rank (" +
                fmt("%.3f", st.interNodeBytes / steps / 1e6) +
                " MB between nodes), " +
                std::to_string((long long)(st.collectives / (total - first))) +
                " collectives per step");
  }
  if (loaderStats)
    log.message("data: " + fmt("%.0f", loaderStats->samplesPerSecond()) +
                " samples/s loaded on " + std::to_string(loaderStats->threads) +
                " thread" + (loaderStats->threads == 1 ? "" : "s") +
                ", the step waited on data " +
                fmt("%.1f", 100 * loaderStats->waitFraction()) + "% of the time");
  if (tb)
    tb->flush();
  log.finish();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string prog = argc > 0 ? argv[0] : "kiln-train";
  // An error on one rank of a data-parallel run ends the whole job at once
  // (the others would wait for it in their next collective).
  auto failed = [&](const char *what) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", prog.c_str(), what);
    comm::abortIfDistributed(1);
    return 1;
  };
  try {
    return runTraining(argc, argv);
  } catch (const UserError &e) {
    return failed(e.what());
  } catch (const std::bad_alloc &) {
    return failed("out of memory");
  } catch (const std::exception &e) {
    return failed(e.what());
  }
}
