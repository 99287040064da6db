//===- Config.h - the training config in the payload ------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The JSON kiln-compile writes next to the plan (docs/PlanFormat.md, "The
// training config"): batch size, loss, the data inputs with their per-sample
// shapes, the optimizer and the learning-rate schedule. Its keys, types and
// defaults are the table in kiln/runtime/TrainConfig.h.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_CONFIG_H
#define KILN_TRAIN_CONFIG_H

#include "kiln/runtime/DType.h"
#include "kiln/runtime/TrainConfig.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::train {

/// One plan input the loader feeds: the plan input's shape is
/// [batch_size] + sampleShape.
struct DataSpec {
  std::string name;
  rt::DType dtype = rt::DType::F32;
  std::vector<int64_t> sampleShape;
};

/// The default of a string field of the config.
inline const char *defaultString(rt::TrainConfigKey k) {
  return rt::trainConfigField(k).dflt.string;
}

struct Schedule {
  // constant | linear-warmup | cosine
  std::string kind = defaultString(rt::TrainConfigKey::ScheduleKind);
  int64_t warmupSteps = 0;
  int64_t totalSteps = 0; // 0: the run's total
  double minLr = 0;
};

/// Loss scaling (the config's `loss_scale`; docs/MixedPrecision.md): the
/// trainer feeds `scale` to the plan input `input` and updates it as
/// torch.cuda.amp.GradScaler does.
struct LossScaleConfig {
  bool dynamic = true; // false: static, always `init`
  double init = 65536.0, growthFactor = 2.0, backoffFactor = 0.5, min = 1.0;
  int64_t growthInterval = 2000;
  std::string input = defaultString(rt::TrainConfigKey::LossScaleInput);
};

/// Magnitude pruning (the config's `prune`; docs/Compression.md): the
/// plan prunes; the trainer checks the schedule against the run's length.
struct PruneChannelClass {
  std::string mask;  // state parameter [count], 1 = pruned; empty: parts
  int64_t count = 0;
  /// A concat's result: the earlier classes side by side (-1: a part that
  /// is not pruned) and each part's channels.
  std::vector<int64_t> parts, partChannels;
  std::vector<std::string> params;
  std::vector<int64_t> axes, blocks;
};
struct PruneConfig {
  std::string kind = "magnitude"; // magnitude | l1-channel
  double sparsity = 0;
  int64_t start = 0, end = 0, every = 1;
  std::vector<PruneChannelClass> channels; // l1-channel
};

/// Quantization-aware training (the config's `qat`; docs/Compression.md):
/// the plan fake-quantizes; --export-onnx writes QDQ at each site.
struct QatSite {
  int64_t node = 0;      // the node's index in the model's graph
  std::string name;      // its name (or the importer's for it)
  std::string weight;    // the weight initializer
  int64_t axis = 0;      // the weight's output-channel axis
  std::string observer;  // the activation observer's state parameter
};
struct QatConfig {
  std::optional<int64_t> freeze; // batches observed; none: never fixed
  double averaging = 0.01;
  std::vector<QatSite> sites;
};

/// How tensor parallelism splits one tensor: its whole shape and, per
/// dimension, the mesh axes splitting it, outermost first (none: whole).
struct SplitSpec {
  std::vector<int64_t> shape;
  std::vector<std::vector<std::string>> dims;
  /// The shape the plan splits (dims are its), the same elements as
  /// `shape`; empty: `shape`.
  std::vector<int64_t> view;
  const std::vector<int64_t> &planShape() const { return view.empty() ? shape : view; }
};

struct Config {
  std::string model;        // the ONNX file's name (informative)
  std::string modelSha256;  // identity of the model, for checkpoints
  int64_t batchSize = 0;   // per rank: axis 0 of the plan's data inputs
  int64_t dp = 1;          // ranks on the data-parallel mesh axis
  int64_t zero = 0;        // ZeRO stage
  /// ZeRO: parameters each rank holds one block of, by name, with the whole
  /// tensor's shape. The plan's parameter is block `rank` of the flattened
  /// tensor zero-padded to a multiple of dp.
  std::map<std::string, std::vector<int64_t>> sharded;
  int64_t tp = 1;          // ranks on the tensor-parallel axis (inside dp)
  /// Tensor parallelism: parameters (and optimizer state) each rank holds
  /// a block of, by name (the plan's parameter is the block; TensorSplit.h).
  std::map<std::string, SplitSpec> split;
  int64_t ep = 1;          // ranks on the expert-parallel axis (inside dp)
  /// Pipeline stages, the outermost axis (pp x dp x ep x tp ranks): each
  /// stage's ranks run their own plan of the payload's pipeline plans.
  int64_t pp = 1;
  /// Microbatches per step (informative: the plan has them).
  int64_t microbatches = 1;
  /// All ranks: pp x dp x ep x tp (ep and tp not both above 1).
  int64_t ranks() const { return pp * dp * ep * tp; }
  /// The ranks of one pipeline stage: dp x ep x tp.
  int64_t stageRanks() const { return dp * ep * tp; }
  /// The ranks that read different samples: dp x ep (the batch is split
  /// over both; a tp group reads the same samples).
  int64_t dataRanks() const { return dp * ep; }
  /// The mesh has axes besides dp (ep, tp, pp): ZeRO's blocks are then dp
  /// blocks of each rank's split block (or of the whole tensor), gathered
  /// over a stage's ranks, and checkpoints hold whole tensors instead of
  /// ZeRO's shard files.
  bool meshBeyondDp() const { return stageRanks() != dp || pp > 1; }
  std::string loss;         // cross-entropy | mse | output
  std::string logits, labels;
  std::optional<int64_t> numClasses, ignoreIndex;
  /// Cross-entropy against float probability rows of the logits' shape
  /// (kiln-compile --soft-labels) instead of class indices.
  bool softLabels = false;
  std::optional<PruneConfig> prune;
  std::optional<QatConfig> qat;
  std::vector<DataSpec> data;
  std::string optimizer = defaultString(rt::TrainConfigKey::OptimizerName);
  double lr = rt::trainConfigField(rt::TrainConfigKey::OptimizerLr).dflt.number;
  Schedule schedule;
  std::string lrInput = defaultString(rt::TrainConfigKey::LrInput),
              stepInput = defaultString(rt::TrainConfigKey::StepInput);
  std::string precision = defaultString(rt::TrainConfigKey::Precision);
  std::optional<LossScaleConfig> lossScale;

  /// The spec of data input `name`; null when there is none.
  const DataSpec *findData(const std::string &name) const;
  /// The learning rate of step `step` (0-based) of a run of `runSteps`.
  double learningRate(int64_t step, int64_t runSteps) const;
};

/// Parses and checks the config; throws UserError ("payload config: ...").
Config parseConfig(std::string_view text);

} // namespace kiln::train

#endif // KILN_TRAIN_CONFIG_H
