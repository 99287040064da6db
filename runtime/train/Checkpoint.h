//===- Checkpoint.h - saving and resuming training state --------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// DIR/step-<8-digit step>/ holds tensors.safetensors (every param: weights,
// state, optimizer state) and manifest.json (docs/Training.md,
// "Checkpoints"). A checkpoint is written to DIR/.tmp-step-<step>-<pid>/,
// each file and the directory fsynced, then renamed into place (exchanged
// with an existing one of the same step) and DIR fsynced, so a crash never
// leaves a directory --resume would load half-written. The newest K are
// kept: only this model's complete checkpoints count and are deleted;
// any other step-* directory is left alone with a warning. Resuming takes the newest checkpoint whose manifest parses and whose
// files have the recorded sizes and checksums, reporting and skipping
// damaged ones; one written for another model or batch size is an error.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_CHECKPOINT_H
#define KILN_TRAIN_CHECKPOINT_H

#include "Config.h"
#include "LossScale.h"
#include "TensorSplit.h"

#include "kiln/runtime/Runtime.h"

#include <functional>
#include <map>
#include <set>

namespace kiln::train {

/// ZeRO's block of a whole tensor: the flattened tensor zero-padded to a
/// multiple of `ranks`, block `rank` of `ranks`, as a tensor of `block`'s
/// desc (one dimension of that length).
rt::HostTensor blockOf(const rt::HostTensor &whole, const rt::TensorDesc &block,
                       int rank);
/// Elements [first, first + want.numel()) of the flattened tensor of
/// `shape` that `blocks` (equal blocks of it, zero-padded, in rank order)
/// hold, as a tensor of `want`; zeros past the tensor's end. A checkpoint
/// written by R ranks resumes on any number of them through it.
rt::HostTensor rangeOfBlocks(const std::vector<const rt::HostTensor *> &blocks,
                             const std::vector<int64_t> &shape, int64_t first,
                             const rt::TensorDesc &want);
/// The inverse: `count` blocks (every rank's, in order) concatenated and cut
/// to `shape`.
rt::HostTensor wholeOf(const void *blocks, rt::DType dtype,
                       const std::vector<int64_t> &shape);

/// Where a run is: `step` steps done (the next to run), at `position`
/// within epoch `epoch`.
struct TrainPosition {
  int64_t step = 0, epoch = 0, position = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  /// Loss scaling (LossScale.h): the scale and its counters; skipped steps
  /// also count for runs without loss scaling (0), as the optimizer's step
  /// is step - skipped.
  LossScaleState lossScale;
};

/// How the ranks of a ZeRO run write one checkpoint together: each writes
/// its own blocks of the sharded parameters (its shard file), rank 0 the
/// rest and the manifest. `allGather` gives every rank each rank's string
/// (all of one length), in rank order; it is also the barrier.
struct CheckpointRanks {
  int rank = 0, ranks = 1;
  std::function<std::vector<std::string>(const std::string &mine)> allGather;
  /// This rank's own state to keep (the gradient compression's residuals),
  /// by name; saved in its shard file as "rank_state/<name>". Every rank
  /// has some or none.
  std::vector<std::pair<std::string, rt::HostTensor>> rankState;
};

/// The prefix of per-rank state tensors in a shard file.
inline constexpr const char *kRankStatePrefix = "rank_state/";

class CheckpointStore {
public:
  /// `keep`: how many of the newest checkpoints to keep (at least 1).
  using Notify = std::function<void(const std::string &)>;
  /// `warn` receives one line per step-* directory that retention leaves
  /// alone (not this model's checkpoint), once per directory.
  CheckpointStore(std::string dir, int64_t keep, std::string modelSha256,
                  Notify warn = {});

  /// Creates DIR and checks that it is writable; throws UserError.
  void prepare() const;
  /// Writes the checkpoint of `pos` and prunes old ones; returns its path.
  /// Throws UserError (nothing is left under a step-* name on failure).
  /// ZeRO (config.sharded): every rank calls it with `ranks`; each writes
  /// its blocks of the sharded parameters into its shard file
  /// (shard-<r>-of-<R>.safetensors), rank 0 the replicated parameters and,
  /// once every shard is written, the manifest and the rename into place.
  /// Tensor parallelism (config.split): `whole` holds every split
  /// parameter whole (gathered by every rank before the call); rank 0
  /// writes those instead of its blocks, so the checkpoint holds whole
  /// tensors only and resumes on any mesh.
  /// Pipeline parallelism (config.pp): rank 0 calls it alone; `otherStages`
  /// names the parameters the other stages hold (with their roles), whose
  /// tensors `whole` holds (gatherStages), so the checkpoint holds the whole
  /// model, as a 1-rank run writes it.
  std::string save(const rt::Program &program, const Config &config,
                   const TrainPosition &pos,
                   const CheckpointRanks *ranks = nullptr,
                   const std::map<std::string, rt::HostTensor> *whole = nullptr,
                   const std::map<std::string, std::string> *otherStages =
                       nullptr) const;
  /// A pipeline stage: the whole model's parameter names (every stage's),
  /// which a checkpoint must hold exactly; the stage's program takes its
  /// own from it.
  void setModelParams(std::vector<std::string> names) {
    modelParams_ = std::move(names);
  }
  /// This rank's position on the mesh: a resume gives each split
  /// parameter (config.split) its block at it.
  void setMeshPosition(MeshPosition pos) { position_ = std::move(pos); }
  /// Restores the newest usable checkpoint into `program`. False when DIR
  /// holds no checkpoint at all; throws UserError when none is usable or one
  /// belongs to another model. `note` receives one line per skipped one.
  /// A parameter config.sharded names gets block `rank` of the whole
  /// tensor, whatever mesh wrote it: read from the whole tensor, or
  /// assembled from the shard files that hold its elements.
  /// `rankState` (if given) receives this rank's per-rank state when the
  /// checkpoint was written by as many ranks (else `note` says it was
  /// dropped).
  bool resume(rt::Program &program, const Config &config, TrainPosition &pos,
              std::string &loadedPath,
              const std::function<void(const std::string &)> &note,
              int rank = 0, int ranks = 1,
              std::vector<std::pair<std::string, rt::HostTensor>> *rankState =
                  nullptr) const;

  /// The same, restoring into the program `programFor` gives for the
  /// checkpoint's step (the number of steps done): a run that switches to
  /// a smaller plan after a step resumes later checkpoints into it.
  bool resume(const std::function<rt::Program &(int64_t step)> &programFor,
              const Config &config, TrainPosition &pos,
              std::string &loadedPath,
              const std::function<void(const std::string &)> &note,
              int rank = 0, int ranks = 1,
              std::vector<std::pair<std::string, rt::HostTensor>> *rankState =
                  nullptr) const;
  const std::string &dir() const { return dir_; }
  /// "DIR/step-00000100"
  std::string pathFor(int64_t step) const;

private:
  std::string dir_;
  MeshPosition position_;
  std::vector<std::string> modelParams_;
  int64_t keep_;
  std::string modelSha_;
  Notify warn_;
  mutable std::set<std::string> warned_;

  /// Whether PATH is a checkpoint of this model as kiln writes it: only
  /// manifest.json and tensors.safetensors, the manifest parses and names
  /// this model. Else false with `why`. With `damagedIsOwn`, one holding
  /// only those files whose manifest is missing or does not parse counts too.
  bool isOwnCheckpoint(const std::string &path, std::string &why,
                       bool damagedIsOwn = false) const;
  /// Removes the two files of one of this model's checkpoints and the
  /// directory (warning if it is not empty then).
  void removeCheckpoint(const std::string &path) const;
  void warnOnce(const std::string &path, const std::string &line) const;
};

} // namespace kiln::train

#endif // KILN_TRAIN_CHECKPOINT_H
