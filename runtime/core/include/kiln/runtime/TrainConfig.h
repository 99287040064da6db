//===- TrainConfig.h - the training config's fields -------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The fields of the training config JSON that kiln-compile writes into the
// payload and kiln-train reads (docs/PlanFormat.md, "The training config";
// runtime/schema/train-config-v1.schema.json), defined once. The writer
// (lib/Pipeline/Pipelines.cpp) and the reader (runtime/train/Config.cpp)
// take every key and default from this table, and a runtime unit test
// checks the schema against it, so a field added on one side only fails
// that test. Header-only and free of any JSON library.
//===----------------------------------------------------------------------===//
#ifndef KILN_RUNTIME_TRAINCONFIG_H
#define KILN_RUNTIME_TRAINCONFIG_H

#include <cstddef>
#include <cstdint>

namespace kiln::rt {

/// The config's format name and the version this runtime reads.
constexpr const char *kTrainConfigFormat = "kiln-train-config";
constexpr int64_t kTrainConfigVersion = 1;

/// The JSON object a field belongs to: the top level, "optimizer",
/// "schedule", "mesh", "loss_scale", "prune", "qat", each element of "data",
/// of "qat"'s "sites" or of "prune"'s "channels", each value of "mesh"'s
/// "split".
enum class TrainConfigObject {
  Top, Optimizer, Schedule, Mesh, LossScale, Prune, Qat, Data, QatSite,
  PruneChannel, MeshSplit
};
enum class JsonType { String, Integer, Number, Boolean, Array, Object };

/// X(Id, object, "key", JSON type, required, nullable, default). The default
/// is what the reader takes when the field is absent or null (a string, a
/// number or a bool; nullptr for none). Fields the runtime only reports
/// (beta1 ... clip_norm: the compiler bakes them into the plan) are listed
/// too, so the schema can refuse unknown keys.
#define KILN_TRAIN_CONFIG_FIELDS(X)                                            \
  X(Format, Top, "format", String, true, false, nullptr)                       \
  X(Version, Top, "version", Integer, true, false, nullptr)                    \
  X(Model, Top, "model", String, false, false, "model.onnx")                   \
  X(ModelSha256, Top, "model_sha256", String, false, false, "")                \
  X(BatchSize, Top, "batch_size", Integer, true, false, nullptr)               \
  X(Loss, Top, "loss", String, false, false, "")                               \
  X(Logits, Top, "logits", String, false, false, "logits")                     \
  X(Labels, Top, "labels", String, false, false, "labels")                     \
  X(NumClasses, Top, "num_classes", Integer, false, true, nullptr)             \
  X(IgnoreIndex, Top, "ignore_index", Integer, false, true, nullptr)           \
  X(SoftLabels, Top, "soft_labels", Boolean, false, false, false)              \
  X(Data, Top, "data", Array, true, false, nullptr)                            \
  X(Optimizer, Top, "optimizer", Object, false, false, nullptr)                \
  X(Schedule, Top, "schedule", Object, false, false, nullptr)                  \
  X(LrInput, Top, "lr_input", String, false, false, "kiln.lr")                 \
  X(StepInput, Top, "step_input", String, false, false, "kiln.step")           \
  X(Mesh, Top, "mesh", Object, false, false, nullptr)                          \
  X(Precision, Top, "precision", String, false, false, "fp32")                 \
  X(LossScale, Top, "loss_scale", Object, false, false, nullptr)               \
  X(Prune, Top, "prune", Object, false, false, nullptr)                        \
  X(Qat, Top, "qat", Object, false, false, nullptr)                            \
  X(DataName, Data, "name", String, true, false, nullptr)                      \
  X(DataDType, Data, "dtype", String, true, false, nullptr)                    \
  X(DataSampleShape, Data, "sample_shape", Array, true, false, nullptr)        \
  X(OptimizerName, Optimizer, "name", String, false, false, "sgd")             \
  X(OptimizerLr, Optimizer, "lr", Number, false, false, 0.01)                  \
  X(OptimizerBeta1, Optimizer, "beta1", Number, false, false, nullptr)         \
  X(OptimizerBeta2, Optimizer, "beta2", Number, false, false, nullptr)         \
  X(OptimizerEps, Optimizer, "eps", Number, false, false, nullptr)             \
  X(OptimizerWeightDecay, Optimizer, "weight_decay", Number, false, false,     \
    nullptr)                                                                   \
  X(OptimizerMomentum, Optimizer, "momentum", Number, false, false, nullptr)   \
  X(OptimizerNesterov, Optimizer, "nesterov", Boolean, false, false, nullptr)  \
  X(OptimizerClipNorm, Optimizer, "clip_norm", Number, false, false, nullptr)  \
  X(ScheduleKind, Schedule, "kind", String, false, false, "constant")          \
  X(ScheduleWarmupSteps, Schedule, "warmup_steps", Integer, false, false, 0)   \
  X(ScheduleTotalSteps, Schedule, "total_steps", Integer, false, false, 0)     \
  X(ScheduleMinLr, Schedule, "min_lr", Number, false, false, 0.0)              \
  X(MeshDp, Mesh, "dp", Integer, false, false, 1)                              \
  X(MeshZero, Mesh, "zero", Integer, false, false, 0)                          \
  X(MeshSharded, Mesh, "sharded", Object, false, false, nullptr)               \
  X(MeshTp, Mesh, "tp", Integer, false, false, 1)                              \
  X(MeshEp, Mesh, "ep", Integer, false, false, 1)                              \
  X(MeshPp, Mesh, "pp", Integer, false, false, 1)                              \
  X(MeshMicrobatches, Mesh, "microbatches", Integer, false, false, 1)          \
  X(MeshSchedule, Mesh, "schedule", String, false, false, "1f1b")              \
  X(MeshVirtualStages, Mesh, "virtual_stages", Integer, false, false, 1)       \
  X(MeshSplit, Mesh, "split", Object, false, false, nullptr)                   \
  X(MeshSplitShape, MeshSplit, "shape", Array, true, false, nullptr)           \
  X(MeshSplitDims, MeshSplit, "dims", Array, true, false, nullptr)             \
  X(MeshSplitView, MeshSplit, "view", Array, false, false, nullptr)            \
  X(LossScaleMode, LossScale, "mode", String, false, false, "dynamic")         \
  X(LossScaleInit, LossScale, "init", Number, false, false, 65536.0)           \
  X(LossScaleGrowthFactor, LossScale, "growth_factor", Number, false, false,   \
    2.0)                                                                       \
  X(LossScaleBackoffFactor, LossScale, "backoff_factor", Number, false, false, \
    0.5)                                                                       \
  X(LossScaleGrowthInterval, LossScale, "growth_interval", Integer, false,     \
    false, 2000)                                                               \
  X(LossScaleMin, LossScale, "min", Number, false, false, 1.0)                 \
  X(LossScaleInput, LossScale, "input", String, false, false,                  \
    "kiln.loss_scale")                                                         \
  X(PruneKind, Prune, "kind", String, false, false, "magnitude")               \
  X(PruneSparsity, Prune, "sparsity", Number, false, false, 0.0)               \
  X(PruneStart, Prune, "start", Integer, false, false, 0)                      \
  X(PruneEnd, Prune, "end", Integer, false, false, 0)                          \
  X(PruneEvery, Prune, "every", Integer, false, false, 1)                      \
  X(PruneChannels, Prune, "channels", Array, false, false, nullptr)            \
  X(PruneChannelMask, PruneChannel, "mask", String, false, false, nullptr)     \
  X(PruneChannelCount, PruneChannel, "count", Integer, true, false, nullptr)   \
  X(PruneChannelParams, PruneChannel, "params", Array, true, false, nullptr)   \
  X(PruneChannelAxes, PruneChannel, "axes", Array, true, false, nullptr)       \
  X(PruneChannelBlocks, PruneChannel, "blocks", Array, true, false, nullptr)   \
  X(PruneChannelParts, PruneChannel, "parts", Array, false, false, nullptr)    \
  X(PruneChannelPartChannels, PruneChannel, "part_channels", Array, false,     \
    false, nullptr)                                                            \
  X(QatKind, Qat, "kind", String, false, false, "int8")                        \
  X(QatFreeze, Qat, "freeze", Integer, false, true, nullptr)                   \
  X(QatAveraging, Qat, "averaging", Number, false, false, 0.01)                \
  X(QatSites, Qat, "sites", Array, true, false, nullptr)                       \
  X(QatSiteNode, QatSite, "node", Integer, true, false, nullptr)               \
  X(QatSiteName, QatSite, "name", String, true, false, nullptr)                \
  X(QatSiteWeight, QatSite, "weight", String, true, false, nullptr)            \
  X(QatSiteAxis, QatSite, "axis", Integer, true, false, nullptr)               \
  X(QatSiteObserver, QatSite, "observer", String, true, false, nullptr)

enum class TrainConfigKey {
#define KILN_TRAIN_CONFIG_ENUM(ID, OBJ, KEY, TYPE, REQ, NULLABLE, DFLT) ID,
  KILN_TRAIN_CONFIG_FIELDS(KILN_TRAIN_CONFIG_ENUM)
#undef KILN_TRAIN_CONFIG_ENUM
};

/// A field's default, whichever JSON type it has.
struct TrainConfigDefault {
  bool present = false;
  JsonType type = JsonType::String;
  const char *string = nullptr;
  double number = 0;
  bool boolean = false;

  constexpr TrainConfigDefault() = default;
  constexpr TrainConfigDefault(std::nullptr_t) {}
  constexpr TrainConfigDefault(const char *s)
      : present(true), type(JsonType::String), string(s) {}
  constexpr TrainConfigDefault(double d)
      : present(true), type(JsonType::Number), number(d) {}
  constexpr TrainConfigDefault(int i)
      : present(true), type(JsonType::Integer), number(i) {}
  constexpr TrainConfigDefault(bool b)
      : present(true), type(JsonType::Boolean), boolean(b) {}
};

struct TrainConfigField {
  TrainConfigKey id;
  TrainConfigObject object;
  const char *key;
  JsonType type;
  bool required;
  bool nullable;
  TrainConfigDefault dflt;
};

/// Every field, in TrainConfigKey order.
constexpr TrainConfigField kTrainConfigFields[] = {
#define KILN_TRAIN_CONFIG_ROW(ID, OBJ, KEY, TYPE, REQ, NULLABLE, DFLT)         \
  {TrainConfigKey::ID, TrainConfigObject::OBJ, KEY, JsonType::TYPE, REQ,       \
   NULLABLE, TrainConfigDefault(DFLT)},
    KILN_TRAIN_CONFIG_FIELDS(KILN_TRAIN_CONFIG_ROW)
#undef KILN_TRAIN_CONFIG_ROW
};
constexpr size_t kNumTrainConfigFields =
    sizeof(kTrainConfigFields) / sizeof(kTrainConfigFields[0]);

constexpr const TrainConfigField &trainConfigField(TrainConfigKey k) {
  return kTrainConfigFields[size_t(k)];
}
/// The JSON key of a field ("batch_size").
constexpr const char *trainConfigKey(TrainConfigKey k) {
  return trainConfigField(k).key;
}
/// The JSON key of the object a nested field lives in ("" at the top).
constexpr const char *trainConfigObjectKey(TrainConfigObject o) {
  switch (o) {
  case TrainConfigObject::Top: return "";
  case TrainConfigObject::Optimizer: return "optimizer";
  case TrainConfigObject::Schedule: return "schedule";
  case TrainConfigObject::Mesh: return "mesh";
  case TrainConfigObject::LossScale: return "loss_scale";
  case TrainConfigObject::Prune: return "prune";
  case TrainConfigObject::Qat: return "qat";
  case TrainConfigObject::Data: return "data";
  case TrainConfigObject::QatSite: return "qat.sites";
  case TrainConfigObject::PruneChannel: return "prune.channels";
  case TrainConfigObject::MeshSplit: return "mesh.split";
  }
  return "";
}

} // namespace kiln::rt

#endif // KILN_RUNTIME_TRAINCONFIG_H
