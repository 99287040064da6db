//===- PruneChannels.h - channels pruned during a run -----------*- C++ -*-===//
// SPDX-License-Identifier: Apache-2.0
//
// --prune l1-channel=R --prune-at S (docs/Compression.md): until step S the
// run trains the full plan, whose channel masks (the config's
// prune.channels) step S sets; then it continues on the smaller plan the
// payload carries ("then"), each parameter and optimizer state gathered
// from the full plan's at the kept channels. The same kept channels cut
// the exported model's initializers.
//===----------------------------------------------------------------------===//
#ifndef KILN_TRAIN_PRUNECHANNELS_H
#define KILN_TRAIN_PRUNECHANNELS_H

#include "Config.h"

#include "kiln/runtime/Runtime.h"
#include "kiln/runtime/SliceTensor.h"

#include <map>
#include <string>

namespace kiln::train {

/// The channels each parameter of the classes keeps, along each pruned
/// axis (ascending), from the masks in `program` (1 = pruned). A class
/// whose mask prunes nothing (before step S) is left out. Throws UserError
/// prefixed by `where` on a mask of the wrong type.
std::map<std::string, KeptIndices>
keptChannels(const rt::Program &program, const PruneConfig &prune,
             const std::string &where);

/// Sets every parameter of `to` (the smaller plan) from the same-named one
/// of `from` (the full plan after step S): as it is where the shapes
/// agree, else gathered at the kept channels of the parameter or, for
/// optimizer state ("P/exp_avg"), of the parameter it belongs to. Throws
/// UserError naming a parameter `from` lacks or whose cut does not give
/// the smaller plan's shape. Returns the number of tensors cut.
size_t moveToPrunedPlan(const rt::Program &from, rt::Program &to,
                        const PruneConfig &prune);

} // namespace kiln::train

#endif // KILN_TRAIN_PRUNECHANNELS_H
