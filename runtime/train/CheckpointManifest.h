//===- CheckpointManifest.h - a checkpoint's manifest.json ------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// The manifest of DIR/step-<step>/ (docs/Training.md, "Checkpoints"), defined
// once: the writer and the strict parser below. The file is untrusted input
// (it may be damaged, hand-edited or another program's): every field is
// type-checked, integers must be JSON integers ("step": 50.5 is refused, not
// read as 50) in their range, checksums are 64 hex digits, and the parser
// never throws. runtime/fuzz/ManifestFuzzer.cpp fuzzes it.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_CHECKPOINTMANIFEST_H
#define KILN_TRAIN_CHECKPOINTMANIFEST_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::train {

/// The file of a checkpoint holding the tensors, and the manifest's name.
inline constexpr const char *kCheckpointTensors = "tensors.safetensors";
inline constexpr const char *kCheckpointManifest = "manifest.json";

struct ManifestParam {
  std::string name, role, dtype;
  /// The whole tensor's shape, also for a sharded one.
  std::vector<int64_t> shape;
  /// ZeRO: split over the ranks that wrote the checkpoint; shard file r
  /// holds block r (the flattened tensor zero-padded to a multiple of the
  /// ranks, cut into equal blocks), tensors.safetensors none of it.
  bool sharded = false;
};

/// One rank's shard file: "shard-<r>-of-<R>.safetensors".
struct ManifestShardFile {
  uint64_t bytes = 0;
  std::string sha256;
};

/// The name of rank `r`'s shard file of `ranks`.
std::string shardFileName(int64_t r, int64_t ranks);
/// Whether `name` has a shard file's form.
bool isShardFileName(const std::string &name);

struct CheckpointManifest {
  /// Where the run is: `step` steps done, at `position` of epoch `epoch`.
  int64_t step = 0, epoch = 0, position = 0;
  uint64_t seed = 0;
  bool shuffle = true;
  std::string model, modelSha256, optimizer;
  int64_t batchSize = 0, ranks = 1;
  /// Loss scaling's state (absent in the file: scale 0, counters 0): the
  /// scale, clean steps since its last change, steps skipped in all and in
  /// a row at the end.
  double lossScale = 0;
  int64_t growthTracker = 0, skipped = 0, skippedInARow = 0;
  /// Every param in plan order (weights, state, optimizer state).
  std::vector<ManifestParam> params;
  /// Size and SHA-256 of tensors.safetensors.
  uint64_t tensorsBytes = 0;
  std::string tensorsSha256;
  /// Per-rank state beyond the parameters (the gradient compression's
  /// error-feedback residuals), in each rank's shard file under
  /// "rank_state/...".
  bool rankState = false;
  /// ZeRO or per-rank state: one shard file per rank that wrote it (empty:
  /// none).
  std::vector<ManifestShardFile> shards;
};

/// Parses `text`; false with `why` (e.g. "field 'step' is not an integer",
/// naming the field) for anything but a well-formed version 1 manifest.
bool parseCheckpointManifest(std::string_view text, CheckpointManifest &out,
                             std::string &why) noexcept;

/// The manifest's JSON text (ends with a newline).
std::string writeCheckpointManifest(const CheckpointManifest &m);

} // namespace kiln::train

#endif // KILN_TRAIN_CHECKPOINTMANIFEST_H
