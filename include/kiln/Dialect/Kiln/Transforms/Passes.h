//===- Passes.h - kiln training passes --------------------------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//===----------------------------------------------------------------------===//
#ifndef KILN_DIALECT_KILN_TRANSFORMS_PASSES_H
#define KILN_DIALECT_KILN_TRANSFORMS_PASSES_H

#include "kiln/Dialect/Kiln/IR/KilnAttributes.h"
#include "kiln/Dialect/Kiln/IR/KilnOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "kiln/runtime/SliceTensor.h"

#include <map>
#include <string>
#include <vector>

namespace kiln {

/// What --kiln-prune-channels reads and reports when kiln-compile runs it:
/// the parameters' values by name (raw little-endian bytes; read for the
/// L1 norms, sliced in place), and what it pruned.
struct ChannelPruning {
  std::map<std::string, std::string> *params = nullptr;
  /// Per pruned parameter: the indices kept along each pruned axis.
  std::map<std::string, KeptIndices> kept;
  /// Per pruned class, named by its first producer weight: channels before
  /// and after.
  struct Layer {
    std::string weight;
    int64_t before, after;
  };
  std::vector<Layer> layers;
  int64_t paramsBefore = 0, paramsAfter = 0;
  /// Lines to show the user (a layer that would lose every channel).
  std::vector<std::string> warnings;
};

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "kiln/Dialect/Kiln/Transforms/Passes.h.inc"

struct KilnPruneChannelsPassOptions;
/// --kiln-prune-channels reading the values and reporting into `io`.
std::unique_ptr<mlir::Pass>
createKilnPruneChannelsPass(const KilnPruneChannelsPassOptions &options,
                            ChannelPruning *io);
} // namespace kiln

#endif // KILN_DIALECT_KILN_TRANSFORMS_PASSES_H
