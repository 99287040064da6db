//===- TensorSplit.h - tensor parallelism's blocks of a tensor ---*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// A tensor split over mesh axes (the config's `mesh.split`, SplitSpec) is
// held as one block per rank: dimension d cut into as many equal parts as
// its axes have ranks together, this rank's part at the linear index of its
// positions on those axes (the first axis outermost). The compiler writes
// the plan's initial blocks in the same order (ExportPlan's
// splitIntoBlocks). Checkpoints, evaluation and the export see the whole
// tensor: joinBlocks assembles it from every rank's block, and
// blockOfWhole cuts a rank's block out of it (a resume on any mesh).
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_TENSORSPLIT_H
#define KILN_TRAIN_TENSORSPLIT_H

#include "Config.h"

#include "kiln/runtime/Runtime.h"

#include <vector>

namespace kiln::train {

using MeshPosition = std::vector<rt::Program::MeshAxisPosition>;

/// The position of world rank `rank` on the mesh dp x tp (tp fastest, as
/// the compiler's grid: rank = dp index x tp + tp index).
MeshPosition meshPositionOf(const Config &config, int rank);

/// The block of `whole` (of `spec`'s shape) that the rank at `pos` holds.
/// Throws UserError when `whole` is not of the spec's shape or an axis is
/// missing from `pos`.
rt::HostTensor blockOfWhole(const rt::HostTensor &whole, const SplitSpec &spec,
                            const MeshPosition &pos);

/// The whole tensor from every world rank's block, `blocks` holding them
/// one after the other in rank order (each `blockBytes`, as an all-gather
/// over the world leaves them).
rt::HostTensor joinBlocks(const void *blocks, size_t blockBytes, rt::DType dtype,
                          const SplitSpec &spec, const Config &config);

} // namespace kiln::train

#endif // KILN_TRAIN_TENSORSPLIT_H
